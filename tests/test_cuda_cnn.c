/* test_cuda_cnn.c - `model: cnn` on the device, proven on the CPU.
 *
 * The device CNN (core/cuda/cuda_cnn.c) is cuda_cnn_step.c's sequence of
 * operations with kernels whose per-thread bodies are cuda_cnn_index.h's.
 * The twin here runs that same sequence with a CPU backend: every body
 * for every thread index (in DESCENDING order, where the host model's
 * loops ascend: the bodies may not depend on the order threads run in),
 * and the host's cblas_sgemm for the products.  cuBLAS adds in another
 * order than OpenBLAS, so the device's products (and so its gradient)
 * differ from the CPU's by float rounding; the twin uses the host sgemm
 * and model_softmax.c's cross-entropy (the device's sg_k_xent is checked
 * against it on a GPU by test_cuda_gpu), so everything else must be
 * EXACT:
 *  - layout: the geometry's per-layer offsets are the host model's (its
 *    backward hook reports each tensor's range), nparams equal;
 *  - twin_equals_host_28 / _16: the twin's training loss, every gradient
 *    element and the evaluation's loss sum and correct count equal
 *    model_cnn.c's bit for bit (28 x 28 and 16 x 16 images, 1 and 5
 *    rows, two calls in a row); twin_colmajor_equals_host: the same with
 *    the products issued as the device issues them to cuBLAS (the
 *    column-major call of sg_cnn_colmajor, to cblas in column-major);
 *  - planted_*: an off-by-one in im2col (a patch's columns shifted by one)
 *    and in the pool's scatter (the gradient sent to the element before
 *    the maximum) each make the twin differ from the host;
 *  - finite_differences: the twin's gradient against central differences
 *    of the twin's own loss (every 2nd parameter of a 16 x 16 net, the
 *    bounds of test_model_cnn.c), and the same check on the planted
 *    scatter fails.
 */
#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_cnn_index.h"
#include "cuda/cuda_cnn_step.h"
#include "err.h"
#include "model.h"
#include "rng.h"
#include "test.h"

#define GC_TOL 5e-2  /* relative error, analytic vs numeric (test_model_cnn.c) */
#define GC_FRAC 0.02 /* share of parameters allowed above GC_TOL (kinks) */

/* ---- the CPU backend: every thread index, descending ------------------- */

typedef struct twin {
  double loss_sum;
  int64_t correct;
} twin_t;

#define EVERY(t, cnt) for (size_t t = (cnt); t-- > 0;)

static int t_gemm(void *ctx, char ta, char tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) {
  (void)ctx;
  cblas_sgemm(CblasRowMajor, ta == 'T' ? CblasTrans : CblasNoTrans,
              tb == 'T' ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, A, lda, B, ldb, beta, C, ldc);
  return SG_OK;
}
/* the device's mapping: the column-major call of sg_cnn_colmajor */
static int t_gemm_cm(void *ctx, char ta, char tb, int m, int n, int k, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
  (void)ctx;
  const sg_cnn_colmajor_t g = sg_cnn_colmajor(ta, tb, m, n, k, A, lda, B, ldb);
  cblas_sgemm(CblasColMajor, g.ta == 'T' ? CblasTrans : CblasNoTrans,
              g.tb == 'T' ? CblasTrans : CblasNoTrans, g.m, g.n, g.k, 1.0f, g.A, g.lda, g.B,
              g.ldb, beta, C, ldc);
  return SG_OK;
}
static int t_fill(void *ctx, float *Z, const float *b, int rows, int out) {
  (void)ctx;
  EVERY(t, (size_t)rows * (size_t)out) sg_cnn_fill1(Z, b, out, t);
  return SG_OK;
}
static int t_relu(void *ctx, float *Z, size_t cnt) {
  (void)ctx;
  EVERY(t, cnt) sg_cnn_relu1(Z, t);
  return SG_OK;
}
static int t_relu_back(void *ctx, float *G, const float *A, size_t cnt) {
  (void)ctx;
  EVERY(t, cnt) sg_cnn_relu_back1(G, A, t);
  return SG_OK;
}
static int t_colsum(void *ctx, const float *G, size_t rows, int out, float *db) {
  (void)ctx;
  EVERY(t, (size_t)out) sg_cnn_colsum1(G, rows, out, db, t);
  return SG_OK;
}
static int t_im2col(void *ctx, const sg_cnn_conv_t *v, const float *X, float *cols, int n) {
  (void)ctx;
  EVERY(t, sg_cnn_npix(v, n) * (size_t)v->kkc) sg_cnn_im2col1(v, X, cols, t);
  return SG_OK;
}
static int t_col2im(void *ctx, const sg_cnn_conv_t *v, const float *dcols, float *dX, int n) {
  (void)ctx;
  EVERY(t, sg_cnn_nin(v, n)) sg_cnn_col2im1(v, dcols, dX, t);
  return SG_OK;
}
static int t_pool(void *ctx, const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg,
                  int n) {
  (void)ctx;
  EVERY(t, sg_cnn_npooled(v, n)) sg_cnn_pool1(v, z, p, arg, t);
  return SG_OK;
}
static int t_unpool(void *ctx, const sg_cnn_conv_t *v, const int32_t *arg, const float *dp,
                    float *dz, int n) {
  (void)ctx;
  memset(dz, 0, sg_cnn_npix(v, n) * (size_t)v->cout * sizeof *dz);
  EVERY(t, sg_cnn_npooled(v, n)) sg_cnn_unpool1(arg, dp, dz, t);
  return SG_OK;
}
static int t_xent(void *ctx, float *Z, const int32_t *y, int n, int C, float gscale,
                  int want_grad) {
  twin_t *w = ctx;
  w->loss_sum = sg_softmax_xent(Z, y, n, C, gscale, want_grad, &w->correct);
  return SG_OK;
}

/* planted: im2col with a patch's columns shifted by one (kx - 1) */
static int bad_im2col(void *ctx, const sg_cnn_conv_t *v, const float *X, float *cols, int n) {
  (void)ctx;
  EVERY(t, sg_cnn_npix(v, n) * (size_t)v->kkc) {
    const size_t row = t / (size_t)v->kkc, j = t % (size_t)v->kkc;
    const size_t pix = (size_t)v->oh * (size_t)v->ow, pr = (size_t)SG_CNN_KS * (size_t)v->cin;
    const size_t i = row / pix, oy = row % pix / (size_t)v->ow, ox = row % (size_t)v->ow;
    const size_t ky = j / pr, kx = j % pr / (size_t)v->cin, c = j % (size_t)v->cin;
    const size_t sx = ox + (kx ? kx - 1 : 0);
    cols[t] = X[((i * (size_t)v->h + oy + ky) * (size_t)v->w + sx) * (size_t)v->cin + c];
  }
  return SG_OK;
}

/* planted: the pool's scatter one element off (the one before the maximum) */
static int bad_unpool(void *ctx, const sg_cnn_conv_t *v, const int32_t *arg, const float *dp,
                      float *dz, int n) {
  (void)ctx;
  memset(dz, 0, sg_cnn_npix(v, n) * (size_t)v->cout * sizeof *dz);
  EVERY(t, sg_cnn_npooled(v, n)) dz[arg[t] - (arg[t] > 0)] = dp[t];
  return SG_OK;
}

static sg_cnn_ops_t twin_ops(twin_t *w) {
  return (sg_cnn_ops_t){t_gemm, t_fill, t_relu, t_relu_back, t_colsum, t_im2col, t_col2im,
                        t_pool, t_unpool, t_xent, w, NULL};
}

/* ---- a net: the host model and the twin on the same parameters --------- */

typedef struct net {
  int side, rows;
  sg_model_t *m;
  sg_cnn_geom_t g;
  sg_cnn_bufs_t b;
  float *x, *params;
  int32_t y[8];
  sg_batch_t batch;
  size_t np;
} net_t;

static void fill(float *p, size_t n, uint64_t seed, double lo, double hi) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, 77, 0);
  for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * sg_rng_uniform(&r));
}

/* buffers start as NaN: a twin that reads what it never wrote shows */
static int host_alloc(void *arg, void **slot, size_t bytes) {
  (void)arg;
  *slot = malloc(bytes ? bytes : 1);
  if (!*slot) return SG_ENOMEM;
  memset(*slot, 0xff, bytes);
  return SG_OK;
}
static int host_free(void *arg, void **slot, size_t bytes) {
  (void)arg;
  (void)bytes;
  free(*slot);
  *slot = NULL;
  return SG_OK;
}

static int net_new(net_t *t, int side, int rows) {
  memset(t, 0, sizeof *t);
  t->side = side;
  t->rows = rows;
  const size_t d = (size_t)side * (size_t)side;
  if (sg_model_new(&t->m, "cnn", (int64_t)d, 10, NULL, 0, 0, rows) < 0) return -1;
  if (sg_cnn_geom_init(&t->g, side, 10) < 0) return -1;
  if (sg_cnn_bufs_each(&t->b, &t->g, rows, host_alloc, NULL) < 0) return -1;
  t->np = sg_model_nparams(t->m);
  t->x = malloc((size_t)rows * d * sizeof(float));
  t->params = malloc(t->np * sizeof(float));
  float *noise = malloc(t->np * sizeof(float));
  if (!t->x || !t->params || !noise) return -1;
  fill(t->x, (size_t)rows * d, 3 + (uint64_t)side, 0.0, 1.0);
  sg_model_init(t->m, 7, t->params);
  fill(noise, t->np, 9, -0.05, 0.05); /* nonzero biases too */
  for (size_t i = 0; i < t->np; i++) t->params[i] += noise[i];
  free(noise);
  for (int i = 0; i < rows; i++) t->y[i] = (i * 3 + 1) % 10;
  t->batch = (sg_batch_t){.n = rows, .x = t->x, .y = t->y};
  return 0;
}

static void net_free(net_t *t) {
  sg_model_destroy(&t->m);
  sg_cnn_bufs_each(&t->b, &t->g, t->rows, host_free, NULL);
  free(t->x);
  free(t->params);
}

/* The twin's gradient and mean loss for n rows of the net's batch. */
static int twin_grad(net_t *t, const sg_cnn_ops_t *o, int n, float *grad, double *loss) {
  memset(grad, 0xff, t->np * sizeof *grad); /* NaN: every element must be written */
  SG_CHECK(sg_cnn_step_grad(o, &t->g, &t->b, t->params, t->x, t->y, n, grad));
  *loss = ((twin_t *)o->ctx)->loss_sum / n;
  return SG_OK;
}

static size_t count_diff(const float *a, const float *b, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += memcmp(&a[i], &b[i], sizeof *a) != 0;
  return k;
}

/* ---- the tests ---------------------------------------------------------- */

typedef struct ranges {
  size_t off[16], len[16];
  int n;
} ranges_t;

static void record(void *arg, size_t off, size_t len) {
  ranges_t *r = arg;
  if (r->n < 16) {
    r->off[r->n] = off;
    r->len[r->n] = len;
  }
  r->n++;
}

TEST(layout_is_the_host_models) {
  for (int side = 16; side <= 28; side += 12) {
    net_t t;
    CHECK_OK(net_new(&t, side, 2));
    CHECK(t.g.nparams == t.np);
    float *grad = malloc(t.np * sizeof *grad);
    CHECK(grad);
    ranges_t r = {.n = 0};
    double loss = 0;
    sg_model_set_grad_hook(t.m, record, &r);
    CHECK_OK(sg_model_grad(t.m, t.params, &t.batch, grad, &loss));
    CHECK_EQ_INT(r.n, 10); /* bias, weights; last layer first */
    int k = 0;
    for (int l = SG_CNN_NDENSE - 1; l >= 0 && k + 1 < r.n; l--, k += 2) {
      const sg_cnn_dense_t *f = &t.g.fc[l];
      CHECK(r.off[k] == f->offb && r.len[k] == (size_t)f->out);
      CHECK(r.off[k + 1] == f->offW && r.len[k + 1] == (size_t)f->out * (size_t)f->in);
    }
    for (int l = SG_CNN_NCONV - 1; l >= 0 && k + 1 < r.n; l--, k += 2) {
      const sg_cnn_conv_t *v = &t.g.cv[l];
      CHECK(r.off[k] == v->offb && r.len[k] == (size_t)v->cout);
      CHECK(r.off[k + 1] == v->offW && r.len[k + 1] == (size_t)v->cout * (size_t)v->kkc);
    }
    fprintf(stderr, "  side %d: %zu params, conv2 W at %zu, dense 1 W at %zu, b3 at %zu\n",
            side, t.np, t.g.cv[1].offW, t.g.fc[0].offW, t.g.fc[2].offb);
    free(grad);
    net_free(&t);
  }
  sg_cnn_geom_t g;
  CHECK(sg_cnn_geom_init(&g, 18, 10) < 0); /* 14 / 2 = 7: conv2 gives 3x3 */
  CHECK(sg_cnn_geom_init(&g, 28, 1) < 0);
}

/* Twin against host: loss, gradient, evaluation, bit for bit. */
static void equal_to_host(int side, int rows, int colmajor) {
  net_t t;
  twin_t w = {0};
  sg_cnn_ops_t o = twin_ops(&w);
  if (colmajor) o.gemm = t_gemm_cm;
  CHECK_OK(net_new(&t, side, rows));
  float *gh = malloc(t.np * sizeof *gh), *gt = malloc(t.np * sizeof *gt);
  CHECK(gh && gt);
  for (int n = 1; n <= rows; n += rows - 1) {
    sg_batch_t b = t.batch;
    b.n = n;
    for (int call = 0; call < 2; call++) {
      double lh = 0, lt = 0, eh = 0;
      int64_t ch = 0;
      CHECK_OK(sg_model_grad(t.m, t.params, &b, gh, &lh));
      CHECK_OK(twin_grad(&t, &o, n, gt, &lt));
      size_t diff = count_diff(gh, gt, t.np);
      CHECK_MSG(diff == 0, "side %d, %d rows, call %d: %zu of %zu gradient elements differ",
                side, n, call, diff, t.np);
      CHECK_MSG(lh == lt, "loss %.17g (host) vs %.17g (twin)", lh, lt);
      CHECK_OK(sg_model_eval(t.m, t.params, &b, &eh, &ch));
      w.correct = 0;
      CHECK_OK(sg_cnn_step_eval(&o, &t.g, &t.b, t.params, t.x, t.y, n));
      CHECK_MSG(eh == w.loss_sum && ch == w.correct, "eval %.17g/%lld vs %.17g/%lld", eh,
                (long long)ch, w.loss_sum, (long long)w.correct);
      if (call == 0)
        fprintf(stderr, "  side %d, %d row(s)%s: loss %.9g, %zu gradient elements equal, "
                "eval loss sum %.9g, %lld correct\n", side, n,
                colmajor ? ", column-major sgemm" : "", lt, t.np, w.loss_sum,
                (long long)w.correct);
    }
  }
  free(gh);
  free(gt);
  net_free(&t);
}

TEST(twin_equals_host_28) { equal_to_host(28, 5, 0); }
TEST(twin_equals_host_16) { equal_to_host(16, 4, 0); }
/* the products through the device's row- to column-major mapping */
TEST(twin_colmajor_equals_host) { equal_to_host(28, 5, 1); }

/* A planted op must make the twin differ from the host. */
static void planted(sg_cnn_ops_t o, const char *what) {
  net_t t;
  size_t diff = 0;
  CHECK_OK(net_new(&t, 28, 3));
  float *gh = malloc(t.np * sizeof *gh), *gt = malloc(t.np * sizeof *gt);
  CHECK(gh && gt);
  double lh = 0, lt = 0;
  CHECK_OK(sg_model_grad(t.m, t.params, &t.batch, gh, &lh));
  CHECK_OK(twin_grad(&t, &o, t.rows, gt, &lt));
  diff = count_diff(gh, gt, t.np);
  fprintf(stderr, "  planted %s: %zu of %zu gradient elements differ (loss %s)\n", what, diff,
          t.np, lh == lt ? "equal" : "differs");
  CHECK_MSG(diff > 0, "planted %s: the twin still equals the host", what);
  free(gh);
  free(gt);
  net_free(&t);
}

TEST(planted_im2col_off_by_one_is_caught) {
  twin_t w = {0};
  sg_cnn_ops_t o = twin_ops(&w);
  o.im2col = bad_im2col;
  planted(o, "im2col kx - 1");
}

TEST(planted_pool_scatter_off_by_one_is_caught) {
  twin_t w = {0};
  sg_cnn_ops_t o = twin_ops(&w);
  o.unpool = bad_unpool;
  planted(o, "pool scatter arg - 1");
}

/* Central differences (step 1e-3) of the twin's own loss at every
 * stride-th parameter against gradient g; the fraction above GC_TOL. */
static double fd_check(net_t *t, const sg_cnn_ops_t *o, const float *g, size_t stride,
                       double *worst, double *median) {
  const float eps = 1e-3f;
  twin_t *w = o->ctx;
  size_t cnt = 0, over = 0;
  double *errs = malloc((t->np / stride + 1) * sizeof *errs);
  if (!errs) return 1.0;
  *worst = 0;
  for (size_t i = 0; i < t->np; i += stride) {
    const float p0 = t->params[i];
    double l[2];
    for (int s = 0; s < 2; s++) {
      t->params[i] = s ? p0 - eps : p0 + eps;
      if (sg_cnn_step_eval(o, &t->g, &t->b, t->params, t->x, t->y, t->rows) < 0) l[s] = NAN;
      else l[s] = w->loss_sum / t->rows;
    }
    t->params[i] = p0;
    const double num = (l[0] - l[1]) / (2.0 * eps);
    const double err = fabs(g[i] - num) / fmax(fmax(fabs(g[i]), fabs(num)), 1e-3);
    if (!(err <= GC_TOL)) over++;
    if (!(err <= *worst)) *worst = err;
    errs[cnt++] = err;
  }
  for (size_t i = 1; i < cnt; i++)
    for (size_t j = i; j > 0 && errs[j - 1] > errs[j]; j--) {
      const double x = errs[j];
      errs[j] = errs[j - 1];
      errs[j - 1] = x;
    }
  *median = errs[cnt / 2];
  free(errs);
  return (double)over / (double)cnt;
}

TEST(finite_differences) {
  net_t t;
  twin_t w = {0};
  sg_cnn_ops_t o = twin_ops(&w), bad = o;
  bad.unpool = bad_unpool;
  CHECK_OK(net_new(&t, 16, 4));
  float *g = malloc(t.np * sizeof *g);
  CHECK(g);
  double loss = 0, worst = 0, med = 0;
  CHECK_OK(twin_grad(&t, &o, t.rows, g, &loss));
  double frac = fd_check(&t, &o, g, 2, &worst, &med);
  fprintf(stderr, "  twin, 16x16, every 2nd of %zu params: median relative error %.3g, max "
          "%.3g, %.2f %% above %g\n", t.np, med, worst, 100 * frac, GC_TOL);
  CHECK(frac <= GC_FRAC);
  CHECK(med < GC_TOL / 10);
  CHECK_OK(twin_grad(&t, &bad, t.rows, g, &loss));
  frac = fd_check(&t, &o, g, 2, &worst, &med);
  fprintf(stderr, "  planted scatter: median %.3g, %.2f %% above %g\n", med, 100 * frac, GC_TOL);
  CHECK(frac > GC_FRAC);
  free(g);
  net_free(&t);
}
