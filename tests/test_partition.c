/* Non-IID shards: every sample in exactly one shard, sizes n/N (+1), the
 * same shards for the same seed, label-skew histograms far from the iid
 * ones (the skew measure fails on an iid split), by-class class sets
 * contiguous and disjoint, the per-epoch order a permutation of the shard. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "shard.h"
#include "test.h"

enum { C = 10, NMAX = 64 };

/* Unbalanced labels: class c has weight c + 5. */
static void labels(int32_t *y, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
    int r = (int)((h >> 32) % 95), c = 0;
    while (r >= c + 5) r -= c + 5, c++;
    y[i] = c;
  }
}

/* Mean over workers of the total-variation distance between a worker's
 * class histogram and the whole set's. */
static double skew(const uint16_t *owner, const int32_t *y, int64_t n, int N) {
  static double h[NMAX][C], all[C], cnt[NMAX];
  memset(h, 0, sizeof h), memset(all, 0, sizeof all), memset(cnt, 0, sizeof cnt);
  for (int64_t i = 0; i < n; i++) h[owner[i]][y[i]]++, all[y[i]]++, cnt[owner[i]]++;
  double s = 0;
  for (int w = 0; w < N; w++) {
    double tv = 0;
    for (int c = 0; c < C; c++) tv += fabs(h[w][c] / cnt[w] - all[c] / (double)n);
    s += tv / 2;
  }
  return s / N;
}

static int owners(sg_partition_t k, double a, uint64_t seed, const int32_t *y, int64_t n, int N,
                  uint16_t *o) {
  return sg_shard_owners(k, a, seed, y, n, C, N, o);
}

TEST(every_sample_once_sizes_exact) {
  enum { n = 6007 };
  static int32_t y[n];
  static uint32_t shard[n], seen[n];
  labels(y, n);
  const sg_partition_t kinds[] = {SG_PART_LABEL_SKEW, SG_PART_BY_CLASS};
  const int Ns[] = {2, 3, 8, 13};
  for (int k = 0; k < 2; k++)
    for (int j = 0; j < 4; j++) {
      int N = Ns[j];
      memset(seen, 0, sizeof seen);
      for (int w = 0; w < N; w++) {
        int64_t len = -1;
        CHECK_OK(sg_shard_build(kinds[k], 0.1, 7, y, n, C, w, N, shard, &len));
        CHECK_EQ_INT(len, n / N + (w < n % N));
        CHECK_EQ_INT(len, sg_shard_size(n, w, N));
        for (int64_t i = 0; i < len; i++) seen[shard[i]]++;
      }
      for (int64_t i = 0; i < n; i++) CHECK_MSG(seen[i] == 1, "sample %lld in %u shards", (long long)i, seen[i]);
    }
}

TEST(same_seed_same_shards) {
  enum { n = 5000, N = 8 };
  static int32_t y[n];
  static uint16_t a[n], b[n], c[n];
  labels(y, n);
  CHECK_OK(owners(SG_PART_LABEL_SKEW, 0.5, 3, y, n, N, a));
  CHECK_OK(owners(SG_PART_LABEL_SKEW, 0.5, 3, y, n, N, b));
  CHECK_OK(owners(SG_PART_LABEL_SKEW, 0.5, 4, y, n, N, c));
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
}

TEST(label_skew_is_far_from_iid) {
  enum { n = 60000, N = 8 };
  static int32_t y[n];
  static uint16_t o[n];
  labels(y, n);
  /* the measure itself: an iid split stays close to the whole set */
  CHECK_OK(owners(SG_PART_IID, 0, 1, y, n, N, o));
  double iid = skew(o, y, n, N);
  CHECK_MSG(iid < 0.05, "iid skew %.3f", iid);
  CHECK_OK(owners(SG_PART_LABEL_SKEW, 0.1, 1, y, n, N, o));
  double s01 = skew(o, y, n, N);
  CHECK_MSG(s01 > 0.5, "label-skew alpha 0.1: skew %.3f", s01);
  CHECK_OK(owners(SG_PART_LABEL_SKEW, 1000, 1, y, n, N, o));
  double big = skew(o, y, n, N);
  CHECK_MSG(big < 0.1 && big < s01, "alpha 1000: skew %.3f", big);
}

/* The skew check catches an iid split planted as label-skew. */
TEST(skew_check_fails_on_planted_iid) {
  enum { n = 60000, N = 8 };
  static int32_t y[n];
  static uint16_t o[n];
  labels(y, n);
  CHECK_OK(owners(SG_PART_IID, 0.1, 1, y, n, N, o));
  CHECK(!(skew(o, y, n, N) > 0.5));
}

/* Per worker: lowest and highest class held, and the number held. */
static void class_range(const uint16_t *o, const int32_t *y, int64_t n, int w, int *lo, int *hi,
                        int *k) {
  int has[C] = {0};
  for (int64_t i = 0; i < n; i++)
    if (o[i] == w) has[y[i]] = 1;
  *lo = C, *hi = -1, *k = 0;
  for (int c = 0; c < C; c++)
    if (has[c]) *lo = *lo < c ? *lo : c, *hi = c, ++*k;
}

TEST(by_class_contiguous_disjoint) {
  enum { n = 6000 };
  static int32_t y[n];
  static uint16_t o[n];
  for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(i % C); /* balanced */
  const int Ns[] = {2, 5, 10, 20}, per[] = {5, 2, 1, 1};
  for (int j = 0; j < 4; j++) {
    int N = Ns[j], prev_hi = -1, lo, hi, k;
    CHECK_OK(owners(SG_PART_BY_CLASS, 0, 9, y, n, N, o));
    for (int w = 0; w < N; w++) {
      class_range(o, y, n, w, &lo, &hi, &k);
      CHECK_EQ_INT(k, per[j]);
      CHECK_EQ_INT(hi - lo + 1, k); /* contiguous */
      if (N <= C) CHECK_MSG(lo > prev_hi, "N %d worker %d shares class %d", N, w, lo);
      else CHECK_EQ_INT(lo, w * C / N); /* N > classes: class c on N/C workers */
      prev_hi = hi;
    }
  }
  /* N = 4 on 10 classes: cuts inside classes 2 and 7, ranges still ordered */
  int prev_hi = -1, lo, hi, k;
  CHECK_OK(owners(SG_PART_BY_CLASS, 0, 9, y, n, 4, o));
  for (int w = 0; w < 4; w++) {
    class_range(o, y, n, w, &lo, &hi, &k);
    CHECK(lo >= prev_hi && hi - lo + 1 == k);
    prev_hi = hi;
  }
}

TEST(epoch_order_permutes_the_shard) {
  enum { n = 3001, N = 3 };
  static int32_t y[n];
  static uint32_t shard[n], e0[n], e0b[n], e1[n], seen[n];
  labels(y, n);
  int64_t len;
  CHECK_OK(sg_shard_build(SG_PART_LABEL_SKEW, 0.3, 5, y, n, C, 1, N, shard, &len));
  sg_shard_order(5, 0, 1, shard, len, e0);
  sg_shard_order(5, 0, 1, shard, len, e0b);
  sg_shard_order(5, 1, 1, shard, len, e1);
  CHECK(memcmp(e0, e0b, (size_t)len * 4) == 0);
  CHECK(memcmp(e0, e1, (size_t)len * 4) != 0);
  memset(seen, 0, sizeof seen);
  for (int64_t i = 0; i < len; i++) seen[e1[i]]++;
  for (int64_t i = 0; i < len; i++) CHECK_EQ_INT(seen[shard[i]], 1);
}

TEST(bad_input_rejected) {
  int32_t y[4] = {0, 1, 2, 10};
  uint16_t o[4];
  sg_partition_t k;
  CHECK(sg_partition_parse("dirichlet", &k) == SG_ECONFIG);
  CHECK_OK(sg_partition_parse("by-class", &k));
  CHECK_EQ_INT(k, SG_PART_BY_CLASS);
  CHECK(sg_shard_owners(SG_PART_LABEL_SKEW, 0, 1, y, 3, C, 2, o) == SG_ECONFIG);
  CHECK(sg_shard_owners(SG_PART_LABEL_SKEW, -1, 1, y, 3, C, 2, o) == SG_ECONFIG);
  CHECK(sg_shard_owners(SG_PART_BY_CLASS, 0, 1, y, 4, C, 2, o) == SG_EINVAL); /* label 10 */
}

/* ---- the draw's exact output, pinned ------------------------------------
 * FNV-1a of the owner array for label-skew draws over few and many classes
 * (labels spread over every class, or over a handful of a large range),
 * small and large alpha, N above and below the class count.  The values
 * were taken from the one-class-at-a-time draw; any faster draw must give
 * every owner the same, so these stay equal by construction. */
static uint64_t fnv(const uint16_t *o, int64_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t i = 0; i < n; i++)
    for (int b = 0; b < 2; b++) h = (h ^ ((o[i] >> (8 * b)) & 0xff)) * 0x100000001b3ULL;
  return h;
}

/* Labels of sample i: a hash over `used` classes, spaced `stride` apart. */
static void spread(int32_t *y, int64_t n, int used, int stride) {
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = ((uint64_t)i + 1) * 0x9e3779b97f4a7c15ULL;
    y[i] = (int32_t)(((h >> 29) % (uint64_t)used) * (uint64_t)stride);
  }
}

typedef struct pin {
  int64_t n;
  int classes, used, stride, N;
  double alpha;
  uint64_t seed, hash;
} pin_t;

static const pin_t PINS[] = {
    {60000, 10, 10, 1, 8, 0.1, 1, 0xcdd993bbde7819fdULL},
    {60000, 10, 10, 1, 8, 1000, 1, 0x028b3fcd2d48663dULL},
    {6007, 3, 3, 1, 13, 0.5, 9, 0xa2634c9c5159a965ULL},
    {20000, 1000, 1000, 1, 5, 0.1, 2, 0x8454eabf0bc8c01dULL},
    {20000, 1000, 1000, 1, 64, 1.0, 3, 0xe779b6b115a5ff35ULL},
    {3000, 100000, 3000, 33, 4, 0.3, 4, 0xc918c302a78f604dULL},
    {3000, 100000, 7, 9999, 6, 0.05, 5, 0x9b5d07e6b7e1846dULL},
    {4000, 100000, 100000, 1, 3, 10, 6, 0xe904e8c66e14840eULL},
};

TEST(label_skew_draw_pinned) {
  for (size_t k = 0; k < sizeof PINS / sizeof PINS[0]; k++) {
    const pin_t *t = &PINS[k];
    int32_t *y = malloc((size_t)t->n * sizeof *y);
    uint16_t *o = malloc((size_t)t->n * sizeof *o);
    CHECK(y && o);
    spread(y, t->n, t->used, t->stride);
    int rc = sg_shard_owners(SG_PART_LABEL_SKEW, t->alpha, t->seed, y, t->n, t->classes, t->N, o);
    uint64_t h = fnv(o, t->n);
    free(y), free(o);
    CHECK_OK(rc);
    if (getenv("SG_PIN_PRINT")) printf("pin %zu: 0x%016llxULL\n", k, (unsigned long long)h);
    else CHECK_MSG(h == t->hash, "pin %zu (n %lld, %d classes, N %d, alpha %g): 0x%016llx",
                   k, (long long)t->n, t->classes, t->N, t->alpha, (unsigned long long)h);
  }
}
