/* run.h - executing resolved runs: spec, launch, serve, record, judge.
 *
 * For one run the harness
 *   1. inserts the run (status 'running') and writes its spec file (every
 *      setting plus _run_id, _records, _rendezvous, _t0, _nprocs) into a
 *      private temp dir;
 *   2. binds the records PULL socket (and, for transport zmq, the
 *      rendezvous server) and launches the ranks (launch.h);
 *   3. polls records + rendezvous + child exits every 100 ms, committing
 *      rows in batches (recorder.h);
 *   4. judges: ok when every rank sent DONE ok and exited 0; failed, with
 *      the first cause as the one-line error, when a rank exits non-zero
 *      or by a signal ("rank 1 (worker, host, pid 123): killed by signal
 *      9"), reports an error in DONE (its own message), or when no record
 *      arrives from any rank for deadline + 30 s.  On failure the rest of
 *      the run is stopped (SIGTERM, SIGKILL 2 s later) and reaped.
 *
 * SIGINT/SIGTERM on the harness stop the run the same way, mark it failed
 * "interrupted" and make sg_run_execute() return SG_EINTERRUPTED.
 */
#ifndef SG_RUN_H
#define SG_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "progress.h"
#include "recorder.h"

typedef struct sg_run_env {
  sg_recorder_t *db;
  int64_t exp_id;
  sg_progress_t *progress; /* NULL: nothing shown */
  int verbose;             /* print launch command lines */
  const char *rank_bin;    /* sgdlab-rank; NULL = sg_launch_find_rank_bin() */
} sg_run_env_t;

typedef struct sg_run_result {
  int64_t run_id;
  int ok;            /* status 'ok' */
  char error[512];   /* the one-line reason when failed */
  double wall_s;
  double final_acc;  /* last test_acc received; NaN when none */
} sg_run_result_t;

/* Execute run `index` of `nruns` (for progress).  Returns 0 when the run
 * was carried out (res->ok tells how it ended), SG_EINTERRUPTED when the
 * harness was interrupted, another negative code when the harness itself
 * failed (database, temp dir, launch). */
int sg_run_execute(const sg_run_env_t *env, const sg_run_spec_t *run, size_t index,
                   size_t nruns, sg_run_result_t *res);

/* Install the SIGINT/SIGTERM handlers sg_run_execute() watches. */
void sg_run_install_signals(void);

#endif
