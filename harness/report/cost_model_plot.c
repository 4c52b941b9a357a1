/* cost_model_plot.c - `sgdlab model --plot`: measured and predicted time per
 * step in one figure (plot.h draws it; labels reach the script only quoted). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "err.h"
#include "outfile.h"
#include "plot.h"
#include "report.h"

/* Distinct labels of pts in order of first appearance, as indexes. */
static size_t distinct(const sg_cost_point_t *pts, size_t n, size_t *first) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    size_t j = 0;
    while (j < k && strcmp(pts[first[j]].label, pts[i].label)) j++;
    if (j == k) first[k++] = i;
  }
  return k;
}

static int cmp_x(const void *a, const void *b) {
  const sg_cost_point_t *p = *(const sg_cost_point_t *const *)a, *q = *(const sg_cost_point_t *const *)b;
  return (p->x > q->x) - (p->x < q->x);
}

/* One block per label (gnuplot `index`), rows sorted by x. */
static int write_tsv(const char *dir, const char *name, const sg_cost_point_t *pts, size_t n,
                     const size_t *first, size_t k) {
  char file[4096];
  const sg_cost_point_t **row = malloc((n ? n : 1) * sizeof *row);
  FILE *f = NULL;
  snprintf(file, sizeof file, "%s.tsv", name);
  if (!row) return sg_err_set(SG_ENOMEM, "plot: out of memory");
  int rc = sg_out_fopen(&f, dir, file);
  if (rc < 0) {
    free(row);
    return rc;
  }
  fputs("# x\tpredicted_ms\tmeasured_ms (sgdlab model)\n", f);
  for (size_t b = 0; b < k; b++) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
      if (!strcmp(pts[i].label, pts[first[b]].label)) row[m++] = &pts[i];
    qsort(row, m, sizeof *row, cmp_x);
    fputs(b ? "\n\n# " : "# ", f);
    sg_plot_data_text(f, pts[first[b]].label);
    fputc('\n', f);
    for (size_t i = 0; i < m; i++)
      fprintf(f, "%g\t%.6g\t%.6g\n", row[i]->x, row[i]->predicted * 1e3, row[i]->measured * 1e3);
  }
  free(row);
  return sg_out_fclose(f);
}

int sg_cost_plot(const char *dir, const char *name, int x_is_rate, const sg_cost_point_t *pts,
                 size_t n) {
  size_t *first = malloc((n ? n : 1) * sizeof *first), k;
  FILE *gp = NULL;
  int rc = SG_OK;
  if (!first) return sg_err_set(SG_ENOMEM, "plot: out of memory");
  k = distinct(pts, n, first);
  char what[4200];
  snprintf(what, sizeof what, "plot directory %s", dir);
  SG_TRY(sg_out_dir_open(dir, 1, what)); /* outfile.h */
  SG_TRY(write_tsv(dir, name, pts, n, first, k));
  SG_TRY(sg_plot_begin(&gp, dir, name, "Time per step: measured (points) and predicted (lines)"));
  sg_plot_set_text(gp, "xlabel", x_is_rate ? "slowest link (Mbit/s)" : "workers N");
  sg_plot_set_text(gp, "ylabel", "ms per step");
  fputs(x_is_rate ? "set logscale x 2\n" : "set xtics 2\n", gp);
  /* times that span more than 30x (a small gradient next to a slow
   * outlier) go on a log axis, so the small ones stay apart */
  double lo = 0, hi = 0;
  for (size_t i = 0; i < n; i++)
    for (int j = 0; j < 2; j++) {
      double v = j ? pts[i].measured : pts[i].predicted;
      if (v > 0 && (lo == 0 || v < lo)) lo = v;
      if (v > hi) hi = v;
    }
  fputs(lo > 0 && hi > 30 * lo ? "set logscale y 10\nplot \\\n" : "set yrange [0:*]\nplot \\\n", gp);
  char file[4096];
  snprintf(file, sizeof file, "%s.tsv", name);
  for (size_t b = 0; b < k; b++) {
    fputs("  ", gp);
    sg_plot_quote(gp, file);
    fprintf(gp, " index %zu using 1:3 with points pt 7 ps 1.3 lc %zu", b, b + 1);
    sg_plot_title(gp, pts[first[b]].label);
    fputs(", \\\n  ", gp);
    sg_plot_quote(gp, file);
    fprintf(gp, " index %zu using 1:2 with lines lw 2 lc %zu notitle, \\\n", b, b + 1);
  }
  fputs("  NaN notitle\n", gp);
  SG_TRY(sg_plot_end(&gp, dir, name));
fail:
  if (gp) sg_out_discard(gp);
  free(first);
  return rc;
}
