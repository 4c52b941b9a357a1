/* report_html.c - index.html: the whole report as one self-contained page.
 *
 * The page loads nothing: figures are the report's SVGs inlined, the
 * style sheet and the table-sorting script are inline, and a
 * Content-Security-Policy (default-src 'none') forbids every other load.
 * The script carries a fresh random nonce and the policy allows only
 * scripts with it, so even text that slipped past escaping could not run
 * a script.  Every string from the database goes through sg_html_text();
 * gnuplot escapes < and & in the SVG text it writes, and an SVG with a
 * script element in it is linked, not inlined.
 */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "outfile.h"
#include "escape.h"
#include "report.h"

typedef struct page {
  FILE *f;
  sqlite3 *db;
  const sg_rset_t *s;
  int single_run;
  char ids[SG_RSET_MAX_EXP * 24]; /* JSON array of the experiment ids */
} page_t;

static void esc(page_t *p, const char *s) { sg_html_text(p->f, s); }

/* A table cell with a sort key: data-v is the number (empty: none). */
static void num_cell(page_t *p, double v, const char *shown) {
  char k[40];
  if (isnan(v)) fprintf(p->f, "<td class=\"n\" data-v=\"\">");
  else fprintf(p->f, "<td class=\"n\" data-v=\"%s\">", sg_fmt_real(k, sizeof k, v));
  esc(p, shown);
  fputs("</td>", p->f);
}

static void text_cell(page_t *p, const char *s) {
  fputs("<td>", p->f);
  esc(p, s);
  fputs("</td>", p->f);
}

/* A variant's key (the figures name variants by it) and its label, which
 * may wrap: long labels would otherwise widen the table past the page. */
static void key_label_cells(page_t *p, const sg_rrun_t *r, const char *label) {
  char key[16];
  fprintf(p->f, "<td class=\"key\">%s</td><td class=\"lab\">",
          sg_rkey_text(r->key, key, sizeof key));
  esc(p, label);
  fputs("</td>", p->f);
}

/* <table class="sortable" id="tbl-ID"><thead>...: headers separated by |,
 * a leading '#' marks a numeric (right-aligned) column. */
static void table_head(page_t *p, const char *id, const char *heads) {
  fprintf(p->f, "<div class=\"scroll\"><table class=\"sortable\" id=\"tbl-%s\"><thead><tr>",
          id);
  for (const char *h = heads; *h;) {
    size_t len = strcspn(h, "|");
    int num = *h == '#';
    fprintf(p->f, "<th%s>%.*s</th>", num ? " class=\"n\"" : "", (int)len - num, h + num);
    h += len + (h[len] == '|');
  }
  fputs("</tr></thead><tbody>\n", p->f);
}

static void table_end(page_t *p) { fputs("</tbody></table></div>\n", p->f); }

static const char STYLE[] =
    "body{font:15px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;"
    "color:#1b1f24;background:#f6f7f9}\n"
    "main,header>*{max-width:1320px;margin-left:auto;margin-right:auto;"
    "padding-left:20px;padding-right:20px}\n"
    "main{padding-top:8px;padding-bottom:40px}\n"
    "header{background:#1f3a5f;color:#fff;padding:18px 0}\n"
    "header h1{margin-top:0;margin-bottom:0;font-size:24px;font-weight:600}\n"
    "header p{margin-top:4px;margin-bottom:0;color:#d6e2f0}\n"
    "nav{margin-top:10px}nav a{color:#fff;margin-right:16px}\n"
    "h2{margin:28px 0 8px;font-size:19px;border-bottom:1px solid #d5dae1;padding-bottom:4px}\n"
    "h3{margin:18px 0 4px;font-size:16px}\n"
    ".scroll{overflow-x:auto}\n"
    "table{border-collapse:collapse;background:#fff;margin:6px 0;font-size:14px}\n"
    "#tbl-runs,#tbl-options{font-size:13px}\n"
    "th,td{border:1px solid #d5dae1;padding:3px 8px;text-align:left;vertical-align:top;"
    "white-space:nowrap}\n"
    "td.wrap{white-space:normal;min-width:16em}\n"
    "td.lab{white-space:normal;min-width:9em;max-width:22em}\n"
    "td.key{font-weight:600;text-align:center}\n"
    "td.opts{white-space:normal;min-width:20em}td.opts span{white-space:nowrap;margin-right:.6em}\n"
    "th{background:#eef1f5;white-space:normal;min-width:3em}\n"
    "table.js th{cursor:pointer;user-select:none}\n"
    "table.js th:after{content:' \\2195';color:#9aa4b1}\n"
    "th[aria-sort=ascending]:after{content:' \\25B2';color:#1f3a5f}\n"
    "th[aria-sort=descending]:after{content:' \\25BC';color:#1f3a5f}\n"
    ".n{text-align:right;font-variant-numeric:tabular-nums}\n"
    "tr:nth-child(even) td{background:#fafbfc}\n"
    ".bad{color:#b3261e;font-weight:600}\n"
    ".note{color:#4a5563;font-size:13px;max-width:980px}\n"
    ".warn{color:#8a1c1c;font-size:13px;max-width:980px}\n"
    ".warn.top{font-size:14px;background:#fdecea;border:1px solid #f2b8b5;padding:8px 12px;"
    "max-width:none}\n"
    "figure{background:#fff;border:1px solid #d5dae1;margin:12px 0;padding:10px}\n"
    "figure svg{width:100%;max-width:1000px;height:auto;display:block}\n"
    "figcaption{color:#4a5563;font-size:13px;margin-top:6px}\n"
    "pre{background:#fff;border:1px solid #d5dae1;padding:10px;overflow-x:auto;font-size:13px}\n"
    "code{font-size:13px}\n"
    ".same{columns:3 260px;font-size:13px;color:#4a5563}\n";

/* Sorting: click a header (or Enter on it); numbers sort by data-v, rows
 * without a value last.  "#sort=TABLE:COL[:desc]" in the URL sorts on
 * load, so a sorted view can be linked. */
static const char SCRIPT[] =
    "function sgKey(td){var v=td.getAttribute('data-v');"
    "if(v!==null)return v===''?null:parseFloat(v);return td.textContent;}\n"
    "function sgSort(t,col,asc){var hs=t.tHead.rows[0].cells;"
    "for(var i=0;i<hs.length;i++)hs[i].removeAttribute('aria-sort');"
    "hs[col].setAttribute('aria-sort',asc?'ascending':'descending');"
    "var b=t.tBodies[0],rows=Array.prototype.slice.call(b.rows);"
    "rows.sort(function(a,c){var x=sgKey(a.cells[col]),y=sgKey(c.cells[col]);"
    "if(x===null||y===null)return (x===null)-(y===null);"
    "var d=typeof x==='number'?x-y:String(x).localeCompare(String(y));"
    "return asc?d:-d;});rows.forEach(function(r){b.appendChild(r);});}\n"
    "document.querySelectorAll('table.sortable').forEach(function(t){"
    "t.classList.add('js');Array.prototype.forEach.call(t.tHead.rows[0].cells,"
    "function(th,col){th.tabIndex=0;var go=function(){"
    "sgSort(t,col,th.getAttribute('aria-sort')!=='ascending');};"
    "th.addEventListener('click',go);th.addEventListener('keydown',"
    "function(e){if(e.key==='Enter')go();});});});\n"
    "(function(){var m=/^#sort=([a-z]+):([0-9]+)(:desc)?$/.exec(location.hash);"
    "var t=m&&document.getElementById('tbl-'+m[1]);"
    "if(t&&+m[2]<t.tHead.rows[0].cells.length)sgSort(t,+m[2],!m[3]);})();\n";

/* 32 hex digits from /dev/urandom for the script nonce. */
static int make_nonce(char out[33]) {
  unsigned char b[16];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, b, sizeof b) : -1;
  if (fd >= 0) close(fd);
  if (got != (ssize_t)sizeof b)
    return sg_err_set(SG_EIO, "report: cannot read /dev/urandom for the page's script nonce");
  for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return SG_OK;
}

/* ---- header and tables ------------------------------------------------- */

static void head(page_t *p, const char *db_path, const char *nonce) {
  const sg_rset_t *s = p->s;
  fprintf(p->f,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none';"
          " img-src data:; style-src 'unsafe-inline'; script-src 'nonce-%s'\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta name=\"generator\" content=\"sgdlab report\">\n<title>",
          nonce);
  fputs(p->single_run ? "Run report: " : "Experiment report: ", p->f);
  esc(p, s->name);
  fprintf(p->f, "</title>\n<style>\n%s</style></head><body>\n<header><h1>", STYLE);
  if (p->single_run && s->n)
    fprintf(p->f, "Run %lld of experiment ", (long long)s->runs[0].id);
  else
    fputs(s->nexp > 1 ? "Experiments " : "Experiment ", p->f);
  esc(p, s->name);
  fputs(" <small>(id", p->f);
  for (size_t i = 0; i < s->nexp; i++)
    fprintf(p->f, "%s %lld", i ? "," : "", (long long)s->exp_ids[i]);
  fputs(")</small></h1>\n<p>", p->f);
  fputs(s->nexp > 1 ? "The first started " : "Started ", p->f);
  esc(p, *s->started_at ? s->started_at : "(unknown)");
  fputs(" on ", p->f);
  esc(p, *s->host ? s->host : "(unknown host)");
  fprintf(p->f, " &middot; %zu run%s &middot; database <code>", s->n, s->n == 1 ? "" : "s");
  esc(p, db_path);
  fputs("</code> &middot; drawn by <code>sgdlab report</code> from the database alone</p>\n"
        "<nav><a href=\"#summary\">Summary</a><a href=\"#runs\">Runs</a>"
        "<a href=\"#figures\">Figures</a><a href=\"#environment\">Environment</a>"
        "<a href=\"#options\">Options</a><a href=\"#config\">Experiment file</a></nav>"
        "</header>\n<main>\n",
        p->f);
}

static void status_text(char *buf, size_t len, const sg_rrow_t *w, const sg_rrun_t *r) {
  if (w->ok == w->runs) snprintf(buf, len, "ok");
  else if (w->failed == w->runs) snprintf(buf, len, "failed");
  else if (w->other == w->runs) snprintf(buf, len, "%s", r->status);
  else snprintf(buf, len, "%d ok, %d failed, %d other", w->ok, w->failed, w->other);
}

static int summary_table(page_t *p) {
  const sg_rset_t *s = p->s;
  sg_rrow_t *rows = NULL;
  size_t n = 0;
  char b[160], lab[512];
  SG_CHECK(sg_rrows(s, &rows, &n));
  fprintf(p->f, "<section id=\"summary\"><h2>Summary</h2>\n");
  snprintf(b, sizeof b, "key|variant|#workers|#runs|status|#time to %.3g acc (s)|"
           "#final accuracy|#samples/s|#bytes/step, busiest rank", s->target);
  table_head(p, "summary", b);
  for (size_t g = 0; g < n; g++) {
    const sg_rrow_t *w = &rows[g];
    const sg_rrun_t *r = &s->runs[w->first];
    fputs("<tr>", p->f);
    key_label_cells(p, r, r->variant);
    snprintf(b, sizeof b, "%d", r->workers);
    num_cell(p, r->workers, b);
    snprintf(b, sizeof b, "%d", w->runs);
    num_cell(p, w->runs, b);
    status_text(lab, sizeof lab, w, r);
    fprintf(p->f, "<td%s>", w->ok == w->runs ? "" : " class=\"bad\"");
    esc(p, lab);
    fputs("</td>", p->f);
    sg_rfmt(b, sizeof b, "%.2f", w->t_target);
    if (w->reached && w->reached < w->ok) {
      size_t len = strlen(b);
      snprintf(b + len, sizeof b - len, " (%d/%d reached)", w->reached, w->ok);
    }
    num_cell(p, w->t_target, b);
    num_cell(p, w->final_acc, sg_rfmt(b, sizeof b, "%.4f", w->final_acc));
    num_cell(p, w->samples_per_s, sg_rfmt(b, sizeof b, "%.0f", w->samples_per_s));
    if (r->bytes_in_mpi) num_cell(p, NAN, "n/a (inside MPI)");
    else num_cell(p, w->bytes_per_step, sg_rfmt_bytes(b, sizeof b, w->bytes_per_step));
    fputs("</tr>\n", p->f);
  }
  table_end(p);
  fprintf(p->f,
          "<p class=\"note\">One row per variant and worker count; numbers are medians"
          " over the repeats that finished ok. Click a column header to sort."
          " <b>time to %.3g acc</b>: training wall time (evaluation excluded) at the"
          " first evaluation with test accuracy &ge; %.3g. <b>samples/s</b>: samples"
          " of all worker ranks from the first evaluation period on, over the"
          " wall-clock span of those steps. <b>bytes/step</b>: the busiest rank's mean"
          " bytes sent + received per step (summary.md has the full definitions).</p>"
          "</section>\n",
          s->target, s->target);
  free(rows);
  return SG_OK;
}

static void runs_table(page_t *p) {
  const sg_rset_t *s = p->s;
  char b[64], lab[512];
  int errors = 0;
  for (size_t i = 0; i < s->n; i++) errors |= *s->runs[i].error != '\0';
  fprintf(p->f, "<section id=\"runs\"><h2>Runs</h2>\n");
  table_head(p, "runs", errors ? "#run|key|variant|#N|#rep|status|#wall (s)|"
                                 "#to target (s)|#final acc|#samples/s|"
                                 "#bytes/step|#compute ms|#comm ms|#wait ms|error"
                               : "#run|key|variant|#N|#rep|status|#wall (s)|"
                                 "#to target (s)|#final acc|#samples/s|"
                                 "#bytes/step|#compute ms|#comm ms|#wait ms");
  for (size_t i = 0; i < s->n; i++) {
    const sg_rrun_t *r = &s->runs[i];
    fputs("<tr>", p->f);
    snprintf(b, sizeof b, "%lld", (long long)r->id);
    num_cell(p, (double)r->id, b);
    key_label_cells(p, r, sg_rrun_label(s, r, lab, sizeof lab));
    snprintf(b, sizeof b, "%d", r->workers);
    num_cell(p, r->workers, b);
    snprintf(b, sizeof b, "%d", r->repeat);
    num_cell(p, r->repeat, b);
    fprintf(p->f, "<td%s>", strcmp(r->status, "ok") ? " class=\"bad\"" : "");
    esc(p, r->status);
    fputs("</td>", p->f);
    num_cell(p, r->wall_s, sg_rfmt(b, sizeof b, "%.2f", r->wall_s));
    num_cell(p, r->t_target, sg_rfmt(b, sizeof b, "%.2f", r->t_target));
    num_cell(p, r->final_acc, sg_rfmt(b, sizeof b, "%.4f", r->final_acc));
    num_cell(p, r->samples_per_s, sg_rfmt(b, sizeof b, "%.0f", r->samples_per_s));
    if (r->bytes_in_mpi) num_cell(p, NAN, "n/a (inside MPI)");
    else num_cell(p, r->bytes_per_step, sg_rfmt_bytes(b, sizeof b, r->bytes_per_step));
    /* per step, mean over worker ranks */
    num_cell(p, r->compute_s, sg_rfmt(b, sizeof b, "%.3f", r->compute_s * 1e3));
    num_cell(p, r->comm_s, sg_rfmt(b, sizeof b, "%.3f", r->comm_s * 1e3));
    num_cell(p, r->wait_s, sg_rfmt(b, sizeof b, "%.3f", r->wait_s * 1e3));
    if (errors) {
      fputs("<td class=\"wrap\">", p->f);
      esc(p, r->error);
      fputs("</td>", p->f);
    }
    fputs("</tr>\n", p->f);
  }
  table_end(p);
  fputs("<p class=\"note\">One row per run. <b>N</b>: workers; <b>rep</b>: repeat;"
        " <b>compute, comm, wait</b>: milliseconds per step, mean over the worker ranks.</p></section>\n",
        p->f);
}

/* ---- figures ------------------------------------------------------------ */

/* Whole file into a malloc'd string; NULL (error set) when unreadable. */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long len;
  if (!f || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET) != 0 || !(buf = malloc((size_t)len + 1)) ||
      fread(buf, 1, (size_t)len, f) != (size_t)len) {
    sg_err_set(SG_EIO, "cannot read %s: %s", path, errno ? strerror(errno) : "short read");
    free(buf);
    buf = NULL;
  } else {
    buf[len] = '\0';
  }
  if (f) fclose(f);
  return buf;
}

/* Copy an SVG from its <svg> tag on, with every id and reference to one
 * made unique to this figure ("fig3-gpPt0"): gnuplot gives each file the
 * same ids, and several figures share one page.  Only attributes inside
 * tags are touched, never text. */
static void inline_svg(FILE *f, const char *svg, int fig) {
  static const char *const pats[] = {"id='", "id=\"", "href='#", "href=\"#", "url(#"};
  char pre[16];
  int in_tag = 0;
  snprintf(pre, sizeof pre, "fig%d-", fig);
  for (const char *c = strstr(svg, "<svg"); c && *c; c++) {
    if (*c == '<') in_tag = 1;
    else if (*c == '>') in_tag = 0;
    int hit = -1;
    for (int k = 0; in_tag && hit < 0 && k < 5; k++) {
      size_t len = strlen(pats[k]);
      int boundary = k == 4 || (c > svg && strchr(" \t\n:", c[-1]));
      if (boundary && !strncmp(c, pats[k], len)) hit = k;
    }
    if (hit < 0) {
      fputc(*c, f);
      continue;
    }
    fputs(pats[hit], f);
    fputs(pre, f);
    c += strlen(pats[hit]) - 1;
  }
}

static int figures(page_t *p, const char *dir, const sg_rfig_t *figs, size_t nfigs) {
  char path[PATH_MAX + 64];
  if (!nfigs) return SG_OK;
  fputs("<section id=\"figures\"><h2>Figures</h2>\n<p class=\"note\">Each figure is"
        " also in this directory as PNG and SVG, with its gnuplot script (.gp) and"
        " data (.tsv): redraw with <code>gnuplot NAME.gp</code>.</p>\n", p->f);
  for (size_t i = 0; i < nfigs; i++) {
    const char *name = figs[i].name;
    snprintf(path, sizeof path, "%s/%s.svg", dir, name);
    char *svg = slurp(path);
    if (!svg) return SG_EIO;
    fprintf(p->f, "<figure id=\"fig-%s\"><h3>%s</h3>\n", name, name);
    /* gnuplot writes no script; one found here is not inlined */
    if (!strstr(svg, "<svg") || strcasestr(svg, "<script") || strcasestr(svg, "<foreignObject"))
      fprintf(p->f, "<p><a href=\"%s.svg\">%s.svg</a> (not inlined)</p>", name, name);
    else
      inline_svg(p->f, svg, (int)i);
    free(svg);
    fputs("\n<figcaption>", p->f);
    esc(p, figs[i].caption);
    fprintf(p->f, " <a href=\"%s.svg\">SVG</a> &middot; <a href=\"%s.png\">PNG</a>"
                  " &middot; <a href=\"%s.gp\">script</a></figcaption></figure>\n",
            name, name, name);
  }
  fputs("</section>\n", p->f);
  return SG_OK;
}

/* ---- bench, environment, options, experiment files --------------------- */

static int bench_table(page_t *p) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  char b[64];
  SG_TRY(sg_rdb_prepare(p->db,
                        "SELECT experiment_id, collective, impl, transport, np, bytes,"
                        " iters, t_median, busbw, wrong FROM bench"
                        " WHERE experiment_id IN (SELECT value FROM json_each(?1))"
                        " ORDER BY experiment_id, collective, bytes, impl, transport, np",
                        &st));
  sqlite3_bind_text(st, 1, p->ids, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!any++) {
      fputs("<section id=\"bench\"><h2>Collective benchmark</h2>\n", p->f);
      table_head(p, "bench", "#experiment|collective|impl|transport|#np|#bytes|#iters|"
                             "#median time (us)|#busbw (GB/s)|#wrong");
    }
    fputs("<tr>", p->f);
    snprintf(b, sizeof b, "%lld", (long long)sqlite3_column_int64(st, 0));
    num_cell(p, sg_rdb_double(st, 0), b);
    for (int c = 1; c <= 3; c++) text_cell(p, sg_rdb_text(st, c));
    snprintf(b, sizeof b, "%d", sqlite3_column_int(st, 4));
    num_cell(p, sg_rdb_double(st, 4), b);
    num_cell(p, sg_rdb_double(st, 5), sg_rfmt_bytes(b, sizeof b, sg_rdb_double(st, 5)));
    snprintf(b, sizeof b, "%d", sqlite3_column_int(st, 6));
    num_cell(p, sg_rdb_double(st, 6), b);
    num_cell(p, sg_rdb_double(st, 7) * 1e6, sg_rfmt(b, sizeof b, "%.1f", sg_rdb_double(st, 7) * 1e6));
    num_cell(p, sg_rdb_double(st, 8), sg_rfmt(b, sizeof b, "%.3f", sg_rdb_double(st, 8)));
    snprintf(b, sizeof b, "%lld", (long long)sqlite3_column_int64(st, 9));
    num_cell(p, sg_rdb_double(st, 9), b);
    fputs("</tr>\n", p->f);
  }
  if (any) {
    table_end(p);
    fputs("</section>\n", p->f);
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Runs that ran on a host busier than they make it: one warning line,
 * first on the page. */
static int loaded_warning(page_t *p) {
  char ids[512], text[1024];
  int n = sg_report_loaded_runs(p->db, p->s, p->single_run, ids, sizeof ids);
  if (n <= 0) return n;
  sg_report_loaded_text(text, sizeof text, n, ids);
  fputs("<p class=\"warn top\"><strong>Warning: loaded host.</strong> ", p->f);
  esc(p, text);
  fputs("</p>\n", p->f);
  return SG_OK;
}

/* Experiments (host, version) and the run_info of the report's runs. */
static int environment(page_t *p) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  char b[32];
  fputs("<section id=\"environment\"><h2>Environment</h2>\n", p->f);
  SG_TRY(sg_rdb_prepare(p->db,
                        "SELECT id, name, started_at, host, version FROM experiments"
                        " WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
                        &st));
  sqlite3_bind_text(st, 1, p->ids, -1, SQLITE_STATIC);
  table_head(p, "experiments", "#experiment|name|started|host|sgdlab version");
  while (sqlite3_step(st) == SQLITE_ROW) {
    fputs("<tr>", p->f);
    snprintf(b, sizeof b, "%lld", (long long)sqlite3_column_int64(st, 0));
    num_cell(p, sg_rdb_double(st, 0), b);
    for (int c = 1; c <= 4; c++) text_cell(p, sg_rdb_text(st, c));
    fputs("</tr>\n", p->f);
  }
  table_end(p);
  sqlite3_finalize(st);
  st = NULL;
  SG_TRY(sg_rdb_prepare(
      p->db,
      "SELECT i.key, i.value, count(DISTINCT i.run_id), group_concat(DISTINCT i.run_id)"
      " FROM run_info i JOIN runs r ON r.id = i.run_id"
      " WHERE (?1 >= 0 AND r.id = ?1) OR (?1 < 0 AND r.experiment_id IN"
      "   (SELECT value FROM json_each(?2)))"
      " AND i.key NOT LIKE 'time.%' AND i.key NOT LIKE 'load.%'" /* per run: sgdlab show */
      " GROUP BY i.key, i.value ORDER BY i.key, i.value LIMIT 500",
      &st));
  sqlite3_bind_int64(st, 1, p->single_run && p->s->n ? p->s->runs[0].id : -1);
  sqlite3_bind_text(st, 2, p->ids, -1, SQLITE_STATIC);
  fputs("<h3>Run info</h3><p class=\"note\">What the ranks reported (BLAS build,"
        " workload, engine); each distinct value once, with the runs that"
        " reported it.</p>\n", p->f);
  table_head(p, "info", "key|value|#runs|run ids");
  while (sqlite3_step(st) == SQLITE_ROW) {
    fputs("<tr>", p->f);
    text_cell(p, sg_rdb_text(st, 0));
    text_cell(p, sg_rdb_text(st, 1));
    snprintf(b, sizeof b, "%d", sqlite3_column_int(st, 2));
    num_cell(p, sg_rdb_double(st, 2), b);
    text_cell(p, sg_rdb_text(st, 3));
    fputs("</tr>\n", p->f);
  }
  table_end(p);
  fputs("</section>\n", p->f);
fail:
  sqlite3_finalize(st);
  return rc;
}

static int experiment_files(page_t *p) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  fputs("<section id=\"config\"><h2>Experiment file</h2>\n", p->f);
  SG_TRY(sg_rdb_prepare(p->db,
                        "SELECT id, name, config_text FROM experiments"
                        " WHERE id IN (SELECT value FROM json_each(?1)) ORDER BY id",
                        &st));
  sqlite3_bind_text(st, 1, p->ids, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW) {
    fprintf(p->f, "<h3>Experiment %lld: ", (long long)sqlite3_column_int64(st, 0));
    esc(p, sg_rdb_text(st, 1));
    fputs("</h3>\n<pre>", p->f);
    esc(p, sqlite3_column_type(st, 2) == SQLITE_NULL ? "(not recorded)" : sg_rdb_text(st, 2));
    fputs("</pre>\n", p->f);
  }
  fputs("</section>\n", p->f);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* The options of every run as a (run x key) matrix of values. */
typedef struct optm {
  char **keys;
  size_t nkeys;
  char **val; /* val[run * nkeys + key], NULL: the run has no such key */
  size_t cap;
} optm_t;

static void optm_free(optm_t *m, size_t nruns) {
  for (size_t i = 0; i < m->nkeys; i++) free(m->keys[i]);
  for (size_t i = 0; m->val && i < nruns * m->cap; i++) free(m->val[i]);
  free(m->keys);
  free(m->val);
}

/* Index of key k, added (with a column of NULLs) when new; -1 on ENOMEM. */
static long optm_key(optm_t *m, size_t nruns, const char *k) {
  for (size_t i = 0; i < m->nkeys; i++)
    if (!strcmp(m->keys[i], k)) return (long)i;
  if (m->nkeys == m->cap) { /* grow: every run's row gets the new width */
    size_t nc = m->cap ? 2 * m->cap : 64;
    char **keys = realloc(m->keys, nc * sizeof *keys);
    char **val = calloc(nruns * nc + 1, sizeof *val);
    if (keys) m->keys = keys;
    if (!keys || !val) {
      free(val);
      return -1;
    }
    for (size_t r = 0; r < nruns; r++)
      for (size_t i = 0; i < m->nkeys; i++) val[r * nc + i] = m->val[r * m->cap + i];
    free(m->val);
    m->val = val;
    m->cap = nc;
  }
  if (!(m->keys[m->nkeys] = strdup(k))) return -1;
  return (long)m->nkeys++;
}

static int optm_load(page_t *p, optm_t *m) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(p->db,
                        "SELECT j.key, CASE j.type WHEN 'true' THEN 'true'"
                        " WHEN 'false' THEN 'false' ELSE j.value END"
                        " FROM runs r, json_each(r.options_json) j WHERE r.id = ?1"
                        " AND json_valid(r.options_json)",
                        &st));
  for (size_t i = 0; i < p->s->n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, p->s->runs[i].id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      long k = optm_key(m, p->s->n, sg_rdb_text(st, 0));
      char **cell = k < 0 ? NULL : &m->val[i * m->cap + (size_t)k];
      if (!cell || (!*cell && !(*cell = strdup(sg_rdb_text(st, 1))))) {
        rc = sg_err_set(SG_ENOMEM, "report: out of memory");
        goto fail;
      }
    }
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* 1 when key k has two different values (or is missing in some run). */
static int optm_differs(const optm_t *m, size_t nruns, size_t k) {
  const char *v0 = m->val[k];
  for (size_t r = 1; r < nruns; r++) {
    const char *v = m->val[r * m->cap + k];
    if (!v0 != !v || (v && strcmp(v, v0))) return 1;
  }
  return 0;
}

/* Key k is shown: not an internal one (_label, ...). */
static int optm_shown(const optm_t *m, size_t k) { return m->keys[k][0] != '_'; }

/* One row per run: its id, key, label and the options that differ, as
 * key=value items that wrap (a column per option would not fit a page:
 * the quickstart's runs differ in 25). */
static void options_rows(page_t *p, const optm_t *m) {
  const sg_rset_t *s = p->s;
  char lab[512], b[32];
  table_head(p, "options", "#run|key|variant|options that differ");
  for (size_t r = 0; r < s->n; r++) {
    fputs("<tr>", p->f);
    snprintf(b, sizeof b, "%lld", (long long)s->runs[r].id);
    num_cell(p, (double)s->runs[r].id, b);
    key_label_cells(p, &s->runs[r], sg_rrun_label(s, &s->runs[r], lab, sizeof lab));
    fputs("<td class=\"opts\">", p->f);
    for (size_t k = 0; k < m->nkeys; k++) {
      const char *v = m->val[r * m->cap + k];
      if (!optm_shown(m, k) || !optm_differs(m, s->n, k)) continue;
      fputs("<span><code>", p->f);
      esc(p, m->keys[k]);
      fputs("</code>=", p->f);
      esc(p, v ? v : "\xe2\x80\x94");
      fputs("</span> ", p->f);
    }
    fputs("</td></tr>\n", p->f);
  }
  table_end(p);
}

static int options_diff(page_t *p) {
  const sg_rset_t *s = p->s;
  optm_t m = {0};
  int rc = SG_OK, ndiff = 0, nsame = 0;
  SG_TRY(optm_load(p, &m));
  fputs("<section id=\"options\"><h2>Options</h2>\n", p->f);
  for (size_t k = 0; k < m.nkeys; k++) {
    if (!optm_shown(&m, k)) continue;
    if (optm_differs(&m, s->n, k)) ndiff++;
    else nsame++;
  }
  if (ndiff) {
    fprintf(p->f, "<p class=\"note\">The %d option%s that differ between the runs"
                  " (&mdash;: not set in that run).</p>\n", ndiff, ndiff == 1 ? "" : "s");
    options_rows(p, &m);
  } else {
    fprintf(p->f, "<p class=\"note\">No option differs between the runs.</p>\n");
  }
  if (nsame) {
    fputs("<h3>The same in every run</h3>\n<div class=\"same\">", p->f);
    for (size_t k = 0; k < m.nkeys; k++) {
      if (!optm_shown(&m, k) || optm_differs(&m, s->n, k)) continue;
      fputs("<div><code>", p->f);
      esc(p, m.keys[k]);
      fputs("</code> = <code>", p->f);
      esc(p, m.val[k]);
      fputs("</code></div>", p->f);
    }
    fputs("</div>\n", p->f);
  }
  fputs("</section>\n", p->f);
fail:
  optm_free(&m, s->n);
  return rc;
}

/* ---- the page ----------------------------------------------------------- */

static void failed_note(page_t *p) {
  int bad = 0;
  for (size_t i = 0; i < p->s->n; i++) bad += strcmp(p->s->runs[i].status, "ok") != 0;
  if (bad)
    fprintf(p->f, "<p class=\"bad\">%d run%s did not finish ok: see the error column"
                  " of the run table.</p>\n", bad, bad == 1 ? "" : "s");
}

int sg_report_html(sqlite3 *db, const char *db_path, const sg_rset_t *s,
                   int single_run, const char *dir, const sg_rfig_t *figs,
                   size_t nfigs) {
  char nonce[33];
  page_t p = {.db = db, .s = s, .single_run = single_run};
  int rc = SG_OK;
  sg_rset_ids_json(s, p.ids, sizeof p.ids);
  SG_CHECK(make_nonce(nonce));
  SG_CHECK(sg_out_fopen(&p.f, dir, "index.html"));
  head(&p, db_path, nonce);
  if (s->n) {
    SG_TRY(loaded_warning(&p));
    SG_TRY(summary_table(&p));
    failed_note(&p);
    runs_table(&p);
  } else {
    fputs("<p>No training runs in this report.</p>\n", p.f);
  }
  SG_TRY(figures(&p, dir, figs, nfigs));
  if (!single_run) SG_TRY(bench_table(&p));
  if (!single_run) SG_TRY(sg_report_claims_html(db, p.f, p.ids));
  SG_TRY(environment(&p));
  if (s->n) SG_TRY(options_diff(&p));
  SG_TRY(experiment_files(&p));
  fprintf(p.f, "</main>\n<script nonce=\"%s\">\n%s</script>\n</body></html>\n", nonce,
          SCRIPT);
fail:
  if (rc < 0) sg_out_discard(p.f);
  else rc = sg_out_fclose(p.f);
  return rc;
}
