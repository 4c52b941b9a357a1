/* progress.c - status line and per-run summaries (see progress.h). */
#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

struct sg_progress {
  int quiet, tty;
  size_t nruns, index;
  char label[128];
  int64_t step, total;
  int epoch;
  double acc;
  double t0, drawn;
};

int sg_progress_new(sg_progress_t **out, int quiet, size_t nruns) {
  sg_progress_t *p = calloc(1, sizeof *p);
  if (!p) return SG_ENOMEM;
  p->quiet = quiet;
  p->tty = !quiet && isatty(STDOUT_FILENO);
  p->nruns = nruns;
  *out = p;
  return SG_OK;
}

void sg_progress_destroy(sg_progress_t **p) {
  if (!p || !*p) return;
  free(*p);
  *p = NULL;
}

static void draw(sg_progress_t *p, int force) {
  if (!p->tty) return;
  double now = sg_now();
  if (!force && now - p->drawn < 0.1) return;
  p->drawn = now;
  char steps[64], acc[32];
  if (p->total > 0)
    snprintf(steps, sizeof steps, "step %lld/%lld", (long long)p->step, (long long)p->total);
  else
    snprintf(steps, sizeof steps, "step %lld", (long long)p->step);
  if (isnan(p->acc)) snprintf(acc, sizeof acc, "acc -");
  else snprintf(acc, sizeof acc, "acc %.4f", p->acc);
  printf("\r\033[K[%zu/%zu] %.60s  epoch %d  %s  %s  %.1fs", p->index + 1, p->nruns, p->label,
         p->epoch, steps, acc, now - p->t0);
  fflush(stdout);
}

void sg_progress_run_begin(sg_progress_t *p, size_t index, const char *label) {
  if (!p) return;
  p->index = index;
  snprintf(p->label, sizeof p->label, "%s", label);
  p->step = 0;
  p->total = 0;
  p->epoch = 0;
  p->acc = NAN;
  p->t0 = sg_now();
  draw(p, 1);
}

void sg_progress_step(sg_progress_t *p, int64_t step, int epoch) {
  if (!p) return;
  if (step + 1 > p->step) p->step = step + 1;
  p->epoch = epoch;
  draw(p, 0);
}

void sg_progress_total(sg_progress_t *p, int64_t total) {
  if (p) p->total = total;
}

void sg_progress_eval(sg_progress_t *p, double acc) {
  if (!p) return;
  p->acc = acc;
  draw(p, 0);
}

void sg_progress_note(sg_progress_t *p, const char *text) {
  if (!p || p->quiet) return;
  if (p->tty) printf("\r\033[K");
  fflush(stdout);
  char total[48] = "";
  if (p->total > 0) snprintf(total, sizeof total, " (of %lld steps)", (long long)p->total);
  fprintf(stderr, "sgdlab: [%zu/%zu] %s: %s%s\n", p->index + 1, p->nruns, p->label, text, total);
  draw(p, 1);
}

void sg_progress_run_end(sg_progress_t *p, const char *label, const char *status, double acc,
                         double wall_s, const char *error) {
  if (!p || p->quiet) return;
  if (p->tty) printf("\r\033[K");
  char a[32] = "-";
  if (!isnan(acc)) snprintf(a, sizeof a, "%.4f", acc);
  printf("[%zu/%zu] %s  %s  acc %s  %.1fs%s%s\n", p->index + 1, p->nruns, label, status, a, wall_s,
         error ? "  " : "", error ? error : "");
  fflush(stdout);
}
