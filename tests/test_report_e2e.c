/* test_report_e2e.c - the real thing: `sgdlab run` trains on Fashion-MNIST
 * (real processes, the real recorder), then `sgdlab report`, `list` and
 * `show` read that database.  The summary's numbers are checked against
 * SQL over the same file.
 */
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_util.h"
#include "test.h"

static char tmpdir[256], db[320];

static const char CONFIG[] =
    "name: e2e\n"
    "workload: {dataset: fashion-mnist, model: softmax, batch: 32, lr: 0.05,\n"
    "           max_steps: 30, eval_every: 10, train_samples: 3000,\n"
    "           test_samples: 1000, seed: 1}\n"
    "workers: [1, 2]\n"
    "engines:\n"
    "  - local\n"
    "  - {engine: ps, mode: sync}\n";

/* sgdlab in tmpdir (run_util.h: ru_sgdlab_in). */
#define sgdlab(out, ...) ru_sgdlab_in(tmpdir, out, __VA_ARGS__)

static void cleanup(void) { ru_rm_rf(tmpdir); }

/* Final test accuracy of the first ok run with this engine and workers,
 * straight from SQL. */
static double final_acc(const char *engine, int workers) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  double acc = NAN;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h,
                         "SELECT e.test_acc FROM evals e JOIN runs r ON r.id = e.run_id"
                         " WHERE r.engine = ?1 AND r.workers = ?2 AND r.status = 'ok'"
                         " ORDER BY r.id, e.step DESC LIMIT 1",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, engine, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, workers);
    if (sqlite3_step(st) == SQLITE_ROW) acc = sqlite3_column_double(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return acc;
}

/* The line of md that starts with `start` into buf (NULL when none), so a
 * value is looked for in its own row only. */
static const char *table_row(const char *md, const char *start, char *buf, size_t cap) {
  const char *at = md ? strstr(md, start) : NULL;
  if (!at) return NULL;
  size_t len = strcspn(at, "\n");
  snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), at);
  return buf;
}

TEST(run_then_report) {
  char *out = NULL, path[600], row[128], line[1024];
  CHECK(ru_mkdtemp(tmpdir, sizeof tmpdir, "report-e2e") == 0);
  atexit(cleanup);
  snprintf(db, sizeof db, "%s/e2e.db", tmpdir);
  snprintf(path, sizeof path, "%s/e2e.yaml", tmpdir);
  FILE *f = fopen(path, "w");
  CHECK(f);
  fputs(CONFIG, f);
  fclose(f);

  int rc = sgdlab(&out, "run", "e2e.yaml", "--db", "e2e.db", NULL);
  CHECK_MSG(rc == 0, "sgdlab run: exit %d: %s", rc, out);
  free(out);

  rc = sgdlab(&out, "report", "e2e", "--db", "e2e.db", NULL);
  CHECK_MSG(rc == 0, "sgdlab report: exit %d: %s", rc, out);
  free(out);
  static const char *const figs[] = {"acc_vs_time", "acc_vs_step", "loss_vs_step",
                                     "throughput", "efficiency", "time_breakdown", NULL};
  for (const char *const *g = figs; *g; g++) {
    struct stat sb;
    snprintf(path, sizeof path, "%s/results/e2e/%s.png", tmpdir, *g);
    CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "%s", path);
    snprintf(path, sizeof path, "%s/results/e2e/%s.svg", tmpdir, *g);
    CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "%s", path);
  }
  snprintf(path, sizeof path, "%s/results/e2e/summary.md", tmpdir);
  char *md = ru_slurp(path, 1 << 17);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "# Experiment e2e (id 1)");
  /* final accuracy in the table = the last eval in the database */
  double acc = final_acc("local", 1);
  CHECK(!isnan(acc));
  snprintf(row, sizeof row, "| local | 1 | 1 | ok | ");
  CHECK_STR_CONTAINS(md, row);
  snprintf(row, sizeof row, " | %.4f | ", acc);
  CHECK_STR_CONTAINS(table_row(md, "| local | 1 |", line, sizeof line), row);
  acc = final_acc("ps", 2);
  CHECK(!isnan(acc));
  snprintf(row, sizeof row, "| ps sync | 2 | 1 | ok | ");
  CHECK_STR_CONTAINS(md, row);
  snprintf(row, sizeof row, " | %.4f | ", acc);
  CHECK_STR_CONTAINS(table_row(md, "| ps sync | 2 |", line, sizeof line), row);
  CHECK_STR_CONTAINS(md, "| blas | OpenBLAS");
  free(md);

  rc = sgdlab(&out, "list", "--db", "e2e.db", NULL);
  CHECK_MSG(rc == 0, "sgdlab list: exit %d: %s", rc, out);
  CHECK_STR_CONTAINS(out, "experiment 1  e2e");
  CHECK_STR_CONTAINS(out, "ps sync");
  free(out);
  rc = sgdlab(&out, "show", "1", "--db", "e2e.db", NULL);
  CHECK_MSG(rc == 0, "sgdlab show: exit %d: %s", rc, out);
  CHECK_STR_CONTAINS(out, "variant          local");
  CHECK_STR_CONTAINS(out, "blas");
  CHECK_STR_CONTAINS(out, "test_acc");
  free(out);
  rc = sgdlab(&out, "show", "99", "--db", "e2e.db", NULL);
  CHECK_EQ_INT(rc, 1);
  CHECK_STR_CONTAINS(out, "no run with id 99");
  free(out);
}
