/* test_role_kind.c - hubs and workers are told apart by the kind each
 * rank has in its engine's role table (recorded in ranks.kind and
 * steps.kind, schema version 5), never by a role's name.
 *
 *  - A database written through the recorder whose hub is named
 *    "coordinator" and one of whose workers is named "server": the
 *    run_summary view, the report's numbers (sg_rset_load) and its hub
 *    figure (server_time) count the coordinator as the hub and the
 *    "server" as a worker.  A string match on the old names ('server',
 *    'driver') reads the reverse: compute_s 0.0035 instead of 0.005, and
 *    no hub figure.
 *  - A database of schema version 1 (fixture_schema.h), opened read-only
 *    (not migratable): its 'server' and 'driver' rows read as hubs, every
 *    other row as a worker (views.h, SG_LEGACY_KIND_SQL).
 */
#include <math.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "recorder.h"
#include "report.h"
#include "run_util.h"
#include "test.h"
#include "views.h"

#include "fixture_schema.h"

#define STEPS 10

/* rank 0 "coordinator" (hub), rank 1 "server" and rank 2 "executor"
 * (workers): compute 1, 4 and 6 ms per step. */
static int write_renamed(const char *path) {
  sg_recorder_t *r = NULL;
  int64_t exp, run;
  SG_CHECK(sg_recorder_open(&r, path));
  SG_CHECK(sg_recorder_experiment(r, "renamed", "name: renamed\n", &exp));
  sg_run_row_t row = {.engine = "ps", .options_json = "{\"mode\": \"sync\", \"batch\": 10}",
                      .transport = "zmq", .launcher = "local", .workers = 2, .servers = 1,
                      .processes = 3, .seed = 1};
  SG_CHECK(sg_recorder_run_begin(r, exp, &row, &run));
  static const char *const role[3] = {"coordinator", "server", "executor"};
  static const double compute[3] = {0.001, 0.004, 0.006};
  for (int k = 0; k < 3; k++) {
    sg_role_kind_t kind = k == 0 ? SG_ROLE_HUB : SG_ROLE_WORKER;
    SG_CHECK(sg_recorder_rank(r, run, k, role[k], kind, "h", 100 + k, NULL, NULL));
    for (int s = 0; s < STEPS; s++) {
      sg_step_rec_t x = {.step = s, .t_start = 0.01 * s, .compute_s = compute[k],
                         .comm_s = 0.002, .loss = k ? 1.5 : NAN, .staleness = -1,
                         .bytes_sent = 1000, .bytes_recv = 800};
      SG_CHECK(sg_recorder_step(r, run, k, role[k], kind, &x, x.t_start));
    }
  }
  sg_eval_rec_t e = {.step = 5, .wall_s = 0.05, .test_acc = 0.6, .train_loss = 1};
  SG_CHECK(sg_recorder_eval(r, run, &e));
  e = (sg_eval_rec_t){.step = 9, .wall_s = 0.1, .test_acc = 0.8, .train_loss = 1};
  SG_CHECK(sg_recorder_eval(r, run, &e));
  SG_CHECK(sg_recorder_run_end(r, run, "ok", NULL, 0.2));
  sg_recorder_close(&r);
  return SG_OK;
}

TEST(a_renamed_hub_is_a_hub_and_a_worker_named_server_a_worker) {
  char dir[256], path[320], out_dir[320], tsv[400];
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "kind"));
  snprintf(path, sizeof path, "%s/kind.db", dir);
  CHECK_OK(write_renamed(path));
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM ranks WHERE kind = 'hub'"), 1);
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM steps WHERE kind = 'hub'"
                                    " AND role = 'coordinator'"), STEPS);
  /* the view: the workers' mean compute is (4 + 6) / 2 ms */
  CHECK_NEAR(ru_db_int(path, "SELECT round(compute_s * 1e6) FROM run_summary"), 5000, 0.5);
  /* the report's numbers */
  sqlite3 *db = NULL;
  sg_rset_t *s = NULL;
  CHECK_OK(sg_rdb_open(&db, path));
  CHECK_OK(sg_rset_load(db, 1, -1, 0.85, &s));
  CHECK_EQ_INT((int)s->n, 1);
  CHECK_MSG(fabs(s->runs[0].compute_s - 0.005) < 1e-12, "report compute_s %g",
            s->runs[0].compute_s);
  sg_rset_destroy(&s);
  sqlite3_close(db);
  /* the report's hub figure: drawn from the coordinator's rows */
  char *out = NULL;
  snprintf(out_dir, sizeof out_dir, "%s/report", dir);
  int rc = ru_call(sg_cmd_report, NULL, &out, "report", "renamed", "--db", path, "--out",
                   out_dir, NULL);
  CHECK_MSG(rc == 0, "report exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(tsv, sizeof tsv, "%s/server_time.tsv", out_dir);
  char *t = ru_slurp(tsv, 1 << 20);
  CHECK_MSG(t != NULL, "no hub figure (%s)", tsv);
  free(t);
  ru_rm_rf(dir);
}

TEST(an_old_database_read_only_gets_kind_from_its_hub_roles) {
  char dir[256], path[320];
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "kindv1"));
  snprintf(path, sizeof path, "%s/v1.db", dir);
  sqlite3 *db = NULL;
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, SCHEMA, NULL, NULL, NULL) == SQLITE_OK);
  CHECK(sqlite3_exec(db,
                     "INSERT INTO experiments(id, name) VALUES(1, 'old');"
                     "INSERT INTO runs(id, experiment_id, engine, status) VALUES(1, 1, 'ps', 'ok');"
                     "INSERT INTO steps(run_id, rank, role, step) VALUES(1, 0, 'server', 0),"
                     " (1, 1, 'driver', 0), (1, 2, 'worker', 0), (1, 3, 'executor', 0),"
                     " (1, 4, NULL, 0);"
                     "INSERT INTO ranks(run_id, rank, role) VALUES(1, 0, 'server'),"
                     " (1, 2, 'worker');",
                     NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  chmod(path, 0400); /* not writable: nothing can migrate it */
  CHECK_OK(sg_rdb_open(&db, path));
  sqlite3_stmt *st = NULL;
  CHECK(sqlite3_prepare_v2(db, "SELECT group_concat(rank || kind, ',') FROM"
                           " (SELECT rank, kind FROM steps ORDER BY rank)", -1, &st,
                           NULL) == SQLITE_OK);
  CHECK(sqlite3_step(st) == SQLITE_ROW);
  CHECK_STR_CONTAINS((const char *)sqlite3_column_text(st, 0),
                     "0hub,1hub,2worker,3worker,4worker");
  sqlite3_finalize(st);
  CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM ranks WHERE kind = 'hub'", -1, &st,
                           NULL) == SQLITE_OK);
  CHECK(sqlite3_step(st) == SQLITE_ROW);
  CHECK_EQ_INT(sqlite3_column_int(st, 0), 1);
  sqlite3_finalize(st);
  sqlite3_close(db);
  ru_rm_rf(dir);
}
