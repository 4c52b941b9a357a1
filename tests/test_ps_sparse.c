/* test_ps_sparse.c - the workload's sparse step, which the ps engine's
 * sparse mode is built on (sg_workload_sparse_coords/_grad_sparse).
 *
 * On a small synthetic-sparse set (softmax, 5000 features, 5 classes, 20
 * nonzeros per row) and for several steps across an epoch boundary:
 *   - the coordinates are strictly increasing, inside the model, and
 *     are exactly {c*d + f : f a feature of the batch} + the biases;
 *   - gval equals the dense gradient at idx bit for bit, the dense
 *     gradient is exactly zero everywhere else, and so is the loss;
 *   - params are read at idx only: NaN everywhere else changes nothing.
 * The comparison is one function (diff_sparse_dense); planted mistakes (a
 * value off by one ulp, a coordinate left out) must make it report.
 */
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "settings.h"
#include "workload.h"

#define D 5000
#define C 5

static sg_workload_t *make_wl(const char *model) {
  sg_opts_t *o = sg_opts_new();
  sg_workload_t *w = NULL;
  if (!o) return NULL;
  sg_settings_defaults(sg_settings, o);
  sg_opts_set(o, "dataset", "synthetic-sparse");
  sg_opts_set(o, "model", model);
  sg_opts_set(o, "hidden", "8");
  sg_opts_setf(o, "features", "%d", D);
  sg_opts_setf(o, "classes", "%d", C);
  sg_opts_set(o, "nnz", "20");
  sg_opts_set(o, "batch", "8");
  sg_opts_set(o, "train_samples", "100");
  sg_opts_set(o, "test_samples", "10");
  if (sg_workload_new(&w, o, 1, 2, SG_WL_TRAIN) < 0) w = NULL;
  sg_opts_destroy(&o);
  return w;
}

/* Number of disagreements between a sparse gradient (idx, gval, m) and
 * the dense one (n): a value that differs in any bit at idx, or a
 * nonzero dense entry that idx leaves out. */
static size_t diff_sparse_dense(const float *dense, size_t n, const uint32_t *idx,
                                const float *gval, size_t m) {
  size_t bad = 0, j = 0;
  for (size_t i = 0; i < n; i++) {
    if (j < m && idx[j] == i) {
      bad += memcmp(&dense[i], &gval[j], sizeof(float)) != 0;
      j++;
    } else {
      bad += dense[i] != 0.0f;
    }
  }
  return bad + (m - j); /* indices past n */
}

TEST(sparse_grad_equals_dense_grad) {
  sg_workload_t *w = make_wl("softmax");
  CHECK_MSG(w, "workload: %s", sg_err_msg());
  const size_t n = sg_workload_nparams(w);
  CHECK_EQ_INT(n, (size_t)C * D + C);
  float *params = malloc(n * sizeof *params), *dense = malloc(n * sizeof *dense);
  float *stale = malloc(n * sizeof *stale);
  uint32_t *idx = malloc(n * sizeof *idx);
  float *gval = malloc(n * sizeof *gval);
  CHECK(params && dense && stale && idx && gval);
  for (size_t i = 0; i < n; i++) params[i] = (float)((int)(i * 7919 % 201) - 100) * 1e-3f;
  int64_t spe = sg_workload_steps_per_epoch(w);
  for (int64_t step = 0; step < spe + 2; step++) {
    size_t m = 0;
    /* too small a buffer: SG_ERANGE, and the size needed */
    CHECK_EQ_INT(sg_workload_sparse_coords(w, step, idx, 3, &m), SG_ERANGE);
    CHECK(m > 3);
    size_t m2 = 0;
    CHECK_OK(sg_workload_sparse_coords(w, step, idx, n, &m2));
    CHECK_EQ_INT(m2, m);
    for (size_t j = 1; j < m; j++) CHECK(idx[j] > idx[j - 1]);
    CHECK(idx[m - 1] < n);
    for (int c = 0; c < C; c++) CHECK_EQ_INT(idx[m - C + c], (uint32_t)(C * D + c));
    /* class-major: each class lists the same features */
    size_t nf = (m - C) / C;
    CHECK_EQ_INT(nf * C + C, m);
    for (size_t p = 0; p < nf; p++)
      for (int c = 1; c < C; c++) CHECK_EQ_INT(idx[c * nf + p], idx[p] + (uint32_t)(c * D));
    CHECK(nf >= 20 && nf <= 8 * 20);

    double ld, ls;
    CHECK_OK(sg_workload_grad(w, params, dense, step, &ld));
    /* params read at idx only: everything else NaN */
    for (size_t i = 0; i < n; i++) stale[i] = NAN;
    for (size_t j = 0; j < m; j++) stale[idx[j]] = params[idx[j]];
    CHECK_OK(sg_workload_grad_sparse(w, stale, step, idx, m, gval, &ls));
    CHECK_MSG(memcmp(&ld, &ls, sizeof ld) == 0, "step %lld: loss %.17g vs %.17g",
              (long long)step, ld, ls);
    size_t bad = diff_sparse_dense(dense, n, idx, gval, m);
    CHECK_MSG(bad == 0, "step %lld: %zu entries differ", (long long)step, bad);
    size_t nz = 0;
    for (size_t j = 0; j < m; j++) nz += gval[j] != 0.0f;
    CHECK_MSG(nz > m / 2, "step %lld: only %zu of %zu values nonzero", (long long)step, nz, m);

    if (step == 0) {
      /* planted: one value one ulp off */
      float keep = gval[m / 2];
      gval[m / 2] = nextafterf(gval[m / 2], INFINITY);
      CHECK_EQ_INT(diff_sparse_dense(dense, n, idx, gval, m), 1);
      gval[m / 2] = keep;
      /* planted: a coordinate (with a nonzero gradient) left out */
      size_t drop = 0;
      while (gval[drop] == 0.0f) drop++;
      memmove(idx + drop, idx + drop + 1, (m - drop - 1) * sizeof *idx);
      memmove(gval + drop, gval + drop + 1, (m - drop - 1) * sizeof *gval);
      CHECK_EQ_INT(diff_sparse_dense(dense, n, idx, gval, m - 1), 1);
      /* ... which grad_sparse refuses, naming what is missing */
      CHECK_EQ_INT(sg_workload_grad_sparse(w, params, step, idx, m - 1, gval, &ls), SG_EINVAL);
      CHECK_STR_CONTAINS(sg_err_msg(), "coordinates");
      /* unsorted idx is refused */
      CHECK_OK(sg_workload_sparse_coords(w, step, idx, n, &m));
      uint32_t t = idx[0];
      idx[0] = idx[1];
      idx[1] = t;
      CHECK_EQ_INT(sg_workload_grad_sparse(w, params, step, idx, m, gval, &ls), SG_EINVAL);
      sg_err_clear();
    }
  }
  free(params);
  free(dense);
  free(stale);
  free(idx);
  free(gval);
  sg_workload_destroy(&w);
}

TEST(superset_of_coordinates_gets_zeros) {
  /* Extra indices (features the batch lacks) get exactly 0. */
  sg_workload_t *w = make_wl("softmax");
  CHECK(w);
  const size_t n = sg_workload_nparams(w);
  float *params = calloc(n, sizeof *params), *gval = malloc(n * sizeof *gval);
  float *dense = malloc(n * sizeof *dense);
  uint32_t *all = malloc(n * sizeof *all);
  CHECK(params && gval && dense && all);
  for (size_t i = 0; i < n; i++) all[i] = (uint32_t)i;
  double ld, ls;
  CHECK_OK(sg_workload_grad(w, params, dense, 3, &ld));
  CHECK_OK(sg_workload_grad_sparse(w, params, 3, all, n, gval, &ls));
  CHECK_EQ_INT(memcmp(dense, gval, n * sizeof *gval), 0);
  free(params);
  free(gval);
  free(dense);
  free(all);
  sg_workload_destroy(&w);
}

TEST(other_models_are_unsupported) {
  sg_workload_t *w = make_wl("mlp");
  CHECK(w);
  uint32_t idx[4];
  size_t m;
  CHECK_EQ_INT(sg_workload_sparse_coords(w, 0, idx, 4, &m), SG_EUNSUPPORTED);
  CHECK_STR_CONTAINS(sg_err_msg(), "softmax");
  sg_err_clear();
  sg_workload_destroy(&w);
}
