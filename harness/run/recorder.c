/* recorder.c - SQLite storage (see recorder.h for the schema contract). */
#include "recorder.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "outfile.h"
#include "reconcile.h"
#include "views.h"

#define NOW_SQL "strftime('%Y-%m-%dT%H:%M:%fZ','now')"

/* Version 1: experiments, runs, steps, evals, bench, ranks and run_info. */
static const char SCHEMA_V1[] =
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
    "CREATE UNIQUE INDEX run_info_key ON run_info(run_id, key);";

/* Version 2: who runs a run (its harness's pid, host and process
 * identity) and the run's temp dir, so that a run whose harness died can
 * be told from a live one (reconcile.h). */
static const char MIGRATE_V2[] =
    "ALTER TABLE runs ADD COLUMN harness_pid INTEGER;"
    "ALTER TABLE runs ADD COLUMN harness_host TEXT;"
    "ALTER TABLE runs ADD COLUMN harness_start TEXT;"
    "ALTER TABLE runs ADD COLUMN tmp_dir TEXT;"
    "CREATE INDEX runs_status ON runs(status);";

/* Version 3: where a rank ran on an emulated cluster (cluster.h): its
 * host there ("h1") and that host's address; NULL without a cluster. */
static const char MIGRATE_V3[] =
    "ALTER TABLE ranks ADD COLUMN cluster_host TEXT;"
    "ALTER TABLE ranks ADD COLUMN address TEXT;";

/* Version 4: clocks (clock_sync.h).  Each rank's offset to the harness's
 * clock, its uncertainty and when it was measured (the rank's time since
 * the run's start), at the start and at the end of the run; a step's
 * t_start as the rank sent it (t_start_raw) beside t_start on the
 * harness's clock, the one every view, figure, trace and fit reads.  Old
 * rows keep NULL there (their t_start is the rank's own). */
static const char MIGRATE_V4[] =
    "ALTER TABLE steps ADD COLUMN t_start_raw REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_offset_s REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_unc_s REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_at_s REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_end_offset_s REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_end_unc_s REAL;"
    "ALTER TABLE ranks ADD COLUMN clock_end_at_s REAL;";

/* Version 5: each rank's kind, 'worker' or 'hub' (core/engine.h: the
 * engine's role table), in ranks and in every step row; views, report and
 * cost model tell workers from hubs by it, never by a role's name.  Rows
 * of older versions get the kind their engines' hub roles had then: ps's
 * "server" and mapreduce's "driver" (SG_LEGACY_HUB_SQL, views.h). */
static const char MIGRATE_V5[] =
    "ALTER TABLE steps ADD COLUMN kind TEXT;"
    "ALTER TABLE ranks ADD COLUMN kind TEXT;"
    "UPDATE steps SET kind = " SG_LEGACY_KIND_SQL ";"
    "UPDATE ranks SET kind = " SG_LEGACY_KIND_SQL ";";

/* Version 6: the buckets of the allreduce engine's sampled steps
 * (records.h, sg_bucket_rec_t; setting bucket_every): times in seconds
 * after the step's start on its rank, so they need no clock correction
 * of their own (a bucket's time on the harness's clock is the step's
 * t_start plus them). */
static const char MIGRATE_V6[] =
    "CREATE TABLE buckets(run_id INTEGER NOT NULL, rank INTEGER, step INTEGER, bucket INTEGER,"
    " nbuckets INTEGER, offset INTEGER, floats INTEGER, ready_s REAL, start_s REAL, end_s REAL);"
    "CREATE INDEX buckets_run ON buckets(run_id, step, rank);";

enum { ST_STEP, ST_EVAL, ST_BENCH, ST_RANK, ST_INFO, ST_CLOCK0, ST_CLOCK1, ST_DRIFT, ST_BUCKET, ST_N };
static const char *const STMT_SQL[ST_N] = {
    [ST_STEP] = "INSERT INTO steps(run_id,rank,role,step,epoch,t_start,compute_s,comm_s,wait_s,"
                "bytes_sent,bytes_recv,loss,staleness,t_start_raw,kind)"
                " VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_EVAL] = "INSERT INTO evals(run_id,step,epoch,wall_s,samples,train_loss,test_loss,test_acc)"
                " VALUES(?,?,?,?,?,?,?,?)",
    [ST_BENCH] = "INSERT INTO bench(experiment_id,collective,impl,transport,np,bytes,iters,t_min,"
                 "t_median,t_max,algbw,busbw,wrong) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_RANK] = "INSERT INTO ranks(run_id,rank,role,host,pid,cluster_host,address,kind)"
                " VALUES(?,?,?,?,?,?,?,?)",
    [ST_INFO] = "INSERT OR IGNORE INTO run_info(run_id,key,value) VALUES(?,?,?)",
    [ST_CLOCK0] = "UPDATE ranks SET clock_offset_s=?3, clock_unc_s=?4, clock_at_s=?5"
                  " WHERE run_id=?1 AND rank=?2",
    [ST_CLOCK1] = "UPDATE ranks SET clock_end_offset_s=?3, clock_end_unc_s=?4, clock_end_at_s=?5"
                  " WHERE run_id=?1 AND rank=?2",
    /* the offset interpolated between the two measurements (drift) */
    [ST_DRIFT] = "UPDATE steps SET t_start = t_start_raw + ?3 + ?4 * (t_start_raw - ?5)"
                 " WHERE run_id=?1 AND rank=?2 AND t_start_raw IS NOT NULL",
    [ST_BUCKET] = "INSERT INTO buckets(run_id,rank,step,bucket,nbuckets,offset,floats,ready_s,"
                  "start_s,end_s) VALUES(?,?,?,?,?,?,?,?,?,?)",
};

/* One value of a row waiting for its batch. */
typedef struct val {
  char type; /* 'n' NULL, 'i' integer, 'd' real, 't' text */
  int64_t i;
  double d;
  char *t;
} val_t;

enum { ROW_VALS = 15 };
typedef struct row {
  int stmt; /* ST_* */
  int n;
  val_t v[ROW_VALS];
} row_t;

struct sg_recorder {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *st[ST_N];
  row_t *rows;         /* the open batch, written by sg_recorder_flush */
  size_t nrows, cap;
  double tx_t0;        /* sg_now() when the batch's first row came */
  int nomem;           /* a value of the batch could not be kept */
  double busy_t0;      /* sg_now() when the current wait for the lock began */
  unsigned seed;       /* the busy handler's jitter */
  char opened_at[32];  /* the database's clock when this harness opened it */
};

static int db_err(sg_recorder_t *r, const char *what) {
  return sg_err_set(SG_EIO, "results db %s: %s: %s", r->path, what, sqlite3_errmsg(r->db));
}

static int exec(sg_recorder_t *r, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(r->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    int rc = sg_err_set(SG_EIO, "results db %s: %s", r->path, msg ? msg : "error");
    sqlite3_free(msg);
    return rc;
  }
  return SG_OK;
}

/* Bring the schema from version `from` to SG_DB_VERSION.  Each version
 * adds one step here (ALTER TABLE ...); nothing is ever dropped.  A new
 * file takes every step, so it ends up exactly as a migrated one. */
static int migrate(sg_recorder_t *r, int from) {
  if (from == 0) SG_CHECK(exec(r, SCHEMA_V1));
  if (from < 2) SG_CHECK(exec(r, MIGRATE_V2));
  if (from < 3) SG_CHECK(exec(r, MIGRATE_V3));
  if (from < 4) SG_CHECK(exec(r, MIGRATE_V4));
  if (from < 5) SG_CHECK(exec(r, MIGRATE_V5));
  if (from < 6) SG_CHECK(exec(r, MIGRATE_V6));
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d", SG_DB_VERSION);
  SG_CHECK(exec(r, sql));
  return SG_OK;
}

/* The busy handler: wait for the write lock in short, jittered naps (so
 * two harnesses do not retry in step), up to SG_DB_BUSY_SECONDS.  Write
 * transactions are short (a batch, a run's row), so a writer gets its
 * turn within milliseconds even while another run records. */
static int busy_wait(void *arg, int tries) {
  sg_recorder_t *r = arg;
  double now = sg_now();
  if (tries == 0) r->busy_t0 = now;
  if (now - r->busy_t0 >= SG_DB_BUSY_SECONDS) return 0;
  unsigned cap_us = tries < 6 ? 1000u << tries : 50000u;
  struct timespec ts = {0, (long)(200 + rand_r(&r->seed) % cap_us) * 1000L};
  nanosleep(&ts, NULL);
  return 1;
}

/* The database's directory and files pass outfile.h's checks (ours, no
 * links, nobody else may write the directory); real: the path SQLite
 * opens, through real directories only. */
static int check_db_path(const char *path, char *real, size_t cap) {
  static const char *const sfx[] = {"", "-wal", "-shm", "-journal"};
  char dir[PATH_MAX], file[512];
  const char *slash = strrchr(path, '/'), *name = slash ? slash + 1 : path;
  if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
    return sg_err_set(SG_EINVAL, "results db %s: names a directory, not a file", path);
  if (strlen(name) > 200) return sg_err_set(SG_EINVAL, "results db %s: name too long", path);
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  snprintf(file, sizeof file, "results db %.490s", path);
  int fd = sg_out_dir_open(dir, 1, file);
  if (fd < 0) return fd;
  for (size_t i = 0; i < sizeof sfx / sizeof *sfx; i++) {
    snprintf(file, sizeof file, "%s%s", name, sfx[i]);
    int rc = sg_out_check_entry(dir, file);
    if (rc < 0) {
      char why[1024];
      snprintf(why, sizeof why, "%s", sg_err_msg());
      sg_out_dir_close(dir);
      return sg_err_set(rc, "results db %s: %s", path, why);
    }
  }
  const char *d = sg_out_dir_real(dir);
  snprintf(real, cap, "%s/%s", strcmp(d, "/") ? d : "", name);
  sg_out_dir_close(dir); /* SQLite opens by that path from here */
  return SG_OK;
}

/* The schema version; migrate an older file (newer: refused). */
static int schema(sg_recorder_t *r) {
  sqlite3_stmt *v = NULL;
  if (sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &v, NULL) != SQLITE_OK)
    return db_err(r, "reading the schema version");
  int version = sqlite3_step(v) == SQLITE_ROW ? sqlite3_column_int(v, 0) : 0;
  sqlite3_finalize(v);
  if (version > SG_DB_VERSION)
    return sg_err_set(SG_EUNSUPPORTED,
                      "results db %s: schema version %d is newer than this sgdlab's (%d); "
                      "use a newer sgdlab or another --db",
                      r->path, version, SG_DB_VERSION);
  if (version == SG_DB_VERSION) return SG_OK;
  SG_CHECK(exec(r, "BEGIN IMMEDIATE"));
  int rc = migrate(r, version);
  if (rc < 0) {
    sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  return exec(r, "COMMIT");
}

/* The database's clock now, into r->opened_at (claims compare with it). */
static int clock_now(sg_recorder_t *r) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db, "SELECT " NOW_SQL, -1, &s, NULL) != SQLITE_OK ||
      sqlite3_step(s) != SQLITE_ROW) {
    sqlite3_finalize(s);
    return db_err(r, "reading the clock");
  }
  snprintf(r->opened_at, sizeof r->opened_at, "%s", (const char *)sqlite3_column_text(s, 0));
  sqlite3_finalize(s);
  return SG_OK;
}

int sg_recorder_open(sg_recorder_t **out, const char *path) {
  int rc;
  char real[PATH_MAX + 256];
  sg_recorder_t *r = calloc(1, sizeof *r);
  if (!r) return SG_ENOMEM;
  if (!(r->path = strdup(path))) {
    free(r);
    return SG_ENOMEM;
  }
  r->seed = (unsigned)getpid() ^ (unsigned)(sg_now() * 1e6);
  SG_TRY(check_db_path(path, real, sizeof real));
  if (sqlite3_open_v2(real, &r->db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW,
                      NULL) != SQLITE_OK) {
    rc = db_err(r, "cannot open");
    goto fail;
  }
  sqlite3_busy_handler(r->db, busy_wait, r);
  /* journal_mode returns a row; exec ignores it.  A file we cannot write
   * fails here or at the schema step, before anything is launched. */
  SG_TRY(exec(r, "PRAGMA journal_mode=WAL"));
  SG_TRY(exec(r, "PRAGMA synchronous=NORMAL"));
  SG_TRY(exec(r, "PRAGMA foreign_keys=ON"));
  SG_TRY(schema(r));
  SG_TRY(sg_views_install(r->db, 0)); /* for sqlite3 users; readers never write them */
  for (int i = 0; i < ST_N; i++)
    if (sqlite3_prepare_v2(r->db, STMT_SQL[i], -1, &r->st[i], NULL) != SQLITE_OK) {
      rc = db_err(r, "preparing statements");
      goto fail;
    }
  SG_TRY(clock_now(r));
  rc = sg_reconcile(r); /* runs whose harness died */
  if (rc < 0) goto fail;
  *out = r;
  return SG_OK;
fail:
  sg_recorder_close(&r);
  return rc;
}

static void rows_clear(sg_recorder_t *r) {
  for (size_t k = 0; k < r->nrows; k++)
    for (int i = 0; i < r->rows[k].n; i++) free(r->rows[k].v[i].t);
  r->nrows = 0;
  r->nomem = 0;
}

/* Bind row w's values to its statement and run it. */
static int write_row(sg_recorder_t *r, const row_t *w) {
  sqlite3_stmt *s = r->st[w->stmt];
  for (int i = 0; i < w->n; i++) {
    const val_t *v = &w->v[i];
    if (v->type == 'i') sqlite3_bind_int64(s, i + 1, v->i);
    else if (v->type == 'd') sqlite3_bind_double(s, i + 1, v->d);
    else if (v->type == 't') sqlite3_bind_text(s, i + 1, v->t, -1, SQLITE_STATIC);
    else sqlite3_bind_null(s, i + 1);
  }
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SG_OK : db_err(r, "writing a batch of records");
}

/* The batch in one short write transaction: the lock is held for the
 * inserts only, never between batches. */
int sg_recorder_flush(sg_recorder_t *r) {
  int rc = SG_OK;
  if (!r->nrows) return SG_OK;
  if (r->nomem) rc = sg_err_set(SG_ENOMEM, "results db %s: out of memory for records", r->path);
  else if ((rc = exec(r, "BEGIN IMMEDIATE")) == SG_OK) {
    for (size_t k = 0; rc == SG_OK && k < r->nrows; k++) rc = write_row(r, &r->rows[k]);
    if (rc == SG_OK) rc = exec(r, "COMMIT");
    if (rc < 0) sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
  }
  rows_clear(r);
  return rc;
}

int sg_recorder_tick(sg_recorder_t *r) {
  if (r->nrows && (r->nrows >= SG_DB_BATCH_ROWS || sg_now() - r->tx_t0 >= SG_DB_BATCH_SECONDS))
    return sg_recorder_flush(r);
  return SG_OK;
}

void sg_recorder_close(sg_recorder_t **pr) {
  if (!pr || !*pr) return;
  sg_recorder_t *r = *pr;
  if (r->db) {
    sg_recorder_flush(r);
    for (int i = 0; i < ST_N; i++) sqlite3_finalize(r->st[i]);
    sqlite3_close(r->db);
  }
  rows_clear(r);
  free(r->rows);
  free(r->path);
  free(r);
  *pr = NULL;
}

void *sg_recorder_sqlite(sg_recorder_t *r) { return r->db; }

/* A new row of the batch for statement `stmt`. */
static row_t *batch_row(sg_recorder_t *r, int stmt) {
  if (r->nrows == r->cap) {
    size_t nc = r->cap ? 2 * r->cap : SG_DB_BATCH_ROWS;
    row_t *g = realloc(r->rows, nc * sizeof *g);
    if (!g) {
      sg_err_set(SG_ENOMEM, "results db %s: out of memory for records", r->path);
      return NULL;
    }
    r->rows = g;
    r->cap = nc;
  }
  if (!r->nrows) r->tx_t0 = sg_now();
  row_t *w = &r->rows[r->nrows++];
  w->stmt = stmt;
  w->n = 0;
  return w;
}

static void put_int(row_t *w, int64_t v) { w->v[w->n++] = (val_t){.type = 'i', .i = v}; }

static void put_real(row_t *w, double v) {
  w->v[w->n++] = isnan(v) ? (val_t){.type = 'n'} : (val_t){.type = 'd', .d = v};
}

static void put_text(sg_recorder_t *r, row_t *w, const char *v) {
  char *t = v ? strdup(v) : NULL;
  if (v && !t) r->nomem = 1;
  w->v[w->n++] = t ? (val_t){.type = 't', .t = t} : (val_t){.type = 'n'};
}

static void bind_text(sqlite3_stmt *s, int i, const char *v) {
  if (v) sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(s, i);
}

int sg_recorder_experiment(sg_recorder_t *r, const char *name, const char *config_text,
                           int64_t *exp_id) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db,
                         "INSERT INTO experiments(name,config_text,started_at,host,version)"
                         " VALUES(?,?," NOW_SQL ",?,?)",
                         -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "inserting the experiment");
  bind_text(s, 1, name);
  bind_text(s, 2, config_text);
  bind_text(s, 3, host);
  bind_text(s, 4, SGDLAB_VERSION);
  int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "inserting the experiment");
  sqlite3_finalize(s);
  *exp_id = sqlite3_last_insert_rowid(r->db);
  return rc;
}

/* Insert a run row with `status` ('running': started now by this harness;
 * 'pending': planned, no harness yet). */
static int insert_run(sg_recorder_t *r, int64_t exp_id, const sg_run_row_t *w, const char *status,
                      int64_t *run_id) {
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db,
                         "INSERT INTO runs(experiment_id,engine,options_json,transport,launcher,"
                         "workers,servers,processes,repeat,seed,status)"
                         " VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                         -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "inserting a run");
  sqlite3_bind_int64(s, 1, exp_id);
  bind_text(s, 2, w->engine);
  bind_text(s, 3, w->options_json);
  bind_text(s, 4, w->transport);
  bind_text(s, 5, w->launcher);
  sqlite3_bind_int(s, 6, w->workers);
  sqlite3_bind_int(s, 7, w->servers);
  sqlite3_bind_int(s, 8, w->processes);
  sqlite3_bind_int(s, 9, w->repeat);
  sqlite3_bind_int64(s, 10, w->seed);
  bind_text(s, 11, status);
  int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "inserting a run");
  sqlite3_finalize(s);
  *run_id = sqlite3_last_insert_rowid(r->db);
  return rc;
}

int sg_recorder_run_plan(sg_recorder_t *r, int64_t exp_id, const sg_run_row_t *w,
                         int64_t *run_id) {
  return insert_run(r, exp_id, w, "pending", run_id);
}

/* Run the claim's statements (wipe[0] the UPDATE: its changes() tell
 * whether the row was ours to take; the DELETEs only then). */
static int claim_stmts(sg_recorder_t *r, int64_t run_id, int *claimed) {
  char host[256] = "?", self[128] = "";
  gethostname(host, sizeof host - 1);
  sg_proc_identity((int)getpid(), self, sizeof self);
  /* a resumed run starts over: what an earlier attempt recorded goes */
  static const char *const sql[] = {
      "UPDATE runs SET status='running', error=NULL, wall_s=NULL, finished_at=NULL,"
      " tmp_dir=NULL, started_at=" NOW_SQL ", harness_pid=?2, harness_host=?3, harness_start=?4"
      " WHERE id=?1 AND status IN ('pending','failed','interrupted')"
      " AND (started_at IS NULL OR started_at < ?5)",
      "DELETE FROM steps WHERE run_id=?1", "DELETE FROM evals WHERE run_id=?1",
      "DELETE FROM ranks WHERE run_id=?1", "DELETE FROM run_info WHERE run_id=?1"};
  *claimed = 0;
  for (size_t i = 0; i < sizeof sql / sizeof *sql; i++) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(r->db, sql[i], -1, &s, NULL) != SQLITE_OK)
      return db_err(r, "claiming a run");
    sqlite3_bind_int64(s, 1, run_id);
    if (i == 0) {
      sqlite3_bind_int(s, 2, (int)getpid());
      bind_text(s, 3, host);
      bind_text(s, 4, self[0] ? self : NULL);
      bind_text(s, 5, r->opened_at);
    }
    int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "claiming a run");
    sqlite3_finalize(s);
    SG_CHECK(rc);
    if (i == 0 && !(*claimed = sqlite3_changes(r->db) == 1)) return SG_OK;
  }
  return SG_OK;
}

int sg_recorder_run_claim(sg_recorder_t *r, int64_t run_id) {
  int claimed = 0;
  SG_CHECK(sg_recorder_flush(r));
  SG_CHECK(exec(r, "BEGIN IMMEDIATE"));
  int rc = claim_stmts(r, run_id, &claimed);
  if (rc < 0) {
    sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  SG_CHECK(exec(r, "COMMIT"));
  return claimed;
}

int sg_recorder_run_begin(sg_recorder_t *r, int64_t exp_id, const sg_run_row_t *w,
                          int64_t *run_id) {
  SG_CHECK(insert_run(r, exp_id, w, "pending", run_id));
  int rc = sg_recorder_run_claim(r, *run_id);
  if (rc == 0) /* a row inserted just now: no one else knows it */
    return sg_err_set(SG_EINTERNAL, "results db %s: run %lld was taken as it was made", r->path,
                      (long long)*run_id);
  return rc < 0 ? rc : SG_OK;
}

int sg_recorder_run_end(sg_recorder_t *r, int64_t run_id, const char *status, const char *error,
                        double wall_s) {
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db,
                         "UPDATE runs SET status=?, error=?, wall_s=?, finished_at=" NOW_SQL
                         " WHERE id=?",
                         -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "finishing a run");
  bind_text(s, 1, status);
  bind_text(s, 2, error);
  sqlite3_bind_double(s, 3, wall_s);
  sqlite3_bind_int64(s, 4, run_id);
  int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "finishing a run");
  sqlite3_finalize(s);
  return rc;
}

int sg_recorder_run_dir(sg_recorder_t *r, int64_t run_id, const char *dir) {
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db, "UPDATE runs SET tmp_dir=? WHERE id=?", -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "recording a run's temp dir");
  bind_text(s, 1, dir);
  sqlite3_bind_int64(s, 2, run_id);
  int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "recording a run's temp dir");
  sqlite3_finalize(s);
  return rc;
}

static const char *kind_name(sg_role_kind_t kind) {
  return kind == SG_ROLE_HUB ? "hub" : "worker";
}

int sg_recorder_rank(sg_recorder_t *r, int64_t run_id, int rank, const char *role,
                     sg_role_kind_t kind, const char *host, int pid, const char *cluster_host,
                     const char *address) {
  row_t *w = batch_row(r, ST_RANK);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, rank);
  put_text(r, w, role);
  put_text(r, w, host);
  put_int(w, pid);
  put_text(r, w, cluster_host);
  put_text(r, w, address);
  put_text(r, w, kind_name(kind));
  return SG_OK;
}

int sg_recorder_info(sg_recorder_t *r, int64_t run_id, const char *key, const char *value) {
  row_t *w = batch_row(r, ST_INFO);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_text(r, w, key);
  put_text(r, w, value);
  return SG_OK;
}

int sg_recorder_step(sg_recorder_t *r, int64_t run_id, int rank, const char *role,
                     sg_role_kind_t kind, const sg_step_rec_t *x, double t_raw) {
  row_t *w = batch_row(r, ST_STEP);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, rank);
  put_text(r, w, role);
  put_int(w, x->step);
  put_int(w, x->epoch);
  put_real(w, x->t_start);
  put_real(w, x->compute_s);
  put_real(w, x->comm_s);
  put_real(w, x->wait_s);
  put_int(w, (int64_t)x->bytes_sent);
  put_int(w, (int64_t)x->bytes_recv);
  put_real(w, x->loss);
  if (x->staleness < 0) w->v[w->n++] = (val_t){.type = 'n'};
  else put_int(w, x->staleness);
  put_real(w, t_raw);
  put_text(r, w, kind_name(kind));
  return SG_OK;
}

int sg_recorder_clock(sg_recorder_t *r, int64_t run_id, int rank, int end, double offset_s,
                      double unc_s, double at_s) {
  row_t *w = batch_row(r, end ? ST_CLOCK1 : ST_CLOCK0);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, rank);
  put_real(w, offset_s);
  put_real(w, unc_s);
  put_real(w, at_s);
  return SG_OK;
}

int sg_recorder_clock_drift(sg_recorder_t *r, int64_t run_id, int rank, double offset_s,
                            double slope, double at_s) {
  row_t *w = batch_row(r, ST_DRIFT);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, rank);
  put_real(w, offset_s);
  put_real(w, slope);
  put_real(w, at_s);
  return SG_OK;
}

int sg_recorder_bucket(sg_recorder_t *r, int64_t run_id, int rank, const sg_bucket_rec_t *b) {
  row_t *w = batch_row(r, ST_BUCKET);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, rank);
  put_int(w, b->step);
  put_int(w, b->bucket);
  put_int(w, b->nbuckets);
  put_int(w, (int64_t)b->offset);
  put_int(w, (int64_t)b->floats);
  put_real(w, b->ready_s);
  put_real(w, b->start_s);
  put_real(w, b->end_s);
  return SG_OK;
}

int sg_recorder_eval(sg_recorder_t *r, int64_t run_id, const sg_eval_rec_t *e) {
  row_t *w = batch_row(r, ST_EVAL);
  if (!w) return SG_ENOMEM;
  put_int(w, run_id);
  put_int(w, e->step);
  put_int(w, e->epoch);
  put_real(w, e->wall_s);
  put_int(w, e->samples);
  put_real(w, e->train_loss);
  put_real(w, e->test_loss);
  put_real(w, e->test_acc);
  return SG_OK;
}

int sg_recorder_bench(sg_recorder_t *r, int64_t exp_id, const sg_bench_rec_t *b) {
  char col[sizeof b->collective + 1], impl[sizeof b->impl + 1], tr[sizeof b->transport + 1];
  /* fixed-size fields need not be NUL-terminated on the wire */
  snprintf(col, sizeof col, "%.*s", (int)sizeof b->collective, b->collective);
  snprintf(impl, sizeof impl, "%.*s", (int)sizeof b->impl, b->impl);
  snprintf(tr, sizeof tr, "%.*s", (int)sizeof b->transport, b->transport);
  row_t *w = batch_row(r, ST_BENCH);
  if (!w) return SG_ENOMEM;
  put_int(w, exp_id);
  put_text(r, w, col);
  put_text(r, w, impl);
  put_text(r, w, tr);
  put_int(w, b->np);
  put_int(w, (int64_t)b->bytes);
  put_int(w, b->iters);
  put_real(w, b->t_min);
  put_real(w, b->t_median);
  put_real(w, b->t_max);
  put_real(w, b->algbw);
  put_real(w, b->busbw);
  put_int(w, b->wrong);
  return SG_OK;
}

int sg_recorder_find_experiment(sg_recorder_t *r, const char *name, const char *config_text,
                                int64_t *exp_id) {
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db,
                         "SELECT id FROM experiments WHERE name=? AND config_text=?"
                         " ORDER BY id DESC LIMIT 1",
                         -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "looking for the experiment");
  bind_text(s, 1, name);
  bind_text(s, 2, config_text);
  int rc = sqlite3_step(s);
  *exp_id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
  sqlite3_finalize(s);
  if (rc == SQLITE_ROW) return SG_OK;
  if (rc != SQLITE_DONE) return db_err(r, "looking for the experiment");
  return sg_err_set(SG_ENOTFOUND, "no experiment '%s' with this experiment file's text (and "
                    "--set options) in the results; nothing to resume", name);
}

void sg_recorder_rows_free(sg_run_state_t **rows, size_t n) {
  for (size_t i = 0; *rows && i < n; i++) {
    free((*rows)[i].status);
    free((*rows)[i].options_json);
  }
  free(*rows);
  *rows = NULL;
}

int sg_recorder_run_states(sg_recorder_t *r, int64_t exp_id, sg_run_state_t **out, size_t *n) {
  sg_run_state_t *rows = NULL;
  size_t cap = 0;
  int rc = SG_OK;
  *n = 0;
  SG_CHECK(sg_recorder_flush(r));
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(r->db, "SELECT id, status, options_json FROM runs WHERE experiment_id=?"
                         " ORDER BY id", -1, &s, NULL) != SQLITE_OK)
    return db_err(r, "reading the experiment's runs");
  sqlite3_bind_int64(s, 1, exp_id);
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    if (*n == cap) {
      sg_run_state_t *g = realloc(rows, (cap = cap ? 2 * cap : 64) * sizeof *g);
      if (!g) goto nomem;
      rows = g;
    }
    const char *st = (const char *)sqlite3_column_text(s, 1);
    const char *js = (const char *)sqlite3_column_text(s, 2);
    sg_run_state_t *w = &rows[(*n)++];
    w->id = sqlite3_column_int64(s, 0);
    w->status = strdup(st ? st : "");
    w->options_json = strdup(js ? js : "");
    if (!w->status || !w->options_json) goto nomem;
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) {
    sg_recorder_rows_free(&rows, *n);
    return db_err(r, "reading the experiment's runs");
  }
  *out = rows;
  return SG_OK;
nomem:
  sqlite3_finalize(s);
  sg_recorder_rows_free(&rows, *n);
  return SG_ENOMEM;
}
