/* topk_select.h - compress: topk's selection with error feedback, shared
 * by the allreduce engine (allreduce/topk.h) and the parameter server
 * (ps/ps_worker.c).
 *
 * acc = gradient + residual (what earlier steps did not send); the k
 * entries of largest |acc| are sent as (index, value) pairs and the rest
 * stays in the residual, so nothing is lost, only delayed.
 */
#ifndef SG_TOPK_SELECT_H
#define SG_TOPK_SELECT_H

#include <stddef.h>
#include <stdint.h>

/* One entry on the wire: 8 bytes, native-endian as every message. */
typedef struct sg_topk_pair {
  uint32_t idx;
  float val;
} sg_topk_pair_t;

/* k = ceil(ratio * count), at most count. */
size_t sg_topk_k(double ratio, size_t count);

/* buf[i] += resid[i]; out[0..k) <- the k largest |buf| (those above the
 * k-th largest magnitude in index order, then ties in index order; pads
 * with (0, 0) when NaNs leave fewer); resid <- buf minus what was sent.
 * mag is scratch of n floats.  buf keeps the accumulated values. */
void sg_topk_select(float *buf, float *resid, float *mag, size_t n, size_t k,
                    sg_topk_pair_t *out);

#endif
