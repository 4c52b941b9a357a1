/* recorder.c - SQLite storage (see recorder.h for the schema contract). */
#include "recorder.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "reconcile.h"

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

enum { ST_STEP, ST_EVAL, ST_BENCH, ST_RANK, ST_INFO, ST_N };
static const char *const STMT_SQL[ST_N] = {
    [ST_STEP] = "INSERT INTO steps(run_id,rank,role,step,epoch,t_start,compute_s,comm_s,wait_s,"
                "bytes_sent,bytes_recv,loss,staleness) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_EVAL] = "INSERT INTO evals(run_id,step,epoch,wall_s,samples,train_loss,test_loss,test_acc)"
                " VALUES(?,?,?,?,?,?,?,?)",
    [ST_BENCH] = "INSERT INTO bench(experiment_id,collective,impl,transport,np,bytes,iters,t_min,"
                 "t_median,t_max,algbw,busbw,wrong) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_RANK] = "INSERT INTO ranks(run_id,rank,role,host,pid,cluster_host,address)"
                " VALUES(?,?,?,?,?,?,?)",
    [ST_INFO] = "INSERT OR IGNORE INTO run_info(run_id,key,value) VALUES(?,?,?)",
};

struct sg_recorder {
  sqlite3 *db;
  char *path;
  sqlite3_stmt *st[ST_N];
  int in_tx;      /* a batch transaction is open */
  int rows;       /* rows in the open batch */
  double tx_t0;   /* sg_now() when the batch opened */
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

/* mkdir -p of the directory part of path. */
static int make_parent(const char *path) {
  char *d = strdup(path);
  if (!d) return SG_ENOMEM;
  char *slash = strrchr(d, '/');
  int rc = SG_OK;
  if (slash && slash != d) {
    *slash = '\0';
    for (char *p = d + 1;; p++) {
      if (*p == '/' || *p == '\0') {
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (stat(d, &sb) < 0) {
          if (mkdir(d, 0777) < 0 && errno != EEXIST) {
            rc = sg_err_set(SG_EIO, "results db %s: cannot create directory %s: %s", path, d,
                            strerror(errno));
            break;
          }
        } else if (!S_ISDIR(sb.st_mode)) {
          rc = sg_err_set(SG_EIO, "results db %s: %s is not a directory", path, d);
          break;
        }
        *p = c;
        if (!c) break;
      }
    }
  }
  free(d);
  return rc;
}

/* Bring the schema from version `from` to SG_DB_VERSION.  Each version
 * adds one step here (ALTER TABLE ...); nothing is ever dropped.  A new
 * file takes every step, so it ends up exactly as a migrated one. */
static int migrate(sg_recorder_t *r, int from) {
  if (from == 0) SG_CHECK(exec(r, SCHEMA_V1));
  if (from < 2) SG_CHECK(exec(r, MIGRATE_V2));
  if (from < 3) SG_CHECK(exec(r, MIGRATE_V3));
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d", SG_DB_VERSION);
  SG_CHECK(exec(r, sql));
  return SG_OK;
}

int sg_recorder_open(sg_recorder_t **out, const char *path) {
  int rc;
  sg_recorder_t *r = calloc(1, sizeof *r);
  if (!r) return SG_ENOMEM;
  if (!(r->path = strdup(path))) {
    free(r);
    return SG_ENOMEM;
  }
  SG_TRY(make_parent(path));
  if (sqlite3_open_v2(path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
      SQLITE_OK) {
    rc = db_err(r, "cannot open");
    goto fail;
  }
  sqlite3_busy_timeout(r->db, 10000);
  /* journal_mode returns a row; exec ignores it.  A file we cannot write
   * fails here or at the schema step, before anything is launched. */
  SG_TRY(exec(r, "PRAGMA journal_mode=WAL"));
  SG_TRY(exec(r, "PRAGMA synchronous=NORMAL"));
  SG_TRY(exec(r, "PRAGMA foreign_keys=ON"));

  sqlite3_stmt *v = NULL;
  if (sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &v, NULL) != SQLITE_OK) {
    rc = db_err(r, "reading the schema version");
    goto fail;
  }
  int version = sqlite3_step(v) == SQLITE_ROW ? sqlite3_column_int(v, 0) : 0;
  sqlite3_finalize(v);
  if (version > SG_DB_VERSION) {
    rc = sg_err_set(SG_EUNSUPPORTED,
                    "results db %s: schema version %d is newer than this sgdlab's (%d); "
                    "use a newer sgdlab or another --db",
                    path, version, SG_DB_VERSION);
    goto fail;
  }
  if (version < SG_DB_VERSION) {
    SG_TRY(exec(r, "BEGIN IMMEDIATE"));
    rc = migrate(r, version);
    if (rc < 0) {
      sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
      goto fail;
    }
    SG_TRY(exec(r, "COMMIT"));
  }
  for (int i = 0; i < ST_N; i++)
    if (sqlite3_prepare_v2(r->db, STMT_SQL[i], -1, &r->st[i], NULL) != SQLITE_OK) {
      rc = db_err(r, "preparing statements");
      goto fail;
    }
  rc = sg_reconcile(r); /* runs whose harness died */
  if (rc < 0) goto fail;
  *out = r;
  return SG_OK;
fail:
  sg_recorder_close(&r);
  return rc;
}

int sg_recorder_flush(sg_recorder_t *r) {
  if (!r->in_tx) return SG_OK;
  r->in_tx = 0;
  r->rows = 0;
  return exec(r, "COMMIT");
}

int sg_recorder_tick(sg_recorder_t *r) {
  if (r->in_tx && (r->rows >= SG_DB_BATCH_ROWS || sg_now() - r->tx_t0 >= SG_DB_BATCH_SECONDS))
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
  free(r->path);
  free(r);
  *pr = NULL;
}

void *sg_recorder_sqlite(sg_recorder_t *r) { return r->db; }

/* Open the batch transaction if needed. */
static int batch_row(sg_recorder_t *r) {
  if (!r->in_tx) {
    SG_CHECK(exec(r, "BEGIN"));
    r->in_tx = 1;
    r->rows = 0;
    r->tx_t0 = sg_now();
  }
  r->rows++;
  return SG_OK;
}

static void bind_real(sqlite3_stmt *s, int i, double v) {
  if (isnan(v)) sqlite3_bind_null(s, i);
  else sqlite3_bind_double(s, i, v);
}

static void bind_text(sqlite3_stmt *s, int i, const char *v) {
  if (v) sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(s, i);
}

static int run_stmt(sg_recorder_t *r, sqlite3_stmt *s, const char *what) {
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SG_OK : db_err(r, what);
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

int sg_recorder_run_start(sg_recorder_t *r, int64_t run_id) {
  char host[256] = "?", self[128] = "";
  gethostname(host, sizeof host - 1);
  sg_proc_identity((int)getpid(), self, sizeof self);
  SG_CHECK(sg_recorder_flush(r));
  /* a resumed run starts over: what an earlier attempt recorded goes */
  static const char *const wipe[] = {"DELETE FROM steps WHERE run_id=?",
                                     "DELETE FROM evals WHERE run_id=?",
                                     "DELETE FROM ranks WHERE run_id=?",
                                     "DELETE FROM run_info WHERE run_id=?",
                                     "UPDATE runs SET status='running', error=NULL, wall_s=NULL,"
                                     " finished_at=NULL, tmp_dir=NULL, started_at=" NOW_SQL ","
                                     " harness_pid=?2, harness_host=?3, harness_start=?4"
                                     " WHERE id=?1"};
  for (size_t i = 0; i < sizeof wipe / sizeof *wipe; i++) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(r->db, wipe[i], -1, &s, NULL) != SQLITE_OK)
      return db_err(r, "starting a run");
    sqlite3_bind_int64(s, 1, run_id);
    if (i == sizeof wipe / sizeof *wipe - 1) {
      sqlite3_bind_int(s, 2, (int)getpid());
      bind_text(s, 3, host);
      bind_text(s, 4, self[0] ? self : NULL);
    }
    int rc = sqlite3_step(s) == SQLITE_DONE ? SG_OK : db_err(r, "starting a run");
    sqlite3_finalize(s);
    SG_CHECK(rc);
  }
  return SG_OK;
}

int sg_recorder_run_begin(sg_recorder_t *r, int64_t exp_id, const sg_run_row_t *w,
                          int64_t *run_id) {
  SG_CHECK(insert_run(r, exp_id, w, "pending", run_id));
  return sg_recorder_run_start(r, *run_id);
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

int sg_recorder_rank(sg_recorder_t *r, int64_t run_id, int rank, const char *role,
                     const char *host, int pid, const char *cluster_host, const char *address) {
  sqlite3_stmt *s = r->st[ST_RANK];
  SG_CHECK(batch_row(r));
  sqlite3_bind_int64(s, 1, run_id);
  sqlite3_bind_int(s, 2, rank);
  bind_text(s, 3, role);
  bind_text(s, 4, host);
  sqlite3_bind_int(s, 5, pid);
  bind_text(s, 6, cluster_host);
  bind_text(s, 7, address);
  return run_stmt(r, s, "inserting a rank");
}

int sg_recorder_info(sg_recorder_t *r, int64_t run_id, const char *key, const char *value) {
  sqlite3_stmt *s = r->st[ST_INFO];
  SG_CHECK(batch_row(r));
  sqlite3_bind_int64(s, 1, run_id);
  bind_text(s, 2, key);
  bind_text(s, 3, value);
  return run_stmt(r, s, "inserting run info");
}

int sg_recorder_step(sg_recorder_t *r, int64_t run_id, int rank, const char *role,
                     const sg_step_rec_t *x) {
  sqlite3_stmt *s = r->st[ST_STEP];
  SG_CHECK(batch_row(r));
  sqlite3_bind_int64(s, 1, run_id);
  sqlite3_bind_int(s, 2, rank);
  bind_text(s, 3, role);
  sqlite3_bind_int64(s, 4, x->step);
  sqlite3_bind_int(s, 5, x->epoch);
  bind_real(s, 6, x->t_start);
  bind_real(s, 7, x->compute_s);
  bind_real(s, 8, x->comm_s);
  bind_real(s, 9, x->wait_s);
  sqlite3_bind_int64(s, 10, (sqlite3_int64)x->bytes_sent);
  sqlite3_bind_int64(s, 11, (sqlite3_int64)x->bytes_recv);
  bind_real(s, 12, x->loss);
  if (x->staleness < 0) sqlite3_bind_null(s, 13);
  else sqlite3_bind_int64(s, 13, x->staleness);
  return run_stmt(r, s, "inserting a step");
}

int sg_recorder_eval(sg_recorder_t *r, int64_t run_id, const sg_eval_rec_t *e) {
  sqlite3_stmt *s = r->st[ST_EVAL];
  SG_CHECK(batch_row(r));
  sqlite3_bind_int64(s, 1, run_id);
  sqlite3_bind_int64(s, 2, e->step);
  sqlite3_bind_int(s, 3, e->epoch);
  bind_real(s, 4, e->wall_s);
  sqlite3_bind_int64(s, 5, e->samples);
  bind_real(s, 6, e->train_loss);
  bind_real(s, 7, e->test_loss);
  bind_real(s, 8, e->test_acc);
  return run_stmt(r, s, "inserting an eval");
}

int sg_recorder_bench(sg_recorder_t *r, int64_t exp_id, const sg_bench_rec_t *b) {
  sqlite3_stmt *s = r->st[ST_BENCH];
  char col[sizeof b->collective + 1], impl[sizeof b->impl + 1], tr[sizeof b->transport + 1];
  /* fixed-size fields need not be NUL-terminated on the wire */
  snprintf(col, sizeof col, "%.*s", (int)sizeof b->collective, b->collective);
  snprintf(impl, sizeof impl, "%.*s", (int)sizeof b->impl, b->impl);
  snprintf(tr, sizeof tr, "%.*s", (int)sizeof b->transport, b->transport);
  SG_CHECK(batch_row(r));
  sqlite3_bind_int64(s, 1, exp_id);
  bind_text(s, 2, col);
  bind_text(s, 3, impl);
  bind_text(s, 4, tr);
  sqlite3_bind_int(s, 5, b->np);
  sqlite3_bind_int64(s, 6, (sqlite3_int64)b->bytes);
  sqlite3_bind_int(s, 7, b->iters);
  bind_real(s, 8, b->t_min);
  bind_real(s, 9, b->t_median);
  bind_real(s, 10, b->t_max);
  bind_real(s, 11, b->algbw);
  bind_real(s, 12, b->busbw);
  sqlite3_bind_int64(s, 13, b->wrong);
  return run_stmt(r, s, "inserting a bench row");
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
