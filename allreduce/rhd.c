/* rhd.c - Rabenseifner's allreduce: reduce-scatter by recursive halving,
 * allgather by recursive doubling (as MPICH's MPIR_Allreduce_intra_
 * reduce_scatter_allgather).
 *
 * Let p = the largest power of two <= N and x = N - p ("extra" ranks).
 *
 *  1. Fold (only when x > 0).  Ranks 0 .. 2x-1 pair up: even rank 2i sends
 *     its whole vector to 2i+1, which adds it in; the even ranks then sit
 *     out.  The p remaining ranks get new ranks 0 .. p-1:
 *     newrank = r / 2 for odd r < 2x, r - x for r >= 2x.
 *  2. Reduce-scatter by recursive halving over p blocks (chunk k of p, as
 *     sg_ar_chunk_off/len), log2 p steps.  At step i (mask = p/2, p/4, ..,
 *     1) a rank exchanges with newrank ^ mask: it keeps the half of its
 *     current block range on its side of the mask bit, sends the other
 *     half, and adds the partner's copy of the half it keeps.  Afterwards
 *     newrank k holds the full sum of block k.
 *  3. Allgather by recursive doubling: the same pairs in reverse order
 *     (mask = 1, 2, .., p/2) swap their (growing) block ranges, received
 *     in place.
 *  4. Unfold: each odd rank 2i+1 < 2x sends the result to 2i.
 *
 * Worked example, N = 4 (p = 4, no fold), blocks 0..3:
 *   RS mask 2: 0<->2, 1<->3.  rank 0 keeps 0-1, sends 2-3; rank 2 keeps 2-3
 *   RS mask 1: 0<->1, 2<->3.  rank 0 keeps 0, rank 1 keeps 1, ...
 *   AG mask 1: 0<->1 swap blocks 0 and 1; 2<->3 swap 2 and 3
 *   AG mask 2: 0<->2 swap 0-1 and 2-3; 1<->3 likewise
 * N = 5: rank 0 folds into rank 1 (newrank 0); ranks 2,3,4 are newranks
 * 1,2,3; after step 3 rank 1 sends the result to rank 0.
 *
 * Bytes per rank of the p: sent = received = 2 (p-1)/p * 4 count in
 * 2 log2 p exchanges (fewer, larger messages than the ring: better for
 * small vectors, latency-bound); folded pairs move another 4 count each way.
 *
 * Composed of the primitives (prim.h) with left = right = the step's
 * partner: a halving step is `send` of the half given away and
 * recvReduceCopy (keep += received) of the half kept, a doubling step
 * `send` of the range held and `recv` of the partner's, the fold `send` /
 * recvReduceCopy of the whole vector and the unfold `send` / `recv`.
 * Partial sums stay in the user buffer, as in MPICH.  Every exchange is
 * cut into segments of o->segment_bytes (the ring's), so a received
 * segment is still in cache when it is added; each side posts all its
 * sends first (halves: as its o->depth staging slots free up) and its
 * receives o->depth segments ahead, and never waits for a send before
 * the receives it has posted (so neither side can wait for the other).
 * Elementwise,
 * the sums are those of the unsegmented exchange, bit for bit.
 *
 * compress: fp16: every exchange travels as halves, received halves are
 * widened and added in float32; after the halving each rank rounds its
 * own block to a half, so the doubling and unfold move exact halves and
 * every replica ends with the same bits.
 */
#include <stdint.h>

#include "allreduce.h"
#include "compress_half.h"
#include "err.h"
#include "prim.h"

static int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

/* d receive slots and d staging slots (halves to send) of one segment
 * each; d receive requests and a send request for every segment of the
 * largest exchange (the fold's whole vector), so that all its sends can
 * be posted at once. */
static void rhd_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                      size_t *reqs) {
  size_t d = sg_ar_depth(o), seg = sg_ar_seg_floats(o);
  *scratch = *reqs = 0;
  if (n == 1 || count == 0) return;
  if (seg > count) seg = count;
  *scratch = 2 * d * seg;
  *reqs = d + (count + seg - 1) / seg;
}

/* Elements of blocks [lo, hi) of p: offset and length. */
static size_t blocks(size_t count, int p, int lo, int hi, size_t *off) {
  *off = sg_ar_chunk_off(count, p, lo);
  return sg_ar_chunk_off(count, p, hi) - *off;
}

typedef struct rhd_run {
  sg_prim_t pr;
  float *buf;
  size_t seg;        /* floats per unit */
  size_t next_recv;  /* receive units numbered across the exchanges */
} rhd_run_t;

enum { RHD_RECV, RHD_REDUCE };

static size_t unit_len(size_t len, size_t j, size_t seg) {
  return j * seg >= len ? 0 : (len - j * seg < seg ? len - j * seg : seg);
}

/* Post the sends of buf[soff, +slen) that are below segment `upto` and
 * not yet posted (*sent of them are); halves wait for a staging slot. */
static int send_upto(rhd_run_t *k, int s, size_t v0, size_t soff, size_t slen, size_t upto,
                     size_t *sent) {
  sg_prim_t *p = &k->pr;
  const size_t ns = (slen + k->seg - 1) / k->seg;
  for (; *sent < ns && *sent < upto; ++*sent) {
    size_t v = v0 + *sent;
    if (p->half && v >= p->qs) SG_CHECK(sg_prim_wait_sends(p, v - p->qs + 1));
    SG_CHECK(sg_prim_send(p, v, s, k->buf + soff + *sent * k->seg,
                          unit_len(slen, *sent, k->seg)));
  }
  return SG_OK;
}

/* One exchange with peer at tag step s: send buf[soff, +slen), receive
 * rlen floats into buf[roff, ..) (`recv`) or added to it (recvReduceCopy),
 * segment by segment.  The peer computes the same lengths swapped.  Every
 * float32 send is posted first, so the partner can take all of them
 * without this rank running (four ranks on two cores: a send per received
 * segment made the pair wait for each other every segment); halves go as
 * staging slots free up. */
static int exchange(rhd_run_t *k, int peer, int s, size_t soff, size_t slen, size_t roff,
                    size_t rlen, int how) {
  sg_prim_t *p = &k->pr;
  const size_t seg = k->seg, nr = (rlen + seg - 1) / seg;
  const size_t u0 = k->next_recv, v0 = p->posted_send;
  size_t posted = 0, sent = 0;
  p->left = p->right = peer;
  SG_CHECK(send_upto(k, s, v0, soff, slen, p->half ? p->qs : SIZE_MAX, &sent));
  for (size_t j = 0; j < nr; j++) {
    for (; posted < nr && posted < j + p->d; posted++) {
      float *dst = how == RHD_RECV ? k->buf + roff + posted * seg : NULL;
      SG_CHECK(sg_prim_post_recv(p, u0 + posted, s, dst, unit_len(rlen, posted, seg)));
    }
    SG_CHECK(send_upto(k, s, v0, soff, slen, j + p->qs, &sent));
    float *at = k->buf + roff + j * seg;
    size_t len = unit_len(rlen, j, seg);
    if (how == RHD_REDUCE) SG_CHECK(sg_prim_recv_reduce_copy(p, u0 + j, at, len));
    else SG_CHECK(sg_prim_recv(p, u0 + j, at, len));
  }
  SG_CHECK(send_upto(k, s, v0, soff, slen, SIZE_MAX, &sent));
  k->next_recv = u0 + nr;
  /* The next exchange may receive into what these sends read. */
  return sg_prim_wait_sends(p, p->posted_send);
}

static int rhd_setup(rhd_run_t *k, sg_comm_t *c, float *buf, size_t count,
                     const sg_ar_opts_t *o) {
  size_t need_s, need_r;
  rhd_needs(c->size, count, o, &need_s, &need_r);
  if (!o || !o->scratch || o->scratch_count < need_s || !o->reqs || o->reqs_count < need_r)
    return sg_err_set(SG_EINVAL, "rhd allreduce of %zu floats needs %zu scratch floats "
                      "and %zu request slots (context sized too small)", count, need_s, need_r);
  size_t d = sg_ar_depth(o);
  k->buf = buf;
  k->seg = need_s / (2 * d);
  k->next_recv = 0;
  k->pr = (sg_prim_t){.c = c, .what = "rhd", .tag = SG_AR_TAG_RHD, .d = d, .q = need_r - d,
                      .qs = d, .slot_floats = k->seg,
                      .rslot = o->scratch, .stage = o->scratch + d * k->seg,
                      .rreq = (sg_req_t **)o->reqs, .sreq = (sg_req_t **)o->reqs + d,
                      .half = o->compress == SG_AR_COMPRESS_FP16};
  return SG_OK;
}

/* Recursive halving over newrank nr of p (x folded ranks): afterwards nr
 * holds the full sum of block nr. */
static int halving(rhd_run_t *k, size_t count, int nr, int p, int x) {
  int lo = 0, hi = p, step = 1;
  for (int mask = p / 2; mask >= 1; mask /= 2, step++) {
    int pn = nr ^ mask, peer = pn < x ? pn * 2 + 1 : pn + x;
    int mid = lo + (hi - lo) / 2;
    int keep_lo = (nr & mask) ? mid : lo, keep_hi = (nr & mask) ? hi : mid;
    int give_lo = (nr & mask) ? lo : mid, give_hi = (nr & mask) ? mid : hi;
    size_t koff, goff;
    size_t klen = blocks(count, p, keep_lo, keep_hi, &koff);
    size_t glen = blocks(count, p, give_lo, give_hi, &goff);
    SG_CHECK(exchange(k, peer, step, goff, glen, koff, klen, RHD_REDUCE));
    lo = keep_lo;
    hi = keep_hi;
  }
  if (k->pr.half) { /* the owner keeps the rounded sum, as its partners will */
    size_t off, len = blocks(count, p, nr, nr + 1, &off);
    sg_round_f16(k->buf + off, len);
  }
  return SG_OK;
}

/* Recursive doubling: newrank nr holds block nr; afterwards all of them. */
static int doubling(rhd_run_t *k, size_t count, int nr, int p, int x) {
  int step = 1;
  for (int mask = p / 2; mask >= 1; mask /= 2) step++;
  for (int mask = 1; mask < p; mask *= 2, step++) {
    int pn = nr ^ mask, peer = pn < x ? pn * 2 + 1 : pn + x;
    int mine = nr / mask * mask, theirs = pn / mask * mask;
    size_t moff, toff;
    size_t mlen = blocks(count, p, mine, mine + mask, &moff);
    size_t tlen = blocks(count, p, theirs, theirs + mask, &toff);
    SG_CHECK(exchange(k, peer, step, moff, mlen, toff, tlen, RHD_RECV));
  }
  return SG_OK;
}

int sg_allreduce_rhd(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  int n = c->size, r = c->rank;
  if (n == 1 || count == 0) return SG_OK;
  rhd_run_t k;
  SG_CHECK(rhd_setup(&k, c, buf, count, o));
  int p = pow2_floor(n), x = n - p, nr = r < 2 * x ? (r % 2 ? r / 2 : -1) : r - x;
  /* 1. Fold the extra ranks into their odd partners (tag step 0). */
  if (r < 2 * x && r % 2 == 0) SG_CHECK(exchange(&k, r + 1, 0, 0, count, 0, 0, RHD_RECV));
  if (r < 2 * x && r % 2 == 1) SG_CHECK(exchange(&k, r - 1, 0, 0, 0, 0, count, RHD_REDUCE));
  if (nr >= 0) {
    SG_CHECK(halving(&k, count, nr, p, x));  /* 2. */
    SG_CHECK(doubling(&k, count, nr, p, x)); /* 3. */
  }
  /* 4. Unfold: the odd partners hand the result back (tag step 63). */
  if (r < 2 * x && r % 2 == 1) SG_CHECK(exchange(&k, r - 1, 63, 0, count, 0, 0, RHD_RECV));
  if (r < 2 * x && r % 2 == 0) SG_CHECK(exchange(&k, r + 1, 63, 0, 0, 0, count, RHD_RECV));
  return SG_OK;
}

const sg_ar_algo_t sg_ar_rhd = {
    .name = "rhd",
    .summary = "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
    .allreduce = sg_allreduce_rhd,
    .needs = rhd_needs,
    .needs_mpi = 0,
};
