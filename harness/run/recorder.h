/* recorder.h - the SQLite store of experiments, runs and their records.
 *
 * One database file (default results/sgdlab.db): experiments, runs, steps,
 * evals and bench
 * (column names are public: people query the file with sqlite3 and the
 * reports are SQL over it), plus
 *
 *   ranks(run_id, rank, role, host, pid,      who ran what, where
 *         cluster_host, address)              (version 3: on an emulated
 *                                             cluster, the rank's host
 *                                             "h1" and its address)
 *   (version 4: clock_offset_s, clock_unc_s,  the rank's clock offset to
 *    clock_at_s, clock_end_offset_s,          the harness's, measured at
 *    clock_end_unc_s, clock_end_at_s)         the start and the end
 *                                             (clock_sync.h); steps gain
 *                                             t_start_raw, the rank's own
 *                                             t_start, beside the corrected
 *   (version 5: kind)                         'worker' or 'hub': the
 *                                             rank's kind in its engine's
 *                                             role table (engine.h); steps
 *                                             carry it too.  Views, report
 *                                             and cost model tell hubs
 *                                             (ps servers, the mapreduce
 *                                             driver) from workers by it
 *   (version 6: buckets(run_id, rank, step,   the allreduce's gradient
 *    bucket, nbuckets, offset, floats,         buckets of sampled steps
 *    ready_s, start_s, end_s))                 (records.h, sg_bucket_rec_t)
 *   run_info(run_id, key, value)              BLAS library, workload, ...
 *                                             (one value per key: the first sent)
 *
 * and in runs (version 2) harness_pid, harness_host, harness_start (the
 * harness's process identity, sg_proc_identity) and tmp_dir (the run's
 * temp dir; run_info tmp_dir.proof proves it ours, rundir.h): a run left
 * 'running' by a harness that died is marked 'failed' ("harness died") by
 * the next open, when its directory proves it (reconcile.h).
 *
 * Times: started_at / finished_at are UTC text "YYYY-MM-DDTHH:MM:SS.SSSZ";
 * wall_s is the run's duration in seconds measured by the harness.
 *
 * Versioned with PRAGMA user_version (SG_DB_VERSION); an older file is
 * migrated in place by migrate() (version 1 -> 2 adds the runs columns
 * above, 2 -> 3 the ranks columns, 3 -> 4 the clock columns, 4 -> 5 the
 * kind columns, 5 -> 6 the buckets table; old rows keep NULL there,
 * except kind, which old rows get from the hub roles of their time,
 * views.h), a newer one is refused with a message.
 * WAL mode, so readers (sgdlab report, sqlite3) see committed rows while a
 * run goes on.  Record rows are kept in memory and written in one short
 * transaction (BEGIN IMMEDIATE .. COMMIT) when sg_recorder_tick() finds
 * SG_DB_BATCH_ROWS rows or the oldest SG_DB_BATCH_SECONDS old; run
 * begin/claim/end are committed at once.  No write transaction stays open
 * between batches, so several harnesses can record into one file: each
 * waits for the write lock in jittered naps, up to SG_DB_BUSY_SECONDS.
 *
 * Opening to write checks the path first (outfile.h): the database's
 * directory is the user's and writable by no one else, and the file and
 * its -wal, -shm and -journal, where they exist, are regular files of the
 * user (no links); anything else is refused (SG_EINVAL) before SQLite
 * opens it.  Readers (report.h: sg_rdb_open) open read-only and never
 * write.
 */
#ifndef SG_RECORDER_H
#define SG_RECORDER_H

#include <stdint.h>

#include "engine.h"
#include "records.h"

#define SG_DB_VERSION 6
#define SG_DB_BATCH_ROWS 200
#define SG_DB_BATCH_SECONDS 0.5
#define SG_DB_BUSY_SECONDS 60.0

typedef struct sg_recorder sg_recorder_t;

/* Open to write (creating the file, its directory and the schema if
 * needed, migrating an older schema; the path checked as above), then
 * reconcile the runs of dead harnesses
 * (reconcile.h).  Errors name the path.  Caller owns the result. */
int sg_recorder_open(sg_recorder_t **out, const char *path);
/* Commits what is pending.  NULL-safe; nulls the pointer. */
void sg_recorder_close(sg_recorder_t **db);

int sg_recorder_experiment(sg_recorder_t *db, const char *name,
                           const char *config_text, int64_t *exp_id);

typedef struct sg_run_row {
  const char *engine;
  const char *options_json;
  const char *transport, *launcher;
  int workers, servers, processes;
  int repeat; /* 0-based index of the repetition */
  int64_t seed;
} sg_run_row_t;

/* Insert a run with status 'running', started_at = now and this process
 * as its harness (pid, host, identity). */
int sg_recorder_run_begin(sg_recorder_t *db, int64_t exp_id,
                          const sg_run_row_t *row, int64_t *run_id);
/* Insert a run planned but not started: status 'pending', no harness.
 * Pending rows are never reconciled (no harness owns them): `sgdlab run
 * --resume` runs them later. */
int sg_recorder_run_plan(sg_recorder_t *db, int64_t exp_id, const sg_run_row_t *row,
                         int64_t *run_id);
/* Claim a run before running it, in one write transaction: a row that is
 * pending, failed or interrupted and that no harness started since this
 * one opened the database becomes 'running' with started_at now and this
 * process its harness, and the rows an earlier attempt left are removed.
 * 1 when claimed; 0 when another harness has it, or started it after this
 * one opened the database (two `run --resume` of one experiment share its
 * runs, each run once); a negative SG_E* code on error. */
int sg_recorder_run_claim(sg_recorder_t *db, int64_t run_id);
/* The latest experiment named `name` recorded with exactly `config_text`
 * (SG_ENOTFOUND, with a message, when there is none). */
int sg_recorder_find_experiment(sg_recorder_t *db, const char *name, const char *config_text,
                                int64_t *exp_id);
typedef struct sg_run_state {
  int64_t id;
  char *status, *options_json;
} sg_run_state_t;
/* Every run row of the experiment, by id.  Free with sg_recorder_rows_free. */
int sg_recorder_run_states(sg_recorder_t *db, int64_t exp_id, sg_run_state_t **rows, size_t *n);
void sg_recorder_rows_free(sg_run_state_t **rows, size_t n);
/* The run's temp dir (removed by reconciliation if the harness dies). */
int sg_recorder_run_dir(sg_recorder_t *db, int64_t run_id, const char *dir);
/* status "ok", "failed" or "interrupted"; error the one-line reason
 * (NULL when ok). */
int sg_recorder_run_end(sg_recorder_t *db, int64_t run_id, const char *status,
                        const char *error, double wall_s);

/* Row inserts (batched; call sg_recorder_tick() regularly). */
/* cluster_host and address: NULL without a cluster.  kind: the rank's
 * kind in its engine's role table (sg_engine_role_kind), stored as
 * 'worker' or 'hub'. */
int sg_recorder_rank(sg_recorder_t *db, int64_t run_id, int rank, const char *role,
                     sg_role_kind_t kind, const char *host, int pid, const char *cluster_host,
                     const char *address);
int sg_recorder_info(sg_recorder_t *db, int64_t run_id, const char *key,
                     const char *value);
/* A step row: s->t_start on the harness's clock (corrected), t_raw the
 * rank's own (NaN: NULL). */
int sg_recorder_step(sg_recorder_t *db, int64_t run_id, int rank, const char *role,
                     sg_role_kind_t kind, const sg_step_rec_t *s, double t_raw);
/* A rank's clock measurement (end 0: the start, 1: the end) into its
 * ranks row. */
int sg_recorder_clock(sg_recorder_t *db, int64_t run_id, int rank, int end, double offset_s,
                      double unc_s, double at_s);
/* Re-correct the rank's step rows so far with the offset interpolated
 * between its two measurements: t_start = t_start_raw + offset_s + slope
 * * (t_start_raw - at_s). */
int sg_recorder_clock_drift(sg_recorder_t *db, int64_t run_id, int rank, double offset_s,
                            double slope, double at_s);
int sg_recorder_eval(sg_recorder_t *db, int64_t run_id, const sg_eval_rec_t *e);
int sg_recorder_bucket(sg_recorder_t *db, int64_t run_id, int rank, const sg_bucket_rec_t *b);
int sg_recorder_bench(sg_recorder_t *db, int64_t exp_id, const sg_bench_rec_t *b);

/* Commit the open batch when it holds SG_DB_BATCH_ROWS rows or is older
 * than SG_DB_BATCH_SECONDS. */
int sg_recorder_tick(sg_recorder_t *db);
/* Commit the open batch now. */
int sg_recorder_flush(sg_recorder_t *db);

/* The sqlite3 * handle (for queries by report/show). */
void *sg_recorder_sqlite(sg_recorder_t *db);

#endif
