/* coll_plan.h - the schedules of the device collectives (cuda-ring,
 * nccl) for overlap with backprop and the sharded update, plain C: the
 * CUDA layer (allreduce/allreduce_device.c over cuda_comm.c) and the CPU
 * twin (tests/test_cuda_devcoll.c, a simulated device) run the same
 * code through an ops table.
 *
 * Overlap (sg_coll_overlap_run).  The buckets are the host overlap's
 * (bucket_plan.h); backward records bucket b's event on the compute
 * stream once it has issued the op that completes it.  A second stream,
 * the communication stream, then takes the buckets in order:
 *
 *   for b = 0 .. nb-1:  comm waits for b's event   (ops->wait)
 *                       the collective on b's range (ops->sum, on comm)
 *   compute waits for comm                           (ops->join)
 *
 * so bucket b's sum starts as soon as backward has written it, while the
 * compute stream goes on with the layers below; the optimizer step
 * (queued on the compute stream after the join) waits for every sum.
 * nccl: ncclAllReduce per bucket on the comm stream (asynchronous; no
 * group call, which would launch the whole group after the last wait);
 * cuda-ring: its ring on the bucket's range on the comm stream (staged:
 * its per-primitive synchronizations are the comm stream's; persistent:
 * one launch per bucket).
 *
 * The sharded update over a reduce-scatter and an allgather (nccl,
 * sg_coll_shard_run).  The vectors are padded to N * S floats,
 * S = ceil(n / N) (the padding zero, never written by the gradient);
 * rank r owns [r S, r S + own), own = sg_coll_own(n, N, r):
 *
 *   reduce-scatter  grad[r S, (r+1) S) = the sum over the ranks, in place
 *   update          params[r S, r S + own) from that sum, the momentum of
 *                   the owned range only (own floats)
 *   allgather       params[q S, (q+1) S) = rank q's, for every q, in place
 *
 * (cuda-ring's sharded update is its ring with the owner's step,
 * ring_prims.h.)  plant (tests only) makes the twins' planted bugs:
 * overlap 1 = the first bucket's wait left out, 2 = the join left out;
 * sharded 1 = the owned range updated one float short. */
#ifndef SG_COLL_PLAN_H
#define SG_COLL_PLAN_H

#include <stddef.h>

#include "bucket_plan.h"
#include "err.h"

typedef struct sg_coll_ops {
  void *ctx;
  int (*wait)(void *ctx, long bucket);                        /* comm waits b's event */
  int (*sum)(void *ctx, long bucket, size_t off, size_t len); /* allreduce, on comm */
  int (*join)(void *ctx);                                     /* compute waits comm */
} sg_coll_ops_t;

static inline int sg_coll_overlap_run(const sg_bucket_t *b, size_t nb, const sg_coll_ops_t *ops,
                                      int plant) {
  for (size_t i = 0; i < nb; i++) {
    if (!(plant == 1 && i == 0)) SG_CHECK(ops->wait(ops->ctx, (long)i));
    SG_CHECK(ops->sum(ops->ctx, (long)i, b[i].off, b[i].len));
  }
  return plant == 2 ? SG_OK : ops->join(ops->ctx);
}

/* The shard: S = ceil(n / N) floats; rank r's owned part of [r S, ...). */
static inline size_t sg_coll_shard(size_t n, int nranks) {
  return nranks > 0 ? (n + (size_t)nranks - 1) / (size_t)nranks : n;
}
static inline size_t sg_coll_own(size_t n, int nranks, int r) {
  const size_t s = sg_coll_shard(n, nranks), off = (size_t)r * s;
  return off >= n ? 0 : (n - off < s ? n - off : s);
}

typedef struct sg_coll_shard_ops {
  void *ctx;
  int (*reduce_scatter)(void *ctx, size_t shard); /* grad, in place, shard floats each */
  int (*update)(void *ctx, size_t off, size_t len); /* params[off, off+len), momentum [0, len) */
  int (*all_gather)(void *ctx, size_t shard);     /* params, in place */
} sg_coll_shard_ops_t;

static inline int sg_coll_shard_run(size_t n, int nranks, int r,
                                    const sg_coll_shard_ops_t *ops, int plant) {
  const size_t s = sg_coll_shard(n, nranks), own = sg_coll_own(n, nranks, r);
  const size_t upd = plant == 1 && own ? own - 1 : own;
  SG_CHECK(ops->reduce_scatter(ops->ctx, s));
  if (upd) SG_CHECK(ops->update(ops->ctx, (size_t)r * s, upd));
  return ops->all_gather(ops->ctx, s);
}

#endif
