/* test_report_inject.c - no string from an experiment file or a results
 * database runs as code when `sgdlab report` draws, or when a user redraws
 * a figure with `gnuplot NAME.gp`.
 *
 * Every label source gets an attack string: backquotes, system(...) after
 * a quote that tries to close the string (single and double), a gnuplot
 * `!` shell line after a newline, an @ macro, enhanced-text markup, the
 * Markdown specials and a long tail.  Each payload would create its own
 * marker file pwned-<source>-<how> in the scratch directory.  Sources: a
 * real `sgdlab run` (experiment name, swept LIBSVM train_file) and rows written
 * straight into its database as a forged record could (engine, options
 * keys and values, transport, status, error, bench collective/impl/
 * transport, experiment host and started_at, ranks host, run_info).
 * Then `sgdlab report` runs, every generated script is checked (outside
 * single-quoted strings no backquote, @, double quote, ; or !) and run
 * again with gnuplot, and no marker may exist; the figures must be drawn
 * and summary.md's tables must keep their shape.  Experiment names that
 * try to leave results/ (.., /, ../..) must still land inside it.
 */
#define _GNU_SOURCE /* realpath, nftw */
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture_schema.h"
#include "plot.h"
#include "run_util.h"
#include "test.h"

/* tmpdir: the scratch directory; work: where sgdlab runs, two levels
 * below it, so an output directory that escaped results/ would still be
 * inside tmpdir (and found) rather than next to it. */
static char tmpdir[256], work[300], db[320];

static void cleanup(void) { ru_rm_rf(tmpdir); }

/* tmpdir, work and db, once per process; 0 or -1. */
static int scratch(void) {
  char mid[300];
  if (*tmpdir) return 0;
  if (ru_mkdtemp(tmpdir, sizeof tmpdir, "report-inject")) return -1;
  atexit(cleanup);
  snprintf(mid, sizeof mid, "%s/w", tmpdir);
  snprintf(work, sizeof work, "%s/w/w", tmpdir);
  snprintf(db, sizeof db, "%s/inject.db", tmpdir);
  return mkdir(mid, 0700) || mkdir(work, 0700) ? -1 : 0;
}

/* The attack string of source `tag`.  The payloads name their marker
 * relatively (a backquote or system() runs in gnuplot's directory, the
 * report's output directory) and short, so they survive the label
 * lengths the report keeps; the last one fits the tail that a key entry
 * keeps of a long label (sg_plot_label).  multiline: also newlines and
 * control characters (only a database can hold those; experiment files
 * are one line per value).  pad: filler bytes after the payloads. */
static void evil(char *buf, size_t cap, const char *tag, int multiline, int pad) {
  int n = snprintf(buf, cap,
                   "%s |x| \\ <b>[l](u)* {a}^b_c @GPVAL_PWD `touch pwned-%s-bq`"
                   "'.system(\"touch pwned-%s-sq\").'\".system('touch pwned-%s-dq').\""
                   " `touch pwned-%s-z`",
                   tag, tag, tag, tag, tag);
  if (multiline && n > 0 && (size_t)n < cap)
    n += snprintf(buf + n, cap - (size_t)n,
                  "\n!touch pwned-%s-nl\nset output 'pwned-%s-out'\r\t\x01;end", tag, tag);
  for (int i = 0; i < pad && n > 0 && (size_t)n + 1 < cap; i++) buf[n++] = 'L';
  if (n > 0 && (size_t)n < cap) buf[n] = '\0';
}

static char found[1024];

static int find_marker(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
  (void)sb;
  (void)type;
  size_t used = strlen(found);
  if (!strncmp(path + ftw->base, "pwned", 5) && used + 2 < sizeof found)
    snprintf(found + used, sizeof found - used, "%s ", path + ftw->base);
  return 0;
}

/* Names of the marker files anywhere under root, "" when none. */
static const char *markers_under(const char *root) {
  found[0] = '\0';
  nftw(root, find_marker, 16, FTW_PHYS);
  return found;
}

static const char *markers(void) { return markers_under(tmpdir); }

/* s as a YAML double-quoted scalar. */
static void yaml_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* A small LIBSVM file (two classes, 20 features) at dir/name. */
static int write_svm(const char *dir, const char *name) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  for (int i = 0; i < 400; i++) fprintf(f, "%d %d:1 %d:0.5\n", i % 2, 1 + i % 10, 11 + i % 2 * 9);
  return fclose(f) ? -1 : 0;
}

/* The experiment file: name and both swept train_file values attack (the
 * training files exist under those names, next to the file); two engines
 * (ps async records staleness) and two worker counts, so every figure
 * over runs is drawn. */
static int write_config(const char *path) {
  char name[1024], a[1024], b[1024];
  evil(name, sizeof name, "../../name/", 0, 0);
  evil(a, sizeof a, "tf1", 0, 0);
  evil(b, sizeof b, "tf2", 0, 100); /* a long label; the file name fits NAME_MAX */
  if (write_svm(tmpdir, a) < 0 || write_svm(tmpdir, b) < 0) return -1;
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs("name: ", f);
  yaml_str(f, name);
  fputs("\nworkload: {dataset: libsvm, holdout: 0.2, features: 20, model: softmax, batch: 16,\n"
        "  lr: 0.05, max_steps: 6, eval_every: 3, train_samples: 2000,\n"
        "  test_samples: 500, seed: 1, train_file: [", f);
  yaml_str(f, a);
  fputs(", ", f);
  yaml_str(f, b);
  fputs("]}\nworkers: [1, 2]\nengines:\n  - local\n  - {engine: ps, mode: async}\n", f);
  return fclose(f) ? -1 : 0;
}

/* ---- forging records -------------------------------------------------- */

/* Run sql with ? parameters bound to the strings (NULL-terminated). */
static int sql(sqlite3 *h, const char *q, ...) {
  sqlite3_stmt *st = NULL;
  va_list ap;
  int i = 1, rc;
  if (sqlite3_prepare_v2(h, q, -1, &st, NULL) != SQLITE_OK) {
    fprintf(stderr, "forge: %s: %s\n", sqlite3_errmsg(h), q);
    return -1;
  }
  va_start(ap, q);
  for (const char *s; (s = va_arg(ap, const char *));)
    sqlite3_bind_text(st, i++, s, -1, SQLITE_TRANSIENT);
  va_end(ap);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) fprintf(stderr, "forge: %s: %s\n", sqlite3_errmsg(h), q);
  return rc == SQLITE_DONE ? 0 : -1;
}

/* Evals and worker steps (staleness 1, 2) for forged run `id`. */
static int forge_numbers(sqlite3 *h, int id) {
  char q[512];
  for (int s = 0; s < 6; s++) {
    snprintf(q, sizeof q,
             "INSERT INTO steps(run_id, rank, role, step, epoch, t_start, compute_s, comm_s,"
             " wait_s, bytes_sent, bytes_recv, loss, staleness) VALUES(%d, %d, 'worker', %d, 0,"
             " %g, 0.004, 0.002,"
             " 0.001, 1000, 1000, %g, %d)", id, s % 2, s, 0.01 * s, 2.0 - 0.1 * s, 1 + s % 2);
    if (sql(h, q, NULL)) return -1;
  }
  for (int s = 0; s <= 6; s += 3) {
    snprintf(q, sizeof q, "INSERT INTO evals VALUES(%d, %d, 0, %g, %d, 1.5, 1.6, %g)",
             id, s, 0.02 * s, 32 * s, 0.3 + 0.05 * s);
    if (sql(h, q, NULL)) return -1;
  }
  return 0;
}

/* A forged run of experiment 1: engine, options_json and transport given. */
static int forge_run(sqlite3 *h, int id, const char *engine, const char *opts,
                     const char *transport, const char *status, const char *error) {
  char q[512];
  snprintf(q, sizeof q,
           "INSERT INTO runs(id, experiment_id, engine, options_json, transport, launcher,"
           " workers, servers, processes, repeat, seed, status, error, started_at,"
           " finished_at, wall_s) VALUES(%d, 1, ?, ?, ?, 'local', 2, 0, 2, 0, 1, ?, ?,"
           " '2024-01-01T00:00:00Z', '2024-01-01T00:00:01Z', 1.0)", id);
  return sql(h, q, engine, opts, transport, status, error, NULL);
}

static int forge_runs(sqlite3 *h) {
  char alg[1024], mode[1024], key[1024], val[1024], err[1024], js[4096];
  evil(alg, sizeof alg, "alg", 1, 0);
  evil(mode, sizeof mode, "mode", 1, 0);
  evil(key, sizeof key, "optkey", 1, 0);
  evil(val, sizeof val, "optval", 1, 200);
  evil(err, sizeof err, "error", 1, 0);
  /* options_json through SQLite's json_object: the strings arrive intact */
  sqlite3_stmt *st = NULL;
  int rc = -1;
  if (sqlite3_prepare_v2(h, "SELECT json_object('algorithm', ?1, 'mode', ?2, 'batch', 16),"
                            " json_object('algorithm', 'a2', ?3, 'v1', 'batch', 16),"
                            " json_object('algorithm', 'a2', ?3, ?4, 'batch', 16)",
                         -1, &st, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(st, 1, alg, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, mode, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, val, -1, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_ROW) goto done;
  /* 101: unknown engine (its name and options make the label; the
   * report keeps 31 bytes of an engine, 15 of a transport or status);
   * 102, 103: allreduce with a forged transport and a swept forged key;
   * 104: failed, forged status and error */
  snprintf(js, sizeof js, "%s", (const char *)sqlite3_column_text(st, 0));
  if (forge_run(h, 101, "^a`touch pwned-e`\n!touch pwned", js, "zmq", "ok", NULL) ||
      forge_numbers(h, 101))
    goto done;
  snprintf(js, sizeof js, "%s", (const char *)sqlite3_column_text(st, 1));
  if (forge_run(h, 102, "allreduce", js, "`touch pwned-t`", "ok", NULL) || forge_numbers(h, 102))
    goto done;
  snprintf(js, sizeof js, "%s", (const char *)sqlite3_column_text(st, 2));
  if (forge_run(h, 103, "allreduce", js, "`touch pwned-t`", "ok", NULL) || forge_numbers(h, 103))
    goto done;
  if (forge_run(h, 104, "ps", "{\"mode\": \"sync\"}", "zmq", "s|\n`x`'\"@<", err)) goto done;
  rc = 0;
done:
  sqlite3_finalize(st);
  return rc;
}

static int forge_bench(sqlite3 *h) {
  char impl[1024], tr[1024], coll[1024];
  evil(impl, sizeof impl, "impl", 1, 0);
  evil(tr, sizeof tr, "btransport", 1, 0);
  evil(coll, sizeof coll, "collective", 1, 0);
  for (int b = 4096; b <= 65536; b *= 4)
    for (int k = 0; k < 2; k++) {
      char q[512];
      snprintf(q, sizeof q,
               "INSERT INTO bench(experiment_id, collective, impl, transport, np, bytes,"
               " iters, t_min, t_median, t_max, algbw, busbw, wrong)"
               " VALUES(1, ?, ?, ?, 2, %d, 5, 1e-5, 2e-5, 3e-5, 0.5, 0.5, 0)", b);
      if (sql(h, q, k ? coll : "allreduce", impl, tr, NULL)) return -1;
    }
  return 0;
}

/* Forged strings in every table the report may read. */
static int forge(void) {
  char host[1024], start[1024], rhost[1024], ik[1024], iv[1024];
  sqlite3 *h = NULL;
  int rc = -1;
  evil(host, sizeof host, "host", 1, 0);
  evil(start, sizeof start, "started", 1, 0);
  evil(rhost, sizeof rhost, "rankhost", 1, 0);
  evil(ik, sizeof ik, "infokey", 1, 0);
  evil(iv, sizeof iv, "infoval", 1, 400);
  if (sqlite3_open(db, &h) != SQLITE_OK) goto done;
  sqlite3_busy_timeout(h, 5000);
  if (sql(h, "BEGIN", NULL) ||
      sql(h, "UPDATE experiments SET host = ?, started_at = ? WHERE id = 1", host, start, NULL) ||
      forge_runs(h) || forge_bench(h) ||
      sql(h, "INSERT INTO ranks(run_id, rank, role, host, pid) VALUES(101, 0, 'worker', ?, 1)", rhost, NULL) ||
      sql(h, "INSERT INTO run_info VALUES(101, ?, ?)", ik, iv, NULL) || sql(h, "COMMIT", NULL))
    goto done;
  rc = 0;
done:
  sqlite3_close(h);
  return rc;
}

/* ---- running things --------------------------------------------------- */

/* sgdlab with args (NULL-terminated) in work, at most 120 s; output in
 * out.  The exit code, -1 when it could not run or timed out. */
static int sgdlab(char *out, size_t cap, ...) {
  char *argv[16], path[400];
  int argc = 1;
  va_list ap;
  va_start(ap, cap);
  for (const char *a; argc < 15 && (a = va_arg(ap, const char *));) argv[argc++] = (char *)a;
  va_end(ap);
  argv[argc] = NULL;
  snprintf(path, sizeof path, "%s/sgdlab.out", tmpdir);
  pid_t pid = ru_start(argv, path, 1, work);
  int rc = pid < 0 ? -1 : ru_wait_exit_code(pid, 120);
  char *text = ru_slurp(path, cap);
  snprintf(out, cap, "%s", text ? text : "");
  free(text);
  return rc;
}

/* gnuplot SCRIPT in dir, as a user redraws a figure; exit code. */
static int gnuplot(const char *dir, const char *script) {
  const char *prog = getenv("SGDLAB_GNUPLOT");
  char log[400];
  if (!prog || !*prog) prog = "gnuplot";
  snprintf(log, sizeof log, "%s/gnuplot.out", tmpdir);
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    FILE *f = fopen(log, "w");
    if (!f || chdir(dir) != 0) _exit(99);
    dup2(fileno(f), 1);
    dup2(fileno(f), 2);
    execlp(prog, prog, script, (char *)NULL);
    _exit(127);
  }
  return pid < 0 ? -1 : ru_wait_exit_code(pid, 60);
}

/* ---- what the output must look like ------------------------------------ */

/* A gnuplot script as written by the report: text only inside single
 * quotes ('' is a quote), nothing that expands or runs outside them, no
 * control characters anywhere.  0, or -1 with the line in why. */
static int gp_lint(const char *text, char *why, size_t cap) {
  int lineno = 1;
  for (const char *l = text; *l; lineno++) {
    size_t len = strcspn(l, "\n");
    int inq = 0;
    for (size_t i = 0; i < len && l[0] != '#'; i++) {
      unsigned char c = (unsigned char)l[i];
      const char *bad = c < 0x20 || c == 0x7f ? "control character"
                        : inq || c == '\'' ? NULL
                        : strchr("`@\";!#", c) ? "unquoted special" : NULL;
      if (c == '\'') {
        if (inq && i + 1 < len && l[i + 1] == '\'') i++;
        else inq = !inq;
      }
      if (bad) {
        snprintf(why, cap, "line %d col %zu: %s: %.*s", lineno, i + 1, bad, (int)len, l);
        return -1;
      }
    }
    if (inq) {
      snprintf(why, cap, "line %d: unterminated quote: %.*s", lineno, (int)len, l);
      return -1;
    }
    l += len + (l[len] == '\n');
  }
  return 0;
}

/* 1 when s[i] is preceded by an odd number of backslashes. */
static int escaped(const char *s, const char *p) {
  int k = 0;
  while (p > s && p[-1] == '\\') p--, k++;
  return k % 2;
}

/* summary.md: every table row has its header's cell count and ends with
 * '|', no row is cut by a newline, backquotes pair up on each line, no
 * raw '<' or control character.  0, or -1 with the line in why. */
static int md_lint(const char *md, char *why, size_t cap) {
  int lineno = 1, cols = -1;
  for (const char *l = md; *l; lineno++) {
    size_t len = strcspn(l, "\n");
    int pipes = 0, ticks = 0;
    const char *bad = NULL;
    for (const char *p = l; p < l + len; p++) {
      if ((unsigned char)*p < 0x20 && *p != '\t') bad = "control character";
      else if (*p == '<' && !escaped(md, p)) bad = "raw <";
      else if (*p == '|' && !escaped(md, p)) pipes++;
      else if (*p == '`' && !escaped(md, p)) ticks++;
    }
    if (ticks % 2) bad = "unpaired backquote";
    if (l[0] == '|') {
      if (cols < 0) cols = pipes;
      if (pipes != cols || l[len - 1] != '|') bad = "table row with the wrong shape";
    } else if (cols >= 0 && len) {
      bad = "a table row broken across lines";
    } else {
      cols = -1;
    }
    if (!strncmp(l, "# ", 2) && l[len - 1] != ')') bad = "heading broken";
    if (bad) {
      snprintf(why, cap, "line %d: %s: %.*s", lineno, bad, (int)(len > 200 ? 200 : len), l);
      return -1;
    }
    l += len + (l[len] == '\n');
  }
  return 0;
}

/* .tsv: each line a comment, empty, or data starting with a number. */
static int tsv_lint(const char *text, char *why, size_t cap) {
  int lineno = 1;
  for (const char *l = text; *l; lineno++) {
    size_t len = strcspn(l, "\n");
    char *end;
    if (len && l[0] != '#') {
      strtod(l, &end);
      if (end == l || (*end != '\t' && *end != '\n' && *end != '\0')) {
        snprintf(why, cap, "line %d: not data: %.*s", lineno, (int)(len > 200 ? 200 : len), l);
        return -1;
      }
    }
    for (const char *p = l; p < l + len; p++)
      if ((unsigned char)*p < 0x20 && *p != '\t') {
        snprintf(why, cap, "line %d: control character", lineno);
        return -1;
      }
    l += len + (l[len] == '\n');
  }
  return 0;
}

/* "report: DIR/summary.md ..." -> DIR resolved; 0 or -1. */
static int report_dir(const char *out, char *dir, size_t cap) {
  char rel[PATH_MAX + 64], abs[PATH_MAX];
  const char *at = strstr(out, "report: "), *end = at ? strstr(at, "/summary.md") : NULL;
  if (!end) return -1;
  at += 8;
  snprintf(rel, sizeof rel, "%s/%.*s", work, (int)(end - at), at);
  if (!realpath(rel, abs)) return -1;
  snprintf(dir, cap, "%s", abs);
  return 0;
}

/* dir is results/<one name>[/run-N] under work: 1 when it is. */
static int inside_results(const char *dir, int run_dir) {
  char base[PATH_MAX], want[PATH_MAX + 16];
  if (!realpath(work, base)) return 0;
  snprintf(want, sizeof want, "%s/results/", base);
  if (strncmp(dir, want, strlen(want))) return 0;
  const char *rest = dir + strlen(want), *slash = strchr(rest, '/');
  if (!*rest || (rest[0] == '.' && (rest[1] == '/' || !rest[1]))) return 0;
  if (!run_dir) return !slash;
  return slash && !strncmp(slash, "/run-", 5) && !strchr(slash + 1, '/');
}

static const char *const FIGS[] = {"acc_vs_time", "acc_vs_step", "test_loss_vs_time",
                                   "loss_vs_step", "throughput", "efficiency",
                                   "time_breakdown", "staleness", "allreduce_time",
                                   "allreduce_busbw", "bytes_vs_workers", "server_time",
                                   NULL};

/* Every .gp in dir: lint, redraw with gnuplot; every .tsv: lint.  CHECKs
 * through the macro's return, so callers check test_failed_now_. */
static char script_names[2048]; /* the scripts check_scripts ran, for messages */

static void check_scripts(const char *dir, int *nscripts) {
  char path[PATH_MAX + 300], why[512];
  script_names[0] = 0;
  DIR *d = opendir(dir);
  CHECK_MSG(d, "%s", dir);
  *nscripts = 0;
  for (struct dirent *e; (e = readdir(d));) {
    size_t n = strlen(e->d_name);
    int gp = n > 3 && !strcmp(e->d_name + n - 3, ".gp");
    int tsv = n > 4 && !strcmp(e->d_name + n - 4, ".tsv");
    /* anything but figures, scripts, data and summary.md was made by a
     * payload (a command run with a name the markers do not catch) */
    int known = gp || tsv || !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
                !strcmp(e->d_name, "summary.md") || !strncmp(e->d_name, "run-", 4) ||
                !strcmp(e->d_name, "index.html") || !strcmp(e->d_name, "report-files.txt") ||
                (n > 4 && (!strcmp(e->d_name + n - 4, ".png") ||
                           !strcmp(e->d_name + n - 4, ".svg")));
    if (!known) closedir(d);
    CHECK_MSG(known, "%s: unexpected file '%s'", dir, e->d_name);
    if (!strcmp(e->d_name, "index.html")) { /* the labels are text there, never markup */
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      char *html = ru_slurp(path, 1 << 24);
      int scripts = 0;
      for (const char *at = html; at && (at = strstr(at, "<script")); at++) scripts++;
      if (scripts != 1) closedir(d);
      CHECK_MSG(scripts == 1, "%s: %d script elements", path, scripts);
      free(html);
    }
    if (!gp && !tsv) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    char *text = ru_slurp(path, 1 << 20);
    int bad = !text || (gp ? gp_lint(text, why, sizeof why) : tsv_lint(text, why, sizeof why));
    free(text);
    if (bad) closedir(d);
    CHECK_MSG(!bad, "%s: %s", path, why);
    if (!gp) continue;
    int rc = gnuplot(dir, e->d_name);
    if (rc) closedir(d);
    CHECK_MSG(rc == 0, "gnuplot %s: exit %d", path, rc);
    ++*nscripts;
    size_t used = strlen(script_names);
    snprintf(script_names + used, sizeof script_names - used, " %s", e->d_name);
  }
  closedir(d);
  CHECK_MSG(!*markers(), "code ran from the data while redrawing: %s", markers());
}

static void check_summary(const char *dir) {
  char path[PATH_MAX + 32], why[512];
  snprintf(path, sizeof path, "%s/summary.md", dir);
  char *md = ru_slurp(path, 1 << 20);
  int bad = !md || md_lint(md, why, sizeof why);
  free(md);
  CHECK_MSG(!bad, "%s: %s", path, md ? why : "missing");
}

TEST(report_runs_no_code_from_data) {
  char out[1 << 14], path[PATH_MAX + 64], dir[PATH_MAX];
  int n = 0;
  CHECK(scratch() == 0);
  snprintf(path, sizeof path, "%s/inject.yaml", tmpdir);
  CHECK(write_config(path) == 0);
  int rc = sgdlab(out, sizeof out, "run", path, "--db", db, NULL);
  CHECK_MSG(rc == 0, "sgdlab run: exit %d: %s", rc, out);
  CHECK_MSG(!*markers(), "sgdlab run ran code from its config: %s", markers());
  CHECK(forge() == 0);

  rc = sgdlab(out, sizeof out, "report", "1", "--db", db, NULL);
  CHECK_MSG(!*markers(), "sgdlab report ran code from the data: %s", markers());
  CHECK_MSG(rc == 0, "sgdlab report: exit %d: %s", rc, out);
  CHECK_MSG(report_dir(out, dir, sizeof dir) == 0 && inside_results(dir, 0),
            "output outside results/: %s", out);
  for (const char *const *f = FIGS; *f; f++) {
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s.png", dir, *f);
    CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "not drawn: %s", path);
    snprintf(path, sizeof path, "%s/%s.svg", dir, *f);
    CHECK_MSG(stat(path, &sb) == 0 && sb.st_size > 1000, "not drawn: %s", path);
  }
  /* labels reach the figure as they are (a panel title or key entry
   * keeps both ends of a long one): no enhanced-text markup, no macro
   * expansion */
  snprintf(path, sizeof path, "%s/acc_vs_time.svg", dir);
  char *svg = ru_slurp(path, 1 << 22);
  CHECK(svg);
  /* (a run's name quotes a value with spaces or quotes: tf1's ends
   * "tf1-z`\"" (the key keeps both ends); one over 255 bytes is cut and ends "... [variant J]", J
   * the first run with its whole name) */
  int literal = (strstr(svg, "...f1-z`\", N=1") || strstr(svg, "...ant 1], N=1")) &&
                strstr(svg, "^a`touch pwned");
  free(svg);
  CHECK_MSG(literal, "%s: the label text is not drawn literally", path);
  check_summary(dir);
  if (test_failed_now_) return;
  check_scripts(dir, &n);
  if (test_failed_now_) return;
  /* every figure the report draws for this sweep of worker counts, the
   * three vs-workers ones (step_time, acc_vs_workers, staleness_vs_workers)
   * included */
  CHECK_MSG(n == 16, "%d scripts, not 16:%s", n, script_names);

  /* one forged run on its own: results/<name>/run-101 */
  rc = sgdlab(out, sizeof out, "report", "--run", "101", "--db", db, NULL);
  CHECK_MSG(rc == 0 && !*markers(), "report --run 101: exit %d: %s %s", rc, markers(), out);
  CHECK_MSG(report_dir(out, dir, sizeof dir) == 0 && inside_results(dir, 1),
            "output outside results/<name>/run-101: %s", out);
  check_summary(dir);
  if (test_failed_now_) return;
  check_scripts(dir, &n);
  if (test_failed_now_) return;
  CHECK(n >= 4);
}

/* Experiment names that try to leave results/: the directory is still one
 * level below results/ (a name goes at most two levels up, so a broken
 * report would still write inside the scratch directory). */
TEST(report_dir_stays_in_results) {
  static const char *const names[] = {"..", ".", "../..", "../../report-escape",
                                      "/tmp/report-escape", "a/../../b", "", "...",
                                      "./../x\n/..", NULL};
  char out[1 << 14], dir[PATH_MAX], esc[PATH_MAX];
  sqlite3 *h = NULL;
  CHECK(scratch() == 0);
  snprintf(esc, sizeof esc, "%s/w/report-escape", tmpdir);
  CHECK(sqlite3_open(db, &h) == SQLITE_OK);
  /* the results tables (fixture_schema.h), unless a run made them */
  int bad = sqlite3_exec(h, "SELECT 1 FROM experiments LIMIT 0", NULL, NULL, NULL) != SQLITE_OK &&
            sqlite3_exec(h, SCHEMA, NULL, NULL, NULL) != SQLITE_OK;
  for (const char *const *nm = names; *nm && !bad; nm++)
    bad = sql(h, "INSERT INTO experiments(id, name) VALUES(1000 + (SELECT count(*)"
                 " FROM experiments WHERE id >= 1000), ?)", *nm, NULL);
  sqlite3_close(h);
  CHECK(!bad);
  for (int i = 0; names[i]; i++) {
    char sel[16];
    snprintf(sel, sizeof sel, "%d", 1000 + i);
    int rc = sgdlab(out, sizeof out, "report", sel, "--db", db, NULL);
    CHECK_MSG(rc == 0, "report of '%s': exit %d: %s", names[i], rc, out);
    CHECK_MSG(report_dir(out, dir, sizeof dir) == 0 && inside_results(dir, 0),
              "name '%s' leaves results/: %s", names[i], out);
  }
  CHECK_MSG(access(esc, F_OK) != 0, "%s was created", esc);
  CHECK(access("/tmp/report-escape", F_OK) != 0);
}

/* What a quoted s must read back as (plot.h): control characters as
 * spaces, a quote first or right after a quote as U+2019. */
static void sanitized(char *dst, size_t cap, const char *s) {
  size_t n = 0;
  for (size_t i = 0; s[i] && n + 4 < cap; i++) {
    if (s[i] == '\'' && (i == 0 || s[i - 1] == '\'')) {
      memcpy(dst + n, "\xe2\x80\x99", 3);
      n += 3;
    } else {
      dst[n++] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? ' ' : s[i];
    }
  }
  dst[n] = '\0';
}

/* Line k (0-based) of text into buf; 0, or -1 when there is none. */
static int nth_line(const char *text, int k, char *buf, size_t cap) {
  for (; k > 0 && text; k--) text = (text = strchr(text, '\n')) ? text + 1 : NULL;
  if (!text || !*text) return -1;
  size_t len = strcspn(text, "\n");
  snprintf(buf, cap, "%.*s", (int)(len < cap ? len : cap - 1), text);
  return 0;
}

/* sg_plot_quote and sg_plot_label against gnuplot's own parser: a script
 * prints each quoted attack string back; gnuplot must read exactly the
 * string (control characters as spaces; a label elided in its middle but
 * with both ends intact) and run none of it. */
TEST(quote_round_trips_through_gnuplot) {
  static const char *const tags[] = {"rt1", "rt2", "rt3", NULL};
  static const char *const edge[] = {
      "", "'", "''", "'''", "a''b", "a''''.system('touch pwned-qq').''''", "\\", "a\\",
      "\\'", "`", "``", "@", "#x", "x\n", "a\\\n!touch pwned-cont", "\xc3\xa9\xe2\x82\xac'",
      NULL};
  char s[24][1200], path[PATH_MAX + 16], got[1400], want[1400], dir[PATH_MAX];
  int n = 0;
  CHECK(scratch() == 0);
  snprintf(dir, sizeof dir, "%s/quote", tmpdir);
  CHECK(mkdir(dir, 0700) == 0);
  for (int i = 0; tags[i]; i++) evil(s[n++], sizeof s[0], tags[i], i > 0, i == 2 ? 500 : 0);
  for (int i = 0; edge[i]; i++) snprintf(s[n++], sizeof s[0], "%s", edge[i]);
  snprintf(path, sizeof path, "%s/rt.gp", dir);
  FILE *gp = fopen(path, "w");
  CHECK(gp);
  fputs("set print 'rt.out'\n", gp);
  for (int i = 0; i < n; i++) {
    fputs("print ", gp);
    sg_plot_quote(gp, s[i]);
    fputs("\nprint ", gp);
    sg_plot_label(gp, s[i]);
    fputc('\n', gp);
  }
  CHECK(fclose(gp) == 0);
  int rc = gnuplot(dir, "rt.gp");
  CHECK_MSG(!*markers_under(dir), "code ran from a quoted string: %s", markers_under(dir));
  CHECK_EQ_INT(rc, 0);
  snprintf(path, sizeof path, "%s/rt.out", dir);
  char *out = ru_slurp(path, 1 << 16);
  CHECK(out);
  for (int i = 0; i < n; i++) {
    size_t len;
    sanitized(want, sizeof want, s[i]);
    len = strlen(want);
    if (nth_line(out, 2 * i, got, sizeof got)) free(out);
    CHECK_MSG(!nth_line(out, 2 * i, got, sizeof got) && !strcmp(got, want),
              "string %d read back as '%s', want '%s'", i, got, want);
    if (nth_line(out, 2 * i + 1, got, sizeof got)) free(out);
    CHECK_MSG(!nth_line(out, 2 * i + 1, got, sizeof got), "no label line %d", i);
    int ok = strlen(s[i]) <= SG_PLOT_LABEL_MAX
                 ? !strcmp(got, want)
                 : strlen(got) < len && !strncmp(got, want, 20) &&
                       !strcmp(got + strlen(got) - 20, want + len - 20) && strstr(got, "...");
    if (!ok) free(out);
    CHECK_MSG(ok, "label %d read back as '%s' (from '%s')", i, got, want);
  }
  free(out);
}
