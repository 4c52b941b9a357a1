/* test_run_cli.c - the real `sgdlab` binary: configuration errors (exit 2,
 * one line, nothing launched), real runs of the `local` engine on
 * Fashion-MNIST recorded in SQLite, determinism, and a rank killed with
 * SIGKILL mid-run / the harness interrupted with SIGINT. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "test.h"

/* "local, ps, ..." from the registry (engines are added over time). */
static const char *known_engines(void) {
  static char buf[512];
  size_t len = 0;
  buf[0] = '\0';
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", (*e)->name);
  return buf;
}

static const char *sgdlab(void) {
  static char path[1024];
  const char *b = getenv("SGDLAB_BIN_DIR");
  snprintf(path, sizeof path, "%s/harness/sgdlab", b ? b : ".");
  return path;
}

static void mkdir_tmp(char *dir, size_t cap) {
  snprintf(dir, cap, "/tmp/sgdlab-cli-XXXXXX");
  if (!mkdtemp(dir)) dir[0] = '\0';
}

static void rm_rf(const char *dir) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", dir);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return;
  fputs(text, f);
  fclose(f);
}

/* Start sgdlab with argv (argv[0] ignored); stderr to errpath, stdout to
 * /dev/null. */
static pid_t start(char **argv, const char *errpath) {
  pid_t pid = fork();
  if (pid == 0) {
    int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = open("/dev/null", O_WRONLY);
    dup2(e, 2);
    dup2(n, 1);
    argv[0] = (char *)sgdlab();
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

static int exit_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

/* Run to completion; *err gets stderr. */
static int run(char **argv, char *err, size_t cap) {
  char errpath[] = "/tmp/sgdlab-cli-err-XXXXXX";
  int fd = mkstemp(errpath);
  if (fd >= 0) close(fd);
  pid_t pid = start(argv, errpath);
  int st = 0;
  waitpid(pid, &st, 0);
  FILE *f = fopen(errpath, "r");
  size_t n = f ? fread(err, 1, cap - 1, f) : 0;
  err[n] = '\0';
  if (f) fclose(f);
  unlink(errpath);
  return exit_code(st);
}

static long long query(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *s;
  long long v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return -2;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
    if (sqlite3_step(s) == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return v;
}

static void query_text(const char *db, const char *sql, char *out, size_t cap) {
  sqlite3 *h;
  sqlite3_stmt *s;
  out[0] = '\0';
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return;
  sqlite3_busy_timeout(h, 5000);
  if (sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK) {
    if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
      snprintf(out, cap, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
}

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- configuration errors ---------------------------------------------- */

static const struct {
  const char *text, *set, *want; /* want: stderr after "<file>" */
} BAD[] = {
    {"name: t\nworkload:\n  model: mlp\n  momentun: 0.9\nengines: [local]\n", NULL,
     ":4:3: momentun: unknown key; did you mean 'momentum'?\n"},
    {"name: t\nworkload: {btch: 64}\nengines: [local]\n", NULL,
     ":2:12: btch: unknown key; did you mean 'batch'?\n"},
    {"name: t\nworkers: four\nengines: [local]\n", NULL,
     ":2:10: workers: expected an integer, got 'four'\n"},
    {"name: t\nworkload:\n  momentum: 2\nengines: [local]\n", NULL,
     ":3:13: momentum: must be <= 0.9999\n"},
    {"name: t\nengines:\n  - local\n  - paramserver\n", NULL,
     ":4:5: engine: unknown engine 'paramserver' (known: %s)\n"},
    {"name: t\nworkload:\n  lr: 0.1\n  lr: 0.2\nengines: [local]\n", NULL,
     ":4:3: lr: duplicate key (first set at line 3)\n"},
    {"name: t\nengines: [local]\n", "batch=-1", NULL},
};

TEST(config_errors_exit_2_with_one_line_and_launch_nothing) {
  char dir[64], cfg[128], db[128], err[4096], want[1024];
  mkdir_tmp(dir, sizeof dir);
  CHECK(dir[0]);
  snprintf(cfg, sizeof cfg, "%s/bad.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    write_file(cfg, BAD[i].text);
    char *argv[] = {NULL, "run", cfg, "--db", db, BAD[i].set ? "--set" : NULL,
                    (char *)BAD[i].set, NULL};
    int code = run(argv, err, sizeof err);
    CHECK_MSG(code == 2, "case %zu: exit %d, stderr %s", i, code, err);
    if (BAD[i].want) {
      snprintf(want, sizeof want, "%s", cfg);
      size_t l = strlen(want);
      snprintf(want + l, sizeof want - l, BAD[i].want, known_engines());
    }
    else snprintf(want, sizeof want, "--set %s: batch: must be >= 1\n", BAD[i].set);
    CHECK_MSG(!strcmp(err, want), "case %zu: got '%s' want '%s'", i, err, want);
    struct stat sb;
    CHECK_MSG(stat(db, &sb) < 0, "case %zu: the database was created", i);
  }
  rm_rf(dir);
}

TEST(unwritable_db_is_one_line_before_launch) {
  char dir[64], cfg[128], err[4096];
  mkdir_tmp(dir, sizeof dir);
  snprintf(cfg, sizeof cfg, "%s/ok.yaml", dir);
  write_file(cfg, "name: t\nworkload: {max_steps: 5}\nengines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", "/etc/passwd/x.db", NULL};
  int code = run(argv, err, sizeof err);
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(err, "/etc/passwd/x.db");
  char *nl = strchr(err, '\n');
  CHECK_MSG(nl && nl[1] == '\0', "more than one line: %s", err);
  rm_rf(dir);
}

/* ---- real runs ----------------------------------------------------------- */

TEST(local_run_is_recorded_and_repeats_are_bitwise_identical) {
  char dir[64], cfg[128], db[128], err[8192], txt[512];
  mkdir_tmp(dir, sizeof dir);
  snprintf(cfg, sizeof cfg, "%s/tiny.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  write_file(cfg, "name: tiny\nrepeat: 2\n"
                  "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 32,\n"
                  "           lr: 0.1, momentum: 0.9, max_steps: 40, eval_every: 20, seed: 3}\n"
                  "engines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL};
  int code = run(argv, err, sizeof err);
  CHECK_MSG(code == 0, "exit %d: %s", code, err);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM runs WHERE status='ok' AND error IS NULL "
                         "AND wall_s > 0 AND finished_at IS NOT NULL"), 2);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM steps WHERE run_id=1"), 40);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM steps WHERE run_id=2"), 40);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM steps WHERE loss IS NULL OR loss <= 0"), 0);
  /* evaluations at steps 0, 20, 40 */
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM evals WHERE run_id=1"), 3);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM evals WHERE run_id=1 AND test_acc > 0.5 AND step=40"), 1);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM ranks WHERE run_id=1 AND rank=0 AND role='worker' AND pid > 0"), 1);
  query_text(db, "SELECT value FROM run_info WHERE run_id=1 AND key='blas'", txt, sizeof txt);
  CHECK_STR_CONTAINS(txt, "OpenBLAS");
  query_text(db, "SELECT name || '|' || config_text FROM experiments", txt, sizeof txt);
  CHECK_STR_CONTAINS(txt, "tiny|name: tiny");
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM runs WHERE repeat=1 AND seed=3 AND engine='local' "
                         "AND options_json LIKE '%\"max_steps\":40%'"), 1);
  /* same seed: the same loss sequence, bit for bit */
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM steps a JOIN steps b ON a.step=b.step "
                         "WHERE a.run_id=1 AND b.run_id=2 AND a.loss = b.loss"), 40);
  rm_rf(dir);
}

/* Start a long local run and wait until the database shows some steps;
 * returns the harness pid and the rank's pid. */
static int start_long_run(const char *dir, char *db, size_t dbcap, pid_t *harness, int *rank_pid) {
  char cfg[128], errpath[128];
  snprintf(cfg, sizeof cfg, "%s/long.yaml", dir);
  snprintf(db, dbcap, "%s/r.db", dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", dir);
  write_file(cfg, "name: long\n"
                  "workload: {model: mlp, hidden: [64], batch: 16, epochs: 100, eval_every: 100000}\n"
                  "engines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", (char *)db, NULL};
  *harness = start(argv, errpath);
  double until = sg_now() + 60;
  *rank_pid = 0;
  while (sg_now() < until) {
    if (query(db, "SELECT count(*) FROM steps") >= 5) {
      *rank_pid = (int)query(db, "SELECT pid FROM ranks WHERE run_id=1 AND rank=0");
      if (*rank_pid > 0) return 0;
    }
    nap_ms(20);
  }
  return -1;
}

/* Wait for pid to exit, at most `secs`; returns its exit code or -1. */
static int wait_exit(pid_t pid, double secs) {
  double until = sg_now() + secs;
  int st;
  while (sg_now() < until) {
    pid_t p = waitpid(pid, &st, WNOHANG);
    if (p == pid) return exit_code(st);
    nap_ms(20);
  }
  return -1;
}

TEST(rank_killed_with_sigkill_fails_the_run_quickly) {
  char dir[64], db[128], err[512], want[128];
  mkdir_tmp(dir, sizeof dir);
  pid_t h;
  int rp;
  CHECK_MSG(start_long_run(dir, db, sizeof db, &h, &rp) == 0, "no steps recorded within 60 s");
  long long before = query(db, "SELECT count(*) FROM steps");
  CHECK(kill(rp, SIGKILL) == 0);
  int code = wait_exit(h, 10.0);
  if (code < 0) kill(h, SIGKILL), waitpid(h, NULL, 0);
  CHECK_MSG(code == 1, "harness exit %d (-1: still running 10 s after the kill)", code);
  query_text(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  snprintf(want, sizeof want, "failed: rank 0 (worker, ");
  CHECK_STR_CONTAINS(err, want);
  snprintf(want, sizeof want, "pid %d): killed by signal 9", rp);
  CHECK_STR_CONTAINS(err, want);
  CHECK(query(db, "SELECT count(*) FROM steps") >= before);
  CHECK(kill(rp, 0) < 0 && errno == ESRCH);
  rm_rf(dir);
}

TEST(sigint_interrupts_the_run) {
  char dir[64], db[128], err[512];
  mkdir_tmp(dir, sizeof dir);
  pid_t h;
  int rp;
  CHECK_MSG(start_long_run(dir, db, sizeof db, &h, &rp) == 0, "no steps recorded within 60 s");
  CHECK(kill(h, SIGINT) == 0);
  int code = wait_exit(h, 10.0);
  if (code < 0) kill(h, SIGKILL), waitpid(h, NULL, 0);
  CHECK_EQ_INT(code, 130);
  query_text(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  CHECK_MSG(!strcmp(err, "failed: interrupted"), "%s", err);
  CHECK(kill(rp, 0) < 0 && errno == ESRCH);
  rm_rf(dir);
}

TEST(mpirun_launcher_runs_ranks) {
  char dir[64], cfg[128], db[128], err[8192];
  mkdir_tmp(dir, sizeof dir);
  snprintf(cfg, sizeof cfg, "%s/mpi.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  write_file(cfg, "name: mpi\nworkers: 2\ntransport: mpi\n"
                  "workload: {hidden: [16], batch: 16, max_steps: 10, eval_every: 10}\n"
                  "engines: [local, {engine: allreduce, algorithm: ring}]\n");
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL};
  int code = run(argv, err, sizeof err);
  CHECK_MSG(code == 0, "exit %d: %s", code, err);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM runs WHERE status='ok' AND launcher='mpirun' "
                         "AND transport='mpi'"), 2);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM ranks WHERE run_id=2"), 2);
  CHECK_EQ_INT(query(db, "SELECT count(*) FROM steps WHERE run_id=2"), 20);
  rm_rf(dir);
}
