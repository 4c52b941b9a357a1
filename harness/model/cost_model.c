/* cost_model.c - the table of alpha-beta-gamma formulas (each engine's own,
 * through its `cost` hook, and the references that belong to no engine)
 * and the fit of alpha and beta (docs/model.md derives every line). */
#include "bench_method.h"
#include "cost_model.h"
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "reduce.h"

/* ---- the table ------------------------------------------------------- */

/* Formulas that belong to no engine: what-if references (docs/model.md).
 * root: one rank receives the K of each of the N-1 others and sends the
 * sum back to each, both directions of its link busy at once (as
 * Gibiansky's "through a root"): (N-1)(alpha + K beta) + (N-1) K gamma. */
static double root(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double n1 = c->N > 1 ? c->N - 1 : 0;
  o->link_bytes = n1 * c->K;
  o->cpu_bytes = 4 * n1 * c->K;
  return n1 * (p->alpha + c->K * p->beta * sg_cost_mult(c->hub)) + n1 * c->K * p->gamma;
}

typedef double (*cost_fn)(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o);

/* The name a reference goes by in a case (a what-if case only). */
static const char ROOT[] = "root";

/* c's engine: its name, or a bench engine's (bench-NAME); NULL for a
 * reference and a name no engine has. */
static const sg_engine_t *engine_of(const sg_cost_case_t *c) {
  const char *e = c->engine ? c->engine : "";
  if (!strncmp(e, "bench-", 6)) e += 6; /* a bench engine's runs */
  return sg_engine_find(e);
}

/* The engine's own formula (its `cost` hook), or a reference above. */
static cost_fn lookup(const sg_cost_case_t *c) {
  if (c->engine && !strcmp(c->engine, ROOT)) return root;
  const sg_engine_t *eng = engine_of(c);
  if (!eng || !eng->cost || !eng->cost->formula) return NULL;
  sg_cost_split_t probe = {0};
  sg_cost_params_t zero = {0};
  return eng->cost->formula(c, &zero, &probe) < 0 ? NULL : eng->cost->formula;
}

int sg_cost_detail(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *out) {
  cost_fn fn = lookup(c);
  if (!fn)
    return sg_err_set(SG_ENOTFOUND, "no cost formula for engine '%s' variant '%s'",
                      c->engine ? c->engine : "", c->variant ? c->variant : "");
  memset(out, 0, sizeof *out);
  out->link_s = fn(c, p, out);
  out->cpu_s = p->kappa > 0 && p->cores > 0 ? p->kappa * out->cpu_bytes / p->cores : 0;
  return SG_OK;
}

/* The links and the CPU work at once (the kernel moves one message while
 * zmq encrypts the next), so the slower of the two sets the time. */
int sg_cost_comm(const sg_cost_case_t *c, const sg_cost_params_t *p, double *seconds) {
  sg_cost_split_t s;
  SG_CHECK(sg_cost_detail(c, p, &s));
  *seconds = s.link_s > s.cpu_s ? s.link_s : s.cpu_s;
  return SG_OK;
}

int sg_cost_known(const sg_cost_case_t *c) { return lookup(c) != NULL; }

double sg_cost_link_bytes(const sg_cost_case_t *c) {
  sg_cost_params_t zero = {0};
  sg_cost_split_t s = {0};
  cost_fn fn = lookup(c);
  if (fn) fn(c, &zero, &s);
  return s.link_bytes;
}

void sg_cost_label(const sg_cost_case_t *c, char *out, size_t cap) {
  const sg_engine_t *eng = engine_of(c);
  const char *e = eng ? eng->name : c->engine ? c->engine : "?";
  const char *v = c->variant ? c->variant : "";
  if (eng && eng->cost && eng->cost->label)
    eng->cost->label(c, out, cap);
  else
    snprintf(out, cap, "%s", v[0] ? v : e);
}

void sg_cost_read(const sg_engine_t *eng, const sg_opts_t *o, sg_cost_case_t *c) {
  c->variant = "";
  if (eng && eng->cost && eng->cost->read) eng->cost->read(o, c);
}

/* ---- the what-if cases ----------------------------------------------- */

int sg_cost_whatif_find(const char *name, sg_cost_case_t *c) {
  if (!strcmp(name, ROOT)) {
    c->engine = ROOT, c->variant = "", c->tree_aggregate = 0;
    return 0;
  }
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    for (const sg_cost_whatif_t *w = (*e)->cost ? (*e)->cost->what_if : NULL; w && w->name; w++)
      if (!strcmp(w->name, name)) {
        c->engine = (*e)->name, c->variant = w->variant, c->tree_aggregate = w->tree_aggregate;
        return 0;
      }
  return -1;
}

void sg_cost_whatif_defaults(char *out, size_t cap) {
  size_t n = 0;
  int top = 0;
  out[0] = 0;
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    for (const sg_cost_whatif_t *w = (*e)->cost ? (*e)->cost->what_if : NULL; w && w->name; w++)
      if (w->by_default > top) top = w->by_default;
  for (int place = 1; place <= top; place++)
    for (const sg_engine_t *const *e = sg_engines; *e; e++)
      for (const sg_cost_whatif_t *w = (*e)->cost ? (*e)->cost->what_if : NULL; w && w->name; w++)
        if (w->by_default == place && n < cap)
          n += (size_t)snprintf(out + n, cap - n, "%s,", w->name);
  if (n < cap) snprintf(out + n, cap - n, "%s", ROOT);
}

/* ---- the fit --------------------------------------------------------- */

int sg_cost_fit_line(const double *x, const double *t, size_t n, double *a, double *b) {
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  if (n < 2) return sg_err_set(SG_EINVAL, "fit: %zu points, need at least 2", n);
  for (size_t i = 0; i < n; i++) sx += x[i], st += t[i];
  double mx = sx / (double)n, mt = st / (double)n;
  /* centred sums: no cancellation between bytes ~1e7 and seconds ~1e-2 */
  for (size_t i = 0; i < n; i++) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxt += (x[i] - mx) * (t[i] - mt);
  }
  if (!(sxx > 0)) return sg_err_set(SG_EINVAL, "fit: all %zu points have the same size", n);
  *b = sxt / sxx;
  *a = mt - *b * mx;
  return SG_OK;
}

int sg_cost_fit_ring(const double *bytes, const double *t, size_t n, int N, double gamma,
                     sg_cost_params_t *p) {
  double a, b;
  if (N < 2) return sg_err_set(SG_EINVAL, "fit: ring rows of np %d, need np >= 2", N);
  SG_CHECK(sg_cost_fit_line(bytes, t, n, &a, &b));
  double f = (double)(N - 1) / N;
  p->gamma = gamma;
  p->alpha = a > 0 ? a / (2.0 * (N - 1)) : 0;
  p->beta = (b - f * gamma) / (2 * f);
  if (!(p->beta > 0))
    return sg_err_set(SG_ERANGE, "fit: slope %.3g s/B gives no positive beta", b);
  return SG_OK;
}

int sg_cost_fit_kappa(const double *bytes, const double *t, size_t n, int N, double cores,
                      double *kappa) {
  double a, b;
  if (N < 2 || !(cores > 0))
    return sg_err_set(SG_EINVAL, "kappa fit: np %d on %g cores", N, cores);
  SG_CHECK(sg_cost_fit_line(bytes, t, n, &a, &b));
  *kappa = b > 0 ? b * cores / (4.0 * (N - 1)) : 0;
  return SG_OK;
}

int sg_cost_measure_gamma(size_t bytes, int reps, double *gamma) {
  size_t n = bytes / sizeof(float);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double t[32];
  if (reps < 1 || reps > 32) reps = 5;
  if (!a || !b || n == 0) {
    free(a), free(b);
    return sg_err_set(SG_ENOMEM, "gamma: %zu-byte buffers", bytes);
  }
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1; /* touch every page first */
  for (int r = 0; r < reps; r++) {
    double t0 = sg_now();
    sg_sum_f32(a, b, n);
    t[r] = sg_now() - t0;
  }
  qsort(t, (size_t)reps, sizeof t[0], sg_cmp_double);
  *gamma = t[reps / 2] / (double)(n * sizeof(float));
  free(a), free(b);
  return SG_OK;
}
