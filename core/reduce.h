/* reduce.h - the float summation kernels the reducing engines share.
 *
 * Plain loops over contiguous arrays, compiled -O3 so GCC vectorises them
 * (AVX2 on this machine: 8 floats per instruction); `restrict` promises
 * the compiler that the arrays do not overlap, which is what lets it.
 * Summation order within one call is element-wise, so the result of
 * dst[i] + src[i] is exactly IEEE float addition, element by element.
 */
#ifndef SG_REDUCE_H
#define SG_REDUCE_H

#include <stddef.h>

#ifdef SG_SMPI
#include "msgbuf.h"
#endif

/* 1 when the floats these kernels and the optimizer would compute are
 * never read: a simulated rank under compute: modeled (folding on,
 * core/msgbuf.h), whose buffers hold no values and whose step time is
 * injected, not measured (smpi/simulate-computation:no), so skipping the
 * arithmetic leaves every simulated time as it was.  Done, it cost most
 * of the simulator's CPU at 1024 ranks: 349 s against 57 s (medians of
 * three), the same step records to the nanosecond (docs/simulate.md, "Scale
 * (measured)").  0 outside a simulation and under compute: executed. */
static inline int sg_values_unread(void) {
#ifdef SG_SMPI
  return sg_fold_enabled();
#else
  return 0;
#endif
}

/* dst[i] += src[i] for i < n.  dst and src must not overlap. */
void sg_sum_f32(float *restrict dst, const float *restrict src, size_t n);

/* dst[i] = a[i] + b[i] for i < n.  dst may not overlap a or b. */
void sg_sum3_f32(float *restrict dst, const float *restrict a,
                 const float *restrict b, size_t n);

/* dst[i] *= s for i < n (averaging after a sum). */
void sg_scale_f32(float *restrict dst, float s, size_t n);

#endif
