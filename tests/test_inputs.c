/* test_inputs.c - the real `sgdlab` binary on inputs a user gets wrong or
 * an attacker chooses, all refused before anything launches (exit 2, one
 * line) or listed by the dry run:
 *  - data files that are not regular files (/dev/zero, a FIFO in
 *    data_dir): one error at once, never a hang or unbounded memory;
 *  - a 100,000-run sweep: `run -n` lists every run (the expansion is
 *    n log n; the test checks the count, not the time);
 *  - workload keys that do nothing for the run (train_file without
 *    libsvm, hidden with softmax, ...): file:line:col, key, condition;
 *  - mpirun habits (-n 4, -np 4, --workers 4) answered with what to type;
 *    --opt=value for every long option; --resume -n;
 *  - a dataset that is not installed says which files go where;
 *  - control characters in an experiment name or a run label are printed
 *    escaped on every line `run` prints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_util.h"
#include "test.h"

static char dir[64];

static void cleanup(void) { ru_rm_rf(dir); }

static const char *in_dir(const char *name) {
  static char p[4][256];
  static int k;
  k = (k + 1) % 4;
  if (!*dir) {
    ru_mkdtemp(dir, sizeof dir, "inputs");
    atexit(cleanup);
  }
  snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
  return p[k];
}

/* `sgdlab ARGS...` in dir; its exit code, output into *out (caller frees). */
#define SG(out, ...) ru_sgdlab_in(dir, out, __VA_ARGS__, NULL)

/* The output has exactly one line (and it contains `want`). */
static void one_line(const char *out, const char *want) {
  CHECK_STR_CONTAINS(out, want);
  const char *nl = strchr(out, '\n');
  CHECK_MSG(nl && nl[1] == '\0', "more than one line: %s", out);
}

/* ---- data files ----------------------------------------------------------- */

TEST(dev_zero_as_train_file_is_one_error_before_launch) {
  char *out = NULL;
  const char *cfg = in_dir("svm.yaml");
  ru_write_file(cfg, "name: t\nworkload: {dataset: libsvm, holdout: 0.2}\nengines: [local]\n");
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n", "--set", "workload.train_file=/dev/zero"), 2);
  one_line(out, "/dev/zero: not a regular file (a character device)");
  free(out);
}

TEST(fifo_in_data_dir_is_one_error_not_a_hang) {
  char *out = NULL;
  const char *data = in_dir("idx"), *cfg = in_dir("idx.yaml");
  char fifo[300], text[512];
  CHECK(mkdir(data, 0700) == 0);
  snprintf(fifo, sizeof fifo, "%s/train-images-idx3-ubyte", data);
  CHECK(mkfifo(fifo, 0600) == 0);
  for (int i = 0; i < 3; i++) { /* the other three files exist (empty) */
    static const char *const other[] = {"train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                        "t10k-labels-idx1-ubyte"};
    char p[300];
    snprintf(p, sizeof p, "%s/%s", data, other[i]);
    ru_write_file(p, "");
  }
  snprintf(text, sizeof text, "name: t\nworkload: {dataset: fashion-mnist, data_dir: %s}\n"
           "engines: [local]\n", data);
  ru_write_file(cfg, text);
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n"), 2); /* the test's TIMEOUT catches a hang */
  one_line(out, "train-images-idx3-ubyte: not a regular file (a FIFO)");
  free(out);
}

/* ---- sweeps ---------------------------------------------------------------- */

/* 1,000 learning rates x 100 momenta: every run listed once, in order. */
TEST(sweep_of_100000_runs_is_listed) {
  const char *cfg = in_dir("big.yaml"), *log = in_dir("big.out");
  size_t cap = 64 << 10, len = 0;
  char *text = malloc(cap);
  CHECK(text != NULL);
  len += (size_t)snprintf(text + len, cap - len,
                          "name: big\nworkload:\n  dataset: synthetic\n  model: softmax\n  lr: [");
  for (int i = 0; i < 1000; i++) len += (size_t)snprintf(text + len, cap - len, "%s%g", i ? "," : "", 0.001 * (i + 1));
  len += (size_t)snprintf(text + len, cap - len, "]\n  momentum: [");
  for (int i = 0; i < 100; i++) len += (size_t)snprintf(text + len, cap - len, "%s%g", i ? "," : "", 0.0001 * i);
  snprintf(text + len, cap - len, "]\nengines: [local]\n");
  ru_write_file(cfg, text);
  free(text);
  char *argv[] = {NULL, "run", (char *)cfg, "-n", NULL};
  pid_t pid = ru_start(argv, log, 1, dir);
  CHECK(pid > 0);
  CHECK_EQ_INT(ru_wait_exit_code(pid, 280), 0);
  FILE *f = fopen(log, "r");
  CHECK(f != NULL);
  char line[512], last[512] = "";
  long runs = 0;
  while (fgets(line, sizeof line, f))
    if (line[0] == '[') {
      runs++;
      snprintf(last, sizeof last, "%s", line);
    }
  fclose(f);
  CHECK_EQ_INT((int)runs, 100000);
  CHECK_MSG(!strncmp(last, "[100000/100000] local lr=1 momentum=0.0099 workers=1 ", 53), "%s", last);
}

/* ---- workload keys that do nothing ---------------------------------------- */

TEST(train_file_without_libsvm_is_an_error_not_fashion_mnist) {
  char *out = NULL;
  const char *cfg = in_dir("tf.yaml");
  ru_write_file(cfg, "name: t\nworkload: {train_file: a.svm, epochs: 1}\nengines: [local]\n");
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n"), 2);
  one_line(out, "tf.yaml:2:12: train_file: only used with dataset: libsvm");
  free(out);
  ru_write_file(cfg, "name: t\nworkload: {dataset: synthetic, model: softmax}\nengines: [local]\n");
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n", "--set", "hidden=[64]"), 2);
  one_line(out, "--set hidden=[64]: hidden: only used with model: mlp");
  free(out);
}

/* ---- mpirun habits and option syntax ---------------------------------------- */

TEST(mpirun_habits_say_what_to_type) {
  char *out = NULL, want[512];
  const char *cfg = in_dir("h.yaml");
  ru_write_file(cfg, "name: h\nworkload: {dataset: synthetic, model: softmax}\nengines: [local]\n");
  static const char *const habits[][2] = {{"-n", "4"}, {"-np", "4"}, {"--workers", "4"},
                                          {"--workers=4", NULL}, {"--np", "4"}};
  for (size_t i = 0; i < sizeof habits / sizeof *habits; i++) {
    int code = SG(&out, "run", cfg, habits[i][0], habits[i][1]);
    CHECK_MSG(code == 2, "case %zu: exit %d: %s", i, code, out);
    snprintf(want, sizeof want, "type: sgdlab run %s --set workers=4\n", cfg);
    one_line(out, want);
    CHECK_MSG(!strstr(out, "[1/1]"), "case %zu listed runs: %s", i, out);
    free(out);
  }
  CHECK_EQ_INT(SG(&out, "run", "-n", "4", cfg), 2);
  one_line(out, "sgdlab run: -n is --dry-run (list the runs, launch nothing), not a process count");
  free(out);
}

TEST(long_options_take_their_value_after_an_equals_sign) {
  char *out = NULL;
  const char *cfg = in_dir("eq.yaml"), *db = in_dir("eq.db");
  ru_write_file(cfg, "name: eq\nworkload: {dataset: synthetic, model: softmax, features: 8,"
                     " train_samples: 64, test_samples: 32, max_steps: 2}\nengines: [local]\n");
  char dbopt[300];
  snprintf(dbopt, sizeof dbopt, "--db=%s", db);
  CHECK_EQ_INT(SG(&out, "run", cfg, dbopt, "--set=seed=[1,2]", "-q"), 0);
  free(out);
  CHECK_EQ_INT((int)ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 2);
  CHECK_EQ_INT(SG(&out, "export", dbopt, "--format=csv", "--table=evals"), 0);
  CHECK_STR_CONTAINS(out, "run_id,step,epoch");
  free(out);
  CHECK_EQ_INT(SG(&out, "list", dbopt), 0);
  CHECK_STR_CONTAINS(out, "eq");
  free(out);
}

/* --resume -n lists what --resume would run (here: the failed run only)
 * and writes nothing. */
TEST(resume_dry_run_lists_only_the_runs_resume_would_run) {
  char *out = NULL, text[512];
  const char *cfg = in_dir("res.yaml"), *db = in_dir("res.db"), *ok = in_dir("ok.bin");
  snprintf(text, sizeof text, "name: res\nworkload: {dataset: synthetic, model: softmax,"
           " features: 8, train_samples: 64, test_samples: 32, max_steps: 2,"
           " dump_params: [%s, /nonexistent/p]}\nengines: [local]\n", ok);
  ru_write_file(cfg, text);
  CHECK_EQ_INT(SG(&out, "run", cfg, "--db", db, "-q"), 1);
  free(out);
  long long rows = ru_db_int(db, "SELECT count(*) FROM runs");
  CHECK_EQ_INT(SG(&out, "run", cfg, "--db", db, "--resume", "-n"), 0);
  CHECK_STR_CONTAINS(out, "resuming experiment 'res' (id 1): 1 of 2 runs to do\n");
  CHECK_STR_CONTAINS(out, "[2/2] local dump_params=/nonexistent/p workers=1  processes=1 "
                          "repeat=0 (failed)\n");
  CHECK_MSG(!strstr(out, "[1/2]"), "the ok run is listed: %s", out);
  free(out);
  CHECK(ru_db_int(db, "SELECT count(*) FROM runs") == rows);
  CHECK_EQ_INT((int)ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'failed'"), 1);
}

/* ---- a dataset that is not there ---------------------------------------------- */

TEST(missing_mnist_says_which_files_go_where) {
  char *out = NULL, text[512], want[1024];
  const char *data = in_dir("nomnist"), *cfg = in_dir("mnist.yaml");
  CHECK(mkdir(data, 0700) == 0);
  snprintf(text, sizeof text, "name: m\nworkload: {dataset: mnist, data_dir: %s}\n"
           "engines: [local]\n", data);
  ru_write_file(cfg, text);
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n"), 2);
  snprintf(want, sizeof want, "%s: no train-images-idx3-ubyte[.gz]: MNIST has no Debian package; "
           "put its four IDX files (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
           "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz, from the MNIST distribution, "
           "gzip or plain) in %s, or use dataset: fashion-mnist (packaged: apt-get install "
           "dataset-fashion-mnist)\n", data, data);
  one_line(out, want);
  free(out);
}

/* A run's label quotes config values: printed escaped (run -n, the run
 * line, the database's _label). */
TEST(run_labels_escape_control_characters) {
  char *out = NULL;
  const char *cfg = in_dir("lab.yaml");
  ru_write_file(cfg, "name: e\nworkload: {dataset: synthetic, model: softmax,"
                     " dump_params: [\"/tmp/a\\e]2;x\\a\", /tmp/b]}\nengines: [local]\n");
  CHECK_EQ_INT(SG(&out, "run", cfg, "-n"), 0);
  CHECK_STR_CONTAINS(out, "[1/2] local dump_params=/tmp/a\\x1b]2;x\\x07 workers=1  processes=1");
  for (const char *c = out; *c; c++) CHECK_MSG((unsigned char)*c >= 0x20 || *c == '\n', "%s", out);
  free(out);
}

/* The experiment's name is quoted by the lines `run` prints (the summary,
 * `resuming experiment`, with --resume and --resume -n): a terminal
 * escape in it is printed escaped, never sent raw. */
TEST(experiment_name_escapes_control_characters_in_run_lines) {
  char *out = NULL;
  const char *cfg = in_dir("esc.yaml"), *db = in_dir("esc.db");
  const char *want = "experiment '\\x1b]0;x\\x07\\x1b[2Jn' (id 1)";
  ru_write_file(cfg, "name: \"\\e]0;x\\a\\e[2Jn\"\nworkload: {dataset: synthetic, model: softmax,"
                     " features: 8, train_samples: 64, test_samples: 32, max_steps: 2}\n"
                     "engines: [local]\n");
  for (int i = 0; i < 3; i++) {
    int rc = i == 0   ? SG(&out, "run", cfg, "--db", db)
             : i == 1 ? SG(&out, "run", cfg, "--db", db, "--resume", "-n")
                      : SG(&out, "run", cfg, "--db", db, "--resume");
    CHECK_EQ_INT(rc, 0);
    CHECK_STR_CONTAINS(out, want);
    CHECK_MSG(!strchr(out, '\x1b') && !strchr(out, '\a'), "a raw escape: %s", out);
    free(out);
  }
}
