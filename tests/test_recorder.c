/* test_recorder.c - the SQLite schema contract and batched commits. */
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "reconcile.h"
#include "recorder.h"
#include "rundir.h"
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
               "processes,repeat,seed,status,error,started_at,finished_at,wall_s,"
               "harness_pid,harness_host,harness_start,tmp_dir"},
      {"steps", "run_id,rank,role,step,epoch,t_start,compute_s,comm_s,wait_s,bytes_sent,"
                "bytes_recv,loss,staleness,t_start_raw,kind"},
      {"evals", "run_id,step,epoch,wall_s,samples,train_loss,test_loss,test_acc"},
      {"bench", "id,experiment_id,collective,impl,transport,np,bytes,iters,t_min,t_median,"
                "t_max,algbw,busbw,wrong"},
      {"ranks", "run_id,rank,role,host,pid,cluster_host,address,clock_offset_s,clock_unc_s,"
                "clock_at_s,clock_end_offset_s,clock_end_unc_s,clock_end_at_s,kind"},
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
  CHECK_OK(sg_recorder_step(r, run, 0, "server", SG_ROLE_HUB, &s, s.t_start));
  CHECK_OK(sg_recorder_tick(r));
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM steps"), 0); /* still in the batch */
  for (int i = 1; i < SG_DB_BATCH_ROWS; i++) {
    s.step = i;
    s.loss = 1.0 / (i + 1);
    s.staleness = i % 3;
    CHECK_OK(sg_recorder_step(r, run, 1, "worker", SG_ROLE_WORKER, &s, s.t_start));
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
  CHECK_OK(sg_recorder_rank(r, run, 0, "worker", SG_ROLE_WORKER, "h", 123, NULL, NULL));
  CHECK_OK(sg_recorder_rank(r, run, 1, "server", SG_ROLE_HUB, "h", 124, "h1", "198.18.0.2"));
  CHECK_OK(sg_recorder_run_end(r, run, "failed", "rank 0 (worker, h, pid 123): killed by signal 9", 1.5));
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM bench WHERE impl='ring' AND np=4"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM run_info WHERE value='OpenBLAS'"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM ranks WHERE rank=0 AND cluster_host IS NULL "
                             "AND address IS NULL"), 1);
  CHECK_EQ_INT(count(reader, "SELECT count(*) FROM ranks WHERE rank=1 AND cluster_host='h1' "
                             "AND address='198.18.0.2' AND pid=124"), 1);
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

/* ---- version 1 files, and runs whose harness died ------------------------ */

/* A database as sgdlab's schema version 1 wrote it (its exact DDL), with
 * an experiment, a finished run with a step, and a run left 'running'. */
static int write_v1(const char *path) {
  static const char v1[] =
      "CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
      " config_text TEXT, started_at TEXT, host TEXT, version TEXT);"
      "CREATE TABLE runs(id INTEGER PRIMARY KEY, experiment_id INTEGER REFERENCES experiments(id),"
      " engine TEXT NOT NULL, options_json TEXT, transport TEXT, launcher TEXT,"
      " workers INTEGER, servers INTEGER, processes INTEGER, repeat INTEGER, seed INTEGER,"
      " status TEXT NOT NULL, error TEXT, started_at TEXT, finished_at TEXT, wall_s REAL);"
      "CREATE TABLE steps(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, step INTEGER,"
      " epoch INTEGER, t_start REAL, compute_s REAL, comm_s REAL, wait_s REAL,"
      " bytes_sent INTEGER, bytes_recv INTEGER, loss REAL, staleness INTEGER);"
      "CREATE TABLE evals(run_id INTEGER NOT NULL, step INTEGER, epoch INTEGER, wall_s REAL,"
      " samples INTEGER, train_loss REAL, test_loss REAL, test_acc REAL);"
      "CREATE TABLE bench(id INTEGER PRIMARY KEY, experiment_id INTEGER REFERENCES experiments(id),"
      " collective TEXT, impl TEXT, transport TEXT, np INTEGER, bytes INTEGER, iters INTEGER,"
      " t_min REAL, t_median REAL, t_max REAL, algbw REAL, busbw REAL, wrong INTEGER);"
      "CREATE TABLE ranks(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, host TEXT, pid INTEGER);"
      "CREATE TABLE run_info(run_id INTEGER NOT NULL, key TEXT, value TEXT);"
      "CREATE INDEX steps_run ON steps(run_id, step);"
      "CREATE INDEX evals_run ON evals(run_id, step);"
      "CREATE INDEX runs_exp ON runs(experiment_id);"
      "CREATE UNIQUE INDEX run_info_key ON run_info(run_id, key);"
      "PRAGMA user_version=1;"
      "INSERT INTO experiments(name, host) VALUES('old', 'h');"
      "INSERT INTO runs(experiment_id, engine, status, wall_s) VALUES(1, 'local', 'ok', 2.5);"
      "INSERT INTO runs(experiment_id, engine, status) VALUES(1, 'local', 'running');"
      "INSERT INTO steps(run_id, rank, step, loss) VALUES(1, 0, 0, 0.75);";
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
  int rc = sqlite3_exec(db, v1, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  sqlite3_close(db);
  return rc;
}

TEST(version_1_file_opens_and_migrates) {
  char dir[64], path[128], cols[1024];
  snprintf(dir, sizeof dir, "/tmp/sgdlab-test-XXXXXX");
  CHECK(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/v1.db", dir);
  CHECK_OK(write_v1(path));
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sqlite3 *db = sg_recorder_sqlite(r);
  CHECK_EQ_INT(count(db, "PRAGMA user_version"), SG_DB_VERSION);
  columns(db, "runs", cols, sizeof cols);
  CHECK_STR_CONTAINS(cols, ",wall_s,harness_pid,harness_host,harness_start,tmp_dir");
  /* the old rows are intact; the run a version-1 harness left running
   * has no harness pid and is left alone (nothing tells whether it lives) */
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM runs WHERE id=1 AND status='ok' AND wall_s=2.5 "
                         "AND harness_pid IS NULL"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM runs WHERE id=2 AND status='running'"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE loss=0.75"), 1);
  /* and new runs go on in the migrated file */
  int64_t exp, run;
  CHECK_OK(sg_recorder_experiment(r, "new", "", &exp));
  sg_run_row_t row = {.engine = "local", .transport = "zmq", .launcher = "local", .workers = 1};
  CHECK_OK(sg_recorder_run_begin(r, exp, &row, &run));
  CHECK_EQ_INT(run, 3);
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id=3 AND harness_pid=%d "
                            "AND harness_start IS NOT NULL", (int)getpid());
  CHECK_EQ_INT(count(db, sql), 1);
  sg_recorder_close(&r);
  /* reopening: migrated once, still the current version */
  CHECK_OK(sg_recorder_open(&r, path));
  CHECK_EQ_INT(count(sg_recorder_sqlite(r), "PRAGMA user_version"), SG_DB_VERSION);
  sg_recorder_close(&r);
  cleanup(dir);
}

/* A database as schema version 2 left it: version 1's DDL plus the runs
 * columns of version 2, with a rank row. */
static int write_v2(const char *path) {
  static const char v2[] =
      "ALTER TABLE runs ADD COLUMN harness_pid INTEGER;"
      "ALTER TABLE runs ADD COLUMN harness_host TEXT;"
      "ALTER TABLE runs ADD COLUMN harness_start TEXT;"
      "ALTER TABLE runs ADD COLUMN tmp_dir TEXT;"
      "CREATE INDEX runs_status ON runs(status);"
      "UPDATE runs SET status='failed' WHERE status='running';"
      "INSERT INTO ranks(run_id, rank, role, host, pid) VALUES(1, 0, 'worker', 'vm', 42),"
      " (1, 2, 'driver', 'vm', 44);"
      "INSERT INTO steps(run_id, rank, role, step) VALUES(1, 2, 'driver', 0),"
      " (1, 3, 'server', 0);"
      "PRAGMA user_version=2;";
  if (write_v1(path) < 0) return -1;
  sqlite3 *db;
  if (sqlite3_open(path, &db) != SQLITE_OK) return -1;
  int rc = sqlite3_exec(db, v2, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  sqlite3_close(db);
  return rc;
}

TEST(version_2_file_gets_the_ranks_cluster_columns) {
  char dir[64], path[128], cols[1024];
  snprintf(dir, sizeof dir, "/tmp/sgdlab-test-XXXXXX");
  CHECK(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/v2.db", dir);
  CHECK_OK(write_v2(path));
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sqlite3 *db = sg_recorder_sqlite(r);
  CHECK_EQ_INT(count(db, "PRAGMA user_version"), SG_DB_VERSION);
  columns(db, "ranks", cols, sizeof cols);
  CHECK_MSG(!strcmp(cols, "run_id,rank,role,host,pid,cluster_host,address,clock_offset_s,"
                          "clock_unc_s,clock_at_s,clock_end_offset_s,clock_end_unc_s,"
                          "clock_end_at_s,kind"), "%s", cols);
  /* the old row is intact, with NULL where version 2 knew nothing */
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM ranks WHERE pid=42 AND host='vm' AND "
                         "cluster_host IS NULL AND address IS NULL AND clock_offset_s IS NULL"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE loss=0.75 AND t_start_raw IS NULL"), 1);
  /* version 5's kind, from the hub roles of the old engines */
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE kind = 'hub' AND role IN ('driver',"
                         " 'server')"), 2);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE kind = 'worker'"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM ranks WHERE rank = 2 AND kind = 'hub'"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM ranks WHERE rank = 0 AND kind = 'worker'"), 1);
  CHECK_OK(sg_recorder_rank(r, 1, 1, "worker", SG_ROLE_WORKER, "vm", 43, "h0", "198.18.0.1"));
  CHECK_OK(sg_recorder_flush(r));
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM ranks WHERE address='198.18.0.1'"), 1);
  /* version 6's buckets table, empty, and a bucket row goes in */
  columns(db, "buckets", cols, sizeof cols);
  CHECK_MSG(!strcmp(cols, "run_id,rank,step,bucket,nbuckets,offset,floats,ready_s,start_s,end_s"),
            "%s", cols);
  sg_bucket_rec_t b = {.step = 10, .bucket = 1, .nbuckets = 3, .offset = 2572, .floats = 30840,
                       .ready_s = 0.25, .start_s = 0.5, .end_s = 0.75};
  CHECK_OK(sg_recorder_bucket(r, 1, 1, &b));
  CHECK_OK(sg_recorder_flush(r));
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM buckets WHERE rank = 1 AND step = 10 AND bucket = 1"
                         " AND nbuckets = 3 AND offset = 2572 AND floats = 30840 AND ready_s = 0.25"
                         " AND start_s = 0.5 AND end_s = 0.75"), 1);
  sg_recorder_close(&r);
  cleanup(dir);
}

/* A rank's clock measurements land in its ranks row; the end's drift
 * update re-corrects its step rows (t_start = raw + offset interpolated
 * between the two measurements) and no other rank's. */
TEST(clock_offsets_correct_the_steps_with_drift) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  CHECK(path);
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sqlite3 *db = sg_recorder_sqlite(r);
  int64_t exp, run;
  CHECK_OK(sg_recorder_experiment(r, "e", "x", &exp));
  sg_run_row_t row = {.engine = "local", .transport = "zmq", .launcher = "local", .workers = 1};
  CHECK_OK(sg_recorder_run_begin(r, exp, &row, &run));
  for (int k = 0; k < 2; k++)
    CHECK_OK(sg_recorder_rank(r, run, k, "worker", SG_ROLE_WORKER, "vm", 40 + k, NULL, NULL));
  CHECK_OK(sg_recorder_clock(r, run, 1, 0, -0.5, 0.001, 1.0));
  for (int i = 0; i < 3; i++) { /* raw 1, 2, 3 s, corrected by the start's -0.5 */
    sg_step_rec_t s = {.step = i, .t_start = 1.0 + i - 0.5, .loss = 1, .staleness = -1};
    CHECK_OK(sg_recorder_step(r, run, 1, "worker", SG_ROLE_WORKER, &s, 1.0 + i));
    s.t_start = 1.0 + i;
    CHECK_OK(sg_recorder_step(r, run, 0, "worker", SG_ROLE_WORKER, &s, 1.0 + i));
  }
  CHECK_OK(sg_recorder_clock(r, run, 1, 1, -0.3, 0.002, 3.0));
  CHECK_OK(sg_recorder_clock_drift(r, run, 1, -0.5, 0.1, 1.0)); /* (-0.3 + 0.5) / (3 - 1) */
  CHECK_OK(sg_recorder_flush(r));
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM ranks WHERE rank=1 AND clock_offset_s=-0.5 AND "
                         "clock_unc_s=0.001 AND clock_at_s=1 AND clock_end_offset_s=-0.3 AND "
                         "clock_end_unc_s=0.002 AND clock_end_at_s=3"), 1);
  /* rank 1: 1-0.5, 2-0.4, 3-0.3; rank 0 untouched */
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE rank=1 AND abs(t_start - (t_start_raw"
                         " - 0.5 + 0.1 * (t_start_raw - 1))) < 1e-12"), 3);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE rank=1 AND step=2 AND "
                         "abs(t_start - 2.7) < 1e-12"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM steps WHERE rank=0 AND t_start = t_start_raw"), 3);
  sg_recorder_close(&r);
  cleanup(dir);
}

/* A pid that was ours and is no more. */
static int dead_pid(void) {
  pid_t p = fork();
  if (p == 0) _exit(0);
  waitpid(p, NULL, 0);
  return (int)p;
}

/* A run dir as the harness makes it (sg_rundir_create), with a file and
 * a subdirectory with a file in it; its proof into proof.  dead: made by
 * a child that then exits (its harness is gone), else by this process. */
static int run_dir(char *dir, size_t cap, char *proof, int dead) {
  int p[2];
  if (pipe(p) < 0) return -1;
  fflush(NULL);
  pid_t pid = dead ? fork() : 0;
  if (pid == 0) {
    sg_rundir_t rd;
    char line[160] = "";
    if (sg_rundir_create(&rd) == SG_OK) {
      snprintf(line, sizeof line, "%s %s", rd.path, rd.proof);
      char f[160];
      FILE *fp = NULL;
      snprintf(f, sizeof f, "%s/h1/x", rd.path);
      if (mkdirat(rd.fd, "h1", 0700) == 0 && (fp = fopen(f, "w"))) fclose(fp);
      close(rd.fd);
    }
    if (write(p[1], line, sizeof line) != (ssize_t)sizeof line) _exit(1);
    if (dead) _exit(0);
  }
  char line[160] = "";
  int ok = read(p[0], line, sizeof line) == (ssize_t)sizeof line;
  close(p[0]), close(p[1]);
  if (dead) waitpid(pid, NULL, 0);
  char path[128];
  if (!ok || sscanf(line, "%127s %64s", path, proof) != 2) return -1;
  snprintf(dir, cap, "%s", path);
  return 0;
}

/* A 'running' row; its run_info tmp_dir.proof when proof is not NULL. */
static int insert_run(sqlite3 *db, int pid, const char *host, const char *start, const char *dir,
                      const char *proof) {
  sqlite3_stmt *s;
  if (sqlite3_prepare_v2(db, "INSERT INTO runs(experiment_id, engine, status, harness_pid,"
                             " harness_host, harness_start, tmp_dir) VALUES(1, 'local', 'running',"
                             " ?, ?, ?, ?)", -1, &s, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_int(s, 1, pid);
  sqlite3_bind_text(s, 2, host, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, start, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, dir, -1, SQLITE_STATIC);
  int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : -1;
  sqlite3_finalize(s);
  if (rc == 0 && proof) {
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO run_info(run_id, key, value) VALUES(%lld,"
             " 'tmp_dir.proof', '%s')", (long long)sqlite3_last_insert_rowid(db), proof);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  }
  return rc;
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* Only a row whose run directory proves it (the owner file hashes to the
 * row's proof) and whose harness, as that file names it, is gone is
 * reconciled; the row's own pid and identity prove nothing. */
TEST(runs_of_dead_harnesses_are_failed_and_their_temp_dirs_removed) {
  char dir[64], host[256] = "?", self[128];
  const char *path = tmp_db(dir, sizeof dir);
  CHECK(path);
  gethostname(host, sizeof host - 1);
  CHECK_OK(sg_proc_identity((int)getpid(), self, sizeof self));
  /* 1 dead harness; 2 live harness (this process) although the row names
   * a dead pid; 3 dead harness but the row's proof is another's; 4 other
   * host; 5 not a run dir's name; 6 a symlink named like a run dir to a
   * dead run's directory, with that directory's proof; 7 dead harness, a
   * row without proof (an older sgdlab's, or forged) */
  char d[8][128], pr[8][SG_RUNDIR_PROOF_LEN + 1], target[128];
  CHECK_OK(run_dir(d[1], sizeof d[1], pr[1], 1));
  CHECK_OK(run_dir(d[2], sizeof d[2], pr[2], 0));
  CHECK_OK(run_dir(d[3], sizeof d[3], pr[3], 1));
  sg_sha256_hex("forged", 6, pr[3]);
  CHECK_OK(run_dir(d[4], sizeof d[4], pr[4], 1));
  snprintf(d[5], sizeof d[5], "%s/notarundir", dir);
  CHECK(mkdir(d[5], 0700) == 0);
  snprintf(pr[5], sizeof pr[5], "%s", pr[4]);
  CHECK_OK(run_dir(target, sizeof target, pr[6], 1));
  snprintf(d[6], sizeof d[6], "/tmp/sgdlab-XXXXXX");
  CHECK(mkdtemp(d[6]) && rmdir(d[6]) == 0 && symlink(target, d[6]) == 0);
  CHECK_OK(run_dir(d[7], sizeof d[7], pr[7], 1));

  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  sqlite3 *db = sg_recorder_sqlite(r);
  CHECK(sqlite3_exec(db, "INSERT INTO experiments(name) VALUES('e')", NULL, NULL, NULL) == SQLITE_OK);
  for (int i = 1; i <= 7; i++)
    CHECK_OK(insert_run(db, dead_pid(), i == 4 ? "some-other-host" : host, self, d[i],
                        i == 7 ? NULL : pr[i]));
  sg_recorder_close(&r);

  CHECK_OK(sg_recorder_open(&r, path)); /* reconciles */
  db = sg_recorder_sqlite(r);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM runs WHERE status='failed' AND error='harness died'"
                         " AND finished_at IS NOT NULL AND id = 1"), 1);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM runs WHERE status='running' AND id > 1"), 6);
  sg_recorder_close(&r);
  CHECK_MSG(!exists(d[1]), "%s (dead harness) is still there", d[1]);
  CHECK_MSG(exists(d[2]), "%s of a live harness was removed", d[2]);
  for (int i = 3; i <= 7; i++) CHECK_MSG(exists(d[i]), "%s (row %d) was removed", d[i], i);
  char keep[160];
  snprintf(keep, sizeof keep, "%s/h1/x", target);
  CHECK_MSG(exists(keep), "%s, behind the symlink %s, was removed", keep, d[6]);
  /* a second open finds nothing more to do */
  CHECK_OK(sg_recorder_open(&r, path));
  sg_recorder_close(&r);
  unlink(d[6]);
  for (int i = 2; i <= 7; i++)
    if (i != 5 && i != 6) cleanup(d[i]);
  cleanup(target);
  cleanup(dir);
}

TEST(run_dir_pattern_is_strict) {
  CHECK(sg_run_dir_pattern("/tmp/sgdlab-a1B2c3"));
  CHECK(!sg_run_dir_pattern("/tmp/sgdlab-a1B2c"));
  CHECK(!sg_run_dir_pattern("/tmp/sgdlab-a1B2c34"));
  CHECK(!sg_run_dir_pattern("/tmp/sgdlab-../etc"));
  CHECK(!sg_run_dir_pattern("/tmp/sgdlab-a1/2c3"));
  CHECK(!sg_run_dir_pattern("/home/u/sgdlab-a1B2c3"));
  CHECK(!sg_run_dir_pattern(""));
  CHECK(!sg_run_dir_pattern(NULL));
}

/* Runs planned but never started belong to no harness: reconciliation
 * leaves them pending (sgdlab run --resume runs them), and starting one
 * makes this process its harness. */
TEST(pending_runs_stay_pending_across_reconciliation) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  int64_t exp, a, b;
  CHECK_OK(sg_recorder_experiment(r, "e", "engines: [local]\n", &exp));
  sg_run_row_t row = {.engine = "local", .options_json = "{}", .transport = "zmq",
                      .launcher = "local", .workers = 1, .processes = 1, .seed = 7};
  CHECK_OK(sg_recorder_run_plan(r, exp, &row, &a));
  CHECK_OK(sg_recorder_run_plan(r, exp, &row, &b));
  sg_recorder_close(&r);
  CHECK_OK(sg_recorder_open(&r, path)); /* reconciles */
  sqlite3 *db = sg_recorder_sqlite(r);
  CHECK_EQ_INT(count(db, "SELECT count(*) FROM runs WHERE status='pending' AND started_at IS NULL"
                         " AND harness_pid IS NULL"), 2);
  CHECK_EQ_INT(sg_recorder_run_claim(r, b), 1);
  char q[160];
  snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE id=%lld AND status='running' AND "
           "harness_pid=%d AND started_at IS NOT NULL", (long long)b, (int)getpid());
  CHECK_EQ_INT(count(db, q), 1);
  sg_recorder_close(&r);
  cleanup(dir);
}

/* A claim takes a row once: a second claim of it, by this harness or
 * another, gets 0; so does a failed row another harness started after
 * this one opened the database.  A row that was failed before is taken
 * again (what --resume does). */
TEST(a_run_is_claimed_once) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  sg_recorder_t *a = NULL, *b = NULL;
  CHECK_OK(sg_recorder_open(&a, path));
  int64_t exp, r1, r2;
  CHECK_OK(sg_recorder_experiment(a, "e", "engines: [local]\n", &exp));
  sg_run_row_t row = {.engine = "local", .options_json = "{}", .transport = "zmq",
                      .launcher = "local", .workers = 1, .processes = 1, .seed = 7};
  CHECK_OK(sg_recorder_run_plan(a, exp, &row, &r1));
  CHECK_OK(sg_recorder_run_plan(a, exp, &row, &r2));
  CHECK_OK(sg_recorder_run_end(a, r2, "failed", "earlier", 1.0));
  CHECK_OK(sg_recorder_open(&b, path));
  CHECK_EQ_INT(sg_recorder_run_claim(a, r1), 1);
  CHECK_EQ_INT(sg_recorder_run_claim(b, r1), 0); /* running: someone else's */
  CHECK_EQ_INT(sg_recorder_run_claim(a, r1), 0);
  CHECK_OK(sg_recorder_run_end(a, r1, "failed", "x", 1.0));
  CHECK_EQ_INT(sg_recorder_run_claim(b, r1), 0); /* started after b opened */
  CHECK_EQ_INT(sg_recorder_run_claim(b, r2), 1); /* failed before: b takes it again */
  sg_recorder_close(&a);
  sg_recorder_close(&b);
  cleanup(dir);
}

/* Records wait in memory until a batch is written: nothing is held open
 * in between, so another connection can write at once. */
TEST(no_write_transaction_between_batches) {
  char dir[64];
  const char *path = tmp_db(dir, sizeof dir);
  sg_recorder_t *r = NULL;
  CHECK_OK(sg_recorder_open(&r, path));
  int64_t exp, run;
  CHECK_OK(sg_recorder_experiment(r, "e", "engines: [local]\n", &exp));
  sg_run_row_t row = {.engine = "local", .options_json = "{}", .transport = "zmq",
                      .launcher = "local", .workers = 1, .processes = 1, .seed = 7};
  CHECK_OK(sg_recorder_run_begin(r, exp, &row, &run));
  sg_step_rec_t s = {.step = 1, .loss = 1.0f, .staleness = -1};
  CHECK_OK(sg_recorder_step(r, run, 0, "worker", SG_ROLE_WORKER, &s, s.t_start));
  sqlite3 *other = NULL;
  CHECK(sqlite3_open_v2(path, &other, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
  sqlite3_busy_timeout(other, 0);
  CHECK_MSG(sqlite3_exec(other, "BEGIN IMMEDIATE; COMMIT", NULL, NULL, NULL) == SQLITE_OK,
            "a pending batch holds the write lock: %s", sqlite3_errmsg(other));
  CHECK_EQ_INT(count(other, "SELECT count(*) FROM steps"), 0);
  CHECK_OK(sg_recorder_flush(r));
  CHECK_EQ_INT(count(other, "SELECT count(*) FROM steps"), 1);
  sqlite3_close(other);
  sg_recorder_close(&r);
  cleanup(dir);
}

/* More databases in more directories than the output table holds at
 * once: the directory of each is checked, then let go. */
TEST(many_databases_in_one_process) {
  char dir[64], path[256];
  CHECK(tmp_db(dir, sizeof dir));
  for (int i = 0; i < 80; i++) {
    sg_recorder_t *r = NULL;
    snprintf(path, sizeof path, "%s/d%d/x.db", dir, i);
    CHECK_OK(sg_recorder_open(&r, path));
    sg_recorder_close(&r);
  }
  cleanup(dir);
}
