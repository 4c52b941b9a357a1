/* topk.h - compress: topk, sparse gradient exchange with error feedback.
 *
 * Each step a rank adds its residual (what it has not sent yet) to the
 * gradient, keeps the k = ceil(ratio * count) entries of largest magnitude
 * as (index, value) pairs, carries everything else over in the residual,
 * and the ranks allgather their pairs around a ring (N-1 steps of 8k
 * bytes).  Every rank then sums the N blocks of pairs into a dense vector
 * in rank order, so the replicas stay identical bit for bit.
 * Bytes sent per rank per step: 8k (N-1), against 8 count (N-1)/N dense.
 */
#ifndef SG_AR_TOPK_H
#define SG_AR_TOPK_H

#include <stddef.h>

#include "transport.h"

typedef struct sg_topk sg_topk_t;

/* For vectors of exactly count floats; ratio in (0, 1]. */
int sg_topk_new(sg_topk_t **out, sg_comm_t *c, size_t count, double ratio);
/* buf[0..count) <- the sum over ranks of their top-k entries of
 * buf + residual; the residual keeps the rest. */
int sg_topk_run(sg_topk_t *t, float *buf);
void sg_topk_destroy(sg_topk_t **t);

#endif
