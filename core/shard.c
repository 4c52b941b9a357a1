/* shard.c - see shard.h for the schedule. */
#include "shard.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

int64_t sg_shard_steps_per_epoch(int64_t n, int nworkers, int batch) {
  if (nworkers < 1 || batch < 1 || n < 1) return 0;
  return n / ((int64_t)nworkers * batch);
}

void sg_shard_permutation(uint64_t seed, int64_t epoch, uint32_t *perm,
                          int64_t n) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, SG_RNG_SHUFFLE, (uint64_t)epoch);
  for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)sg_rng_below(&r, (uint64_t)i + 1);
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

void sg_shard_batch(const uint32_t *perm, int worker, int nworkers, int batch,
                    int64_t t, uint32_t *idx) {
  const int64_t base = (int64_t)nworkers * batch * t + worker;
  for (int i = 0; i < batch; i++) idx[i] = perm[base + (int64_t)nworkers * i];
}

struct sg_batch_buf {
  int rows;
  int64_t d, max_nnz;
  float *x;
  int64_t *rowptr;
  uint32_t *col;
  float *val;
  int32_t *y;
};

int sg_batch_buf_new(sg_batch_buf_t **out, const sg_dataset_t *ds, int rows) {
  sg_batch_buf_t *b = calloc(1, sizeof *b);
  if (!b) return SG_ENOMEM;
  b->rows = rows;
  b->d = ds->d;
  b->y = malloc((size_t)rows * sizeof *b->y);
  if (!b->y) goto nomem;
  if (sg_dataset_sparse(ds)) {
    b->max_nnz = ds->max_row_nnz;
    size_t cap = (size_t)rows * (size_t)(ds->max_row_nnz ? ds->max_row_nnz : 1);
    b->rowptr = malloc((size_t)(rows + 1) * sizeof *b->rowptr);
    b->col = malloc(cap * sizeof *b->col);
    b->val = malloc(cap * sizeof *b->val);
    if (!b->rowptr || !b->col || !b->val) goto nomem;
  } else {
    b->x = malloc((size_t)rows * (size_t)ds->d * sizeof *b->x);
    if (!b->x) goto nomem;
  }
  *out = b;
  return SG_OK;
nomem:
  sg_batch_buf_destroy(&b);
  return sg_err_set(SG_ENOMEM, "batch buffers for %d rows", rows);
}

void sg_batch_buf_destroy(sg_batch_buf_t **pb) {
  if (!pb || !*pb) return;
  sg_batch_buf_t *b = *pb;
  free(b->x);
  free(b->rowptr);
  free(b->col);
  free(b->val);
  free(b->y);
  free(b);
  *pb = NULL;
}

void sg_batch_gather(sg_batch_buf_t *b, const sg_dataset_t *ds,
                     const uint32_t *idx, int n, sg_batch_t *batch) {
  memset(batch, 0, sizeof *batch);
  batch->n = n;
  for (int i = 0; i < n; i++) b->y[i] = ds->y[idx[i]];
  batch->y = b->y;
  if (sg_dataset_sparse(ds)) {
    int64_t k = 0;
    b->rowptr[0] = 0;
    for (int i = 0; i < n; i++) {
      int64_t s = ds->rowptr[idx[i]], e = ds->rowptr[idx[i] + 1];
      memcpy(b->col + k, ds->col + s, (size_t)(e - s) * sizeof *b->col);
      memcpy(b->val + k, ds->val + s, (size_t)(e - s) * sizeof *b->val);
      k += e - s;
      b->rowptr[i + 1] = k;
    }
    batch->rowptr = b->rowptr;
    batch->col = b->col;
    batch->val = b->val;
  } else {
    const size_t d = (size_t)ds->d;
    for (int i = 0; i < n; i++)
      memcpy(b->x + (size_t)i * d, ds->x + (size_t)idx[i] * d, d * sizeof(float));
    batch->x = b->x;
  }
}

void sg_batch_view(const sg_dataset_t *ds, int64_t start, int n,
                   sg_batch_t *batch) {
  memset(batch, 0, sizeof *batch);
  batch->n = n;
  batch->y = ds->y + start;
  if (sg_dataset_sparse(ds)) {
    /* offsets stay absolute: rowptr[i] indexes ds->col/val directly */
    batch->rowptr = ds->rowptr + start;
    batch->col = ds->col;
    batch->val = ds->val;
  } else {
    batch->x = ds->x + (size_t)start * (size_t)ds->d;
  }
}
