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

/* Non-IID shards (partition: label-skew | by-class).  Worker w owns a fixed
 * shard of n/N samples (the first n mod N workers one more): every sample
 * belongs to exactly one worker, a pure function of (seed, labels, N).
 *   label-skew: worker w's class proportions p_w ~ Dirichlet(alpha) (stream
 *     (seed, PARTITION, 1+w)); the workers then take one sample at a time in
 *     turn until their shard is full, each drawing its class from p_w over
 *     the classes that still have samples (a class runs out: its share goes
 *     to the others in proportion).  Sizes are exact; the histograms follow
 *     p_w as far as the class counts allow.
 *   by-class: the samples sorted by class (a seeded order within a class),
 *     cut into N consecutive pieces: each worker gets a contiguous range of
 *     classes; a class is split between neighbours only where a cut falls
 *     inside it (balanced classes: never when N divides the class count;
 *     N > classes: each class split across N/classes workers).
 * Epoch e of worker w visits its shard in the order of stream
 * (seed, SHARD_ORDER, e * 2^20 + w); batch t is positions t*b .. t*b+b-1.
 * Steps per epoch stay floor(n / (N*b)) <= floor(shard / b). */
typedef enum { SG_PART_IID = 0, SG_PART_LABEL_SKEW = 1, SG_PART_BY_CLASS = 2 } sg_partition_t;

/* "iid" | "label-skew" | "by-class"; SG_ECONFIG otherwise. */
int sg_partition_parse(const char *name, sg_partition_t *out);

/* Shard size of worker w: n/N, +1 for w < n mod N. */
int64_t sg_shard_size(int64_t n, int worker, int nworkers);

/* owner[i] = the worker that holds sample i (labels y[0..n-1] in
 * 0..classes-1; kind label-skew or by-class; alpha > 0 for label-skew). */
int sg_shard_owners(sg_partition_t kind, double alpha, uint64_t seed, const int32_t *y,
                    int64_t n, int classes, int nworkers, uint16_t *owner);

/* shard[0..*len-1] = worker w's sample ids in increasing order; shard has
 * room for sg_shard_size(n, w, N) ids. */
int sg_shard_build(sg_partition_t kind, double alpha, uint64_t seed, const int32_t *y,
                   int64_t n, int classes, int worker, int nworkers, uint32_t *shard,
                   int64_t *len);

/* out[0..len-1] = shard in epoch `epoch`'s order for worker w. */
void sg_shard_order(uint64_t seed, int64_t epoch, int worker, const uint32_t *shard,
                    int64_t len, uint32_t *out);

#endif
