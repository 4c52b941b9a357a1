/* run.h - executing resolved runs: spec, launch, serve, record, judge
 * (the code: harness/run/, one file per job, see run/internal/run_impl.h).
 *
 * For one run the harness
 *   1. inserts the run (status 'running') and writes its spec file (every
 *      setting plus _run_id, _records, _rendezvous, _t0, _nprocs) into a
 *      private temp dir;
 *   2. opens the records server (core/records_server.h; and, for transport zmq, the
 *      rendezvous server) and launches the ranks (launch.h);
 *   3. polls records + rendezvous + child exits every 100 ms, committing
 *      rows in batches (recorder.h);
 *   4. judges: ok when every rank sent DONE ok and exited 0; failed, with
 *      the first cause as the one-line error, when a rank exits non-zero
 *      or by a signal ("rank 1 (worker, host, pid 123): killed by signal
 *      9"), reports an error in DONE (its own message), or when no record
 *      arrives from any rank for deadline + 30 s.  The first cause wins:
 *      a rank that noticed a silent peer reports it in DONE before the
 *      harness stops anything, and what the harness does while stopping
 *      (SIGTERM) is never the reason.  Deadlines cascade (rank 0 waits on
 *      rank 2, which waits on the silent rank 1, and may time out first),
 *      so for 0.5 s after a rank's failure the others' are collected and
 *      the blame is followed (0 -> 2 -> 1) by the blamed-rank field of
 *      each failed DONE (err.h, sg_err_blame; docs/faults.md): the reason
 *      is rank 2's message, naming rank 1, and run_info blame.rank /
 *      blame.reason keep whom it blames and why.  On failure the rest of the run is
 *      stopped (SIGTERM, SIGKILL 2 s later; a stopped process SIGKILL at
 *      once) and reaped.
 *
 * Deaths an engine tolerates (sg_engine_t.tolerates_exit, e.g. a worker of
 * async ps): under the local launcher such a rank may be killed or exit
 * non-zero without an error in DONE; the harness then records run_info
 * dead_rank.R = "rank R (role, host, pid P): killed by signal 9 (Killed)"
 * (and says so on stderr with -v), leaves the other ranks running, and the
 * run is ok when every other rank finishes ok.  Under mpirun this cannot
 * be honored: Open MPI aborts the whole job when one process dies.
 *
 * Under mpirun the ranks are not the harness's children.  mpirun's stderr
 * (Open MPI's banners and the ranks' stderr) goes into a pipe the harness
 * reads: Open MPI's notice of the process that ended the job ("mpirun
 * noticed that process rank 2 ... exited on signal 9", or "Process name:
 * [[..],2]" with "Exit code:") names the rank, and the HELLO records give
 * its host and pid; a rank of this host found dead in /proc without DONE
 * waits up to 3 s for that notice.  The text is forwarded to stderr only
 * with -v, and the last 8 KiB are kept as run_info mpirun_stderr when the
 * run fails.  A failed run under mpirun first gets 3 s for mpirun to abort
 * the job itself (it reaches ranks on other hosts), then the signals above.
 *
 * A stopped process (SIGSTOP, state T in /proc) never ends by itself:
 * the harness reads the process state of the ranks of this host it
 * started (local: its children; mpirun: a HELLO pid that descends from
 * its mpirun) every 0.25 s, and a rank stopped for 1.5 x deadline fails
 * the run ("rank 2 (worker, vm, pid 4242) is stopped (state T) for 7.6 s
 * (1.5 x deadline 5 s)"): the case of a worker that async ps declared
 * dead and trains on without.  When a run fails because a rank timed out
 * waiting on a peer, or the watchdog fired, the process that caused it is
 * named first if one of this host was stopped or dead at that moment:
 *   "rank 2 (worker, vm, pid 4242) is stopped (state T); rank 0 (server,
 *    vm, pid 4240): ps server 0 (rank 0): no PUSH for step 12 from ..."
 *
 * SIGINT/SIGTERM/SIGHUP on the harness stop the run the same way, mark it
 * "interrupted" (its steps so far kept) and make sg_run_execute() return
 * SG_EINTERRUPTED; sg_run_signal() says which signal (exit 128 + it).
 * A harness that dies without that (SIGKILL) takes its ranks with it
 * (launch.h: PR_SET_PDEATHSIG; core/lifeline.h: ranks under mpirun), and
 * the next sgdlab command that opens the database to write marks its run
 * failed "harness died" and removes its directory (reconcile.h).  The harness signals only processes it
 * started (launch.h, sg_launch_signal), never a pid only a record names.
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
  const int64_t *run_ids;  /* run i's planned row (sg_recorder_run_plan), 0 or NULL: insert one */
} sg_run_env_t;

typedef struct sg_run_result {
  int64_t run_id;
  int ok;            /* status 'ok' */
  char error[512];   /* the one-line reason when failed */
  double wall_s;
  double final_acc;  /* last test_acc received; NaN when none */
  int skipped;       /* the planned row was claimed by another harness first */
} sg_run_result_t;

/* Execute run `index` of `nruns` (for progress).  Returns 0 when the run
 * was carried out (res->ok tells how it ended), SG_EINTERRUPTED when the
 * harness was interrupted, another negative code when the harness itself
 * failed (database, temp dir, launch). */
int sg_run_execute(const sg_run_env_t *env, const sg_run_spec_t *run, size_t index,
                   size_t nruns, sg_run_result_t *res);

/* Install the SIGINT/SIGTERM/SIGHUP handlers sg_run_execute() watches. */
void sg_run_install_signals(void);
/* The signal that interrupted the harness, 0 when none. */
int sg_run_signal(void);

/* What `sgdlab run` and `sgdlab bench` do before their runs: record
 * experiment `x` in `db`, create the progress display (sg_progress_new's
 * `quiet`), install the signal handlers and fill *env (db, experiment id,
 * progress, verbose, rank_bin).  Caller owns *prog (sg_progress_destroy);
 * env points into db, *prog and rank_bin. */
int sg_run_begin(sg_recorder_t *db, const sg_experiment_t *x, int quiet, int verbose,
                 const char *rank_bin, sg_progress_t **prog, sg_run_env_t *env);

/* `sgdlab run` (command.c): argv[0] is "run"; exit code 0 ok, 1 a run
 * failed, 2 usage or configuration error. */
int sg_cmd_run(int argc, char **argv);

#endif
