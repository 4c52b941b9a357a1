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
 *   reduce   sg_ar_run | _run_update | topk      the device summation
 *   apply    sg_optim_apply_range                sg_cuda_sgd (1/N folded in)
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
  int (*view)(ar_loop_t *lp);
  void (*fini)(ar_loop_t *lp);
} ar_mem_ops_t;

extern const ar_mem_ops_t sg_ar_mem_host, sg_ar_mem_cuda;

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
  int64_t step;        /* the step being updated (for the update callback) */
  double t_ready, t_ar0, t_ar1; /* no overlap: the gradient's bucket (sg_now()) */
  float scale;         /* 1/N: the sum to the mean gradient */
  uint64_t dev_bytes;  /* reduce: bytes the devices moved past the transport */
  struct ar_dev_state *dev; /* device: cuda */
};

#endif
