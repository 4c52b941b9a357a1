/* model_cnn.c - the LeNet-5-like CNN (model_cnn.h): im2col convolutions,
 * 2x2 max-pools and three dense layers, every product through cblas_sgemm.
 * Every loop runs in a fixed order, so a step's bits depend on its inputs
 * (and the CPU's BLAS kernels) alone.
 */
#include "model_cnn.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

#define KS 5       /* kernel side */
#define NCONV 2
#define NDENSE 3

typedef struct conv {
  int cin, cout, h, w; /* input: h x w x cin */
  int oh, ow, ph, pw;  /* conv output oh x ow x cout, pooled ph x pw x cout */
  int kkc;             /* KS * KS * cin: one patch */
  size_t offW, offb;
  float *cols, *z, *p; /* patches; ReLU(conv) (n*oh*ow x cout); pooled */
  int32_t *arg;        /* per pooled value: its index in z */
  float *dz, *dcols;   /* backward: d loss / d z; d loss / d cols (conv2) */
} conv_t;

typedef struct dense {
  int in, out;
  size_t offW, offb;
  float *a, *g; /* outputs (ReLU, logits on the last); d loss / d Z */
} dense_t;

struct sg_cnn {
  int side, classes, max_rows;
  conv_t cv[NCONV];
  dense_t fc[NDENSE];
  float *dp[NCONV]; /* d loss / d pooled output of conv l */
  size_t nparams;
  char desc[160];
};

static float *falloc(size_t n, int *bad) {
  float *p = malloc((n ? n : 1) * sizeof(float));
  if (!p) *bad = 1;
  return p;
}

static int conv_alloc(conv_t *c, int rows) {
  int bad = 0;
  const size_t px = (size_t)rows * (size_t)c->oh * (size_t)c->ow;
  const size_t pooled = (size_t)rows * (size_t)c->ph * (size_t)c->pw * (size_t)c->cout;
  c->cols = falloc(px * (size_t)c->kkc, &bad);
  c->z = falloc(px * (size_t)c->cout, &bad);
  c->dz = falloc(px * (size_t)c->cout, &bad);
  c->p = falloc(pooled, &bad);
  c->arg = malloc(pooled * sizeof *c->arg);
  if (c->cin > 1) c->dcols = falloc(px * (size_t)c->kkc, &bad);
  return bad || !c->arg ? -1 : 0;
}

/* Shapes and offsets; 0, or -1 when the side does not pool evenly. */
static int cnn_shapes(sg_cnn_t *c) {
  static const int ch[NCONV + 1] = {1, 6, 16};
  static const int width[NDENSE] = {120, 84, 0};
  int h = c->side;
  size_t off = 0;
  for (int l = 0; l < NCONV; l++) {
    conv_t *v = &c->cv[l];
    v->cin = ch[l];
    v->cout = ch[l + 1];
    v->h = v->w = h;
    v->oh = v->ow = h - KS + 1;
    if (v->oh < 2 || v->oh % 2) return -1;
    v->ph = v->pw = v->oh / 2;
    v->kkc = KS * KS * v->cin;
    v->offW = off;
    off += (size_t)v->cout * (size_t)v->kkc;
    v->offb = off;
    off += (size_t)v->cout;
    h = v->ph;
  }
  int in = h * h * ch[NCONV];
  for (int l = 0; l < NDENSE; l++) {
    dense_t *f = &c->fc[l];
    f->in = in;
    f->out = l + 1 < NDENSE ? width[l] : c->classes;
    f->offW = off;
    off += (size_t)f->out * (size_t)f->in;
    f->offb = off;
    off += (size_t)f->out;
    in = f->out;
  }
  c->nparams = off;
  return 0;
}

int sg_cnn_new(sg_cnn_t **out, int64_t d, int classes, int sparse_input, int max_rows) {
  if (sparse_input)
    return sg_err_set(SG_ECONFIG, "model: cnn needs dense image input (the data is sparse)");
  int side = (int)lrint(sqrt((double)d));
  if (d < 1 || (int64_t)side * side != d || classes < 2 || max_rows < 1)
    return sg_err_set(SG_ECONFIG, "model: cnn needs square single-channel images (%lld "
                      "features is not s x s)", (long long)d);
  sg_cnn_t *c = calloc(1, sizeof *c);
  if (!c) return SG_ENOMEM;
  c->side = side;
  c->classes = classes;
  c->max_rows = max_rows;
  if (cnn_shapes(c) < 0) {
    sg_cnn_destroy(&c);
    return sg_err_set(SG_ECONFIG, "model: cnn needs an image side s with s - 4 and "
                      "(s - 4) / 2 - 4 even and positive (16, 20, 24, 28, ...), not %d", side);
  }
  int bad = 0;
  for (int l = 0; l < NCONV; l++) {
    bad |= conv_alloc(&c->cv[l], max_rows);
    c->dp[l] = falloc((size_t)max_rows * (size_t)(c->cv[l].ph * c->cv[l].pw * c->cv[l].cout),
                      &bad);
  }
  for (int l = 0; l < NDENSE; l++) {
    c->fc[l].a = falloc((size_t)max_rows * (size_t)c->fc[l].out, &bad);
    c->fc[l].g = falloc((size_t)max_rows * (size_t)c->fc[l].out, &bad);
  }
  if (bad) {
    sg_cnn_destroy(&c);
    return sg_err_set(SG_ENOMEM, "cnn buffers for %d rows", max_rows);
  }
  snprintf(c->desc, sizeof c->desc, "cnn %dx%d c5x6-p2-c5x16-p2-%d-%d-%d-%d (%zu params)",
           side, side, c->fc[0].in, c->fc[0].out, c->fc[1].out, c->fc[2].out, c->nparams);
  *out = c;
  return SG_OK;
}

void sg_cnn_destroy(sg_cnn_t **pc) {
  if (!pc || !*pc) return;
  sg_cnn_t *c = *pc;
  for (int l = 0; l < NCONV; l++) {
    conv_t *v = &c->cv[l];
    free(v->cols);
    free(v->z);
    free(v->dz);
    free(v->p);
    free(v->arg);
    free(v->dcols);
    free(c->dp[l]);
  }
  for (int l = 0; l < NDENSE; l++) {
    free(c->fc[l].a);
    free(c->fc[l].g);
  }
  free(c);
  *pc = NULL;
}

size_t sg_cnn_nparams(const sg_cnn_t *c) { return c->nparams; }
const char *sg_cnn_describe(const sg_cnn_t *c) { return c->desc; }

static void he_uniform(float *W, size_t cnt, int fan_in, uint64_t seed, uint64_t tensor) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, SG_RNG_INIT, tensor);
  const double bound = sqrt(6.0 / (double)fan_in);
  for (size_t i = 0; i < cnt; i++) W[i] = (float)((2.0 * sg_rng_uniform(&r) - 1.0) * bound);
}

void sg_cnn_init(const sg_cnn_t *c, uint64_t seed, float *params) {
  memset(params, 0, c->nparams * sizeof *params);
  for (int l = 0; l < NCONV; l++) {
    const conv_t *v = &c->cv[l];
    he_uniform(params + v->offW, (size_t)v->cout * (size_t)v->kkc, v->kkc, seed, (uint64_t)l);
  }
  for (int l = 0; l < NDENSE; l++) {
    const dense_t *f = &c->fc[l];
    he_uniform(params + f->offW, (size_t)f->out * (size_t)f->in, f->in, seed,
               (uint64_t)(NCONV + l));
  }
}

/* ---- convolution layers ------------------------------------------- */

/* cols row (i, oy, ox) = the KS x KS x cin patch of X at (oy, ox). */
static void im2col(const conv_t *v, const float *X, int n) {
  const size_t patch_row = (size_t)KS * (size_t)v->cin;
  for (int i = 0; i < n; i++)
    for (int oy = 0; oy < v->oh; oy++)
      for (int ox = 0; ox < v->ow; ox++) {
        float *dst = v->cols + ((size_t)(i * v->oh + oy) * (size_t)v->ow + (size_t)ox) *
                                   (size_t)v->kkc;
        for (int ky = 0; ky < KS; ky++) {
          const float *src =
              X + (((size_t)i * (size_t)v->h + (size_t)(oy + ky)) * (size_t)v->w + (size_t)ox) *
                      (size_t)v->cin;
          memcpy(dst + (size_t)ky * patch_row, src, patch_row * sizeof *dst);
        }
      }
}

/* dX = col2im(dcols): every patch element added back to its pixel, in
 * patch order (fixed, so the sums are reproducible). */
static void col2im(const conv_t *v, float *dX, int n) {
  const size_t patch_row = (size_t)KS * (size_t)v->cin;
  memset(dX, 0, (size_t)n * (size_t)(v->h * v->w * v->cin) * sizeof *dX);
  for (int i = 0; i < n; i++)
    for (int oy = 0; oy < v->oh; oy++)
      for (int ox = 0; ox < v->ow; ox++) {
        const float *src = v->dcols + ((size_t)(i * v->oh + oy) * (size_t)v->ow + (size_t)ox) *
                                          (size_t)v->kkc;
        for (int ky = 0; ky < KS; ky++) {
          float *dst = dX + (((size_t)i * (size_t)v->h + (size_t)(oy + ky)) * (size_t)v->w +
                             (size_t)ox) * (size_t)v->cin;
          const float *s = src + (size_t)ky * patch_row;
          for (size_t j = 0; j < patch_row; j++) dst[j] += s[j];
        }
      }
}

/* 2x2 max-pool of z into p, remembering each maximum's index (the first
 * of equal values). */
static void maxpool(conv_t *v, int n) {
  const int C = v->cout;
  for (int i = 0; i < n; i++)
    for (int py = 0; py < v->ph; py++)
      for (int px = 0; px < v->pw; px++)
        for (int ch = 0; ch < C; ch++) {
          size_t best = 0;
          float m = -INFINITY;
          for (int dy = 0; dy < 2; dy++)
            for (int dx = 0; dx < 2; dx++) {
              size_t at = (((size_t)i * (size_t)v->oh + (size_t)(2 * py + dy)) * (size_t)v->ow +
                           (size_t)(2 * px + dx)) * (size_t)C + (size_t)ch;
              if (v->z[at] > m) {
                m = v->z[at];
                best = at;
              }
            }
          size_t o = (((size_t)i * (size_t)v->ph + (size_t)py) * (size_t)v->pw + (size_t)px) *
                         (size_t)C + (size_t)ch;
          v->p[o] = m;
          v->arg[o] = (int32_t)best;
        }
}

/* z = ReLU(cols W^T + b), then the pool. */
static void conv_forward(conv_t *v, const float *params, const float *X, int n) {
  const int M = n * v->oh * v->ow, C = v->cout;
  const float *b = params + v->offb;
  im2col(v, X, n);
  for (int r = 0; r < M; r++) memcpy(v->z + (size_t)r * (size_t)C, b, (size_t)C * sizeof *b);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, C, v->kkc, 1.0f, v->cols, v->kkc,
              params + v->offW, v->kkc, 1.0f, v->z, C);
  const size_t cnt = (size_t)M * (size_t)C;
  for (size_t i = 0; i < cnt; i++) v->z[i] = v->z[i] > 0.0f ? v->z[i] : 0.0f;
  maxpool(v, n);
}

/* From dp (d loss / d pooled output) to db, dW and, given dX, the input's
 * gradient.  The hook sees db, then dW. */
static void conv_backward(conv_t *v, const float *params, const float *dp, int n, float *grad,
                          float *dX, sg_grad_ready_fn ready, void *arg) {
  const int M = n * v->oh * v->ow, C = v->cout;
  const size_t cnt = (size_t)M * (size_t)C, pooled = (size_t)n * (size_t)(v->ph * v->pw * C);
  memset(v->dz, 0, cnt * sizeof *v->dz);
  for (size_t j = 0; j < pooled; j++) v->dz[v->arg[j]] = dp[j]; /* windows do not overlap */
  for (size_t i = 0; i < cnt; i++) v->dz[i] = v->z[i] > 0.0f ? v->dz[i] : 0.0f;
  float *db = grad + v->offb;
  for (int ch = 0; ch < C; ch++) db[ch] = 0.0f;
  for (int r = 0; r < M; r++)
    for (int ch = 0; ch < C; ch++) db[ch] += v->dz[(size_t)r * (size_t)C + (size_t)ch];
  if (ready) ready(arg, v->offb, (size_t)C);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, v->kkc, M, 1.0f, v->dz, C, v->cols,
              v->kkc, 0.0f, grad + v->offW, v->kkc);
  if (ready) ready(arg, v->offW, (size_t)C * (size_t)v->kkc);
  if (!dX) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, v->kkc, C, 1.0f, v->dz, C,
              params + v->offW, v->kkc, 0.0f, v->dcols, v->kkc);
  col2im(v, dX, n);
}

/* ---- dense layers -------------------------------------------------- */

static void dense_forward(dense_t *f, const float *params, const float *X, int n, int relu) {
  for (int i = 0; i < n; i++)
    memcpy(f->a + (size_t)i * (size_t)f->out, params + f->offb, (size_t)f->out * sizeof(float));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, f->out, f->in, 1.0f, X, f->in,
              params + f->offW, f->in, 1.0f, f->a, f->out);
  if (!relu) return;
  const size_t cnt = (size_t)n * (size_t)f->out;
  for (size_t i = 0; i < cnt; i++) f->a[i] = f->a[i] > 0.0f ? f->a[i] : 0.0f;
}

/* f->g holds d loss / d Z; writes db, dW (hook: db, then dW) and the
 * input's gradient dX = g W masked by the input's ReLU (Xact > 0). */
static void dense_backward(dense_t *f, const float *params, const float *X, int n, float *grad,
                           float *dX, const float *Xact, sg_grad_ready_fn ready, void *arg) {
  float *db = grad + f->offb;
  for (int o = 0; o < f->out; o++) db[o] = 0.0f;
  for (int i = 0; i < n; i++)
    for (int o = 0; o < f->out; o++) db[o] += f->g[(size_t)i * (size_t)f->out + (size_t)o];
  if (ready) ready(arg, f->offb, (size_t)f->out);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, f->out, f->in, n, 1.0f, f->g, f->out, X,
              f->in, 0.0f, grad + f->offW, f->in);
  if (ready) ready(arg, f->offW, (size_t)f->out * (size_t)f->in);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, f->in, f->out, 1.0f, f->g, f->out,
              params + f->offW, f->in, 0.0f, dX, f->in);
  if (!Xact) return;
  const size_t cnt = (size_t)n * (size_t)f->in;
  for (size_t i = 0; i < cnt; i++) dX[i] = Xact[i] > 0.0f ? dX[i] : 0.0f;
}

/* ---- the step ------------------------------------------------------ */

static int check_batch(const sg_cnn_t *c, const sg_batch_t *b) {
  if (b->n < 1 || b->n > c->max_rows)
    return sg_err_set(SG_EINVAL, "batch of %d rows (model sized for %d)", b->n, c->max_rows);
  if (b->rowptr) return sg_err_set(SG_EINVAL, "batch is CSR, the cnn expects dense input");
  return SG_OK;
}

/* Leaves the logits in fc[NDENSE-1].a. */
static void cnn_forward(sg_cnn_t *c, const float *params, const sg_batch_t *b) {
  const int n = b->n;
  conv_forward(&c->cv[0], params, b->x, n);
  conv_forward(&c->cv[1], params, c->cv[0].p, n);
  const float *X = c->cv[1].p;
  for (int l = 0; l < NDENSE; l++) {
    dense_forward(&c->fc[l], params, X, n, l + 1 < NDENSE);
    X = c->fc[l].a;
  }
}

int sg_cnn_grad(sg_cnn_t *c, const float *params, const sg_batch_t *b, float *grad,
                double *loss, sg_grad_ready_fn ready, void *arg) {
  SG_CHECK(check_batch(c, b));
  const int n = b->n;
  cnn_forward(c, params, b);
  dense_t *top = &c->fc[NDENSE - 1];
  /* the logits become d loss / d logits in place; the top layer's g */
  double sum = sg_softmax_xent(top->a, b->y, n, c->classes, 1.0f / (float)n, 1, NULL);
  *loss = sum / n;
  memcpy(top->g, top->a, (size_t)n * (size_t)top->out * sizeof(float));
  for (int l = NDENSE - 1; l >= 0; l--) {
    dense_t *f = &c->fc[l];
    const float *X = l ? c->fc[l - 1].a : c->cv[NCONV - 1].p;
    float *dX = l ? c->fc[l - 1].g : c->dp[NCONV - 1];
    /* pooled outputs are >= 0 with zero gradient below ReLU already */
    dense_backward(f, params, X, n, grad, dX, l ? X : NULL, ready, arg);
  }
  conv_backward(&c->cv[1], params, c->dp[1], n, grad, c->dp[0], ready, arg);
  conv_backward(&c->cv[0], params, c->dp[0], n, grad, NULL, ready, arg);
  return SG_OK;
}

int sg_cnn_eval(sg_cnn_t *c, const float *params, const sg_batch_t *b, double *loss_sum,
                int64_t *correct) {
  SG_CHECK(check_batch(c, b));
  cnn_forward(c, params, b);
  *loss_sum += sg_softmax_xent(c->fc[NDENSE - 1].a, b->y, b->n, c->classes, 1.0f, 0, correct);
  return SG_OK;
}

size_t sg_cnn_gemms(const sg_cnn_t *c, int rows, sg_gemm_shape_t *out, size_t cap) {
  static const char *const fwd[] = {"fwd C1", "fwd C2", "fwd F1", "fwd F2", "fwd F3"};
  static const char *const dw[] = {"dW C1", "dW C2", "dW F1", "dW F2", "dW F3"};
  static const char *const dx[] = {"dX C1", "dX C2", "dX F1", "dX F2", "dX F3"};
  size_t k = 0;
#define PUSH(TA, TB, M, N, K, BETA, WHAT)                                       \
  do {                                                                          \
    if (k < cap) out[k] = (sg_gemm_shape_t){TA, TB, (M), (N), (K), BETA, WHAT}; \
    k++;                                                                        \
  } while (0)
  for (int l = 0; l < NCONV; l++) {
    const conv_t *v = &c->cv[l];
    PUSH('N', 'T', rows * v->oh * v->ow, v->cout, v->kkc, 1.0f, fwd[l]);
  }
  for (int l = 0; l < NDENSE; l++)
    PUSH('N', 'T', rows, c->fc[l].out, c->fc[l].in, 1.0f, fwd[NCONV + l]);
  for (int l = NDENSE - 1; l >= 0; l--) {
    PUSH('T', 'N', c->fc[l].out, c->fc[l].in, rows, 0.0f, dw[NCONV + l]);
    PUSH('N', 'N', rows, c->fc[l].in, c->fc[l].out, 0.0f, dx[NCONV + l]);
  }
  for (int l = NCONV - 1; l >= 0; l--) {
    const conv_t *v = &c->cv[l];
    PUSH('T', 'N', v->cout, v->kkc, rows * v->oh * v->ow, 0.0f, dw[l]);
    if (l > 0) PUSH('N', 'N', rows * v->oh * v->ow, v->kkc, v->cout, 0.0f, dx[l]);
  }
#undef PUSH
  return k;
}
