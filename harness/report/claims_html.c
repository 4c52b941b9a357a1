/* claims_html.c - the report's "Claims" section: the verdicts `sgdlab
 * claims` recorded (its `claims` table) for the experiments of the
 * report, the latest per claim.  A database without the table (no claim
 * was ever checked into it) has no section. */
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

int sg_report_claims_html(sqlite3 *db, FILE *f, const char *ids_json) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  char b[32];
  if (!has_table(db)) return SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT c.name, c.verdict, c.says, c.measured, c.expected, c.seconds,"
                        " c.checked_at FROM claims c WHERE c.experiment_id IN"
                        " (SELECT value FROM json_each(?1)) AND c.id = (SELECT max(d.id) FROM"
                        " claims d WHERE d.name = c.name AND d.experiment_id = c.experiment_id)"
                        " ORDER BY c.name",
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
    snprintf(b, sizeof b, "%.1f", sqlite3_column_double(st, 5));
    cell(f, "n", b);
    cell(f, NULL, sg_rdb_text(st, 6));
    fputs("</tr>\n", f);
  }
  if (any) fputs("</tbody></table></div>\n</section>\n", f);
fail:
  sqlite3_finalize(st);
  return rc;
}
