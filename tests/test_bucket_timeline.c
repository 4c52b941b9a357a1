/* test_bucket_timeline.c - the allreduce's gradient buckets, recorded
 * and drawn (table buckets, setting bucket_every; `sgdlab trace`).
 *
 *  - rows_order_and_times: N = 2 real processes, `model: cnn`, 21 steps,
 *    bucket_every 10, ring over zmq without overlap and with overlap in
 *    16 KiB buckets (3 a step).  The rows exist for steps 0, 10 and 20
 *    only, every rank, every bucket (bounded: nothing of the other 18
 *    steps); without overlap one bucket of the whole model; with overlap
 *    the buckets are last layer first (bucket 0 ends at the last float,
 *    each next one ends where the previous began, the last begins at 0)
 *    and each bucket's allreduce starts after backward handed it over,
 *    ends after it starts and starts after the previous bucket's ended;
 *    every bucket of an overlapped step is handed over before backward
 *    ends (ready_s <= the step's compute_s: the hook runs inside it).
 *    `sgdlab trace` of the overlap run has a bucket track per rank and
 *    one "bucket" slice and one "ready" instant per row.
 *    Then the checks are shown to catch what they are for: the bucket
 *    numbers reversed in a copy of the database (first layer first) and
 *    one allreduce moved before its bucket was ready each make the same
 *    queries count violations.
 */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json_check.h"
#include "run_util.h"

#define NPARAMS 44426 /* the cnn's (docs/model.md) */

static int write_cnn_config(const char *path, const char *engine) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "name: bucket-timeline\n"
          "workload: {dataset: fashion-mnist, model: cnn, batch: 16, lr: 0.05,\n"
          "           momentum: 0.9, max_steps: 21, eval_every: 1000000, seed: 3}\n"
          "workers: 2\n"
          "engines:\n"
          "  - %s\n",
          engine);
  return fclose(f) ? -1 : 0;
}

/* Rows of run `run` breaking "last layer first": a bucket that does not
 * end where the one before it began, a first bucket not ending at the
 * model's end, a last one not beginning at 0. */
static long long order_violations(const char *db, long long run) {
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT (SELECT COUNT(*) FROM buckets a JOIN buckets b ON a.run_id = b.run_id"
           " AND a.rank = b.rank AND a.step = b.step AND b.bucket = a.bucket + 1"
           " WHERE a.run_id = %lld AND b.offset + b.floats != a.offset)"
           " + (SELECT COUNT(*) FROM buckets WHERE run_id = %lld AND bucket = 0"
           " AND offset + floats != %d)"
           " + (SELECT COUNT(*) FROM buckets WHERE run_id = %lld AND bucket = nbuckets - 1"
           " AND offset != 0)",
           run, run, NPARAMS, run);
  return ru_db_int(db, sql);
}

/* Rows of run `run` whose times are out of order: allreduce before the
 * bucket was ready, ending before it started, starting before the
 * previous bucket's ended, or (overlap) ready after backward ended. */
static long long time_violations(const char *db, long long run, int overlap) {
  char sql[1024];
  snprintf(sql, sizeof sql,
           "SELECT (SELECT COUNT(*) FROM buckets WHERE run_id = %lld AND NOT"
           " (start_s >= ready_s AND end_s >= start_s))"
           " + (SELECT COUNT(*) FROM buckets a JOIN buckets b ON a.run_id = b.run_id"
           " AND a.rank = b.rank AND a.step = b.step AND b.bucket = a.bucket + 1"
           " WHERE a.run_id = %lld AND b.start_s < a.end_s)"
           " + (SELECT COUNT(*) FROM buckets b JOIN steps s ON s.run_id = b.run_id"
           " AND s.rank = b.rank AND s.step = b.step WHERE b.run_id = %lld AND %d"
           " AND b.ready_s > s.compute_s)",
           run, run, run, overlap);
  return ru_db_int(db, sql);
}

static void check_trace(const char *db, long long run, long long rows) {
  char id[32], *out = NULL;
  snprintf(id, sizeof id, "%lld", run);
  CHECK_EQ_INT(ru_sgdlab_in(".", &out, "trace", id, "--db", db, NULL), 0);
  CHECK(out);
  size_t at = 0;
  CHECK_MSG(jc_valid(out, &at), "invalid JSON at byte %zu", at);
  CHECK_STR_CONTAINS(out, "\"args\":{\"name\":\"rank 0 buckets\"}");
  CHECK_STR_CONTAINS(out, "\"args\":{\"name\":\"rank 1 buckets\"}");
  CHECK_EQ_INT((int)jc_count(out, "\"cat\":\"bucket\",\"name\":\"bucket\""), (int)rows);
  CHECK_EQ_INT((int)jc_count(out, "\"cat\":\"bucket\",\"name\":\"ready\""), (int)rows);
  free(out);
}

TEST(rows_order_and_times) {
  static const char *const entries[] = {
      "{engine: allreduce, algorithm: ring, transport: zmq, bucket_every: 10}",
      "{engine: allreduce, algorithm: ring, transport: zmq, overlap: true, bucket: 16K,"
      " bucket_every: 10}",
  };
  const char *d = ru_scratch("bucketline");
  CHECK(d);
  char cfg[128], db[128], bad[160], cmd[400];
  snprintf(cfg, sizeof cfg, "%s/b.yaml", d);
  snprintf(db, sizeof db, "%s/b.db", d);
  for (int i = 0; i < 2; i++) {
    CHECK_OK(write_cnn_config(cfg, entries[i]));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", entries[i]);
  }
  long long plain = ru_db_int(db, "SELECT MIN(id) FROM runs");
  long long ov = ru_db_int(db, "SELECT MAX(id) FROM runs");
  char sql[256];
  /* bounded: steps 0, 10, 20 of 21, both ranks */
  snprintf(sql, sizeof sql, "SELECT group_concat(DISTINCT step) FROM (SELECT step FROM buckets"
                            " WHERE run_id = %lld ORDER BY step)", ov);
  char *steps = ru_db_text(db, sql);
  CHECK(steps);
  CHECK_MSG(!strcmp(steps, "0,10,20"), "sampled steps %s, want 0,10,20", steps);
  free(steps);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM buckets WHERE run_id = %lld", plain);
  CHECK_EQ_INT(ru_db_int(db, sql), 2 * 3);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM buckets WHERE run_id = %lld"
                            " AND nbuckets = 1 AND offset = 0 AND floats = %d", plain, NPARAMS);
  CHECK_EQ_INT(ru_db_int(db, sql), 2 * 3);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM buckets WHERE run_id = %lld AND nbuckets = 3",
           ov);
  long long rows = ru_db_int(db, sql);
  CHECK_EQ_INT(rows, 2 * 3 * 3);
  for (long long r = plain; r <= ov; r++) {
    CHECK_EQ_INT(order_violations(db, r), 0);
    CHECK_EQ_INT(time_violations(db, r, r == ov), 0);
  }
  check_trace(db, ov, rows);

  /* planted: reversed (first layer first), and one allreduce too early */
  snprintf(bad, sizeof bad, "%s/bad.db", d);
  snprintf(cmd, sizeof cmd, "sqlite3 '%s' \".backup '%s'\"", db, bad);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "sqlite3 '%s' 'UPDATE buckets SET bucket = nbuckets - 1 - bucket"
                            " WHERE run_id = %lld'", bad, ov);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  long long rev = order_violations(bad, ov);
  fprintf(stderr, "  reversed buckets: %lld order violations\n", rev);
  CHECK(rev >= 2 * 3);
  snprintf(cmd, sizeof cmd, "sqlite3 '%s' 'UPDATE buckets SET bucket = nbuckets - 1 - bucket"
                            " WHERE run_id = %lld; UPDATE buckets SET start_s = ready_s - 1e-4"
                            " WHERE run_id = %lld AND rank = 1 AND step = 10 AND bucket = 1'",
           bad, ov, ov);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  CHECK_EQ_INT(order_violations(bad, ov), 0);
  long long early = time_violations(bad, ov, 1);
  fprintf(stderr, "  one allreduce before its bucket was ready: %lld time violations\n", early);
  CHECK(early >= 1);
}
