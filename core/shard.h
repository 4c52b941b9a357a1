/* shard.h - deterministic shuffling, sharding and batch gathering.
 *
 * Pure functions of (seed, epoch, worker, N):
 *   epoch e has ONE global permutation of 0..n-1 (Fisher-Yates, xoshiro
 *   stream (seed, SHUFFLE, e));
 *   worker w of N takes positions w, w+N, w+2N, ... of it and cuts that
 *   list into batches of b: batch t of worker w is positions
 *   N*b*t + w + N*i, i = 0..b-1;
 *   steps per epoch = floor(n / (N*b)); the last partial global batch is
 *   dropped by every worker alike.
 * Example, n = 10, N = 2, b = 2: 2 steps; step 0 covers positions 0..3
 * (worker 0: 0, 2; worker 1: 1, 3), step 1 positions 4..7, 8..9 dropped.
 * The union of the workers' step-t batches is local's (N = 1, b' = N*b)
 * step-t batch, which makes synchronous engines equal to `local`.
 */
#ifndef SG_SHARD_H
#define SG_SHARD_H

#include <stdint.h>

#include "dataset.h"

/* floor(n / (nworkers * batch)); 0 when the data cannot fill one step. */
int64_t sg_shard_steps_per_epoch(int64_t n, int nworkers, int batch);

/* perm[0..n-1] = the permutation of epoch `epoch` for `seed`. */
void sg_shard_permutation(uint64_t seed, int64_t epoch, uint32_t *perm,
                          int64_t n);

/* idx[0..batch-1] = sample ids of worker `worker`'s batch `t` (step within
 * the epoch) given that epoch's permutation. */
void sg_shard_batch(const uint32_t *perm, int worker, int nworkers, int batch,
                    int64_t t, uint32_t *idx);

/* A batch gathered into contiguous, preallocated buffers. */
typedef struct sg_batch {
  int n;                 /* rows */
  const float *x;        /* dense: n*d row-major (NULL when sparse) */
  const int64_t *rowptr; /* CSR: n+1 offsets into col/val */
  const uint32_t *col;
  const float *val;
  const int32_t *y;
} sg_batch_t;

typedef struct sg_batch_buf sg_batch_buf_t;

/* Buffers for batches of up to `rows` rows of `ds` (dense or CSR).
 * Caller owns the result. */
int sg_batch_buf_new(sg_batch_buf_t **out, const sg_dataset_t *ds, int rows);
void sg_batch_buf_destroy(sg_batch_buf_t **b);
/* Copy rows idx[0..n-1] of ds into the buffers; *batch points into them. */
void sg_batch_gather(sg_batch_buf_t *b, const sg_dataset_t *ds,
                     const uint32_t *idx, int n, sg_batch_t *batch);
/* Rows [start, start+n) of ds as a batch without copying. */
void sg_batch_view(const sg_dataset_t *ds, int64_t start, int n,
                   sg_batch_t *batch);

#endif
