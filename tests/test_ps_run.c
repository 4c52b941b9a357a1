/* test_ps_run.c - the ps engine as real processes through `sgdlab run`:
 * servers and workers over ZeroMQ (local launcher) and MPI (mpirun), on
 * real Fashion-MNIST, records in a real SQLite file.
 *
 *  - equivalence: ps sync with S in {1, 2}, N = 4: worker 0's final
 *    parameters (dump_params) within relative L2 distance 1e-4 of local's
 *    with batch 4b after 100 steps, on both transports (the planted bug
 *    that must fail this bound is in test_ps_train);
 *  - the ssp bound from the step records: worker w starts step t only
 *    after every other worker v has pushed step t-s-1, i.e. after
 *    t_start(v, t-s-1) + compute_s(v, t-s-1) (the push leaves right after
 *    the compute); checked for s = 0 and 2 with one slowed worker, and
 *    shown to fail for async on the same records;
 *  - async records a staleness distribution;
 *  - faults: a worker, then a server, killed (SIGKILL) under sync: sgdlab
 *    exits 1 within two deadlines, the run is failed naming the rank.
 */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define RTOL 1e-4
#define DEADLINE_S 4.0

static char g_dir[64];

static const char *sgdlab_bin(void) {
  static char path[512];
  const char *bin = getenv("SGDLAB_BIN_DIR");
  snprintf(path, sizeof path, "%s/harness/sgdlab", bin ? bin : ".");
  return path;
}

/* A fresh directory per test; the previous one is removed. */
static const char *tmpdir(void) {
  if (g_dir[0]) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
  }
  snprintf(g_dir, sizeof g_dir, "/tmp/sgdlab-psrun-XXXXXX");
  return mkdtemp(g_dir);
}

/* Write an experiment file: one engine entry, the workload of the
 * equivalence checks, dump_params = dump. */
static int write_config(const char *path, const char *engine, const char *extra,
                        const char *dump, int workers, long steps) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "name: ps-test\n"
          "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
          "           lr: 0.1, momentum: 0.9, max_steps: %ld, eval_every: 1000000,\n"
          "           seed: 3, dump_params: '%s'}\n"
          "workers: %d\n"
          "%s"
          "engines:\n"
          "  - %s\n",
          steps, dump, workers, extra ? extra : "", engine);
  return fclose(f);
}

/* `sgdlab run CONFIG --db DB`; the exit code, or -1. */
static int sgdlab_run(const char *config, const char *db) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' >&2", sgdlab_bin(), config, db);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double rel_distance(const char *a_path, const char *b_path) {
  FILE *fa = fopen(a_path, "rb"), *fb = fopen(b_path, "rb");
  double num = 0, den = 0;
  long na = 0, extra = 0;
  float x, y;
  if (!fa || !fb) goto fail;
  while (fread(&x, sizeof x, 1, fa) == 1) {
    if (fread(&y, sizeof y, 1, fb) != 1) goto fail;
    num += ((double)x - y) * ((double)x - y);
    den += (double)y * y;
    na++;
  }
  while (fread(&y, sizeof y, 1, fb) == 1) extra++;
  if (extra || na == 0 || den == 0) goto fail;
  fclose(fa);
  fclose(fb);
  return sqrt(num / den);
fail:
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return -1;
}

/* ---- faults ------------------------------------------------------------ */

static pid_t parent_of(pid_t pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *rp = strrchr(buf, ')'); /* comm may contain spaces */
  int ppid;
  if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1) return -1;
  return ppid;
}

static int descends_from(pid_t pid, pid_t ancestor) {
  for (int hops = 0; pid > 1 && hops < 16; hops++) {
    pid = parent_of(pid);
    if (pid == ancestor) return 1;
  }
  return 0;
}

/* The rank's pid among `root`'s descendants (SGDLAB_RANK or
 * OMPI_COMM_WORLD_RANK in its environment), 0 when none. */
static pid_t find_rank(pid_t root, int rank) {
  char want1[48], want2[48];
  snprintf(want1, sizeof want1, "SGDLAB_RANK=%d", rank);
  snprintf(want2, sizeof want2, "OMPI_COMM_WORLD_RANK=%d", rank);
  DIR *dir = opendir("/proc");
  struct dirent *e;
  pid_t found = 0;
  while (dir && !found && (e = readdir(dir))) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid <= 1 || !descends_from(pid, root)) continue;
    char path[64], comm[64] = "", env[16384];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    if (!fgets(comm, sizeof comm, f)) comm[0] = '\0';
    fclose(f);
    if (strncmp(comm, "sgdlab-rank", 11)) continue;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    if (!(f = fopen(path, "r"))) continue;
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = '\0';
    for (size_t at = 0; at < n; at += strlen(env + at) + 1)
      if (!strcmp(env + at, want1) || !strcmp(env + at, want2)) found = pid;
  }
  if (dir) closedir(dir);
  return found;
}

/* Every sgdlab-rank under root, into pids (at most cap); the count. */
static int rank_pids(pid_t root, int nranks, pid_t *pids) {
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    pid_t p = find_rank(root, r);
    if (p > 0) pids[n++] = p;
  }
  return n;
}

/* A single value from the database (NULL when absent); caller frees. */
static char *db_text(const char *db, const char *sql) {
  sqlite3 *h = NULL;
  sqlite3_stmt *st = NULL;
  char *out = NULL;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) goto done;
  sqlite3_busy_timeout(h, 2000);
  if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) != SQLITE_OK) goto done;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
    out = strdup((const char *)sqlite3_column_text(st, 0));
done:
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

static int spawn_sgdlab(const char *config, const char *db, pid_t *out) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execl(sgdlab_bin(), "sgdlab", "run", config, "--db", db, (char *)NULL);
    _exit(127);
  }
  *out = pid;
  return 0;
}

/* Start a long run (worker rank 3 is slowed, so every step has a window
 * where the others wait for it), wait until rank 2 has recorded 5 steps, send
 * `sig` to rank `victim`; check how the run ends.  SIGKILL: the harness
 * sees the death.  SIGSTOP: a silent peer nobody can see die; only the
 * engine's deadlines can find it, and the driver's message must name it.
 * must_name: the run's error must name the victim (see the mpi case). */
static void kill_case(const char *transport, int victim, int sig, int must_name,
                      const char *name) {
  const char *d = tmpdir();
  CHECK(d);
  char cfg[128], db[128], extra[256], engine[128];
  snprintf(cfg, sizeof cfg, "%s/fault-%s-%d.yaml", d, transport, victim);
  snprintf(db, sizeof db, "%s/fault-%s-%d.db", d, transport, victim);
  snprintf(extra, sizeof extra, "deadline: %g\ndelay_rank: 3\ndelay_ms: 100\n", DEADLINE_S);
  snprintf(engine, sizeof engine, "{engine: ps, mode: sync, servers: 2, transport: %s}", transport);
  CHECK_OK(write_config(cfg, engine, extra, "", 3, 100000)); /* killed long before the end */

  pid_t sg;
  CHECK_OK(spawn_sgdlab(cfg, db, &sg));
  /* Poll the database until training is under way (bounded). */
  double t_start = sg_now();
  int steps = 0;
  while (steps < 5 && sg_now() - t_start < 60) {
    char *v = db_text(db, "SELECT COUNT(*) FROM steps WHERE rank = 3");
    steps = v ? atoi(v) : 0;
    free(v);
    int st;
    if (waitpid(sg, &st, WNOHANG) == sg) {
      CHECK_MSG(0, "%s: sgdlab exited before the kill (status %d)", name, st);
    }
    if (steps < 5) usleep(50 * 1000); /* polling interval, not synchronisation */
  }
  CHECK_MSG(steps >= 5, "%s: training did not start within 60 s", name);
  pid_t pids[8];
  int np = rank_pids(sg, 5, pids);
  pid_t v = find_rank(sg, victim);
  CHECK_MSG(v > 0 && np == 5, "%s: found %d rank processes, victim pid %d", name, np, (int)v);

  double t_kill = sg_now();
  CHECK_EQ_INT(kill(v, sig), 0);
  int st = 0;
  pid_t w = 0;
  while ((w = waitpid(sg, &st, WNOHANG)) == 0 && sg_now() - t_kill < 4 * DEADLINE_S + 10)
    usleep(20 * 1000);
  double took = sg_now() - t_kill;
  if (w != sg) {
    kill(sg, SIGKILL);
    waitpid(sg, &st, 0);
  }
  if (sig == SIGSTOP && kill(v, 0) == 0) kill(v, SIGKILL); /* never leave it stopped */
  fprintf(stderr, "  %s: sgdlab exited %.2f s after the kill\n", name, took);
  CHECK_MSG(w == sg, "%s: sgdlab still running %.1f s after the kill", name, took);
  CHECK_MSG(took <= 2 * DEADLINE_S, "%s: failure took %.2f s > 2 deadlines", name, took);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: exit status %d, expected 1", name, st);

  char *status = db_text(db, "SELECT status FROM runs ORDER BY id DESC LIMIT 1");
  char *error = db_text(db, "SELECT error FROM runs ORDER BY id DESC LIMIT 1");
  char want[32];
  snprintf(want, sizeof want, "rank %d", victim);
  fprintf(stderr, "  %s: run %s: %s\n", name, status ? status : "?", error ? error : "?");
  int failed = status && !strcmp(status, "failed");
  int named = error && strstr(error, want);
  free(status);
  free(error);
  CHECK_MSG(failed, "%s: run not marked failed", name);
  CHECK_MSG(named || !must_name, "%s: the error does not name %s", name, want);
  for (int i = 0; i < np; i++) {
    /* mpirun may return while its killed ranks are still being torn down:
     * give them a bounded moment. */
    double t_gone = sg_now();
    while (!(kill(pids[i], 0) < 0 && errno == ESRCH) && sg_now() - t_gone < 3) usleep(20 * 1000);
    int gone = kill(pids[i], 0) < 0 && errno == ESRCH;
    CHECK_MSG(gone, "%s: rank process %d is still there", name, (int)pids[i]);
  }
}

TEST(sync_processes_match_local_on_both_transports) {
  const char *d = tmpdir();
  CHECK(d);
  char cfg[128], db[128], ref[128], dump[128];
  snprintf(cfg, sizeof cfg, "%s/eq.yaml", d);
  snprintf(db, sizeof db, "%s/eq.db", d);
  snprintf(ref, sizeof ref, "%s/local.bin", d);
  CHECK_OK(write_config(cfg, "local", NULL, ref, 4, 100));
  CHECK_EQ_INT(sgdlab_run(cfg, db), 0);
  static const char *const variants[][2] = {
      {"{engine: ps, mode: sync, servers: 1, transport: zmq}", "zmq S=1"},
      {"{engine: ps, mode: sync, servers: 2, transport: zmq}", "zmq S=2"},
      {"{engine: ps, mode: sync, servers: 1, transport: mpi}", "mpi S=1"},
      {"{engine: ps, mode: sync, servers: 2, transport: mpi}", "mpi S=2"},
  };
  for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
    snprintf(dump, sizeof dump, "%s/ps%zu.bin", d, v);
    CHECK_OK(write_config(cfg, variants[v][0], NULL, dump, 4, 100));
    CHECK_MSG(sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", variants[v][1]);
    double dist = rel_distance(dump, ref);
    fprintf(stderr, "  %s: relative distance to local %.3g\n", variants[v][1], dist);
    CHECK_MSG(dist >= 0 && dist <= RTOL, "%s: distance %.3g > %g", variants[v][1], dist, RTOL);
    unlink(dump);
  }
  unlink(ref);
}

/* Pairs (w at step t, v at step t-lag) where w started before v's push
 * of step t-lag left: a worker ran more than lag-1 clocks ahead. */
static long violations(const char *db, int lag) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM steps a JOIN steps b ON a.run_id = b.run_id "
           "AND a.role = 'worker' AND b.role = 'worker' AND a.rank <> b.rank "
           "AND b.step = a.step - %d "
           "WHERE a.run_id = (SELECT MAX(id) FROM runs) "
           "AND a.t_start < b.t_start + b.compute_s - 1e-6",
           lag);
  char *v = db_text(db, sql);
  long n = v ? atol(v) : -1;
  free(v);
  return n;
}

static int straggler_run(const char *d, const char *engine, char *db, size_t dblen) {
  char cfg[128];
  snprintf(cfg, sizeof cfg, "%s/bound.yaml", d);
  snprintf(db, dblen, "%s/bound.db", d);
  /* worker rank 2 (of ranks 1..4) is 10 ms slower per step */
  if (write_config(cfg, engine, "delay_rank: 2\ndelay_ms: 10\n", "", 4, 60)) return -1;
  return sgdlab_run(cfg, db);
}

TEST(ssp_bound_holds_in_the_step_records) {
  const char *d = tmpdir();
  CHECK(d);
  char db[128];
  for (int s = 0; s <= 2; s += 2) {
    char engine[128];
    snprintf(engine, sizeof engine, "{engine: ps, mode: ssp, staleness: %d}", s);
    CHECK_EQ_INT(straggler_run(d, engine, db, sizeof db), 0);
    long bad = violations(db, s + 1);
    fprintf(stderr, "  ssp(%d): %ld starts more than %d clocks ahead\n", s, bad, s);
    CHECK_EQ_INT(bad, 0);
    if (s > 0) {
      /* and the slack is used: some worker was s clocks ahead */
      long used = violations(db, s);
      CHECK_MSG(used > 0, "ssp(%d): no worker ever ran %d clocks ahead", s, s);
    }
  }
  /* The same check on async records finds workers far ahead. */
  CHECK_EQ_INT(straggler_run(d, "{engine: ps, mode: async}", db, sizeof db), 0);
  long bad = violations(db, 3);
  fprintf(stderr, "  async: %ld starts more than 2 clocks ahead\n", bad);
  CHECK_MSG(bad > 0, "the bound check cannot fail: async stayed within 2 clocks");
  /* async records a staleness distribution */
  char *v = db_text(db, "SELECT COUNT(DISTINCT staleness) FROM steps WHERE role = 'worker' "
                        "AND staleness > 0 AND run_id = (SELECT MAX(id) FROM runs)");
  int kinds = v ? atoi(v) : 0;
  free(v);
  CHECK_MSG(kinds >= 2, "async staleness took %d distinct positive values", kinds);
}

TEST(worker_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 4, SIGKILL, 1, "zmq worker"); }
TEST(server_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 1, SIGKILL, 1, "zmq server"); }
/* A stopped process is silent but alive: only the engine's deadlines find
 * it, and the server (which knows who did not push) must name it. */
TEST(stopped_worker_is_named_by_the_server_zmq) { kill_case("zmq", 4, SIGSTOP, 1, "zmq stopped worker"); }
TEST(stopped_server_is_named_by_the_workers_zmq) { kill_case("zmq", 1, SIGSTOP, 1, "zmq stopped server"); }
TEST(worker_killed_fails_the_run_mpi) { kill_case("mpi", 4, SIGKILL, 0, "mpi worker"); }

__attribute__((destructor)) static void remove_tmpdir(void) {
  if (!g_dir[0]) return;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
}

/* async, as processes: a worker killed (SIGKILL) mid-run.  The engine
 * declares that worker rank tolerable to lose (tolerates_exit), the
 * servers stop counting it after one deadline, and the run ends ok with
 * the death recorded (ps.dead_worker naming the rank). */
TEST(async_worker_killed_the_run_goes_on_zmq) {
  const char *d = tmpdir();
  CHECK(d);
  char cfg[128], db[128], extra[256];
  snprintf(cfg, sizeof cfg, "%s/async-kill.yaml", d);
  snprintf(db, sizeof db, "%s/async-kill.db", d);
  snprintf(extra, sizeof extra, "deadline: %g\ndelay_rank: 3\ndelay_ms: 20\n", DEADLINE_S);
  CHECK_OK(write_config(cfg, "{engine: ps, mode: async, servers: 1, transport: zmq}", extra, "",
                        3, 600));
  pid_t sg;
  CHECK_OK(spawn_sgdlab(cfg, db, &sg));
  double t_start = sg_now();
  int steps = 0;
  while (steps < 5 && sg_now() - t_start < 60) {
    char *v = db_text(db, "SELECT COUNT(*) FROM steps WHERE rank = 2");
    steps = v ? atoi(v) : 0;
    free(v);
    if (steps < 5) usleep(50 * 1000); /* polling interval, not synchronisation */
  }
  CHECK_MSG(steps >= 5, "training did not start within 60 s");
  pid_t v = find_rank(sg, 2);
  CHECK_MSG(v > 0, "worker rank 2 not found");
  CHECK_EQ_INT(kill(v, SIGKILL), 0);
  int st = 0;
  pid_t w = 0;
  double t_kill = sg_now();
  while ((w = waitpid(sg, &st, WNOHANG)) == 0 && sg_now() - t_kill < 60) usleep(20 * 1000);
  if (w != sg) {
    kill(sg, SIGKILL);
    waitpid(sg, &st, 0);
  }
  CHECK_MSG(w == sg, "sgdlab still running 60 s after the kill");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d, expected 0", st);
  char *status = db_text(db, "SELECT status FROM runs ORDER BY id DESC LIMIT 1");
  char *dead = db_text(db, "SELECT value FROM run_info WHERE key = 'ps.dead_worker'");
  char *last = db_text(db, "SELECT MAX(step) FROM steps WHERE rank = 3");
  fprintf(stderr, "  run %s; dead: %s; rank 3 last step %s\n", status ? status : "?",
          dead ? dead : "-", last ? last : "-");
  int ok = status && !strcmp(status, "ok");
  int named = dead && strstr(dead, "worker rank 2");
  int finished = last && atoi(last) == 599;
  free(status);
  free(dead);
  free(last);
  CHECK_MSG(ok, "run not ok");
  CHECK_MSG(named, "no ps.dead_worker naming worker rank 2");
  CHECK_MSG(finished, "worker rank 3 did not finish its 600 steps");
}
