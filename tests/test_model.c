/* Models: finite-difference gradient checks (softmax dense and CSR, MLP),
 * a planted wrong gradient that the check must catch, CSR == dense, a
 * stable loss for huge logits, and dW blocks fixed by the layer's shape
 * (the backward hook sees them and changes no bit of the gradient). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "rng.h"
#include "test.h"

#define GC_TOL 1e-2 /* max relative error of analytic vs numeric gradient */

static void fill(float *p, size_t n, uint64_t seed, double scale) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, 77, 0);
  for (size_t i = 0; i < n; i++) p[i] = (float)((2 * sg_rng_uniform(&r) - 1) * scale);
}

static double loss_at(sg_model_t *m, const float *params, const sg_batch_t *b) {
  double s = 0;
  int64_t c = 0;
  if (sg_model_eval(m, params, b, &s, &c) < 0) return NAN;
  return s / b->n;
}

/* max_i |g_i - num_i| / max(|g_i| + |num_i|, 1e-2), central differences
 * of the float model with step 1e-3. */
static double grad_check(sg_model_t *m, float *params, const sg_batch_t *b,
                         const float *g) {
  const size_t n = sg_model_nparams(m);
  const float eps = 1e-3f;
  double worst = 0;
  for (size_t i = 0; i < n; i++) {
    float p0 = params[i];
    params[i] = p0 + eps;
    double lp = loss_at(m, params, b);
    params[i] = p0 - eps;
    double lm = loss_at(m, params, b);
    params[i] = p0;
    double num = (lp - lm) / (2.0 * eps);
    double den = fabs(g[i]) + fabs(num);
    double err = fabs(g[i] - num) / (den > 1e-2 ? den : 1e-2);
    if (!(err <= worst)) worst = err; /* NaN counts as worst */
  }
  return worst;
}

typedef struct {
  int n, d;
  float x[8 * 6];
  int64_t rowptr[9];
  uint32_t col[8 * 6];
  float val[8 * 6];
  int32_t y[8];
} small_data_t;

/* 8 rows, 6 features, 3 classes; CSR with about half the entries. */
static void small_data(small_data_t *s, int sparse_zeros) {
  s->n = 8;
  s->d = 6;
  fill(s->x, 48, 5, 1.5);
  int64_t k = 0;
  s->rowptr[0] = 0;
  for (int i = 0; i < 8; i++) {
    for (int j = 0; j < 6; j++) {
      if (sparse_zeros && (i + j) % 2) s->x[i * 6 + j] = 0.0f;
      if (s->x[i * 6 + j] != 0.0f) {
        s->col[k] = (uint32_t)j;
        s->val[k++] = s->x[i * 6 + j];
      }
    }
    s->rowptr[i + 1] = k;
    s->y[i] = i % 3;
  }
}

static void dense_batch(const small_data_t *s, sg_batch_t *b) {
  memset(b, 0, sizeof *b);
  b->n = s->n;
  b->x = s->x;
  b->y = s->y;
}
static void csr_batch(const small_data_t *s, sg_batch_t *b) {
  memset(b, 0, sizeof *b);
  b->n = s->n;
  b->rowptr = s->rowptr;
  b->col = s->col;
  b->val = s->val;
  b->y = s->y;
}

static void check_model(const char *kind, const int64_t *hidden, size_t nh, int sparse,
                        double *err_out) {
  small_data_t s;
  small_data(&s, sparse);
  sg_model_t *m = NULL;
  *err_out = INFINITY;
  if (sg_model_new(&m, kind, 6, 3, hidden, nh, sparse, 8) < 0) return;
  size_t n = sg_model_nparams(m);
  float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
  fill(p, n, 9, 0.5);
  sg_batch_t b;
  if (sparse) csr_batch(&s, &b);
  else dense_batch(&s, &b);
  double loss;
  if (sg_model_grad(m, p, &b, g, &loss) == 0 && fabs(loss - loss_at(m, p, &b)) < 1e-6)
    *err_out = grad_check(m, p, &b, g);
  free(p);
  free(g);
  sg_model_destroy(&m);
}

TEST(gradcheck_softmax_dense) {
  double e;
  check_model("softmax", NULL, 0, 0, &e);
  CHECK_MSG(e < GC_TOL, "max rel err %g", e);
}

TEST(gradcheck_softmax_csr) {
  double e;
  check_model("softmax", NULL, 0, 1, &e);
  CHECK_MSG(e < GC_TOL, "max rel err %g", e);
}

TEST(gradcheck_mlp) {
  const int64_t h1[] = {5}, h2[] = {7, 4};
  double e;
  check_model("mlp", h1, 1, 0, &e);
  CHECK_MSG(e < GC_TOL, "one hidden layer: max rel err %g", e);
  check_model("mlp", h2, 2, 0, &e);
  CHECK_MSG(e < GC_TOL, "two hidden layers: max rel err %g", e);
  check_model("mlp", h1, 1, 1, &e);
  CHECK_MSG(e < GC_TOL, "CSR input: max rel err %g", e);
}

/* The check must fail on a wrong gradient: scale one weight's gradient by
 * 1.2 (as a transposed index or a missed term would), or drop the 1/n of
 * the mean. */
TEST(gradcheck_catches_planted_bugs) {
  const int64_t h[] = {5};
  small_data_t s;
  small_data(&s, 0);
  sg_model_t *m = NULL;
  CHECK_OK(sg_model_new(&m, "mlp", 6, 3, h, 1, 0, 8));
  size_t n = sg_model_nparams(m);
  float *p = malloc(n * sizeof *p), *g = malloc(n * sizeof *g);
  fill(p, n, 9, 0.5);
  sg_batch_t b;
  dense_batch(&s, &b);
  double loss;
  CHECK_OK(sg_model_grad(m, p, &b, g, &loss));
  CHECK(grad_check(m, p, &b, g) < GC_TOL);
  size_t big = 0;
  for (size_t i = 0; i < n; i++)
    if (fabsf(g[i]) > fabsf(g[big])) big = i;
  float keep = g[big];
  g[big] *= 1.2f;
  CHECK(grad_check(m, p, &b, g) > GC_TOL);
  g[big] = keep;
  for (size_t i = 0; i < n; i++) g[i] *= 8; /* sum instead of mean */
  CHECK(grad_check(m, p, &b, g) > GC_TOL);
  free(p);
  free(g);
  sg_model_destroy(&m);
}

TEST(csr_equals_dense) {
  small_data_t s;
  small_data(&s, 1);
  sg_model_t *md = NULL, *ms = NULL;
  CHECK_OK(sg_model_new(&md, "softmax", 6, 3, NULL, 0, 0, 8));
  CHECK_OK(sg_model_new(&ms, "softmax", 6, 3, NULL, 0, 1, 8));
  size_t n = sg_model_nparams(md);
  CHECK_EQ_INT(n, 6 * 3 + 3);
  float p[21], gd[21], gs[21];
  fill(p, n, 4, 1.0);
  sg_batch_t bd, bs;
  dense_batch(&s, &bd);
  csr_batch(&s, &bs);
  double ld, ls;
  CHECK_OK(sg_model_grad(md, p, &bd, gd, &ld));
  CHECK_OK(sg_model_grad(ms, p, &bs, gs, &ls));
  CHECK_NEAR(ld, ls, 1e-6);
  for (size_t i = 0; i < n; i++) CHECK_NEAR(gd[i], gs[i], 1e-6);
  /* a dense batch to a CSR model is refused */
  CHECK_EQ_INT(sg_model_grad(ms, p, &bd, gs, &ls), SG_EINVAL);
  sg_model_destroy(&md);
  sg_model_destroy(&ms);
}

TEST(softmax_xent_stable_and_counts) {
  /* logits 1e4 apart: naive exp overflows, log-sum-exp does not */
  float z[6] = {1e4f, 0.0f, -1e4f, 0.0f, 2e4f, 1.0f};
  int32_t y[2] = {0, 2};
  int64_t correct = 0;
  double l = sg_softmax_xent(z, y, 2, 3, 0.5f, 1, &correct);
  CHECK(isfinite(l));
  CHECK_NEAR(l, 0.0 + (2e4 - 1.0), 1e-2); /* row 0: ~0; row 1: 2e4 - 1 */
  CHECK_EQ_INT(correct, 1);
  /* gradient rows sum to 0 and are (p - onehot) * 0.5 */
  CHECK_NEAR(z[0] + z[1] + z[2], 0.0, 1e-6);
  CHECK_NEAR(z[0], 0.0, 1e-6);
  CHECK_NEAR(z[4], 0.5, 1e-6);
  CHECK_NEAR(z[5], -0.5, 1e-6);
}

TEST(init_and_layout) {
  const int64_t h[] = {4};
  sg_model_t *m = NULL;
  CHECK_OK(sg_model_new(&m, "mlp", 6, 3, h, 1, 0, 8));
  CHECK_EQ_INT(sg_model_nparams(m), 6 * 4 + 4 + 4 * 3 + 3);
  CHECK_STR_CONTAINS(sg_model_describe(m), "mlp 6-4-3 (43 params)");
  float a[43], b[43], c[43];
  sg_model_init(m, 1, a);
  sg_model_init(m, 1, b);
  sg_model_init(m, 2, c);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
  const float bound1 = sqrtf(6.0f / 6), bound2 = sqrtf(6.0f / 4);
  for (int i = 0; i < 24; i++) CHECK(fabsf(a[i]) <= bound1 && a[i] != 0.0f);
  for (int i = 24; i < 28; i++) CHECK(a[i] == 0.0f); /* bias 1 */
  for (int i = 28; i < 40; i++) CHECK(fabsf(a[i]) <= bound2);
  for (int i = 40; i < 43; i++) CHECK(a[i] == 0.0f);
  sg_gemm_shape_t g[8];
  CHECK_EQ_INT(sg_model_gemms(m, 8, g, 8), 5); /* fwd0 fwd1 dW1 dX1 dW0 */
  CHECK(g[0].m == 8 && g[0].n == 4 && g[0].k == 6 && g[0].ta == 'N' && g[0].tb == 'T');
  CHECK(g[3].m == 8 && g[3].n == 4 && g[3].k == 3 && g[3].ta == 'N' && g[3].tb == 'N');
  CHECK(g[4].m == 4 && g[4].n == 6 && g[4].k == 8 && g[4].ta == 'T');
  sg_model_destroy(&m);
  CHECK(m == NULL);
  CHECK_EQ_INT(sg_model_new(&m, "mlp", 6, 3, h, 0, 0, 8), SG_ECONFIG);
  CHECK_EQ_INT(sg_model_new(&m, "rnn", 6, 3, h, 1, 0, 8), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "model");
  CHECK_OK(sg_model_new(&m, "softmax", 6, 3, NULL, 0, 0, 8));
  sg_model_init(m, 1, a);
  for (int i = 0; i < 21; i++) CHECK(a[i] == 0.0f);
  sg_model_destroy(&m);
}

/* Ranges the backward hook reported, in order. */
typedef struct {
  size_t off[64], len[64];
  int n;
} ranges_t;

static void record_range(void *arg, size_t off, size_t len) {
  ranges_t *r = arg;
  if (r->n < 64) {
    r->off[r->n] = off;
    r->len[r->n] = len;
  }
  r->n++;
}

/* dW blocks depend on the layer's shape only: a dW of at most 1 MiB is
 * one call (784 x 150, 784 x 256), a larger one the fewest 16-row-aligned
 * blocks of about 1 MiB: 784 inputs, 400 outputs -> rows [192, 400),
 * [0, 192); the gradient with the hook set equals
 * the one without it byte for byte (the same sgemm calls), and the hook
 * sees every block, last first, adjoining, covering the vector once. */
TEST(dw_blocks_fixed_by_shape_hook_changes_no_bit) {
  CHECK_EQ_INT(sg_model_dw_rows(784, 150), 150);
  CHECK_EQ_INT(sg_model_dw_rows(784, 256), 256);
  CHECK_EQ_INT(sg_model_dw_rows(784, 400), 208);
  CHECK_EQ_INT(sg_model_dw_rows(784, 2048), 304);
  CHECK_EQ_INT(sg_model_dw_rows(1024, 1024), 256);
  CHECK_EQ_INT(sg_model_dw_rows(32, 10), 10);
  CHECK_EQ_INT(sg_model_dw_rows(100000, 64), 16);
  const int rows = 16, in = 784, hid = 400, C = 10;
  const int64_t h[] = {hid};
  sg_model_t *m = NULL;
  CHECK_OK(sg_model_new(&m, "mlp", in, C, h, 1, 0, rows));
  const size_t n = sg_model_nparams(m);
  float *p = malloc(n * sizeof *p), *g0 = malloc(n * sizeof *g0), *g1 = malloc(n * sizeof *g1);
  float *x = malloc((size_t)rows * in * sizeof *x);
  int32_t y[16];
  CHECK(p && g0 && g1 && x);
  sg_model_init(m, 3, p);
  fill(x, (size_t)rows * in, 4, 1.0);
  for (int i = 0; i < rows; i++) y[i] = i % C;
  sg_batch_t b = {.n = rows, .x = x, .y = y};
  double l0, l1;
  CHECK_OK(sg_model_grad(m, p, &b, g0, &l0));
  ranges_t r = {.n = 0};
  sg_model_set_grad_hook(m, record_range, &r);
  CHECK_OK(sg_model_grad(m, p, &b, g1, &l1));
  sg_model_set_grad_hook(m, NULL, NULL);
  CHECK(memcmp(g0, g1, n * sizeof *g0) == 0);
  CHECK(l0 == l1);
  /* b1, dW1 (one block), b0, dW0 rows [192,400), [0,192) */
  CHECK_EQ_INT(r.n, 5);
  size_t hi = n;
  for (int i = 0; i < r.n && i < 64; i++) {
    CHECK_EQ_INT(r.off[i] + r.len[i], hi);
    hi = r.off[i];
  }
  CHECK_EQ_INT(hi, 0);
  CHECK_EQ_INT(r.len[3], 208 * in);
  CHECK_EQ_INT(r.len[4], 192 * in);
  /* the bench's list of the step's sgemm calls has the same blocks */
  sg_gemm_shape_t gs[16];
  CHECK_EQ_INT(sg_model_gemms(m, rows, gs, 16), 6); /* fwd0 fwd1 dW1 dX1 dW0 x 2 */
  CHECK(gs[4].m == 208 && gs[5].m == 192 && gs[5].n == in && gs[5].k == rows);
  free(p);
  free(g0);
  free(g1);
  free(x);
  sg_model_destroy(&m);
}
