/* sg_cuda.h - the small C interface between sgdlab and its CUDA parts.
 *
 * Built from core/cuda/cuda_*.c and cuda_kernels.cu when CMake finds a
 * CUDA toolkit (SG_HAVE_CUDA); otherwise cuda_none.c stands in, and every
 * call returns SG_EUNSUPPORTED "this build has no CUDA".  All device work
 * of a process runs on one stream; the functions return when their result
 * is ready unless they say otherwise.  Pointers named d* are device
 * memory.
 */
#ifndef SG_CUDA_H
#define SG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "model.h"
#include "transport.h"

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

/* ---- a step's GEMMs alone (bench step's bound, cuda_gemms.c) ---------- */

typedef struct sg_cuda_gemms sg_cuda_gemms_t;
/* Device operands for the n row-major sgemm calls g[] (model.h), a
 * cuBLAS handle on the process stream (TF32 when tf32). */
int sg_cuda_gemms_new(sg_cuda_gemms_t **out, const sg_gemm_shape_t *g, size_t n, int tf32);
/* reps passes over calls [first, first + count) in order; returns when
 * the device has finished them. */
int sg_cuda_gemms_run(sg_cuda_gemms_t *gs, size_t first, size_t count, int64_t reps);
void sg_cuda_gemms_destroy(sg_cuda_gemms_t **gs);

/* ---- the workload on the device (cuda_workload.c, cuda_model.c) -------- */

typedef struct sg_cuda_wl sg_cuda_wl_t;
typedef struct sg_cuda_wl_desc {
  int L;                /* layers */
  const int64_t *dims;  /* L + 1 sizes: input, hidden..., classes (model.h) */
  int max_rows;         /* largest batch or evaluation chunk */
  const sg_dataset_t *train, *test; /* dense; either may be NULL */
  int tf32;             /* GEMMs on TF32 tensor cores (default fp32) */
} sg_cuda_wl_desc_t;

/* Uploads the datasets and allocates every buffer once.  SG_EUNSUPPORTED
 * for CSR data (the device path is dense only). */
int sg_cuda_wl_new(sg_cuda_wl_t **out, const sg_cuda_wl_desc_t *d);
void sg_cuda_wl_destroy(sg_cuda_wl_t **cw);
size_t sg_cuda_wl_nparams(const sg_cuda_wl_t *cw);
/* Gradient of the mean loss over training rows idx[0..n) (model.h's
 * definition, the host model's parameter layout); dgrad fully
 * overwritten. */
int sg_cuda_wl_grad(sg_cuda_wl_t *cw, const float *dparams, float *dgrad, const uint32_t *idx,
                    int n, double *loss);
/* The same with host params and grad (copied through the device). */
int sg_cuda_wl_grad_host(sg_cuda_wl_t *cw, const float *params, float *grad,
                         const uint32_t *idx, int n, double *loss);
/* Adds the test set's summed loss and correct rows for host params. */
int sg_cuda_wl_eval_host(sg_cuda_wl_t *cw, const float *params, double *loss_sum,
                         int64_t *correct);

/* ---- communication of device vectors (cuda_comm.c) --------------------- */

/* Host-staged: pinned slots, a down and an up stream (stage_plan.h). */
typedef struct sg_cuda_stage sg_cuda_stage_t;
typedef int (*sg_host_reduce_fn)(void *arg, float *host, size_t len);
int sg_cuda_stage_new(sg_cuda_stage_t **out, size_t chunk, int slots);
/* Allreduce dbuf[0..count) chunk by chunk: reduce(arg, slot, len) sums a
 * chunk over the host transport in place. */
int sg_cuda_stage_run(sg_cuda_stage_t *st, float *dbuf, size_t count, sg_host_reduce_fn reduce,
                      void *arg);
void sg_cuda_stage_destroy(sg_cuda_stage_t **st);

/* Device ring within one host (ring_prims.h): inboxes shared by CUDA IPC.
 * Collective over c: every rank calls new, run and destroy. */
typedef struct sg_cuda_ring sg_cuda_ring_t;
/* mode: staged (a kernel and a host synchronization per primitive, flow
 * control over the transport) or persistent (one kernel per call, flow
 * control by flags in device memory: pring_plan.h). */
enum { SG_CUDA_RING_STAGED = 0, SG_CUDA_RING_PERSISTENT = 1 };
/* The persistent ring's channels, lanes (thread blocks) per channel, inbox
 * slots per channel, and the longest wait for a neighbour's flag before a
 * lane gives up (the call then fails naming the neighbour). */
enum {
  SG_CUDA_PRING_CHANS = 8,
  SG_CUDA_PRING_PARTS = 4,
  SG_CUDA_PRING_SLOTS = 4,
  SG_CUDA_PRING_TIMEOUT_MS = 30000
};
int sg_cuda_ring_new(sg_cuda_ring_t **out, sg_comm_t *c, size_t seg, int mode);
/* Persistent: the longest wait for a neighbour (default SG_CUDA_PRING_TIMEOUT_MS). */
void sg_cuda_ring_set_timeout(sg_cuda_ring_t *rg, double seconds);
int sg_cuda_ring_run(sg_cuda_ring_t *rg, float *dbuf, size_t count);
void sg_cuda_ring_destroy(sg_cuda_ring_t **rg);

/* NCCL (when the build found it): ncclAllReduce in place. */
#define SG_NCCL_ID_BYTES 128
typedef struct sg_cuda_nccl sg_cuda_nccl_t;
int sg_cuda_nccl_id(void *id); /* SG_NCCL_ID_BYTES, on one rank */
int sg_cuda_nccl_new(sg_cuda_nccl_t **out, const void *id, int rank, int size);
int sg_cuda_nccl_run(sg_cuda_nccl_t *nc, float *dbuf, size_t count);
void sg_cuda_nccl_destroy(sg_cuda_nccl_t **nc);

#endif
