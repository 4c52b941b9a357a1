/* fuzz_clicks.c - the click-log reader (sg_dataset_load_clicks).
 *
 *   byte 0   bit 0: format (libsvm, csv); bits 1-3: fields - 1;
 *            bits 4-6: row limit (0 = all)
 *   then the file's text.
 * A dataset that loads must hold exactly `fields` keys per row and
 * labels 0/1; a file that does not is SG_EFORMAT with "path:line:col:".
 */
#include <stdlib.h>
#include <string.h>

#include "dataset_clicks.h"
#include "err.h"
#include "fuzz.h"

static void check(const sg_dataset_t *ds, int F, int64_t limit) {
  fuzz_require(ds->n >= 1 && (limit == 0 || ds->n <= limit));
  fuzz_require(ds->classes == 2 && ds->max_row_nnz == F && ds->rowptr[0] == 0);
  for (int64_t i = 0; i < ds->n; i++) {
    fuzz_require(ds->rowptr[i + 1] - ds->rowptr[i] == F);
    fuzz_require(ds->y[i] == 0 || ds->y[i] == 1);
    for (int64_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
      fuzz_require((int64_t)ds->col[k] < ds->d);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  int fmt = data[0] & 1, F = 1 + ((data[0] >> 1) & 7);
  int64_t limit = (data[0] >> 4) & 7;
  const char *path = fuzz_file(0, data + 1, size - 1, 0);
  sg_dataset_t *ds = NULL;
  sg_err_clear();
  int rc = sg_dataset_load_clicks(&ds, path, fmt, F, limit);
  fuzz_require(rc == SG_OK || rc == SG_EFORMAT);
  fuzz_require((rc == SG_OK) == (ds != NULL));
  if (rc == SG_EFORMAT) { /* one line naming the place */
    const char *m = sg_err_msg();
    fuzz_require(!strncmp(m, path, strlen(path)) && m[strlen(path)] == ':');
    fuzz_require(strchr(m, '\n') == NULL);
  }
  if (ds) check(ds, F, limit);
  sg_dataset_destroy(&ds);
  return 0;
}
