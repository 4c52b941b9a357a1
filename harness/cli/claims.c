/* claims.c - `sgdlab claims`: the seeds' claims as checks.
 *
 * Each claim is a pair of files in configs/claims/: NAME.claim (what it
 * says, which experiment or `bench` command line shows it, and its
 * expected shape as checks, checks.h) and the experiment file it names.
 * The command validates every claim first (a bad file: one line, exit
 * 2, nothing launched), then per claim runs its experiment as a child
 * `sgdlab run` (or `sgdlab bench`) into --db, evaluates the checks over
 * what was recorded, prints one line (PASS, FAIL, INCONCLUSIVE or SKIP,
 * the measured numbers, the expected shape, the seconds it took) and
 * records the verdict in the database's `claims` table, which `sgdlab
 * report` shows.
 *
 * Timings on a shared host: a claim file's `rounds: R` runs the
 * experiment R times one after the other (every variant once per round,
 * so A and B interleave), and a ratio check is the median over the
 * rounds of each round's ratio.  Before each round and after the last the
 * host's other load is sampled (runnable processes besides the claim's);
 * a claim whose only failed checks are timing checks, with that load
 * above quiet_load per core, is INCONCLUSIVE (exit status 3), never a
 * PASS, and an exact check that fails is a FAIL at any load.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "commands.h"
#include "config.h"
#include "err.h"
#include "launch.h"
#include "outfile.h"
#include "views.h"

extern char **environ;

enum { MAX_CLAIMS = 64 };

typedef struct claims_args {
  const char *db, *dir;
  const char *names[MAX_CLAIMS];
  int nnames, no_run, verbose, list;
} claims_args_t;

typedef struct claim {
  char name[64];
  ck_file_t f;
  char exp_path[1024]; /* the experiment file ("" for bench claims) */
  char exp_name[128];  /* the experiment's name in the database */
} claim_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab claims [NAME...] [--db PATH] [--dir DIR] [--no-run] [--list] [-v]\n"
          "\n"
          "Run the seeds' claims as checks: per claim (DIR/NAME.claim, default\n"
          "configs/claims) its experiment, then its expected shape over what was\n"
          "recorded.  One line per claim: PASS, FAIL, INCONCLUSIVE or SKIP, the\n"
          "measured numbers, the host's load, the expected shape and the seconds it\n"
          "took; the verdicts are recorded in the database's claims table (sgdlab\n"
          "report shows them).  A claim runs its experiment `rounds` times in turn\n"
          "and a ratio is the median of the rounds' ratios.  A claim whose only\n"
          "failed checks are timings, measured while other work kept more than its\n"
          "quiet_load runnable processes per core, is INCONCLUSIVE, not FAIL.\n"
          "Claims marked root need the emulated cluster and are skipped, with the\n"
          "reason, when not root.  No NAME: every claim in DIR.\n"
          "\n"
          "  --db PATH   results database (default results/sgdlab.db)\n"
          "  --dir DIR   where the claims are (default configs/claims)\n"
          "  --no-run    check the latest recorded experiment of each claim, run nothing\n"
          "  --list      list the claims and what they say; run nothing\n"
          "  -v          one line per check as well\n"
          "\n"
          "exit status: 0 every claim passed (or was skipped), 1 a claim failed, 3 none\n"
          "failed but one was inconclusive (rerun it on a quieter host), 2 usage or a bad\n"
          "claim file.\n");
}

static int parse_args(int argc, char **argv, claims_args_t *a) {
  *a = (claims_args_t){.db = SG_DEFAULT_DB, .dir = "configs/claims"};
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) return usage(stdout), 1;
    if ((!strcmp(s, "--db") || !strcmp(s, "--dir")) && i + 1 < argc) {
      *(!strcmp(s, "--db") ? &a->db : &a->dir) = argv[++i];
    } else if (!strcmp(s, "--no-run")) a->no_run = 1;
    else if (!strcmp(s, "--list")) a->list = 1;
    else if (!strcmp(s, "-v") || !strcmp(s, "--verbose")) a->verbose = 1;
    else if (s[0] == '-' || a->nnames == MAX_CLAIMS) {
      fprintf(stderr, "sgdlab claims: %s '%s' (sgdlab claims --help)\n",
              s[0] == '-' ? "unknown option or missing value" : "too many claims", s);
      return 2;
    } else a->names[a->nnames++] = s;
  }
  return 0;
}

/* ---- finding and loading the claims ------------------------------------ */

static int name_cmp(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Every NAME of DIR/NAME.claim, sorted, into names (strdup'ed). */
static int list_dir(const char *dir, char **names, int *n) {
  DIR *d = opendir(dir);
  struct dirent *e;
  *n = 0;
  if (!d) return sg_err_set(SG_ENOTFOUND, "sgdlab claims: %s: %s", dir, strerror(errno));
  while ((e = readdir(d)) && *n < MAX_CLAIMS) {
    size_t len = strlen(e->d_name);
    if (len <= 6 || len >= 64 || strcmp(e->d_name + len - 6, ".claim")) continue;
    if (!(names[*n] = strndup(e->d_name, len - 6))) break;
    (*n)++;
  }
  closedir(d);
  qsort(names, (size_t)*n, sizeof *names, name_cmp);
  return SG_OK;
}

static int claim_name_ok(const char *s) {
  if (!*s || strlen(s) >= 64) return 0;
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
      return 0;
  return 1;
}

/* Load DIR/NAME.claim and validate its experiment (sg_config_load: every
 * problem is one line before anything launches). */
static int claim_load(const claims_args_t *a, const char *name, claim_t *c) {
  char path[1024];
  sg_experiment_t *x = NULL;
  if (!claim_name_ok(name))
    return sg_err_set(SG_EINVAL, "sgdlab claims: '%s': a claim's name is a-z, 0-9, '-', '_'",
                      name);
  snprintf(c->name, sizeof c->name, "%s", name);
  snprintf(path, sizeof path, "%s/%s.claim", a->dir, name);
  SG_CHECK(ck_file_load(&c->f, path));
  if (c->f.nbench) {
    snprintf(c->exp_name, sizeof c->exp_name, "claim-%s", name);
    return SG_OK;
  }
  if (!c->f.experiment[0]) snprintf(c->f.experiment, sizeof c->f.experiment, "%s.yaml", name);
  snprintf(c->exp_path, sizeof c->exp_path, "%s/%s", a->dir, c->f.experiment);
  SG_CHECK(sg_config_load(&x, c->exp_path, NULL, 0));
  snprintf(c->exp_name, sizeof c->exp_name, "%s", x->name);
  sg_experiment_destroy(&x);
  return SG_OK;
}

/* ---- running one claim's experiment ------------------------------------ */

/* `sgdlab run FILE --db DB -q` or `sgdlab bench ARGS --name claim-NAME
 * --db DB -q` as a child (no shell); its exit status. */
static int run_child(const claims_args_t *a, const claim_t *c) {
  char self[4096];
  char *argv[CK_MAX_ARGS + 12];
  int n = 0, st = 0;
  pid_t pid;
  SG_CHECK(sg_launch_find_bin("sgdlab", self, sizeof self));
  argv[n++] = self;
  if (c->f.nbench) {
    argv[n++] = "bench";
    for (int i = 0; i < c->f.nbench; i++) argv[n++] = c->f.bench[i];
    argv[n++] = "--name";
    argv[n++] = (char *)c->exp_name;
  } else {
    argv[n++] = "run";
    argv[n++] = (char *)c->exp_path;
  }
  argv[n++] = "--db";
  argv[n++] = (char *)a->db;
  argv[n++] = "-q";
  argv[n] = NULL;
  posix_spawn_file_actions_t fa; /* its tables go nowhere: the verdict says it */
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  fflush(NULL);
  int e = posix_spawn(&pid, self, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (e) return sg_err_set(SG_EIO, "sgdlab claims: starting %s: %s", self, strerror(e));
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return sg_err_set(SG_EIO, "sgdlab claims: waitpid: %s", strerror(errno));
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- the verdict -------------------------------------------------------- */

typedef struct verdict {
  const char *word; /* PASS FAIL INCONCLUSIVE SKIP */
  char measured[4096], expected[2048];
  double seconds;
  int64_t exps[CK_MAX_ROUNDS]; /* the rounds' experiments, oldest first */
  int nexps;
  double load, loadavg; /* the most runnable processes besides the claim's; loadavg then */
  int timing_failed, other_failed;
} verdict_t;

static void append(char *dst, size_t cap, const char *sep, const char *s) {
  size_t len = strlen(dst);
  if (len + 1 < cap) snprintf(dst + len, cap - len, "%s%s", len ? sep : "", s);
}

/* Evaluate every check of c over experiment v->exp_id. */
static int claim_checks(sqlite3 *db, const claims_args_t *a, const claim_t *c, verdict_t *v) {
  int all = 1;
  for (int i = 0; i < c->f.nchecks; i++) {
    const ck_check_t *k = &c->f.checks[i];
    char got[2048], want[512];
    int pass = 0;
    SG_CHECK(ck_eval_rounds(db, v->exps, v->nexps, k, NULL, &pass, got, sizeof got, want,
                            sizeof want));
    all &= pass;
    if (!pass) *(ck_is_timing(k->measure) ? &v->timing_failed : &v->other_failed) += 1;
    char one[3072];
    snprintf(one, sizeof one, "%s%s: %s", pass ? "" : "[FAIL] ", k->what, got);
    append(v->measured, sizeof v->measured, "; ", one);
    append(v->expected, sizeof v->expected, "; ", want);
    if (a->verbose)
      printf("    %s %s: %s (expected %s)\n", pass ? "ok  " : "FAIL", k->what, got, want);
  }
  v->word = all ? "PASS" : "FAIL";
  return SG_OK;
}

/* ---- the host's load ------------------------------------------------------ */

/* Runnable processes on the host besides this one (procs_running of
 * /proc/stat counts the reader), the median of 21 samples 10 ms apart,
 * and the 1-minute load average.  Taken between a claim's rounds, when
 * none of its processes runs, so it is the load of the host's other work
 * (the load average also counts the claim's own processes of the last
 * minute).  -1 where /proc cannot be read. */
static void host_load(double *runnable, double *loadavg) {
  double v[21];
  int n = 0;
  for (int i = 0; i < 21; i++) {
    FILE *f = fopen("/proc/stat", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
      if (!strncmp(line, "procs_running ", 14)) v[n++] = atof(line + 14) - 1;
    if (f) fclose(f);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL); /* sampling, not waiting */
  }
  *runnable = -1;
  if (n) {
    for (int i = 1; i < n; i++) /* insertion sort of at most 21 */
      for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
        double t = v[j];
        v[j] = v[j - 1], v[j - 1] = t;
      }
    *runnable = v[n / 2];
  }
  FILE *f = fopen("/proc/loadavg", "r");
  if (!f || fscanf(f, "%lf", loadavg) != 1) *loadavg = -1;
  if (f) fclose(f);
}

static void note_load(verdict_t *v) {
  double r = 0, l = 0;
  host_load(&r, &l);
  if (r > v->load) v->load = r;
  if (l > v->loadavg) v->loadavg = l;
}

/* A claim whose failed checks are all timing checks, measured while the
 * host's other work kept more than quiet_load runnable processes per core
 * busy, is INCONCLUSIVE: its numbers say the host was loaded, not that
 * the claim is wrong.  An exact check that fails is a FAIL at any load. */
static void judge_load(const claim_t *c, verdict_t *v) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  double limit = c->f.quiet_load * (double)(ncpu > 0 ? ncpu : 1);
  char note[160];
  snprintf(note, sizeof note, "load %.0f runnable besides the claim (limit %.0f: %g per core),"
           " load average %.1f", v->load, limit, c->f.quiet_load, v->loadavg);
  append(v->measured, sizeof v->measured, "; ", note);
  if (!strcmp(v->word, "FAIL") && v->timing_failed && !v->other_failed && v->load > limit) {
    v->word = "INCONCLUSIVE";
    snprintf(note, sizeof note, "inconclusive (load %.0f > %.0f): rerun on a quieter host",
             v->load, limit);
    append(v->measured, sizeof v->measured, "; ", note);
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the database -------------------------------------------------------- */

static const char CLAIMS_TABLE[] =
    "CREATE TABLE IF NOT EXISTS claims(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " verdict TEXT NOT NULL, says TEXT, measured TEXT, expected TEXT, seconds REAL,"
    " experiment_id INTEGER, checked_at TEXT)";

/* The results database, read-write (it is the user's own: outfile.h),
 * with the views ready.  SG_ENOTFOUND when there is none yet. */
static int db_open(const char *path, sqlite3 **db) {
  *db = NULL;
  if (access(path, F_OK) != 0)
    return sg_err_set(SG_ENOTFOUND, "sgdlab claims: no database %s yet", path);
  SG_CHECK(sg_out_check_path(path));
  if (sqlite3_open_v2(path, db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    int rc = sg_err_set(SG_EIO, "sgdlab claims: %s: %s", path, sqlite3_errmsg(*db));
    sqlite3_close(*db);
    *db = NULL;
    return rc;
  }
  sqlite3_busy_timeout(*db, 10000);
  if (sg_views_ready(*db) < 0 ||
      sqlite3_exec(*db, CLAIMS_TABLE, NULL, NULL, NULL) != SQLITE_OK) {
    int rc = sg_err_set(SG_EIO, "sgdlab claims: %s: %s", path, sqlite3_errmsg(*db));
    sqlite3_close(*db);
    *db = NULL;
    return rc;
  }
  return SG_OK;
}

static int record(sqlite3 *db, const claim_t *c, const verdict_t *v) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO claims(name, verdict, says, measured, expected, seconds,"
                         " experiment_id, checked_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7,"
                         " strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "sgdlab claims: recording: %s", sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, v->word, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, c->f.says, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, v->measured, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, v->expected, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 6, v->seconds);
  if (v->nexps > 0) sqlite3_bind_int64(st, 7, v->exps[v->nexps - 1]);
  if (sqlite3_step(st) != SQLITE_DONE)
    rc = sg_err_set(SG_EIO, "sgdlab claims: recording: %s", sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

/* ---- one claim ------------------------------------------------------------ */

/* The newest experiments named `name` after id `after`, at most `max`,
 * oldest first, into v->exps. */
static int rounds_of(sqlite3 *db, const char *name, int64_t after, int max, verdict_t *v) {
  sqlite3_stmt *st = NULL;
  v->nexps = 0;
  if (sqlite3_prepare_v2(db, "SELECT id FROM experiments WHERE name = ?1 AND id > ?2"
                             " ORDER BY id DESC LIMIT ?3", -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "sgdlab claims: %s", sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, after);
  sqlite3_bind_int(st, 3, max);
  while (sqlite3_step(st) == SQLITE_ROW && v->nexps < CK_MAX_ROUNDS)
    v->exps[v->nexps++] = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  for (int i = 0; i < v->nexps / 2; i++) {
    int64_t t = v->exps[i];
    v->exps[i] = v->exps[v->nexps - 1 - i], v->exps[v->nexps - 1 - i] = t;
  }
  return SG_OK;
}

/* The claim's rounds (unless --no-run: the latest ones recorded), the
 * host's load before each and after the last; then its checks. */
static int claim_measure(const claims_args_t *a, const claim_t *c, verdict_t *v) {
  sqlite3 *db = NULL;
  int64_t before = 0;
  int rc = SG_OK, status = 0;
  if (db_open(a->db, &db) == SG_OK) before = ck_latest_experiment(db, c->exp_name);
  sg_err_clear();
  sqlite3_close(db);
  db = NULL;
  for (int r = 0; r < c->f.rounds && !a->no_run; r++) {
    note_load(v);
    SG_CHECK(status |= run_child(a, c));
  }
  note_load(v);
  SG_CHECK(db_open(a->db, &db));
  SG_TRY(rounds_of(db, c->exp_name, a->no_run ? 0 : before, c->f.rounds, v));
  if (v->nexps < (a->no_run ? 1 : c->f.rounds)) {
    v->word = "FAIL";
    snprintf(v->measured, sizeof v->measured, "%d of %d rounds of %s recorded (exit status %d)",
             v->nexps, c->f.rounds, c->exp_name, status);
  } else {
    SG_TRY(claim_checks(db, a, c, v));
    if (status) append(v->measured, sizeof v->measured, "; ", "(a run failed)");
    judge_load(c, v);
  }
fail:
  sqlite3_close(db);
  return rc;
}

/* Run, check, print one line, record.  *failed |= 1 on a FAIL, 2 on an
 * INCONCLUSIVE. */
static int claim_do(const claims_args_t *a, const claim_t *c, int *failed) {
  verdict_t *v = calloc(1, sizeof *v);
  sqlite3 *db = NULL;
  double t0 = now_s();
  int rc = SG_OK;
  if (!v) return sg_err_set(SG_ENOMEM, "out of memory");
  v->word = "SKIP";
  v->load = v->loadavg = -1;
  if (c->f.root && geteuid() != 0)
    snprintf(v->measured, sizeof v->measured, "needs root: the emulated cluster (network namespaces)");
  else
    SG_TRY(claim_measure(a, c, v));
  v->seconds = now_s() - t0;
  printf("%s  %-22s %6.1f s  measured: %s\n      expected: %s\n", v->word, c->name, v->seconds,
         v->measured, v->expected[0] ? v->expected : "-");
  fflush(stdout);
  *failed |= !strcmp(v->word, "FAIL") ? 1 : !strcmp(v->word, "INCONCLUSIVE") ? 2 : 0;
  if (db_open(a->db, &db) == SG_OK) rc = record(db, c, v);
  else sg_err_clear(); /* a skip before any database exists: nothing to record into */
fail:
  sqlite3_close(db);
  free(v);
  return rc;
}

int sg_cmd_claims(int argc, char **argv) {
  claims_args_t a;
  char *found[MAX_CLAIMS];
  int nfound = 0, rc = parse_args(argc, argv, &a), failed = 0;
  if (rc) return rc == 1 ? 0 : rc;
  claim_t *c = calloc(MAX_CLAIMS, sizeof *c);
  if (!c) return fprintf(stderr, "sgdlab claims: out of memory\n"), 1;
  if (!a.nnames) {
    if (list_dir(a.dir, found, &nfound) < 0) goto bad;
    for (int i = 0; i < nfound; i++) a.names[a.nnames++] = found[i];
  }
  for (int i = 0; i < a.nnames; i++) /* every file checked before anything runs */
    if (claim_load(&a, a.names[i], &c[i]) < 0) goto bad;
  for (int i = 0; i < a.nnames && a.list; i++)
    printf("%-22s %s%s\n", c[i].name, c[i].f.root ? "[root] " : "", c[i].f.says);
  for (int i = 0; i < a.nnames && !a.list; i++)
    if (claim_do(&a, &c[i], &failed) < 0) {
      fprintf(stderr, "%s\n", sg_err_msg());
      rc = 1;
      break;
    }
  if (!rc) rc = failed & 1 ? 1 : failed & 2 ? 3 : 0;
  goto out;
bad:
  fprintf(stderr, "%s\n", sg_err_msg());
  rc = 2;
out:
  for (int i = 0; i < a.nnames; i++) ck_file_free(&c[i].f);
  for (int i = 0; i < nfound; i++) free(found[i]);
  free(c);
  return rc;
}
