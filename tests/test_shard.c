/* Sharding: every sample once per epoch across N workers, the dropped tail
 * the same for all, workers' step-t batches = local's step-t batch, and
 * gathering dense and CSR rows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "err.h"
#include "shard.h"
#include "test.h"

TEST(permutation_is_seeded_permutation) {
  enum { n = 1001 };
  uint32_t a[n], b[n], c[n], e[n];
  sg_shard_permutation(5, 0, a, n);
  sg_shard_permutation(5, 0, b, n);
  sg_shard_permutation(5, 1, c, n);
  sg_shard_permutation(6, 0, e, n);
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
  CHECK(memcmp(a, e, sizeof a) != 0);
  char seen[n] = {0};
  int fixed = 0;
  for (int i = 0; i < n; i++) {
    CHECK(a[i] < n);
    CHECK(!seen[a[i]]);
    seen[a[i]] = 1;
    fixed += a[i] == (uint32_t)i;
  }
  CHECK(fixed < 20); /* a shuffle, not the identity */
}

/* For (n, N, b): every position < spe*N*b is taken by exactly one
 * (worker, step, slot); the samples never seen are exactly the perm's tail. */
static int coverage(int64_t n, int N, int b, int64_t epoch) {
  uint32_t *perm = malloc(n * sizeof *perm), *idx = malloc(b * sizeof *idx);
  int *count = calloc(n, sizeof *count);
  int64_t spe = sg_shard_steps_per_epoch(n, N, b);
  int ok = spe == n / (N * b);
  sg_shard_permutation(11, epoch, perm, n);
  for (int w = 0; w < N; w++)
    for (int64_t t = 0; t < spe; t++) {
      sg_shard_batch(perm, w, N, b, t, idx);
      for (int i = 0; i < b; i++) count[idx[i]]++;
    }
  for (int64_t p = 0; p < n; p++) {
    int want = p < spe * N * b ? 1 : 0; /* dropped tail: positions >= spe*N*b */
    if (count[perm[p]] != want) ok = 0;
  }
  free(perm);
  free(idx);
  free(count);
  return ok;
}

TEST(every_sample_once_per_epoch) {
  const int64_t ns[] = {60, 61, 97, 1000};
  const int Ns[] = {1, 2, 3, 4, 7, 8};
  const int bs[] = {1, 3, 8};
  for (size_t a = 0; a < 4; a++)
    for (size_t k = 0; k < 6; k++)
      for (size_t c = 0; c < 3; c++)
        if (ns[a] >= Ns[k] * bs[c])
          CHECK_MSG(coverage(ns[a], Ns[k], bs[c], (int64_t)a), "n=%lld N=%d b=%d",
                    (long long)ns[a], Ns[k], bs[c]);
  CHECK_EQ_INT(sg_shard_steps_per_epoch(97, 4, 8), 3); /* 97 = 3*32 + 1 dropped */
  CHECK_EQ_INT(sg_shard_steps_per_epoch(10, 4, 8), 0);
}

/* A planted bug (worker stride b instead of N) must break coverage. */
TEST(coverage_check_catches_wrong_stride) {
  enum { n = 48, N = 3, b = 4 };
  uint32_t perm[n];
  int count[n] = {0};
  sg_shard_permutation(1, 0, perm, n);
  for (int w = 0; w < N; w++)
    for (int t = 0; t < n / (N * b); t++)
      for (int i = 0; i < b; i++) count[perm[(N * b * t + w + b * i) % n]]++; /* wrong */
  int bad = 0;
  for (int i = 0; i < n; i++) bad += count[i] != 1;
  CHECK(bad > 0);
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return (x > y) - (x < y);
}

TEST(union_of_workers_is_local_batch) {
  enum { n = 500 };
  uint32_t perm[n];
  sg_shard_permutation(3, 2, perm, n);
  const int Ns[] = {2, 3, 5, 8};
  for (int k = 0; k < 4; k++) {
    int N = Ns[k], b = 6;
    int64_t spe = sg_shard_steps_per_epoch(n, N, b);
    CHECK_EQ_INT(spe, sg_shard_steps_per_epoch(n, 1, N * b));
    uint32_t local[64], uni[64];
    for (int64_t t = 0; t < spe; t++) {
      sg_shard_batch(perm, 0, 1, N * b, t, local);
      for (int w = 0; w < N; w++) sg_shard_batch(perm, w, N, b, t, uni + w * b);
      qsort(local, (size_t)(N * b), sizeof local[0], cmp_u32);
      qsort(uni, (size_t)(N * b), sizeof uni[0], cmp_u32);
      CHECK_MSG(memcmp(local, uni, (size_t)(N * b) * sizeof local[0]) == 0, "N=%d t=%lld", N,
                (long long)t);
    }
  }
}

TEST(gather_dense_and_csr) {
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_synth_sparse(&ds, 1, SG_SPLIT_TRAIN, 50, 1000, 3, 7));
  /* make rows of different lengths: drop 0..4 trailing nonzeros of odd rows */
  int64_t old[51], k = 0;
  memcpy(old, ds->rowptr, sizeof old);
  for (int i = 0; i < 50; i++) {
    int64_t len = old[i + 1] - old[i], keep = (i % 2) ? len - i % 5 : len;
    memmove(ds->col + k, ds->col + old[i], (size_t)keep * sizeof *ds->col);
    memmove(ds->val + k, ds->val + old[i], (size_t)keep * sizeof *ds->val);
    ds->rowptr[i] = k;
    k += keep;
  }
  ds->rowptr[50] = k;
  CHECK(k < 50 * 7);
  sg_batch_buf_t *bb = NULL;
  CHECK_OK(sg_batch_buf_new(&bb, ds, 4));
  uint32_t idx[4] = {9, 0, 49, 9};
  sg_batch_t b;
  sg_batch_gather(bb, ds, idx, 4, &b);
  CHECK_EQ_INT(b.n, 4);
  CHECK(b.x == NULL && b.rowptr != NULL);
  for (int i = 0; i < 4; i++) {
    int64_t s = ds->rowptr[idx[i]], e = ds->rowptr[idx[i] + 1];
    CHECK_EQ_INT(b.rowptr[i + 1] - b.rowptr[i], e - s);
    CHECK(memcmp(b.col + b.rowptr[i], ds->col + s, (size_t)(e - s) * 4) == 0);
    CHECK(memcmp(b.val + b.rowptr[i], ds->val + s, (size_t)(e - s) * 4) == 0);
    CHECK_EQ_INT(b.y[i], ds->y[idx[i]]);
  }
  sg_batch_buf_destroy(&bb);
  CHECK_OK(sg_dataset_densify(ds));
  CHECK_OK(sg_batch_buf_new(&bb, ds, 4));
  sg_batch_gather(bb, ds, idx, 4, &b);
  CHECK(b.rowptr == NULL);
  for (int i = 0; i < 4; i++)
    CHECK(memcmp(b.x + i * 1000, ds->x + idx[i] * 1000, 1000 * sizeof(float)) == 0);
  sg_batch_t v;
  sg_batch_view(ds, 10, 5, &v);
  CHECK(v.x == ds->x + 10 * 1000 && v.y == ds->y + 10 && v.n == 5);
  sg_batch_buf_destroy(&bb);
  sg_dataset_destroy(&ds);
}
