/* ps_sparse.h - which coordinates a worker's batch reads (sparse mode).
 *
 * On sparse input with softmax regression (CSR: LIBSVM, synthetic-sparse)
 * a batch reads and writes only W[c][f] for the features f present in it
 * and the biases (sg_workload_sparse_coords).  A sparse worker pulls just
 * these coordinates before each step, computes the gradient at exactly
 * these coordinates (sg_workload_grad_sparse: nothing of the model's size
 * is touched) and pushes (index, value) pairs.  When the workload cannot
 * say (dense input, MLP), every coordinate is needed: pulls are dense, the
 * gradient is dense, and only its nonzeros are pushed.
 */
#ifndef PS_SPARSE_H
#define PS_SPARSE_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"
#include "workload.h"

typedef struct ps_needs ps_needs_t;

/* Caller owns the result. */
int ps_needs_new(ps_needs_t **out, sg_workload_t *wl, const sg_opts_t *o);
void ps_needs_destroy(ps_needs_t **n);
/* Compute the coordinates this worker's batch of `step` reads. */
int ps_needs_step(ps_needs_t *n, int64_t step);
/* Nonzero when every coordinate is needed (pull dense, dense gradient). */
int ps_needs_all(const ps_needs_t *n);
/* The coordinates of the last ps_needs_step: sorted, absolute indices. */
const uint32_t *ps_needs_idx(const ps_needs_t *n, size_t *count);
/* The step the coordinates are for (-1 before the first ps_needs_step). */
int64_t ps_needs_for_step(const ps_needs_t *n);
/* Write the needed coordinates in [off, off+cnt), relative to off and in
 * increasing order, into idx; return how many.  *first gets the position
 * of the first of them in ps_needs_idx (so values can follow). */
uint64_t ps_needs_shard(const ps_needs_t *n, size_t off, size_t cnt, uint32_t *idx,
                        size_t *first);

#endif
