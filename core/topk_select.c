/* topk_select.c - see topk_select.h. */
#include "topk_select.h"

#include <math.h>
#include <string.h>

size_t sg_topk_k(double ratio, size_t count) {
  size_t k = (size_t)ceil(ratio * (double)count);
  return k > count ? count : k;
}

/* The k-th largest of v[0..n) (v is reordered): quickselect, O(n). */
static float kth_largest(float *v, size_t n, size_t k) {
  long lo = 0, hi = (long)n - 1, want = (long)k - 1;
  while (lo < hi) {
    float piv = v[lo + (hi - lo) / 2];
    long i = lo, j = hi;
    while (i <= j) { /* descending: larger to the left */
      while (v[i] > piv) i++;
      while (v[j] < piv) j--;
      if (i <= j) {
        float x = v[i];
        v[i++] = v[j];
        v[j--] = x;
      }
    }
    if (want <= j) hi = j;
    else if (want >= i) lo = i;
    else return v[want]; /* between j and i: all equal to the pivot */
  }
  return v[want];
}

void sg_topk_select(float *buf, float *resid, float *mag, size_t n, size_t k,
                    sg_topk_pair_t *out) {
  size_t got = 0;
  if (k == 0 || n == 0) return; /* an empty shard sends nothing */
  for (size_t i = 0; i < n; i++) {
    buf[i] += resid[i];
    mag[i] = fabsf(buf[i]);
  }
  float thr = kth_largest(mag, n, k);
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n && got < k; i++) {
      float m = fabsf(buf[i]);
      if (pass == 0 ? m > thr : m == thr) out[got++] = (sg_topk_pair_t){(uint32_t)i, buf[i]};
    }
  while (got < k) out[got++] = (sg_topk_pair_t){0, 0.0f}; /* NaNs only: pad */
  memcpy(resid, buf, n * sizeof *buf);
  for (size_t j = 0; j < k; j++) resid[out[j].idx] -= out[j].val;
}
