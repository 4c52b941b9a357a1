/* cuda_impl.h - shared by the CUDA parts of core/cuda (not used outside):
 * the process's stream, error conversion, and the kernels' launchers
 * (cuda_kernels.cu, callable from C). */
#ifndef SG_CUDA_IMPL_H
#define SG_CUDA_IMPL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "pring_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The stream every device step of this process runs on (created once). */
int sg_cuda_stream(cudaStream_t *s);
/* SG_EIO with "what: <runtime message> (<error name>)". */
int sg_cuda_err(cudaError_t e, const char *what);
/* Wait for the process stream. */
int sg_cuda_sync(void);

#define SG_CU(call)                                          \
  do {                                                       \
    cudaError_t e_ = (call);                                 \
    if (e_ != cudaSuccess) return sg_cuda_err(e_, #call);    \
  } while (0)

/* ---- kernels: each launches on s and returns cudaGetLastError() ------- */

/* Z[i][o] = b[o] for n rows of `out` */
cudaError_t sg_k_fill_rows(float *Z, const float *b, int n, int out, cudaStream_t s);
cudaError_t sg_k_relu(float *Z, size_t cnt, cudaStream_t s);
/* G[i] = A[i] > 0 ? G[i] : 0 */
cudaError_t sg_k_relu_back(float *G, const float *A, size_t cnt, cudaStream_t s);
/* model_softmax.c's sg_softmax_xent, one row per thread: row_loss[i],
 * row_ok[i] (argmax == y, first on ties); with want_grad Z becomes
 * (softmax(Z) - onehot(y)) * gscale. */
cudaError_t sg_k_xent(float *Z, const int32_t *y, int n, int C, float gscale, int want_grad,
                      double *row_loss, int *row_ok, cudaStream_t s);
/* out2[0] = sum of row_loss, out2[1] = sum of row_ok (one block) */
cudaError_t sg_k_sum_rows(const double *row_loss, const int *row_ok, int n, double *out2,
                          cudaStream_t s);
/* db[o] = sum over n rows of G[i][o] */
cudaError_t sg_k_colsum(const float *G, int n, int out, float *db, cudaStream_t s);
/* xb[i] = X[idx[i]] (rows of d), yb[i] = Y[idx[i]] */
cudaError_t sg_k_gather(const float *X, const int32_t *Y, const uint32_t *idx, int n, int64_t d,
                        float *xb, int32_t *yb, cudaStream_t s);
/* sg_cuda_sgd's update */
cudaError_t sg_k_sgd(float *p, float *g, float *v, size_t n, float gscale, float lr, float wd,
                     float mu, cudaStream_t s);
/* one ring primitive (ring_prims.h) over len floats */
cudaError_t sg_k_prim(int op, float *x, const float *in, float *out, size_t len, cudaStream_t s);
/* the persistent ring (pring_plan.h): one block per lane, the whole
 * allreduce in one launch; flags/rflags/lflags: this rank's, the right's
 * and the left's flag arrays (SG_PRING_FLAG_STRIDE words per lane); a
 * lane that waits longer than limit_ns writes {1 ready | 2 ack, step,
 * wanted, seen} into fail[4 * lane] (device pointer of mapped host
 * memory, zeroed by the caller) and ends */
cudaError_t sg_k_pring(const sg_pring_t *p, float *x, const float *inbox, float *rinbox,
                       uint64_t *flags, uint64_t *rflags, uint64_t *lflags, uint64_t limit_ns,
                       uint64_t *fail, cudaStream_t s);

/* acc = w g (first) or acc += w g (replica.h, mapreduce executors) */
cudaError_t sg_k_task_acc(float *acc, const float *g, size_t n, float w, int first,
                          cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
