/* test_model_cnn.c - `model: cnn` (core/model_cnn.h):
 *  - grad_check_16 / grad_check_28: analytic gradient vs central finite
 *    differences of the float model (every parameter of a 16 x 16 net;
 *    every 37th of the 28 x 28 net): median relative error below
 *    GC_TOL / 10 and at most GC_FRAC of the parameters above GC_TOL
 *    (ReLU and max-pool kinks inside +-eps; the worst is printed); the
 *    same check on a gradient with the dense layers planted 20 % off
 *    must fail (the check can catch it);
 *  - hook: the backward hook reports 10 ranges (bias, weights; last layer
 *    first), descending and adjoining, covering the vector once, and the
 *    gradient with the hook equals the one without bit for bit (the same
 *    sgemm calls, by construction), as does a second call;
 *  - gemms: the im2col GEMM list (shapes and order of a step);
 *  - refused: non-square or unevenly pooling inputs, CSR input. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "rng.h"
#include "test.h"

#define GC_TOL 5e-2  /* relative error, analytic vs numeric */
#define GC_FRAC 0.02 /* share of parameters allowed above GC_TOL (kinks) */

static void fill(float *p, size_t n, uint64_t seed, double lo, double hi) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, 77, 0);
  for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * sg_rng_uniform(&r));
}

typedef struct {
  sg_model_t *m;
  float *x, *params, *grad;
  int32_t y[8];
  sg_batch_t b;
  size_t np;
} net_t;

static int net_new(net_t *t, int side, int rows) {
  memset(t, 0, sizeof *t);
  if (sg_model_new(&t->m, "cnn", (int64_t)side * side, 10, NULL, 0, 0, rows) < 0) return -1;
  t->np = sg_model_nparams(t->m);
  t->x = malloc((size_t)rows * (size_t)(side * side) * sizeof(float));
  t->params = malloc(t->np * sizeof(float));
  t->grad = malloc(t->np * sizeof(float));
  if (!t->x || !t->params || !t->grad) return -1;
  fill(t->x, (size_t)rows * (size_t)(side * side), 3, 0.0, 1.0);
  sg_model_init(t->m, 7, t->params);
  float *noise = malloc(t->np * sizeof(float));
  if (!noise) return -1;
  fill(noise, t->np, 9, -0.05, 0.05); /* nonzero biases too */
  for (size_t i = 0; i < t->np; i++) t->params[i] += noise[i];
  free(noise);
  for (int i = 0; i < rows; i++) t->y[i] = (i * 3) % 10;
  t->b.n = rows;
  t->b.x = t->x;
  t->b.y = t->y;
  return 0;
}

static void net_free(net_t *t) {
  sg_model_destroy(&t->m);
  free(t->x);
  free(t->params);
  free(t->grad);
}

static double loss_at(net_t *t) {
  double s = 0;
  int64_t c = 0;
  if (sg_model_eval(t->m, t->params, &t->b, &s, &c) < 0) return NAN;
  return s / t->b.n;
}

/* Central differences (step 1e-3) of the float model at every stride-th
 * parameter; per parameter err = |g - num| / max(|g|, |num|, 1e-3).
 * Returns the fraction of checked parameters with err > GC_TOL; *worst
 * and *median: the largest and the median err.  A ReLU or a max-pool
 * window whose winner changes within +-1e-3 puts a kink inside the
 * difference, so a few parameters disagree on any net: the check bounds
 * their share, and prints the worst. */
static double grad_check(net_t *t, const float *g, size_t stride, double *worst,
                         double *median) {
  const float eps = 1e-3f;
  size_t cnt = 0, over = 0;
  double *errs = malloc((t->np / stride + 1) * sizeof *errs);
  if (!errs) return 1.0;
  *worst = 0;
  for (size_t i = 0; i < t->np; i += stride) {
    float p0 = t->params[i];
    t->params[i] = p0 + eps;
    double lp = loss_at(t);
    t->params[i] = p0 - eps;
    double lm = loss_at(t);
    t->params[i] = p0;
    double num = (lp - lm) / (2.0 * eps);
    double den = fmax(fmax(fabs(g[i]), fabs(num)), 1e-3);
    double err = fabs(g[i] - num) / den;
    if (!(err <= GC_TOL)) over++; /* NaN counts as over */
    if (!(err <= *worst)) *worst = err;
    errs[cnt++] = err;
  }
  for (size_t i = 1; i < cnt; i++) /* insertion sort: the median */
    for (size_t j = i; j > 0 && errs[j - 1] > errs[j]; j--) {
      double x = errs[j];
      errs[j] = errs[j - 1];
      errs[j - 1] = x;
    }
  *median = errs[cnt / 2];
  free(errs);
  return (double)over / (double)cnt;
}

static void check_side(int side, int rows, size_t stride) {
  net_t t;
  CHECK_OK(net_new(&t, side, rows));
  double loss = 0;
  CHECK_OK(sg_model_grad(t.m, t.params, &t.b, t.grad, &loss));
  CHECK(isfinite(loss) && loss > 0);
  double worst = 0, med = 0;
  double frac = grad_check(&t, t.grad, stride, &worst, &med);
  fprintf(stderr, "  %s: every %zu-th of %zu params: median relative error %.3g, max %.3g, "
          "%.2f %% above %g\n", sg_model_describe(t.m), stride, t.np, med, worst, 100 * frac,
          GC_TOL);
  CHECK(frac <= GC_FRAC);
  CHECK(med < GC_TOL / 10);
  /* planted: every gradient from the first dense layer on 20 % off
   * (conv1 6x25+6 and conv2 16x150+16 parameters come first) */
  float *bad = malloc(t.np * sizeof *bad);
  CHECK(bad);
  memcpy(bad, t.grad, t.np * sizeof *bad);
  for (size_t i = 2572; i < t.np; i++) bad[i] *= 1.2f;
  frac = grad_check(&t, bad, stride, &worst, &med);
  fprintf(stderr, "  planted 20 %% error in the dense layers: %.2f %% above %g\n", 100 * frac,
          GC_TOL);
  CHECK(frac > GC_FRAC);
  free(bad);
  net_free(&t);
}

TEST(grad_check_16) { check_side(16, 4, 1); }
TEST(grad_check_28) { check_side(28, 3, 37); }

typedef struct {
  size_t off[64], len[64];
  int n;
} ranges_t;

static void record(void *arg, size_t off, size_t len) {
  ranges_t *r = arg;
  if (r->n < 64) {
    r->off[r->n] = off;
    r->len[r->n] = len;
  }
  r->n++;
}

TEST(hook) {
  net_t t;
  CHECK_OK(net_new(&t, 28, 8));
  CHECK_EQ_INT((int)t.np, 44426);
  double l0 = 0, l1 = 0, l2 = 0;
  float *g0 = malloc(t.np * sizeof *g0), *g2 = malloc(t.np * sizeof *g2);
  CHECK(g0 && g2);
  CHECK_OK(sg_model_grad(t.m, t.params, &t.b, g0, &l0));
  ranges_t r = {.n = 0};
  sg_model_set_grad_hook(t.m, record, &r);
  CHECK_OK(sg_model_grad(t.m, t.params, &t.b, t.grad, &l1));
  sg_model_set_grad_hook(t.m, NULL, NULL);
  CHECK_OK(sg_model_grad(t.m, t.params, &t.b, g2, &l2));
  CHECK_EQ_INT(r.n, 10);
  size_t end = t.np;
  for (int i = 0; i < r.n && i < 64; i++) { /* descending, adjoining */
    CHECK(r.off[i] + r.len[i] == end);
    end = r.off[i];
  }
  CHECK(end == 0);
  CHECK(r.len[0] == 10 && r.len[1] == 840);          /* dense 3: b, W */
  CHECK(r.len[8] == 6 && r.len[9] == 150);           /* conv1: b, W */
  CHECK(memcmp(g0, t.grad, t.np * sizeof *g0) == 0); /* hook changes no bit */
  CHECK(memcmp(g0, g2, t.np * sizeof *g0) == 0);
  CHECK(l0 == l1 && l0 == l2);
  free(g0);
  free(g2);
  net_free(&t);
}

TEST(gemms) {
  sg_model_t *m = NULL;
  CHECK_OK(sg_model_new(&m, "cnn", 784, 10, NULL, 0, 0, 64));
  sg_gemm_shape_t g[32];
  CHECK_EQ_INT(sg_model_gemms(m, 64, g, 32), 14);
  /* fwd C1: (64*24*24) x 6 x 25; fwd C2: (64*8*8) x 16 x 150 */
  CHECK(g[0].m == 64 * 576 && g[0].n == 6 && g[0].k == 25 && g[0].ta == 'N' &&
        g[0].tb == 'T' && g[0].beta == 1.0f);
  CHECK(g[1].m == 64 * 64 && g[1].n == 16 && g[1].k == 150);
  CHECK(g[2].m == 64 && g[2].n == 120 && g[2].k == 256);
  CHECK(g[5].ta == 'T' && g[5].m == 10 && g[5].n == 84 && g[5].k == 64); /* dW F3 */
  CHECK(g[11].ta == 'T' && g[11].m == 16 && g[11].n == 150 && g[11].k == 64 * 64);
  CHECK(g[12].ta == 'N' && g[12].tb == 'N' && g[12].m == 64 * 64 && g[12].n == 150 &&
        g[12].k == 16); /* dX C2 (im2col's patches) */
  CHECK(g[13].m == 6 && g[13].n == 25 && g[13].k == 64 * 576); /* dW C1 */
  CHECK_STR_CONTAINS(sg_model_describe(m), "cnn 28x28");
  sg_model_destroy(&m);
}

TEST(refused) {
  sg_model_t *m = NULL;
  CHECK_EQ_INT(sg_model_new(&m, "cnn", 785, 10, NULL, 0, 0, 8), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "square");
  CHECK_EQ_INT(sg_model_new(&m, "cnn", 18 * 18, 10, NULL, 0, 0, 8), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "18");
  CHECK_EQ_INT(sg_model_new(&m, "cnn", 784, 10, NULL, 0, 1, 8), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "sparse");
  CHECK(m == NULL);
}
