/* bcast.c - binomial-tree broadcast and a reduce-to-rank-0 of doubles.
 *
 * Broadcast from root, ranks renumbered v = (r - root) mod N.  Round k
 * (mask = 2^k): every v < mask that has the data sends it to v + mask.
 * N = 5, root 0:  round 0: 0->1;  round 1: 0->2, 1->3;  round 2: 0->4.
 * ceil(log2 N) rounds; each rank receives len bytes once and sends them
 * at most ceil(log2 N) times.
 */
#include "allreduce.h"
#include "err.h"

int sg_ar_bcast(sg_comm_t *c, void *buf, size_t len, int root) {
  int n = c->size, v = (c->rank - root + n) % n;
  for (int mask = 1; mask < n; mask *= 2) {
    if (v < mask) {
      if (v + mask < n) SG_CHECK(sg_send(c, (v + mask + root) % n, SG_AR_TAG_BCAST, buf, len));
    } else if (v < 2 * mask) {
      SG_CHECK(sg_recv(c, (v - mask + root) % n, SG_AR_TAG_BCAST, buf, len, NULL));
    }
  }
  return SG_OK;
}

/* Flat gather to rank 0 (small n: benchmark timings only). */
int sg_ar_reduce_to0(sg_comm_t *c, double *v, size_t n, double *tmp, int op) {
  if (c->rank != 0) return sg_send(c, 0, SG_AR_TAG_GATHER, v, n * sizeof *v);
  for (int src = 1; src < c->size; src++) {
    SG_CHECK(sg_recv(c, src, SG_AR_TAG_GATHER, tmp, n * sizeof *tmp, NULL));
    for (size_t i = 0; i < n; i++)
      v[i] = op == SG_AR_SUM ? v[i] + tmp[i] : (tmp[i] > v[i] ? tmp[i] : v[i]);
  }
  return SG_OK;
}
