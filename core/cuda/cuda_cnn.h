/* cuda_cnn.h - `model: cnn` (model_cnn.h) on the device: the same network,
 * the same flat parameter layout, the same step (cuda_cnn_step.h) with
 * cuBLAS sgemm for the products and cuda_cnn_kernels.cu for the rest
 * (the per-thread bodies of cuda_cnn_index.h).  Dense input only. */
#ifndef SG_CUDA_CNN_H
#define SG_CUDA_CNN_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_cnn_index.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sg_ccnn sg_ccnn_t;

/* d = side * side input features; SG_ECONFIG when the side does not pool
 * evenly (as sg_cnn_new). */
int sg_ccnn_new(sg_ccnn_t **out, int64_t d, int classes, int max_rows, int tf32);
void sg_ccnn_destroy(sg_ccnn_t **m);
size_t sg_ccnn_nparams(const sg_ccnn_t *m);
/* Mean loss over n images (X n x d and y on the device) and its gradient
 * into dgrad (fully overwritten); waits for the stream (the loss). */
int sg_ccnn_grad(sg_ccnn_t *m, const float *dparams, const float *X, const int32_t *y, int n,
                 float *dgrad, double *loss);
/* Overlap with backprop: fn(arg, off, len) right after backward issues
 * the op completing dgrad[off, off+len) (cuda_cnn_step.h's ready); with
 * fn set, sg_ccnn_grad does not wait (*loss = 0) and sg_ccnn_loss waits
 * and gives the mean loss of that step's n images. */
typedef int (*sg_ccnn_ready_fn)(void *arg, size_t off, size_t len);
void sg_ccnn_set_ready(sg_ccnn_t *m, sg_ccnn_ready_fn fn, void *arg);
int sg_ccnn_loss(sg_ccnn_t *m, int n, double *loss);
const sg_cnn_geom_t *sg_ccnn_geom(const sg_ccnn_t *m);
/* Adds the summed loss and the correct rows of n images. */
int sg_ccnn_eval(sg_ccnn_t *m, const float *dparams, const float *X, const int32_t *y, int n,
                 double *loss_sum, int64_t *correct);

/* ---- the kernels (cuda_cnn_kernels.cu): one thread per output element
 * (grid-stride), each running its cuda_cnn_index.h body; each launches on
 * s and returns cudaGetLastError() ---------------------------------- */
cudaError_t sg_kc_im2col(const sg_cnn_conv_t *v, const float *X, float *cols, int n,
                         cudaStream_t s);
cudaError_t sg_kc_col2im(const sg_cnn_conv_t *v, const float *dcols, float *dX, int n,
                         cudaStream_t s);
cudaError_t sg_kc_pool(const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg, int n,
                       cudaStream_t s);
/* dz = 0, then dz[arg[j]] = dp[j] */
cudaError_t sg_kc_unpool(const sg_cnn_conv_t *v, const int32_t *arg, const float *dp, float *dz,
                         int n, cudaStream_t s);
cudaError_t sg_kc_fill_rows(float *Z, const float *b, int rows, int out, cudaStream_t s);
cudaError_t sg_kc_relu(float *Z, size_t cnt, cudaStream_t s);
cudaError_t sg_kc_relu_back(float *G, const float *A, size_t cnt, cudaStream_t s);
cudaError_t sg_kc_colsum(const float *G, size_t rows, int out, float *db, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
