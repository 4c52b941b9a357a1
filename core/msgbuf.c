/* msgbuf.c - message buffers whose payloads a simulation may fold (msgbuf.h). */
#include "msgbuf.h"

#ifdef SG_SMPI
#include "sg_mpi.h" /* smpi_shared_malloc_partial */

/* [start, stop) of every frame's payload (frames of a payload below
 * SG_MSG_FOLD_MIN left out) into at[]; returns how many. */
static int payloads(size_t bytes, size_t stride, size_t hdr, size_t *at) {
  int m = 0;
  for (size_t lo = 0; lo < bytes; lo += stride) {
    size_t start = lo + hdr, stop = bytes - lo > stride ? lo + stride : bytes;
    if (start >= stop || stop - start < SG_MSG_FOLD_MIN) continue;
    at[2 * m] = start;
    at[2 * m + 1] = stop;
    m++;
  }
  return m;
}
#endif

void *sg_msg_malloc_framed(size_t bytes, size_t stride, size_t hdr, int fold) {
#ifdef SG_SMPI
  if (fold && hdr > 0 && bytes > 0) {
    if (stride > bytes || stride == 0) stride = bytes;
    size_t frames = (bytes + stride - 1) / stride;
    size_t *at = (malloc)(2 * frames * sizeof *at);
    if (!at) return NULL;
    int m = payloads(bytes, stride, hdr, at);
    /* SMPI asks each block to end before the next begins: the headers
     * between them keep them apart */
    void *p = m > 0 ? smpi_shared_malloc_partial(bytes, at, m) : (malloc)(bytes);
    (free)(at);
    return p;
  }
#else
  (void)stride;
  (void)hdr;
  (void)fold;
#endif
  return (malloc)(bytes);
}
