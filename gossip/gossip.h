/* gossip.h - the pairing schedule of the gossip engine.
 *
 * Every gossip round is a matching of the N ranks: each rank has at most
 * one partner, and the partner of my partner is me.  The matching of round
 * k is a pure function of (topology, N, k, seed), so both sides of a pair
 * know it without a message; docs/engines/gossip.md says why that makes
 * the exchange deadlock-free.
 *
 *   ring      ring edges (r, r+1 mod N) shifted by k mod N: a rank meets
 *             its right and its left neighbour in alternate rounds; for
 *             odd N one rank (a different one each round) sits out.
 *   random    a uniform random perfect matching per round: a permutation
 *             drawn from (seed, k), positions 2j and 2j+1 pair up; for odd
 *             N the last position sits out.
 *   complete  round robin (the circle method): over N-1 rounds (N for odd
 *             N) every pair of ranks meets exactly once, then again.
 */
#ifndef SG_GOSSIP_H
#define SG_GOSSIP_H

#include <stdint.h>

typedef enum { SG_GOSSIP_RING, SG_GOSSIP_RANDOM, SG_GOSSIP_COMPLETE } sg_gossip_topo_t;

#define SG_GOSSIP_TOPOLOGIES "ring|random|complete"

/* Topology by name; -1 when unknown. */
int sg_gossip_topo(const char *name);

/* The partner of `rank` among n ranks in round `round`, or -1 when it
 * sits the round out (always for n == 1). */
int sg_gossip_partner(sg_gossip_topo_t topo, int n, int64_t round, uint64_t seed, int rank);

#endif
