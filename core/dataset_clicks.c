/* dataset_clicks.c - see dataset_clicks.h. */
#include "dataset_clicks.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double u01(uint64_t *st) {
  *st = mix(*st);
  return (double)(*st >> 11) * (1.0 / 9007199254740992.0);
}

/* Ground-truth weight of (field, key), in [-1, 1]. */
static double truth(uint64_t seed, int f, uint64_t key) {
  uint64_t h = mix(mix(seed ^ 0x636c69636bull) ^ mix((uint64_t)f) ^ key);
  return (double)(h >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

/* Rows from draw stream `stream` (the ground truth is the seed's alone). */
static int clicks_stream(uint64_t seed, uint64_t stream, int64_t n, int F, int64_t V,
                         double s, double scale, uint64_t *keys, int32_t *y) {
  if (n < 0 || F < 1 || V < 1 || !(s >= 0) || !isfinite(scale)) return -1;
  double *cdf = malloc((size_t)V * sizeof(double));
  if (!cdf) return -1;
  double acc = 0;
  for (int64_t k = 0; k < V; k++) cdf[k] = acc += pow((double)(k + 1), -s);
  uint64_t st = mix(seed) ^ (stream ? mix(stream ^ 0x7465737473706c74ull) : 0);
  for (int64_t i = 0; i < n; i++) {
    double z = 0;
    for (int f = 0; f < F; f++) {
      double u = u01(&st) * acc;
      int64_t lo = 0, hi = V - 1; /* first k with cdf[k] > u */
      while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (cdf[mid] > u) hi = mid; else lo = mid + 1;
      }
      keys[i * F + f] = (uint64_t)lo;
      z += truth(seed, f, (uint64_t)lo);
    }
    y[i] = u01(&st) < 1.0 / (1.0 + exp(-scale * z)) ? 1 : 0;
  }
  free(cdf);
  return 0;
}

int sg_clicks_synth(uint64_t seed, int64_t n, int F, int64_t V, double s, double scale,
                    uint64_t *keys, int32_t *y) {
  return clicks_stream(seed, 0, n, F, V, s, scale, keys, y);
}

int sg_dataset_clicks_synth(sg_dataset_t **out, uint64_t seed, int split, int64_t n, int F,
                            int64_t V, double zipf) {
  if (n < 1 || F < 1 || V < 1 || V > ((int64_t)1 << 32) || !(zipf >= 0))
    return sg_err_set(SG_EINVAL, "clicks: %lld rows, %d fields, %lld keys, zipf %g",
                      (long long)n, F, (long long)V, zipf);
  size_t cells = (size_t)n * (size_t)F;
  uint64_t *keys = malloc(cells * sizeof *keys);
  sg_dataset_t *ds = sg_dataset_alloc_();
  if (!keys || !ds) goto nomem;
  ds->n = n;
  ds->d = V;
  ds->classes = 2;
  ds->max_row_nnz = F;
  ds->rowptr = malloc(((size_t)n + 1) * sizeof *ds->rowptr);
  ds->col = malloc(cells * sizeof *ds->col);
  ds->val = malloc(cells * sizeof *ds->val);
  ds->y = malloc((size_t)n * sizeof *ds->y);
  if (!ds->rowptr || !ds->col || !ds->val || !ds->y) goto nomem;
  if (clicks_stream(seed, split == SG_SPLIT_TEST, n, F, V, zipf, 3.0, keys, ds->y) < 0) goto nomem;
  for (size_t j = 0; j < cells; j++) ds->col[j] = (uint32_t)keys[j], ds->val[j] = 1.0f;
  for (int64_t i = 0; i <= n; i++) ds->rowptr[i] = i * F;
  free(keys);
  *out = ds;
  return SG_OK;
nomem:
  free(keys);
  sg_dataset_destroy(&ds);
  return sg_err_set(SG_ENOMEM, "clicks: %lld rows x %d fields (%lld keys)", (long long)n, F,
                    (long long)V);
}
