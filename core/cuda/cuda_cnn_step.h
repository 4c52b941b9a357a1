/* cuda_cnn_step.h - the step of `model: cnn` on the device as a sequence of
 * operations, in plain C, run by the device model (cuda_cnn.c: kernels and
 * cuBLAS) and by the CPU twin (tests/test_cuda_cnn.c: the same per-thread
 * bodies of cuda_cnn_index.h for every thread index, and the host sgemm).
 *
 * The sequence is model_cnn.c's, call for call (same sgemm arguments,
 * same order, same buffers' roles):
 *   conv l   im2col; z = bias rows; z += cols W^T (sgemm N,T); ReLU; pool
 *   dense l  a = bias rows; a += X W^T (N,T); ReLU except the last
 *   loss     softmax cross-entropy, the logits become (softmax - onehot)/n
 *   dense l  db = column sums of g; dW = g^T X (T,N); dX = g W (N,N),
 *            masked by the input's ReLU for l > 0
 *   conv l   dz = 0, dz[arg] = dp (the pool's scatter), masked by z > 0;
 *            db = column sums; dW = dz^T cols (T,N); conv2 only:
 *            dcols = dz W (N,N), dX = col2im(dcols)
 * Buffers are pointers into the backend's memory (device or host), laid
 * out by sg_cnn_bufs_each.
 */
#ifndef SG_CUDA_CNN_STEP_H
#define SG_CUDA_CNN_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "cuda_cnn_index.h"

typedef struct sg_cnn_bufs {
  float *cols[SG_CNN_NCONV], *z[SG_CNN_NCONV], *p[SG_CNN_NCONV], *dz[SG_CNN_NCONV];
  float *dp[SG_CNN_NCONV]; /* d loss / d pooled output of conv l */
  float *dcols;            /* conv2's d loss / d cols */
  int32_t *arg[SG_CNN_NCONV];
  float *a[SG_CNN_NDENSE], *g[SG_CNN_NDENSE]; /* dense outputs; d loss / d Z (l < last) */
} sg_cnn_bufs_t;

/* Calls fn(arg, slot, bytes) for every buffer of `rows` rows (allocation
 * and release); stops at and returns the first negative result. */
typedef int (*sg_cnn_buf_fn)(void *arg, void **slot, size_t bytes);
int sg_cnn_bufs_each(sg_cnn_bufs_t *b, const sg_cnn_geom_t *g, int rows, sg_cnn_buf_fn fn,
                     void *arg);

/* The operations a backend provides; each returns 0 or a negative SG_E*
 * code with the error set.  gemm is row-major C = op(A) op(B) + beta C
 * (alpha 1), cblas_sgemm's arguments. */
typedef struct sg_cnn_ops {
  int (*gemm)(void *ctx, char ta, char tb, int m, int n, int k, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
  int (*fill_rows)(void *ctx, float *Z, const float *b, int rows, int out);
  int (*relu)(void *ctx, float *Z, size_t cnt);
  int (*relu_back)(void *ctx, float *G, const float *A, size_t cnt);
  int (*colsum)(void *ctx, const float *G, size_t rows, int out, float *db);
  int (*im2col)(void *ctx, const sg_cnn_conv_t *v, const float *X, float *cols, int n);
  int (*col2im)(void *ctx, const sg_cnn_conv_t *v, const float *dcols, float *dX, int n);
  int (*pool)(void *ctx, const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg, int n);
  /* dz = 0, then dz[arg[j]] = dp[j] */
  int (*unpool)(void *ctx, const sg_cnn_conv_t *v, const int32_t *arg, const float *dp,
                float *dz, int n);
  /* softmax cross-entropy of n rows of C logits (model_softmax.c's): the
   * backend keeps each row's loss and correctness; with want_grad the
   * logits become (softmax - onehot(y)) * gscale */
  int (*xent)(void *ctx, float *Z, const int32_t *y, int n, int C, float gscale, int want_grad);
  void *ctx;
  /* overlap with backprop (NULL: none): called right after the op that
   * completes grad[off, off+len) is issued -- per layer from the last, db
   * then dW, model_cnn.c's hook order; a negative return stops the step */
  int (*ready)(void *ctx, size_t off, size_t len);
} sg_cnn_ops_t;

/* Forward of n images X (n x side^2): logits in b->a[SG_CNN_NDENSE - 1]. */
int sg_cnn_step_forward(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                        const float *P, const float *X, int n);
/* Forward, loss (xent with want_grad, 1/n) and backward: grad fully
 * overwritten. */
int sg_cnn_step_grad(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                     const float *P, const float *X, const int32_t *y, int n, float *grad);
/* Forward and xent without the gradient (evaluation). */
int sg_cnn_step_eval(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                     const float *P, const float *X, const int32_t *y, int n);

#endif
