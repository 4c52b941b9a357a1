/* run_util.c - see run_util.h. */
#define _GNU_SOURCE /* nftw, FTW_PHYS */
#include "run_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "err.h"
#include "opts.h"
#include "records.h"
#include "settings.h"
#include "test.h"

#define POLL_MS 20

static void nap_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- binaries and scratch space ----------------------------------------- */

const char *ru_sgdlab(void) {
  static char path[1024];
  const char *b = getenv("SGDLAB_BIN_DIR");
  snprintf(path, sizeof path, "%s/harness/sgdlab", b ? b : ".");
  return path;
}

int ru_mkdtemp(char *dir, size_t cap, const char *tag) {
  snprintf(dir, cap, "/tmp/sgdlab-%s-XXXXXX", tag);
  if (mkdtemp(dir)) return 0;
  dir[0] = '\0';
  return -1;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb, (void)type, (void)ftw;
  return remove(path);
}

void ru_rm_rf(const char *dir) {
  if (!dir || !dir[0]) return;
  const char *keep = getenv("SGDLAB_KEEP_TMP");
  if (keep && *keep && strcmp(keep, "0")) {
    fprintf(stderr, "kept %s\n", dir);
    return;
  }
  if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
    fprintf(stderr, "could not remove %s\n", dir);
}

static char g_scratch[64];

static void scratch_cleanup(void) { ru_rm_rf(g_scratch); }

const char *ru_scratch(const char *tag) {
  static int registered;
  if (g_scratch[0]) ru_rm_rf(g_scratch);
  if (!registered) registered = atexit(scratch_cleanup) == 0;
  if (ru_mkdtemp(g_scratch, sizeof g_scratch, tag) < 0) return NULL;
  return g_scratch;
}

int ru_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int bad = fputs(text, f) < 0;
  return fclose(f) != 0 || bad ? -1 : 0;
}

int ru_write_train_config(const char *path, const char *name, const char *engine,
                          const char *extra, const char *dump, int workers, long steps) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "name: %s\n"
          "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
          "           lr: 0.1, momentum: 0.9, max_steps: %ld, eval_every: 1000000,\n"
          "           seed: 3, dump_params: '%s'}\n"
          "workers: %d\n"
          "%s"
          "engines:\n"
          "  - %s\n",
          name, steps, dump, workers, extra ? extra : "", engine);
  return fclose(f) ? -1 : 0;
}

char *ru_slurp(const char *path, size_t cap) {
  char *buf = calloc(1, cap);
  FILE *f = fopen(path, "r");
  if (f && buf) buf[fread(buf, 1, cap - 1, f)] = '\0';
  if (f) fclose(f);
  return buf;
}

/* ---- running commands ---------------------------------------------------- */

int ru_exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int ru_sh(const char *cmd) {
  fprintf(stderr, "$ %s\n", cmd);
  int st = system(cmd);
  return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int ru_sgdlab_run(const char *config, const char *db) {
  char cmd[3072];
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' >&2", ru_sgdlab(), config, db);
  return ru_sh(cmd);
}

int ru_sgdlab_run_args(const char *config, const char *db, const char *opt, const char *val) {
  char cmd[3072];
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' '%s' '%s' >&2", ru_sgdlab(), config, db, opt,
           val);
  return ru_sh(cmd);
}

pid_t ru_spawn_sgdlab_run(const char *config, const char *db) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    execl(ru_sgdlab(), "sgdlab", "run", config, "--db", db, (char *)NULL);
    _exit(127);
  }
  return pid;
}

pid_t ru_start(char **argv, const char *errpath, int merge, const char *cwd) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int n = merge ? e : open("/dev/null", O_WRONLY);
    if (e < 0 || n < 0 || (cwd && chdir(cwd) != 0)) _exit(99);
    dup2(e, 2);
    dup2(n, 1);
    argv[0] = (char *)ru_sgdlab();
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

int ru_run(char **argv, int merge, const char *cwd, char *out, size_t cap) {
  char path[] = "/tmp/sgdlab-out-XXXXXX";
  int fd = mkstemp(path), st = 0;
  out[0] = '\0';
  if (fd < 0) return -1;
  close(fd);
  pid_t pid = ru_start(argv, path, merge, cwd);
  if (pid < 0 || waitpid(pid, &st, 0) != pid) {
    unlink(path);
    return -1;
  }
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f) fclose(f);
  unlink(path);
  return ru_exit_code(st);
}

int ru_sgdlab_in(const char *cwd, char **out, ...) {
  char *argv[16];
  int argc = 1;
  va_list ap;
  argv[0] = NULL; /* ru_run puts the binary there */
  va_start(ap, out);
  for (const char *a; argc < 15 && (a = va_arg(ap, const char *));) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  if (!(*out = calloc(1, 1 << 16))) return -1;
  return ru_run(argv, 1, cwd, *out, 1 << 16);
}

int ru_call(int (*cmd)(int, char **), const char *dir, char **out, ...) {
  char *argv[20], path[] = "/tmp/sgdlab-call-XXXXXX";
  int argc = 0, status = 0, fd = mkstemp(path);
  va_list ap;
  *out = NULL;
  if (fd < 0) return -1;
  va_start(ap, out);
  for (const char *a; argc < 19 && (a = va_arg(ap, const char *));) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    if (dir && chdir(dir) != 0) _exit(98);
    int rc = cmd(argc, argv);
    fflush(NULL);
    _exit(rc);
  }
  close(fd);
  int waited = pid > 0 && waitpid(pid, &status, 0) == pid;
  *out = ru_slurp(path, 1 << 22);
  unlink(path);
  return waited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int ru_wait_exit(pid_t pid, double secs, int *status) {
  double until = sg_now() + secs;
  for (;;) {
    if (waitpid(pid, status, WNOHANG) == pid) return 1;
    if (sg_now() >= until) return 0;
    nap_ms(POLL_MS);
  }
}

int ru_wait_exit_code(pid_t pid, double secs) {
  int st = 0;
  if (ru_wait_exit(pid, secs, &st)) return ru_exit_code(st);
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return -1;
}

/* ---- the results database ------------------------------------------------ */

static sqlite3_stmt *db_row(const char *db, const char *sql, sqlite3 **h) {
  sqlite3_stmt *st = NULL;
  *h = NULL;
  if (sqlite3_open_v2(db, h, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) return NULL;
  sqlite3_busy_timeout(*h, 5000);
  if (sqlite3_prepare_v2(*h, sql, -1, &st, NULL) != SQLITE_OK) return NULL;
  if (sqlite3_step(st) != SQLITE_ROW) {
    sqlite3_finalize(st);
    return NULL;
  }
  return st;
}

long long ru_db_int(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st = db_row(db, sql, &h);
  long long v = st ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  sqlite3_close(h);
  return v;
}

char *ru_db_text(const char *db, const char *sql) {
  sqlite3 *h;
  sqlite3_stmt *st = db_row(db, sql, &h);
  char *out = NULL;
  if (st && sqlite3_column_text(st, 0)) out = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);
  return out;
}

void ru_db_text_into(const char *db, const char *sql, char *out, size_t cap) {
  char *v = ru_db_text(db, sql);
  snprintf(out, cap, "%s", v ? v : "");
  free(v);
}

int ru_db_wait(const char *db, const char *sql, long long min, double secs, pid_t watch,
               int *watch_status) {
  double until = sg_now() + secs;
  int st = 0;
  for (;;) {
    if (ru_db_int(db, sql) >= min) return 0;
    if (watch > 0 && waitpid(watch, &st, WNOHANG) == watch) {
      if (watch_status) *watch_status = st;
      return -2;
    }
    if (sg_now() >= until) return -1;
    nap_ms(POLL_MS);
  }
}

/* ---- parameters ---------------------------------------------------------- */

double ru_rel_distance(const char *a_path, const char *b_path, long *nout) {
  FILE *fa = fopen(a_path, "rb"), *fb = fopen(b_path, "rb");
  double num = 0, den = 0, r = -1;
  long n = 0;
  float x, y;
  if (!fa || !fb) goto out;
  while (fread(&x, sizeof x, 1, fa) == 1) {
    if (fread(&y, sizeof y, 1, fb) != 1) goto out;
    num += ((double)x - y) * ((double)x - y);
    den += (double)y * y;
    n++;
  }
  if (fread(&y, sizeof y, 1, fb) == 1 || n == 0 || den == 0) goto out;
  r = sqrt(num / den);
out:
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  if (nout) *nout = n;
  return r;
}

/* ---- processes ----------------------------------------------------------- */

/* /proc/<pid>/stat into buf; the text after the command's ')' or NULL. */
static const char *proc_stat(pid_t pid, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *rp = strrchr(buf, ')'); /* comm may contain spaces */
  return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

pid_t ru_parent_of(pid_t pid) {
  char buf[512];
  const char *s = proc_stat(pid, buf, sizeof buf);
  int ppid;
  if (!s || sscanf(s, "%*c %d", &ppid) != 1) return -1;
  return ppid;
}

static int descends_from(pid_t pid, pid_t ancestor) {
  for (int hops = 0; pid > 1 && hops < 16; hops++) {
    pid = ru_parent_of(pid);
    if (pid == ancestor) return 1;
  }
  return 0;
}

pid_t ru_find_rank(pid_t root, int rank) {
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

int ru_rank_pids(pid_t root, int nranks, pid_t *pids) {
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    pid_t p = ru_find_rank(root, r);
    if (p > 0) pids[n++] = p;
  }
  return n;
}

pid_t ru_child_named(pid_t parent, const char *comm) {
  DIR *d = opendir("/proc");
  pid_t found = 0;
  struct dirent *e;
  while (d && !found && (e = readdir(d))) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid <= 0) continue;
    char buf[512], name[64];
    int ppid;
    const char *s = proc_stat(pid, buf, sizeof buf);
    const char *lp = strchr(buf, '(');
    if (!s || !lp || s - 2 - lp - 1 >= (long)sizeof name) continue;
    snprintf(name, sizeof name, "%.*s", (int)(s - 2 - lp - 1), lp + 1);
    if (sscanf(s, "%*c %d", &ppid) == 1 && ppid == parent && !strcmp(name, comm)) found = pid;
  }
  if (d) closedir(d);
  return found;
}

/* 1 when pid is dead: no such process, or (unless reaped) a zombie. */
static int is_gone(pid_t pid, int reaped) {
  if (reaped) return kill(pid, 0) < 0 && errno == ESRCH;
  char buf[512];
  const char *s = proc_stat(pid, buf, sizeof buf);
  return !s || s[0] == 'Z' || s[0] == 'X';
}

int ru_wait_gone(pid_t pid, double secs, int reaped) {
  double until = sg_now() + secs;
  while (!is_gone(pid, reaped)) {
    if (sg_now() > until) return 0;
    nap_ms(POLL_MS);
  }
  return 1;
}

/* ---- settings and in-process training ------------------------------------ */

const char *ru_known_engines(void) {
  static char buf[512];
  size_t len = 0;
  buf[0] = '\0';
  for (const sg_engine_t *const *e = sg_engines; *e && len < sizeof buf; e++)
    len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s", len ? ", " : "", (*e)->name);
  return buf;
}

const char *ru_data_dir(void) {
  return access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz", R_OK) == 0
             ? "/usr/share/datasets/fashion-mnist"
             : NULL;
}

sg_opts_t *ru_opts_kv(const char *kv) {
  sg_opts_t *o = sg_opts_new();
  char buf[1024];
  if (!o) return NULL;
  snprintf(buf, sizeof buf, "%s", kv);
  char *save = NULL;
  for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(t, '=');
    if (!eq) continue;
    *eq = '\0';
    sg_opts_set(o, t, eq + 1);
  }
  sg_settings_defaults(sg_settings, o);
  return o;
}

sg_opts_t *ru_train_opts(const char *engine, int workers, const char *dump, int steps,
                         const char *const *kv) {
  const sg_engine_t *e = engine ? sg_engine_find(engine) : NULL;
  if (engine && !e) return NULL;
  sg_opts_t *o = sg_opts_new();
  if (!o) return NULL;
  sg_settings_defaults(sg_settings, o);
  if (e) sg_settings_defaults(e->options, o);
  sg_opts_setf(o, "workers", "%d", workers);
  sg_opts_set(o, "batch", "16");
  sg_opts_set(o, "hidden", "32");
  sg_opts_set(o, "lr", "0.1");
  sg_opts_set(o, "momentum", "0.9");
  sg_opts_setf(o, "max_steps", "%d", steps);
  sg_opts_set(o, "eval_every", "1000000");
  sg_opts_set(o, "deadline", "60");
  sg_opts_set(o, "dump_params", dump);
  for (; kv && kv[0]; kv += 2) sg_opts_set(o, kv[0], kv[1]);
  return o;
}

int ru_run_local(const sg_opts_t *o, int workers) {
  sg_records_t *rec = NULL;
  int rc;
  SG_TRY(sg_records_open(&rec, NULL, 0, "worker", sg_wall(), NULL));
  sg_rank_ctx_t ctx = {.rank = 0, .size = 1, .workers = workers, .opts = o, .rec = rec,
                       .t0 = sg_wall()};
  rc = sg_engine_find("local")->run(&ctx);
fail:
  sg_records_close(&rec);
  return rc;
}

/* ---- equivalence with `local` as processes --------------------------------- */

void ru_equivalence_case(const char *tag, const char *config_name, int workers,
                         const char *const (*variants)[2], size_t nvariants, double rtol) {
  const char *d = ru_scratch(tag);
  CHECK(d);
  char cfg[128], db[128], ref[128], dump[128];
  snprintf(cfg, sizeof cfg, "%s/eq.yaml", d);
  snprintf(db, sizeof db, "%s/eq.db", d);
  snprintf(ref, sizeof ref, "%s/local.bin", d);
  CHECK_OK(ru_write_train_config(cfg, config_name, "local", NULL, ref, workers, 100));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  for (size_t v = 0; v < nvariants; v++) {
    snprintf(dump, sizeof dump, "%s/v%zu.bin", d, v);
    CHECK_OK(ru_write_train_config(cfg, config_name, variants[v][0], NULL, dump, workers, 100));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", variants[v][1]);
    double dist = ru_rel_distance(dump, ref, NULL);
    fprintf(stderr, "  %s: relative distance to local %.3g\n", variants[v][1], dist);
    CHECK_MSG(dist >= 0 && dist <= rtol, "%s: distance %.3g > %g", variants[v][1], dist, rtol);
    unlink(dump);
  }
  unlink(ref);
}

/* ---- the fault case ------------------------------------------------------ */

void ru_fault_case(const ru_fault_t *f) {
  const char *d = ru_scratch(f->tag);
  const char *name = f->name;
  const double dl = f->deadline_s;
  CHECK(d);
  char cfg[128], db[128], extra[256], sql[128];
  snprintf(cfg, sizeof cfg, "%s/fault-%d.yaml", d, f->victim);
  snprintf(db, sizeof db, "%s/fault-%d.db", d, f->victim);
  snprintf(extra, sizeof extra, "deadline: %g\ndelay_rank: %d\ndelay_ms: %d\n", dl,
           f->delay_rank, f->delay_ms);
  /* killed long before the end */
  CHECK_OK(ru_write_train_config(cfg, f->config_name, f->engine, extra, "", f->workers, 100000));

  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  CHECK(sg > 0);
  /* Training under way: the watched rank has recorded 5 steps (bounded). */
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM steps WHERE rank = %d", f->watch_rank);
  int st = 0, w = ru_db_wait(db, sql, 5, 60, sg, &st);
  CHECK_MSG(w != -2, "%s: sgdlab exited before the kill (status %d)", name, st);
  if (w < 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(w == 0, "%s: training did not start within 60 s", name);
  pid_t pids[16];
  int np = ru_rank_pids(sg, f->nranks < 16 ? f->nranks : 16, pids);
  pid_t v = ru_find_rank(sg, f->victim);
  if (!(v > 0 && np == f->nranks)) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(v > 0 && np == f->nranks, "%s: found %d rank processes, victim pid %d", name, np,
            (int)v);

  double t_kill = sg_now();
  CHECK_EQ_INT(kill(v, f->sig), 0);
  int exited = ru_wait_exit(sg, 4 * dl + 10, &st);
  double took = sg_now() - t_kill;
  if (!exited) {
    kill(sg, SIGKILL);
    waitpid(sg, &st, 0);
  }
  if (f->sig == SIGSTOP && kill(v, 0) == 0) kill(v, SIGKILL); /* never leave it stopped */
  fprintf(stderr, "  %s: sgdlab exited %.2f s after the kill\n", name, took);
  CHECK_MSG(exited, "%s: sgdlab still running %.1f s after the kill", name, took);
  CHECK_MSG(took <= 2 * dl, "%s: failure took %.2f s > 2 deadlines", name, took);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: exit status %d, expected 1", name, st);

  char *status = ru_db_text(db, "SELECT status FROM runs ORDER BY id DESC LIMIT 1");
  char *error = ru_db_text(db, "SELECT error FROM runs ORDER BY id DESC LIMIT 1");
  char want[32];
  snprintf(want, sizeof want, "rank %d (", f->victim);
  fprintf(stderr, "  %s: run %s: %s\n", name, status ? status : "?", error ? error : "?");
  int failed = status && !strcmp(status, "failed");
  int named = error && strstr(error, want);
  /* a stopped rank is named first, with its process state */
  int first = f->sig != SIGSTOP || (error && !strncmp(error, want, strlen(want)) &&
                                    strstr(error, "is stopped (state T)"));
  free(status);
  free(error);
  CHECK_MSG(failed, "%s: run not marked failed", name);
  CHECK_MSG(named, "%s: the error does not name %s", name, want);
  CHECK_MSG(first, "%s: the error does not begin with %s ... is stopped (state T)", name, want);
  /* Under mpirun, ranks are not the harness's children and may need a
   * moment after sgdlab exits. */
  for (int i = 0; i < np; i++) {
    double left = f->gone_each_s > 0 ? f->gone_each_s : t_kill + f->gone_after_signal_s - sg_now();
    int gone = ru_wait_gone(pids[i], left > 0 ? left : 0, 1);
    CHECK_MSG(gone, "%s: rank process %d still there %.1f s after the kill", name, (int)pids[i],
              sg_now() - t_kill);
  }
  fprintf(stderr, "  %s: all rank processes gone %.2f s after the kill\n", name, sg_now() - t_kill);
}

double ru_final_acc(const char *db, long long id) {
  char sql[160], buf[64];
  snprintf(sql, sizeof sql,
           "SELECT test_acc FROM evals WHERE run_id = %lld ORDER BY step DESC LIMIT 1", id);
  ru_db_text_into(db, sql, buf, sizeof buf);
  return buf[0] ? atof(buf) : -1;
}

int ru_none_vs_topk(const char *tag, const char *none, const char *topk, int min_rank,
                    double acc[2], double bytes[2]) {
  const char *dir = ru_scratch(tag);
  char cfg[128], db[128], text[512];
  acc[0] = acc[1] = -1;
  bytes[0] = bytes[1] = 0;
  if (!dir) return -1;
  snprintf(cfg, sizeof cfg, "%s/topk.yaml", dir);
  snprintf(db, sizeof db, "%s/topk.db", dir);
  snprintf(text, sizeof text,
           "name: %s\n"
           "workload: {dataset: fashion-mnist, model: mlp, hidden: [128], batch: 64,\n"
           "           lr: 0.1, momentum: 0.9, max_steps: 300, eval_every: 300, seed: 1}\n"
           "workers: 3\nengines:\n  - %s\n  - %s\n", tag, none, topk);
  if (ru_write_file(cfg, text) < 0 || ru_sgdlab_run(cfg, db) != 0) return -1;
  for (int m = 0; m < 2; m++) {
    char sql[256];
    acc[m] = ru_final_acc(db, ru_db_int(db, "SELECT MIN(id) FROM runs") + m);
    snprintf(sql, sizeof sql, "SELECT SUM(bytes_sent) FROM steps WHERE rank >= %d AND run_id = "
             "(SELECT MIN(id) + %d FROM runs)", min_rank, m);
    bytes[m] = (double)ru_db_int(db, sql);
  }
  return 0;
}

ru_kill_outcome_t ru_kill_outcome(pid_t sg, double t_kill, double wait_s, const char *db,
                                  int rank, const char *what) {
  ru_kill_outcome_t o;
  char name[32];
  o.code = ru_wait_exit_code(sg, wait_s);
  o.took = sg_now() - t_kill;
  char *error = ru_db_text(db, "SELECT error FROM runs ORDER BY id DESC LIMIT 1");
  fprintf(stderr, "  %s: exit %d %.2f s after the kill: %s\n", what, o.code, o.took,
          error ? error : "?");
  snprintf(name, sizeof name, "rank %d", rank);
  o.named = error && strstr(error, name);
  free(error);
  return o;
}

int ru_cluster_reference(const char *d, const char *name, int steps, char *ref, size_t cap) {
  char cfg[512], db[512];
  snprintf(cfg, sizeof cfg, "%s/local.yaml", d);
  snprintf(db, sizeof db, "%s/local.db", d);
  snprintf(ref, cap, "%s/local.bin", d);
  if (ru_write_train_config(cfg, name, "local", NULL, ref, 4, steps) < 0 ||
      ru_sgdlab_run(cfg, db) != 0)
    return -1;
  setenv("OMPI_MCA_btl", "tcp,self", 1);
  setenv("OMPI_MCA_btl_tcp_if_include", "198.18.0.0/15", 1);
  setenv("OMPI_MCA_oob_tcp_if_include", "198.18.0.0/15", 1);
  return 0;
}
