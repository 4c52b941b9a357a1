/* replica.h - a device replica of an engine's parameters and gradient,
 * moved through the host one way at a time (a ps worker: the gradient
 * down for its pushes, the pulled parameters up; a mapreduce executor:
 * the broadcast parameters up, its tasks' weighted gradients summed on
 * the device and the sum down for the reduce).
 *
 * The replica holds dp (parameters) and dg (gradient) on a device and
 * moves them through pinned staging slots with the one-way runs of
 * stage_plan.h: after the gradient, its download runs on demand
 * (sg_replica_grad_until: the engine asks for host_grad[0, hi) before it
 * sends a message that reads it, so the copy of chunk c+1 overlaps the
 * send of chunk c); a pull's parameters go up whole (sg_replica_put).
 *
 * The device under it is an ops table (sg_rdev_t): the CUDA one
 * (sg_cuda_rdev_new, cuda_comm.c) or a simulated one whose copies run as
 * late as allowed (tests/test_cuda_replica.c, the CPU twin that runs the
 * real ps engine on it).  Plain C. */
#ifndef SG_REPLICA_H
#define SG_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "stage_plan.h"

struct sg_workload;

typedef struct sg_rdev {
  void *ctx;
  int (*alloc)(void *ctx, float **d, size_t n, const char *what);
  void (*release)(void *ctx, float **d);
  /* the staging executor (slots of `chunk` floats) bound to device vector
   * d, ordered after the device work already queued (the gradient) */
  int (*bind)(void *ctx, float *d, const sg_stage_ops_t **ops);
  /* dg = gradient of step `step` at dp (sg_workload_grad's, on the device) */
  int (*grad)(void *ctx, struct sg_workload *wl, const float *dp, float *dg, int64_t step,
              double *loss);
  /* dg = gradient over rows [first, first + count) of step `step`'s batch
   * (sg_workload_grad_slice's, on the device) */
  int (*grad_slice)(void *ctx, struct sg_workload *wl, const float *dp, float *dg, int64_t step,
                    int64_t first, int64_t count, double *loss);
  /* dacc = w dg (first) or dacc += w dg, a float product then a float
   * sum per element (no fused multiply-add: the host loop's operations) */
  int (*acc)(void *ctx, float *dacc, const float *dg, size_t n, float w, int first);
  void (*destroy)(void *ctx);
  size_t chunk; /* floats per staged chunk */
} sg_rdev_t;

typedef struct sg_replica {
  sg_rdev_t dev; /* owned: destroyed with the replica */
  size_t n;
  float *dp, *dg;
  float *dacc;             /* sg_replica_want_acc: a task accumulator */
  float *host_grad;        /* where the gradient's download lands */
  sg_stage_cursor_t down;  /* the gradient's download in progress */
  int plant;               /* tests only: stage_plan.h's one-way plant */
} sg_replica_t;

/* Takes dev (its destroy runs with the replica's, also on failure). */
int sg_replica_new(sg_replica_t **out, const sg_rdev_t *dev, size_t n, float *host_grad);
/* dg = grad(dp) for `step`; begins the gradient's download to host_grad. */
int sg_replica_grad(sg_replica_t *r, struct sg_workload *wl, int64_t step, double *loss);
/* host_grad[0, hi) has arrived (hi > n: all of it). */
int sg_replica_grad_until(sg_replica_t *r, size_t hi);
/* The rest of the download (every chunk on the host). */
int sg_replica_grad_end(sg_replica_t *r);
/* dp = host[0, n), staged up chunk by chunk; returns when it is there. */
int sg_replica_put(sg_replica_t *r, float *host);
void sg_replica_destroy(sg_replica_t **r);

/* mapreduce: the accumulator dacc (allocated once) ... */
int sg_replica_want_acc(sg_replica_t *r);
/* ... dg = a task's gradient (rows [first, first + count) of the batch) ... */
int sg_replica_grad_slice(sg_replica_t *r, struct sg_workload *wl, int64_t step, int64_t first,
                          int64_t count, double *loss);
/* ... dacc = w dg (first) or dacc += w dg ... */
int sg_replica_acc(sg_replica_t *r, float w, int first);
/* ... and dacc staged down into host[0, n) whole. */
int sg_replica_get_acc(sg_replica_t *r, float *host);

/* The CUDA device (cuda_comm.c; SG_EUNSUPPORTED in a build without CUDA):
 * 2 pinned slots of `chunk` floats, a down and an up stream. */
int sg_cuda_rdev_new(sg_rdev_t *out, size_t chunk);

#endif
