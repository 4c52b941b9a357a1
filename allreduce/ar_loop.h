/* ar_loop.h - the allreduce engine's one training loop and the memory
 * ops it runs on (allreduce_engine.c: the loop and the host ops;
 * allreduce_device.c: the device ops).
 *
 * The loop (setup, broadcast, every step: grad, barrier, sum, apply,
 * evaluation, dump) is written once; where the vectors live and which
 * calls touch them is a row of ar_mem_ops_t:
 *
 *   op       host (sg_ar_mem_host)               cuda (sg_ar_mem_cuda)
 *   alloc    params, grad (huge pages)           the same on the host, plus
 *                                                params, grad, momentum on
 *                                                the device
 *   comm     sg_ar_t (+ topk, overlap, sharded)  the algorithm row's device
 *                                                summation (staged, cuda-ring,
 *                                                nccl)
 *   load     -                                   params host -> device
 *   grad     sg_workload_grad                    sg_workload_grad_device
 *   reduce   sg_ar_run | _run_update | topk      the device summation (sharded:
 *                                                the staged ring, the owner's
 *                                                update on the device)
 *   apply    sg_optim_apply_range                sg_cuda_sgd (1/N folded in)
 *   overlap  sg_ar_overlap_step (overlap.h)      backward issued with an event
 *                                                per bucket, the buckets'
 *                                                pieces staged as each event
 *                                                passes (host-staged rows)
 *   view     -                                   params device -> host
 *   fini     frees what alloc and comm made      the same
 *
 * `view` runs only when the host copy of the parameters is read (rank
 * 0's evaluation, the dump).  Every option is read once into cfg
 * (sg_ar_cfg_t) before anything trains. */
#ifndef SG_AR_LOOP_H
#define SG_AR_LOOP_H

#include <stddef.h>
#include <stdint.h>

#include "allreduce.h"
#include "engine.h"
#include "overlap.h"

struct sg_topk;
struct sg_ar_overlap;
struct ar_dev_state; /* allreduce_device.c */

typedef struct ar_loop ar_loop_t;

typedef struct ar_mem_ops {
  const char *name;          /* "host" | "cuda" */
  const char *info_key;      /* run_info key of the compute side ("blas" | "device") */
  const char *(*info)(void); /* its value */
  int (*alloc)(ar_loop_t *lp);
  int (*comm)(ar_loop_t *lp, int64_t segment);
  int (*load)(ar_loop_t *lp);
  int (*grad)(ar_loop_t *lp, int64_t step, double *loss);
  int (*reduce)(ar_loop_t *lp);
  int (*apply)(ar_loop_t *lp, int64_t step);
  /* overlap: grad and sum in one, buckets reduced while backward runs;
   * *t_grad: sg_now() when backward was seen to end */
  int (*overlap)(ar_loop_t *lp, int64_t step, double *loss, double *t_grad);
  int (*view)(ar_loop_t *lp);
  void (*fini)(ar_loop_t *lp);
} ar_mem_ops_t;

extern const ar_mem_ops_t sg_ar_mem_host, sg_ar_mem_cuda;

/* overlap: true with device: cuda (allreduce_device.c): taken for the
 * host-staged ring, rhd and tree and the device rows cuda-ring and nccl
 * (every model the device runs); one line for hier and native. */
int sg_ar_dev_check_overlap(const sg_opts_t *o, const sg_ar_cfg_t *c);
/* update: sharded with device: cuda: one line for cuda-ring with
 * cuda_ring: persistent (its kernel has no owner's update). */
int sg_ar_dev_check_sharded(const sg_ar_cfg_t *c);

/* update: sharded with device: cuda (allreduce_device.c), host-staged
 * ring, plain C so that the CPU twin runs it with a simulated device.
 * Each staged chunk of the gradient is summed by the ring with the
 * sharded update (sg_ar_run_update): the owner of each segment forms its
 * sum (own part + the part received, the host update's one addition),
 * ops.update uploads it and runs the optimizer on the device for that
 * range only -- the momentum lives for the owned ranges alone, packed in
 * the order the ring hands them over (soff) -- and downloads the updated
 * parameters into the chunk's parameter slot, which the ring's allgather
 * then moves instead of sums; the chunk's slot goes back up holding the
 * parameters.  After the run the device gradient vector holds the new
 * parameters (the caller swaps the two vectors). */
typedef struct sg_ar_shard_ops {
  void *ctx;
  /* params[off, off+len) -= the update from sum[0, len) (the mean's
   * scale, lr, momentum at shard offset soff), then copied into out */
  int (*update)(void *ctx, size_t off, size_t len, size_t soff, const float *sum, float *out);
} sg_ar_shard_ops_t;

typedef struct sg_ar_shard {
  sg_ar_t *ar;
  sg_ar_shard_ops_t ops;
  float *sum, *pslot;  /* host scratch, one chunk each */
  const float *cur;    /* the slot being summed */
  size_t chunk, chunk_off, soff, scap;
  int rc, plant;       /* plant (tests): each owned range's last float not updated */
} sg_ar_shard_t;

/* Owned floats of a rank over a vector of n staged in chunks (the bound
 * of the packed momentum): the sum over chunks of ceil(len / N). */
size_t sg_ar_shard_cap(size_t n, size_t chunk, int nranks);
int sg_ar_shard_init(sg_ar_shard_t *sh, sg_ar_t *ar, size_t chunk, size_t scap,
                     const sg_ar_shard_ops_t *ops);
/* Before each step's staged run. */
void sg_ar_shard_begin(sg_ar_shard_t *sh);
/* The staged run's reduce (sg_host_reduce_fn): one chunk. */
int sg_ar_shard_reduce(void *arg, float *slot, size_t len);
void sg_ar_shard_free(sg_ar_shard_t *sh);

/* What one training step needs. */
struct ar_loop {
  sg_rank_ctx_t *ctx;
  sg_ar_cfg_t cfg;     /* the options, parsed once */
  const ar_mem_ops_t *mem;
  sg_workload_t *wl;
  sg_optim_t *opt;
  sg_ar_t *ar;
  struct sg_topk *tk;
  struct sg_ar_overlap *ov; /* overlap: true */
  float *params, *grad;     /* host vectors (device: params is the host copy) */
  size_t n;
  int sharded;         /* update: the ring's owners update (sg_ar_run_update) */
  int overlapped;      /* overlap: the step is mem->overlap (comm decides) */
  const sg_ar_bucket_time_t *bt; /* device overlap: the last step's buckets */
  size_t nbt;
  int64_t step;        /* the step being updated (for the update callback) */
  double t_ready, t_ar0, t_ar1; /* no overlap: the gradient's bucket (sg_now()) */
  float scale;         /* 1/N: the sum to the mean gradient */
  uint64_t dev_bytes;  /* reduce: bytes the devices moved past the transport */
  struct ar_dev_state *dev; /* device: cuda */
};

#endif
