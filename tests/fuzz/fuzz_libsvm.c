/* fuzz_libsvm.c - the LIBSVM reader (sg_dataset_load_libsvm).
 *
 *   byte 0   bits 0-1: features (0 = infer, 4, 1000, SG_LIBSVM_MAX_INDEX);
 *            bits 2-4: classes - 2; bits 5-7: row limit (0 = all)
 *   then the file's text.
 * A dataset that loads must be consistent CSR; small ones are densified.
 */
#include <math.h>
#include <stdlib.h>

#include "dataset.h"
#include "err.h"
#include "fuzz.h"

static void check(const sg_dataset_t *ds, int64_t features, int classes, int64_t limit) {
  fuzz_require(ds->n >= 1 && (limit == 0 || ds->n <= limit));
  fuzz_require(ds->d >= 0 && ds->d <= SG_LIBSVM_MAX_INDEX && (features == 0 || ds->d == features));
  fuzz_require(ds->classes == classes && ds->rowptr[0] == 0);
  int64_t longest = 0;
  for (int64_t i = 0; i < ds->n; i++) {
    fuzz_require(ds->rowptr[i + 1] >= ds->rowptr[i]);
    if (ds->rowptr[i + 1] - ds->rowptr[i] > longest) longest = ds->rowptr[i + 1] - ds->rowptr[i];
    fuzz_require(ds->y[i] >= 0 && ds->y[i] < classes);
    for (int64_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++) {
      fuzz_require((int64_t)ds->col[k] < ds->d);
      fuzz_require(isfinite(ds->val[k]) && ds->val[k] != 0.0f);
    }
  }
  fuzz_require(longest == ds->max_row_nnz);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const int64_t feats[4] = {0, 4, 1000, SG_LIBSVM_MAX_INDEX};
  if (size < 1) return 0;
  int64_t features = feats[data[0] & 3], limit = data[0] >> 5;
  int classes = 2 + ((data[0] >> 2) & 7);
  const char *path = fuzz_file(0, data + 1, size - 1, 0);
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_libsvm(&ds, path, features, classes, limit);
  fuzz_require(rc == SG_OK || rc == SG_EFORMAT);
  fuzz_require((rc == SG_OK) == (ds != NULL));
  if (ds) {
    check(ds, features, classes, limit);
    if (ds->n * ds->d <= (1 << 16)) fuzz_require(sg_dataset_densify(ds) == SG_OK);
  }
  sg_dataset_destroy(&ds);
  return 0;
}
