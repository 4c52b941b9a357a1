/* cuda_rt.c - the CUDA runtime seen from sgdlab: the device probe, the
 * process's stream, device vectors and the optimizer step (sg_cuda.h). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"
#include "err.h"
#include "sg_cuda_rt.h"

#ifdef SG_HAVE_NCCL
#include <nccl.h>
#endif

static cudaStream_t g_stream;
static int g_stream_ok;

int sg_cuda_err(cudaError_t e, const char *what) {
  return sg_err_set(SG_EIO, "%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

int sg_cuda_probe(int *count) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e != cudaSuccess) {
    *count = 0;
    cudaGetLastError(); /* the probe's failure is not sticky for later calls */
    return sg_err_set(SG_EUNSUPPORTED, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
  }
  if (*count < 1) return sg_err_set(SG_EUNSUPPORTED, "cudaGetDeviceCount: 0 devices");
  return SG_OK;
}

int sg_cuda_use(int dev) {
  SG_CU(cudaSetDevice(dev));
  return SG_OK;
}

const char *sg_cuda_nccl_version(void) {
#ifdef SG_HAVE_NCCL
  static char v[32];
  snprintf(v, sizeof v, "NCCL %d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
  return v;
#else
  return "no NCCL";
#endif
}

int sg_cuda_stream(cudaStream_t *s) {
  if (!g_stream_ok) {
    SG_CU(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    g_stream_ok = 1;
  }
  *s = g_stream;
  return SG_OK;
}

int sg_cuda_sync(void) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaStreamSynchronize(s));
  return SG_OK;
}

int sg_cuda_alloc(float **d, size_t n, const char *what) {
  *d = NULL;
  cudaError_t e = cudaMalloc((void **)d, (n ? n : 1) * sizeof(float));
  if (e != cudaSuccess) {
    *d = NULL;
    return sg_err_set(SG_ENOMEM, "device memory for %s (%zu floats): %s", what, n,
                      cudaGetErrorString(e));
  }
  return SG_OK;
}

void sg_cuda_free(float **d) {
  if (!d || !*d) return;
  cudaFree(*d);
  *d = NULL;
}

int sg_cuda_put(float *d, const float *h, size_t n) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaMemcpyAsync(d, h, n * sizeof(float), cudaMemcpyHostToDevice, s));
  return sg_cuda_sync();
}

int sg_cuda_get(float *h, const float *d, size_t n) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaMemcpyAsync(h, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  return sg_cuda_sync();
}

int sg_cuda_zero(float *d, size_t n) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaMemsetAsync(d, 0, n * sizeof(float), s));
  return sg_cuda_sync();
}

int sg_cuda_copy(float *ddst, const float *dsrc, size_t n) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaMemcpyAsync(ddst, dsrc, n * sizeof(float), cudaMemcpyDeviceToDevice, s));
  return sg_cuda_sync();
}

int sg_cuda_sgd(float *dp, float *dg, float *dv, size_t n, float gscale, float lr, float wd,
                float mu) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(sg_k_sgd(dp, dg, mu > 0 ? dv : NULL, n, gscale, lr, wd, mu, s));
  return SG_OK; /* stream-ordered: the next step's kernels follow it */
}
