/* test_gossip.c - the gossip engine's pairing schedule (gossip/gossip.h).
 *
 * The engine is deadlock-free because every round is a matching both sides
 * compute alike (docs/engines/gossip.md).  These checks verify that
 * property for every topology, N = 1..9 and 200 rounds, and show that the
 * checker rejects a schedule that deadlocks (each rank exchanging with its
 * right neighbour: a cycle of blocking exchanges).  Then each topology's
 * own promise: ring pairs ring neighbours, alternating sides; complete
 * meets every pair exactly once per N-1 rounds (N rounds for odd N);
 * random is a function of the seed and reaches every pair. */
#include <stdio.h>
#include <string.h>

#include "gossip.h"
#include "test.h"

typedef int (*partner_fn)(sg_gossip_topo_t, int, int64_t, uint64_t, int);

static const sg_gossip_topo_t topos[] = {SG_GOSSIP_RING, SG_GOSSIP_RANDOM, SG_GOSSIP_COMPLETE};

/* The first reason this round is not a matching with at most one rank
 * (and only for odd n) sitting out; NULL when it is one. */
static const char *not_matching(partner_fn f, sg_gossip_topo_t t, int n, int64_t k, uint64_t seed,
                                char *why, size_t cap) {
  int idle = 0;
  for (int r = 0; r < n; r++) {
    int p = f(t, n, k, seed, r);
    if (p < 0) {
      idle++;
      continue;
    }
    if (p >= n || p == r || f(t, n, k, seed, p) != r) {
      snprintf(why, cap, "n=%d round %lld: rank %d -> %d -> %d", n, (long long)k, r, p,
               p >= 0 && p < n ? f(t, n, k, seed, p) : -2);
      return why;
    }
  }
  if (idle != (n == 1 ? 1 : n % 2)) {
    snprintf(why, cap, "n=%d round %lld: %d ranks sit out", n, (long long)k, idle);
    return why;
  }
  return NULL;
}

/* The planted bug: everyone sends to its right neighbour and waits for
 * it, a cycle that never completes with blocking pairwise exchanges. */
static int right_neighbour(sg_gossip_topo_t t, int n, int64_t k, uint64_t seed, int r) {
  return n < 2 ? -1 : (r + 1) % n;
}

TEST(every_round_of_every_topology_is_a_matching) {
  char why[128];
  for (size_t i = 0; i < sizeof topos / sizeof *topos; i++)
    for (int n = 1; n <= 9; n++)
      for (int64_t k = 0; k < 200; k++) {
        const char *bad = not_matching(sg_gossip_partner, topos[i], n, k, 7, why, sizeof why);
        CHECK_MSG(bad == NULL, "topology %zu: %s", i, bad);
      }
}

TEST(the_matching_check_rejects_a_cyclic_schedule) {
  char why[128];
  CHECK(not_matching(right_neighbour, SG_GOSSIP_RING, 4, 0, 7, why, sizeof why) != NULL);
  CHECK(not_matching(right_neighbour, SG_GOSSIP_RING, 3, 0, 7, why, sizeof why) != NULL);
  /* two ranks: right neighbour is the other one, a matching indeed */
  CHECK(not_matching(right_neighbour, SG_GOSSIP_RING, 2, 0, 7, why, sizeof why) == NULL);
}

TEST(ring_pairs_neighbours_and_alternates_sides) {
  for (int n = 2; n <= 9; n++)
    for (int64_t k = 0; k < 50; k++)
      for (int r = 0; r < n; r++) {
        int p = sg_gossip_partner(SG_GOSSIP_RING, n, k, 0, r);
        if (p < 0) continue;
        CHECK_MSG(p == (r + 1) % n || p == (r + n - 1) % n, "n=%d k=%lld %d->%d", n,
                  (long long)k, r, p);
        int q = sg_gossip_partner(SG_GOSSIP_RING, n, k + 1, 0, r);
        if (n % 2 == 0 && n > 2) CHECK_MSG(q != p, "n=%d k=%lld rank %d twice with %d", n,
                                           (long long)k, r, p);
      }
}

TEST(complete_meets_every_pair_once_per_cycle) {
  for (int n = 2; n <= 9; n++) {
    int m = n + (n & 1), met[10][10];
    for (int64_t start = 0; start < 3 * (m - 1); start += m - 1) {
      memset(met, 0, sizeof met);
      for (int64_t k = start; k < start + m - 1; k++)
        for (int r = 0; r < n; r++) {
          int p = sg_gossip_partner(SG_GOSSIP_COMPLETE, n, k, 0, r);
          if (p >= 0) met[r][p]++;
        }
      for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++)
          CHECK_MSG(met[a][b] == (a != b), "n=%d: %d met %d %d times", n, a, b, met[a][b]);
    }
  }
}

TEST(random_follows_the_seed_and_reaches_every_pair) {
  int differ = 0, met[8][8] = {{0}};
  for (int64_t k = 0; k < 200; k++)
    for (int r = 0; r < 8; r++) {
      int p = sg_gossip_partner(SG_GOSSIP_RANDOM, 8, k, 11, r);
      CHECK_EQ_INT(p, sg_gossip_partner(SG_GOSSIP_RANDOM, 8, k, 11, r));
      differ += p != sg_gossip_partner(SG_GOSSIP_RANDOM, 8, k, 12, r);
      met[r][p]++;
    }
  CHECK(differ > 0);
  for (int a = 0; a < 8; a++)
    for (int b = 0; b < 8; b++) CHECK_MSG((met[a][b] > 0) == (a != b), "%d met %d %d times", a, b, met[a][b]);
}

TEST(one_rank_never_has_a_partner) {
  for (size_t i = 0; i < sizeof topos / sizeof *topos; i++)
    CHECK_EQ_INT(sg_gossip_partner(topos[i], 1, 5, 0, 0), -1);
  CHECK_EQ_INT(sg_gossip_topo("ring"), SG_GOSSIP_RING);
  CHECK_EQ_INT(sg_gossip_topo("star"), -1);
}
