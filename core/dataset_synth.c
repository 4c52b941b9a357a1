/* dataset_synth.c - seeded synthetic classification data.
 *
 * dense ("synthetic"): class c has mean mu_c with entries N(0, 1) * 2.5 /
 *   sqrt(d), a row of class c is mu_c + N(0, I).  Means are ~3.5 apart in
 *   any dimension, so the classes overlap a little: learnable, not trivial.
 * sparse ("synthetic-sparse"): class c owns a set of 200 feature indices
 *   (hashed from the seed); each of a row's nnz nonzeros comes with
 *   probability 1/2 from its class's set, otherwise uniformly from all d
 *   features; values are 1/sqrt(nnz) so every row has unit norm.
 *
 * Row i of a split is drawn from its own stream (seed, split, i): the data
 * do not depend on how many rows are generated.  Class structure (means,
 * feature sets) depends on the seed only, so train and test share it.
 */
#include <math.h>
#include <stdlib.h>

#include "dataset.h"
#include "err.h"
#include "rng.h"

#define SPARSE_CLASS_FEATURES 200

static int check_shape(int64_t n, int64_t d, int classes) {
  if (n < 1) return sg_err_set(SG_ECONFIG, "train_samples/test_samples: must be >= 1 for synthetic data");
  if (d < 1) return sg_err_set(SG_ECONFIG, "features: must be >= 1 for synthetic data");
  if (classes < 2) return sg_err_set(SG_ECONFIG, "classes: must be >= 2");
  return SG_OK;
}

static uint64_t split_stream(int split) {
  return split == SG_SPLIT_TEST ? SG_RNG_SYNTH_TEST : SG_RNG_SYNTH_TRAIN;
}

int sg_dataset_synth_dense(sg_dataset_t **out, uint64_t seed, int split,
                           int64_t n, int64_t d, int classes) {
  int rc = SG_OK;
  float *mu = NULL;
  sg_dataset_t *ds = NULL;
  SG_CHECK(check_shape(n, d, classes));
  if ((uint64_t)n * (uint64_t)d > ((uint64_t)1 << 36))
    return sg_err_set(SG_ECONFIG, "features: %lld x %lld dense synthetic rows are too many",
                      (long long)n, (long long)d);
  mu = malloc((size_t)classes * (size_t)d * sizeof *mu);
  ds = sg_dataset_alloc_();
  if (!mu || !ds) {
    rc = SG_ENOMEM;
    goto fail;
  }
  ds->n = n;
  ds->d = d;
  ds->classes = classes;
  ds->x = malloc((size_t)n * (size_t)d * sizeof(float));
  ds->y = malloc((size_t)n * sizeof(int32_t));
  if (!ds->x || !ds->y) {
    rc = sg_err_set(SG_ENOMEM, "synthetic data: %lld x %lld floats", (long long)n, (long long)d);
    goto fail;
  }
  const double s = 2.5 / sqrt((double)d);
  for (int c = 0; c < classes; c++) {
    sg_rng_t r;
    sg_rng_seed(&r, seed, SG_RNG_SYNTH_MODEL, (uint64_t)c);
    for (int64_t j = 0; j < d; j++) mu[(size_t)c * d + j] = (float)(s * sg_rng_normal(&r));
  }
  for (int64_t i = 0; i < n; i++) {
    sg_rng_t r;
    sg_rng_seed(&r, seed, split_stream(split), (uint64_t)i);
    int c = (int)sg_rng_below(&r, (uint64_t)classes);
    ds->y[i] = c;
    float *row = ds->x + (size_t)i * d;
    const float *m = mu + (size_t)c * d;
    /* Box-Muller pairs: both outputs used */
    for (int64_t j = 0; j < d; j += 2) {
      double u1 = 1.0 - sg_rng_uniform(&r), u2 = sg_rng_uniform(&r);
      double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
      row[j] = m[j] + (float)(rad * cos(th));
      if (j + 1 < d) row[j + 1] = m[j + 1] + (float)(rad * sin(th));
    }
  }
  *out = ds;
  ds = NULL;
fail:
  free(mu);
  sg_dataset_destroy(&ds);
  return rc;
}

int sg_dataset_synth_sparse(sg_dataset_t **out, uint64_t seed, int split,
                            int64_t n, int64_t d, int classes, int64_t nnz) {
  int rc = SG_OK;
  sg_dataset_t *ds = NULL;
  SG_CHECK(check_shape(n, d, classes));
  if (d > 4294967295LL)
    return sg_err_set(SG_ECONFIG, "features: %lld exceeds 2^32-1", (long long)d);
  if (nnz < 1 || nnz > d)
    return sg_err_set(SG_ECONFIG, "nnz: %lld must be in 1..features (%lld)",
                      (long long)nnz, (long long)d);
  if ((uint64_t)n * (uint64_t)nnz > ((uint64_t)1 << 34))
    return sg_err_set(SG_ECONFIG, "nnz: %lld rows x %lld nonzeros are too many",
                      (long long)n, (long long)nnz);
  ds = sg_dataset_alloc_();
  if (!ds) return SG_ENOMEM;
  ds->n = n;
  ds->d = d;
  ds->classes = classes;
  ds->max_row_nnz = nnz;
  ds->rowptr = malloc((size_t)(n + 1) * sizeof *ds->rowptr);
  ds->col = malloc((size_t)n * (size_t)nnz * sizeof *ds->col);
  ds->val = malloc((size_t)n * (size_t)nnz * sizeof *ds->val);
  ds->y = malloc((size_t)n * sizeof *ds->y);
  if (!ds->rowptr || !ds->col || !ds->val || !ds->y) {
    rc = sg_err_set(SG_ENOMEM, "synthetic-sparse: %lld x %lld nonzeros", (long long)n,
                    (long long)nnz);
    goto fail;
  }
  const uint64_t cls_key = sg_hash64(seed ^ 0x5bd1e995ULL) ^ SG_RNG_SYNTH_MODEL;
  const float v = (float)(1.0 / sqrt((double)nnz));
  for (int64_t i = 0; i <= n; i++) ds->rowptr[i] = i * nnz;
  for (int64_t i = 0; i < n; i++) {
    sg_rng_t r;
    sg_rng_seed(&r, seed, split_stream(split), (uint64_t)i);
    int c = (int)sg_rng_below(&r, (uint64_t)classes);
    ds->y[i] = c;
    uint32_t *col = ds->col + (size_t)i * nnz;
    float *val = ds->val + (size_t)i * nnz;
    for (int64_t t = 0; t < nnz; t++) {
      uint64_t bits = sg_rng_next(&r);
      uint64_t j;
      if (bits & 1) { /* from the class's feature set */
        uint64_t k = sg_rng_below(&r, SPARSE_CLASS_FEATURES);
        j = sg_hash64(cls_key + (uint64_t)c * SPARSE_CLASS_FEATURES + k) % (uint64_t)d;
      } else {
        j = sg_rng_below(&r, (uint64_t)d);
      }
      col[t] = (uint32_t)j;
      val[t] = v;
    }
  }
  *out = ds;
  ds = NULL;
fail:
  sg_dataset_destroy(&ds);
  return rc;
}
