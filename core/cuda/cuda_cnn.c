/* cuda_cnn.c - the CNN on the device (cuda_cnn.h): cuda_cnn_step.c's
 * sequence with device operations -- cuBLAS sgemm for the products (the
 * row-major call mapped to column-major by sg_cnn_colmajor: operands and
 * m, n swapped), cuda_cnn_kernels.cu for the rest, cuda_kernels.cu's
 * softmax cross-entropy and row sums for the loss.  Everything runs on the
 * process's stream; the host waits once per call, for the loss -- except
 * with a ready hook (overlap, sg_ccnn_set_ready): then the loss lands in
 * pinned memory and sg_ccnn_loss waits for it. */
#include <cublas_v2.h>
#include <stdlib.h>

#include "cuda_cnn.h"
#include "cuda_cnn_step.h"
#include "cuda_dl.h"
#include "cuda_impl.h"
#include "err.h"

struct sg_ccnn {
  sg_cnn_geom_t g;
  int max_rows;
  sg_cnn_bufs_t b;
  double *row_loss, *sum2; /* per row; [loss sum, correct] */
  int *row_ok;
  double *hloss;           /* pinned [loss sum, correct]: a deferred loss */
  sg_ccnn_ready_fn ready;  /* overlap: backward's hand-over, or NULL */
  void *ready_arg;
  const sg_cublas_api_t *cb;
  cublasHandle_t h;
  int have_h;
  cudaStream_t s;
};

static int gemm(void *ctx, char ta, char tb, int m, int n, int k, const float *A, int lda,
                const float *B, int ldb, float beta, float *C, int ldc) {
  sg_ccnn_t *c = ctx;
  const float one = 1.0f;
  const sg_cnn_colmajor_t g = sg_cnn_colmajor(ta, tb, m, n, k, A, lda, B, ldb);
  cublasStatus_t st = c->cb->sgemm(c->h, g.ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   g.tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, g.m, g.n, g.k, &one,
                                   g.A, g.lda, g.B, g.ldb, &beta, C, ldc);
  if (st != CUBLAS_STATUS_SUCCESS)
    return sg_err_set(SG_EIO, "cnn sgemm %c%c %dx%dx%d: cuBLAS status %d", ta, tb, m, n, k,
                      (int)st);
  return SG_OK;
}

static int fill_rows(void *ctx, float *Z, const float *b, int rows, int out) {
  SG_CU(sg_kc_fill_rows(Z, b, rows, out, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int relu(void *ctx, float *Z, size_t cnt) {
  SG_CU(sg_kc_relu(Z, cnt, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int relu_back(void *ctx, float *G, const float *A, size_t cnt) {
  SG_CU(sg_kc_relu_back(G, A, cnt, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int colsum(void *ctx, const float *G, size_t rows, int out, float *db) {
  SG_CU(sg_kc_colsum(G, rows, out, db, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int im2col(void *ctx, const sg_cnn_conv_t *v, const float *X, float *cols, int n) {
  SG_CU(sg_kc_im2col(v, X, cols, n, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int col2im(void *ctx, const sg_cnn_conv_t *v, const float *dcols, float *dX, int n) {
  SG_CU(sg_kc_col2im(v, dcols, dX, n, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int pool(void *ctx, const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg,
                int n) {
  SG_CU(sg_kc_pool(v, z, p, arg, n, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int unpool(void *ctx, const sg_cnn_conv_t *v, const int32_t *arg, const float *dp,
                  float *dz, int n) {
  SG_CU(sg_kc_unpool(v, arg, dp, dz, n, ((sg_ccnn_t *)ctx)->s));
  return SG_OK;
}
static int xent(void *ctx, float *Z, const int32_t *y, int n, int C, float gscale,
                int want_grad) {
  sg_ccnn_t *c = ctx;
  SG_CU(sg_k_xent(Z, y, n, C, gscale, want_grad, c->row_loss, c->row_ok, c->s));
  return SG_OK;
}

static int hand_over(void *ctx, size_t off, size_t len) {
  sg_ccnn_t *c = ctx;
  return c->ready(c->ready_arg, off, len);
}

static sg_cnn_ops_t ops_of(sg_ccnn_t *c) {
  return (sg_cnn_ops_t){gemm, fill_rows, relu, relu_back, colsum, im2col, col2im, pool,
                        unpool, xent, c, c->ready ? hand_over : NULL};
}

static int dev_alloc(void *arg, void **slot, size_t bytes) {
  (void)arg;
  cudaError_t e = cudaMalloc(slot, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *slot = NULL;
    return sg_err_set(SG_ENOMEM, "device memory for the cnn's buffers (%zu bytes): %s", bytes,
                      cudaGetErrorString(e));
  }
  return SG_OK;
}

static int dev_free(void *arg, void **slot, size_t bytes) {
  (void)arg;
  (void)bytes;
  cudaFree(*slot);
  *slot = NULL;
  return SG_OK;
}

int sg_ccnn_new(sg_ccnn_t **out, int64_t d, int classes, int max_rows, int tf32) {
  int rc, side = 1;
  while ((int64_t)side * side < d && side < (1 << 15)) side++;
  sg_ccnn_t *c = calloc(1, sizeof *c);
  if (!c) return SG_ENOMEM;
  c->max_rows = max_rows;
  if ((int64_t)side * side != d || max_rows < 1 || sg_cnn_geom_init(&c->g, side, classes) < 0) {
    free(c);
    return sg_err_set(SG_ECONFIG, "device cnn: %lld features, %d classes, %d rows is not a "
                      "square image that pools evenly", (long long)d, classes, max_rows);
  }
  SG_TRY(sg_cnn_bufs_each(&c->b, &c->g, max_rows, dev_alloc, NULL));
  SG_TRY(dev_alloc(NULL, (void **)&c->row_loss, (size_t)max_rows * sizeof(double)));
  SG_TRY(dev_alloc(NULL, (void **)&c->row_ok, (size_t)max_rows * sizeof(int)));
  SG_TRY(dev_alloc(NULL, (void **)&c->sum2, 2 * sizeof(double)));
  if (cudaMallocHost((void **)&c->hloss, 2 * sizeof(double)) != cudaSuccess) {
    c->hloss = NULL;
    rc = sg_err_set(SG_ENOMEM, "pinned host memory for the device cnn's loss");
    goto fail;
  }
  SG_TRY(sg_cuda_stream(&c->s));
  SG_TRY(sg_cublas(&c->cb));
  SG_TRY(sg_cublas_handle(c->cb, c->s, tf32, &c->h));
  c->have_h = 1;
  *out = c;
  return SG_OK;
fail:
  sg_ccnn_destroy(&c);
  return rc;
}

void sg_ccnn_destroy(sg_ccnn_t **pc) {
  if (!pc || !*pc) return;
  sg_ccnn_t *c = *pc;
  sg_cnn_bufs_each(&c->b, &c->g, c->max_rows, dev_free, NULL);
  cudaFree(c->row_loss);
  cudaFree(c->row_ok);
  cudaFree(c->sum2);
  if (c->hloss) cudaFreeHost(c->hloss);
  if (c->have_h) c->cb->destroy(c->h);
  free(c);
  *pc = NULL;
}

size_t sg_ccnn_nparams(const sg_ccnn_t *c) { return c->g.nparams; }
const sg_cnn_geom_t *sg_ccnn_geom(const sg_ccnn_t *c) { return &c->g; }

void sg_ccnn_set_ready(sg_ccnn_t *c, sg_ccnn_ready_fn fn, void *arg) {
  c->ready = fn;
  c->ready_arg = arg;
}

int sg_ccnn_loss(sg_ccnn_t *c, int n, double *loss) {
  SG_CU(cudaStreamSynchronize(c->s));
  *loss = c->hloss[0] / n;
  return SG_OK;
}

/* The summed loss and correct rows of the last xent; waits for the stream. */
static int sums(sg_ccnn_t *c, int n, double out2[2]) {
  SG_CU(sg_k_sum_rows(c->row_loss, c->row_ok, n, c->sum2, c->s));
  SG_CU(cudaMemcpyAsync(out2, c->sum2, 2 * sizeof(double), cudaMemcpyDeviceToHost, c->s));
  SG_CU(cudaStreamSynchronize(c->s));
  return SG_OK;
}

static int check_rows(const sg_ccnn_t *c, int n) {
  if (n < 1 || n > c->max_rows)
    return sg_err_set(SG_EINVAL, "batch of %d rows (device cnn sized for %d)", n, c->max_rows);
  return SG_OK;
}

int sg_ccnn_grad(sg_ccnn_t *c, const float *P, const float *X, const int32_t *y, int n,
                 float *dgrad, double *loss) {
  double s2[2];
  sg_cnn_ops_t o = ops_of(c);
  SG_CHECK(check_rows(c, n));
  SG_CHECK(sg_cnn_step_grad(&o, &c->g, &c->b, P, X, y, n, dgrad));
  if (c->ready) { /* deferred: sg_ccnn_loss reads it */
    SG_CU(sg_k_sum_rows(c->row_loss, c->row_ok, n, c->sum2, c->s));
    SG_CU(cudaMemcpyAsync(c->hloss, c->sum2, 2 * sizeof(double), cudaMemcpyDeviceToHost, c->s));
    *loss = 0;
    return SG_OK;
  }
  SG_CHECK(sums(c, n, s2));
  *loss = s2[0] / n;
  return SG_OK;
}

int sg_ccnn_eval(sg_ccnn_t *c, const float *P, const float *X, const int32_t *y, int n,
                 double *loss_sum, int64_t *correct) {
  double s2[2];
  sg_cnn_ops_t o = ops_of(c);
  SG_CHECK(check_rows(c, n));
  SG_CHECK(sg_cnn_step_eval(&o, &c->g, &c->b, P, X, y, n));
  SG_CHECK(sums(c, n, s2));
  *loss_sum += s2[0];
  *correct += (int64_t)s2[1];
  return SG_OK;
}
