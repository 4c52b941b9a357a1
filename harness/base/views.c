/* views.c - run_summary and its parts (views.h). */
#include "views.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

typedef struct view {
  const char *name, *body;
} view_t;

/* The report's base label: what rank 0 recorded (run_info label, the
 * engine table's sg_engine_label); the engine's name for runs recorded
 * without one.  INFO(k): run r's run_info value of key k. */
#define OPT(k) "json_extract(r.options_json, '$." k "')"
#define INFO(k) "(SELECT i.value FROM run_info i WHERE i.run_id = r.id AND i.key = '" k "')"
#define VARIANT_SQL "coalesce(" INFO("label") ", r.engine)"

static const view_t VIEWS[] = {
    /* samples/s window (report.h): worker ranks (a loss, kind worker),
     * steps from the first eval after training on, or every step when
     * that eval is the last step. */
    {"run_summary_throughput",
     "WITH k AS (SELECT DISTINCT run_id, rank FROM steps WHERE loss IS NOT NULL"
     "   AND coalesce(kind, 'worker') <> 'hub'),"
     " warm AS (SELECT run_id, min(step) AS warm FROM evals WHERE step > 0"
     "   GROUP BY run_id),"
     " w AS (SELECT s.run_id, s.step, s.t_start, s.t_start + coalesce(s.compute_s, 0)"
     "   + coalesce(s.comm_s, 0) + coalesce(s.wait_s, 0) AS t_end,"
     "   coalesce(warm.warm, 0) AS warm FROM steps s"
     "   JOIN k ON k.run_id = s.run_id AND k.rank = s.rank"
     "   LEFT JOIN warm ON warm.run_id = s.run_id),"
     " g AS (SELECT run_id, max(step) AS max_step, max(warm) AS warm FROM w"
     "   GROUP BY run_id)"
     " SELECT w.run_id AS run_id, count(*) AS step_rows, min(w.t_start) AS t_first,"
     "   max(w.t_end) AS t_last FROM w JOIN g ON g.run_id = w.run_id"
     " WHERE w.step >= CASE WHEN g.warm < g.max_step THEN g.warm ELSE 0 END"
     " GROUP BY w.run_id"},
    /* bytes/step: the busiest rank's mean; phases: worker ranks' means */
    {"run_summary_steps",
     "SELECT run_id, max(b) AS bytes_per_step, sum(c) / sum(n) AS compute_s,"
     "   sum(m) / sum(n) AS comm_s, sum(wt) / sum(n) AS wait_s"
     " FROM (SELECT run_id, avg(bytes_sent + bytes_recv) AS b,"
     "   sum(CASE WHEN w THEN compute_s END) AS c, sum(CASE WHEN w THEN comm_s END) AS m,"
     "   sum(CASE WHEN w THEN wait_s END) AS wt,"
     "   nullif(sum(CASE WHEN w THEN 1 ELSE 0 END), 0) AS n"
     "   FROM (SELECT *, coalesce(kind, 'worker') <> 'hub' AS w FROM steps)"
     "   GROUP BY run_id, rank)"
     " GROUP BY run_id"},
    {"run_summary",
     "SELECT r.id AS run_id, r.experiment_id AS experiment_id, e.name AS experiment,"
     " r.engine AS engine, " VARIANT_SQL " AS variant, r.options_json AS options_json,"
     " r.transport AS transport, r.launcher AS launcher, r.workers AS workers,"
     " r.servers AS servers, r.processes AS processes, r.repeat AS repeat,"
     " r.seed AS seed, r.status AS status, r.error AS error,"
     " r.started_at AS started_at, r.wall_s AS wall_s,"
     " " OPT("batch") " AS batch,"
     " (SELECT count(*) FROM evals v WHERE v.run_id = r.id) AS evals,"
     " (SELECT v.test_acc FROM evals v WHERE v.run_id = r.id AND v.test_acc IS NOT NULL"
     "   ORDER BY v.step DESC, v.wall_s DESC LIMIT 1) AS final_acc,"
     " (SELECT v.wall_s FROM evals v WHERE v.run_id = r.id AND v.test_acc >= 0.85"
     "   ORDER BY v.step, v.wall_s LIMIT 1) AS time_to_acc_085_s,"
     " CASE WHEN t.t_last > t.t_first THEN t.step_rows * " OPT("batch")
     "   * CASE WHEN " INFO("engine.baseline") " = '1' THEN max(coalesce(r.workers, 1), 1) ELSE 1 END"
     "   / (t.t_last - t.t_first) END AS samples_per_s,"
     " CASE WHEN " INFO("engine.bytes_uncounted") " = '1' THEN NULL"
     "   ELSE b.bytes_per_step END AS bytes_per_step,"
     " b.compute_s AS compute_s, b.comm_s AS comm_s, b.wait_s AS wait_s"
     " FROM runs r LEFT JOIN experiments e ON e.id = r.experiment_id"
     " LEFT JOIN run_summary_throughput t ON t.run_id = r.id"
     " LEFT JOIN run_summary_steps b ON b.run_id = r.id"},
};
#define NVIEWS (sizeof VIEWS / sizeof VIEWS[0])

static int exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    int rc = sg_err_set(SG_EIO, "creating views: %s", msg ? msg : sqlite3_errmsg(db));
    sqlite3_free(msg);
    return rc;
  }
  return SG_OK;
}

/* 1 when `schema` holds view `name` with exactly the text `sql`. */
static int current(sqlite3 *db, const char *schema, const char *name, const char *sql) {
  sqlite3_stmt *st = NULL;
  char q[128];
  int same = 0;
  snprintf(q, sizeof q, "SELECT sql FROM %s WHERE type = 'view' AND name = ?1", schema);
  if (sqlite3_prepare_v2(db, q, -1, &st, NULL) != SQLITE_OK) return 0;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char *t = sqlite3_column_text(st, 0);
    same = t && !strcmp((const char *)t, sql);
  }
  sqlite3_finalize(st);
  return same;
}

int sg_views_install(sqlite3 *db, int temp) {
  static char sql[NVIEWS][8192];
  const char *schema = temp ? "sqlite_temp_master" : "sqlite_master";
  int stale = 0, rc = SG_OK;
  for (size_t i = 0; i < NVIEWS; i++) {
    snprintf(sql[i], sizeof sql[i], "CREATE %sVIEW %s AS %s", temp ? "TEMP " : "",
             VIEWS[i].name, VIEWS[i].body);
    if (!current(db, schema, VIEWS[i].name, sql[i])) stale = 1;
  }
  if (!stale) return SG_OK;
  SG_CHECK(exec(db, "BEGIN IMMEDIATE"));
  for (size_t i = 0; i < NVIEWS; i++) {
    char drop[128];
    snprintf(drop, sizeof drop, "DROP VIEW IF EXISTS %s%s", temp ? "temp." : "",
             VIEWS[i].name);
    SG_TRY(exec(db, drop));
    SG_TRY(exec(db, sql[i]));
  }
  return exec(db, "COMMIT");
fail:
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

/* 1 when main.steps has the kind column (schema version >= 5). */
static int has_kind(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int yes = 0;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info('steps', 'main')"
                         " WHERE name = 'kind'", -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    yes = sqlite3_column_int(st, 0) > 0;
  sqlite3_finalize(st);
  return yes;
}

/* A file before version 5: TEMP views steps and ranks that add kind. */
static int legacy_kind(sqlite3 *db) {
  return exec(db, "CREATE TEMP VIEW IF NOT EXISTS steps AS SELECT *, " SG_LEGACY_KIND_SQL
                  " AS kind FROM main.steps;"
                  "CREATE TEMP VIEW IF NOT EXISTS ranks AS SELECT *, " SG_LEGACY_KIND_SQL
                  " AS kind FROM main.ranks;");
}

int sg_views_ready(sqlite3 *db) {
  char sql[8192];
  if (!has_kind(db)) {
    SG_CHECK(legacy_kind(db));
    return sg_views_install(db, 1);
  }
  for (size_t i = 0; i < NVIEWS; i++) {
    snprintf(sql, sizeof sql, "CREATE VIEW %s AS %s", VIEWS[i].name, VIEWS[i].body);
    if (!current(db, "sqlite_master", VIEWS[i].name, sql)) return sg_views_install(db, 1);
  }
  return SG_OK;
}

int sg_views_ensure(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int ours = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) goto done;
  sqlite3_busy_timeout(db, 5000); /* a run may be committing */
  if (sqlite3_prepare_v2(db,
                         "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                         " AND name IN ('experiments', 'runs', 'steps', 'evals')",
                         -1, &st, NULL) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW)
    ours = sqlite3_column_int(st, 0) == 4;
  sqlite3_finalize(st);
  /* Not writable (another user's file, a read-only copy): readers fall
   * back to TEMP views, so this is not an error. */
  /* a file before version 5 (no kind) keeps its views until a run
   * migrates it */
  if (ours && has_kind(db) && sqlite3_db_readonly(db, "main") == 0 && sg_views_install(db, 0) < 0)
    sg_err_clear();
done:
  sqlite3_close(db);
  return SG_OK;
}
