/* compose.h - the pieces hier and tree are built from (internal to the
 * allreduce engine): the ring over any subset of the comm's ranks, one
 * phase or both (ring.c), and the pipelined streams of a tree, up (reduce
 * to the root) and down (broadcast from it) (tree.c). */
#ifndef SG_AR_COMPOSE_H
#define SG_AR_COMPOSE_H

#include "allreduce.h"

/* ---- a ring over some of the ranks (ring.c) --------------------------- */

enum { SG_RING_RS = 1, SG_RING_AG = 2 };

typedef struct sg_ar_ring_sub {
  const int *members; /* ring place i is comm rank members[i]; NULL: i */
  int n, me;          /* places; this rank's place */
  int phases;         /* SG_RING_RS, SG_RING_AG or both */
  int tag;            /* phase step s uses tag + s, s < 2(n-1) */
} sg_ar_ring_sub_t;

/* The ring of ring.c over g's members on buf[0..count).  After the
 * reduce-scatter alone, place i holds the full sum of chunk (i+1) mod n
 * (sg_ar_chunk_off/len of count and n); the allgather alone expects place
 * i to hold chunk (i+1) mod n and leaves every place with all of them. */
int sg_ar_ring_sub(sg_comm_t *c, const sg_ar_ring_sub_t *g, float *buf, size_t count,
                   const sg_ar_opts_t *o);
/* Scratch floats and request slots a ring of n places on count floats
 * needs (either phase or both). */
void sg_ar_ring_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                      size_t *reqs);

/* ---- tree streams (tree.c) ------------------------------------------- */

typedef struct sg_ar_tree_node {
  int parent;   /* comm rank, -1 at the root */
  int child[2]; /* comm ranks, -1 where there is none */
  int tag;      /* up uses tag, down tag + 1 */
} sg_ar_tree_node_t;

/* Reduce up the tree, segment by segment: buf += each child's (partial)
 * sum, then the sum goes on to the parent; at the root, buf holds the
 * total.  The planted bug (o->plant_bug): the root leaves out one child's
 * first segment. */
int sg_ar_tree_up(sg_comm_t *c, const sg_ar_tree_node_t *t, float *buf, size_t count,
                  const sg_ar_opts_t *o);
/* Broadcast down the tree: buf is received from the parent (the root's
 * stays) and sent on to the children, segment by segment. */
int sg_ar_tree_down(sg_comm_t *c, const sg_ar_tree_node_t *t, float *buf, size_t count,
                    const sg_ar_opts_t *o);
/* Scratch floats and request slots either stream needs on count floats. */
void sg_ar_tree_needs(size_t count, const sg_ar_opts_t *o, size_t *scratch, size_t *reqs);

#endif
