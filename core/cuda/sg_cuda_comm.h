/* sg_cuda_comm.h - communication of device vectors: host-staged through pinned slots, the device ring within a host, NCCL.
 * Part of the CUDA layer's interface (sg_cuda.h includes every part);
 * cuda_none.c stands in for all of it in a build without CUDA. */
#ifndef SG_CUDA_COMM_H
#define SG_CUDA_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "stage_plan.h"
#include "transport.h"

/* ---- communication of device vectors (cuda_comm.c) --------------------- */

/* Host-staged: pinned slots, a down and an up stream (stage_plan.h). */
typedef struct sg_cuda_stage sg_cuda_stage_t;
typedef int (*sg_host_reduce_fn)(void *arg, float *host, size_t len);
int sg_cuda_stage_new(sg_cuda_stage_t **out, size_t chunk, int slots);
/* Allreduce dbuf[0..count) chunk by chunk: reduce(arg, slot, len) sums a
 * chunk over the host transport in place. */
int sg_cuda_stage_run(sg_cuda_stage_t *st, float *dbuf, size_t count, sg_host_reduce_fn reduce,
                      void *arg);
/* Overlap with backprop (stage_plan.h, pieces; bucket_plan.h): one event
 * per bucket.  sg_cuda_stage_mark records bucket's event on the process
 * stream (backward has issued the op that completes it);
 * sg_cuda_stage_run_pieces reduces the pieces in order, the down-copies
 * of a bucket waiting on the device for its event only, so they run
 * while backward goes on; returns when every piece is back in dbuf.
 * Pieces hold at most the stage's chunk. */
int sg_cuda_stage_buckets(sg_cuda_stage_t *st, size_t nbuckets);
int sg_cuda_stage_mark(sg_cuda_stage_t *st, size_t bucket);
int sg_cuda_stage_run_pieces(sg_cuda_stage_t *st, float *dbuf, const sg_stage_piece_t *pieces,
                             size_t npieces, sg_host_reduce_fn reduce, void *arg);
void sg_cuda_stage_destroy(sg_cuda_stage_t **st);

/* Overlap of a device collective with backprop (coll_plan.h): one event
 * per bucket, recorded on the process stream as backward issues the op
 * that completes the bucket (mark), and a communication stream that
 * waits for a bucket's event only (wait), runs the collectives
 * (sg_cuda_ring_run_on, sg_cuda_nccl_run_on), records each bucket's end
 * (done) and is joined by the process stream (join) before the update.
 * sg_cuda_coll_times: the host waits for bucket b's events in turn and
 * gives sg_now() as each was seen to pass (ready: backward wrote it;
 * end: its sum is done). */
typedef struct sg_cuda_coll sg_cuda_coll_t;
int sg_cuda_coll_new(sg_cuda_coll_t **out, size_t nbuckets);
int sg_cuda_coll_mark(sg_cuda_coll_t *co, size_t bucket);
int sg_cuda_coll_wait(sg_cuda_coll_t *co, size_t bucket);
int sg_cuda_coll_done(sg_cuda_coll_t *co, size_t bucket);
int sg_cuda_coll_join(sg_cuda_coll_t *co);
int sg_cuda_coll_times(sg_cuda_coll_t *co, size_t bucket, double *ready, double *end);
void sg_cuda_coll_destroy(sg_cuda_coll_t **co);

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
/* The same on co's communication stream, ordered after what that stream
 * waits for (no wait for the process stream): staged returns when the
 * sum is done (its per-primitive synchronizations are that stream's);
 * persistent returns once the kernel is launched, and
 * sg_cuda_ring_settle, after the host has waited for the stream, reports
 * a lane that gave up. */
int sg_cuda_ring_run_on(sg_cuda_ring_t *rg, sg_cuda_coll_t *co, float *dbuf, size_t count);
int sg_cuda_ring_settle(sg_cuda_ring_t *rg);
/* update: sharded, staged ring only (ring_prims.h, the owner's step): the
 * sum of dgrad's owned chunks, the optimizer (sg_cuda_sgd's kernel, the
 * 1/N scale gscale) on those ranges of dparams with the packed momentum
 * dmom (sg_dring_floats_owned floats; NULL without momentum), and the
 * parameters allgathered into dparams.  Returns when done. */
typedef struct sg_cuda_sgd_args {
  float gscale, lr, wd, mu;
} sg_cuda_sgd_args_t;
int sg_cuda_ring_run_sharded(sg_cuda_ring_t *rg, float *dgrad, float *dparams, float *dmom,
                             size_t count, const sg_cuda_sgd_args_t *a);
void sg_cuda_ring_destroy(sg_cuda_ring_t **rg);

/* NCCL (when the build found it): ncclAllReduce in place. */
#define SG_NCCL_ID_BYTES 128
typedef struct sg_cuda_nccl sg_cuda_nccl_t;
int sg_cuda_nccl_id(void *id); /* SG_NCCL_ID_BYTES, on one rank */
int sg_cuda_nccl_new(sg_cuda_nccl_t **out, const void *id, int rank, int size);
int sg_cuda_nccl_run(sg_cuda_nccl_t *nc, float *dbuf, size_t count);
/* ncclAllReduce on co's communication stream; returns once enqueued. */
int sg_cuda_nccl_run_on(sg_cuda_nccl_t *nc, sg_cuda_coll_t *co, float *dbuf, size_t count);
/* In place on the process stream, returning once enqueued (coll_plan.h,
 * the sharded update): dbuf holds nranks x shard floats; reduce-scatter
 * leaves this rank's summed shard at rank x shard, allgather fills every
 * shard from its rank's. */
int sg_cuda_nccl_reduce_scatter(sg_cuda_nccl_t *nc, float *dbuf, size_t shard);
int sg_cuda_nccl_all_gather(sg_cuda_nccl_t *nc, float *dbuf, size_t shard);
void sg_cuda_nccl_destroy(sg_cuda_nccl_t **nc);

#endif
