/* pring_plan.h - the persistent device ring's schedule: which chunk,
 * which slot, which flag value each step of one channel waits for and
 * posts.  Plain C with no dependency, compiled by nvcc into the kernel
 * (cuda_kernels.cu) and by the C compiler into the host twin that the CPU
 * tests run (tests/test_cuda_sched.c), so both execute the same steps.
 *
 * One kernel launch does a whole allreduce.  The vector is cut into
 * blocks of N * seg floats exactly as the staged device ring cuts it
 * (ring_prims.h), and block b is reduced by channel b mod C: one CUDA
 * thread block per channel, independent of the others.  Within its block
 * a channel runs the 2N-1 primitives of sg_ring_prim_at (NCCL's
 * sequence), so every element sees the same additions in the same order
 * as in the staged ring.
 *
 * Flow control lives in device memory.  Per channel, rank r owns S inbox
 * slots of seg floats that its LEFT neighbour writes, and two 64-bit
 * counters: ready (written by the left: how many sends it has completed
 * into r's inbox) and ack (written by the right: how many of r's sends it
 * has consumed).  Counting this channel's sends i and receives j from the
 * ring's creation (the counters never go back, so calls need no reset):
 *
 *   receive j: wait ready >= j+1; read own slot j % S; after the step
 *              post ack = j+1 into the left's counter
 *   send i:    wait ack >= i+1-S (the right consumed send i-S, the slot's
 *              previous occupant); write the right's slot i % S; after
 *              the step post ready = i+1 into the right's counter
 *
 * Sends and receives per block are both 2N-2, so one base per channel
 * (its sends so far, equal to its receives) locates a call's steps.
 *
 * Lanes: each channel is served by `parts` thread blocks, its lanes.  A
 * slot of seg floats is cut into `parts` fixed windows of whole 4-float
 * groups; lane (ch, q) takes window q of every step's chunk (a chunk is at
 * most seg floats; a short chunk leaves the last windows empty) and of
 * every slot, with flags of its own.  The windows do not depend on the
 * chunk's length, so the lanes of a channel touch disjoint elements and
 * disjoint slot bytes at all times (a split by each chunk's own length
 * would let lane q's next write into a slot cover bytes that lane q+1's
 * reader has not taken yet: its ACK does not guard them).  Each lane is
 * thus a ring on its own: the steps, the additions and their order are
 * the channel's, spread over more of the device (a vector of one block
 * still keeps `parts` multiprocessors busy).  Flags, bases and counters
 * are per lane; a lane whose window of a chunk is empty still waits and
 * posts.
 */
#ifndef SG_PRING_PLAN_H
#define SG_PRING_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "ring_prim_op.h"

/* A rank's flag words per lane, 128 bytes apart: ready, ack (each on its
 * own 64-byte line) and base (the lane's sends before this call, kept on
 * the device by the kernel). */
enum { SG_PRING_READY = 0, SG_PRING_ACK = 8, SG_PRING_BASE = 12, SG_PRING_FLAG_STRIDE = 16 };

typedef struct sg_pring {
  int n, r;     /* ranks, this rank */
  int chans;    /* channels, >= 1 */
  int parts;    /* lanes (thread blocks) per channel, >= 1 */
  int slots;    /* inbox slots per channel, >= 2 */
  size_t count; /* floats of the vector */
  size_t seg;   /* floats per chunk of a block = slot size, >= 1 */
} sg_pring_t;

typedef struct sg_pring_step {
  int op;              /* SG_PRIM_* */
  size_t off, len;     /* x[off, off+len): this lane's part of the chunk */
  size_t soff;         /* the part's offset inside a slot */
  int rx, tx;          /* receives / sends */
  int in_slot;         /* rx: own slot read */
  int out_slot;        /* tx: the right's slot written */
  uint64_t need_ready; /* rx: wait own ready >= this */
  uint64_t need_ack;   /* tx: wait own ack >= this (0: no wait) */
  uint64_t post_ready; /* tx: the right's ready = this after the step */
  uint64_t post_ack;   /* rx: the left's ack = this after the step */
} sg_pring_step_t;

static inline SG_HD size_t sg_pring_block(const sg_pring_t *p) { return (size_t)p->n * p->seg; }

/* Blocks of the vector that channel ch reduces. */
static inline SG_HD size_t sg_pring_nblocks(const sg_pring_t *p, int ch) {
  if (p->n < 2 || p->count == 0) return 0;
  const size_t blocks = (p->count + sg_pring_block(p) - 1) / sg_pring_block(p);
  return blocks > (size_t)ch ? (blocks - (size_t)ch + (size_t)p->chans - 1) / (size_t)p->chans : 0;
}

/* Steps of channel ch in one call, and the sends (= receives) they make. */
static inline SG_HD size_t sg_pring_nsteps(const sg_pring_t *p, int ch) {
  return sg_pring_nblocks(p, ch) * (size_t)(2 * p->n - 1);
}
static inline SG_HD uint64_t sg_pring_nsends(const sg_pring_t *p, int ch) {
  return (uint64_t)sg_pring_nblocks(p, ch) * (uint64_t)(2 * p->n - 2);
}

/* Lanes of the kernel (thread blocks), and the channel of lane ln. */
static inline SG_HD int sg_pring_lanes(const sg_pring_t *p) { return p->chans * p->parts; }
static inline SG_HD int sg_pring_chan(const sg_pring_t *p, int ln) { return ln / p->parts; }

/* Window q of `parts` of a slot of seg floats (whole 4-float groups),
 * clipped to a chunk of len <= seg floats: [*off, *off + *plen). */
static inline SG_HD void sg_pring_part(size_t len, size_t seg, int parts, int q, size_t *off,
                                       size_t *plen) {
  const size_t groups = (seg + 3) / 4;
  size_t a = 4 * sg_prim_chunk_off(groups, parts, q);
  size_t b = a + 4 * sg_prim_chunk_len(groups, parts, q);
  a = a < len ? a : len;
  b = b < len ? b : len;
  *off = a;
  *plen = b - a;
}

/* Step t of lane ln, whose counters stood at base when the call began. */
static inline SG_HD void sg_pring_step(const sg_pring_t *p, int ln, uint64_t base, size_t t,
                                       sg_pring_step_t *s) {
  const int ch = sg_pring_chan(p, ln);
  const int n = p->n, k = (int)(t % (size_t)(2 * n - 1));
  const size_t bi = t / (size_t)(2 * n - 1);
  const size_t b0 = (bi * (size_t)p->chans + (size_t)ch) * sg_pring_block(p);
  const size_t bl = p->count - b0 < sg_pring_block(p) ? p->count - b0 : sg_pring_block(p);
  int chunk = 0;
  sg_ring_prim_at(n, p->r, k, &s->op, &chunk);
  sg_pring_part(sg_prim_chunk_len(bl, n, chunk), p->seg, p->parts, ln % p->parts, &s->soff,
                &s->len);
  s->off = b0 + sg_prim_chunk_off(bl, n, chunk) + s->soff;
  s->rx = s->op != SG_PRIM_SEND;
  s->tx = s->op != SG_PRIM_RECV;
  const uint64_t i = base + (uint64_t)bi * (uint64_t)(2 * n - 2) + (uint64_t)k; /* send index */
  const uint64_t j = i - 1;                                           /* receive index (rx) */
  const uint64_t S = (uint64_t)p->slots;
  s->in_slot = s->rx ? (int)(j % S) : -1;
  s->need_ready = s->rx ? j + 1 : 0;
  s->post_ack = s->rx ? j + 1 : 0;
  s->out_slot = s->tx ? (int)(i % S) : -1;
  s->need_ack = s->tx && i + 1 > S ? i + 1 - S : 0;
  s->post_ready = s->tx ? i + 1 : 0;
}

#endif
