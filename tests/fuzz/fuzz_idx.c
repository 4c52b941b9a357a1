/* fuzz_idx.c - the IDX reader (sg_dataset_load_idx, sg_dataset_probe_idx).
 *
 * One input makes an image file and a label file:
 *   byte 0     bit 0: gzip the images; bit 1: gzip the labels;
 *              bits 2-7: row limit (0 = all)
 *   bytes 1-2  length of the images part (little-endian, clamped)
 *   then the images part; the rest is the labels part.
 * Compressing here lets mutations of the header reach the gzip path; an
 * input whose images part is itself gzip data (bit 0 clear) exercises
 * corrupt and truncated streams.
 */
#include <stdlib.h>

#include "dataset.h"
#include "err.h"
#include "fuzz.h"

/* A dataset that loaded must be exactly what its header promised. */
static void check(const sg_dataset_t *ds, int64_t limit, int64_t pn, int64_t pd) {
  fuzz_require(ds->n >= 1 && ds->n <= pn && (limit == 0 || ds->n <= limit));
  fuzz_require(ds->d == pd && ds->classes == 10 && !sg_dataset_sparse(ds));
  for (int64_t i = 0; i < ds->n * ds->d; i++) fuzz_require(ds->x[i] >= 0.0f && ds->x[i] <= 1.0f);
  for (int64_t i = 0; i < ds->n; i++) fuzz_require(ds->y[i] >= 0 && ds->y[i] < 10);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  int flags = data[0];
  size_t ilen = (size_t)data[1] | (size_t)data[2] << 8;
  data += 3;
  size -= 3;
  if (ilen > size) ilen = size;
  const char *im = fuzz_file(0, data, ilen, flags & 1);
  const char *lb = fuzz_file(1, data + ilen, size - ilen, flags & 2);
  int64_t limit = flags >> 2, pn = 0, pd = 0;
  int probed = sg_dataset_probe_idx(im, &pn, &pd);
  fuzz_require(probed == SG_OK || probed == SG_EFORMAT);
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_idx(&ds, im, lb, limit);
  fuzz_require(rc == SG_OK || rc == SG_EFORMAT);
  fuzz_require((rc == SG_OK) == (ds != NULL));
  if (ds) {
    fuzz_require(probed == SG_OK); /* what loads also probes */
    check(ds, limit, pn, pd);
  }
  sg_dataset_destroy(&ds);
  return 0;
}
