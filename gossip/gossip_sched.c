/* gossip_sched.c - who averages with whom in each round (gossip.h). */
#include <string.h>

#include "gossip.h"
#include "rng.h"

/* A stream of its own, so the schedule draws nothing from the data's. */
#define SG_RNG_GOSSIP 0x60551ULL

int sg_gossip_topo(const char *name) {
  if (!strcmp(name, "ring")) return SG_GOSSIP_RING;
  if (!strcmp(name, "random")) return SG_GOSSIP_RANDOM;
  if (!strcmp(name, "complete")) return SG_GOSSIP_COMPLETE;
  return -1;
}

/* Positions q = (rank - k) mod n pair up as (0,1), (2,3), ...: ring edges,
 * rotated by one rank each round, so a rank's partner alternates between
 * its right and its left neighbour. */
static int ring_partner(int n, int64_t round, int rank) {
  int o = (int)(round % n);
  int q = (rank - o + n) % n;
  int p = q ^ 1;
  return p < n ? (p + o) % n : -1;
}

/* Fisher-Yates with the round's own generator; every rank draws the same
 * permutation.  n is small (the number of workers), so O(n) a round. */
static int random_partner(int n, int64_t round, uint64_t seed, int rank) {
  int perm[n], q = -1;
  sg_rng_t g;
  sg_rng_seed(&g, seed, SG_RNG_GOSSIP, (uint64_t)round);
  for (int i = 0; i < n; i++) perm[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(sg_rng_next(&g) % (uint64_t)(i + 1));
    int t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  for (int i = 0; i < n; i++)
    if (perm[i] == rank) q = i;
  return (q ^ 1) < n ? perm[q ^ 1] : -1;
}

/* Circle method on m = n rounded up to even (rank n is a dummy for odd
 * n): in round r, rank m-1 meets r and every other x meets 2r - x. */
static int complete_partner(int n, int64_t round, int rank) {
  int m = n + (n & 1);
  int r = (int)(round % (m - 1));
  int p;
  if (rank == m - 1) p = r;
  else if (rank == r) p = m - 1;
  else p = ((2 * r - rank) % (m - 1) + (m - 1)) % (m - 1);
  return p < n ? p : -1;
}

int sg_gossip_partner(sg_gossip_topo_t topo, int n, int64_t round, uint64_t seed, int rank) {
  if (n < 2 || rank < 0 || rank >= n || round < 0) return -1;
  switch (topo) {
  case SG_GOSSIP_RING: return ring_partner(n, round, rank);
  case SG_GOSSIP_RANDOM: return random_partner(n, round, seed, rank);
  case SG_GOSSIP_COMPLETE: return complete_partner(n, round, rank);
  }
  return -1;
}
