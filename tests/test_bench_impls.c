/* test_bench_impls.c - `sgdlab bench allreduce` across architectures, as
 * real processes over ZeroMQ (forked ranks):
 *
 *  - --np 3 --impl ring,ps,mapreduce,mapreduce-tree --servers 1,2 --sizes
 *    4K:64K: 5 sizes x 5 implementations (ring, ps-S1, ps-S2,
 *    mapreduce-flat, mapreduce-tree) in the bench table, every row np = 3
 *    (workers; servers and the driver are extra processes) and 0 wrong
 *    elements, busbw = algbw * 2(N-1)/N;
 *  - --plant-bug mapreduce-double (the driver adds executor 1's gradient
 *    twice): every mapreduce row MUST report wrong elements, for flat and
 *    tree, so the exact check can fail;
 *  - the command line: --help on stdout with exit 0 naming every flag;
 *    an unknown implementation is one line on stderr and exit 2.
 */
#include "test.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_dir[64];

static const char *sgdlab_bin(void) {
  static char path[512];
  const char *bin = getenv("SGDLAB_BIN_DIR");
  snprintf(path, sizeof path, "%s/harness/sgdlab", bin ? bin : ".");
  return path;
}

/* the scratch directory goes when the test process ends */
static void remove_tmpdir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

static const char *tmpdir(void) {
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/tmp/sgdlab-bimpl-XXXXXX");
    if (!mkdtemp(g_dir)) return NULL;
    atexit(remove_tmpdir);
  }
  return g_dir;
}

static int sh(const char *cmd) {
  fprintf(stderr, "$ %s\n", cmd);
  int st = system(cmd);
  return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

static long long query_int(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  long long v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

/* stdout+stderr of a command into out; its exit code. */
static int capture(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return st == -1 || !WIFEXITED(st) ? -1 : WEXITSTATUS(st);
}

TEST(every_impl_exact_over_zmq) {
  const char *dir = tmpdir();
  CHECK(dir);
  char db[128], cmd[1024];
  snprintf(db, sizeof db, "%s/impls.db", dir);
  snprintf(cmd, sizeof cmd,
           "'%s' bench allreduce --np 3 --transport zmq --impl ring,ps,mapreduce,mapreduce-tree "
           "--servers 1,2 --sizes 4K:64K --iters 3 --warmup 1 --db '%s' > '%s/out' 2>&1",
           sgdlab_bin(), db, dir);
  CHECK_EQ_INT(sh(cmd), 0);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench"), 5 * 5);
  /* each row printed once, in the table (no second line per size from a rank) */
  snprintf(cmd, sizeof cmd, "grep -c ': median' '%s/out'", dir);
  CHECK_MSG(sh(cmd) != 0, "a rank printed its rows a second time (see %s/out)", dir);
  /* the header carries the units */
  snprintf(cmd, sizeof cmd, "grep -q 'size(B).*median(us).*algbw(GB/s) *busbw(GB/s)' '%s/out'", dir);
  CHECK_MSG(sh(cmd) == 0, "the table header has no units (see %s/out)", dir);
  snprintf(cmd, sizeof cmd, "grep -c '^ *65536 ' '%s/out' | grep -qx 5", dir);
  CHECK_MSG(sh(cmd) == 0, "64K is not printed once per implementation");
  static const char *const impls[] = {"ring", "ps-S1", "ps-S2", "mapreduce-flat", "mapreduce-tree"};
  for (size_t i = 0; i < sizeof impls / sizeof *impls; i++) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM bench WHERE impl = '%s' AND np = 3", impls[i]);
    CHECK_MSG(query_int(db, sql) == 5, "impl %s: %lld rows with np 3", impls[i], query_int(db, sql));
  }
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench WHERE wrong != 0"), 0);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench WHERE transport != 'zmq'"), 0);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench WHERE NOT (t_median > 0 AND busbw > 0)"), 0);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench WHERE abs(busbw - algbw * 4.0 / 3) > 1e-9 * busbw"), 0);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM runs WHERE status != 'ok'"), 0);
  /* ps runs started S servers + 3 workers, mapreduce 1 driver + 3 */
  CHECK_EQ_INT(query_int(db, "SELECT max(processes) FROM runs WHERE engine = 'ps'"), 5);
  CHECK_EQ_INT(query_int(db, "SELECT max(processes) FROM runs WHERE engine = 'mapreduce'"), 4);
}

TEST(planted_mapreduce_bug_is_caught) {
  const char *dir = tmpdir();
  CHECK(dir);
  char db[128], cmd[1024];
  snprintf(db, sizeof db, "%s/plant.db", dir);
  snprintf(cmd, sizeof cmd,
           "'%s' bench allreduce --plant-bug mapreduce-double --np 3 --transport zmq "
           "--impl mapreduce,mapreduce-tree --sizes 4:4K --iters 1 --warmup 0 --db '%s' >&2",
           sgdlab_bin(), db);
  CHECK_EQ_INT(sh(cmd), 0); /* the runs complete; the check reports */
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench"), 2 * 11);
  /* executor 1 counted twice: every element of the sum is off */
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM bench WHERE wrong != bytes / 4"), 0);
}

/* --name names the experiment (a lab's own); a name that could break the
 * experiment text (a newline, a space, a YAML indicator) is one line,
 * exit 2, before anything runs. */
TEST(name_names_the_experiment) {
  const char *dir = tmpdir();
  CHECK(dir);
  char db[128], cmd[1024], out[4096];
  snprintf(db, sizeof db, "%s/name.db", dir);
  snprintf(cmd, sizeof cmd,
           "'%s' bench allreduce --np 2 --transport zmq --impl ring --sizes 4K:4K --iters 1 "
           "--warmup 0 --name lab4-ring.vs_rhd --db '%s' 2>&1", sgdlab_bin(), db);
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "experiment 'lab4-ring.vs_rhd' (id 1)");
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM experiments WHERE name = 'lab4-ring.vs_rhd'"), 1);
  static const char *const bad[] = {"'a b'", "'x\nworkers: 9'", "'-q'", "''", "'{a}'"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    snprintf(cmd, sizeof cmd, "'%s' bench allreduce --name \"$(printf '%%b' %s)\" --db '%s/bad.db' 2>&1",
             sgdlab_bin(), bad[i], dir);
    CHECK_EQ_INT(capture(cmd, out, sizeof out), 2);
    CHECK_STR_CONTAINS(out, "--name: expected");
    CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
  }
}

/* Interrupted while its first run measures: the runs it did not reach
 * are in the runs table as pending, planned before anything started. */
TEST(interrupted_bench_leaves_pending_rows) {
  const char *dir = tmpdir();
  CHECK(dir);
  char db[128];
  snprintf(db, sizeof db, "%s/intr.db", dir);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    execl(sgdlab_bin(), "sgdlab", "bench", "allreduce", "--np", "2", "--transport", "zmq",
          "--impl", "ring,rhd,ps,mapreduce", "--sizes", "64:256M", "--iters", "1000", "--db", db,
          (char *)NULL);
    _exit(127);
  }
  /* bounded poll: the first run is running (its rows were planned first) */
  long long running = 0;
  int st = 0;
  for (int i = 0; i < 600 && running != 1; i++) {
    CHECK_MSG(waitpid(pid, &st, WNOHANG) == 0, "sgdlab bench ended before it was interrupted");
    running = query_int(db, "SELECT count(*) FROM runs WHERE status = 'running'");
    if (running != 1) usleep(50 * 1000);
  }
  CHECK_EQ_INT(running, 1);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM runs WHERE status = 'pending'"), 3);
  kill(pid, SIGINT);
  CHECK(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 130);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM runs"), 4);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM runs WHERE status = 'interrupted'"), 1);
  CHECK_EQ_INT(query_int(db, "SELECT count(*) FROM runs WHERE status = 'pending' AND engine != "
                             "(SELECT engine FROM runs WHERE status = 'interrupted')"), 2);
}

TEST(help_and_usage_errors) {
  char out[16384], cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' bench allreduce --help 2>/dev/null", sgdlab_bin());
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 0);
  static const char *const flags[] = {"--np", "--sizes", "--impl", "--servers", "--transport",
                                      "--launcher", "--iters", "--warmup", "--db", "-q", "-v",
                                      "busbw", "mapreduce", "ps-S"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) CHECK_STR_CONTAINS(out, flags[i]);
  snprintf(cmd, sizeof cmd, "'%s' bench --help 2>/dev/null", sgdlab_bin());
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "bench step");
  CHECK_STR_CONTAINS(out, "--servers");
  snprintf(cmd, sizeof cmd, "'%s' bench step -h 2>/dev/null", sgdlab_bin());
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "--set");
  snprintf(cmd, sizeof cmd, "'%s' --help 2>/dev/null", sgdlab_bin());
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "bench step");
  snprintf(cmd, sizeof cmd, "'%s' bench allreduce --impl ring,bogus 2>&1 >/dev/null", sgdlab_bin());
  CHECK_EQ_INT(capture(cmd, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "'bogus'");
  CHECK_MSG(strchr(out, '\n') == out + strlen(out) - 1, "not one line: %s", out);
}
