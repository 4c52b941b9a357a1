/* report_data.c - load runs and their summary numbers from the database.
 *
 * Definitions of every number are in report.h.  All queries are plain SQL
 * over the results tables' columns; options come from runs.options_json
 * through SQLite's JSON functions.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "bench_method.h"
#include "err.h"
#include "report.h"
#include "views.h"

int sg_rdb_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st) {
  if (sqlite3_prepare_v2(db, sql, -1, st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EFORMAT, "database query failed: %s (query: %.60s...)",
                      sqlite3_errmsg(db), sql);
  return SG_OK;
}

const char *sg_rdb_text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? (const char *)t : "";
}

double sg_rdb_double(sqlite3_stmt *st, int col) {
  if (sqlite3_column_type(st, col) == SQLITE_NULL) return NAN;
  return sqlite3_column_double(st, col);
}

static void copy_str(char *dst, size_t len, const char *src) {
  snprintf(dst, len, "%s", src ? src : "");
}

/* "file:PATH?QUERY" with PATH percent-encoded (SQLite's URI form). */
static char *db_uri(const char *path, const char *query) {
  size_t n = strlen(path);
  char *u = malloc(3 * n + strlen(query) + 8), *o = u;
  if (!u) return NULL;
  o += sprintf(o, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (isalnum(*p) || strchr("/-._~", *p)) *o++ = (char)*p;
    else o += sprintf(o, "%%%02X", *p);
  }
  sprintf(o, "?%s", query);
  return u;
}

/* A database may be anyone's (a student's, one someone sent you):
 * SQLite's settings for untrusted files.  No extension loads, its shadow
 * tables stay read-only, every page's cells are checked, no string or
 * blob grows past 64 MiB.  trusted_schema stays on: the file's own
 * run_summary views, when they are sgdlab's text exactly, use
 * json_extract, which SQLite 3.40 refuses in a schema without it;
 * plain_tables and sg_views_ready keep every other view of the file
 * from being read. */
static void untrusted_file(sqlite3 *db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, NULL);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, NULL);
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, 64 << 20);
  sqlite3_exec(db, "PRAGMA cell_size_check = ON", NULL, NULL, NULL);
}

/* The tables sgdlab reads must be plain tables of the file, as the
 * recorder makes them: a view, a virtual table or a generated column
 * under one of these names would run the file's own SQL on every read
 * (a recursive view never ends and fills the temp directory).  The
 * views sgdlab reads through (views.h) are its own TEMP ones whenever
 * the file's differ. */
static int plain_tables(sqlite3 *db, const char *path) {
  static const char *const T[] = {"experiments", "runs", "steps", "evals", "run_info",
                                  "ranks", "bench", "claims", NULL};
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  if (sqlite3_prepare_v2(db,
                         "SELECT m.type, coalesce(m.sql, ''), (SELECT count(*) FROM"
                         " pragma_table_xinfo(m.name, 'main') x WHERE x.hidden <> 0)"
                         " FROM main.sqlite_master m WHERE m.type IN ('table', 'view')"
                         " AND m.name = ?1 COLLATE NOCASE",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EFORMAT, "%s: reading its schema: %s", path, sqlite3_errmsg(db));
  for (int i = 0; T[i] && rc == SG_OK; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, T[i], -1, SQLITE_STATIC);
    int e = sqlite3_step(st);
    if (e == SQLITE_DONE) continue; /* absent: the query that needs it says so */
    const char *type = e == SQLITE_ROW ? sg_rdb_text(st, 0) : "";
    if (e != SQLITE_ROW)
      rc = sg_err_set(SG_EFORMAT, "%s: reading its schema: %s", path, sqlite3_errmsg(db));
    else if (strcmp(type, "table") || strncasecmp(sg_rdb_text(st, 1), "CREATE TABLE", 12) ||
             sqlite3_column_int(st, 2))
      rc = sg_err_set(SG_EFORMAT,
                      "%s: '%s' is a %s, not a plain table: not an sgdlab results database",
                      path, T[i], strcmp(type, "table") ? type
                                  : strncasecmp(sg_rdb_text(st, 1), "CREATE TABLE", 12)
                                      ? "virtual table"
                                      : "table with generated columns");
  }
  sqlite3_finalize(st);
  return rc;
}

/* Open path read-only (query "mode=ro" or "immutable=1") and count its
 * experiments and runs tables: 0 with *ntables set, or the SQLite code
 * of what failed (*db open or NULL; the caller closes it). */
static int open_ro(sqlite3 **db, const char *path, const char *query, int *ntables) {
  sqlite3_stmt *st = NULL;
  char *uri = db_uri(path, query);
  if (!uri) return SQLITE_NOMEM;
  int rc = sqlite3_open_v2(uri, db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL);
  free(uri);
  if (rc != SQLITE_OK) return rc;
  sqlite3_busy_timeout(*db, 5000); /* a run may be committing right now */
  untrusted_file(*db);
  rc = sqlite3_prepare_v2(*db,
                          "SELECT count(*) FROM sqlite_master WHERE type='table'"
                          " AND name IN ('experiments','runs')",
                          -1, &st, NULL);
  if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    *ntables = sqlite3_column_int(st, 0);
    rc = SQLITE_OK;
  }
  sqlite3_finalize(st);
  return rc;
}

/* Readers never write: mode=ro, and where the -shm that WAL needs cannot
 * be made (a directory this user cannot write), immutable=1, which reads
 * the file as it is on disk. */
int sg_rdb_open(sqlite3 **out, const char *path) {
  struct stat sb;
  sqlite3 *db = NULL;
  int rc = SG_OK, n = 0, e;
  *out = NULL;
  if (stat(path, &sb) != 0)
    return sg_err_set(SG_ENOTFOUND, "cannot open database %s: %s", path,
                      strerror(errno));
  /* a FIFO would block the open until someone writes to it */
  if (!S_ISREG(sb.st_mode))
    return sg_err_set(SG_EFORMAT, "%s is not a regular file; a results database is one",
                      path);
  e = open_ro(&db, path, "mode=ro", &n);
  if ((e & 0xff) == SQLITE_CANTOPEN || (e & 0xff) == SQLITE_READONLY) {
    sqlite3_close(db);
    db = NULL;
    e = open_ro(&db, path, "immutable=1", &n);
  }
  if (e != SQLITE_OK) {
    rc = sg_err_set(SG_EFORMAT, "%s is not a readable SQLite database: %s", path,
                    db ? sqlite3_errmsg(db) : sqlite3_errstr(e));
    goto fail;
  }
  if (n != 2) {
    rc = sg_err_set(SG_EFORMAT,
                    "%s is not an sgdlab results database (no experiments/runs"
                    " tables)", path);
    goto fail;
  }
  SG_TRY(plain_tables(db, path));
  SG_TRY(sg_views_ready(db));
  *out = db;
  return SG_OK;
fail:
  sqlite3_close(db);
  return rc;
}

int sg_rdb_experiment(sqlite3 *db, const char *sel, int64_t *id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, numeric = sel && *sel && strspn(sel, "0123456789") == strlen(sel);
  const char *sql =
      !sel ? "SELECT id FROM experiments ORDER BY id DESC LIMIT 1"
      : numeric ? "SELECT id FROM experiments WHERE id = ?1"
                : "SELECT id FROM experiments WHERE name = ?1 ORDER BY id DESC"
                  " LIMIT 1";
  SG_TRY(sg_rdb_prepare(db, sql, &st));
  if (sel && numeric) sqlite3_bind_int64(st, 1, strtoll(sel, NULL, 10));
  else if (sel) sqlite3_bind_text(st, 1, sel, -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_ROW) {
    rc = sel ? sg_err_set(SG_ENOTFOUND, "no experiment %s '%s' in the database",
                          numeric ? "with id" : "named", sel)
             : sg_err_set(SG_ENOTFOUND, "the database has no experiments yet");
    goto fail;
  }
  *id = sqlite3_column_int64(st, 0);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* ---- variant labels ---------------------------------------------------- */

/* Settings that never make a variant: identity, repeats, where files go. */
static int never_swept(const char *key) {
  static const char *const keys[] = {"name", "seed", "repeat", "workers",
                                     "dump_params", "engine", "data_dir",
                                     "hosts", NULL};
  if (key[0] == '_') return 1; /* internal spec keys */
  for (const char *const *k = keys; *k; k++)
    if (strcmp(*k, key) == 0) return 1;
  return 0;
}

/* Keys the engine's label spells when they matter (sg_engine_label). */
static int in_base(const char *engine, const char *key) {
  const sg_engine_t *e = sg_engine_find(engine);
  return e ? sg_engine_label_spells(e, key) : !strcmp(key, "mode") || !strcmp(key, "algorithm");
}

typedef struct kv {
  size_t run;
  char *key, *val;
} kv_t;

/* v := the structured variant `json` (an object of strings, as
 * harness/run/variant.c stores it in _variant). */
static int parse_variant(sqlite3 *db, const char *json, sg_opts_t *v) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT key, CASE type WHEN 'true' THEN 'true' WHEN 'false'"
                        " THEN 'false' ELSE value END FROM json_each(?1)"
                        " WHERE json_valid(?1) AND json_type(?1) = 'object'",
                        &st));
  sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
  while (rc == SG_OK && sqlite3_step(st) == SQLITE_ROW)
    rc = sg_opts_set(v, sg_rdb_text(st, 0), sg_rdb_text(st, 1));
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Run r's series name (report.h) when its servers S divide its workers N:
 * rendered as its name was, from its variant (decided runs) or the engine
 * label (older runs: add_swept appends the same settings to both), with
 * servers=N/(N/S); left empty (the variant) otherwise or when it does not
 * fit.  o: the run's recorded options. */
static int series_name(sqlite3 *db, sg_rrun_t *r, const sg_engine_t *e, sg_opts_t *o) {
  char ratio[32], *whole = NULL;
  int rc = SG_OK;
  sg_opts_t *v = NULL;
  r->series[0] = '\0';
  if (!e || r->servers < 2 || r->workers % r->servers || !sg_setting_find(e->options, "servers"))
    return SG_OK;
  snprintf(ratio, sizeof ratio, "N/%d", r->workers / r->servers);
  SG_TRY(sg_opts_set(o, "servers", ratio));
  if (!r->decided) {
    sg_engine_label(e, o, r->series, sizeof r->series);
    return SG_OK;
  }
  if (!(v = sg_opts_new())) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(parse_variant(db, sg_opts_get(o, "_variant"), v));
  if (!(whole = sg_variant_render(e, o, v, !strcmp(r->launcher, "smpirun")))) {
    rc = sg_err_set(SG_ENOMEM, "report: out of memory");
    goto fail;
  }
  sg_printable(r->series, sizeof r->series, whole);
  if (strlen(r->series) >= sizeof r->series - 1) r->series[0] = '\0'; /* cut: no merging */
fail:
  free(whole);
  sg_opts_destroy(&v);
  return rc;
}

/* Run i's base label from the engine table, over its recorded options
 * (an engine this build does not know: its name), its series name, and
 * the properties the figures need from the same table. */
static int label_run(sqlite3 *db, sg_rrun_t *r, size_t i, const kv_t *kv, size_t nkv) {
  const sg_engine_t *e = sg_engine_find(r->engine);
  sg_opts_t *o = sg_opts_new();
  int rc = SG_OK;
  if (!o) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(sg_opts_set(o, "transport", r->transport));
  for (size_t k = 0; k < nkv; k++)
    if (kv[k].run == i) SG_TRY(sg_opts_set(o, kv[k].key, kv[k].val));
  const char *named = sg_opts_get(o, "_label"); /* what the harness called it */
  /* A run with a _variant was named when its experiment was expanded,
   * from the settings that tell it apart (harness/run/variant.c): its
   * _label is rendered from that key and is used as it is.  Older runs
   * get the swept settings appended below (add_swept). */
  r->decided = sg_opts_has(o, "_variant") && named && *named;
  if (named && *named) copy_str(r->base, sizeof r->base, named);
  else if (e) sg_engine_label(e, o, r->base, sizeof r->base);
  else copy_str(r->base, sizeof r->base, r->engine);
  copy_str(r->variant, sizeof r->variant, r->base);
  r->bytes_in_mpi = e && e->bytes_uncounted && e->bytes_uncounted(o);
  r->stale = e && e->stale && e->stale(o);
  SG_TRY(series_name(db, r, e, o)); /* last: it changes o's servers */
fail:
  sg_opts_destroy(&o);
  return rc;
}

/* Append " key=value" to each run's variant for every setting that takes
 * different values among runs of the same base label. */
static int add_swept(sg_rset_t *s, const kv_t *kv, size_t nkv) {
  char *swept = calloc(nkv ? nkv : 1, 1);
  if (!swept) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < nkv; i++) {
    const sg_rrun_t *ri = &s->runs[kv[i].run];
    if (ri->decided || never_swept(kv[i].key) || in_base(ri->engine, kv[i].key)) continue;
    for (size_t j = 0; j < i && !swept[i]; j++) {
      const sg_rrun_t *rj = &s->runs[kv[j].run];
      if (strcmp(kv[j].key, kv[i].key) || strcmp(ri->base, rj->base)) continue;
      if (strcmp(kv[j].val, kv[i].val)) swept[i] = 1;
    }
  }
  /* A key is swept if any of its rows is; label every run that has it. */
  for (size_t i = 0; i < nkv; i++) {
    int any = 0;
    for (size_t j = 0; j < nkv && !any; j++)
      any = swept[j] && !strcmp(kv[j].key, kv[i].key);
    if (!any) continue;
    sg_rrun_t *r = &s->runs[kv[i].run];
    if (r->decided || in_base(r->engine, kv[i].key)) continue;
    size_t len = strlen(r->variant);
    snprintf(r->variant + len, sizeof r->variant - len, " %s=%s", kv[i].key,
             kv[i].val);
    len = strlen(r->series);
    if (len) /* the older runs' series name carries the same settings */
      snprintf(r->series + len, sizeof r->series - len, " %s=%s", kv[i].key, kv[i].val);
  }
  free(swept);
  return SG_OK;
}

/* ---- per-run numbers --------------------------------------------------- */

static int load_evals(sqlite3 *db, sg_rrun_t *r, double target) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT step, wall_s, test_acc FROM evals"
                        " WHERE run_id = ?1 ORDER BY step, wall_s",
                        &st));
  sqlite3_bind_int64(st, 1, r->id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    double w = sg_rdb_double(st, 1), acc = sg_rdb_double(st, 2);
    int64_t step = sqlite3_column_int64(st, 0);
    r->nevals++;
    r->last_step = step;
    if (!isnan(acc)) r->final_acc = acc;
    if (isnan(r->t_target) && !isnan(acc) && acc >= target)
      r->t_target = w;
    /* The first eval after some training ends the warm-up period. */
    if (step > 0 && r->warm_step <= 0) r->warm_step = step;
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* samples/s (report.h): every worker rank's step rows from the first eval
 * period on, over the wall-clock span they cover.  Worker ranks are the
 * ranks with a loss (they compute gradients), never the mapreduce driver
 * (whose loss is the aggregate of its executors'); each of their rows is
 * one per-rank batch, including rows of an executor that ran no task that
 * step (loss NULL: its share went to another executor).  The span runs
 * from the earliest t_start to the latest step end (t_start + compute +
 * comm + wait) in the window; evaluation pauses inside it count for every
 * engine alike.  The window falls back to every step when the first eval
 * period is the whole run. */
static int load_throughput(sqlite3 *db, sg_rrun_t *r) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(
      db,
      "WITH w AS (SELECT DISTINCT rank FROM steps WHERE run_id = ?1"
      "   AND loss IS NOT NULL AND coalesce(kind, 'worker') <> 'hub'),"
      " s AS (SELECT t_start, t_start + coalesce(compute_s, 0)"
      "   + coalesce(comm_s, 0) + coalesce(wait_s, 0) AS t_end, step FROM steps"
      "   WHERE run_id = ?1 AND rank IN (SELECT rank FROM w))"
      " SELECT count(*), min(t_start), max(t_end) FROM s WHERE step >="
      "   CASE WHEN ?2 < (SELECT max(step) FROM s) THEN ?2 ELSE 0 END",
      &st));
  sqlite3_bind_int64(st, 1, r->id);
  sqlite3_bind_int64(st, 2, r->warm_step > 0 ? r->warm_step : 0);
  if (sqlite3_step(st) == SQLITE_ROW) {
    int64_t rows = sqlite3_column_int64(st, 0);
    double t0 = sg_rdb_double(st, 1), t1 = sg_rdb_double(st, 2);
    if (rows > 0 && r->rank_batch > 0 && t1 > t0)
      r->samples_per_s = (double)rows * (double)r->rank_batch / (t1 - t0);
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

static int load_steps(sqlite3 *db, sg_rrun_t *r) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(
      db,
      "SELECT (SELECT count(*) FROM steps WHERE run_id = ?1),"
      " (SELECT max(b) FROM (SELECT avg(bytes_sent + bytes_recv) AS b"
      "   FROM steps WHERE run_id = ?1 GROUP BY rank)),"
      " (SELECT EXISTS(SELECT 1 FROM steps WHERE run_id = ?1"
      "   AND staleness IS NOT NULL))",
      &st));
  sqlite3_bind_int64(st, 1, r->id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    r->step_rows = sqlite3_column_int64(st, 0);
    r->bytes_per_step = sg_rdb_double(st, 1);
    r->has_staleness = sqlite3_column_int(st, 2);
  }
  sqlite3_finalize(st);
  st = NULL;
  /* Worker ranks first; engines whose every rank is a server or driver
   * (none today) fall back to all ranks. */
  for (int pass = 0; pass < 2; pass++) {
    SG_TRY(sg_rdb_prepare(
        db,
        pass == 0 ? "SELECT avg(compute_s), avg(comm_s), avg(wait_s), count(*)"
                    " FROM steps WHERE run_id = ?1"
                    " AND coalesce(kind, 'worker') <> 'hub'"
                  : "SELECT avg(compute_s), avg(comm_s), avg(wait_s), count(*)"
                    " FROM steps WHERE run_id = ?1",
        &st));
    sqlite3_bind_int64(st, 1, r->id);
    int have = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 3) > 0;
    if (have) {
      r->compute_s = sg_rdb_double(st, 0);
      r->comm_s = sg_rdb_double(st, 1);
      r->wait_s = sg_rdb_double(st, 2);
    }
    sqlite3_finalize(st);
    st = NULL;
    if (have) break;
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* ---- the set ----------------------------------------------------------- */

int sg_rdb_run_experiment(sqlite3 *db, int64_t run_id, int64_t *exp_id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db, "SELECT experiment_id FROM runs WHERE id = ?1", &st));
  sqlite3_bind_int64(st, 1, run_id);
  if (sqlite3_step(st) != SQLITE_ROW) {
    rc = sg_err_set(SG_ENOTFOUND, "no run with id %lld in the database",
                    (long long)run_id);
    goto fail;
  }
  *exp_id = sqlite3_column_int64(st, 0);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* The experiment's name, start and host (a made-up name when it has no row) */
static int load_experiment(sqlite3 *db, sg_rset_t *s, int64_t exp_id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT name, started_at, host FROM experiments"
                        " WHERE id = ?1",
                        &st));
  sqlite3_bind_int64(st, 1, exp_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    copy_str(s->name, sizeof s->name, sg_rdb_text(st, 0));
    copy_str(s->started_at, sizeof s->started_at, sg_rdb_text(st, 1));
    copy_str(s->host, sizeof s->host, sg_rdb_text(st, 2));
  } else {
    snprintf(s->name, sizeof s->name, "experiment-%lld", (long long)exp_id);
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* One row of the runs query into a new run; the figures it has not yet
 * are NaN */
static void run_from_row(sg_rrun_t *r, sqlite3_stmt *st) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  r->experiment_id = sqlite3_column_int64(st, 1);
  copy_str(r->engine, sizeof r->engine, sg_rdb_text(st, 2));
  copy_str(r->transport, sizeof r->transport, sg_rdb_text(st, 3));
  copy_str(r->launcher, sizeof r->launcher, sg_rdb_text(st, 4));
  r->workers = sqlite3_column_int(st, 5);
  r->servers = sqlite3_column_int(st, 6);
  r->processes = sqlite3_column_int(st, 7);
  r->repeat = sqlite3_column_int(st, 8);
  r->seed = sqlite3_column_int64(st, 9);
  copy_str(r->status, sizeof r->status, sg_rdb_text(st, 10));
  copy_str(r->error, sizeof r->error, sg_rdb_text(st, 11));
  copy_str(r->started_at, sizeof r->started_at, sg_rdb_text(st, 12));
  r->wall_s = sg_rdb_double(st, 13);
  /* samples per step row: a worker's batch; the baseline runs N*b in one */
  r->rank_batch = sqlite3_column_int64(st, 14);
  const sg_engine_t *e = sg_engine_find(r->engine);
  if (e && e->baseline) r->rank_batch *= r->workers > 0 ? r->workers : 1;
  r->final_acc = r->t_target = r->samples_per_s = NAN;
  r->bytes_per_step = r->compute_s = r->comm_s = r->wait_s = NAN;
}

/* s->runs: run run_id, or (run_id < 0) every run of experiment exp_id */
static int load_runs(sqlite3 *db, sg_rset_t *s, int64_t exp_id, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(
      db,
      "SELECT id, experiment_id, engine, transport, launcher, workers, servers,"
      " processes, repeat, seed, status, error, started_at, wall_s,"
      " json_extract(options_json, '$.batch')"
      " FROM runs WHERE (?1 >= 0 AND id = ?1) OR (?1 < 0 AND experiment_id = ?2)"
      " ORDER BY id",
      &st));
  sqlite3_bind_int64(st, 1, run_id);
  sqlite3_bind_int64(st, 2, exp_id);
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    void *p = realloc(s->runs, (s->n + 1) * sizeof *s->runs);
    if (!p) {
      rc = sg_err_set(SG_ENOMEM, "report: out of memory");
      goto fail;
    }
    s->runs = p;
    run_from_row(&s->runs[s->n++], st);
  }
  if (rc != SQLITE_DONE) {
    rc = sg_err_set(SG_EIO, "reading runs: %s", sqlite3_errmsg(db));
    goto fail;
  }
  rc = SG_OK;
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Every (run, setting) pair of s's runs into *kv (grown; the caller frees
 * it, and the nkv entries it holds, also on failure) */
static int load_settings(sqlite3 *db, const sg_rset_t *s, kv_t **kv, size_t *nkv) {
  sqlite3_stmt *st = NULL;
  size_t cap = 0;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT j.key, CASE j.type WHEN 'true' THEN 'true'"
                        " WHEN 'false' THEN 'false' ELSE j.value END"
                        " FROM runs r, json_each(r.options_json) j WHERE r.id = ?1"
                        " AND json_valid(r.options_json)",
                        &st));
  for (size_t i = 0; i < s->n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      if (*nkv == cap) {
        size_t nc = cap ? 2 * cap : 64;
        void *p = realloc(*kv, nc * sizeof **kv);
        if (!p) {
          rc = sg_err_set(SG_ENOMEM, "report: out of memory");
          goto fail;
        }
        *kv = p;
        cap = nc;
      }
      kv_t *e = &(*kv)[(*nkv)++];
      e->run = i;
      e->key = strdup(sg_rdb_text(st, 0));
      e->val = strdup(sg_rdb_text(st, 1));
      if (!e->key || !e->val) {
        rc = sg_err_set(SG_ENOMEM, "report: out of memory");
        goto fail;
      }
    }
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* runs[i].key for every run: labels numbered in order of first appearance
 * (`first` holds, per key so far, a run with that label). */
static int assign_keys(sg_rset_t *s) {
  size_t *first = calloc(s->n ? s->n : 1, sizeof *first), nkeys = 0;
  char a[512], b[512];
  if (!first) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < s->n; i++) {
    size_t k = 0;
    sg_rrun_label(s, &s->runs[i], a, sizeof a);
    while (k < nkeys && strcmp(a, sg_rrun_label(s, &s->runs[first[k]], b, sizeof b))) k++;
    if (k == nkeys) first[nkeys++] = i;
    s->runs[i].key = (int)k;
  }
  free(first);
  return SG_OK;
}

const char *sg_rkey_text(int k, char *buf, size_t len) {
  char rev[16];
  int n = 0;
  do { /* bijective base 26: A..Z, AA..ZZ, AAA.. */
    rev[n++] = (char)('A' + k % 26);
    k = k / 26 - 1;
  } while (k >= 0 && n < (int)sizeof rev);
  size_t at = 0;
  while (n > 0 && at + 1 < len) buf[at++] = rev[--n];
  if (len) buf[at] = '\0';
  return buf;
}

int sg_rset_load(sqlite3 *db, int64_t exp_id, int64_t run_id, double target,
                 sg_rset_t **out) {
  sg_rset_t *s = NULL;
  kv_t *kv = NULL;
  size_t nkv = 0;
  int rc = SG_OK;
  *out = NULL;
  s = calloc(1, sizeof *s);
  if (!s) return sg_err_set(SG_ENOMEM, "report: out of memory");
  s->target = target;
  if (run_id >= 0) SG_TRY(sg_rdb_run_experiment(db, run_id, &exp_id));
  s->experiment_id = exp_id;
  s->exp_ids[0] = exp_id;
  s->nexp = 1;
  SG_TRY(load_experiment(db, s, exp_id));
  SG_TRY(load_runs(db, s, exp_id, run_id));
  for (size_t i = 0; i < s->n; i++) {
    SG_TRY(load_evals(db, &s->runs[i], target));
    SG_TRY(load_steps(db, &s->runs[i]));
    SG_TRY(load_throughput(db, &s->runs[i]));
  }

  /* Every (run, setting) pair, to find the settings swept in this set. */
  SG_TRY(load_settings(db, s, &kv, &nkv));
  for (size_t i = 0; i < s->n; i++) SG_TRY(label_run(db, &s->runs[i], i, kv, nkv));
  if (run_id < 0) SG_TRY(add_swept(s, kv, nkv));

  /* Workers vary when one variant ran with two worker counts. */
  for (size_t i = 0; i < s->n && !s->workers_vary; i++)
    for (size_t j = 0; j < i; j++)
      if (!strcmp(s->runs[i].variant, s->runs[j].variant) &&
          s->runs[i].workers != s->runs[j].workers)
        s->workers_vary = 1;
  SG_TRY(assign_keys(s));
  *out = s;
  s = NULL;
fail:
  for (size_t i = 0; i < nkv; i++) {
    free(kv[i].key);
    free(kv[i].val);
  }
  free(kv);
  sg_rset_destroy(&s);
  return rc;
}

void sg_rset_destroy(sg_rset_t **s) {
  if (!s || !*s) return;
  free((*s)->runs);
  free(*s);
  *s = NULL;
}

/* "PREFIX: " + dst into dst (cap bytes), cut at cap: a label cut short
 * still starts with its experiment. */
static void prepend(char *dst, size_t cap, const char *prefix) {
  char tmp[512];
  size_t p = strlen(prefix), d = strlen(dst);
  if (p > cap / 2) p = cap / 2;
  if (p + 2 + d >= sizeof tmp) d = sizeof tmp - p - 3;
  memcpy(tmp, prefix, p);
  memcpy(tmp + p, ": ", 2);
  memcpy(tmp + p + 2, dst, d);
  tmp[p + 2 + d] = '\0';
  snprintf(dst, cap, "%.*s", (int)(cap - 1), tmp);
}

/* Prefix every variant and base label of runs [from, to) with `prefix`. */
static void prefix_runs(sg_rset_t *s, size_t from, size_t to, const char *prefix) {
  for (size_t i = from; i < to; i++) {
    prepend(s->runs[i].variant, sizeof s->runs[i].variant, prefix);
    prepend(s->runs[i].base, sizeof s->runs[i].base, prefix);
  }
}

/* "name" or "name#id" when another experiment of the set has that name. */
static void exp_prefix(const char *name, int64_t id, int dup, char *buf, size_t len) {
  if (dup) snprintf(buf, len, "%s#%lld", name, (long long)id);
  else snprintf(buf, len, "%s", name);
}

int sg_rset_merge(sg_rset_t *into, sg_rset_t **addp, int join) {
  sg_rset_t *add = *addp;
  char p[160];
  if (into->nexp + add->nexp > SG_RSET_MAX_EXP)
    return sg_err_set(SG_EINVAL, "report: at most %d experiments in one report",
                      SG_RSET_MAX_EXP);
  void *q = realloc(into->runs, (into->n + add->n + 1) * sizeof *into->runs);
  if (!q) return sg_err_set(SG_ENOMEM, "report: out of memory");
  into->runs = q;
  /* A name seen before (as a substring: crude, but then the label only
   * says more) gets the experiment id too.  The first merge labels the
   * runs already there with their experiment. */
  int dup = strstr(into->name, add->name) != NULL;
  if (into->nexp == 1 && !join) {
    exp_prefix(into->name, into->experiment_id, dup, p, sizeof p);
    prefix_runs(into, 0, into->n, p);
  }
  memcpy(into->runs + into->n, add->runs, add->n * sizeof *add->runs);
  exp_prefix(add->name, add->experiment_id, dup, p, sizeof p);
  if (!join) prefix_runs(into, into->n, into->n + add->n, p);
  into->n += add->n;
  for (size_t i = 0; i < add->nexp; i++) into->exp_ids[into->nexp++] = add->exp_ids[i];
  size_t len = strlen(into->name);
  snprintf(into->name + len, sizeof into->name - len, " + %s", add->name);
  into->workers_vary |= add->workers_vary;
  if (join) /* one variant at other N in another experiment: a sweep */
    for (size_t i = 0; i < into->n; i++)
      for (size_t j = 0; j < i; j++)
        if (!strcmp(into->runs[i].variant, into->runs[j].variant) &&
            into->runs[i].workers != into->runs[j].workers)
          into->workers_vary = 1;
  sg_rset_destroy(addp);
  return assign_keys(into);
}

const char *sg_rset_ids_json(const sg_rset_t *s, char *buf, size_t len) {
  size_t at = 0;
  at += (size_t)snprintf(buf, len, "[");
  for (size_t i = 0; i < s->nexp && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? "," : "",
                           (long long)s->exp_ids[i]);
  if (at < len) snprintf(buf + at, len - at, "]");
  return buf;
}

const char *sg_rrun_label(const sg_rset_t *s, const sg_rrun_t *r, char *buf,
                          size_t len) {
  if (s->workers_vary)
    snprintf(buf, len, "%s, N=%d", r->variant, r->workers);
  else
    snprintf(buf, len, "%s", r->variant);
  return buf;
}

const char *sg_rfmt(char *buf, size_t len, const char *fmt, double v) {
  if (isnan(v)) snprintf(buf, len, "—");
  else snprintf(buf, len, fmt, v);
  return buf;
}

const char *sg_rfmt_bytes(char *buf, size_t len, double b) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  if (isnan(b)) return sg_rfmt(buf, len, "%g", b);
  while (b >= 1024 && u < 4) {
    b /= 1024;
    u++;
  }
  /* three significant digits: 4.39 KiB, 43.9 KiB, 439 KiB */
  if (u == 0) snprintf(buf, len, "%.0f B", b);
  else snprintf(buf, len, b < 10 ? "%.2f %s" : b < 100 ? "%.1f %s" : "%.0f %s", b,
                units[u]);
  return buf;
}

double sg_rmedian(double *v, size_t n) {
  if (n == 0) return NAN;
  qsort(v, n, sizeof *v, sg_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int sg_rset_load_run(sqlite3 *db, int64_t run_id, sg_rset_t **out, const sg_rrun_t **run) {
  int64_t exp_id = -1;
  *run = NULL;
  SG_CHECK(sg_rdb_run_experiment(db, run_id, &exp_id));
  SG_CHECK(sg_rset_load(db, exp_id, -1, 0.85, out));
  for (size_t i = 0; i < (*out)->n; i++)
    if ((*out)->runs[i].id == run_id) *run = &(*out)->runs[i];
  if (!*run) return sg_err_set(SG_ENOTFOUND, "no run with id %lld in the database", (long long)run_id);
  return SG_OK;
}
