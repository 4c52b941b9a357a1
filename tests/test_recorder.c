/* test_recorder.c - the SQLite schema contract and batched commits. */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "recorder.h"
#include "test.h"

static char *tmp_db(char *dir, size_t cap) {
  snprintf(dir, cap, "/tmp/sgdlab-test-XXXXXX");
  if (!mkdtemp(dir)) return NULL;
  static char path[256];
  snprintf(path, sizeof path, "%s/sub/dir/x.db", dir); /* parents are created */
  return path;
}

static void cleanup(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);
}

/* Comma-joined column names of a table, in order. */
static void columns(sqlite3 *db, const char *table, char *out, size_t cap) {
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", table);
  sqlite3_stmt *s;
  out[0] = '\0';
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return;
  size_t len = 0;
  while (sqlite3_step(s) == SQLITE_ROW)
    len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "",
                            (const char *)sqlite3_column_text(s, 1));
  sqlite3_finalize(s);
}

static long long count(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s;
  long long n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return -2;
  if (sqlite3_step(s) == SQLITE_ROW) n = sqlite3_column_int64(s, 0);
  sqlite3_finalize(s);
  return n;
}

TEST(schema_columns_are_exactly_the_design) {
  char dir[64], cols[1024];
  const char *path = tmp_db(dir, sizeof dir);
  CHECK(path);
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sqlite3 *db = sg_recorder_sqlite(r);
  static const char *const want[][2] = {
      {"experiments", "id,name,config_text,started_at,host,version"},
      {"runs", "id,experiment_id,engine,options_json,transport,launcher,workers,servers,"
               "processes,repeat,seed,status,error,started_at,finished_at,wall_s"},
      {"steps", "run_id,rank,role,step,epoch,t_start,compute_s,comm_s,wait_s,bytes_sent,"
                "bytes_recv,loss,staleness"},
      {"evals", "run_id,step,epoch,wall_s,samples,train_loss,test_loss,test_acc"},
      {"bench", "id,experiment_id,collective,impl,transport,np,bytes,iters,t_min,t_median,"
                "t_max,algbw,busbw,wrong"},
      {"ranks", "run_id,rank,role,host,pid"},
      {"run_info", "run_id,key,value"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    columns(db, want[i][0], cols, sizeof cols);
    CHECK_MSG(!strcmp(cols, want[i][1]), "%s: %s", want[i][0], cols);
  }
  CHECK_EQ_INT(count(db, "PRAGMA user_version"), SG_DB_VERSION);
  sg_recorder_close(&r);
  CHECK(r == NULL);
  /* reopening an existing file keeps it */
  CHECK_OK(sg_recorder_open(&r, path));
  sg_recorder_close(&r);
  cleanup(dir);
}

TEST(batches_commit_while_the_run_goes_on) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  sg_recorder_t *r = NULL;
  sqlite3 *reader = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  int64_t exp, run;
  CHECK_OK(sg_recorder_experiment(r, "e", "engines: [local]\n", &exp));
  sg_run_row_t row = {.engine = "local", .options_json = "{}", .transport = "zmq",
                      .launcher = "local", .workers = 1, .processes = 1, .seed = 7};
  CHECK_OK(sg_recorder_run_begin(r, exp, &row, &run));
  CHECK(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  /* run_begin is committed at once */
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM runs WHERE status='running'"), 1);

  sg_step_rec_t s = {.step = 0, .loss = NAN, .staleness = -1, .bytes_sent = 5};
  CHECK_OK(sg_recorder_step(r, run, 0, "server", &s));
  CHECK_OK(sg_recorder_tick(r));
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM steps"), 0); /* still in the batch */
  for (int i = 1; i < SG_DB_BATCH_ROWS; i++) {
    s.step = i;
    s.loss = 1.0 / (i + 1);
    s.staleness = i % 3;
    CHECK_OK(sg_recorder_step(r, run, 1, "worker", &s));
  }
  CHECK_OK(sg_recorder_tick(r)); /* SG_DB_BATCH_ROWS rows: committed */
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM steps"), SG_DB_BATCH_ROWS);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM steps WHERE loss IS NULL"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM steps WHERE staleness IS NULL"), 1);

  /* a small batch is committed once it is SG_DB_BATCH_SECONDS old */
  sg_eval_rec_t e = {.step = 10, .test_acc = 0.5, .train_loss = NAN};
  CHECK_OK(sg_recorder_eval(r, run, &e));
  double until = sg_now() + 10;
  while (count(reader, "SELECT count(*) FROM evals") == 0 && sg_now() < until)
    CHECK_OK(sg_recorder_tick(r));
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM evals WHERE train_loss IS NULL AND test_acc=0.5"), 1);

  sg_bench_rec_t b = {.collective = "allreduce", .impl = "ring", .transport = "zmq", .np = 4,
                      .bytes = 1024, .iters = 10, .t_median = 1e-3, .busbw = 1.5};
  CHECK_OK(sg_recorder_bench(r, exp, &b));
  CHECK_OK(sg_recorder_info(r, run, "blas", "OpenBLAS"));
  CHECK_OK(sg_recorder_info(r, run, "blas", "second value ignored"));
  CHECK_OK(sg_recorder_rank(r, run, 0, "worker", "h", 123));
  CHECK_OK(sg_recorder_run_end(r, run, "failed", "rank 0 (worker, h, pid 123): killed by signal 9", 1.5));
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM bench WHERE impl='ring' AND np=4"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM run_info WHERE value='OpenBLAS'"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM run_info"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM runs WHERE status='failed' AND error LIKE "
                             "'%signal 9' AND finished_at IS NOT NULL AND wall_s=1.5"), 1);
  sqlite3_close(reader);
  sg_recorder_close(&r);
  cleanup(dir);
}

TEST(newer_schema_is_refused) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sg_recorder_close(&r);
  sqlite3 *db;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "PRAGMA user_version=99", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  int rc = sg_recorder_open(&r, path);
  CHECK_EQ_INT(rc, SG_EUNSUPPORTED);
  CHECK(r == NULL);
  CHECK_STR_CONTAINS(sg_err_msg(), "schema version 99 is newer");
  CHECK_STR_CONTAINS(sg_err_msg(), path);
  cleanup(dir);
}

TEST(unwritable_path_is_one_clear_error) {
  sg_recorder_t *r = NULL;
  int rc = sg_recorder_open(&r, "/etc/passwd/x.db"); /* under a file: even root cannot */
  CHECK(rc < 0);
  CHECK(r == NULL);
  CHECK_STR_CONTAINS(sg_err_msg(), "/etc/passwd/x.db");
  CHECK(strchr(sg_err_msg(), '\n') == NULL);
}
