/* report.c - `sgdlab report`: figures (gnuplot), summary.md and
 * index.html from the results database alone.
 *
 * For each figure this writes a tab-separated data file and a gnuplot
 * script into the output directory, then runs gnuplot there, so every
 * figure can be edited and redrawn without sgdlab.  A figure is drawn only
 * when its data exists (no bench rows: no allreduce figures; one worker
 * count: no scaling or bytes-vs-workers figures; no staleness: no
 * histogram; no server or driver rank: no server_time).  Where a variant
 * has repeats, the figures over workers draw the median with a min-max
 * band.
 *
 * Labels are data (experiment names, swept settings, bench records), so
 * they reach a script only through sg_plot_quote() and a .tsv only
 * through sg_plot_data_text() (plot.h); tick labels and key entries are
 * written in the script, never read from a data file.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "db_path.h"
#include "err.h"
#include "outfile.h"
#include "plot.h"
#include "engine.h"
#include "report.h"

#define MAX_FIGS 20
#define STALENESS_BINS 64 /* values above go into the last bin */

typedef struct report {
  sqlite3 *db;
  const char *db_path;
  sg_rset_t *set;
  char dir[PATH_MAX];
  int single_run;
  sg_rfig_t figs[MAX_FIGS];
  size_t nfigs;
  /* color per run: runs with the same label share a color */
  int *color;
  int ncolors;
  /* style per run for figures over variants (scaling): one per variant */
  int *vcolor;
  sg_rfiles_t written; /* what this report wrote into dir */
} report_t;

static const char usage[] =
    "usage: sgdlab report [EXPERIMENT... | --run ID] [--db PATH] [--out DIR]\n"
    "                     [--target ACC] [--join]\n"
    "\n"
    "Draw figures (PNG and SVG, via gnuplot), summary.md and index.html (one\n"
    "self-contained page) for an experiment from the results database;\n"
    "nothing is re-run.\n"
    "\n"
    "  EXPERIMENT    name (the latest experiment with it) or numeric id;\n"
    "                default: the latest experiment.  Several: one report of\n"
    "                all their runs, labels prefixed with the experiment\n"
    "  --run ID      report on one run only\n"
    "  --db PATH     results database (default " SG_DEFAULT_DB ")\n"
    "  --out DIR     output directory (default results/<experiment-name>/,\n"
    "                with --run: results/<experiment-name>/run-<ID>/; several\n"
    "                experiments: results/<name1>_<name2>.../); yours and\n"
    "                writable by no one else (made 0755 when missing)\n"
    "  --target ACC  test accuracy for the time-to-target column (default 0.85)\n"
    "  --join        several experiments: labels not prefixed, so one variant\n"
    "                run in several of them is one line across its N (a sweep\n"
    "                continued in another experiment file; runs of one variant\n"
    "                and N in two of them count as its repeats)\n"
    "\n"
    "Each figure NAME comes with NAME.gp and its .tsv data in DIR: redraw it\n"
    "with `cd DIR && gnuplot NAME.gp`.  SGDLAB_GNUPLOT overrides the gnuplot\n"
    "program.  DIR/" SG_REPORT_MANIFEST " lists what the report wrote; the next report\n"
    "into DIR removes those of its files that it does not write again.\n";

/* ---- helpers ----------------------------------------------------------- */

/* The single-process reference run (an engine table property). */
static int is_baseline(const sg_rrun_t *r) {
  const sg_engine_t *e = sg_engine_find(r->engine);
  return e && e->baseline;
}

static int open_data(report_t *rp, const char *file, FILE **f) {
  SG_CHECK(sg_out_fopen(f, rp->dir, file));
  return sg_rfiles_add(&rp->written, file);
}

static int close_data(report_t *rp, const char *file, FILE **f) {
  (void)rp;
  (void)file;
  int rc = sg_out_fclose(*f);
  *f = NULL;
  return rc;
}

static void add_fig(report_t *rp, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_fig(report_t *rp, const char *name, const char *fmt, ...) {
  va_list ap;
  static const char *const exts[] = {"png", "svg", "gp"};
  char file[64];
  if (rp->nfigs == MAX_FIGS) return;
  /* out of memory here leaves the file out of the manifest: it would
   * only outlive a later report */
  for (int k = 0; k < 3; k++) {
    snprintf(file, sizeof file, "%s.%s", name, exts[k]);
    if (sg_rfiles_add(&rp->written, file) < 0) sg_err_clear();
  }
  sg_rfig_t *f = &rp->figs[rp->nfigs++];
  snprintf(f->name, sizeof f->name, "%s", name);
  va_start(ap, fmt);
  vsnprintf(f->caption, sizeof f->caption, fmt, ap);
  va_end(ap);
}

static const char *label(const report_t *rp, size_t i, char *buf, size_t len) {
  return sg_rrun_label(rp->set, &rp->set->runs[i], buf, len);
}

/* One color per distinct label, in order of first appearance: the
 * label's key. */
static int assign_colors(report_t *rp) {
  const sg_rset_t *s = rp->set;
  rp->color = calloc(s->n ? s->n : 1, sizeof *rp->color);
  if (!rp->color) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < s->n; i++) {
    rp->color[i] = s->runs[i].key;
    if (rp->color[i] >= rp->ncolors) rp->ncolors = rp->color[i] + 1;
  }
  /* the same per variant, for figures with one series per variant */
  int nv = 0;
  rp->vcolor = calloc(s->n ? s->n : 1, sizeof *rp->vcolor);
  if (!rp->vcolor) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < s->n; i++) {
    rp->vcolor[i] = -1;
    for (size_t j = 0; j < i && rp->vcolor[i] < 0; j++)
      if (!strcmp(s->runs[i].variant, s->runs[j].variant)) rp->vcolor[i] = rp->vcolor[j];
    if (rp->vcolor[i] < 0) rp->vcolor[i] = nv++;
  }
  return SG_OK;
}

/* gnuplot's default palette repeats after 8.  Series c gets color
 * c % 12 and dash type 1 + (c / 12) % 5 (solid, dashed, dotted,
 * dash-dot, dash-dot-dot): 60 distinguishable series. */
enum { NPALETTE = 12, NDASH = 5 };
static const char *const palette[NPALETTE] = {
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#9edae5"};

static void plot_color(FILE *gp, int c) {
  fputs("lc rgb ", gp);
  sg_plot_quote(gp, palette[c % NPALETTE]);
  fprintf(gp, " dt %d", 1 + (c / NPALETTE) % NDASH);
}

/* Axis labels of a figure (x may be NULL; y may not). */
static void axis_labels(FILE *gp, const char *x, const char *y) {
  if (x) sg_plot_set_text(gp, "xlabel", x);
  sg_plot_set_text(gp, "ylabel", y);
}

/* The comment line opening data block `blk` of a .tsv (blocks are
 * separated by two blank lines: gnuplot's `index`); text is data. */
static void tsv_block(FILE *f, int blk, const char *text) {
  fputs(blk ? "\n\n# " : "# ", f);
  sg_plot_data_text(f, text);
  fputc('\n', f);
}

/* tsv_block for run i: "run ID: LABEL (repeat R)". */
static void tsv_run_block(report_t *rp, FILE *f, int blk, size_t i) {
  char lab[512], text[640];
  snprintf(text, sizeof text, "run %lld: %s (repeat %d)", (long long)rp->set->runs[i].id,
           label(rp, i, lab, sizeof lab), rp->set->runs[i].repeat);
  tsv_block(f, blk, text);
}

/* A min-max band behind a median line: columns lo and lo+1 of block blk
 * of data file `file`, filled in the series' color, no key entry. */
static void series_band(FILE *gp, const char *file, int blk, int lo, int c) {
  fputs("  ", gp);
  sg_plot_quote(gp, file);
  fprintf(gp, " index %d using 1:%d:%d with filledcurves fs transparent solid 0.2 noborder ",
          blk, lo, lo + 1);
  fputs("lc rgb ", gp);
  sg_plot_quote(gp, palette[c % NPALETTE]);
  fputs(" notitle, \\\n", gp);
}

/* ---- series figures: one line per run, overlaid or as small multiples -- */

/* Pooled values of some figure's series, to zoom its y axis on where the
 * runs end up: `late` holds the second half of every run's values. */
typedef struct zoom {
  double *late, *run; /* run: the current run's values */
  size_t nlate, caplate, nrun, caprun, total;
  double min, max;
  double xmax; /* the largest x of the values, where the caller tracks it */
} zoom_t;

static int push(double **v, size_t *n, size_t *cap, double x) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 256;
    double *q = realloc(*v, c * sizeof *q);
    if (!q) return sg_err_set(SG_ENOMEM, "report: out of memory");
    *v = q;
    *cap = c;
  }
  (*v)[(*n)++] = x;
  return SG_OK;
}

static int zoom_value(zoom_t *z, double x) {
  if (isnan(x) || isinf(x)) return SG_OK;
  if (!z->total++ || x < z->min) z->min = x;
  if (z->total == 1 || x > z->max) z->max = x;
  return push(&z->run, &z->nrun, &z->caprun, x);
}

/* The current run is complete: its second half joins `late`. */
static int zoom_run_end(zoom_t *z) {
  for (size_t k = z->nrun / 2; k < z->nrun; k++)
    SG_CHECK(push(&z->late, &z->nlate, &z->caplate, z->run[k]));
  z->nrun = 0;
  return SG_OK;
}

static void zoom_free(zoom_t *z) {
  free(z->late);
  free(z->run);
  memset(z, 0, sizeof *z);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The y range that shows where the runs end up: from the 5th percentile
 * of the late values (low = 1: accuracy, what lies below is the start)
 * or up to their 95th (low = 0: losses, the start lies above), padded by
 * 35% of the span on that side, 8% on the other.  [NaN, NaN] when that would cut nothing. */
static void zoom_range(zoom_t *z, int low, double lim[2]) {
  lim[0] = lim[1] = NAN;
  if (z->nlate < 4) return;
  qsort(z->late, z->nlate, sizeof *z->late, cmp_double);
  double p = z->late[low ? z->nlate / 20 : z->nlate - 1 - z->nlate / 20];
  double lo = low ? p : z->min, hi = low ? z->max : p, span = hi - lo;
  if (span < 1e-3 * (fabs(hi) + 1e-3)) span = 0.02 * fabs(hi) + 1e-3;
  /* more room on the cut side: the way in to where the runs end */
  lo -= (low ? 0.35 : 0.08) * span;
  hi += (low ? 0.08 : 0.35) * span;
  if (low ? lo <= z->min : hi >= z->max) return; /* nothing to cut */
  lim[0] = lo;
  lim[1] = hi;
}

/* One figure of a line per run: column xcol:ycol of block[i] of `file`
 * (block[i] < 0: run i has none). */
typedef struct series_fig {
  const char *name, *title, *xlabel, *ylabel, *file, *with;
  int xcol, ycol;
  const int *block;
  double ylim[2]; /* NaN: autoscale */
  double hline;   /* a dashed reference line (the target); NaN: none */
  double xmax;    /* the largest x drawn (panels: tick spacing); NaN: unknown */
} series_fig_t;

/* Up to this many variants share one plot; more get a panel each. */
#define OVERLAY_MAX 4
#define PANEL_W 250  /* pixels per panel column, about */
#define PANEL_H 215
#define PANEL_CHARS 28 /* a panel title's label, at most */

/* "A  local": a variant's key and its label, shortened to `max` bytes. */
static const char *key_label(report_t *rp, size_t i, size_t max, char *buf, size_t len) {
  char lab[512], sh[192], key[16];
  sg_plot_shorten(label(rp, i, lab, sizeof lab), max, sh, sizeof sh);
  snprintf(buf, len, "%s  %s", sg_rkey_text(rp->set->runs[i].key, key, sizeof key), sh);
  return buf;
}

static void series_ranges(FILE *gp, const series_fig_t *fig) {
  if (!isnan(fig->ylim[0])) fprintf(gp, "set yrange [%.6g:%.6g]\n", fig->ylim[0], fig->ylim[1]);
}

/* A panel is narrow: x ticks 1, 2 or 5 x 10^k apart, about three of them. */
static void panel_xtics(FILE *gp, double xmax) {
  if (isnan(xmax) || xmax <= 0) return;
  double raw = xmax / 3, p = pow(10, floor(log10(raw))), m = raw / p;
  double step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  fprintf(gp, "set xtics %.6g\n", step);
}

/* `FILE index B using X:Y WITH` for run i, in the run's color (or grey). */
static void series_line(report_t *rp, FILE *gp, const series_fig_t *fig, size_t i, int grey) {
  fputs("  ", gp);
  sg_plot_quote(gp, fig->file);
  fprintf(gp, " index %d using %d:%d ", fig->block[i], fig->xcol, fig->ycol);
  if (grey) {
    fputs("with lines lw 1 lc rgb '#c9ced6' notitle, \\\n", gp);
    return;
  }
  fprintf(gp, "%s ", fig->with);
  plot_color(gp, rp->color[i]);
}

static void series_hline(FILE *gp, const series_fig_t *fig, int titled) {
  if (isnan(fig->hline)) {
    fputs("  NaN notitle\n", gp);
    return;
  }
  fprintf(gp, "  %g with lines dt 2 lw 1 lc rgb '#606060' ", fig->hline);
  if (titled) fprintf(gp, "title 'target %g'\n", fig->hline);
  else fputs("notitle\n", gp);
}

static int series_overlay(report_t *rp, const series_fig_t *fig, int *titled) {
  FILE *gp = NULL;
  int rc = SG_OK;
  char t[320];
  memset(titled, 0, ((size_t)rp->ncolors + 1) * sizeof *titled);
  SG_TRY(sg_plot_begin(&gp, rp->dir, fig->name, fig->title));
  axis_labels(gp, fig->xlabel, fig->ylabel);
  series_ranges(gp, fig);
  fputs("plot \\\n", gp);
  for (size_t i = 0; i < rp->set->n; i++) {
    if (fig->block[i] < 0) continue;
    series_line(rp, gp, fig, i, 0);
    if (titled[rp->color[i]]) fputs(" notitle", gp);
    else sg_plot_title(gp, key_label(rp, i, 28, t, sizeof t));
    titled[rp->color[i]] = 1;
    fputs(", \\\n", gp);
  }
  series_hline(gp, fig, 1);
  SG_TRY(sg_plot_end(&gp, rp->dir, fig->name));
fail:
  if (gp) sg_out_discard(gp);
  return rc;
}

/* The grid of a multiplot with n panels: *cols, *rows; the figure size. */
static void grid(int n, int *rows, int *cols, int *w, int *h) {
  *cols = n <= 6 ? 3 : n <= 16 ? 4 : (int)ceil(sqrt((double)n));
  *rows = (n + *cols - 1) / *cols;
  *w = *cols * PANEL_W + 40;
  if (*w < 1000) *w = 1000;
  *h = *rows * PANEL_H + 70;
}

/* `set title 'A  local' font ',9' noenhanced`: a panel's title. */
static void panel_title(FILE *gp, const char *text) {
  fputs("set title ", gp);
  sg_plot_quote(gp, text);
  fputs(" font ',9' noenhanced\n", gp);
}

/* The axis labels of a grid, once for all its panels: labels 101 and 102
 * at the bottom and the left edge (unset after the first panel). */
static void shared_axis_labels(FILE *gp, const char *x, const char *y, int w, int h) {
  fputs("unset xlabel\nunset ylabel\nset label 101 ", gp);
  sg_plot_quote(gp, x);
  fprintf(gp, " at screen 0.5,%.4f center noenhanced\nset label 102 ", 14.0 / h);
  sg_plot_quote(gp, y);
  fprintf(gp, " at screen %.4f,0.5 center rotate by 90 noenhanced\n", 16.0 / w);
}

/* One panel per variant: every other run grey behind, the variant's
 * runs (its repeats) in its color on top. */
static int series_panels(report_t *rp, const series_fig_t *fig, int nkeys) {
  const sg_rset_t *s = rp->set;
  FILE *gp = NULL;
  int rc = SG_OK, rows, cols, w, h, panel = 0;
  char t[320];
  grid(nkeys, &rows, &cols, &w, &h);
  SG_TRY(sg_plot_begin_size(&gp, rp->dir, fig->name, fig->title, w, h));
  fputs("unset key\nset tics font ',9'\n", gp);
  series_ranges(gp, fig);
  panel_xtics(gp, fig->xmax);
  sg_plot_multi_begin(gp, fig->name, w, h, rows, cols, fig->title);
  shared_axis_labels(gp, fig->xlabel, fig->ylabel, w, h);
  for (int k = 0; k < rp->ncolors; k++) {
    size_t first = s->n;
    for (size_t i = 0; i < s->n && first == s->n; i++)
      if (rp->color[i] == k && fig->block[i] >= 0) first = i;
    if (first == s->n) continue;
    panel_title(gp, key_label(rp, first, PANEL_CHARS, t, sizeof t));
    fputs("plot \\\n", gp);
    for (size_t i = 0; i < s->n; i++)
      if (fig->block[i] >= 0 && rp->color[i] != k) series_line(rp, gp, fig, i, 1);
    for (size_t i = 0; i < s->n; i++) {
      if (fig->block[i] < 0 || rp->color[i] != k) continue;
      series_line(rp, gp, fig, i, 0);
      fputs(" notitle, \\\n", gp);
    }
    series_hline(gp, fig, 0);
    if (!panel++) fputs("unset label 101\nunset label 102\n", gp); /* drawn once */
  }
  SG_TRY(sg_plot_multi_end(&gp, rp->dir, fig->name));
fail:
  if (gp) sg_out_discard(gp);
  return rc;
}

/* The figure: overlaid when at most OVERLAY_MAX variants have a series,
 * else small multiples. */
static int series_figure(report_t *rp, const series_fig_t *fig, int *titled) {
  int nkeys = 0;
  memset(titled, 0, ((size_t)rp->ncolors + 1) * sizeof *titled);
  for (size_t i = 0; i < rp->set->n; i++)
    if (fig->block[i] >= 0 && !titled[rp->color[i]]) {
      titled[rp->color[i]] = 1;
      nkeys++;
    }
  if (nkeys <= OVERLAY_MAX) return series_overlay(rp, fig, titled);
  return series_panels(rp, fig, nkeys);
}

/* ---- evals: accuracy and test loss vs time and vs step ----------------- */

/* evals.tsv: one block per run with evaluations; block[i] is run i's
 * block (gnuplot index), -1 for a run without any */
static int evals_data(report_t *rp, int *block, int *nblocks, zoom_t z[2], double xmax[2]) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  FILE *f = NULL;
  int rc = SG_OK;
  SG_TRY(open_data(rp, "evals.tsv", &f));
  fprintf(f, "# test-set evaluations, one block per run (gnuplot index)\n");
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT step, wall_s, samples, test_acc, test_loss,"
                        " train_loss, epoch FROM evals WHERE run_id = ?1"
                        " ORDER BY step, wall_s",
                        &st));
  for (size_t i = 0; i < s->n; i++) {
    block[i] = -1;
    /* a run without an accuracy (simulated with modeled compute: its
     * evaluations record none) has nothing to draw */
    if (s->runs[i].nevals == 0 || isnan(s->runs[i].final_acc)) continue;
    block[i] = (*nblocks)++;
    tsv_run_block(rp, f, block[i], i);
    fprintf(f, "# step\twall_s\tsamples\ttest_acc\ttest_loss\ttrain_loss\tepoch\n");
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      fprintf(f, "%lld\t%.6g\t%lld\t%.6g\t%.6g\t%.6g\t%lld\n",
              (long long)sqlite3_column_int64(st, 0), sg_rdb_double(st, 1),
              (long long)sqlite3_column_int64(st, 2), sg_rdb_double(st, 3),
              sg_rdb_double(st, 4), sg_rdb_double(st, 5),
              (long long)sqlite3_column_int64(st, 6));
      for (int c = 0; c < 2; c++) /* step, wall_s */
        if (sg_rdb_double(st, c) > xmax[c]) xmax[c] = sg_rdb_double(st, c);
      SG_TRY(zoom_value(&z[0], sg_rdb_double(st, 3)));
      SG_TRY(zoom_value(&z[1], sg_rdb_double(st, 4)));
    }
    SG_TRY(zoom_run_end(&z[0]));
    SG_TRY(zoom_run_end(&z[1]));
  }
  SG_TRY(close_data(rp, "evals.tsv", &f));
fail:
  if (f) sg_out_discard(f);
  sqlite3_finalize(st);
  return rc;
}

/* " The y axis starts at 0.81: 12 evaluations lie below it." */
static void zoom_note(char *buf, size_t len, const double lim[2], int low, const char *what) {
  if (isnan(lim[0])) buf[0] = '\0';
  else snprintf(buf, len, " The y axis %s at %.3g, where the runs end up: earlier %s lie %s it.",
                low ? "starts" : "ends", low ? lim[0] : lim[1], what, low ? "below" : "above");
}

static int fig_evals(report_t *rp) {
  const sg_rset_t *s = rp->set;
  int rc = SG_OK, nblocks = 0, *block = NULL, *titled = NULL;
  zoom_t z[2] = {{0}, {0}}; /* test accuracy, test loss */
  char note[2][160];
  series_fig_t figs[] = {
      {"acc_vs_time", "Test accuracy vs training time",
       "training wall time (s, evaluation excluded)", "test accuracy", "evals.tsv",
       "with linespoints pt 7 ps 0.5 lw 1.5", 2, 4, NULL, {NAN, NAN}, s->target, NAN},
      {"acc_vs_step", "Test accuracy vs step", "step (synchronous update)", "test accuracy",
       "evals.tsv", "with linespoints pt 7 ps 0.5 lw 1.5", 1, 4, NULL, {NAN, NAN}, s->target,
       NAN},
      {"test_loss_vs_time", "Test loss vs training time",
       "training wall time (s, evaluation excluded)", "test loss (cross-entropy)", "evals.tsv",
       "with linespoints pt 7 ps 0.5 lw 1.5", 2, 5, NULL, {NAN, NAN}, NAN, NAN},
  };
  double xmax[2] = {0, 0}; /* step, wall_s */
  block = calloc(s->n ? s->n : 1, sizeof *block);
  titled = calloc((size_t)rp->ncolors + 1, sizeof *titled);
  if (!block || !titled) {
    rc = sg_err_set(SG_ENOMEM, "report: out of memory");
    goto fail;
  }
  SG_TRY(evals_data(rp, block, &nblocks, z, xmax));
  for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) figs[k].xmax = xmax[figs[k].xcol - 1];
  if (nblocks == 0) goto fail; /* nothing to draw: rc is SG_OK */
  zoom_range(&z[0], 1, figs[0].ylim);
  if (!isnan(figs[0].ylim[1]) && figs[0].ylim[1] > 1) figs[0].ylim[1] = 1;
  memcpy(figs[1].ylim, figs[0].ylim, sizeof figs[1].ylim);
  zoom_range(&z[1], 0, figs[2].ylim);
  zoom_note(note[0], sizeof note[0], figs[0].ylim, 1, "evaluations");
  zoom_note(note[1], sizeof note[1], figs[2].ylim, 0, "evaluations");
  for (size_t k = 0; k < sizeof figs / sizeof figs[0]; k++) {
    figs[k].block = block;
    SG_TRY(series_figure(rp, &figs[k], titled));
  }
  add_fig(rp, "acc_vs_time",
          "Test accuracy vs training wall time (evaluation time excluded); "
          "dashed: the target %g.%s", s->target, note[0]);
  add_fig(rp, "acc_vs_step",
          "Test accuracy vs step (one step = one update of the model).%s", note[0]);
  add_fig(rp, "test_loss_vs_time",
          "Test loss (mean cross-entropy over the test set) vs training wall "
          "time.%s", note[1]);
fail:
  zoom_free(&z[0]);
  zoom_free(&z[1]);
  free(block);
  free(titled);
  return rc;
}

/* ---- steps: training loss vs step -------------------------------------- */

/* One smoothing window for all runs so curves are comparable: about 1/50
 * of the longest run, at most 50 steps; short runs are drawn raw. */
static int loss_window(report_t *rp, int *w) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  int64_t maxsteps = 0;
  int rc = SG_OK;
  for (size_t i = 0; i < s->n; i++)
    if (s->runs[i].last_step > maxsteps) maxsteps = s->runs[i].last_step;
  SG_TRY(sg_rdb_prepare(rp->db, "SELECT max(step) FROM steps WHERE run_id = ?1", &st));
  for (size_t i = 0; i < s->n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > maxsteps)
      maxsteps = sqlite3_column_int64(st, 0);
  }
  *w = (int)(maxsteps / 50);
  if (*w < 1) *w = 1;
  if (*w > 50) *w = 50;
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Run i's block of loss.tsv (mean loss per step and its trailing mean over
 * w steps, win: w doubles of scratch); *block = its index, -1 when the run
 * has no loss rows. */
static int loss_block(report_t *rp, sqlite3_stmt *st, FILE *f, size_t i, int w, double *win,
                      int *block, int *nblocks, zoom_t *z) {
  int k = 0;
  double sum = 0;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, rp->set->runs[i].id);
  *block = -1;
  while (sqlite3_step(st) == SQLITE_ROW) {
    double loss = sqlite3_column_double(st, 1);
    if (*block < 0) {
      *block = (*nblocks)++;
      tsv_run_block(rp, f, *block, i);
      fprintf(f, "# step\tmean_loss\tsmoothed\tranks\n");
    }
    /* trailing window: sum of the last min(k+1, w) losses */
    if (k >= w) sum -= win[k % w];
    win[k % w] = loss;
    sum += loss;
    k++;
    fprintf(f, "%lld\t%.6g\t%.6g\t%d\n", (long long)sqlite3_column_int64(st, 0), loss,
            sum / (k < w ? k : w), sqlite3_column_int(st, 2));
    SG_CHECK(zoom_value(z, sum / (k < w ? k : w)));
    if ((double)sqlite3_column_int64(st, 0) > z->xmax) z->xmax = (double)sqlite3_column_int64(st, 0);
  }
  return zoom_run_end(z);
}

static int fig_loss(report_t *rp) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  FILE *f = NULL;
  int rc = SG_OK, nblocks = 0, *block = NULL, *titled = NULL;
  double *win = NULL;
  int w = 1;
  zoom_t z = {0};
  char note[160];
  SG_TRY(loss_window(rp, &w));
  block = calloc(s->n ? s->n : 1, sizeof *block);
  titled = calloc((size_t)rp->ncolors + 1, sizeof *titled);
  win = calloc((size_t)w, sizeof *win);
  if (!block || !titled || !win) {
    rc = sg_err_set(SG_ENOMEM, "report: out of memory");
    goto fail;
  }
  SG_TRY(open_data(rp, "loss.tsv", &f));
  fprintf(f, "# training loss per step: mean over the ranks that computed one;"
             " smoothed = trailing mean over %d steps\n", w);
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT step, avg(loss), count(*) FROM steps"
                        " WHERE run_id = ?1 AND loss IS NOT NULL"
                        " GROUP BY step ORDER BY step",
                        &st));
  for (size_t i = 0; i < s->n; i++)
    SG_TRY(loss_block(rp, st, f, i, w, win, &block[i], &nblocks, &z));
  SG_TRY(close_data(rp, "loss.tsv", &f));
  if (nblocks == 0) goto fail;
  series_fig_t fig = {"loss_vs_step",
                      w > 1 ? "Training loss vs step (smoothed)" : "Training loss vs step",
                      "step", "training loss (minibatch cross-entropy)", "loss.tsv",
                      "with lines lw 1.5", 1, 3, block, {NAN, NAN}, NAN, z.xmax};
  zoom_range(&z, 0, fig.ylim);
  zoom_note(note, sizeof note, fig.ylim, 0, "steps");
  SG_TRY(series_figure(rp, &fig, titled));
  if (w > 1)
    add_fig(rp, "loss_vs_step",
            "Training loss per step: the mean over worker ranks of each "
            "rank's minibatch loss, smoothed by a trailing moving average "
            "over %d steps (raw values in loss.tsv).%s", w, note);
  else
    add_fig(rp, "loss_vs_step",
            "Training loss per step: the mean over worker ranks of each "
            "rank's minibatch loss (not smoothed).%s", note);
fail:
  if (f) sg_out_discard(f);
  sqlite3_finalize(st);
  zoom_free(&z);
  free(block);
  free(titled);
  free(win);
  return rc;
}

/* ---- throughput and scaling efficiency vs workers ---------------------- */

/* The smallest worker count above `lastn` among the runs of variant
 * `var`; INT_MAX when there is none. */
static int next_workers(const sg_rset_t *s, const char *var, int lastn) {
  int next = INT_MAX;
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->runs[i].variant, var) && s->runs[i].workers > lastn &&
        s->runs[i].workers < next)
      next = s->runs[i].workers;
  return next;
}

/* Block `blk` of scaling.tsv for the variant of run `first`: per worker
 * count the median samples/s over ok repeats, its efficiency and the
 * min-max of both.  *band: some worker count has repeats; *base_is_one
 * cleared when the smallest N is not 1.  Returns 1 when a row was
 * written. */
static int scaling_block(report_t *rp, FILE *f, int blk, size_t first, double *v, int *band,
                         int *base_is_one) {
  const sg_rset_t *s = rp->set;
  const char *var = s->runs[first].variant;
  int n0 = 0, wrote = 0;
  double thr0 = NAN;
  for (int next = next_workers(s, var, 0); next != INT_MAX;
       next = next_workers(s, var, next)) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
      if (!strcmp(s->runs[i].variant, var) && s->runs[i].workers == next &&
          !strcmp(s->runs[i].status, "ok") && !isnan(s->runs[i].samples_per_s))
        v[k++] = s->runs[i].samples_per_s;
    if (k == 0) continue;
    double thr = sg_rmedian(v, k), lo = v[0], hi = v[k - 1]; /* v sorted */
    if (k > 1) *band = 1;
    if (isnan(thr0)) {
      thr0 = thr;
      n0 = next;
      if (n0 != 1 && !is_baseline(&s->runs[first])) *base_is_one = 0;
    }
    if (!wrote) {
      tsv_block(f, blk, var);
      fputs("# workers\tsamples_per_s\tefficiency\tmin\tmax\teff_min\teff_max\n", f);
      wrote = 1;
    }
    double e = n0 / (next * thr0);
    fprintf(f, "%d\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\n", next, thr, thr * e, lo, hi,
            lo * e, hi * e);
  }
  return wrote;
}

/* Scaling efficiency over the throughput figure's blocks (blk: block ->
 * its first run; band: the block has repeats).  The baseline is one
 * process whatever N says (it runs the global batch N*b), so it has
 * throughput but no scaling efficiency. */
static int fig_efficiency(report_t *rp, const size_t *blk, const int *band, int nblocks,
                          int base_is_one) {
  const sg_rset_t *s = rp->set;
  FILE *gp = NULL;
  int rc = SG_OK, neff = 0;
  for (int b = 0; b < nblocks; b++)
    if (!is_baseline(&s->runs[blk[b]])) neff++;
  if (!neff) return SG_OK;
  SG_TRY(sg_plot_begin(&gp, rp->dir, "efficiency",
                       base_is_one ? "Scaling efficiency: thr(N) / (N * thr(1))"
                                   : "Scaling efficiency: thr(N) * N0 / (N * thr(N0))"));
  axis_labels(gp, "workers N", "scaling efficiency (1 = linear)");
  fputs("set logscale x 2\nset xtics 2\nset yrange [0:*]\nplot \\\n", gp);
  for (int b = 0; b < nblocks; b++) {
    if (is_baseline(&s->runs[blk[b]])) continue;
    if (band[b]) series_band(gp, "scaling.tsv", b, 6, rp->vcolor[blk[b]]);
    fprintf(gp, "  'scaling.tsv' index %d using 1:3 with linespoints pt 7 lw 1.5 ", b);
    plot_color(gp, rp->vcolor[blk[b]]);
    sg_plot_title(gp, s->runs[blk[b]].variant);
    fprintf(gp, ", \\\n");
  }
  fputs("  1 with lines dt 2 lc rgb '#606060' title 'linear'\n", gp);
  SG_TRY(sg_plot_end(&gp, rp->dir, "efficiency"));
  if (base_is_one)
    add_fig(rp, "efficiency",
            "Scaling efficiency per variant: throughput(N) / (N * "
            "throughput(1)); 1 is linear scaling; band: min to max over repeats.");
  else
    add_fig(rp, "efficiency",
            "Scaling efficiency per variant: throughput(N) * N0 / (N * "
            "throughput(N0)), N0 = the smallest worker count measured for the "
            "variant (1 when measured); 1 is linear; band: min to max over repeats.");
fail:
  if (gp) sg_out_discard(gp);
  return rc;
}

static int fig_scaling(report_t *rp) {
  const sg_rset_t *s = rp->set;
  FILE *f = NULL, *gp = NULL;
  int rc = SG_OK, nblocks = 0, base_is_one = 1;
  double *v = NULL;
  size_t *first = NULL, *blk = NULL, nvar = 0; /* blk: block -> a run */
  int *band = NULL; /* block has a worker count with more than one repeat */
  if (!s->workers_vary) return SG_OK;
  v = calloc(s->n, sizeof *v);
  first = calloc(s->n, sizeof *first);
  blk = calloc(s->n, sizeof *blk);
  band = calloc(s->n, sizeof *band);
  if (!v || !first || !blk || !band) {
    rc = sg_err_set(SG_ENOMEM, "report: out of memory");
    goto fail;
  }
  /* distinct variants, in order of first appearance */
  for (size_t i = 0; i < s->n; i++) {
    size_t j = 0;
    while (j < nvar && strcmp(s->runs[first[j]].variant, s->runs[i].variant)) j++;
    if (j == nvar) first[nvar++] = i;
  }
  SG_TRY(open_data(rp, "scaling.tsv", &f));
  fprintf(f, "# median samples/s over ok repeats per worker count; efficiency ="
             " thr(N) * N0 / (N * thr(N0)), N0 = smallest N measured (1 when"
             " present)\n");
  SG_TRY(sg_plot_begin(&gp, rp->dir, "throughput", "Training throughput vs workers"));
  axis_labels(gp, "workers N", "samples/s");
  fputs("set logscale x 2\nset xtics 2\nset yrange [0:*]\nplot \\\n", gp);
  for (size_t j = 0; j < nvar; j++) {
    const char *var = s->runs[first[j]].variant;
    if (!scaling_block(rp, f, nblocks, first[j], v, &band[nblocks], &base_is_one)) continue;
    if (band[nblocks]) series_band(gp, "scaling.tsv", nblocks, 4, rp->vcolor[first[j]]);
    fprintf(gp, "  'scaling.tsv' index %d using 1:2 with linespoints pt 7 lw 1.5 ",
            nblocks);
    plot_color(gp, rp->vcolor[first[j]]);
    sg_plot_title(gp, var);
    fprintf(gp, ", \\\n");
    blk[nblocks++] = first[j];
  }
  fprintf(gp, "  NaN notitle\n");
  SG_TRY(close_data(rp, "scaling.tsv", &f));
  if (nblocks == 0) { /* no ok run has throughput: drop the script */
    sg_out_discard(gp);
    gp = NULL;
    SG_TRY(sg_out_unlink(rp->dir, "throughput.gp"));
    goto fail;
  }
  SG_TRY(sg_plot_end(&gp, rp->dir, "throughput"));

  add_fig(rp, "throughput",
          "Training throughput (samples/s, median over repeats; the shaded band "
          "spans min to max where a variant has repeats) vs workers; samples/s: every worker's samples from the first evaluation period on over the wall-clock span of those steps.");
  SG_TRY(fig_efficiency(rp, blk, band, nblocks, base_is_one));
fail:
  if (gp) sg_out_discard(gp);
  if (f) sg_out_discard(f);
  free(v);
  free(first);
  free(blk);
  free(band);
  return rc;
}

/* ---- stacked compute / communication / waiting per step ---------------- */

/* Run i starts a bar when it is the first run of its label and some run
 * of the label has step times: their means over repeats into t[3]
 * (compute, communication, waiting); the label into lab. */
static int breakdown_bar(report_t *rp, size_t i, double t[3], char *lab, size_t len) {
  const sg_rset_t *s = rp->set;
  char b[512];
  int k = 0;
  label(rp, i, lab, len);
  for (size_t j = 0; j < i; j++)
    if (!strcmp(lab, label(rp, j, b, sizeof b))) return 0;
  t[0] = t[1] = t[2] = 0;
  for (size_t j = i; j < s->n; j++) {
    const sg_rrun_t *r = &s->runs[j];
    if (strcmp(lab, label(rp, j, b, sizeof b)) || isnan(r->compute_s)) continue;
    t[0] += r->compute_s;
    t[1] += isnan(r->comm_s) ? 0 : r->comm_s;
    t[2] += isnan(r->wait_s) ? 0 : r->wait_s;
    k++;
  }
  for (int c = 0; c < 3; c++) t[c] /= k ? k : 1;
  return k > 0;
}

/* One stacked bar: seconds per step split three ways, and its label. */
typedef struct sbar {
  double t[3]; /* compute, communication, waiting */
  char lab[512];
  size_t run; /* its first run: the key */
} sbar_t;

/* Write `file` (seconds, one row per bar) and draw figure `name` from it:
 * horizontal bars stacked compute / communication / waiting, in
 * milliseconds, the first bar on top, each labelled with its key and its
 * label (shortened) to the left, where text reads without turning. */
static int draw_stacked(report_t *rp, const char *name, const char *file,
                        const char *title, const char *xlabel, const char *head,
                        const char *const parts[3], const sbar_t *bars, int n) {
  FILE *f = NULL, *gp = NULL;
  int rc = SG_OK;
  char t[320];
  static const char *const colors[3] = {"#1f77b4", "#ff7f0e", "#9aa0a6"};
  SG_TRY(open_data(rp, file, &f));
  fputs("# ", f);
  sg_plot_data_text(f, head);
  fputs("\n# bar\tcompute_s\tcomm_s\twait_s\tvariant\n", f);
  for (int b = 0; b < n; b++) {
    fprintf(f, "%d\t%.6g\t%.6g\t%.6g\t", b, bars[b].t[0], bars[b].t[1], bars[b].t[2]);
    sg_plot_data_text(f, bars[b].lab);
    fputc('\n', f);
  }
  SG_TRY(close_data(rp, file, &f));
  SG_TRY(sg_plot_begin_size(&gp, rp->dir, name, title, 1000, n > 16 ? 150 + 26 * n : 560));
  sg_plot_set_text(gp, "xlabel", xlabel);
  /* bar b stands at y = b; its label is a tick written here, quoted */
  fputs("unset ylabel\nset ytics (", gp);
  for (int b = 0; b < n; b++) {
    fputs(b ? ", " : "", gp);
    sg_plot_quote(gp, key_label(rp, bars[b].run, 44, t, sizeof t));
    fprintf(gp, " %d", b);
  }
  fprintf(gp, ") scale 0 noenhanced\n"
              "set yrange [%g:-0.6]\nset xrange [0:*]\n"
              "set style fill solid 0.85 border -1\n"
              "set format x '%%g'\nset mxtics 2\nset grid xtics noytics\n"
              "set border 1\nset key outside right top vertical Left reverse\n"
              "plot ",
          n - 0.4);
  /* box b, part c: from the sum of the parts before it, the part's width */
  static const char *const using[3] = {
      "using ($2*500):1:($2*500):(0.32)",
      "using (($2+$3/2)*1000):1:($3*500):(0.32)",
      "using (($2+$3+$4/2)*1000):1:($4*500):(0.32)"};
  for (int c = 0; c < 3; c++) {
    if (c) fputs(", \\\n     ", gp);
    sg_plot_quote(gp, file);
    fprintf(gp, " %s with boxxyerror lc rgb ", using[c]);
    sg_plot_quote(gp, colors[c]);
    sg_plot_title(gp, parts[c]);
  }
  fputc('\n', gp);
  SG_TRY(sg_plot_end(&gp, rp->dir, name));
fail:
  if (gp) sg_out_discard(gp);
  if (f) sg_out_discard(f);
  return rc;
}

/* " [sim]" in a figure's title when some run of the set was simulated. */
static const char *vsn_sim_tag(const sg_rset_t *s) {
  for (size_t i = 0; i < s->n; i++)
    if (!strcmp(s->runs[i].launcher, "smpirun")) return " [sim]";
  return "";
}

static int fig_breakdown(report_t *rp) {
  static const char *const parts[3] = {"compute", "communication", "waiting"};
  sbar_t *bars = calloc(rp->set->n ? rp->set->n : 1, sizeof *bars);
  int rc = SG_OK, n = 0;
  if (!bars) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < rp->set->n; i++) {
    bars[n].run = i;
    n += breakdown_bar(rp, i, bars[n].t, bars[n].lab, sizeof bars[n].lab);
  }
  char title[64];
  snprintf(title, sizeof title, "Where a step's time goes (worker ranks)%s",
           vsn_sim_tag(rp->set));
  if (n) {
    SG_TRY(draw_stacked(rp, "time_breakdown", "breakdown.tsv", title,
                        "ms per step (worker mean)",
                        "mean seconds per step over worker ranks, mean over repeats;"
                        " the figure shows milliseconds",
                        parts, bars, n));
    add_fig(rp, "time_breakdown",
            "Mean milliseconds per step on worker ranks, split into compute "
            "(gradient and optimizer), communication (time in transport calls) "
            "and waiting (barriers, staleness bound); mean over repeats.");
  }
fail:
  free(bars);
  return rc;
}

/* ---- the servers and the driver: their time per step ------------------- */

/* Mean compute/comm/wait per step record of the server and driver ranks
 * of run `id` into t[3]; 0 when the run has none. */
static int server_means(sqlite3_stmt *st, int64_t id, double t[3]) {
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) != SQLITE_ROW || sqlite3_column_int64(st, 3) == 0) return 0;
  for (int c = 0; c < 3; c++) t[c] = sg_rdb_double(st, c);
  return 1;
}

static int fig_server(report_t *rp) {
  static const char *const parts[3] = {"busy (apply updates)", "communication",
                                       "waiting for workers"};
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  sbar_t *bars = calloc(s->n ? s->n : 1, sizeof *bars);
  int rc = SG_OK, n = 0;
  char b[512];
  if (!bars) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT avg(compute_s), avg(comm_s), avg(wait_s), count(*)"
                        " FROM steps WHERE run_id = ?1 AND kind = 'hub'"
                        " AND step > 0",
                        &st));
  /* Step 0 is left out: a ps server's first record holds the start
   * barrier (waiting for every worker's first pull, seconds while N
   * processes start), which would swamp the mean of a short run.
   * One bar per label (the first run of it), mean over its repeats. */
  for (size_t i = 0; i < s->n; i++) {
    sbar_t *bar = &bars[n];
    int k = 0, dup = 0;
    double t[3];
    label(rp, i, bar->lab, sizeof bar->lab);
    bar->run = i;
    for (size_t j = 0; j < i && !dup; j++) dup = !strcmp(bar->lab, label(rp, j, b, sizeof b));
    memset(bar->t, 0, sizeof bar->t);
    for (size_t j = i; j < s->n && !dup; j++) {
      if (strcmp(bar->lab, label(rp, j, b, sizeof b)) || !server_means(st, s->runs[j].id, t))
        continue;
      for (int c = 0; c < 3; c++) bar->t[c] += isnan(t[c]) ? 0 : t[c];
      k++;
    }
    if (dup || !k) continue;
    for (int c = 0; c < 3; c++) bar->t[c] /= k;
    n++;
  }
  if (n) {
    SG_TRY(draw_stacked(rp, "server_time", "server_time.tsv",
                        "Where the servers' and the driver's time goes",
                        "ms per step record (server/driver mean)",
                        "mean seconds per step record over the ps server and mapreduce"
                        " driver ranks (kind hub) from step 1 on, mean over repeats",
                        parts, bars, n));
    add_fig(rp, "server_time",
            "PS servers and mapreduce driver, ms per step record (ps: one per "
            "sync step or per N updates): busy = applying updates and building "
            "replies; communication = in send/recv (driver: broadcast, tasks, "
            "reduce); waiting = idle until a worker or executor message arrives. "
            "Step 0 (start barrier) left out.");
  }
fail:
  sqlite3_finalize(st);
  free(bars);
  return rc;
}

/* ---- the servers and the driver over time ------------------------------ */

/* Block `block` of server_timeline.tsv: run `id`'s server and driver step
 * records from step 1 on, per step the mean over those ranks of its start
 * and its busy/communication/waiting seconds; *wrote = rows written. */
static int timeline_block(sqlite3_stmt *st, FILE *f, int block, const char *lab, int64_t id,
                          int *wrote, zoom_t *z) {
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, id);
  *wrote = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!*wrote) {
      fprintf(f, "%s# ", block ? "\n\n" : "");
      sg_plot_data_text(f, lab);
      fputs("\n# t_s\tbusy_ms\tcomm_ms\twait_ms\n", f);
    }
    fprintf(f, "%.6f\t%.6f\t%.6f\t%.6f\n", sg_rdb_double(st, 0), sg_rdb_double(st, 1) * 1e3,
            sg_rdb_double(st, 2) * 1e3, sg_rdb_double(st, 3) * 1e3);
    for (int c = 1; c <= 3; c++) { /* every value: timeline_zoom */
      double v = sg_rdb_double(st, c) * 1e3;
      if (isnan(v)) continue;
      if (!z->total++ || v > z->max) z->max = v;
      SG_CHECK(push(&z->late, &z->nlate, &z->caplate, v));
    }
    (*wrote)++;
  }
  return SG_OK;
}

/* busy, communication, waiting: the colors of the stacked bars */
static const char *const part_color[3] = {"#1f77b4", "#ff7f0e", "#7f7f7f"};

/* The three lines of one block: busy, communication, waiting. */
static void timeline_series(FILE *gp, int block, int titled) {
  static const char *const part[3] = {"busy", "communication", "waiting"};
  for (int c = 2; c >= 0; c--) { /* waiting, the largest, behind */
    fprintf(gp, "  'server_timeline.tsv' index %d using 1:%d with lines lw 1.2 lc rgb ", block,
            c + 2);
    sg_plot_quote(gp, part_color[c]);
    if (titled) sg_plot_title(gp, part[c]);
    else fputs(" notitle", gp);
    fputs(c > 0 ? ", \\\n" : "\n", gp);
  }
}

/* The y axis ends at the 99th percentile of every value plus a margin when
 * rarer spikes would squash the rest; the note says so. */
static void timeline_zoom(zoom_t *z, double *top, char *note, size_t len) {
  *top = NAN;
  note[0] = '\0';
  if (z->nlate < 20) return;
  qsort(z->late, z->nlate, sizeof *z->late, cmp_double);
  double p99 = z->late[z->nlate - 1 - z->nlate / 100];
  if (!(z->max > 1.5 * p99) || p99 <= 0) return;
  *top = 1.2 * p99;
  snprintf(note, len, " The y axis ends at %.3g ms (1.2 x the 99th percentile): rarer spikes, up to "
           "%.3g ms, run off the top.", *top, z->max);
}

/* One panel per variant (one plot when there is one): blocks[b] is the
 * first run of block b. */
static int timeline_plot(report_t *rp, const size_t *blocks, int nblocks, double top) {
  FILE *gp = NULL;
  int rc = SG_OK, rows = 1, cols = 1, w = 1000, h = 560;
  char t[320];
  static const char *const title = "The servers' and the driver's time per step, over the run";
  if (nblocks > 1) grid(nblocks, &rows, &cols, &w, &h);
  SG_TRY(sg_plot_begin_size(&gp, rp->dir, "server_timeline", title, w, h));
  fputs("set tics font ',9'\n", gp);
  /* one key for every panel, in the figure's bottom right corner */
  if (nblocks > 1) fputs("set key at screen 0.995,0.005 bottom right horizontal maxrows 1 samplen 2 font ',9'\n", gp);
  else fputs("set key inside top right horizontal\n", gp);
  if (isnan(top)) fputs("set yrange [0:*]\n", gp);
  else fprintf(gp, "set yrange [0:%.6g]\n", top);
  if (nblocks > 1) {
    sg_plot_multi_begin(gp, "server_timeline", w, h, rows, cols, title);
    shared_axis_labels(gp, "seconds since the run started (step start)", "ms per step record",
                       w, h);
  } else {
    axis_labels(gp, "seconds since the run started (step start)", "ms per step record");
  }
  for (int b = 0; b < nblocks; b++) {
    key_label(rp, blocks[b], PANEL_CHARS, t, sizeof t);
    if (nblocks > 1) {
      panel_title(gp, t);
    } else { /* one variant: the figure's title names it */
      char one[400];
      snprintf(one, sizeof one, "%s: %s", title, t);
      sg_plot_set_text(gp, "title", one);
    }
    fputs("plot \\\n", gp);
    timeline_series(gp, b, b == 0);
    if (b == 0 && nblocks > 1) fputs("unset key\nunset label 101\nunset label 102\n", gp);
  }
  if (nblocks > 1) SG_TRY(sg_plot_multi_end(&gp, rp->dir, "server_timeline"));
  else SG_TRY(sg_plot_end(&gp, rp->dir, "server_timeline"));
fail:
  if (gp) sg_out_discard(gp);
  return rc;
}

static int fig_server_timeline(report_t *rp) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  FILE *f = NULL;
  int rc = SG_OK, nblocks = 0;
  char lab[512], b[512], note[200];
  size_t *blocks = calloc(s->n ? s->n : 1, sizeof *blocks);
  zoom_t z = {0};
  double top;
  if (!blocks) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT avg(t_start), avg(compute_s), avg(comm_s), avg(wait_s) FROM steps"
                        " WHERE run_id = ?1 AND kind = 'hub' AND step > 0"
                        " GROUP BY step ORDER BY step",
                        &st));
  for (size_t i = 0; i < s->n; i++) { /* one block per label: its first run with rows */
    int dup = 0, wrote = 0;
    label(rp, i, lab, sizeof lab);
    for (size_t j = 0; j < i && !dup; j++) dup = !strcmp(lab, label(rp, j, b, sizeof b));
    if (dup) continue;
    if (!f) SG_TRY(open_data(rp, "server_timeline.tsv", &f));
    SG_TRY(timeline_block(st, f, nblocks, lab, s->runs[i].id, &wrote, &z));
    if (wrote) blocks[nblocks++] = i;
  }
  if (f) SG_TRY(close_data(rp, "server_timeline.tsv", &f));
  if (!nblocks) { /* no server or driver rows: no figure, no data file */
    SG_TRY(sg_out_unlink(rp->dir, "server_timeline.tsv"));
    goto fail;
  }
  timeline_zoom(&z, &top, note, sizeof note);
  SG_TRY(timeline_plot(rp, blocks, nblocks, top));
  add_fig(rp, "server_timeline",
          "PS servers and mapreduce driver over the run, one panel per variant (its first "
          "run): per step record (from step 1), the mean over those ranks of busy (applying "
          "updates, building replies), communication and waiting for workers or executors, "
          "in ms, at the step's start time.%s", note);
fail:
  sqlite3_finalize(st);
  if (f) sg_out_discard(f);
  zoom_free(&z);
  free(blocks);
  return rc;
}

/* ---- bytes per step vs workers ----------------------------------------- */

/* Block of bytes_vs_workers.tsv for variant `var`: per worker count the
 * median, min and max over ok repeats of the busiest rank's bytes per
 * step.  *wrote: the block has a row. */
static int bytes_block(report_t *rp, FILE *f, int blk, const char *var, double *v,
                       int *wrote) {
  const sg_rset_t *s = rp->set;
  *wrote = 0;
  for (int next = next_workers(s, var, 0); next != INT_MAX;
       next = next_workers(s, var, next)) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
      const sg_rrun_t *r = &s->runs[i];
      if (!strcmp(r->variant, var) && r->workers == next && !strcmp(r->status, "ok") &&
          !isnan(r->bytes_per_step) && !r->bytes_in_mpi)
        v[k++] = r->bytes_per_step;
    }
    if (!k) continue;
    double med = sg_rmedian(v, k);
    if (!*wrote) {
      tsv_block(f, blk, var);
      fputs("# workers\tbytes_median\tbytes_min\tbytes_max\n", f);
      *wrote = 1;
    }
    fprintf(f, "%d\t%.6g\t%.6g\t%.6g\n", next, med, v[0], v[k - 1]);
  }
  return SG_OK;
}

static int fig_bytes(report_t *rp) {
  const sg_rset_t *s = rp->set;
  FILE *f = NULL, *gp = NULL;
  int rc = SG_OK, nblocks = 0;
  double *v = calloc(s->n ? s->n : 1, sizeof *v);
  if (!v) return sg_err_set(SG_ENOMEM, "report: out of memory");
  if (!s->workers_vary) goto fail;
  SG_TRY(open_data(rp, "bytes_vs_workers.tsv", &f));
  fprintf(f, "# busiest rank's bytes per step (sent + received, mean over its"
             " step rows), median/min/max over ok repeats per worker count\n");
  SG_TRY(sg_plot_begin(&gp, rp->dir, "bytes_vs_workers",
                       "Bytes per step on the busiest rank vs workers"));
  axis_labels(gp, "workers N", "bytes per step, busiest rank (sent + received)");
  /* binary units like the tables; ticks a power of two apart (about six),
   * one decimal, so that no two ticks print the same text */
  fputs("set logscale x 2\nset xtics 2\nset yrange [0:*]\n"
        "stats 'bytes_vs_workers.tsv' using 4 nooutput\n"
        "if (STATS_max > 0) { set ytics 2**ceil(log(STATS_max / 6.0) / log(2)) }\n"
        "set format y '%.1b %BB'\nplot \\\n",
        gp);
  for (size_t i = 0; i < s->n; i++) {
    int wrote = 0, dup = 0;
    for (size_t j = 0; j < i && !dup; j++) dup = !strcmp(s->runs[j].variant, s->runs[i].variant);
    /* local is one process: nothing crosses a transport */
    if (dup || is_baseline(&s->runs[i])) continue;
    SG_TRY(bytes_block(rp, f, nblocks, s->runs[i].variant, v, &wrote));
    if (!wrote) continue;
    series_band(gp, "bytes_vs_workers.tsv", nblocks, 3, rp->vcolor[i]);
    fprintf(gp, "  'bytes_vs_workers.tsv' index %d using 1:2 with linespoints pt 7 lw 1.5 ",
            nblocks++);
    plot_color(gp, rp->vcolor[i]);
    sg_plot_title(gp, s->runs[i].variant);
    fputs(", \\\n", gp);
  }
  fputs("  NaN notitle\n", gp);
  SG_TRY(close_data(rp, "bytes_vs_workers.tsv", &f));
  if (!nblocks) { /* nothing to draw: drop the script */
    sg_out_discard(gp);
    gp = NULL;
    SG_TRY(sg_out_unlink(rp->dir, "bytes_vs_workers.gp"));
    goto fail;
  }
  SG_TRY(sg_plot_end(&gp, rp->dir, "bytes_vs_workers"));
  add_fig(rp, "bytes_vs_workers",
          "Busiest rank's bytes per step (sent + received) vs workers N, median "
          "and min-max over repeats. For K model bytes: ring 4K(N-1)/N per rank "
          "(2K(N-1)/N each way, flat in N), one ps server 2NK (grows with N). "
          "allreduce native not drawn: MPI moves its bytes.");
fail:
  if (gp) sg_out_discard(gp);
  if (f) sg_out_discard(f);
  free(v);
  return rc;
}

/* ---- allreduce benchmark: time and busbw vs size ----------------------- */

/* "4 KiB", "1 MiB": a message size for a tick label. */
static void size_label(char *buf, size_t len, long long b) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)b;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  snprintf(buf, len, "%g %s", v, units[u]);
}

/* The distinct allreduce message sizes of the experiment's bench rows,
 * ascending, at most cap of them. */
static int bench_sizes(report_t *rp, long long *sizes, int cap, int *n) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  char ids[SG_RSET_MAX_EXP * 24];
  *n = 0;
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT DISTINCT bytes FROM bench WHERE experiment_id IN"
                        " (SELECT value FROM json_each(?1))"
                        " AND collective = 'allreduce' AND bytes > 0 ORDER BY bytes",
                        &st));
  sqlite3_bind_text(st, 1, sg_rset_ids_json(rp->set, ids, sizeof ids), -1,
                    SQLITE_TRANSIENT);
  while (*n < cap && sqlite3_step(st) == SQLITE_ROW)
    sizes[(*n)++] = sqlite3_column_int64(st, 0);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* `set xtics ('4 KiB' 4096, ...)`: ticks at the measured sizes, every
 * k-th when there are many so labels do not collide. */
static void size_tics(FILE *gp, const long long *sizes, int n) {
  char lab[32];
  fputs("set xtics (", gp);
  for (int i = 0, every = n / 12 + 1; i < n; i += every) {
    size_label(lab, sizeof lab, sizes[i]);
    fputs(i ? ", " : "", gp);
    sg_plot_quote(gp, lab);
    fprintf(gp, " %lld", sizes[i]);
  }
  fputs(")\n", gp);
}

/* The two bench figures, time and bus bandwidth, opened on the first block */
static const char *const bench_names[2] = {"allreduce_time", "allreduce_busbw"};

static int bench_plots_begin(report_t *rp, FILE **gp, const long long *sizes, int nsizes) {
  int rc = SG_OK;
  SG_TRY(sg_plot_begin(&gp[0], rp->dir, bench_names[0],
                       "Allreduce time vs message size (median, min-max bars)"));
  SG_TRY(sg_plot_begin(&gp[1], rp->dir, bench_names[1],
                       "Allreduce bus bandwidth vs message size"));
  /* sizes span decades: log-log, ticks at the measured sizes */
  for (int k = 0; k < 2; k++) {
    fputs("set logscale x 2\nset logscale y 10\n", gp[k]);
    size_tics(gp[k], sizes, nsizes);
  }
  axis_labels(gp[0], "message size", "time per allreduce (s)");
  fputs("set format y '%.0s %cs'\nplot \\\n", gp[0]);
  axis_labels(gp[1], "message size", "bus bandwidth (GB/s)");
  fputs("plot \\\n", gp[1]);
fail:
  return rc;
}

/* A new impl/transport/np: its bench.tsv block header and one series in
 * each figure */
static void bench_block(FILE *f, FILE **gp, int blk, const char *key) {
  tsv_block(f, blk, key);
  fputs("# bytes\tt_median\tt_min\tt_max\talgbw\tbusbw\twrong\n", f);
  fprintf(gp[0], "  'bench.tsv' index %d using 1:2:3:4 with yerrorlines pt 7 lw 1.5 ", blk);
  fprintf(gp[1], "  'bench.tsv' index %d using 1:6 with linespoints pt 7 lw 1.5 ", blk);
  for (int k = 0; k < 2; k++) {
    plot_color(gp[k], blk);
    sg_plot_title(gp[k], key);
    fputs(", \\\n", gp[k]);
  }
}

/* The captions of the two bench figures, for summary.md and index.html */
static void bench_captions(report_t *rp) {
  add_fig(rp, "allreduce_time",
          "Allreduce time per call vs message size (log-log): median over "
          "timed iterations, bars from min to max, per implementation, "
          "transport and worker count N (ps-S* adds S server processes, "
          "mapreduce-* a driver).");
  add_fig(rp, "allreduce_busbw",
          "Allreduce bus bandwidth vs message size: busbw = bytes / time * "
          "2(N-1)/N, comparable to the link bandwidth (nccl-tests' "
          "definition).  ps-S* (push + pull through S servers) and "
          "mapreduce-* (driver broadcast + reduce) use the same formula, so "
          "their busbw is allreduce-equivalent bandwidth, not the bytes on "
          "their busiest link (a server's or the driver's link carries "
          "about 2*N*bytes/S or 2*N*bytes); N = workers, their extra "
          "processes not counted.");
}

static int fig_bench(report_t *rp) {
  sqlite3_stmt *st = NULL;
  FILE *f = NULL, *gp[2] = {NULL, NULL};
  int rc = SG_OK, nblocks = 0, nsizes = 0;
  long long sizes[256];
  char prev[512] = "", ids[SG_RSET_MAX_EXP * 24];
  if (rp->single_run) return SG_OK;
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT impl, transport, np, bytes, t_median, t_min,"
                        " t_max, algbw, busbw, wrong, experiment_id FROM bench"
                        " WHERE experiment_id IN (SELECT value FROM json_each(?1))"
                        " AND collective = 'allreduce'"
                        " ORDER BY experiment_id, impl, transport, np, bytes",
                        &st));
  sqlite3_bind_text(st, 1, sg_rset_ids_json(rp->set, ids, sizeof ids), -1,
                    SQLITE_TRANSIENT);
  SG_TRY(bench_sizes(rp, sizes, 256, &nsizes));
  SG_TRY(open_data(rp, "bench.tsv", &f));
  fprintf(f, "# allreduce benchmark, one block per impl/transport/np;"
             " times in seconds, bandwidths in GB/s\n");
  while (sqlite3_step(st) == SQLITE_ROW) {
    char key[512], exp[32] = "";
    if (rp->set->nexp > 1) /* several experiments: whose bench this is */
      snprintf(exp, sizeof exp, "#%lld ", (long long)sqlite3_column_int64(st, 10));
    snprintf(key, sizeof key, "%s%s/%s np=%d", exp, sg_rdb_text(st, 0),
             sg_rdb_text(st, 1), sqlite3_column_int(st, 2));
    if (strcmp(key, prev)) {
      if (nblocks == 0) SG_TRY(bench_plots_begin(rp, gp, sizes, nsizes));
      bench_block(f, gp, nblocks, key);
      snprintf(prev, sizeof prev, "%s", key);
      nblocks++;
    }
    fprintf(f, "%lld\t%.6g\t%.6g\t%.6g\t%.6g\t%.6g\t%lld\n",
            (long long)sqlite3_column_int64(st, 3), sg_rdb_double(st, 4),
            sg_rdb_double(st, 5), sg_rdb_double(st, 6), sg_rdb_double(st, 7),
            sg_rdb_double(st, 8), (long long)sqlite3_column_int64(st, 9));
  }
  SG_TRY(close_data(rp, "bench.tsv", &f));
  if (!nblocks) goto fail;
  for (int k = 0; k < 2; k++) {
    fprintf(gp[k], "  NaN notitle\n");
    SG_TRY(sg_plot_end(&gp[k], rp->dir, bench_names[k]));
  }
  bench_captions(rp);
fail:
  for (int k = 0; k < 2; k++)
    if (gp[k]) sg_out_discard(gp[k]);
  if (f) sg_out_discard(f);
  sqlite3_finalize(st);
  return rc;
}

/* ---- staleness histogram (async / ssp) --------------------------------- */

/* The staleness histogram (fractions of STALENESS_BINS bins) of the label
 * of run `first`, its repeats pooled; *top = the highest bin used.
 * Whether to draw it: a synchronous variant that records staleness 0
 * says nothing here. */
static int staleness_hist(report_t *rp, sqlite3_stmt *st, size_t first, double *h, int *top) {
  const sg_rset_t *s = rp->set;
  double total = 0;
  int any_pos = 0;
  char a[512], b[512];
  label(rp, first, a, sizeof a);
  for (size_t i = first; i < s->n; i++) {
    if (!s->runs[i].has_staleness || strcmp(a, label(rp, i, b, sizeof b))) continue;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    while (sqlite3_step(st) == SQLITE_ROW) {
      int64_t v = sqlite3_column_int64(st, 0);
      int bin = v < 0 ? 0 : v >= STALENESS_BINS - 1 ? STALENESS_BINS - 1 : (int)v;
      h[bin] += sqlite3_column_double(st, 1);
      total += sqlite3_column_double(st, 1);
      if (bin > *top) *top = bin;
      if (v > 0) any_pos = 1;
    }
  }
  int keep = total > 0 && (any_pos || s->runs[first].stale); /* the engine table's flag */
  for (int k = 0; keep && k < STALENESS_BINS; k++) h[k] /= total;
  return keep;
}

/* Pass 2 of fig_staleness: the data file and the script, one block per
 * kept label (nblocks of them). */
/* Where the staleness axis ends: the largest 99th percentile over the
 * kept labels (at least 2); values above it are drawn as one bar. */
static int staleness_cut(const double *hist, const int *keep, size_t nlab) {
  int cut = 2;
  for (size_t j = 0; j < nlab; j++) {
    double cum = 0;
    int k = 0;
    if (!keep[j]) continue;
    while (k < STALENESS_BINS - 1 && (cum += hist[j * STALENESS_BINS + k]) < 0.99) k++;
    if (k > cut) cut = k;
  }
  return cut;
}

/* Label j's block of staleness.tsv: the fraction per value and the bar
 * drawn for it (values above cut summed into bar cut + 1); *beyond = that
 * sum. */
static void staleness_block(FILE *f, const double *h, int top, int cut, double *beyond) {
  fputs("# staleness\tfraction\tdrawn\n", f);
  *beyond = 0;
  for (int k = cut + 1; k <= top; k++) *beyond += h[k];
  for (int k = 0; k <= top; k++) {
    double drawn = k <= cut ? h[k] : k == cut + 1 ? *beyond : NAN;
    fprintf(f, "%d\t%.6g\t", k, h[k]);
    if (isnan(drawn)) fputs("nan\n", f);
    else fprintf(f, "%.6g\n", drawn);
  }
}

/* The axis and, when the tail is cut, its tick and a note in the plot. */
static void staleness_axis(FILE *gp, int maxbin, int cut, double beyond, double bw) {
  char note[128];
  int clip = maxbin > cut + 1;
  int last = clip ? cut + 1 : maxbin;
  fprintf(gp, "set yrange [0:*]\nset xrange [-0.6:%g]\n"
              "set style fill solid 0.7 border -1\n"
              "set boxwidth %g absolute\n",
          last + 0.6, bw);
  if (last <= 24) fputs("set xtics 1\n", gp);
  if (!clip) return;
  snprintf(note, sizeof note, "> %d", cut);
  fputs("set xtics add (", gp);
  sg_plot_quote(gp, note);
  fprintf(gp, " %d)\nset label 1 ", cut + 1);
  snprintf(note, sizeof note, "last bar: staleness > %d, %.2g%% of steps (up to %d%s)", cut,
           beyond * 100, maxbin, maxbin == STALENESS_BINS - 1 ? " or more" : "");
  sg_plot_quote(gp, note);
  fputs(" at graph 0.98,0.95 right noenhanced\n", gp);
}

/* Pass 2 of fig_staleness: the data file and the script, one block per
 * kept label (nblocks of them). */
static int staleness_plot(report_t *rp, const size_t *first, size_t nlab, const double *hist,
                          const int *top, const int *keep, int maxbin, int nblocks) {
  FILE *f = NULL, *gp = NULL;
  int rc = SG_OK, cut = staleness_cut(hist, keep, nlab);
  char a[256];
  double bw = 0.8 / nblocks, beyond, most = 0;
  SG_TRY(open_data(rp, "staleness.tsv", &f));
  fprintf(f, "# fraction of worker steps per staleness value, one block per"
             " variant (repeats pooled); the last bin holds >= %d; drawn: the figure's"
             " bars (above %d summed into one)\n",
          STALENESS_BINS - 1, cut);
  SG_TRY(sg_plot_begin(&gp, rp->dir, "staleness",
                       "Staleness of the parameters each gradient was computed on"));
  axis_labels(gp, "staleness (updates applied since the worker's pull)",
              "fraction of worker steps");
  fputs("set key inside right center vertical Right noreverse\n", gp);
  for (size_t j = 0; j < nlab; j++) {
    double b = 0;
    for (int k = cut + 1; keep[j] && k <= top[j]; k++) b += hist[j * STALENESS_BINS + k];
    if (b > most) most = b;
  }
  staleness_axis(gp, maxbin, cut, most, bw);
  fprintf(gp, "plot \\\n");
  nblocks = 0;
  for (size_t j = 0; j < nlab; j++) {
    if (!keep[j]) continue;
    label(rp, first[j], a, sizeof a);
    tsv_block(f, nblocks, a);
    staleness_block(f, hist + j * STALENESS_BINS, top[j], cut, &beyond);
    fprintf(gp, "  'staleness.tsv' index %d using ($1 - 0.4 + %g):3 with boxes ",
            nblocks, bw * (nblocks + 0.5));
    plot_color(gp, rp->color[first[j]]);
    sg_plot_title(gp, key_label(rp, first[j], 40, a, sizeof a));
    fputs(", \\\n", gp);
    nblocks++;
  }
  fprintf(gp, "  NaN notitle\n");
  SG_TRY(close_data(rp, "staleness.tsv", &f));
  SG_TRY(sg_plot_end(&gp, rp->dir, "staleness"));
  add_fig(rp, "staleness",
          "Staleness distribution: for each worker step, how many updates the "
          "parameters it used were behind (steps.staleness); fraction of steps, "
          "repeats pooled. The axis ends at the largest 99th percentile; the rare "
          "larger values are one bar (staleness.tsv has each).");
fail:
  if (gp) sg_out_discard(gp);
  if (f) sg_out_discard(f);
  return rc;
}

static int fig_staleness(report_t *rp) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, nblocks = 0, maxbin = 0;
  size_t *first = NULL, nlab = 0;
  double *hist = NULL; /* nlab rows of STALENESS_BINS */
  int *top = NULL, *keep = NULL;
  char a[512], b[512];
  first = calloc(s->n ? s->n : 1, sizeof *first);
  if (!first) return sg_err_set(SG_ENOMEM, "report: out of memory");
  for (size_t i = 0; i < s->n; i++) {
    size_t j = 0;
    if (!s->runs[i].has_staleness) continue;
    label(rp, i, a, sizeof a);
    while (j < nlab && strcmp(a, label(rp, first[j], b, sizeof b))) j++;
    if (j == nlab) first[nlab++] = i;
  }
  if (!nlab) goto fail;
  hist = calloc(nlab * STALENESS_BINS, sizeof *hist);
  top = calloc(nlab, sizeof *top);
  keep = calloc(nlab, sizeof *keep);
  if (!hist || !top || !keep) {
    rc = sg_err_set(SG_ENOMEM, "report: out of memory");
    goto fail;
  }
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT staleness, count(*) FROM steps WHERE run_id = ?1"
                        " AND staleness IS NOT NULL GROUP BY staleness",
                        &st));
  /* Pass 1: histograms per label (repeats pooled). */
  for (size_t j = 0; j < nlab; j++) {
    keep[j] = staleness_hist(rp, st, first[j], hist + j * STALENESS_BINS, &top[j]);
    if (!keep[j]) continue;
    if (top[j] > maxbin) maxbin = top[j];
    nblocks++;
  }
  if (!nblocks) goto fail;

  SG_TRY(staleness_plot(rp, first, nlab, hist, top, keep, maxbin, nblocks));
fail:
  sqlite3_finalize(st);
  free(first);
  free(hist);
  free(top);
  free(keep);
  return rc;
}

/* ---- one value per run vs workers: time per step, accuracy, staleness -- */

#define VSN_LEN sizeof(((sg_rrun_t *)0)->variant) /* a series name: a variant */

/* The series of run i in the figures over workers: its variant, except
 * that a variant run at one worker count N only, whose servers S divide
 * N (one entry per N, `servers: N/8`), joins the others of the same
 * ratio under the name the loader rendered for it (report.h, series):
 * "ps sync servers=2" at N = 16 is "ps sync servers=N/8". */
static const char *vsn_series(const sg_rset_t *s, size_t i, char *buf, size_t len) {
  const sg_rrun_t *r = &s->runs[i];
  int alone = next_workers(s, r->variant, r->workers) == INT_MAX &&
              next_workers(s, r->variant, 0) == r->workers;
  snprintf(buf, len, "%s", alone && r->series[0] ? r->series : r->variant);
  return buf;
}

/* The smallest worker count above `lastn` among the runs of series `ser`
 * with a value; INT_MAX when there is none. */
static int vsn_next(const sg_rset_t *s, const double *val, const char *ser, int lastn) {
  char b[VSN_LEN];
  int next = INT_MAX;
  for (size_t i = 0; i < s->n; i++)
    if (!isnan(val[i]) && s->runs[i].workers > lastn && s->runs[i].workers < next &&
        !strcmp(vsn_series(s, i, b, sizeof b), ser))
      next = s->runs[i].workers;
  return next;
}

/* Block `blk` of NAME.tsv for series `ser`: per worker count the median
 * of val over the ok runs, and its min and max (f NULL: nothing
 * written).  lo, hi: the range of the medians so far.  Returns whether
 * the block has a row. */
static int vsn_block(const sg_rset_t *s, FILE *f, int blk, const char *ser, const double *val,
                     double *v, int *band, double *lo, double *hi) {
  char b[VSN_LEN];
  int wrote = 0;
  for (int n = vsn_next(s, val, ser, 0); n != INT_MAX; n = vsn_next(s, val, ser, n)) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++)
      if (s->runs[i].workers == n && !isnan(val[i]) && !strcmp(s->runs[i].status, "ok") &&
          !strcmp(vsn_series(s, i, b, sizeof b), ser))
        v[k++] = val[i];
    if (!k) continue;
    double med = sg_rmedian(v, k); /* sorts v */
    if (k > 1) *band = 1;
    if (!wrote && f) {
      tsv_block(f, blk, ser);
      fputs("# workers\tmedian\tmin\tmax\n", f);
    }
    wrote = 1;
    if (f) fprintf(f, "%d\t%.6g\t%.6g\t%.6g\n", n, med, v[0], v[k - 1]);
    if (med < *lo) *lo = med;
    if (med > *hi) *hi = med;
  }
  return wrote;
}

/* What a figure over workers draws: NAME.png of val (one per run, NaN:
 * none) per series vs N, log2 x; log y when the medians span more than
 * a factor of 20 (`logy`: allowed). */
typedef struct {
  const char *name, *title, *ylabel, *caption;
  int logy;
} vsn_fig_t;

static int vsn_plot(report_t *rp, const vsn_fig_t *fig, const double *val, double *v,
                    size_t *first) {
  const sg_rset_t *s = rp->set;
  FILE *f = NULL, *gp = NULL;
  int rc = SG_OK, nblocks = 0;
  double lo = INFINITY, hi = -INFINITY;
  char file[48], title[160], a[VSN_LEN], b[VSN_LEN];
  size_t nser = 0;
  for (size_t i = 0; i < s->n; i++) { /* series in order of first appearance */
    size_t j = 0;
    if (isnan(val[i])) continue;
    vsn_series(s, i, a, sizeof a);
    while (j < nser && strcmp(a, vsn_series(s, first[j], b, sizeof b))) j++;
    if (j == nser) first[nser++] = i;
  }
  snprintf(file, sizeof file, "%s.tsv", fig->name);
  snprintf(title, sizeof title, "%s%s", fig->title, vsn_sim_tag(s));
  SG_TRY(open_data(rp, file, &f));
  fprintf(f, "# %s: median over ok repeats per worker count, min, max\n", fig->ylabel);
  SG_TRY(sg_plot_begin(&gp, rp->dir, fig->name, title));
  axis_labels(gp, "workers N", fig->ylabel);
  for (size_t j = 0; j < nser; j++) { /* the medians' range: log y or not */
    int band = 0;
    vsn_block(s, NULL, 0, vsn_series(s, first[j], a, sizeof a), val, v, &band, &lo, &hi);
  }
  if (fig->logy && lo > 0 && hi / lo > 20) fputs("set logscale y 10\n", gp);
  fputs("set logscale x 2\nset xtics 2\nset key outside right top\nplot \\\n", gp);
  for (size_t j = 0; j < nser; j++) {
    int band = 0;
    vsn_series(s, first[j], a, sizeof a);
    if (!vsn_block(s, f, nblocks, a, val, v, &band, &lo, &hi)) continue;
    if (band) series_band(gp, file, nblocks, 3, rp->vcolor[first[j]]);
    fputs("  ", gp);
    sg_plot_quote(gp, file);
    fprintf(gp, " index %d using 1:2 with linespoints pt %d ps 1.2 lw 2 ", nblocks,
            5 + 2 * (nblocks % 4));
    plot_color(gp, rp->vcolor[first[j]]);
    sg_plot_title(gp, a);
    fputs(", \\\n", gp);
    nblocks++;
  }
  fputs("  NaN notitle\n", gp);
  SG_TRY(close_data(rp, file, &f));
  if (!nblocks) {
    sg_out_discard(gp);
    gp = NULL;
    snprintf(file, sizeof file, "%s.gp", fig->name);
    SG_TRY(sg_out_unlink(rp->dir, file));
    goto fail;
  }
  SG_TRY(sg_plot_end(&gp, rp->dir, fig->name));
  add_fig(rp, fig->name, "%s", fig->caption);
fail:
  if (gp) sg_out_discard(gp);
  if (f) sg_out_discard(f);
  return rc;
}

/* vsn_plot with its scratch arrays. */
static int vsn_figure(report_t *rp, const vsn_fig_t *fig, const double *val) {
  size_t n = rp->set->n ? rp->set->n : 1;
  double *v = calloc(n, sizeof *v);
  size_t *first = calloc(n, sizeof *first);
  int rc = v && first ? vsn_plot(rp, fig, val, v, first)
                      : sg_err_set(SG_ENOMEM, "report: out of memory");
  free(v);
  free(first);
  return rc;
}

/* Time per step (compute + communication + waiting, mean over worker
 * ranks and steps from step 1 on: step 0 holds the ranks' start skew) vs
 * workers, when workers vary.  A run with step 0 only keeps it. */
static int fig_step_time(report_t *rp) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  if (!s->workers_vary) return SG_OK;
  double *val = calloc(s->n ? s->n : 1, sizeof *val);
  if (!val) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT avg(compute_s + coalesce(comm_s, 0) + coalesce(wait_s, 0))"
                        " FROM steps WHERE run_id = ?1 AND coalesce(kind, 'worker') <> 'hub'"
                        " AND step >= (SELECT min(1, max(step)) FROM steps WHERE run_id = ?1)",
                        &st));
  for (size_t i = 0; i < s->n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    val[i] = sqlite3_step(st) == SQLITE_ROW ? sg_rdb_double(st, 0) : NAN;
    val[i] = isnan(val[i]) || val[i] <= 0 ? NAN : 1e3 * val[i];
  }
  static const vsn_fig_t fig = {
      "step_time", "Time per step vs workers", "time per step (ms)",
      "Time per step vs workers: compute + communication + waiting per step, mean over "
      "the worker ranks and over steps 1 on (step 0 holds the start-up skew), median over "
      "repeats (band: min to max); a simulated run's ([sim]) in simulated time. Log axes "
      "where the times span decades.",
      1};
  SG_TRY(vsn_figure(rp, &fig, val));
fail:
  sqlite3_finalize(st);
  free(val);
  return rc;
}

/* Final test accuracy and mean staleness vs workers, when workers vary
 * and some run records staleness (ps async / ssp). */
static int fig_async_vs_workers(report_t *rp) {
  const sg_rset_t *s = rp->set;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  for (size_t i = 0; i < s->n; i++) any |= s->runs[i].has_staleness;
  if (!s->workers_vary || !any) return SG_OK;
  double *val = calloc(2 * s->n, sizeof *val);
  if (!val) return sg_err_set(SG_ENOMEM, "report: out of memory");
  SG_TRY(sg_rdb_prepare(rp->db,
                        "SELECT avg(staleness) FROM steps WHERE run_id = ?1"
                        " AND staleness IS NOT NULL AND coalesce(kind, 'worker') <> 'hub'",
                        &st));
  for (size_t i = 0; i < s->n; i++) {
    val[i] = s->runs[i].final_acc;
    val[s->n + i] = NAN;
    if (!s->runs[i].has_staleness) continue;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->runs[i].id);
    if (sqlite3_step(st) == SQLITE_ROW) val[s->n + i] = sg_rdb_double(st, 0);
  }
  static const vsn_fig_t acc = {
      "acc_vs_workers", "Final test accuracy vs workers", "final test accuracy",
      "Final test accuracy (the run's last evaluation) vs workers, median over repeats "
      "(band: min to max).",
      0};
  static const vsn_fig_t stale = {
      "staleness_vs_workers", "Mean staleness vs workers", "mean staleness (updates)",
      "Mean staleness of the workers' updates (how many updates the server applied "
      "between a worker's pull and its push) vs workers, median over repeats; variants "
      "that record staleness only.",
      1};
  SG_TRY(vsn_figure(rp, &acc, val));
  SG_TRY(vsn_figure(rp, &stale, val + s->n));
fail:
  sqlite3_finalize(st);
  free(val);
  return rc;
}

/* ---- the command ------------------------------------------------------- */

/* "quick start/1" -> "quick_start_1": a safe directory name. */
static void dir_name(char *dst, size_t len, const char *name) {
  size_t i = 0;
  for (; name[i] && i + 1 < len; i++) {
    char c = name[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
             (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
    dst[i] = ok ? c : '_';
  }
  dst[i] = '\0';
  if (!i || !strcmp(dst, ".") || !strcmp(dst, ".."))
    snprintf(dst, len, "experiment");
}

static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return !errno && end != s && !*end;
}

/* Load the selected experiments (or run) into rp->set. */
static int load_set(report_t *rp, const char *const *sels, int nsel, int64_t run_id,
                    double target, int join) {
  int64_t exp_id = -1;
  if (run_id >= 0 || nsel == 0) {
    if (run_id < 0) SG_CHECK(sg_rdb_experiment(rp->db, NULL, &exp_id));
    return sg_rset_load(rp->db, exp_id, run_id, target, &rp->set);
  }
  for (int i = 0; i < nsel; i++) {
    sg_rset_t *one = NULL;
    SG_CHECK(sg_rdb_experiment(rp->db, sels[i], &exp_id));
    for (size_t k = 0; rp->set && k < rp->set->nexp; k++)
      if (rp->set->exp_ids[k] == exp_id)
        return sg_err_set(SG_EINVAL, "experiment %lld ('%s') is selected twice",
                          (long long)exp_id, sels[i]);
    SG_CHECK(sg_rset_load(rp->db, exp_id, -1, target, &one));
    if (!rp->set) {
      rp->set = one;
      continue;
    }
    int rc = sg_rset_merge(rp->set, &one, join);
    sg_rset_destroy(&one);
    SG_CHECK(rc);
  }
  return SG_OK;
}

/* Draw everything into rp->dir, then drop what an earlier report left. */
static int draw(report_t *rp, int *removed) {
  SG_CHECK(assign_colors(rp));
  SG_CHECK(fig_evals(rp));
  SG_CHECK(fig_loss(rp));
  SG_CHECK(fig_scaling(rp));
  SG_CHECK(fig_step_time(rp));
  SG_CHECK(fig_bytes(rp));
  SG_CHECK(fig_breakdown(rp));
  SG_CHECK(fig_server(rp));
  SG_CHECK(fig_server_timeline(rp));
  SG_CHECK(fig_staleness(rp));
  SG_CHECK(fig_async_vs_workers(rp));
  SG_CHECK(fig_bench(rp));
  SG_CHECK(sg_report_summary(rp->db, rp->db_path, rp->set, rp->single_run, rp->dir,
                             rp->figs, rp->nfigs));
  SG_CHECK(sg_rfiles_add(&rp->written, "summary.md"));
  SG_CHECK(sg_report_html(rp->db, rp->db_path, rp->set, rp->single_run, rp->dir,
                          rp->figs, rp->nfigs));
  SG_CHECK(sg_rfiles_add(&rp->written, "index.html"));
  return sg_rfiles_commit(&rp->written, rp->dir, removed);
}

/* report's command line */
typedef struct {
  const char *db_path, *out, *sels[SG_RSET_MAX_EXP];
  int nsel, join;
  int64_t run_id;
  double target;
} report_args_t;

/* One option that takes a value (val, already known to be there). */
static int parse_value(report_args_t *ra, const char *a, const char *val) {
  if (!strcmp(a, "--db")) ra->db_path = val;
  else if (!strcmp(a, "--out")) ra->out = val;
  else if (!strcmp(a, "--run")) {
    char *end;
    ra->run_id = strtoll(val, &end, 10);
    if (end == val || *end || ra->run_id < 0) {
      fprintf(stderr, "sgdlab report: --run: '%s' is not a run id\n", val);
      return 2;
    }
  } else if (!parse_double(val, &ra->target) || ra->target < 0 || ra->target > 1) {
    fprintf(stderr, "sgdlab report: --target: '%s' is not an accuracy in"
                    " [0, 1]\n", val);
    return 2;
  }
  return -1;
}

/* The arguments into ra: -1 to go on, else the exit code (0 after --help,
 * 2 for bad usage, with its message printed). */
static int parse_args(report_args_t *ra, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--db") || !strcmp(a, "--out") ||
               !strcmp(a, "--run") || !strcmp(a, "--target")) {
      if (!val) {
        fprintf(stderr, "sgdlab report: %s needs a value\n%s", a, usage);
        return 2;
      }
      i++;
      int code = parse_value(ra, a, val);
      if (code >= 0) return code;
    } else if (!strcmp(a, "--join")) {
      ra->join = 1;
    } else if (a[0] == '-') {
      fprintf(stderr, "sgdlab report: unknown option '%s'\n%s", a, usage);
      return 2;
    } else if (ra->nsel < SG_RSET_MAX_EXP) {
      ra->sels[ra->nsel++] = a;
    } else {
      fprintf(stderr, "sgdlab report: at most %d experiments in one report\n",
              SG_RSET_MAX_EXP);
      return 2;
    }
  }
  if (ra->join && ra->nsel < 2) {
    fprintf(stderr, "sgdlab report: --join needs two or more experiments\n");
    return 2;
  }
  if (ra->nsel && ra->run_id >= 0) {
    fprintf(stderr, "sgdlab report: give an EXPERIMENT or --run ID, not both\n");
    return 2;
  }
  return -1;
}

/* rp->dir: --out, else results/<experiment-name>[/run-<ID>] */
static void report_dir(report_t *rp, const report_args_t *ra) {
  if (ra->out) {
    snprintf(rp->dir, sizeof rp->dir, "%s", ra->out);
  } else {
    char name[128];
    dir_name(name, sizeof name, rp->set->name);
    if (ra->run_id >= 0)
      snprintf(rp->dir, sizeof rp->dir, "results/%s/run-%lld", name,
               (long long)ra->run_id);
    else
      snprintf(rp->dir, sizeof rp->dir, "results/%s", name);
  }
}

/* What an earlier report wrote into a directory, and its file list. */
static int report_entry(const char *name) {
  return sg_rfiles_is_report_name(name) || !strcmp(name, SG_REPORT_MANIFEST);
}

/* The output directory, checked (outfile.h) before anything is written:
 * a refusal is exit code 2 (*code). */
static int open_out(report_t *rp, int *code) {
  char what[PATH_MAX + 32];
  snprintf(what, sizeof what, "report directory %s", rp->dir);
  int rc = sg_out_dir_open(rp->dir, 1, what);
  if (rc >= 0) rc = sg_out_check_entries(rp->dir, report_entry);
  if (rc == SG_EINVAL) *code = 2;
  return rc < 0 ? rc : SG_OK;
}

/* The one line that says what was written, and for what. */
static void print_done(const report_t *rp, int64_t run_id, int removed) {
  printf("report: %s/summary.md, index.html and %zu figure%s (PNG and SVG) for %s",
         rp->dir, rp->nfigs, rp->nfigs == 1 ? "" : "s",
         rp->single_run ? "run" : rp->set->nexp > 1 ? "experiments" : "experiment");
  if (rp->single_run) printf(" %lld", (long long)run_id);
  for (size_t i = 0; !rp->single_run && i < rp->set->nexp; i++)
    printf("%s %lld", i ? "," : "", (long long)rp->set->exp_ids[i]);
  if (removed)
    printf("; removed %d file%s an earlier report left", removed, removed == 1 ? "" : "s");
  putchar('\n');
}

int sg_cmd_report(int argc, char **argv) {
  report_args_t ra = {.db_path = SG_DEFAULT_DB, .run_id = -1, .target = 0.85};
  report_t rp = {0};
  int rc = SG_OK, removed = 0;
  int code = parse_args(&ra, argc, argv);
  if (code >= 0) return code;

  sg_err_clear();
  rp.db_path = ra.db_path;
  rp.single_run = ra.run_id >= 0;
  SG_TRY(sg_plot_available());
  SG_TRY(sg_rdb_open(&rp.db, ra.db_path));
  SG_TRY(load_set(&rp, ra.sels, ra.nsel, ra.run_id, ra.target, ra.join));
  report_dir(&rp, &ra);
  SG_TRY(open_out(&rp, &code));
  SG_TRY(draw(&rp, &removed));
  print_done(&rp, ra.run_id, removed);
fail:
  if (rc < 0)
    fprintf(stderr, "sgdlab report: %s\n",
            *sg_err_msg() ? sg_err_msg() : sg_strerror(rc));
  if (rc < 0 && code == 2) rc = 2; /* a refused output directory */
  free(rp.color);
  free(rp.vcolor);
  sg_rfiles_free(&rp.written);
  sg_rset_destroy(&rp.set);
  sqlite3_close(rp.db);
  return rc == 2 ? 2 : rc < 0 ? 1 : 0;
}
