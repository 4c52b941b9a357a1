/* test_mapreduce.c - the mapreduce engine's broadcast and reduce, with the
 * driver and N executors as threads over the inproc ZeroMQ transport.
 *
 * Inputs are small integers in floats (executor i contributes
 * (i+1) * (k % 13 + 1) at index k), so every summation order gives the
 * same sum and the results are compared exactly; one case plants the
 * "one executor counted twice" bug and checks that the comparison sees
 * it.  Sizes {0, 1, N-1, N+1, 1000, 300000} for N = 1..9, flat and tree,
 * depth 1..3.
 */
#include "test.h"


#include "err.h"
#include "mapreduce.h"
#include "thread_ranks.h"
#include "transport.h"

typedef struct rank_arg {
  const mr_config_t *cfg;
  size_t n;
  long long bcast_bad, agg_bad; /* elements that differ from the expected */
} rank_arg_t;

static float contribution(int executor_index, size_t k) {
  return (float)((executor_index + 1) * (int)(k % 13 + 1));
}

static int mr_rank(sg_comm_t *c, void *p) {
  rank_arg_t *a = p;
  float *buf = NULL, *tmp = NULL;
  int rc;
  size_t n = a->n;
  buf = malloc((n + 1) * sizeof *buf);
  tmp = malloc((n + 1) * sizeof *tmp);
  if (!buf || !tmp) {
    rc = SG_ENOMEM;
    goto fail;
  }
  /* broadcast: the driver's values reach everyone */
  for (size_t k = 0; k < n; k++) buf[k] = c->rank == 0 ? (float)(k % 1000) + 0.5f : -1.0f;
  SG_TRY(mr_broadcast(c, a->cfg, buf, n));
  for (size_t k = 0; k < n; k++) a->bcast_bad += buf[k] != (float)(k % 1000) + 0.5f;
  /* reduce: the driver gets the exact sum */
  if (c->rank > 0)
    for (size_t k = 0; k < n; k++) buf[k] = contribution(c->rank - 1, k);
  SG_TRY(mr_aggregate(c, a->cfg, buf, tmp, n));
  if (c->rank == 0) {
    int N = c->size - 1;
    for (size_t k = 0; k < n; k++)
      a->agg_bad += buf[k] != (float)((k % 13 + 1) * (size_t)(N * (N + 1) / 2));
  }
  rc = SG_OK;
fail:
  free(buf);
  free(tmp);
  return rc;
}

/* Run one broadcast + reduce with N executors; 0 when every rank returned
 * 0, and the mismatch counts summed over ranks. */
static int run_case(const mr_config_t *cfg, size_t n, long long *bcast_bad,
                    long long *agg_bad) {
  int size = cfg->executors + 1;
  rank_arg_t *args = calloc((size_t)size, sizeof *args);
  if (!args) return SG_ENOMEM;
  for (int r = 0; r < size; r++) args[r] = (rank_arg_t){.cfg = cfg, .n = n};
  tr_group_t g = {.n = size, .fn = mr_rank, .args = args, .stride = sizeof *args,
                  .what = "mapreduce"};
  int rc = tr_run(&g);
  *bcast_bad = *agg_bad = 0;
  for (int r = 0; r < size; r++) {
    *bcast_bad += args[r].bcast_bad;
    *agg_bad += args[r].agg_bad;
  }
  free(args);
  return rc;
}

TEST(fanin_reaches_every_executor_within_depth) {
  for (int N = 1; N <= 64; N++)
    for (int d = 2; d <= 4; d++) {
      int f = mr_fanin(N, d);
      long long p = 1;
      for (int k = 0; k < d; k++) p *= f;
      CHECK_MSG(f >= 2 && p >= N, "N=%d d=%d f=%d", N, d, f);
      long long q = 1;
      for (int k = 0; k < d; k++) q *= f - 1;
      CHECK_MSG(f == 2 || q < N, "N=%d d=%d: fan-in %d is not the smallest", N, d, f);
    }
  CHECK_EQ_INT(mr_fanin(8, 2), 3);
  CHECK_EQ_INT(mr_fanin(16, 2), 4);
  CHECK_EQ_INT(mr_fanin(16, 4), 2);
}

/* Tasks are consecutive slices covering [0, B) exactly once, sizes
 * differing by at most 1, larger ones first (mapreduce.h). */
TEST(task_slices_cover_the_batch) {
  int64_t first, count;
  mr_config_t ex = {.executors = 3, .batch = 64, .partitions = 5};
  const int64_t want_first[] = {0, 39, 78, 116, 154}, want_count[] = {39, 39, 38, 38, 38};
  for (int p = 0; p < 5; p++) {
    mr_task_slice(&ex, p, &first, &count);
    CHECK_EQ_INT(first, want_first[p]);
    CHECK_EQ_INT(count, want_count[p]);
  }
  for (int N = 1; N <= 8; N++)
    for (int b = 1; b <= 20; b += 3)
      for (int P = 1; P <= N * b; P++) {
        mr_config_t cfg = {.executors = N, .batch = b, .partitions = P};
        int64_t next = 0, lo = N * b, hi = 0;
        for (int p = 0; p < P; p++) {
          mr_task_slice(&cfg, p, &first, &count);
          CHECK_MSG(first == next && count >= 1, "N=%d b=%d P=%d task %d: [%lld, +%lld) after %lld",
                    N, b, P, p, (long long)first, (long long)count, (long long)next);
          next = first + count;
          if (count < lo) lo = count;
          if (count > hi) hi = count;
        }
        CHECK_MSG(next == N * b && hi - lo <= 1, "N=%d b=%d P=%d: covers %lld of %d, sizes %lld..%lld",
                  N, b, P, (long long)next, N * b, (long long)lo, (long long)hi);
      }
}

TEST(binomial_tree_parents) {
  mr_config_t cfg = {.tree_broadcast = 1};
  /* N = 6: 0->4; 0->2, 4->6; 0->1, 2->3, 4->5 (mapreduce.h) */
  int want[7] = {-1, 0, 0, 2, 0, 4, 4};
  for (int r = 0; r < 7; r++) CHECK_EQ_INT(mr_bcast_parent(&cfg, r, 7), want[r]);
  CHECK_EQ_INT(mr_bcast_level(&cfg, 5), 2);
  CHECK_EQ_INT(mr_bcast_level(&cfg, 7), 3);
  cfg.tree_broadcast = 0;
  CHECK_EQ_INT(mr_bcast_parent(&cfg, 5, 7), 0);
}

TEST(broadcast_and_reduce_exact) {
  for (int N = 1; N <= 9; N++) {
    size_t sizes[] = {0, 1, (size_t)N - 1, (size_t)N + 1, 1000, 300000};
    for (int tree = 0; tree <= 1; tree++)
      for (int depth = 1; depth <= 3; depth++)
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
          if (sizes[si] == 300000 && (N % 4 != 1 || depth == 3)) continue; /* keep it short */
          mr_config_t cfg = {.tree_broadcast = tree, .depth = depth, .executors = N, .partitions = N};
          long long bb, ab;
          int rc = run_case(&cfg, sizes[si], &bb, &ab);
          CHECK_MSG(rc == 0, "N=%d tree=%d depth=%d n=%zu: rc %d", N, tree, depth, sizes[si], rc);
          CHECK_MSG(bb == 0 && ab == 0, "N=%d tree=%d depth=%d n=%zu: %lld broadcast, %lld reduce elements wrong",
                    N, tree, depth, sizes[si], bb, ab);
        }
  }
}

TEST(planted_double_count_is_caught) {
  /* flat: executor rank 2 counted twice; tree depth 2 with N = 4 (f = 2):
   * ranks 1 and 3 reach the driver, plant on 3. */
  mr_config_t flat = {.depth = 1, .executors = 3, .partitions = 3, .plant_double_rank = 2};
  mr_config_t tree = {.tree_broadcast = 1, .depth = 2, .executors = 4, .partitions = 4,
                      .plant_double_rank = 3};
  long long bb, ab;
  CHECK_OK(run_case(&flat, 100, &bb, &ab));
  CHECK_MSG(ab == 100, "flat: the planted bug changed %lld of 100 sums", ab);
  CHECK_OK(run_case(&tree, 100, &bb, &ab));
  CHECK_MSG(ab == 100, "tree: the planted bug changed %lld of 100 sums", ab);
}
