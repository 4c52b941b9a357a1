/* sg_workload_grad_slice: gradients over slices [first, first+count) of
 * a step's batch, the unit the mapreduce engine's tasks are made of.
 *
 * The check: for a partition of [0, B) into slices, sum_k (count_k/B) *
 * g_k equals the full-batch gradient.  Only summation order differs, so
 * the relative L2 distance is ~1e-7; the bound is 1e-5.  Weighting the
 * same slices equally (1/K instead of count/B), or leaving a slice out,
 * must fail that bound, and the tests assert that it does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "opts.h"
#include "settings.h"
#include "run_util.h"
#include "test.h"
#include "workload.h"

#define RTOL 1e-5
#define B 48

enum { W_COUNT, W_EQUAL, W_DROP_LAST }; /* correct, and two planted bugs */

/* Relative L2 distance between the full-batch gradient of `step` and the
 * weighted sum of the slice gradients of sizes[0..k-1] (consecutive,
 * covering [0, B)); *loss_err gets |weighted loss - full loss|.  Returns
 * -1 on an error. */
static double slice_distance(sg_workload_t *w, const float *params, int64_t step,
                             const int *sizes, int k, int weighting, double *loss_err) {
  size_t n = sg_workload_nparams(w);
  float *full = malloc(n * sizeof *full), *g = malloc(n * sizeof *g);
  double *sum = calloc(n, sizeof *sum), d = -1, full_loss, loss_sum = 0;
  if (!full || !g || !sum) goto out;
  if (sg_workload_grad(w, params, full, step, &full_loss) < 0) goto out;
  int64_t first = 0;
  for (int s = 0; s < k; s++) {
    double l, wt = weighting == W_EQUAL ? 1.0 / k : (double)sizes[s] / B;
    if (sg_workload_grad_slice(w, params, g, step, first, sizes[s], &l) < 0) goto out;
    first += sizes[s];
    if (weighting == W_DROP_LAST && s == k - 1) continue;
    for (size_t i = 0; i < n; i++) sum[i] += wt * g[i];
    loss_sum += wt * l;
  }
  if (first != B) goto out; /* the sizes must cover the batch */
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += (sum[i] - full[i]) * (sum[i] - full[i]);
    den += (double)full[i] * full[i];
  }
  d = den > 0 ? sqrt(num / den) : -1;
  *loss_err = fabs(loss_sum - full_loss);
out:
  free(full);
  free(g);
  free(sum);
  return d;
}

/* Partitions of [0, 48): whole, a single sample and the rest, nearly
 * equal (5 slices of 10,10,10,9,9 -- what mapreduce uses for P = 5),
 * uneven, and 48 singletons. */
static const int whole[] = {B}, one_rest[] = {1, 47}, five[] = {10, 10, 10, 9, 9},
                 uneven[] = {3, 20, 1, 7, 17};
static int singles[B];

static void check_partitions(const char *kv) {
  sg_opts_t *o = ru_opts_kv(kv);
  sg_workload_t *w = NULL;
  float *p = NULL;
  CHECK_OK(sg_workload_new(&w, o, 0, 1, SG_WL_TRAIN));
  CHECK_EQ_INT(sg_workload_batch(w), B);
  p = malloc(sg_workload_nparams(w) * sizeof *p);
  CHECK(p);
  CHECK_OK(sg_workload_init_params(w, p));
  for (int i = 0; i < B; i++) singles[i] = 1;
  struct {
    const int *s;
    int k;
  } parts[] = {{whole, 1}, {one_rest, 2}, {five, 5}, {uneven, 5}, {singles, B}};
  int64_t spe = sg_workload_steps_per_epoch(w);
  int64_t steps[] = {0, 3, spe - 1, spe}; /* and across an epoch boundary */
  for (size_t t = 0; t < sizeof steps / sizeof *steps; t++)
    for (size_t q = 0; q < sizeof parts / sizeof *parts; q++) {
      double le, d = slice_distance(w, p, steps[t], parts[q].s, parts[q].k, W_COUNT, &le);
      CHECK_MSG(d >= 0 && d <= RTOL, "step %lld, %d slices: distance %.3g > %g (%s)",
                (long long)steps[t], parts[q].k, d, RTOL, sg_err_msg());
      CHECK_MSG(le <= 1e-5, "step %lld, %d slices: loss off by %.3g", (long long)steps[t],
                parts[q].k, le);
    }
  /* the planted bugs fail the same check */
  double le, d = slice_distance(w, p, 3, five, 5, W_COUNT, &le);
  fprintf(stderr, "  distance: count/B weights %.3g", d);
  d = slice_distance(w, p, 3, five, 5, W_EQUAL, &le);
  fprintf(stderr, ", equal weights on 10,10,10,9,9 %.3g", d);
  CHECK_MSG(d > RTOL, "equal weights on slices 10,10,10,9,9 went unnoticed: %.3g", d);
  d = slice_distance(w, p, 3, uneven, 5, W_EQUAL, &le);
  fprintf(stderr, ", on uneven slices %.3g", d);
  CHECK_MSG(d > RTOL, "equal weights on uneven slices went unnoticed: %.3g", d);
  d = slice_distance(w, p, 3, five, 5, W_DROP_LAST, &le);
  fprintf(stderr, ", a slice left out %.3g\n", d);
  CHECK_MSG(d > RTOL, "a missing slice went unnoticed: %.3g", d);
  free(p);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
}

TEST(fashion_mnist_mlp_slices_sum_to_the_batch) {
  check_partitions("dataset=fashion-mnist train_samples=1000 model=mlp hidden=16 batch=48 seed=3");
}

TEST(sparse_softmax_slices_sum_to_the_batch) {
  /* CSR gather from an offset into the batch's index list */
  check_partitions("dataset=synthetic-sparse features=5000 nnz=20 train_samples=500 "
                   "test_samples=10 model=softmax batch=48 seed=3");
}

/* The whole slice is sg_workload_grad, bit for bit. */
TEST(whole_slice_is_grad_bitwise) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist train_samples=1000 model=mlp hidden=16 batch=48 seed=3");
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 0, 1, SG_WL_TRAIN));
  size_t n = sg_workload_nparams(w);
  float *p = malloc(n * sizeof *p), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double la, lb;
  CHECK(p && a && b);
  CHECK_OK(sg_workload_init_params(w, p));
  CHECK_OK(sg_workload_grad(w, p, a, 7, &la));
  CHECK_OK(sg_workload_grad_slice(w, p, b, 7, 0, B, &lb));
  CHECK(memcmp(a, b, n * sizeof *a) == 0);
  CHECK(la == lb);
  /* a proper slice is a different gradient */
  CHECK_OK(sg_workload_grad_slice(w, p, b, 7, 0, B - 1, &lb));
  CHECK(memcmp(a, b, n * sizeof *a) != 0);
  free(p);
  free(a);
  free(b);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
}

TEST(slices_outside_the_batch_are_errors) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist train_samples=1000 model=softmax batch=48 seed=3");
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 0, 1, SG_WL_TRAIN));
  size_t n = sg_workload_nparams(w);
  float *p = calloc(n, sizeof *p), *g = malloc(n * sizeof *g);
  double l;
  CHECK(p && g);
  CHECK_EQ_INT(sg_workload_grad_slice(w, p, g, 0, -1, 2, &l), SG_EINVAL);
  CHECK_EQ_INT(sg_workload_grad_slice(w, p, g, 0, 0, 0, &l), SG_EINVAL);
  CHECK_EQ_INT(sg_workload_grad_slice(w, p, g, 0, 40, 9, &l), SG_EINVAL);
  CHECK_STR_CONTAINS(sg_err_msg(), "[40, 49)");
  CHECK_OK(sg_workload_grad_slice(w, p, g, 0, 47, 1, &l)); /* the last sample */
  free(p);
  free(g);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
}
