/* dataset.c - what every loader shares: allocation, release, densify. */
#include "dataset.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

sg_dataset_t *sg_dataset_alloc_(void) { return calloc(1, sizeof(sg_dataset_t)); }

void sg_dataset_destroy(sg_dataset_t **pds) {
  if (!pds || !*pds) return;
  sg_dataset_t *ds = *pds;
  free(ds->x);
  free(ds->rowptr);
  free(ds->col);
  free(ds->val);
  free(ds->y);
  free(ds);
  *pds = NULL;
}

int sg_dataset_densify(sg_dataset_t *ds) {
  if (!sg_dataset_sparse(ds)) return SG_OK;
  if (ds->d > 0 && (uint64_t)ds->n > (SIZE_MAX / sizeof(float)) / (uint64_t)ds->d)
    return sg_err_set(SG_ENOMEM, "dense copy of %lld x %lld is too large",
                      (long long)ds->n, (long long)ds->d);
  float *x = calloc((size_t)ds->n * (size_t)ds->d + 1, sizeof(float));
  if (!x)
    return sg_err_set(SG_ENOMEM, "dense copy of %lld x %lld: out of memory",
                      (long long)ds->n, (long long)ds->d);
  for (int64_t i = 0; i < ds->n; i++) {
    float *row = x + (size_t)i * (size_t)ds->d;
    for (int64_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
      row[ds->col[k]] += ds->val[k];
  }
  free(ds->rowptr);
  free(ds->col);
  free(ds->val);
  ds->rowptr = NULL;
  ds->col = NULL;
  ds->val = NULL;
  ds->max_row_nnz = 0;
  ds->x = x;
  return SG_OK;
}
