/* msgbuf.c - memory a simulation may fold, message buffers (msgbuf.h). */
#include "msgbuf.h"

#ifdef SG_SMPI
#include "sg_mpi.h" /* smpi_shared_malloc_partial */
#endif

/* per simulated rank (SMPI privatizes the rank program's globals) */
static int fold_on;

void sg_fold_enable(int on) { fold_on = on != 0; }

int sg_fold_enabled(void) { return fold_on; }

void *sg_fold_alloc(size_t bytes) {
#ifdef SG_SMPI
  if (fold_on && bytes >= SG_MSG_FOLD_MIN) {
    size_t whole[2] = {0, bytes};
    return smpi_shared_malloc_partial(bytes, whole, 1);
  }
#endif
  return calloc(1, bytes ? bytes : 1);
}

/* free is smpicc's macro under SG_SMPI (smpi_shared_free): it unmaps a
 * folded block and frees any other */
void sg_fold_free(void *p) { free(p); }

#ifdef SG_SMPI
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
  if (fold && fold_on && hdr > 0 && bytes > 0) {
    if (stride > bytes || stride == 0) stride = bytes;
    size_t frames = (bytes + stride - 1) / stride;
    size_t *at = malloc(2 * frames * sizeof *at);
    if (!at) return NULL;
    int m = payloads(bytes, stride, hdr, at);
    /* SMPI asks each block to end before the next begins: the headers
     * between them keep them apart */
    void *p = m > 0 ? smpi_shared_malloc_partial(bytes, at, m) : malloc(bytes);
    free(at);
    return p;
  }
#else
  (void)stride;
  (void)hdr;
  (void)fold;
#endif
  return malloc(bytes);
}
