/* bucket_plan.h - the gradient buckets of overlap with backprop, for the
 * host (allreduce/overlap.c) and the device (allreduce_device.c), plain C.
 *
 * Backward hands the gradient over in ranges, last layer first (model.h's
 * hook: descending offsets, adjoining, the whole vector once).  The ranges
 * are grouped into buckets: a bucket leaves once it holds `bucket` floats
 * or the next range does not adjoin it; the rest leaves at the end
 * (sg_bucket_feed / sg_bucket_flush, the host overlap's grouping).
 *
 * The device does not run the host's hook: its backward issues each
 * layer's db (one column-sum kernel) and then its whole dW (one sgemm),
 * where the host model computes dW in blocks of rows (sg_model_dw_rows).
 * So the device takes the host's buckets as a plan made beforehand from
 * the layer sizes (sg_bucket_plan_mlp: the host hook's ranges, fed to the
 * same grouping), and marks a bucket complete once its device op has been
 * issued: every range the device reports finishes the gradient from its
 * offset up (descending), so each bucket whose offset is at or above it is
 * complete (sg_bucket_track).  The same buckets, in the same order, with
 * the same bytes as the host overlap; on the device a bucket inside a
 * large layer's dW becomes ready only with that layer's single sgemm.
 * The CNN hands over whole tensors on both sides (sg_bucket_cnn_ranges):
 * its plan is those ranges grouped (sg_bucket_plan_cnn).
 *
 * Pieces (sg_bucket_pieces): each bucket cut into pieces of at most one
 * staging slot, for the host-staged run (stage_plan.h); a bucket that fits
 * a slot is one piece, reduced by one call of the host algorithm as the
 * host overlap reduces it.
 *
 * tests/test_cuda_overlap.c checks the plan against the host model's hook
 * and the real host overlap, and runs the staged schedule on a simulated
 * device. */
#ifndef SG_BUCKET_PLAN_H
#define SG_BUCKET_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_cnn_index.h"
#include "model.h"
#include "stage_plan.h"

typedef struct sg_bucket {
  size_t off, len; /* floats of the gradient */
} sg_bucket_t;

/* The grouping: lo..hi is the bucket being filled (empty when equal). */
typedef struct sg_bucket_acc {
  size_t lo, hi, bucket;
} sg_bucket_acc_t;
typedef void (*sg_bucket_emit_fn)(void *arg, size_t off, size_t len);

static inline void sg_bucket_flush(sg_bucket_acc_t *a, sg_bucket_emit_fn emit, void *arg) {
  if (a->hi == a->lo) return;
  emit(arg, a->lo, a->hi - a->lo);
  a->hi = a->lo;
}

/* One range of backward: emits the buckets it completes. */
static inline void sg_bucket_feed(sg_bucket_acc_t *a, size_t off, size_t len,
                                  sg_bucket_emit_fn emit, void *arg) {
  if (a->hi != a->lo && off + len != a->lo) sg_bucket_flush(a, emit, arg);
  if (a->hi == a->lo) a->hi = off + len;
  a->lo = off;
  if (a->hi - a->lo >= a->bucket) sg_bucket_flush(a, emit, arg);
}

/* The layout of model_mlp.c: per layer l, W_l (dims[l+1] x dims[l]) then b_l. */
static inline void sg_bucket_mlp_offsets(int L, const int64_t *dims, size_t *offW, size_t *offb) {
  size_t off = 0;
  for (int l = 0; l < L; l++) {
    offW[l] = off;
    off += (size_t)dims[l + 1] * (size_t)dims[l];
    offb[l] = off;
    off += (size_t)dims[l + 1];
  }
}

/* The host hook's ranges of a dense layer stack (model_mlp.c's layer_grad
 * and dense_dW): per layer from the last, db, then dW's row blocks from
 * the last.  Returns how many (written up to cap). */
static inline size_t sg_bucket_host_ranges(int L, const int64_t *dims, sg_bucket_t *out,
                                           size_t cap) {
  size_t offW[SG_MODEL_MAX_LAYERS], offb[SG_MODEL_MAX_LAYERS], k = 0;
  sg_bucket_mlp_offsets(L, dims, offW, offb);
  for (int l = L - 1; l >= 0; l--) {
    const int in = (int)dims[l], no = (int)dims[l + 1], rows = sg_model_dw_rows(in, no);
    if (k < cap) out[k] = (sg_bucket_t){offb[l], (size_t)no};
    k++;
    for (int o1 = no; o1 > 0; o1 -= rows) {
      const int o0 = o1 - rows > 0 ? o1 - rows : 0;
      if (k < cap) out[k] = (sg_bucket_t){offW[l] + (size_t)o0 * in, (size_t)(o1 - o0) * in};
      k++;
    }
  }
  return k;
}

/* The device backward's ranges (cuda_model.c, in the order it issues
 * them): per layer from the last, db (a column-sum kernel), then the whole
 * dW (one sgemm). */
static inline size_t sg_bucket_dev_ranges(int L, const int64_t *dims, sg_bucket_t *out,
                                          size_t cap) {
  size_t offW[SG_MODEL_MAX_LAYERS], offb[SG_MODEL_MAX_LAYERS], k = 0;
  sg_bucket_mlp_offsets(L, dims, offW, offb);
  for (int l = L - 1; l >= 0; l--) {
    if (k + 2 <= cap) {
      out[k] = (sg_bucket_t){offb[l], (size_t)dims[l + 1]};
      out[k + 1] = (sg_bucket_t){offW[l], (size_t)dims[l + 1] * (size_t)dims[l]};
    }
    k += 2;
  }
  return k;
}

typedef struct sg_bucket_list {
  sg_bucket_t *b;
  size_t n, cap;
} sg_bucket_list_t;

static inline void sg_bucket_list_push(void *arg, size_t off, size_t len) {
  sg_bucket_list_t *l = (sg_bucket_list_t *)arg;
  if (l->n < l->cap) l->b[l->n] = (sg_bucket_t){off, len};
  l->n++;
}

/* The buckets of nr hook ranges grouped by `bucket` floats (>= 1).
 * Returns how many (written up to cap). */
static inline size_t sg_bucket_group(const sg_bucket_t *ranges, size_t nr, size_t bucket,
                                     sg_bucket_t *out, size_t cap) {
  sg_bucket_list_t list = {out, 0, cap};
  sg_bucket_acc_t a = {0, 0, bucket ? bucket : 1};
  for (size_t i = 0; i < nr; i++)
    sg_bucket_feed(&a, ranges[i].off, ranges[i].len, sg_bucket_list_push, &list);
  sg_bucket_flush(&a, sg_bucket_list_push, &list);
  return list.n;
}

/* The host overlap's buckets of a dense layer stack with buckets of
 * `bucket` floats (>= 1).  Returns how many (written up to cap); 0 when
 * out of memory. */
static inline size_t sg_bucket_plan_mlp(int L, const int64_t *dims, size_t bucket,
                                        sg_bucket_t *out, size_t cap) {
  const size_t nr = sg_bucket_host_ranges(L, dims, NULL, 0);
  sg_bucket_t *ranges = (sg_bucket_t *)malloc((nr ? nr : 1) * sizeof *ranges);
  if (!ranges) return 0;
  sg_bucket_host_ranges(L, dims, ranges, nr);
  const size_t nb = sg_bucket_group(ranges, nr, bucket, out, cap);
  free(ranges);
  return nb;
}

/* The CNN's ranges (model_cnn.c's hook and cuda_cnn_step.c's hand-over
 * alike: whole tensors): the dense layers from the last, then conv2 and
 * conv1, each db then dW.  Returns how many (written up to cap). */
static inline size_t sg_bucket_cnn_ranges(const sg_cnn_geom_t *g, sg_bucket_t *out, size_t cap) {
  size_t k = 0;
  for (int l = SG_CNN_NDENSE - 1; l >= 0; l--, k += 2)
    if (k + 2 <= cap) {
      const sg_cnn_dense_t *f = &g->fc[l];
      out[k] = (sg_bucket_t){f->offb, (size_t)f->out};
      out[k + 1] = (sg_bucket_t){f->offW, (size_t)f->out * (size_t)f->in};
    }
  for (int l = SG_CNN_NCONV - 1; l >= 0; l--, k += 2)
    if (k + 2 <= cap) {
      const sg_cnn_conv_t *v = &g->cv[l];
      out[k] = (sg_bucket_t){v->offb, (size_t)v->cout};
      out[k + 1] = (sg_bucket_t){v->offW, (size_t)v->cout * (size_t)v->kkc};
    }
  return k;
}

/* The host overlap's buckets of the CNN (its device ranges are the
 * host's: both hand over whole tensors). */
static inline size_t sg_bucket_plan_cnn(const sg_cnn_geom_t *g, size_t bucket, sg_bucket_t *out,
                                        size_t cap) {
  sg_bucket_t r[2 * (SG_CNN_NDENSE + SG_CNN_NCONV)];
  const size_t nr = sg_bucket_cnn_ranges(g, r, sizeof r / sizeof *r);
  return sg_bucket_group(r, nr, bucket, out, cap);
}

/* Completion on the device: `next` buckets are complete; a range of
 * backward beginning at `off` has been issued (descending offsets), which
 * completes every bucket at or above it.  Returns the new `next`
 * (buckets [next, returned) are now complete). */
static inline size_t sg_bucket_track(const sg_bucket_t *b, size_t nb, size_t next, size_t off) {
  while (next < nb && b[next].off >= off) next++;
  return next;
}

/* Each bucket cut into pieces of at most `slot` floats (ascending inside
 * the bucket), in the buckets' order.  Returns how many (up to cap). */
static inline size_t sg_bucket_pieces(const sg_bucket_t *b, size_t nb, size_t slot,
                                      sg_stage_piece_t *out, size_t cap) {
  size_t k = 0;
  if (slot == 0) slot = 1;
  for (size_t i = 0; i < nb; i++)
    for (size_t o = 0; o < b[i].len; o += slot) {
      const size_t len = b[i].len - o < slot ? b[i].len - o : slot;
      if (k < cap) out[k] = (sg_stage_piece_t){b[i].off + o, len, (long)i};
      k++;
    }
  return k;
}

#endif
