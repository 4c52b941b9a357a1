/* reduce.c - see reduce.h.  Built with -O3 (the top-level CMakeLists sets
 * it for the whole tree; GCC 12 at -O2 does not vectorise these loops). */
#include "reduce.h"

void sg_sum_f32(float *restrict dst, const float *restrict src, size_t n) {
  if (sg_values_unread()) return;
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void sg_sum3_f32(float *restrict dst, const float *restrict a,
                 const float *restrict b, size_t n) {
  if (sg_values_unread()) return;
  for (size_t i = 0; i < n; i++) dst[i] = a[i] + b[i];
}

void sg_scale_f32(float *restrict dst, float s, size_t n) {
  if (sg_values_unread()) return;
  for (size_t i = 0; i < n; i++) dst[i] *= s;
}
