/* claims_html.c - the report's "Claims" section: the verdicts `sgdlab
 * claims` recorded (its `claims` table) for the experiments of the
 * report, the latest per claim.  A database without the table (no claim
 * was ever checked into it) has no section. */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>

#include "err.h"
#include "escape.h"
#include "report.h"

static int has_table(sqlite3 *db) {
  sqlite3_stmt *st = NULL;
  int yes = 0;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND"
                             " name = 'claims'", -1, &st, NULL) == SQLITE_OK)
    yes = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return yes;
}

static void cell(FILE *f, const char *cls, const char *s) {
  fprintf(f, "<td%s%s%s>", cls ? " class=\"" : "", cls ? cls : "", cls ? "\"" : "");
  sg_html_text(f, s);
  fputs("</td>", f);
}

/* The seconds a check took, as a short cell: "12.3" (one decimal below
 * 1e6 s), else 3 significant digits ("1e+308"); "-" for a NULL, a text
 * or an infinity (the row is anyone's: a database someone sent you). */
static void seconds_cell(FILE *f, sqlite3_stmt *st, int col) {
  char b[32];
  int t = sqlite3_column_type(st, col);
  double s = t == SQLITE_INTEGER || t == SQLITE_FLOAT ? sqlite3_column_double(st, col) : NAN;
  if (!isfinite(s)) snprintf(b, sizeof b, "-");
  else snprintf(b, sizeof b, fabs(s) < 1e6 ? "%.1f" : "%.3g", s);
  cell(f, "n", b);
}

int sg_report_claims_html(sqlite3 *db, FILE *f, const char *ids_json) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  if (!has_table(db)) return SG_OK;
  /* the latest row per (name, experiment), by one grouping pass: a
   * correlated max() per row is quadratic in the rows of the file */
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT c.name, c.verdict, c.says, c.measured, c.expected, c.seconds,"
                        " c.checked_at FROM claims c JOIN (SELECT max(d.id) AS id FROM claims d"
                        " WHERE d.experiment_id IN (SELECT value FROM json_each(?1))"
                        " GROUP BY d.name, d.experiment_id) m ON c.id = m.id ORDER BY c.name",
                        &st));
  sqlite3_bind_text(st, 1, ids_json, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!any++)
      fputs("<section id=\"claims\"><h2>Claims</h2>\n<p>What <code>sgdlab claims</code> found"
            " (the latest check of each claim over these experiments; the bands are in"
            " configs/claims/).</p>\n<div class=\"scroll\"><table id=\"tbl-claims\"><thead><tr>"
            "<th>claim</th><th>verdict</th><th>says</th><th>measured</th><th>expected</th>"
            "<th class=\"n\">seconds</th><th>checked</th></tr></thead><tbody>\n", f);
    fputs("<tr>", f);
    cell(f, NULL, sg_rdb_text(st, 0));
    const char *v = sg_rdb_text(st, 1);
    cell(f, v[0] == 'F' ? "bad" : NULL, v);
    for (int c = 2; c <= 4; c++) cell(f, NULL, sg_rdb_text(st, c));
    seconds_cell(f, st, 5);
    cell(f, NULL, sg_rdb_text(st, 6));
    fputs("</tr>\n", f);
  }
  if (any) fputs("</tbody></table></div>\n</section>\n", f);
fail:
  sqlite3_finalize(st);
  return rc;
}
