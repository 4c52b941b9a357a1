/* msgbuf.c - memory a simulation may fold, message buffers (msgbuf.h). */
#include "msgbuf.h"

#include <string.h>

#ifdef SG_SMPI
#include "sg_mpi.h" /* smpi_shared_malloc_partial */
#endif

/* per simulated rank (SMPI privatizes the rank program's globals) */
static int fold_on;

#ifdef SG_SMPI
/* This rank's folded allocations, sorted by start (sg_fold_private): a
 * whole block (stride 0) or a framed buffer. */
typedef struct folded {
  const char *p;
  size_t bytes, stride, hdr;
} folded_t;
static folded_t *fold_tab;
static size_t fold_n, fold_cap;

static int fold_keep(const void *p, size_t bytes, size_t stride, size_t hdr) {
  if (fold_n == fold_cap) {
    size_t cap = fold_cap ? 2 * fold_cap : 64;
    folded_t *t = realloc(fold_tab, cap * sizeof *t);
    if (!t) return -1;
    fold_tab = t;
    fold_cap = cap;
  }
  size_t i = fold_n;
  while (i > 0 && fold_tab[i - 1].p > (const char *)p) i--;
  memmove(fold_tab + i + 1, fold_tab + i, (fold_n - i) * sizeof *fold_tab);
  fold_tab[i] = (folded_t){p, bytes, stride, hdr};
  fold_n++;
  return 0;
}

/* The entry holding p, or NULL. */
static folded_t *fold_find(const void *p) {
  size_t lo = 0, hi = fold_n;
  while (lo < hi) { /* the last entry starting at or before p */
    size_t mid = lo + (hi - lo) / 2;
    if (fold_tab[mid].p <= (const char *)p) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  folded_t *f = &fold_tab[lo - 1];
  return (const char *)p < f->p + f->bytes ? f : NULL;
}

static void fold_forget(const void *p) {
  folded_t *f = fold_find(p);
  if (!f || f->p != (const char *)p) return;
  size_t i = (size_t)(f - fold_tab);
  memmove(f, f + 1, (fold_n - i - 1) * sizeof *fold_tab);
  if (--fold_n == 0) { /* the last one: the table goes too */
    free(fold_tab);
    fold_tab = NULL;
    fold_cap = 0;
  }
}
#endif

size_t sg_fold_registered(void) {
#ifdef SG_SMPI
  return fold_n;
#else
  return 0;
#endif
}

void sg_fold_enable(int on) { fold_on = on != 0; }

int sg_fold_enabled(void) { return fold_on; }

void *sg_fold_alloc(size_t bytes) {
#ifdef SG_SMPI
  if (fold_on && bytes >= SG_MSG_FOLD_MIN) {
    size_t whole[2] = {0, bytes};
    void *p = smpi_shared_malloc_partial(bytes, whole, 1);
    if (p && fold_keep(p, bytes, 0, 0) < 0) {
      free(p);
      return NULL;
    }
    return p;
  }
#endif
  return calloc(1, bytes ? bytes : 1);
}

/* free is smpicc's macro under SG_SMPI (smpi_shared_free): it unmaps a
 * folded block and frees any other */
void sg_fold_free(void *p) {
#ifdef SG_SMPI
  fold_forget(p);
#endif
  free(p);
}

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
    if (p && m > 0 && fold_keep(p, bytes, stride, hdr) < 0) {
      free(p);
      return NULL;
    }
    return p;
  }
#else
  (void)stride;
  (void)hdr;
  (void)fold;
#endif
  return malloc(bytes);
}

/* Add [lo, hi) to the ranges in at[] (merging with the last); -1 when
 * max ranges are used. */
static int add_range(size_t *at, int *m, int max, size_t lo, size_t hi) {
  if (lo >= hi) return 0;
  if (*m > 0 && at[2 * *m - 1] == lo) {
    at[2 * *m - 1] = hi;
    return 0;
  }
  if (*m == max) return -1;
  at[2 * *m] = lo;
  at[2 * *m + 1] = hi;
  ++*m;
  return 0;
}

int sg_frames_private(size_t bytes, size_t stride, size_t hdr, size_t a, size_t len, size_t *at,
                      int max) {
  size_t b = a + len;
  int m = 0;
  if (b > bytes || b < a) return -1; /* past the allocation: not one message of it */
  if (stride == 0) return 0;         /* a whole folded block */
  for (size_t lo = a - a % stride; lo < b; lo += stride) {
    size_t start = lo + hdr, stop = bytes - lo > stride ? lo + stride : bytes;
    if (start >= stop || stop - start < SG_MSG_FOLD_MIN) start = stop; /* whole: private */
    /* private: [lo, start) of this frame, clipped to [a, b) */
    size_t plo = lo > a ? lo : a, phi = start < b ? start : b;
    if (plo < phi && add_range(at, &m, max, plo - a, phi - a) < 0) return -1;
  }
  return m;
}

int sg_fold_private(const void *buf, size_t len, size_t *at, int max) {
#ifdef SG_SMPI
  folded_t *f = fold_find(buf);
  if (!f) return -1;
  return sg_frames_private(f->bytes, f->stride, f->hdr, (size_t)((const char *)buf - f->p), len,
                           at, max);
#else
  (void)buf;
  (void)len;
  (void)at;
  (void)max;
  return -1;
#endif
}
