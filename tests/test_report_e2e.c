/* test_report_e2e.c - the real thing: `sgdlab run` trains on Fashion-MNIST
 * (real processes, the real recorder), then `sgdlab report`, `list` and
 * `show` read that database.  The summary's numbers are checked against
 * SQL over the same file.
 */
#define _GNU_SOURCE /* nftw */
#include <ftw.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"

static char tmpdir[256], db[320], out_path[320];

static const char CONFIG[] =
    "name: e2e\n"
    "workload: {dataset: fashion-mnist, model: softmax, batch: 32, lr: 0.05,\n"
    "           max_steps: 30, eval_every: 10, train_samples: 3000,\n"
    "           test_samples: 1000, seed: 1}\n"
    "workers: [1, 2]\n"
    "engines:\n"
    "  - local\n"
    "  - {engine: ps, mode: sync}\n";

/* Run $SGDLAB_BIN_DIR/harness/sgdlab with args in tmpdir; output (stdout +
 * stderr) into *out (malloc'd); returns the exit code. */
static int sgdlab(char **out, ...) {
  const char *bin_dir = getenv("SGDLAB_BIN_DIR");
  char bin[512], *argv[16];
  int argc = 0, status;
  va_list ap;
  snprintf(bin, sizeof bin, "%s/harness/sgdlab", bin_dir ? bin_dir : ".");
  argv[argc++] = bin;
  va_start(ap, out);
  for (const char *a; argc < 15 && (a = va_arg(ap, const char *));) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = fopen(out_path, "w");
    if (!f || chdir(tmpdir) != 0) _exit(99);
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    execv(bin, argv);
    _exit(127);
  }
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  *out = calloc(1, 1 << 16);
  FILE *f = fopen(out_path, "r");
  if (f && *out) (*out)[fread(*out, 1, (1 << 16) - 1, f)] = '\0';
  if (f) fclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf = calloc(1, 1 << 17);
  if (f && buf) buf[fread(buf, 1, (1 << 17) - 1, f)] = '\0';
  if (f) fclose(f);
  return buf;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  return remove(path);
}

static void cleanup(void) {
  const char *keep = getenv("SGDLAB_KEEP_TMP");
  if (keep && *keep && strcmp(keep, "0")) {
    fprintf(stderr, "kept %s\n", tmpdir);
    return;
  }
  nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

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

TEST(run_then_report) {
  char *out = NULL, path[600], row[128];
  snprintf(tmpdir, sizeof tmpdir, "/tmp/sgreport-e2e-XXXXXX");
  CHECK(mkdtemp(tmpdir));
  atexit(cleanup);
  snprintf(db, sizeof db, "%s/e2e.db", tmpdir);
  snprintf(out_path, sizeof out_path, "%s/cmd.out", tmpdir);
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
  char *md = slurp(path);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "# Experiment e2e (id 1)");
  /* final accuracy in the table = the last eval in the database */
  double acc = final_acc("local", 1);
  CHECK(!isnan(acc));
  snprintf(row, sizeof row, "| local | 1 | 1 | ok | ");
  CHECK_STR_CONTAINS(md, row);
  snprintf(row, sizeof row, " | %.4f | ", acc);
  CHECK_STR_CONTAINS(strstr(md, "| local | 1 |"), row);
  acc = final_acc("ps", 2);
  CHECK(!isnan(acc));
  snprintf(row, sizeof row, "| ps sync | 2 | 1 | ok | ");
  CHECK_STR_CONTAINS(md, row);
  snprintf(row, sizeof row, " | %.4f | ", acc);
  CHECK_STR_CONTAINS(strstr(md, "| ps sync | 2 |"), row);
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
