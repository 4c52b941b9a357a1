/* compress_half.h - IEEE binary16 on the wire: conversions and the reduce kernels
 * of compress: fp16.  Sums are float32: a received half is widened, added
 * in float, and narrowed again (round to nearest even) only to be sent. */
#ifndef SG_COMPRESS_HALF_H
#define SG_COMPRESS_HALF_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = half(src[i]). */
void sg_f32_to_f16(uint16_t *restrict dst, const float *restrict src, size_t n);
/* dst[i] = float(src[i]). */
void sg_f16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n);
/* dst[i] = half(a[i] + float(b[i])). */
void sg_sum_f16(uint16_t *restrict dst, const float *restrict a, const uint16_t *restrict b,
                size_t n);
/* dst[i] += float(src[i]) (the sum stays float32). */
void sg_acc_f16(float *restrict dst, const uint16_t *restrict src, size_t n);
/* x[i] = float(half(x[i])): the value a replica receives for it. */
void sg_round_f16(float *x, size_t n);

#endif
