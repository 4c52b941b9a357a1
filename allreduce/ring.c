/* ring.c - ring allreduce: reduce-scatter, then allgather, pipelined.
 *
 * The vector is cut into N chunks (chunk c = sg_ar_chunk_off/len: the
 * first count % N chunks get one element more).  Rank r sends only to its
 * right neighbour r+1 and receives only from its left neighbour r-1
 * (mod N).  2(N-1) steps:
 *
 *   reduce-scatter, step s = 0 .. N-2:
 *     send chunk (r - s) mod N,  receive chunk (r - s - 1) mod N, add it
 *     to my input in place (a partial sum, sent on at step s + 1; at
 *     s = N-2 the full sum)
 *     -> afterwards rank r holds the full sum of chunk (r + 1) mod N
 *   allgather, step s = 0 .. N-2:
 *     send chunk (r + 1 - s) mod N,  receive chunk (r - s) mod N in place
 *
 * Worked example, N = 3 (a, b, c = the three ranks' inputs; chunk k of
 * rank 0's input is a_k):
 *
 *              rank 0            rank 1            rank 2
 *   RS s=0   send 0 recv 2     send 1 recv 0     send 2 recv 1
 *            a2 += c2          b0 += a0          c1 += b1
 *   RS s=1   send 2 recv 1     send 0 recv 2     send 1 recv 0
 *            a1 += (b1+c1)     b2 += (a2+c2)     c0 += (a0+b0)
 *            holds sum of 1    holds sum of 2    holds sum of 0
 *   AG s=0   send 1 recv 0     send 2 recv 1     send 0 recv 2
 *   AG s=1   send 0 recv 2     send 1 recv 0     send 2 recv 1
 *
 * Bytes per rank: sent = received = 2 (N-1)/N * 4 count, independent of N
 * (the bandwidth-optimal bound); reduced: (N-1)/N * count additions.
 *
 * Pipelining (as Gloo's chunked ring and NCCL): every chunk is cut into
 * segments of o->segment_bytes, and the 2(N-1) steps x segments form one
 * stream of units u = s * nseg + j (step s, segment j).  Unit u's send
 * depends only on unit u - nseg's receive (the same segment one step
 * earlier), so while rank r adds segment j of step s its neighbours are
 * already moving segment j+1 and segment j of step s+1.  Receives are
 * posted o->depth units ahead into depth scratch slots (reduce-scatter) or
 * straight into buf (allgather: no copy); sends are nonblocking and are
 * waited depth units behind.  Rejected: one blocking sendrecv of a whole
 * chunk per step (the plain ring): it lands every chunk in a chunk-sized
 * buffer that then has to be read back from memory for the addition,
 * where a segment still sits in cache.  Side by side over MPI, N = 2,
 * 64 MiB: plain ring 2.9-3.3 GB/s busbw, this one 4.9-6.2 GB/s (with the
 * huge-page buffers of sg_ar_alloc, which cut the kernel's page pinning
 * for Open MPI's single-copy CMA transfers; see docs/engines/allreduce.md).
 *
 * Hazards handled (hard-won):
 *  - count < N or not divisible: some chunks or segments are empty.  Both
 *    sides compute every unit's length from (count, N) alone, and an empty
 *    unit is skipped on BOTH sides, so no rank waits for a message that is
 *    never sent (Gloo's empty-chunk hang).
 *  - the allgather of step s receives into chunk (r - s), which the
 *    reduce-scatter step s SENT from: that send must be complete before the
 *    receive is posted (matters when (N-1) * nseg < depth).
 *
 * Sharded update (sg_ar_run_update): at the last reduce-scatter step the
 * owner updates its segment of the parameters from its partial sum plus
 * the part just received, in one pass (o->update; the sum is never
 * stored), and the allgather moves parameters instead of sums: each rank
 * applies the optimizer to 1/N of the vector while the other segments
 * are still on the way.
 *
 * Deadlock freedom: rank r waits for its send of unit v only once it has
 * posted its receives up to v + depth - 1 >= v; the right neighbour
 * needs nothing from r beyond sends r has already posted.
 */
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "err.h"
#include "compose.h"
#include "prim.h"

typedef struct ring_plan {
  int n, r;          /* ring members; this rank's place among them */
  size_t count, seg; /* seg in floats */
  size_t nseg;       /* segments of the largest chunk */
  size_t s0;         /* first phase step run: 0, or N-1 (allgather only) */
  size_t units;      /* units run: (phase steps run) * nseg */
  int rs_only;       /* reduce-scatter without the allgather */
} ring_plan_t;

/* Chunk sent / received at phase step s (0 .. 2N-3) by rank r. */
static int chunk_sent(const ring_plan_t *p, size_t s) {
  int n = p->n;
  if (s < (size_t)(n - 1)) return (int)(((size_t)p->r + (size_t)n * 2 - s) % (size_t)n);
  size_t t = s - (size_t)(n - 1);
  return (int)(((size_t)p->r + 1 + (size_t)n * 2 - t) % (size_t)n);
}
static int chunk_recvd(const ring_plan_t *p, size_t s) {
  int n = p->n;
  if (s < (size_t)(n - 1)) return (int)(((size_t)p->r + (size_t)n * 2 - s - 1) % (size_t)n);
  size_t t = s - (size_t)(n - 1);
  return (int)(((size_t)p->r + (size_t)n * 2 - t) % (size_t)n);
}

/* Segment j of chunk c: [*off, *off + return value). */
static size_t segment(const ring_plan_t *p, int c, size_t j, size_t *off) {
  size_t coff = sg_ar_chunk_off(p->count, p->n, c), clen = sg_ar_chunk_len(p->count, p->n, c);
  size_t lo = j * p->seg;
  *off = coff + lo;
  if (lo >= clen) return 0;
  return clen - lo < p->seg ? clen - lo : p->seg;
}

static void plan(ring_plan_t *p, int n, int r, size_t count, const sg_ar_opts_t *o,
                 int phases) {
  p->n = n;
  p->r = r;
  p->count = count;
  p->seg = sg_ar_seg_floats(o);
  size_t maxchunk = sg_ar_chunk_len(count, n, 0);
  p->nseg = (maxchunk + p->seg - 1) / p->seg;
  p->s0 = phases == SG_RING_AG ? (size_t)(n - 1) : 0;
  p->rs_only = phases == SG_RING_RS;
  p->units = (phases == (SG_RING_RS | SG_RING_AG) ? 2 : 1) * (size_t)(n - 1) * p->nseg;
}

/* Receive slots d, send slots q = nseg + d + 2: the loop below keeps
 * fewer than q sends in flight (it waits for send v - d once unit v is
 * received), so a send slot and its staging (halves) are free when reused. */
void sg_ar_ring_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                      size_t *reqs) {
  ring_plan_t p;
  plan(&p, n, 0, count, o, SG_RING_RS | SG_RING_AG);
  size_t d = sg_ar_depth(o), q = p.nseg + d + 2;
  size_t seg = p.seg < sg_ar_chunk_len(count, n, 0) ? p.seg : sg_ar_chunk_len(count, n, 0);
  *scratch = (d + q) * seg; /* receive slots, then staging slots */
  *reqs = d + q;
}

/* The state of one call: the plan and the primitives' slots. */
typedef struct ring_run {
  ring_plan_t p;
  sg_prim_t pr;
  float *buf;
  float *agbuf;        /* what the allgather moves: buf, or o->agbuf (update) */
  const sg_ar_opts_t *o;
  size_t rs_units;     /* units of the reduce-scatter phase */
  size_t posted_recv;  /* receives below are posted */
} ring_run_t;

/* The phase step of unit v (units count from the first step run). */
static size_t step_of(const ring_run_t *k, size_t v) { return k->p.s0 + v / k->p.nseg; }

/* Segment of unit v that rank r receives. */
static size_t unit_recvd(const ring_run_t *k, size_t v, size_t *off) {
  return segment(&k->p, chunk_recvd(&k->p, step_of(k, v)), v % k->p.nseg, off);
}

/* Post the receives of units < limit that can be posted now: a
 * reduce-scatter unit lands in its receive slot; an allgather unit lands
 * in place, once the reduce-scatter send that read the same segment has
 * been posted (it is then waited for). */
static int post_recvs(ring_run_t *k, size_t limit) {
  if (limit > k->p.units) limit = k->p.units;
  while (k->posted_recv < limit) {
    size_t v = k->posted_recv, off, len = unit_recvd(k, v, &off);
    float *dst = NULL;
    int s = (int)step_of(k, v);
    if (v >= k->rs_units && !k->pr.half) {
      size_t twin = v - k->rs_units; /* the unit that sent from this segment */
      if (k->rs_units && twin >= k->pr.posted_send) break;
      if (k->rs_units) SG_CHECK(sg_prim_wait_sends(&k->pr, twin + 1));
      dst = k->agbuf + off; /* (allgather alone: no send of this call read it) */
    }
    SG_CHECK(sg_prim_post_recv(&k->pr, v, s, dst, len));
    k->posted_recv++;
  }
  return SG_OK;
}

/* The last reduce-scatter step when the allgather does not follow (hier):
 * the sum stays here.  The planted bug drops one segment's part. */
static int finish_rs_only(ring_run_t *k, size_t u, float *at, size_t len) {
  if (k->o->plant_bug && u % k->p.nseg == 0 && len) {
    int rc;
    (void)sg_prim_recv_slot(&k->pr, u, len, &rc);
    return rc;
  }
  return sg_prim_recv_reduce_copy(&k->pr, u, at, len);
}

/* Unit u has been posted: finish it with the primitive its step calls
 * for; the send it feeds (if any) is unit u + nseg of step s + 1. */
static int finish_unit(ring_run_t *k, size_t u) {
  const size_t s = step_of(k, u), last_rs = (size_t)k->p.n - 2;
  const size_t last = k->p.s0 + k->p.units / k->p.nseg - 1;
  size_t off, len = unit_recvd(k, u, &off);
  float *at = k->buf + off;
  size_t v = u + k->p.nseg;
  if (s == last && k->p.rs_only) return finish_rs_only(k, u, at, len);
  if (s == last) return sg_prim_recv(&k->pr, u, k->agbuf + off, len);
  if (s < last_rs) return sg_prim_recv_reduce_send(&k->pr, u, at, len, v, (int)s + 1);
  if (s > last_rs) return sg_prim_recv_copy_send(&k->pr, u, k->agbuf + off, len, v, (int)s + 1);
  if (k->o->update) { /* sharded update: the owner updates its segment from
                         * its part plus the last one received, and sends it */
    int rc;
    const float *recv = sg_prim_recv_slot(&k->pr, u, len, &rc);
    SG_CHECK(rc);
    if (k->o->plant_bug && u % k->p.nseg == 0) recv = NULL; /* planted: the sum misses it */
    if (len) k->o->update(k->o->update_arg, off, len, recv);
    return sg_prim_send(&k->pr, v, (int)s + 1, k->agbuf + off, len);
  }
  /* Planted bug (tests only): the final reduce of one segment adds
   * nothing: the owner sends on its own input, so the chunk's sum misses
   * the other ranks' part of that segment everywhere. */
  if (k->o->plant_bug && u % k->p.nseg == 0 && len)
    return sg_prim_recv_copy_send(&k->pr, u, at, len, v, (int)s + 1);
  return sg_prim_recv_reduce_copy_send(&k->pr, u, at, len, v, (int)s + 1);
}

static int ring_setup(ring_run_t *k, sg_comm_t *c, const sg_ar_ring_sub_t *g, float *buf,
                      size_t count, const sg_ar_opts_t *o) {
  int n = g->n, r = g->me;
  plan(&k->p, n, r, count, o, g->phases);
  size_t need_s, need_r;
  sg_ar_ring_needs(n, count, o, &need_s, &need_r);
  if (!o || !o->scratch || o->scratch_count < need_s || !o->reqs || o->reqs_count < need_r)
    return sg_err_set(SG_EINVAL, "ring allreduce of %zu floats needs %zu scratch floats "
                      "and %zu request slots (context sized too small)", count, need_s, need_r);
  k->buf = buf;
  k->agbuf = o->update && o->agbuf ? o->agbuf : buf;
  k->o = o;
  k->rs_units = g->phases & SG_RING_RS ? (size_t)(n - 1) * k->p.nseg : 0;
  k->posted_recv = 0;
  sg_prim_t *pr = &k->pr;
  int left = (r + n - 1) % n, right = (r + 1) % n;
  *pr = (sg_prim_t){.c = c, .what = "ring", .left = g->members ? g->members[left] : left,
                    .right = g->members ? g->members[right] : right, .tag = g->tag,
                    .d = sg_ar_depth(o), .half = o->compress == SG_AR_COMPRESS_FP16};
  pr->q = need_r - pr->d;
  pr->slot_floats = need_s / need_r;
  pr->rslot = o->scratch;
  pr->stage = o->scratch + pr->d * pr->slot_floats;
  pr->rreq = (sg_req_t **)o->reqs;
  pr->sreq = (sg_req_t **)o->reqs + pr->d;
  return SG_OK;
}

/* The ring composed of the primitives (prim.h): per segment,
 *   reduce-scatter  send, recvReduceSend x (N-2), recvReduceCopySend
 *   allgather       recvCopySend x (N-2), recv
 * pipelined over segments as described at the top of this file; either
 * phase alone (hier.c) ends or starts at the chunk rank r owns, (r+1) mod N. */
int sg_ar_ring_sub(sg_comm_t *c, const sg_ar_ring_sub_t *g, float *buf, size_t count,
                   const sg_ar_opts_t *o) {
  if (g->n == 1 || count == 0) return SG_OK;
  ring_run_t k;
  SG_CHECK(ring_setup(&k, c, g, buf, count, o));
  const size_t units = k.p.units, nseg = k.p.nseg, d = k.pr.d;
  /* The first step's sends read the input alone (the allgather alone:
   * the owned chunk): all ready at once. */
  float *first = k.p.s0 ? k.agbuf : buf;
  for (size_t v = 0; v < nseg; v++) {
    size_t off, len = segment(&k.p, chunk_sent(&k.p, k.p.s0), v, &off);
    SG_CHECK(sg_prim_send(&k.pr, v, (int)k.p.s0, first + off, len));
  }
  for (size_t u = 0; u < units; u++) {
    SG_CHECK(post_recvs(&k, u + d));
    if (k.posted_recv <= u)
      return sg_err_set(SG_EINTERNAL, "ring: unit %zu not posted", u);
    SG_CHECK(finish_unit(&k, u));
    if (u >= d) SG_CHECK(sg_prim_wait_sends(&k.pr, u - d + 1));
  }
  SG_CHECK(sg_prim_wait_sends(&k.pr, units));
  /* On an error above, requests may be left pending: the comm is then
   * unusable and the caller destroys it (a dead peer ends the run). */
  return SG_OK;
}

int sg_allreduce_ring(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  sg_ar_ring_sub_t all = {.members = NULL, .n = c->size, .me = c->rank,
                          .phases = SG_RING_RS | SG_RING_AG, .tag = SG_AR_TAG_RING};
  return sg_ar_ring_sub(c, &all, buf, count, o);
}

const sg_ar_algo_t sg_ar_ring = {
    .name = "ring",
    .summary = "reduce-scatter + allgather around a ring, segmented and pipelined",
    .allreduce = sg_allreduce_ring,
    .needs = sg_ar_ring_needs,
    .needs_mpi = 0,
};
