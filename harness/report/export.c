/* export.c - `sgdlab export`: an experiment's rows as CSV or JSON.
 *
 * CSV follows RFC 4180: a header row, CRLF line ends, fields with a comma,
 * quote, CR or LF quoted with quotes doubled; NULL is an empty field.
 * JSON is one array of objects, one per row, keys the column names; NULL
 * is null; strings escaped by sg_json_str().  Reals are written with the
 * fewest digits that read back exactly.
 * A CSV text cell that starts with = + - @ TAB or CR would be a formula to
 * a spreadsheet (an experiment named =HYPERLINK(...)): it is written with
 * a leading ' (OWASP's CSV-injection rule).  Numbers are stored as numbers
 * and written as they are, so -0.5 in a numeric column stays a number.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_path.h"
#include "err.h"
#include "outfile.h"
#include "escape.h"
#include "report.h"

static const char usage[] =
    "usage: sgdlab export [EXPERIMENT] --format csv|json [--table TABLE]\n"
    "                     [--db PATH] [--out FILE]\n"
    "\n"
    "Write one table of an experiment as CSV (RFC 4180) or JSON.\n"
    "\n"
    "  EXPERIMENT     name (the latest experiment with it) or numeric id;\n"
    "                 default: the latest experiment\n"
    "  --format F     csv or json\n"
    "  --table TABLE  runs (default), steps, evals, bench, ranks, run_info, or\n"
    "                 run_summary (the view: one row per run with its variant,\n"
    "                 final accuracy, samples/s, bytes/step; not the report's\n"
    "                 Summary, which is one row per variant over its repeats)\n"
    "  --db PATH      results database (default " SG_DEFAULT_DB ")\n"
    "  --out FILE     write to FILE (default: standard output)\n";

static const struct {
  const char *name, *sql;
} TABLES[] = {
    {"runs", "SELECT * FROM runs WHERE experiment_id = ?1 ORDER BY id"},
    {"steps", "SELECT s.* FROM steps s JOIN runs r ON r.id = s.run_id"
              " WHERE r.experiment_id = ?1 ORDER BY s.run_id, s.step, s.rank"},
    {"evals", "SELECT e.* FROM evals e JOIN runs r ON r.id = e.run_id"
              " WHERE r.experiment_id = ?1 ORDER BY e.run_id, e.step, e.wall_s"},
    {"bench", "SELECT * FROM bench WHERE experiment_id = ?1 ORDER BY id"},
    {"ranks", "SELECT k.* FROM ranks k JOIN runs r ON r.id = k.run_id"
              " WHERE r.experiment_id = ?1 ORDER BY k.run_id, k.rank"},
    {"run_info", "SELECT i.* FROM run_info i JOIN runs r ON r.id = i.run_id"
                 " WHERE r.experiment_id = ?1 ORDER BY i.run_id, i.key"},
    {"run_summary", "SELECT * FROM run_summary WHERE experiment_id = ?1 ORDER BY run_id"},
};
#define NTABLES (sizeof TABLES / sizeof TABLES[0])

/* A CSV text cell; one a spreadsheet would read as a formula is written
 * quoted with a leading ' ("'=1+1"), quotes doubled.  Spreadsheets skip
 * leading blanks before a formula (" =cmd"), so the test is on the first
 * character after them. */
static void csv_text(FILE *f, const char *s) {
  const char *first = s + strspn(s, " \n");
  if (!*s || (!strchr("=+-@\t\r", *s) && (!*first || !strchr("=+-@\t\r", *first)))) {
    sg_csv_field(f, s);
    return;
  }
  fputs("\"'", f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

/* Column c of the current row as a CSV field or a JSON value. */
static void value(FILE *f, sqlite3_stmt *st, int c, int json) {
  char b[40];
  switch (sqlite3_column_type(st, c)) {
  case SQLITE_NULL: fputs(json ? "null" : "", f); break;
  case SQLITE_INTEGER: fprintf(f, "%lld", (long long)sqlite3_column_int64(st, c)); break;
  case SQLITE_FLOAT: {
    double v = sqlite3_column_double(st, c);
    if (isnan(v) || isinf(v)) fputs(json ? "null" : "", f); /* JSON has no inf */
    else fputs(sg_fmt_real(b, sizeof b, v), f);
    break;
  }
  default:
    if (json) sg_json_str(f, sg_rdb_text(st, c));
    else csv_text(f, sg_rdb_text(st, c));
  }
}

static int write_rows(FILE *f, sqlite3_stmt *st, int json, long long *rows) {
  int ncol = sqlite3_column_count(st), rc;
  if (!json) {
    for (int c = 0; c < ncol; c++) {
      if (c) fputc(',', f);
      sg_csv_field(f, sqlite3_column_name(st, c));
    }
    fputs("\r\n", f);
  } else {
    fputc('[', f);
  }
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (json) fputs(*rows ? ",\n{" : "\n{", f);
    for (int c = 0; c < ncol; c++) {
      if (c) fputc(',', f);
      if (json) {
        sg_json_str(f, sqlite3_column_name(st, c));
        fputc(':', f);
      }
      value(f, st, c, json);
    }
    fputs(json ? "}" : "\r\n", f);
    (*rows)++;
  }
  if (json) fputs("\n]\n", f);
  if (rc != SQLITE_DONE)
    return sg_err_set(SG_EIO, "reading rows: %s", sqlite3_errmsg(sqlite3_db_handle(st)));
  return SG_OK;
}

typedef struct args {
  const char *db, *out, *sel, *table;
  int json;
} args_t;

/* 0 ok, 1 help shown, 2 usage error (printed). */
static int parse(int argc, char **argv, args_t *a) {
  const char *format = NULL;
  *a = (args_t){.db = SG_DEFAULT_DB, .table = "runs"};
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
      fputs(usage, stdout);
      return 1;
    } else if (!strcmp(s, "--db") || !strcmp(s, "--out") || !strcmp(s, "--format") ||
               !strcmp(s, "--table")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "sgdlab export: %s needs a value\n%s", s, usage);
        return 2;
      }
      const char *v = argv[++i];
      if (!strcmp(s, "--db")) a->db = v;
      else if (!strcmp(s, "--out")) a->out = v;
      else if (!strcmp(s, "--format")) format = v;
      else a->table = v;
    } else if (s[0] == '-' && s[1]) {
      fprintf(stderr, "sgdlab export: unknown option '%s'\n%s", s, usage);
      return 2;
    } else if (!a->sel) {
      a->sel = s;
    } else {
      fprintf(stderr, "sgdlab export: unexpected argument '%s'\n%s", s, usage);
      return 2;
    }
  }
  if (!format || (strcmp(format, "csv") && strcmp(format, "json"))) {
    fprintf(stderr, "sgdlab export: --format: %s%s%s (csv or json)\n",
            format ? "'" : "", format ? format : "missing", format ? "' is not a format" : "");
    return 2;
  }
  a->json = !strcmp(format, "json");
  for (size_t t = 0; t < NTABLES; t++)
    if (!strcmp(a->table, TABLES[t].name)) return 0;
  if (!strcmp(a->table, "summary"))
    fprintf(stderr, "sgdlab export: --table: 'summary' is called run_summary (one row per"
                    " run; the report's Summary is one row per variant)\n");
  else
    fprintf(stderr, "sgdlab export: --table: no table '%s' (runs, steps, evals, bench,"
                    " ranks, run_info, run_summary)\n", a->table);
  return 2;
}

int sg_cmd_export(int argc, char **argv) {
  args_t a;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  FILE *f = NULL;
  int64_t exp_id;
  long long rows = 0;
  int rc = SG_OK, p = parse(argc, argv, &a);
  if (p) return p == 1 ? 0 : 2;
  sg_err_clear();
  if (a.out && sg_out_check_path(a.out) < 0) { /* before anything is read or written */
    fprintf(stderr, "sgdlab export: %s\n", sg_err_msg());
    return 2;
  }
  SG_TRY(sg_rdb_open(&db, a.db));
  SG_TRY(sg_rdb_experiment(db, a.sel, &exp_id));
  for (size_t t = 0; t < NTABLES; t++)
    if (!strcmp(a.table, TABLES[t].name)) SG_TRY(sg_rdb_prepare(db, TABLES[t].sql, &st));
  sqlite3_bind_int64(st, 1, exp_id);
  if (a.out) SG_TRY(sg_out_fopen_path(&f, a.out));
  SG_TRY(write_rows(f ? f : stdout, st, a.json, &rows));
  if (fflush(f ? f : stdout) != 0 || ferror(f ? f : stdout)) {
    rc = sg_err_set(SG_EIO, "cannot write %s", a.out ? a.out : "standard output");
    goto fail;
  }
fail:
  if (f && rc < 0) sg_out_discard(f);
  else if (f && (rc = sg_out_fclose(f)) == SG_OK)
    fprintf(stderr, "export: %s: %lld %s rows of experiment %lld\n", a.out, rows, a.table,
            (long long)exp_id);
  sqlite3_finalize(st);
  sqlite3_close(db);
  if (rc < 0) {
    fprintf(stderr, "sgdlab export: %s\n", *sg_err_msg() ? sg_err_msg() : sg_strerror(rc));
    return 1;
  }
  return 0;
}
