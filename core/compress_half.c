/* compress_half.c - see compress_half.h.  GCC's _Float16 converts with the F16C
 * instructions (vcvtps2ph / vcvtph2ps, 8 values each) in the functions
 * built for that target, and in software otherwise; both round to nearest
 * even, so every rank converts to the same bits either way. */
#include "compress_half.h"

#include <string.h>

#define F16C __attribute__((target("avx,f16c")))

static int have_f16c(void) {
  static int v = -1;
  if (v < 0) v = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return v;
}

static inline uint16_t bits(_Float16 h) {
  uint16_t u;
  memcpy(&u, &h, sizeof u);
  return u;
}
static inline float widen(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, sizeof h);
  return (float)h;
}

#define KERNELS(sfx, attr)                                                              \
  attr static void to16_##sfx(uint16_t *restrict d, const float *restrict s, size_t n) { \
    for (size_t i = 0; i < n; i++) d[i] = bits((_Float16)s[i]);                        \
  }                                                                                     \
  attr static void to32_##sfx(float *restrict d, const uint16_t *restrict s, size_t n) { \
    for (size_t i = 0; i < n; i++) d[i] = widen(s[i]);                                 \
  }                                                                                     \
  attr static void sum16_##sfx(uint16_t *restrict d, const float *restrict a,           \
                               const uint16_t *restrict b, size_t n) {                  \
    for (size_t i = 0; i < n; i++) d[i] = bits((_Float16)(a[i] + widen(b[i])));        \
  }                                                                                     \
  attr static void acc16_##sfx(float *restrict d, const uint16_t *restrict s, size_t n) { \
    for (size_t i = 0; i < n; i++) d[i] += widen(s[i]);                                \
  }                                                                                     \
  attr static void round16_##sfx(float *x, size_t n) {                                  \
    for (size_t i = 0; i < n; i++) x[i] = (float)(_Float16)x[i];                        \
  }

KERNELS(soft, )
KERNELS(f16c, F16C)

void sg_f32_to_f16(uint16_t *restrict dst, const float *restrict src, size_t n) {
  if (have_f16c()) to16_f16c(dst, src, n);
  else to16_soft(dst, src, n);
}
void sg_f16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n) {
  if (have_f16c()) to32_f16c(dst, src, n);
  else to32_soft(dst, src, n);
}
void sg_sum_f16(uint16_t *restrict dst, const float *restrict a, const uint16_t *restrict b,
                size_t n) {
  if (have_f16c()) sum16_f16c(dst, a, b, n);
  else sum16_soft(dst, a, b, n);
}
void sg_acc_f16(float *restrict dst, const uint16_t *restrict src, size_t n) {
  if (have_f16c()) acc16_f16c(dst, src, n);
  else acc16_soft(dst, src, n);
}
void sg_round_f16(float *x, size_t n) {
  if (have_f16c()) round16_f16c(x, n);
  else round16_soft(x, n);
}
