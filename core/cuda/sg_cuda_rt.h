/* sg_cuda_rt.h - the device runtime: probing and choosing a device, device vectors, the optimizer step, waiting for the stream.
 * Part of the CUDA layer's interface (sg_cuda.h includes every part);
 * cuda_none.c stands in for all of it in a build without CUDA. */
#ifndef SG_CUDA_RT_H
#define SG_CUDA_RT_H

#include <stddef.h>
#include <stdint.h>

/* ---- the runtime (cuda_rt.c) ------------------------------------------ */

/* Devices visible to this process; SG_EUNSUPPORTED with the runtime's
 * reason ("cudaGetDeviceCount: ...") when there is none or no driver. */
int sg_cuda_probe(int *count);
/* Make device `dev` this process's device (before any other call). */
int sg_cuda_use(int dev);
/* "NCCL 2.28.9" or "no NCCL". */
const char *sg_cuda_nccl_version(void);

/* ---- device vectors and the optimizer ---------------------------------- */

int sg_cuda_alloc(float **d, size_t n, const char *what);
void sg_cuda_free(float **d); /* NULL-safe; nulls the pointer */
int sg_cuda_put(float *d, const float *h, size_t n); /* host -> device */
int sg_cuda_get(float *h, const float *d, size_t n); /* device -> host */
int sg_cuda_zero(float *d, size_t n);
/* dst = src on the device (cudaMemcpy device to device); returns when done. */
int sg_cuda_copy(float *ddst, const float *dsrc, size_t n);
/* g *= gscale, then optim.c's update (PyTorch's form): with mu > 0
 * v = mu v + g + wd p, p -= lr v; with mu == 0 (v may be NULL)
 * p -= lr (g + wd p). */
int sg_cuda_sgd(float *dp, float *dg, float *dv, size_t n, float gscale, float lr, float wd,
                float mu);

/* Wait until every call queued on the process's stream is done. */
int sg_cuda_sync(void);

#endif
