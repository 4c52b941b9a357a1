/* test_outputs.c - what sgdlab writes goes only into the user's own
 * directories and files, and several sgdlab share one results database.
 *
 * Real sgdlab processes, real SQLite, real gnuplot.  As root, with the
 * unprivileged user `nobody` as the other local user (a forked child that
 * drops to it): nobody prepares a directory of its own with links to a
 * root-only file, a link where the database will be, a database file of
 * its own; root's report, export, trace and run must refuse them (exit 2,
 * one line) and leave the root-only file as it was.  Then: two `run
 * --resume` of one experiment run each run once; a second `sgdlab run`
 * into a database another harness is recording into finishes; a database
 * in a directory its reader cannot write is readable by list, show,
 * report, export and trace, which write nothing; a FIFO or a device
 * given as the database is refused at once, never a blocked open.
 *
 * Ordering comes from the database's state (ru_db_wait), never from a
 * sleep.  Without root (no second user to be) the cases say so and pass.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sqlite3.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "run_util.h"
#include "test.h"

static char g_root[256];  /* scratch: 0711, root's */
static char g_db[512];    /* a results database with one real run (root's) */
static uid_t g_nobody = 65534;
static gid_t g_nogroup = 65534;

/* ---- the two users ------------------------------------------------------- */

static int need_root(void) {
  if (geteuid() == 0) return 1;
  fprintf(stderr, "  skipped: needs root (a second local user to attack as)\n");
  return 0;
}

/* Drop to nobody in this (child) process; 0 or -1. */
static int become_nobody(void) {
  return setgroups(0, NULL) == 0 && setgid(g_nogroup) == 0 && setuid(g_nobody) == 0 ? 0 : -1;
}

/* A shell command run as nobody (what the attacker prepares); exit code,
 * -1 when it ran past 30 s (then killed). */
static int nobody_sh(const char *fmt, ...) {
  char cmd[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  fprintf(stderr, "  nobody$ %s\n", cmd);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    if (become_nobody() < 0) _exit(97);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  return pid < 0 ? -1 : ru_wait_exit_code(pid, 30);
}

/* sgdlab with argv (argv[0] replaced), as nobody when as_nobody, in cwd;
 * stdout and stderr into out.  Exit code, -1 when it ran past secs. */
static int sgdlab_as(int as_nobody, const char *cwd, char *out, size_t cap, double secs,
                     char **argv) {
  char path[512];
  snprintf(path, sizeof path, "%s/out.%d.txt", g_root, (int)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd, 1);
    dup2(fd, 2);
    if ((as_nobody && become_nobody() < 0) || (cwd && chdir(cwd) != 0)) _exit(98);
    argv[0] = (char *)ru_sgdlab();
    execv(argv[0], argv);
    _exit(127);
  }
  close(fd);
  int code = pid < 0 ? -1 : ru_wait_exit_code(pid, secs);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = '\0';
  if (f) fclose(f);
  unlink(path);
  fprintf(stderr, "  %s$ sgdlab %s ... -> %d\n%s", as_nobody ? "nobody" : "root", argv[1], code,
          out);
  return code;
}

#define SGDLAB(nob, cwd, out, ...)                                                   \
  sgdlab_as(nob, cwd, out, sizeof out, 120, (char *[]){NULL, __VA_ARGS__, NULL})

static char *path_in(char *buf, size_t cap, const char *rel) {
  snprintf(buf, cap, "%s/%s", g_root, rel);
  return buf;
}

static int file_is(const char *path, const char *text) {
  char *got = ru_slurp(path, 4096);
  int same = got && !strcmp(got, text);
  free(got);
  return same;
}

static int exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* How many entries (not . and ..) dir holds; -1 when it cannot be read. */
static int entries(const char *dir) {
  char cmd[1200], out[64];
  snprintf(cmd, sizeof cmd, "ls -A '%.1000s' | wc -l", dir);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  int n = fgets(out, sizeof out, p) ? atoi(out) : -1;
  pclose(p);
  return n;
}

/* An experiment file: `runs` runs of `engine` ("local" when NULL; seeds
 * 1..runs) by `workers` workers, `steps` steps, an evaluation every
 * `every` steps. */
static int write_config_of(const char *path, const char *name, const char *engine, int workers,
                           int runs, int steps, int every) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "name: %s\n"
          "workload: {dataset: fashion-mnist, model: softmax, batch: 32, lr: 0.1,\n"
          "           max_steps: %d, eval_every: %d, seed: 1, epochs: 1000}\n"
          "workers: %d\n"
          "engines:\n",
          name, steps, every, workers);
  for (int i = 0; i < runs; i++)
    fprintf(f, "  - {engine: %s, seed: %d}\n", engine ? engine : "local", i + 1);
  return fclose(f) ? -1 : 0;
}

static int write_config(const char *path, const char *name, int runs, int steps, int every) {
  return write_config_of(path, name, NULL, 1, runs, steps, every);
}

/* Scratch (0711), a root-only vault with a victim file, a sticky
 * world-writable "shared" directory (as /tmp), and one real run. */
static int setup(void) {
  static int done;
  char p[1024], cfg[1024], out[8192];
  if (done) return 0;
  struct passwd *pw = getpwnam("nobody");
  if (pw) g_nobody = pw->pw_uid, g_nogroup = pw->pw_gid;
  if (ru_mkdtemp(g_root, sizeof g_root, "outputs") < 0 || chmod(g_root, 0711) < 0) return -1;
  if (mkdir(path_in(p, sizeof p, "vault"), 0700) < 0 ||
      ru_write_file(path_in(p, sizeof p, "vault/victim"), "SECRET\n") < 0)
    return -1;
  if (mkdir(path_in(p, sizeof p, "shared"), 0777) < 0 || chmod(p, 01777) < 0) return -1;
  if (mkdir(path_in(p, sizeof p, "db"), 0755) < 0) return -1;
  snprintf(g_db, sizeof g_db, "%s/db/results.db", g_root);
  if (write_config(path_in(cfg, sizeof cfg, "one.yaml"), "one", 1, 60, 20) < 0) return -1;
  if (SGDLAB(0, NULL, out, "run", cfg, "--db", g_db, "-q") != 0) return -1;
  done = 1;
  return 0;
}

__attribute__((destructor)) static void teardown(void) {
  if (g_root[0]) ru_rm_rf(g_root);
}

#define VICTIM_SAFE()                                                                  \
  do {                                                                                 \
    char v_[1024];                                                                      \
    CHECK_MSG(file_is(path_in(v_, sizeof v_, "vault/victim"), "SECRET\n"),             \
              "the root-only file was written through a link");                       \
  } while (0)

/* ---- outputs -------------------------------------------------------------- */

/* nobody's directory with links to the victim where the report writes:
 * refused before anything is written, the victim intact. */
TEST(report_refuses_a_directory_of_another_user) {
  char qs[1024], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  path_in(qs, sizeof qs, "shared/qs");
  CHECK_EQ_INT(nobody_sh("mkdir -m777 %s && ln -s %s/vault/victim %s/summary.md && "
                         "ln -s %s/vault/victim %s/index.html", qs, g_root, qs, g_root, qs), 0);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "report", "--db", g_db, "--out", qs), 2);
  CHECK_STR_CONTAINS(out, "owned by uid");
  CHECK_MSG(strchr(out, '\n') == strrchr(out, '\n'), "more than one line: %s", out);
  VICTIM_SAFE();
  CHECK_EQ_INT(entries(qs), 2); /* nothing written there */
}

/* A directory of ours that others may write, and one with a file another
 * user left under a report name: refused before anything is written. */
TEST(report_refuses_a_writable_directory_and_a_foreign_file) {
  char open_dir[1024], mine[1024], p[1536], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  CHECK(mkdir(path_in(open_dir, sizeof open_dir, "open"), 0) == 0 && chmod(open_dir, 0777) == 0);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "report", "--db", g_db, "--out", open_dir), 2);
  CHECK_STR_CONTAINS(out, "writable by its group or others");
  CHECK_EQ_INT(entries(open_dir), 0);
  CHECK(mkdir(path_in(mine, sizeof mine, "mine"), 0755) == 0);
  snprintf(p, sizeof p, "%s/acc_vs_time.png", mine);
  CHECK(ru_write_file(p, "left by nobody\n") == 0 && chown(p, g_nobody, g_nogroup) == 0);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "report", "--db", g_db, "--out", mine), 2);
  CHECK_STR_CONTAINS(out, "acc_vs_time.png is not yours");
  CHECK_EQ_INT(entries(mine), 1);
  CHECK(file_is(p, "left by nobody\n"));
}

/* gnuplot writes its images by name: a link of ours at an image's name
 * is refused, never followed; a clean directory gets the whole report. */
TEST(report_never_follows_a_link_at_a_figure_name) {
  char dir[1024], p[1536], v[1024], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  CHECK(mkdir(path_in(dir, sizeof dir, "figs"), 0755) == 0);
  snprintf(p, sizeof p, "%s/acc_vs_time.svg", dir);
  CHECK(symlink(path_in(v, sizeof v, "vault/victim"), p) == 0);
  CHECK(SGDLAB(0, NULL, out, "report", "--db", g_db, "--out", dir) != 0);
  CHECK_STR_CONTAINS(out, "acc_vs_time.svg is a symbolic link");
  VICTIM_SAFE();
  CHECK(unlink(p) == 0);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "report", "--db", g_db, "--out", dir), 0);
  snprintf(p, sizeof p, "%s/acc_vs_time.svg", dir);
  struct stat sb;
  CHECK(lstat(p, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == 0);
}

/* export --out and trace --out/--html: nobody's links refused, the victim
 * intact; our own directory works, and a link there is refused too. */
TEST(export_and_trace_refuse_links_and_foreign_directories) {
  char qs[1024], mine[1024], p[1536], v[1024], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  path_in(qs, sizeof qs, "shared/qx");
  path_in(v, sizeof v, "vault/victim");
  CHECK_EQ_INT(nobody_sh("mkdir -m777 %s && ln -s %s %s/e.csv && ln -s %s %s/t.json && "
                         "ln -s %s %s/t.html", qs, v, qs, v, qs, v, qs), 0);
  snprintf(p, sizeof p, "%s/e.csv", qs);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "export", "--db", g_db, "--format", "csv", "--out", p), 2);
  CHECK_STR_CONTAINS(out, "owned by uid");
  snprintf(p, sizeof p, "%s/t.json", qs);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "trace", "1", "--db", g_db, "--out", p), 2);
  snprintf(p, sizeof p, "%s/t.html", qs);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "trace", "1", "--db", g_db, "--html", p), 2);
  VICTIM_SAFE();
  CHECK(mkdir(path_in(mine, sizeof mine, "exp"), 0755) == 0);
  snprintf(p, sizeof p, "%s/link.csv", mine);
  CHECK(symlink(v, p) == 0);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "export", "--db", g_db, "--format", "csv", "--out", p), 2);
  CHECK_STR_CONTAINS(out, "link.csv is a symbolic link");
  VICTIM_SAFE();
  snprintf(p, sizeof p, "%s/e.json", mine);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "export", "--db", g_db, "--format", "json", "--out", p), 0);
  snprintf(p, sizeof p, "%s/t.html", mine);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "trace", "1", "--db", g_db, "--html", p), 0);
  CHECK_EQ_INT(entries(mine), 3); /* the link, e.json, t.html: no temporary left */
}

/* ---- the database --------------------------------------------------------- */

/* A link nobody planted where the database goes (into the root-only
 * vault), nobody's own database file, a -wal that is not ours: refused,
 * nothing created or written. */
TEST(run_refuses_a_planted_database) {
  char cfg[1024], qs[1024], p[1536], dir[1024], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  path_in(cfg, sizeof cfg, "one.yaml");
  path_in(qs, sizeof qs, "shared/qd");
  CHECK_EQ_INT(nobody_sh("mkdir -m777 %s && ln -s %s/vault/new.db %s/cf.db && "
                         "cp %s %s/theirs.db", qs, g_root, qs, g_db, qs), 0);
  snprintf(p, sizeof p, "%s/cf.db", qs);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "run", cfg, "--db", p), 2);
  CHECK_MSG(!exists(path_in(dir, sizeof dir, "vault/new.db")), "a database was made through "
            "the link");
  snprintf(p, sizeof p, "%s/theirs.db", qs);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "run", cfg, "--db", p), 2);
  long long runs = ru_db_int(p, "SELECT count(*) FROM runs");
  CHECK_EQ_INT(runs, 1);
  /* in a directory of ours: a database file, or a -wal, of another user */
  CHECK(mkdir(path_in(dir, sizeof dir, "dbs"), 0755) == 0);
  snprintf(p, sizeof p, "cp %.400s %.400s/r.db && chown %u %.400s/r.db", g_db, dir,
           (unsigned)g_nobody, dir);
  CHECK_EQ_INT(ru_sh(p), 0);
  snprintf(p, sizeof p, "%s/r.db", dir);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "run", cfg, "--db", p), 2);
  CHECK_STR_CONTAINS(out, "r.db is not yours");
  CHECK_EQ_INT(ru_db_int(p, "SELECT count(*) FROM runs"), 1);
  snprintf(p, sizeof p, "%s/w.db-wal", dir);
  CHECK(ru_write_file(p, "") == 0 && chown(p, g_nobody, g_nogroup) == 0);
  snprintf(p, sizeof p, "%s/w.db", dir);
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "run", cfg, "--db", p), 2);
  CHECK_STR_CONTAINS(out, "w.db-wal is not yours");
  CHECK(!exists(p));
}

/* ---- several writers ------------------------------------------------------ */

/* Per run: evaluations, step rows and rank rows, as "e/s/r" text. */
static void counts(const char *db, long long id, char *buf, size_t cap) {
  char q[256];
  snprintf(q, sizeof q, "SELECT (SELECT count(*) FROM evals WHERE run_id=%lld) || '/' ||"
           " (SELECT count(*) FROM steps WHERE run_id=%lld) || '/' ||"
           " (SELECT count(*) FROM ranks WHERE run_id=%lld)", id, id, id);
  ru_db_text_into(db, q, buf, cap);
}

/* Two `run --resume` of one experiment: the second starts once the first
 * has claimed a run; every run ends ok with exactly one run's records. */
TEST(two_resumes_run_each_run_once) {
  char dir[1024], cfg[1536], db[1536], clean[3][64], got[1600], out[8192];
  CHECK_OK(setup());
  CHECK(mkdir(path_in(dir, sizeof dir, "resume"), 0755) == 0);
  snprintf(cfg, sizeof cfg, "%s/three.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK_OK(write_config(cfg, "three", 3, 400, 100));
  CHECK_EQ_INT(SGDLAB(0, NULL, out, "run", cfg, "--db", db, "-q"), 0);
  for (int i = 0; i < 3; i++) counts(db, i + 1, clean[i], sizeof clean[i]);
  fprintf(stderr, "  a clean run: %s evals/steps/ranks\n", clean[0]);
  /* as if never started: pending, nothing recorded */
  char sql[4096];
  snprintf(sql, sizeof sql, "sqlite3 '%s' \"UPDATE runs SET status='pending', started_at=NULL,"
           " harness_pid=NULL; DELETE FROM steps; DELETE FROM evals; DELETE FROM ranks;"
           " DELETE FROM run_info;\"", db);
  CHECK_EQ_INT(ru_sh(sql), 0);
  char *a_argv[] = {NULL, "run", cfg, "--db", db, "--resume", NULL}, a_log[1600];
  snprintf(a_log, sizeof a_log, "%s/a.txt", dir);
  pid_t a = ru_start(a_argv, a_log, 1, NULL);
  CHECK(a > 0);
  int st = 0, w = ru_db_wait(db, "SELECT count(*) FROM runs WHERE status='running'", 1, 60, a, &st);
  CHECK_MSG(w == 0, "the first resume claimed no run (%d, status %d)", w, st);
  int b_code = SGDLAB(0, NULL, out, "run", cfg, "--db", db, "--resume");
  int a_code = ru_wait_exit_code(a, 120);
  for (int i = 0; i < 3; i++) {
    char q[128];
    counts(db, i + 1, got, sizeof got);
    CHECK_MSG(!strcmp(got, clean[i]), "run %d: %s evals/steps/ranks, a clean run %s", i + 1,
              got, clean[i]);
    snprintf(q, sizeof q, "SELECT count(*) FROM runs WHERE id=%d AND status='ok'", i + 1);
    CHECK_EQ_INT(ru_db_int(db, q), 1);
  }
  CHECK_EQ_INT(a_code, 0);
  CHECK_EQ_INT(b_code, 0);
  /* between them, the two ran three runs: a run line each ("[i/3] ... ok") */
  char *alog = ru_slurp(a_log, 1 << 16);
  int lines = 0;
  for (const char *t = alog; t && (t = strstr(t, "/3] local")); t++) lines++;
  for (const char *t = out; (t = strstr(t, "/3] local")); t++) lines++;
  fprintf(stderr, "  the first resume:\n%s", alog ? alog : "");
  free(alog);
  CHECK_EQ_INT(lines, 3);
}

/* A second `sgdlab run` (NSHORT short runs) while another harness records
 * into the same file: it starts once the first has recorded 1000 steps,
 * and must finish with every run ok while the first is still recording
 * (then the first is interrupted: its row says so, its records stay). */
enum { NSHORT = 8, PROBES = 100 };

/* How many of PROBES tries, 10 ms apart, find the write lock free at once
 * (BEGIN IMMEDIATE with no busy wait) while a harness records. */
static int lock_free_probes(const char *db) {
  sqlite3 *h = NULL;
  int free_n = 0;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    sqlite3_close(h);
    return -1;
  }
  sqlite3_busy_timeout(h, 0);
  for (int i = 0; i < PROBES; i++) {
    if (sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK) {
      free_n++;
      sqlite3_exec(h, "ROLLBACK", NULL, NULL, NULL);
    }
    struct timespec ts = {0, 10 * 1000 * 1000}; /* how often to look */
    nanosleep(&ts, NULL);
  }
  sqlite3_close(h);
  return free_n;
}

TEST(two_harnesses_record_into_one_database) {
  char dir[1024], long_cfg[1536], short_cfg[1536], db[1536], log[1536], out[8192];
  CHECK_OK(setup());
  CHECK(mkdir(path_in(dir, sizeof dir, "shared-db"), 0755) == 0);
  snprintf(long_cfg, sizeof long_cfg, "%s/long.yaml", dir);
  snprintf(short_cfg, sizeof short_cfg, "%s/short.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(log, sizeof log, "%s/long.txt", dir);
  CHECK_OK(write_config(long_cfg, "long", 1, 100000000, 5000));
  CHECK_OK(write_config(short_cfg, "short", NSHORT, 60, 20));
  char *argv[] = {NULL, "run", long_cfg, "--db", db, "-q", NULL};
  pid_t a = ru_start(argv, log, 1, NULL);
  CHECK(a > 0);
  int st = 0, w = ru_db_wait(db, "SELECT count(*) FROM steps", 1000, 60, a, &st);
  if (w == -1) kill(a, SIGKILL), waitpid(a, NULL, 0);
  CHECK_MSG(w == 0, "the first harness recorded no steps (%d, status %d)", w, st);
  int free_n = lock_free_probes(db);
  fprintf(stderr, "  the write lock was free at %d of %d probes while the first recorded\n",
          free_n, PROBES);
  double t0 = sg_now();
  int b_code = SGDLAB(0, NULL, out, "run", short_cfg, "--db", db, "-q");
  double b_s = sg_now() - t0;
  long long before = ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=1");
  kill(a, SIGINT);
  int a_code = ru_wait_exit_code(a, 60);
  char *alog = ru_slurp(log, 8192);
  fprintf(stderr, "  the second harness took %.1f s; the first had recorded %lld steps\n%s", b_s,
          before, alog ? alog : "");
  free(alog);
  /* between batches no write transaction is open: the lock is free
   * nearly always (held for a batch's inserts only) */
  CHECK_MSG(free_n >= PROBES / 2, "the recording harness held the write lock at %d of %d "
            "probes", PROBES - free_n, PROBES);
  CHECK_EQ_INT(b_code, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE experiment_id=2 AND status='ok'"),
               NSHORT);
  CHECK_EQ_INT(a_code, 130); /* interrupted by us, not failed */
  char *s1 = ru_db_text(db, "SELECT status FROM runs WHERE id=1");
  CHECK_MSG(s1 && !strcmp(s1, "interrupted"), "run 1 is '%s'", s1 ? s1 : "?");
  free(s1);
  CHECK(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=1") >= before);
}

/* ---- readers --------------------------------------------------------------- */

static int same_bytes(const char *a, const char *b) {
  char cmd[3200];
  snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
  return system(cmd) == 0;
}

/* A database in a directory its reader (nobody) cannot write: list, show,
 * report, export and trace read it; nothing is created or changed there. */
TEST(readonly_database_is_readable) {
  char ro[1024], db[1536], copy[1536], home[1024], out[8192];
  if (!need_root()) return;
  CHECK_OK(setup());
  CHECK(mkdir(path_in(ro, sizeof ro, "ro"), 0755) == 0);
  snprintf(db, sizeof db, "%s/r.db", ro);
  snprintf(copy, sizeof copy, "%s/r.copy", g_root);
  snprintf(out, sizeof out, "cp %s %s && chmod 644 %s && cp %s %s", g_db, db, db, db, copy);
  CHECK_EQ_INT(ru_sh(out), 0);
  path_in(home, sizeof home, "shared/nobody");
  CHECK_EQ_INT(nobody_sh("mkdir -m700 %s", home), 0);
  CHECK_EQ_INT(SGDLAB(1, home, out, "list", "--db", db), 0);
  CHECK_STR_CONTAINS(out, "one");
  CHECK_EQ_INT(SGDLAB(1, home, out, "show", "1", "--db", db), 0);
  CHECK_EQ_INT(SGDLAB(1, home, out, "report", "--db", db, "--out", "rep"), 0);
  CHECK_EQ_INT(SGDLAB(1, home, out, "export", "--db", db, "--format", "json"), 0);
  CHECK_EQ_INT(SGDLAB(1, home, out, "trace", "1", "--db", db, "--html", "t.html"), 0);
  CHECK_EQ_INT(entries(ro), 1);
  CHECK(same_bytes(db, copy));
}

/* list, show, report, export and trace never write the database, not even
 * to fail the 'running' row of a harness that is gone (the next `run`
 * that opens it to write does that). */
TEST(readers_never_write) {
  char dir[1024], db[1536], copy[1536], sql[8192], out[8192];
  CHECK_OK(setup());
  CHECK(mkdir(path_in(dir, sizeof dir, "readers"), 0755) == 0);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(copy, sizeof copy, "%s/r.copy", dir);
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  CHECK(gone > 0 && waitpid(gone, NULL, 0) == gone);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  snprintf(sql, sizeof sql, "cp %s %s && sqlite3 %s \"UPDATE runs SET status='running',"
           " harness_pid=%d, harness_host='%s', harness_start='1@x'\" && cp %s %s",
           g_db, db, db, (int)gone, host, db, copy);
  CHECK_EQ_INT(ru_sh(sql), 0);
  CHECK_EQ_INT(SGDLAB(0, dir, out, "list", "--db", db), 0);
  CHECK_EQ_INT(SGDLAB(0, dir, out, "show", "1", "--db", db), 0);
  CHECK_EQ_INT(SGDLAB(0, dir, out, "report", "--db", db, "--out", "rep"), 0);
  CHECK_EQ_INT(SGDLAB(0, dir, out, "export", "--db", db, "--format", "csv"), 0);
  CHECK_EQ_INT(SGDLAB(0, dir, out, "trace", "1", "--db", db), 0);
  CHECK_MSG(same_bytes(db, copy), "a reader changed the database");
  char *st = ru_db_text(db, "SELECT status FROM runs WHERE id=1");
  CHECK_MSG(st && !strcmp(st, "running"), "run 1 is '%s'", st ? st : "?");
  free(st);
}

/* A FIFO (or a device) given as the database: every reader says so at
 * once instead of blocking in the open until someone writes to it. */
TEST(readers_refuse_a_fifo_database) {
  char dir[1024], db[1536], out[8192];
  CHECK_OK(setup());
  CHECK(mkdir(path_in(dir, sizeof dir, "fifo"), 0755) == 0);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK(mkfifo(db, 0644) == 0);
  char *argv[][7] = {{NULL, "list", "--db", db, NULL},
                     {NULL, "show", "1", "--db", db, NULL},
                     {NULL, "export", "--format", "csv", "--db", db, NULL}};
  for (int i = 0; i < 3; i++) {
    int code = sgdlab_as(0, dir, out, sizeof out, 10, argv[i]);
    CHECK_MSG(code > 0, "sgdlab %s on a FIFO: %d (-1: it blocked)", argv[i][1], code);
    CHECK_STR_CONTAINS(out, "is not a regular file");
  }
  char dev[] = "/dev/zero";
  CHECK_MSG(SGDLAB(0, dir, out, "list", "--db", dev) > 0, "%s", out);
  CHECK_STR_CONTAINS(out, "is not a regular file");
}
