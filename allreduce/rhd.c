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
 * 2 log2 p messages (fewer, larger messages than the ring: better for
 * small vectors, latency-bound); folded pairs move another 4 count each way.
 * Scratch: about count/2 floats (the fold goes through it in pieces).
 */
#include "allreduce.h"
#include "err.h"
#include "reduce.h"

static int pow2_floor(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

static void rhd_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                      size_t *reqs) {
  (void)o;
  int p = pow2_floor(n);
  *scratch = n == 1 ? 0 : count / 2 + (size_t)p;
  *reqs = 0;
}

/* Send slen floats to peer and receive rlen floats from it (either may be
 * 0: an empty half is neither sent nor expected, on both sides). */
static int exchange(sg_comm_t *c, int peer, int tag, const float *sbuf, size_t slen,
                    float *rbuf, size_t rlen) {
  if (slen && rlen)
    return sg_sendrecv(c, peer, tag, sbuf, slen * sizeof(float), peer, tag, rbuf,
                       rlen * sizeof(float), NULL);
  if (slen) return sg_send(c, peer, tag, sbuf, slen * sizeof(float));
  if (rlen) return sg_recv(c, peer, tag, rbuf, rlen * sizeof(float), NULL);
  return SG_OK;
}

/* Elements of blocks [lo, hi) of p: offset and length. */
static size_t blocks(size_t count, int p, int lo, int hi, size_t *off) {
  *off = sg_ar_chunk_off(count, p, lo);
  return sg_ar_chunk_off(count, p, hi) - *off;
}

int sg_allreduce_rhd(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  int n = c->size, r = c->rank;
  if (n == 1 || count == 0) return SG_OK;
  size_t need, unused;
  rhd_needs(n, count, o, &need, &unused);
  if (!o || !o->scratch || o->scratch_count < need)
    return sg_err_set(SG_EINVAL, "rhd allreduce of %zu floats needs %zu scratch floats",
                      count, need);
  float *tmp = o->scratch;
  size_t piece = need; /* a function of (N, count): the same on both sides */
  int p = pow2_floor(n), x = n - p, tag = SG_AR_TAG_RHD;

  /* 1. Fold the extra ranks into their odd partners. */
  int nr;
  if (r < 2 * x) {
    if (r % 2 == 0) {
      for (size_t off = 0; off < count; off += piece) {
        size_t len = count - off < piece ? count - off : piece;
        SG_CHECK(sg_send(c, r + 1, tag, buf + off, len * sizeof(float)));
      }
      nr = -1;
    } else {
      for (size_t off = 0; off < count; off += piece) {
        size_t len = count - off < piece ? count - off : piece;
        SG_CHECK(sg_recv(c, r - 1, tag, tmp, len * sizeof(float), NULL));
        sg_sum_f32(buf + off, tmp, len);
      }
      nr = r / 2;
    }
  } else {
    nr = r - x;
  }
  if (nr >= 0) {
    /* 2. Reduce-scatter by recursive halving. */
    int lo = 0, hi = p, step = 1;
    for (int mask = p / 2; mask >= 1; mask /= 2, step++) {
      int pn = nr ^ mask, peer = pn < x ? pn * 2 + 1 : pn + x;
      int mid = lo + (hi - lo) / 2;
      int keep_lo = (nr & mask) ? mid : lo, keep_hi = (nr & mask) ? hi : mid;
      int give_lo = (nr & mask) ? lo : mid, give_hi = (nr & mask) ? mid : hi;
      size_t koff, goff;
      size_t klen = blocks(count, p, keep_lo, keep_hi, &koff);
      size_t glen = blocks(count, p, give_lo, give_hi, &goff);
      SG_CHECK(exchange(c, peer, tag + step, buf + goff, glen, tmp, klen));
      sg_sum_f32(buf + koff, tmp, klen);
      lo = keep_lo;
      hi = keep_hi;
    }
    /* 3. Allgather by recursive doubling: newrank nr holds block nr. */
    for (int mask = 1; mask < p; mask *= 2, step++) {
      int pn = nr ^ mask, peer = pn < x ? pn * 2 + 1 : pn + x;
      int mine = nr / mask * mask, theirs = pn / mask * mask;
      size_t moff, toff;
      size_t mlen = blocks(count, p, mine, mine + mask, &moff);
      size_t tlen = blocks(count, p, theirs, theirs + mask, &toff);
      SG_CHECK(exchange(c, peer, tag + step, buf + moff, mlen, buf + toff, tlen));
    }
  }

  /* 4. Unfold: the odd partners hand the result back. */
  if (r < 2 * x) {
    if (r % 2 == 1) SG_CHECK(sg_send(c, r - 1, tag + 63, buf, count * sizeof(float)));
    else SG_CHECK(sg_recv(c, r + 1, tag + 63, buf, count * sizeof(float), NULL));
  }
  return SG_OK;
}

const sg_ar_algo_t sg_ar_rhd = {
    .name = "rhd",
    .summary = "Rabenseifner: recursive-halving reduce-scatter + recursive-doubling allgather",
    .allreduce = sg_allreduce_rhd,
    .needs = rhd_needs,
    .needs_mpi = 0,
};
