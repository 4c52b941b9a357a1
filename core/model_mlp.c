/* model_mlp.c - the layer stack (see model.h for the step's schedule):
 * MLP with ReLU hidden layers, and softmax regression as the stack with no
 * hidden layer.  Dense layers go through cblas_sgemm; a CSR input layer
 * through sg_csr_forward/backward (model_softmax.c).
 */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "model_cnn.h"
#include "model_embed.h"
#include "rng.h"

struct sg_model {
  int softmax; /* 1: softmax regression (zero init), 0: mlp */
  int L;       /* layers */
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  size_t offW[SG_MODEL_MAX_LAYERS], offb[SG_MODEL_MAX_LAYERS];
  size_t nparams;
  int sparse_input;
  int max_rows;
  float *A[SG_MODEL_MAX_LAYERS + 1]; /* A[l], l >= 1: layer outputs (A[L] = logits) */
  float *G[SG_MODEL_MAX_LAYERS];     /* G[l], 1 <= l < L: d loss / d Z_l */
  sg_grad_ready_fn ready;            /* backward hook (model.h), or NULL */
  void *ready_arg;
  char desc[256];
  sg_cnn_t *cnn; /* model: cnn (model_cnn.c); the rest unused */
  sg_embed_t *embed; /* model: embedding (model_embed.c); the rest but desc unused */
};

int sg_model_new_embed(sg_model_t **out, int fields, int64_t table_rows, int dim, int hidden,
                       int max_rows) {
  char err[160];
  sg_model_t *m = calloc(1, sizeof *m);
  if (!m) return SG_ENOMEM;
  if (sg_embed_new(&m->embed, fields, table_rows, dim, hidden, max_rows, err, sizeof err) < 0) {
    free(m);
    return sg_err_set(SG_ECONFIG, "%s", err);
  }
  snprintf(m->desc, sizeof m->desc, "embedding %dx%lldx%d-%d-2 (%zu params, %zu dense)",
           fields, (long long)table_rows, dim, hidden, sg_embed_nparams(m->embed),
           sg_embed_dense_len(m->embed));
  *out = m;
  return SG_OK;
}

sg_embed_t *sg_model_embed(sg_model_t *m) { return m ? m->embed : NULL; }

int sg_model_new(sg_model_t **out, const char *kind, int64_t d, int classes,
                 const int64_t *hidden, size_t nhidden, int sparse_input,
                 int max_rows) {
  int rc = SG_OK;
  sg_model_t *m = NULL;
  int softmax = strcmp(kind, "softmax") == 0;
  if (!strcmp(kind, "cnn")) {
    if (!(m = calloc(1, sizeof *m))) return SG_ENOMEM;
    if ((rc = sg_cnn_new(&m->cnn, d, classes, sparse_input, max_rows)) == SG_OK) *out = m;
    else free(m);
    return rc;
  }
  if (!softmax && strcmp(kind, "mlp") != 0)
    return sg_err_set(SG_ECONFIG, "model: unknown model '%s' (softmax|mlp|cnn)", kind);
  if (softmax) nhidden = 0;
  if (!softmax && nhidden == 0)
    return sg_err_set(SG_ECONFIG, "hidden: mlp needs at least one hidden layer");
  if (nhidden + 1 > SG_MODEL_MAX_LAYERS)
    return sg_err_set(SG_ECONFIG, "hidden: at most %d hidden layers", SG_MODEL_MAX_LAYERS - 1);
  if (d < 1 || classes < 2 || max_rows < 1)
    return sg_err_set(SG_EINVAL, "model: %lld features, %d classes, %d rows",
                      (long long)d, classes, max_rows);
  m = calloc(1, sizeof *m);
  if (!m) return SG_ENOMEM;
  m->softmax = softmax;
  m->L = (int)nhidden + 1;
  m->sparse_input = sparse_input;
  m->max_rows = max_rows;
  m->dims[0] = d;
  for (size_t i = 0; i < nhidden; i++) {
    if (hidden[i] < 1 || hidden[i] > (1 << 24)) {
      rc = sg_err_set(SG_ECONFIG, "hidden: layer size %lld out of range", (long long)hidden[i]);
      goto fail;
    }
    m->dims[i + 1] = hidden[i];
  }
  m->dims[m->L] = classes;
  size_t off = 0;
  for (int l = 0; l < m->L; l++) {
    m->offW[l] = off;
    off += (size_t)m->dims[l + 1] * (size_t)m->dims[l];
    m->offb[l] = off;
    off += (size_t)m->dims[l + 1];
  }
  m->nparams = off;
  for (int l = 1; l <= m->L; l++) {
    m->A[l] = malloc((size_t)max_rows * (size_t)m->dims[l] * sizeof(float));
    if (!m->A[l]) goto nomem;
    if (l < m->L) {
      m->G[l] = malloc((size_t)max_rows * (size_t)m->dims[l] * sizeof(float));
      if (!m->G[l]) goto nomem;
    }
  }
  int p = snprintf(m->desc, sizeof m->desc, "%s ", softmax ? "softmax" : "mlp");
  for (int l = 0; l <= m->L && p < (int)sizeof m->desc; l++)
    p += snprintf(m->desc + p, sizeof m->desc - (size_t)p, "%s%lld", l ? "-" : "",
                  (long long)m->dims[l]);
  if (p < (int)sizeof m->desc)
    snprintf(m->desc + p, sizeof m->desc - (size_t)p, " (%zu params%s)", m->nparams,
             sparse_input ? ", sparse input" : "");
  *out = m;
  return SG_OK;
nomem:
  rc = sg_err_set(SG_ENOMEM, "model buffers for %d rows", max_rows);
fail:
  sg_model_destroy(&m);
  return rc;
}

void sg_model_destroy(sg_model_t **pm) {
  if (!pm || !*pm) return;
  sg_model_t *m = *pm;
  sg_cnn_destroy(&m->cnn);
  sg_embed_destroy(&m->embed);
  for (int l = 0; l <= SG_MODEL_MAX_LAYERS; l++) free(m->A[l]);
  for (int l = 0; l < SG_MODEL_MAX_LAYERS; l++) free(m->G[l]);
  free(m);
  *pm = NULL;
}

size_t sg_model_nparams(const sg_model_t *m) {
  if (m->embed) return sg_embed_nparams(m->embed);
  return m->cnn ? sg_cnn_nparams(m->cnn) : m->nparams;
}
const char *sg_model_describe(const sg_model_t *m) {
  return m->cnn ? sg_cnn_describe(m->cnn) : m->desc;
}

int sg_model_dims(const sg_model_t *m, int64_t dims[SG_MODEL_MAX_LAYERS + 1]) {
  dims[0] = 0; /* cnn: no dense stack to describe */
  for (int l = 0; l <= m->L; l++) dims[l] = m->dims[l];
  return m->L;
}

void sg_model_init(const sg_model_t *m, uint64_t seed, float *params) {
  if (m->cnn) {
    sg_cnn_init(m->cnn, seed, params);
    return;
  }
  if (m->embed) {
    sg_embed_init(m->embed, seed, params);
    return;
  }
  memset(params, 0, m->nparams * sizeof *params);
  if (m->softmax) return;
  for (int l = 0; l < m->L; l++) {
    sg_rng_t r;
    sg_rng_seed(&r, seed, SG_RNG_INIT, (uint64_t)l);
    const double bound = sqrt(6.0 / (double)m->dims[l]);
    float *W = params + m->offW[l];
    const size_t cnt = (size_t)m->dims[l + 1] * (size_t)m->dims[l];
    for (size_t i = 0; i < cnt; i++) W[i] = (float)((2.0 * sg_rng_uniform(&r) - 1.0) * bound);
  }
}

/* Forward pass through all layers; leaves logits in A[L]. */
static void forward(sg_model_t *m, const float *params, const sg_batch_t *b) {
  const int n = b->n;
  for (int l = 0; l < m->L; l++) {
    const int in = (int)m->dims[l], out = (int)m->dims[l + 1];
    const float *W = params + m->offW[l], *bias = params + m->offb[l];
    float *Z = m->A[l + 1];
    if (l == 0 && m->sparse_input) {
      sg_csr_forward(b, W, bias, m->dims[0], out, Z);
    } else {
      const float *X = l == 0 ? b->x : m->A[l];
      for (int i = 0; i < n; i++) memcpy(Z + (size_t)i * out, bias, (size_t)out * sizeof *Z);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, X, in, W, in,
                  1.0f, Z, out);
    }
    if (l + 1 < m->L) {
      const size_t cnt = (size_t)n * (size_t)out;
      for (size_t i = 0; i < cnt; i++) Z[i] = Z[i] > 0.0f ? Z[i] : 0.0f;
    }
  }
}

void sg_model_set_grad_hook(sg_model_t *m, sg_grad_ready_fn fn, void *arg) {
  m->ready = fn;
  m->ready_arg = arg;
}

/* dW blocks (model.h): a dW of at most DW_BLOCK_FLOATS is one call; a
 * larger one the fewest blocks of whole rows, a multiple of 16 each, of
 * about that size.  Every extra call re-reads the layer's input: 64-row
 * blocks of the 256 x 784 x 64 dW of the default MLP (four calls) cost
 * 2-5 % of the whole gradient's CPU time against one call (OpenBLAS
 * 0.3.21, Zen kernels), 16-row blocks ~20 % of the dW. */
#define DW_BLOCK_FLOATS 262144 /* 1 MiB */
#define DW_ROW_ALIGN 16

int sg_model_dw_rows(int64_t in, int out) {
  const int64_t align = DW_ROW_ALIGN, total = in * (int64_t)out;
  if (total <= DW_BLOCK_FLOATS) return out;
  const int64_t blocks = (total + DW_BLOCK_FLOATS - 1) / DW_BLOCK_FLOATS;
  const int64_t rows = ((out + blocks - 1) / blocks + align - 1) / align * align;
  return rows < out ? (int)rows : out;
}

/* dW = Gout^T X (out x in) in blocks of output rows from the last to the
 * first (rows [o0, o1) of dW only read columns [o0, o1) of Gout), each
 * reported to the hook when written.  The blocks depend on the layer's
 * shape alone, hook or not: BLAS kernels sum an element's k products in
 * an order that depends on the call's M (OpenBLAS 0.3.21's Haswell/Zen
 * sgemm: one whole-layer call and two-row calls differ in 2168 of 25088
 * elements of a 32 x 784 dW), so only the same calls give the same bits. */
static void dense_dW(sg_model_t *m, int l, const float *Gout, const float *X, int n,
                     float *grad) {
  const int in = (int)m->dims[l], out = (int)m->dims[l + 1];
  float *dW = grad + m->offW[l];
  const int rows = sg_model_dw_rows(in, out);
  for (int o1 = out; o1 > 0; o1 -= rows) {
    const int o0 = o1 - rows > 0 ? o1 - rows : 0;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, o1 - o0, in, n, 1.0f, Gout + o0, out,
                X, in, 0.0f, dW + (size_t)o0 * in, in);
    if (m->ready) m->ready(m->ready_arg, m->offW[l] + (size_t)o0 * in, (size_t)(o1 - o0) * in);
  }
}

/* Layer l's gradient (db first: it lies after dW in the vector, so the
 * hook sees descending offsets). */
static void layer_grad(sg_model_t *m, int l, const float *Gout, const sg_batch_t *b,
                       float *grad) {
  const int out = (int)m->dims[l + 1], n = b->n;
  float *db = grad + m->offb[l];
  if (l == 0 && m->sparse_input) {
    sg_csr_backward(b, Gout, m->dims[0], out, grad + m->offW[0], db);
    if (m->ready) m->ready(m->ready_arg, m->offW[0], m->offb[0] + (size_t)out - m->offW[0]);
    return;
  }
  for (int o = 0; o < out; o++) db[o] = 0.0f;
  for (int i = 0; i < n; i++) {
    const float *g = Gout + (size_t)i * out;
    for (int o = 0; o < out; o++) db[o] += g[o];
  }
  if (m->ready) m->ready(m->ready_arg, m->offb[l], (size_t)out);
  dense_dW(m, l, Gout, l == 0 ? b->x : m->A[l], n, grad);
}

int sg_model_grad(sg_model_t *m, const float *params, const sg_batch_t *b,
                  float *grad, double *loss) {
  if (m->cnn) return sg_cnn_grad(m->cnn, params, b, grad, loss, m->ready, m->ready_arg);
  if (m->embed) { /* one piece: the hook sees the whole vector once */
    SG_CHECK(sg_embed_batch_grad(m->embed, params, b, grad, loss));
    if (m->ready) m->ready(m->ready_arg, 0, sg_embed_nparams(m->embed));
    return SG_OK;
  }
  const int n = b->n, L = m->L;
  if (n < 1 || n > m->max_rows)
    return sg_err_set(SG_EINVAL, "batch of %d rows (model sized for %d)", n, m->max_rows);
  if (!!b->rowptr != !!m->sparse_input)
    return sg_err_set(SG_EINVAL, "batch is %s, model expects %s input",
                      b->rowptr ? "CSR" : "dense", m->sparse_input ? "CSR" : "dense");
  forward(m, params, b);
  const int C = (int)m->dims[L];
  double sum = sg_softmax_xent(m->A[L], b->y, n, C, 1.0f / (float)n, 1, NULL);
  *loss = sum / n;
  /* G for the top layer is A[L], overwritten in place by the loss */
  for (int l = L - 1; l >= 0; l--) {
    const int in = (int)m->dims[l], out = (int)m->dims[l + 1];
    const float *Gout = l + 1 == L ? m->A[L] : m->G[l + 1];
    layer_grad(m, l, Gout, b, grad);
    if (l == 0) break;
    float *Gin = m->G[l];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, Gout, out,
                params + m->offW[l], in, 0.0f, Gin, in);
    const float *A = m->A[l];
    const size_t cnt = (size_t)n * (size_t)in;
    for (size_t i = 0; i < cnt; i++) Gin[i] = A[i] > 0.0f ? Gin[i] : 0.0f;
  }
  return SG_OK;
}

int sg_model_eval(sg_model_t *m, const float *params, const sg_batch_t *b,
                  double *loss_sum, int64_t *correct) {
  if (m->cnn) return sg_cnn_eval(m->cnn, params, b, loss_sum, correct);
  if (m->embed) return sg_embed_batch_eval(m->embed, params, b, loss_sum, correct);
  if (b->n < 1 || b->n > m->max_rows)
    return sg_err_set(SG_EINVAL, "batch of %d rows (model sized for %d)", b->n, m->max_rows);
  forward(m, params, b);
  *loss_sum += sg_softmax_xent(m->A[m->L], b->y, b->n, (int)m->dims[m->L], 1.0f, 0, correct);
  return SG_OK;
}

size_t sg_model_gemms(const sg_model_t *m, int rows, sg_gemm_shape_t *out,
                      size_t cap) {
  static const char *fwd[] = {"fwd L0", "fwd L1", "fwd L2", "fwd L3", "fwd L4", "fwd L5",
                              "fwd L6", "fwd L7", "fwd L8", "fwd L9", "fwd L10",
                              "fwd L11", "fwd L12", "fwd L13", "fwd L14", "fwd L15"};
  static const char *dw[] = {"dW L0", "dW L1", "dW L2", "dW L3", "dW L4", "dW L5",
                             "dW L6", "dW L7", "dW L8", "dW L9", "dW L10", "dW L11",
                             "dW L12", "dW L13", "dW L14", "dW L15"};
  static const char *dx[] = {"dX L0", "dX L1", "dX L2", "dX L3", "dX L4", "dX L5",
                             "dX L6", "dX L7", "dX L8", "dX L9", "dX L10", "dX L11",
                             "dX L12", "dX L13", "dX L14", "dX L15"};
  if (m->cnn) return sg_cnn_gemms(m->cnn, rows, out, cap);
  if (m->embed) return 0; /* plain loops, no sgemm */
  size_t k = 0;
#define PUSH(TA, TB, M, N, K, BETA, WHAT)                                       \
  do {                                                                          \
    if (k < cap) out[k] = (sg_gemm_shape_t){TA, TB, (M), (N), (K), BETA, WHAT}; \
    k++;                                                                        \
  } while (0)
  for (int l = 0; l < m->L; l++) {
    if (l == 0 && m->sparse_input) continue;
    PUSH('N', 'T', rows, (int)m->dims[l + 1], (int)m->dims[l], 1.0f, fwd[l]);
  }
  for (int l = m->L - 1; l >= 0; l--) {
    if (l == 0 && m->sparse_input) break;
    const int no = (int)m->dims[l + 1], dwr = sg_model_dw_rows(m->dims[l], no);
    for (int o1 = no; o1 > 0; o1 -= dwr) /* dense_dW's blocks */
      PUSH('T', 'N', o1 - dwr > 0 ? dwr : o1, (int)m->dims[l], rows, 0.0f, dw[l]);
    if (l > 0) PUSH('N', 'N', rows, (int)m->dims[l], (int)m->dims[l + 1], 0.0f, dx[l]);
  }
#undef PUSH
  return k;
}
