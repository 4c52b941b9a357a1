/* ring_prims.h - ring allreduce as a sequence of primitives, for a ring of
 * device buffers within one host (CUDA IPC), with a host twin for tests.
 *
 * Rank r sends only to r+1 and receives only from r-1 (mod N).  Every
 * rank owns an inbox of two slots that its LEFT neighbour writes into
 * directly (a CUDA IPC mapping of the inbox on the device; plain memory in
 * the host twin).  One call reduces the vector block by block, a block
 * being N * seg floats cut into N chunks (sg_ar_chunk_off/len).  Per block
 * rank r runs 2N-1 primitives (the sequence of NCCL's ring allreduce):
 *
 *   k = 0            send               chunk r-1    out = x
 *   k = 1 .. N-2     recvReduceSend     chunk r-1-k  out = x + in
 *   k = N-1          recvReduceCopySend chunk r      x = out = x + in
 *   k = N .. 2N-3    recvCopySend       chunk r-k+N-1  x = out = in
 *   k = 2N-2         recv               chunk r+1    x = in
 *
 * (chunks mod N; `in` = this rank's inbox slot, `out` = the right
 * neighbour's inbox slot).  What rank r sends at step k, rank r+1 consumes
 * at step k+1.  Worked example, N = 3, inputs a, b, c (chunk j of rank
 * 0's vector is a_j):
 *
 *   k   rank 0                 rank 1                 rank 2
 *   0   send a2                send b0                send c1
 *   1   rRS  a1+c1             rRS  b2+a2             rRS  c0+b0
 *   2   rRCS a0+(c0+b0) = S0   rRCS b1+(a1+c1) = S1   rRCS c2+(b2+a2) = S2
 *   3   rCS  S2                rCS  S0                rCS  S1
 *   4   recv S1                recv S2                recv S0
 *
 * Flow control, per rank, counting sends i and receives j from 0: send i
 * writes the right neighbour's slot i % 2, receive j reads own slot j % 2.
 * Before receive j: wait for READY(j) from the left (its send j is
 * complete).  Before send i >= 2: wait for ACK(i-2) from the right (it has
 * consumed that slot).  After the primitive: READY to the right, ACK to
 * the left.  At the end the last two ACKs are drained, so that calls are
 * independent.  These small messages go over the transport; the data
 * never leaves the devices.
 */
#ifndef SG_RING_PRIMS_H
#define SG_RING_PRIMS_H

#include <stddef.h>
#include <stdint.h>

#include "ring_prim_op.h"
#include "transport.h"

/* Tags of the flow-control messages (below SG_TAG_MAX, apart from the
 * allreduce engine's ranges). */
enum { SG_DRING_TAG_READY = 20700, SG_DRING_TAG_ACK = 20701, SG_DRING_TAG_HANDLE = 20702,
       SG_DRING_TAG_HANDLE_LEFT = 20703 };

typedef struct sg_prim {
  int op;    /* SG_PRIM_* */
  int chunk; /* 0 .. N-1 */
} sg_prim_t;

/* 2N-1 primitives per block (0 for N == 1). */
static inline int sg_ring_nprims(int n) { return n > 1 ? 2 * n - 1 : 0; }
/* Primitive k of rank r.  plant_bug (tests only): the first
 * recvCopySend names the wrong chunk. */
sg_prim_t sg_ring_prim(int n, int r, int k, int plant_bug);
static inline int sg_prim_recvs(int op) { return op != SG_PRIM_SEND; }
static inline int sg_prim_sends(int op) { return op != SG_PRIM_RECV; }
const char *sg_prim_name(int op);

/* The data movers of one rank: apply primitive `op` to x[off, off+len)
 * with this rank's inbox slot in_slot and the right neighbour's inbox slot
 * out_slot, and return once its writes are complete and visible to the
 * neighbour (the CUDA layer synchronizes its stream). */
typedef struct sg_dring_ops {
  void *ctx;
  int (*apply)(void *ctx, int op, size_t off, size_t len, int in_slot, int out_slot);
  /* sharded plans only: the owner's step over grad[off, off+len): the
   * sum grad += inbox slot in_slot; the optimizer on params[off, off+upd)
   * with the packed momentum from soff; the right's slot out_slot =
   * params[off, off+len); complete and visible on return, as apply */
  int (*owner)(void *ctx, size_t off, size_t len, size_t upd, size_t soff, int in_slot,
               int out_slot);
} sg_dring_ops_t;

typedef struct sg_dring_plan {
  size_t count; /* floats of the vector */
  size_t seg;   /* floats per chunk of a block = inbox slot size */
  int sharded;  /* update: sharded (the owner's step, parameters in the allgather) */
  int plant_bug; /* tests only: 1 = the first recvCopySend names the wrong chunk;
                    2 = (sharded) each owned range is updated one float short */
} sg_dring_plan_t;

/* Floats rank r sends to its neighbour's inbox in a call (byte counters). */
size_t sg_dring_floats_sent(int n, int r, size_t count, size_t seg);
/* Floats rank r owns in a sharded call (its chunk r of every block): the
 * length of its packed momentum. */
size_t sg_dring_floats_owned(int n, int r, size_t count, size_t seg);

/* Run the primitive schedule on comm c (ring over c's ranks). */
int sg_dring_run(sg_comm_t *c, const sg_dring_plan_t *p, const sg_dring_ops_t *ops);

/* Give this rank's inbox handle (len bytes) to the left neighbour and take
 * the right neighbour's (the inbox this rank writes into). */
int sg_dring_exchange(sg_comm_t *c, const void *mine, void *right, size_t len);

#endif
