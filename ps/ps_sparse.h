/* ps_sparse.h - which coordinates a worker's next batch reads (sparse mode).
 *
 * On sparse input (CSR: LIBSVM, synthetic-sparse) only the first layer's
 * weight columns of the features present in a batch take part in its
 * forward pass and get a nonzero gradient; every other parameter (the
 * first layer's bias, later layers) is always needed.  A sparse worker
 * pulls just these coordinates before each step.  When the workload
 * cannot say (dense input), every coordinate is needed and the pull is
 * dense.
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
/* Nonzero when every coordinate is needed (pull dense). */
int ps_needs_all(const ps_needs_t *n);
/* Write the needed coordinates in [off, off+cnt), relative to off and in
 * increasing order, into idx; return how many. */
uint64_t ps_needs_shard(const ps_needs_t *n, size_t off, size_t cnt, uint32_t *idx);

#endif
