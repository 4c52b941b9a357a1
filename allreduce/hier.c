/* hier.c - hierarchical allreduce (Horovod's): reduce-scatter inside a
 * group, ring allreduce across groups on each rank's shard, allgather
 * inside the group.
 *
 * Groups are runs of G consecutive ranks (o->group; the engine's `group`
 * option, by default the ranks that share rank 0's host): group g is
 * ranks gG .. gG+G-1, and rank r has place i = r mod G in it.  With
 * N = mG + x (m full groups, 0 <= x < G; G is cut to N when N < G):
 *
 *  0. Fold (x > 0 only): extra rank mG + i (i < x) sends its whole vector
 *     to rank i, which adds it (tree.c's up stream, tag SG_AR_TAG_HIER);
 *     the extra ranks then wait for step 4.
 *  1. Reduce-scatter inside each group: the ring of ring.c over the G
 *     places (tag SG_AR_TAG_HIER_IN + step), without its allgather;
 *     place i ends with its group's sum of chunk (i+1) mod G (chunks of
 *     count over G, sg_ar_chunk_off/len).
 *  2. Across groups: the m ranks with the same place i (ranks i, G+i,
 *     2G+i, ..) run a whole ring allreduce on that chunk (tag
 *     SG_AR_TAG_HIER_X + step), so each of them holds the chunk's total.
 *     The G rings of a group run at once, each on 1/G of the vector.
 *  3. Allgather inside each group (the ring's second half, tag
 *     SG_AR_TAG_HIER_IN + step, steps G-1 .. 2G-3): every rank ends with
 *     every chunk's total.
 *  4. Unfold (x > 0): rank i sends the result to extra rank mG + i
 *     (tree.c's down stream).
 *
 * Worked example, N = 4, G = 2 (groups {0,1}, {2,3}; a..d the inputs,
 * chunks 0 and 1 of count over 2):
 *   1. RS inside:   0 holds (a+b)_1, 1 holds (a+b)_0; 2 holds (c+d)_1, 3 (c+d)_0
 *   2. across:      0 <-> 2 allreduce chunk 1: both hold (a+b+c+d)_1;
 *                   1 <-> 3 chunk 0: both hold (a+b+c+d)_0
 *   3. AG inside:   0 <-> 1 swap: everyone holds both totals.
 * N = 5, G = 2: rank 4 folds into rank 0 first and gets the result last.
 *
 * Bytes per rank (K = 4 count): inside 2 (G-1)/G K, across 2 (m-1)/m K/G,
 * (+ K each way for a folded pair).  Messages: 2 (G-1) + 2 (m-1) per
 * segment, against the flat ring's 2 (N-1).  What crosses between groups
 * is 2 (m-1)/m K per group, spread over the group's G ranks: on a
 * two-level network, 1/G of the flat ring's share per rank link, and m
 * instead of N ring steps over the slow level (docs/engines/allreduce.md).
 *
 * G = 1 is the flat ring (no group phases); G = N is the ring inside one
 * group (no rings across).  Every rank ends with the same bits: each
 * chunk's total is computed once by the cross ring (whose own allgather
 * copies it) and then copied.
 */
#include "compose.h"
#include "err.h"

static void hier_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                       size_t *reqs) {
  size_t rs, rr, ts, tr;
  *scratch = *reqs = 0;
  if (n == 1 || count == 0) return;
  /* a ring's needs shrink as its places grow and its vector shrinks:
   * 2 places over the whole vector covers both rings */
  sg_ar_ring_needs(2, count, o, &rs, &rr);
  sg_ar_tree_needs(count, o, &ts, &tr);
  *scratch = rs > ts ? rs : ts;
  *reqs = rr > tr ? rr : tr;
}

/* The group size used for N ranks: o->group, 0 or > N meaning N. */
static int group_of(const sg_ar_opts_t *o, int n) {
  return o->group > 0 && o->group < n ? o->group : n;
}

/* Steps 0 and 4: the fold of extra rank mG + i into rank i (down = 0),
 * or the result back (down = 1). */
static int fold(sg_comm_t *c, int g, int m, float *buf, size_t count, const sg_ar_opts_t *o,
                int down) {
  int r = c->rank, x = c->size - m * g;
  sg_ar_tree_node_t t = {.parent = -1, .child = {-1, -1}, .tag = SG_AR_TAG_HIER};
  if (r >= m * g) t.parent = r - m * g;
  else if (r < x) t.child[0] = r + m * g;
  else return SG_OK;
  sg_ar_opts_t plain = *o;
  plain.plant_bug = 0; /* the planted bug belongs to the reduce-scatter */
  return down ? sg_ar_tree_down(c, &t, buf, count, &plain)
              : sg_ar_tree_up(c, &t, buf, count, &plain);
}

/* Steps 1-3 on a rank of the m full groups. */
static int grouped(sg_comm_t *c, int g, int m, float *buf, size_t count,
                   const sg_ar_opts_t *o) {
  int r = c->rank, i = r % g, grp = r / g;
  int inside[SG_AR_HIER_MAX], across[SG_AR_HIER_MAX];
  for (int k = 0; k < g; k++) inside[k] = grp * g + k;
  for (int k = 0; k < m; k++) across[k] = k * g + i;
  sg_ar_ring_sub_t in = {.members = inside, .n = g, .me = i, .phases = SG_RING_RS,
                         .tag = SG_AR_TAG_HIER_IN};
  sg_ar_ring_sub_t x = {.members = across, .n = m, .me = grp,
                        .phases = SG_RING_RS | SG_RING_AG, .tag = SG_AR_TAG_HIER_X};
  sg_ar_opts_t plain = *o;
  plain.plant_bug = 0;
  SG_CHECK(sg_ar_ring_sub(c, &in, buf, count, o));
  int own = (i + 1) % g;
  size_t off = sg_ar_chunk_off(count, g, own), len = sg_ar_chunk_len(count, g, own);
  SG_CHECK(sg_ar_ring_sub(c, &x, buf + off, len, &plain));
  in.phases = SG_RING_AG;
  return sg_ar_ring_sub(c, &in, buf, count, &plain);
}

int sg_allreduce_hier(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  int n = c->size;
  if (n == 1 || count == 0) return SG_OK;
  if (n > SG_AR_HIER_MAX)
    return sg_err_set(SG_ECONFIG, "algorithm: hier is built for at most %d ranks, not %d",
                      SG_AR_HIER_MAX, n);
  int g = group_of(o, n), m = n / g;
  SG_CHECK(fold(c, g, m, buf, count, o, 0));
  if (c->rank < m * g) SG_CHECK(grouped(c, g, m, buf, count, o));
  return fold(c, g, m, buf, count, o, 1);
}

const sg_ar_algo_t sg_ar_hier = {
    .name = "hier",
    .summary = "hierarchical: reduce-scatter inside groups, ring across groups, allgather inside",
    .allreduce = sg_allreduce_hier,
    .needs = hier_needs,
    .needs_mpi = 0,
};
