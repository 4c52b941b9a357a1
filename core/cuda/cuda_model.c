/* cuda_model.c - the layer stack of model.h on the device.
 *
 * The step is model_mlp.c's, call for call: forward Z = A W^T + b (bias
 * rows, then sgemm N,T with beta 1), ReLU on hidden layers; softmax
 * cross-entropy with the mean over the batch; backward dW = G^T A (T,N),
 * db = column sums of G, G_in = (G W) * [A > 0] (N,N).
 *
 * cuBLAS is column-major: a row-major C = op(A) op(B) (m x n) is the
 * column-major C^T = op(B)^T op(A)^T, i.e. cublasSgemm with the same op
 * flags, A and B swapped and m and n swapped (gemm_rm below).
 *
 * Overlap with backprop (sg_cmodel_set_ready): backward calls the hook
 * right after it issues the op that completes a range of the gradient on
 * the stream -- per layer from the last, db (the column sums) and then
 * the whole dW (one sgemm), the order bucket_plan.h's
 * sg_bucket_dev_ranges lists -- and the step does not wait for the
 * stream: the loss is copied into pinned memory and read by
 * sg_cmodel_loss, after the caller's communication.  The same calls with
 * or without the hook (db before dW: two ops on disjoint outputs), so the
 * same bits.
 */
#include <cublas_v2.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_dl.h"
#include "cuda_impl.h"
#include "cuda_model.h"
#include "err.h"

struct sg_cmodel {
  int L, max_rows;
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  size_t offW[SG_MODEL_MAX_LAYERS], offb[SG_MODEL_MAX_LAYERS], nparams;
  float *A[SG_MODEL_MAX_LAYERS + 1]; /* A[l], l >= 1: outputs; A[L] = logits */
  float *G[SG_MODEL_MAX_LAYERS];     /* G[l], 1 <= l < L */
  double *row_loss, *sum2;           /* per row; [loss sum, correct] */
  int *row_ok;
  double *hloss;                     /* pinned [loss sum, correct]: a deferred loss */
  sg_cmodel_ready_fn ready;          /* overlap: backward's hand-over, or NULL */
  void *ready_arg;
  const sg_cublas_api_t *cb; /* loaded on first use (cuda_dl.h) */
  cublasHandle_t h;
  int have_h;
};

static int cublas_fail(cublasStatus_t st, const char *what) {
  return sg_err_set(SG_EIO, "%s: cuBLAS status %d", what, (int)st);
}

#define SG_CB(call)                                                   \
  do {                                                                \
    cublasStatus_t st_ = (call);                                      \
    if (st_ != CUBLAS_STATUS_SUCCESS) return cublas_fail(st_, #call); \
  } while (0)

/* Row-major C (m x n) = alpha op(A) op(B) + beta C, inner dimension k. */
static int gemm_rm(const sg_cublas_api_t *cb, cublasHandle_t h, char ta, char tb, int m, int n, int k, const float *A,
                   int lda, const float *B, int ldb, float beta, float *C, int ldc) {
  const float one = 1.0f;
  cublasOperation_t oa = ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t ob = tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N;
  SG_CB(cb->sgemm(h, ob, oa, n, m, k, &one, B, ldb, A, lda, &beta, C, ldc));
  return SG_OK;
}

static int dev_alloc(void **p, size_t bytes) {
  cudaError_t e = cudaMalloc(p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *p = NULL;
    return sg_err_set(SG_ENOMEM, "device memory for the model's buffers (%zu bytes): %s", bytes,
                      cudaGetErrorString(e));
  }
  return SG_OK;
}

static int alloc_buffers(sg_cmodel_t *m) {
  const size_t rows = (size_t)m->max_rows;
  for (int l = 1; l <= m->L; l++) {
    SG_CHECK(dev_alloc((void **)&m->A[l], rows * (size_t)m->dims[l] * sizeof(float)));
    if (l < m->L) SG_CHECK(dev_alloc((void **)&m->G[l], rows * (size_t)m->dims[l] * sizeof(float)));
  }
  SG_CHECK(dev_alloc((void **)&m->row_loss, rows * sizeof(double)));
  SG_CHECK(dev_alloc((void **)&m->row_ok, rows * sizeof(int)));
  SG_CHECK(dev_alloc((void **)&m->sum2, 2 * sizeof(double)));
  if (cudaMallocHost((void **)&m->hloss, 2 * sizeof(double)) != cudaSuccess) {
    m->hloss = NULL;
    return sg_err_set(SG_ENOMEM, "pinned host memory for the device model's loss");
  }
  return SG_OK;
}

int sg_cmodel_new(sg_cmodel_t **out, int L, const int64_t *dims, int max_rows, int tf32) {
  int rc;
  cudaStream_t s = NULL;
  if (L < 1 || L > SG_MODEL_MAX_LAYERS || max_rows < 1)
    return sg_err_set(SG_EINVAL, "device model: %d layers, %d rows", L, max_rows);
  sg_cmodel_t *m = calloc(1, sizeof *m);
  if (!m) return SG_ENOMEM;
  m->L = L;
  m->max_rows = max_rows;
  size_t off = 0;
  for (int l = 0; l <= L; l++) m->dims[l] = dims[l];
  for (int l = 0; l < L; l++) { /* model_mlp.c's layout */
    m->offW[l] = off;
    off += (size_t)dims[l + 1] * (size_t)dims[l];
    m->offb[l] = off;
    off += (size_t)dims[l + 1];
  }
  m->nparams = off;
  SG_TRY(alloc_buffers(m));
  SG_TRY(sg_cuda_stream(&s));
  SG_TRY(sg_cublas(&m->cb));
  SG_TRY(sg_cublas_handle(m->cb, s, tf32, &m->h));
  m->have_h = 1;
  *out = m;
  return SG_OK;
fail:
  sg_cmodel_destroy(&m);
  return rc;
}

void sg_cmodel_destroy(sg_cmodel_t **pm) {
  if (!pm || !*pm) return;
  sg_cmodel_t *m = *pm;
  for (int l = 0; l <= SG_MODEL_MAX_LAYERS; l++) cudaFree(m->A[l]);
  for (int l = 0; l < SG_MODEL_MAX_LAYERS; l++) cudaFree(m->G[l]);
  cudaFree(m->row_loss);
  cudaFree(m->row_ok);
  cudaFree(m->sum2);
  if (m->hloss) cudaFreeHost(m->hloss);
  if (m->have_h) m->cb->destroy(m->h);
  free(m);
  *pm = NULL;
}

size_t sg_cmodel_nparams(const sg_cmodel_t *m) { return m->nparams; }
size_t sg_cmodel_off_w(const sg_cmodel_t *m, int l) { return m->offW[l]; }
size_t sg_cmodel_off_b(const sg_cmodel_t *m, int l) { return m->offb[l]; }
int sg_cmodel_dims(const sg_cmodel_t *m, int64_t *dims) {
  for (int l = 0; l <= m->L; l++) dims[l] = m->dims[l];
  return m->L;
}

void sg_cmodel_set_ready(sg_cmodel_t *m, sg_cmodel_ready_fn fn, void *arg) {
  m->ready = fn;
  m->ready_arg = arg;
}

static int hand_over(sg_cmodel_t *m, size_t off, size_t len) {
  return m->ready ? m->ready(m->ready_arg, off, len) : SG_OK;
}

static int forward(sg_cmodel_t *m, const float *P, const float *X, int n, cudaStream_t s) {
  for (int l = 0; l < m->L; l++) {
    const int in = (int)m->dims[l], out = (int)m->dims[l + 1];
    float *Z = m->A[l + 1];
    SG_CU(sg_k_fill_rows(Z, P + m->offb[l], n, out, s));
    SG_CHECK(gemm_rm(m->cb, m->h, 'N', 'T', n, out, in, l == 0 ? X : m->A[l], in, P + m->offW[l], in,
                     1.0f, Z, out));
    if (l + 1 < m->L) SG_CU(sg_k_relu(Z, (size_t)n * (size_t)out, s));
  }
  return SG_OK;
}

/* Sum the per-row loss and correct flags; waits for the stream. */
static int sums(sg_cmodel_t *m, int n, cudaStream_t s, double out2[2]) {
  SG_CU(sg_k_sum_rows(m->row_loss, m->row_ok, n, m->sum2, s));
  SG_CU(cudaMemcpyAsync(out2, m->sum2, 2 * sizeof(double), cudaMemcpyDeviceToHost, s));
  SG_CU(cudaStreamSynchronize(s));
  return SG_OK;
}

static int check_rows(const sg_cmodel_t *m, int n) {
  if (n < 1 || n > m->max_rows)
    return sg_err_set(SG_EINVAL, "batch of %d rows (device model sized for %d)", n, m->max_rows);
  return SG_OK;
}

int sg_cmodel_grad(sg_cmodel_t *m, const float *P, const float *X, const int32_t *y, int n,
                   float *dgrad, double *loss) {
  cudaStream_t s = NULL;
  double s2[2];
  const int L = m->L, C = (int)m->dims[L];
  SG_CHECK(check_rows(m, n));
  SG_CHECK(sg_cuda_stream(&s));
  SG_CHECK(forward(m, P, X, n, s));
  SG_CU(sg_k_xent(m->A[L], y, n, C, 1.0f / (float)n, 1, m->row_loss, m->row_ok, s));
  for (int l = L - 1; l >= 0; l--) {
    const int in = (int)m->dims[l], out = (int)m->dims[l + 1];
    const float *Gout = l + 1 == L ? m->A[L] : m->G[l + 1];
    const float *Ain = l == 0 ? X : m->A[l];
    SG_CU(sg_k_colsum(Gout, n, out, dgrad + m->offb[l], s));
    SG_CHECK(hand_over(m, m->offb[l], (size_t)out));
    SG_CHECK(gemm_rm(m->cb, m->h, 'T', 'N', out, in, n, Gout, out, Ain, in, 0.0f, dgrad + m->offW[l], in));
    SG_CHECK(hand_over(m, m->offW[l], (size_t)out * (size_t)in));
    if (l == 0) break;
    SG_CHECK(gemm_rm(m->cb, m->h, 'N', 'N', n, in, out, Gout, out, P + m->offW[l], in, 0.0f, m->G[l], in));
    SG_CU(sg_k_relu_back(m->G[l], m->A[l], (size_t)n * (size_t)in, s));
  }
  if (m->ready) { /* deferred: sg_cmodel_loss reads it */
    SG_CU(sg_k_sum_rows(m->row_loss, m->row_ok, n, m->sum2, s));
    SG_CU(cudaMemcpyAsync(m->hloss, m->sum2, 2 * sizeof(double), cudaMemcpyDeviceToHost, s));
    *loss = 0;
    return SG_OK;
  }
  SG_CHECK(sums(m, n, s, s2));
  *loss = s2[0] / n;
  return SG_OK;
}

int sg_cmodel_loss(sg_cmodel_t *m, int n, double *loss) {
  SG_CHECK(sg_cuda_sync());
  *loss = m->hloss[0] / n;
  return SG_OK;
}

int sg_cmodel_eval(sg_cmodel_t *m, const float *P, const float *X, const int32_t *y, int n,
                   double *loss_sum, int64_t *correct) {
  cudaStream_t s = NULL;
  double s2[2];
  SG_CHECK(check_rows(m, n));
  SG_CHECK(sg_cuda_stream(&s));
  SG_CHECK(forward(m, P, X, n, s));
  SG_CU(sg_k_xent(m->A[m->L], y, n, (int)m->dims[m->L], 1.0f, 0, m->row_loss, m->row_ok, s));
  SG_CHECK(sums(m, n, s, s2));
  *loss_sum += s2[0];
  *correct += (int64_t)s2[1];
  return SG_OK;
}
