/* test_run_times.c - where a real run's wall time went and what it ran on
 * (run_info time.* and the environment keys), and an installed sgdlab:
 * `cmake --install` into a scratch prefix, then a run from another
 * directory whose database $SGDLAB_DB places. */
#define _GNU_SOURCE
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "run_util.h"
#include "test.h"

static const char CONFIG[] =
    "name: times\n"
    "workload: {dataset: fashion-mnist, model: softmax, batch: 32, lr: 0.05,\n"
    "           max_steps: 40, eval_every: 10, train_samples: 3000,\n"
    "           test_samples: 1000, seed: 1}\n"
    "workers: 2\n"
    "engines:\n"
    "  - {engine: allreduce, algorithm: ring, transport: zmq}\n"
    "  - {engine: ps, mode: sync}\n"
    "  - local\n";

/* run_info value of run `run` as a number; -1 when absent. */
static double info_num(const char *db, int run, const char *key) {
  char sql[256], v[64];
  snprintf(sql, sizeof sql, "SELECT value FROM run_info WHERE run_id=%d AND key='%s'", run, key);
  ru_db_text_into(db, sql, v, sizeof v);
  return v[0] ? atof(v) : -1;
}

/* Every run's load.before and load.after set to `v`; 0 or -1. */
static int set_load(const char *db, const char *v) {
  sqlite3 *h;
  char sql[160];
  if (sqlite3_open(db, &h) != SQLITE_OK) return -1;
  snprintf(sql, sizeof sql, "UPDATE run_info SET value = '%s' WHERE key LIKE 'load.%%'", v);
  int rc = sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  sqlite3_close(h);
  return rc;
}

/* Run 2: 1 core, 4 processes, load.after `after`. */
static int set_run2(const char *db, const char *after) {
  sqlite3 *h;
  char sql[320];
  if (sqlite3_open(db, &h) != SQLITE_OK) return -1;
  snprintf(sql, sizeof sql, "UPDATE run_info SET value = '1' WHERE run_id = 2 AND key = 'cores';"
           " UPDATE runs SET processes = 4 WHERE id = 2; UPDATE run_info SET value = '%s'"
           " WHERE run_id = 2 AND key = 'load.after'", after);
  int rc = sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
  sqlite3_close(h);
  return rc;
}

/* `sgdlab report` of db into dir/rep: whether summary.md contains `text`
 * (case-insensitive) and index.html says "Warning: loaded host." exactly when
 * it does, as its first paragraph (before the summary table). */
static int report_says(const char *db, const char *dir, const char *text) {
  char out[640], path[700], buf[256];
  snprintf(out, sizeof out, "%s/rep", dir);
  char *argv[] = {NULL, "report", "--db", (char *)db, "--out", out, NULL};
  if (ru_run(argv, 1, dir, buf, sizeof buf) != 0) return -1;
  snprintf(path, sizeof path, "%s/summary.md", out);
  char *md = ru_slurp(path, 1 << 20);
  snprintf(path, sizeof path, "%s/index.html", out);
  char *html = ru_slurp(path, 1 << 24);
  int says = md && strcasestr(md, text) != NULL;
  const char *warn = html ? strstr(html, "<strong>Warning: loaded host.</strong>") : NULL;
  const char *table = html ? strstr(html, "<section id=\"summary\">") : NULL;
  int html_says = warn != NULL && (!table || warn < table);
  free(md);
  free(html);
  return says == html_says ? says : -1;
}

TEST(run_times_add_up_and_env_recorded) {
  const char *d = ru_scratch("times");
  CHECK(d);
  char cfg[512], db[512], sql[256];
  snprintf(cfg, sizeof cfg, "%s/times.yaml", d);
  snprintf(db, sizeof db, "%s/t.db", d);
  CHECK_OK(ru_write_file(cfg, CONFIG));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  static const char *const parts[] = {"time.launch_s", "time.data_s", "time.train_s",
                                      "time.eval_s", "time.teardown_s"};
  static const char *const env[] = {"load.before", "load.after", "cores", "zmq", "mpi",
                                    "compiler", "revision", "version", "blas"};
  for (int run = 1; run <= 3; run++) {
    snprintf(sql, sizeof sql, "SELECT wall_s * 1000 FROM runs WHERE id=%d", run);
    double wall = (double)ru_db_int(db, sql) / 1000, sum = 0;
    CHECK_MSG(wall > 0, "run %d: wall_s %.3f", run, wall);
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
      double v = info_num(db, run, parts[i]);
      fprintf(stderr, "  run %d %s = %.3f\n", run, parts[i], v);
      CHECK_MSG(v >= 0, "run %d: %s missing or negative (%.3f)", run, parts[i], v);
      sum += v;
    }
    fprintf(stderr, "  run %d: sum %.3f, wall_s %.3f\n", run, sum, wall);
    /* the parts do not overlap: they fit in wall_s (rounding to ms, and
     * the ranks' and harness's clocks read at slightly different moments) */
    CHECK_MSG(sum <= wall + 0.03, "run %d: parts %.3f s > wall_s %.3f s", run, sum, wall);
    double train = info_num(db, run, "time.train_s");
    CHECK_MSG(train > 0 && train < wall, "run %d: train_s %.3f, wall_s %.3f", run, train, wall);
    CHECK(info_num(db, run, "time.eval_s") > 0); /* eval_every 10 of 40 steps */
    for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
      snprintf(sql, sizeof sql, "SELECT count(*) FROM run_info WHERE run_id=%d AND key='%s' "
               "AND length(value) > 0", run, env[i]);
      CHECK_MSG(ru_db_int(db, sql) == 1, "run %d: run_info %s missing", run, env[i]);
    }
    CHECK_EQ_INT((int)info_num(db, run, "cores"), (int)sysconf(_SC_NPROCESSORS_ONLN));
    CHECK(info_num(db, run, "load.before") >= 0 && info_num(db, run, "load.after") >= 0);
  }
  /* the report flags a run whose load exceeded the cores, and only it */
  CHECK_OK(set_load(db, "0.01"));
  CHECK(!report_says(db, d, "loaded host"));
  /* run 2 on 1 core with 4 processes of its own: a load of 3.5 is the
   * run itself (no warning), 4.5 is more than the run brings */
  CHECK_OK(set_run2(db, "3.5"));
  CHECK(!report_says(db, d, "loaded host"));
  CHECK_OK(set_run2(db, "4.5"));
  CHECK(report_says(db, d, "**Warning: loaded host.** 1 run (2) "));
  /* the revision is git's (a checkout) or "unknown", never empty */
  char rev[128];
  ru_db_text_into(db, "SELECT value FROM run_info WHERE run_id=1 AND key='revision'", rev,
                  sizeof rev);
  CHECK_MSG(rev[0] && !strchr(rev, '"') && !strchr(rev, ' '), "revision '%s'", rev);
}

/* Run argv (argv[0]: a path) in cwd with SGDLAB_DB=dbenv and no
 * SGDLAB_BIN_DIR, at most secs; its exit code, -1 when it did not end. */
static int run_in(char **argv, const char *cwd, const char *dbenv, double secs) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (chdir(cwd) < 0) _exit(126);
    setenv("SGDLAB_DB", dbenv, 1);
    unsetenv("SGDLAB_BIN_DIR"); /* sgdlab-rank only from next to sgdlab */
    execv(argv[0], argv);
    _exit(127);
  }
  return ru_wait_exit_code(pid, secs);
}

TEST(installed_copy_runs_from_elsewhere_with_sgdlab_db) {
  const char *cmake = getenv("SGDLAB_CMAKE"), *bin = getenv("SGDLAB_BIN_DIR");
  CHECK_MSG(cmake && bin, "SGDLAB_CMAKE / SGDLAB_BIN_DIR unset (run through ctest)");
  char d[256], prefix[320], work[320], dbdir[320], dbpath[400], cfg[400], sgdlab[400], rank[400];
  CHECK_OK(ru_mkdtemp(d, sizeof d, "install"));
  snprintf(prefix, sizeof prefix, "%s/prefix", d);
  snprintf(work, sizeof work, "%s/work", d);
  snprintf(dbdir, sizeof dbdir, "%s/dbs", d);
  snprintf(dbpath, sizeof dbpath, "%s/env.db", dbdir);
  CHECK(mkdir(work, 0700) == 0 && mkdir(dbdir, 0700) == 0);
  char *inst[] = {(char *)cmake, "--install", (char *)bin, "--prefix", prefix, NULL};
  CHECK_EQ_INT(run_in(inst, d, "", 120), 0);
  snprintf(sgdlab, sizeof sgdlab, "%s/bin/sgdlab", prefix);
  snprintf(rank, sizeof rank, "%s/bin/sgdlab-rank", prefix);
  CHECK(access(sgdlab, X_OK) == 0 && access(rank, X_OK) == 0);
  snprintf(cfg, sizeof cfg, "%s/tiny.yaml", work);
  CHECK_OK(ru_write_file(cfg,
                         "name: installed\n"
                         "workload: {dataset: fashion-mnist, model: softmax, batch: 32,\n"
                         "           max_steps: 5, train_samples: 1000, test_samples: 500}\n"
                         "workers: 2\n"
                         "engines:\n"
                         "  - {engine: allreduce, transport: zmq}\n"));
  char *run[] = {sgdlab, "run", "tiny.yaml", "-q", NULL};
  CHECK_EQ_INT(run_in(run, work, dbpath, 120), 0);
  /* the database is where SGDLAB_DB says, not results/ under the cwd */
  CHECK(ru_db_int(dbpath, "SELECT count(*) FROM runs WHERE status='ok'") == 1);
  /* model, like every command that takes --db, reads SGDLAB_DB's (a flag of
   * its entry in the CLI's command table): no results/sgdlab.db here */
  char *model[] = {sgdlab, "model", "installed", "--gamma", "1e-10", "--alpha", "1e-5",
                   "--beta", "8e-9", NULL};
  CHECK_EQ_INT(run_in(model, work, dbpath, 60), 0);
  char rel[400];
  snprintf(rel, sizeof rel, "%s/results", work);
  CHECK_MSG(access(rel, F_OK) != 0, "%s exists: SGDLAB_DB ignored", rel);
  /* an explicit --db still wins */
  char other[400];
  snprintf(other, sizeof other, "%s/other.db", work);
  char *run2[] = {sgdlab, "run", "tiny.yaml", "-q", "--db", other, NULL};
  CHECK_EQ_INT(run_in(run2, work, dbpath, 120), 0);
  CHECK(ru_db_int(other, "SELECT count(*) FROM runs") == 1);
  CHECK(ru_db_int(dbpath, "SELECT count(*) FROM runs") == 1);
  ru_rm_rf(d);
}
