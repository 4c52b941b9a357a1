/* cuda_dl.h - cuBLAS and NCCL, loaded when first used (dlopen).
 *
 * Linking them would load them into every process of a CUDA build, CPU
 * runs included: libcublasLt alone is ~540 MB here, and measured, it made
 * `sgdlab --version` take 0.15 s instead of 0.02 s with 220 MB more
 * resident.  Only the CUDA runtime (small) is linked. */
#ifndef SG_CUDA_DL_H
#define SG_CUDA_DL_H

#include <cublas_v2.h>

typedef struct sg_cublas_api {
  cublasStatus_t (*create)(cublasHandle_t *h);
  cublasStatus_t (*destroy)(cublasHandle_t h);
  cublasStatus_t (*set_stream)(cublasHandle_t h, cudaStream_t s);
  cublasStatus_t (*sgemm)(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                          int n, int k, const float *alpha, const float *A, int lda,
                          const float *B, int ldb, const float *beta, float *C, int ldc);
  cublasStatus_t (*set_math_mode)(cublasHandle_t h, cublasMath_t mode);
} sg_cublas_api_t;

/* The cuBLAS entry points (loaded once); SG_EUNSUPPORTED naming the
 * library when it cannot be loaded. */
int sg_cublas(const sg_cublas_api_t **out);
/* A handle on stream s: fp32 GEMMs (CUBLAS_DEFAULT_MATH), or TF32 tensor
 * cores when tf32 (the workload key tf32: true). */
int sg_cublas_handle(const sg_cublas_api_t *cb, cudaStream_t s, int tf32, cublasHandle_t *h);

#ifdef SG_HAVE_NCCL
#include <nccl.h>
typedef struct sg_nccl_api {
  ncclResult_t (*get_unique_id)(ncclUniqueId *id);
  ncclResult_t (*comm_init_rank)(ncclComm_t *c, int n, ncclUniqueId id, int rank);
  ncclResult_t (*all_reduce)(const void *s, void *r, size_t count, ncclDataType_t t,
                             ncclRedOp_t op, ncclComm_t c, cudaStream_t st);
  ncclResult_t (*comm_destroy)(ncclComm_t c);
  const char *(*error_string)(ncclResult_t r);
  ncclResult_t (*reduce_scatter)(const void *s, void *r, size_t recvcount, ncclDataType_t t,
                                 ncclRedOp_t op, ncclComm_t c, cudaStream_t st);
  ncclResult_t (*all_gather)(const void *s, void *r, size_t sendcount, ncclDataType_t t,
                             ncclComm_t c, cudaStream_t st);
} sg_nccl_api_t;
int sg_nccl(const sg_nccl_api_t **out);
#endif

#endif
