/* test_ps_compress.c - the compression helpers the parameter server shares
 * with the allreduce engine (core/topk_select.h, core/compress_half.h),
 * used the way a ps worker uses them: one selection per shard slice of
 * the gradient, each with its own part of the residual.
 *
 *  - topk with error feedback conserves the gradient: T steps of a fixed
 *    integer gradient, then zero-gradient steps until every residual is
 *    flushed, must deliver exactly T times the gradient (small integers:
 *    exact in float) over two shards of different sizes.  Dropping the
 *    residual (planted below) loses all but the first top-k entries and
 *    fails the same count;
 *  - a selection carries exactly k = ceil(ratio * count) pairs, indices in
 *    the slice, none twice;
 *  - fp16 round trip: every float that is a half comes back bit-equal, and
 *    an arbitrary float within the half's rounding (2^-11 relative).
 */
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "compress_half.h"
#include "topk_select.h"

enum { N = 1000, CUT = 368, T = 20, RATIO_PER_MILLE = 50 };

/* One ps worker's pushes over two shards [0, CUT) and [CUT, N); returns
 * how many entries of the delivered total are wrong.  drop_residual plants
 * the bug the test must catch: the residual is cleared after each step. */
static long run_shards(int drop_residual) {
  static float g[N], resid[N], mag[N], total[N];
  static sg_topk_pair_t pairs[N];
  const size_t off[2] = {0, CUT}, cnt[2] = {CUT, N - CUT};
  memset(resid, 0, sizeof resid);
  memset(total, 0, sizeof total);
  for (int t = 0; t < T + 1000 / RATIO_PER_MILLE + 1; t++) {
    for (int i = 0; i < N; i++) g[i] = t < T ? (float)(i % 7 + 1) : 0.0f;
    for (int k = 0; k < 2; k++) {
      size_t kk = sg_topk_k(RATIO_PER_MILLE / 1000.0, cnt[k]);
      sg_topk_select(g + off[k], resid + off[k], mag, cnt[k], kk, pairs);
      for (size_t j = 0; j < kk; j++) total[off[k] + pairs[j].idx] += pairs[j].val;
    }
    if (drop_residual) memset(resid, 0, sizeof resid);
  }
  long wrong = 0;
  for (int i = 0; i < N; i++) wrong += total[i] != (float)T * (float)(i % 7 + 1);
  return wrong;
}

TEST(topk_with_error_feedback_conserves_the_gradient_per_shard) {
  long wrong = run_shards(0), planted = run_shards(1);
  fprintf(stderr, "  topk per shard: %ld of %d wrong; with the residual dropped %ld\n", wrong, N,
          planted);
  CHECK_EQ_INT(wrong, 0);
  CHECK_MSG(planted > N / 2, "dropping the residual went unnoticed (%ld wrong)", planted);
}

TEST(selection_has_k_distinct_pairs_in_the_slice) {
  float g[97], resid[97] = {0}, mag[97];
  sg_topk_pair_t pairs[97];
  int seen[97] = {0};
  for (int i = 0; i < 97; i++) g[i] = (float)((i * 37) % 11) - 5.0f;
  size_t kk = sg_topk_k(0.1, 97);
  CHECK_EQ_INT(kk, 10);
  CHECK_EQ_INT(sg_topk_k(1e-6, 97), 1);
  CHECK_EQ_INT(sg_topk_k(1.0, 97), 97);
  CHECK_EQ_INT(sg_topk_k(0.5, 0), 0);
  sg_topk_select(g, resid, mag, 97, kk, pairs);
  for (size_t j = 0; j < kk; j++) {
    CHECK(pairs[j].idx < 97);
    CHECK_EQ_INT(seen[pairs[j].idx]++, 0);
    CHECK(fabsf(pairs[j].val) == 5.0f); /* the largest magnitude present */
  }
}

TEST(fp16_round_trip) {
  float src[6] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 0.1f}, back[6];
  uint16_t h[6];
  sg_f32_to_f16(h, src, 6);
  sg_f16_to_f32(back, h, 6);
  for (int i = 0; i < 5; i++) CHECK_MSG(back[i] == src[i], "%g came back %g", src[i], back[i]);
  CHECK(back[5] != src[5]); /* 0.1 is no half: rounded ... */
  CHECK(fabsf(back[5] - src[5]) <= src[5] * 0x1p-11f); /* ... to nearest */
}
