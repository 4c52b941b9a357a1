/* workload.c - dataset + model + sharding behind the sg_workload_* API.
 *
 * Everything a step needs (permutation, batch indices, gathered batch,
 * activations) is allocated here once; sg_workload_grad allocates nothing.
 * The epoch's permutation is recomputed when a step enters a new epoch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "err.h"
#include "model.h"
#include "shard.h"
#include "workload.h"

#define EVAL_CHUNK 1000 /* test rows per forward pass in evaluate */

struct sg_workload {
  sg_model_t *model;
  sg_dataset_t *train, *test;
  sg_batch_buf_t *bbuf;
  uint32_t *perm, *idx;
  int64_t perm_epoch;
  int worker, nworkers, batch;
  uint64_t seed;
  int64_t ntrain, ntest, d, spe, total;
  int classes;
  char desc[512];
};

/* <dir>/<base>.gz, else <dir>/<base>. */
static int find_idx(char *out, size_t cap, const char *dir, const char *base) {
  snprintf(out, cap, "%s/%s.gz", dir, base);
  if (access(out, R_OK) == 0) return SG_OK;
  snprintf(out, cap, "%s/%s", dir, base);
  if (access(out, R_OK) == 0) return SG_OK;
  return sg_err_set(SG_ENOTFOUND, "%s: no %s[.gz] (set data_dir, or install the dataset)",
                    dir, base);
}

static int load_idx(sg_workload_t *w, const sg_opts_t *o, const char *name,
                    unsigned what, int64_t ntrain_lim, int64_t ntest_lim) {
  char dflt[256], ti[1024], tl[1024], ei[1024], el[1024];
  const char *dir = sg_opts_str_or(o, "data_dir", "");
  if (!*dir) {
    snprintf(dflt, sizeof dflt, "/usr/share/datasets/%s", name);
    dir = dflt;
  }
  SG_CHECK(find_idx(ti, sizeof ti, dir, "train-images-idx3-ubyte"));
  SG_CHECK(find_idx(tl, sizeof tl, dir, "train-labels-idx1-ubyte"));
  w->classes = 10;
  if (what & SG_WL_TRAIN) {
    SG_CHECK(sg_dataset_load_idx(&w->train, ti, tl, ntrain_lim));
    w->ntrain = w->train->n;
    w->d = w->train->d;
  } else {
    SG_CHECK(sg_dataset_probe_idx(ti, &w->ntrain, &w->d));
    if (ntrain_lim > 0 && ntrain_lim < w->ntrain) w->ntrain = ntrain_lim;
  }
  if (what & SG_WL_TEST) {
    SG_CHECK(find_idx(ei, sizeof ei, dir, "t10k-images-idx3-ubyte"));
    SG_CHECK(find_idx(el, sizeof el, dir, "t10k-labels-idx1-ubyte"));
    SG_CHECK(sg_dataset_load_idx(&w->test, ei, el, ntest_lim));
    if (w->test->d != w->d)
      return sg_err_set(SG_EFORMAT, "%s: %lld features per image, training set has %lld", ei,
                        (long long)w->test->d, (long long)w->d);
    w->ntest = w->test->n;
  }
  return SG_OK;
}

/* Dense LIBSVM files (most entries listed) are kept dense when small. */
static int maybe_densify(sg_dataset_t *ds) {
  if (!ds) return SG_OK;
  int64_t nnz = ds->rowptr[ds->n];
  if (nnz * 4 > ds->n * ds->d && (double)ds->n * (double)ds->d * 4 <= (double)(1 << 30))
    return sg_dataset_densify(ds);
  return SG_OK;
}

static int load_libsvm(sg_workload_t *w, const sg_opts_t *o, unsigned what,
                       int64_t features, int64_t ntrain_lim, int64_t ntest_lim) {
  const char *tf = sg_opts_str_or(o, "train_file", "");
  const char *ef = sg_opts_str_or(o, "test_file", "");
  if (!*tf) return sg_err_set(SG_ECONFIG, "train_file: required for dataset libsvm");
  /* With features == 0 the dimension is inferred from BOTH files, so every
   * rank (whatever splits it needs) agrees on the model's size. */
  SG_CHECK(sg_dataset_load_libsvm(&w->train, tf, features, w->classes, ntrain_lim));
  if (*ef && ((what & SG_WL_TEST) || features == 0))
    SG_CHECK(sg_dataset_load_libsvm(&w->test, ef, features, w->classes, ntest_lim));
  w->d = w->train->d;
  if (w->test && w->test->d > w->d) w->d = w->test->d;
  w->train->d = w->d;
  if (w->test) w->test->d = w->d;
  w->ntrain = w->train->n;
  if (!(what & SG_WL_TEST)) sg_dataset_destroy(&w->test);
  w->ntest = w->test ? w->test->n : 0;
  if (!(what & SG_WL_TRAIN)) sg_dataset_destroy(&w->train);
  /* both splits must agree on dense vs CSR: decide from the training set
   * when loaded, else keep CSR */
  if (w->train) {
    SG_CHECK(maybe_densify(w->train));
    if (w->test && !sg_dataset_sparse(w->train)) SG_CHECK(sg_dataset_densify(w->test));
  } else if (what & SG_WL_TEST) {
    /* model layout does not depend on dense/CSR, only the loops do */
    SG_CHECK(maybe_densify(w->test));
  }
  return SG_OK;
}

static int load_synth(sg_workload_t *w, unsigned what, int sparse, int64_t features,
                      int64_t nnz, int64_t ntrain_lim, int64_t ntest_lim) {
  w->d = features > 0 ? features : (sparse ? (1 << 20) : 784);
  w->ntrain = ntrain_lim > 0 ? ntrain_lim : 60000;
  w->ntest = ntest_lim > 0 ? ntest_lim : 10000;
  if (sparse) {
    if (what & SG_WL_TRAIN)
      SG_CHECK(sg_dataset_synth_sparse(&w->train, w->seed, SG_SPLIT_TRAIN, w->ntrain, w->d,
                                       w->classes, nnz));
    if (what & SG_WL_TEST)
      SG_CHECK(sg_dataset_synth_sparse(&w->test, w->seed, SG_SPLIT_TEST, w->ntest, w->d,
                                       w->classes, nnz));
  } else {
    if (what & SG_WL_TRAIN)
      SG_CHECK(sg_dataset_synth_dense(&w->train, w->seed, SG_SPLIT_TRAIN, w->ntrain, w->d,
                                      w->classes));
    if (what & SG_WL_TEST)
      SG_CHECK(sg_dataset_synth_dense(&w->test, w->seed, SG_SPLIT_TEST, w->ntest, w->d,
                                      w->classes));
  }
  return SG_OK;
}

int sg_workload_new(sg_workload_t **out, const sg_opts_t *o, int worker,
                    int nworkers, unsigned what) {
  int rc = SG_OK;
  int64_t batch, seed, threads, classes, features, ntrain_lim, ntest_lim, nnz, max_steps;
  int64_t hidden[SG_MODEL_MAX_LAYERS];
  size_t nhidden = 0;
  double epochs;
  sg_workload_t *w = calloc(1, sizeof *w);
  if (!w) return SG_ENOMEM;
  w->perm_epoch = -1;
  if (nworkers < 1 || worker < 0 || worker >= nworkers) {
    rc = sg_err_set(SG_EINVAL, "worker %d of %d", worker, nworkers);
    goto fail;
  }
  const char *dataset = sg_opts_str_or(o, "dataset", "fashion-mnist");
  const char *model = sg_opts_str_or(o, "model", "mlp");
  SG_TRY(sg_opts_int_or(o, "batch", 64, &batch));
  SG_TRY(sg_opts_int_or(o, "seed", 1, &seed));
  SG_TRY(sg_opts_int_or(o, "threads", 1, &threads));
  SG_TRY(sg_opts_int_or(o, "classes", 10, &classes));
  SG_TRY(sg_opts_int_or(o, "features", 0, &features));
  SG_TRY(sg_opts_int_or(o, "train_samples", 0, &ntrain_lim));
  SG_TRY(sg_opts_int_or(o, "test_samples", 0, &ntest_lim));
  SG_TRY(sg_opts_int_or(o, "nnz", 100, &nnz));
  SG_TRY(sg_opts_int_or(o, "max_steps", 0, &max_steps));
  SG_TRY(sg_opts_double_or(o, "epochs", 1.0, &epochs));
  if (!strcmp(model, "mlp")) {
    if (!sg_opts_has(o, "hidden")) {
      hidden[0] = 128;
      nhidden = 1;
    } else {
      SG_TRY(sg_opts_intlist(o, "hidden", hidden, SG_MODEL_MAX_LAYERS - 1, &nhidden));
    }
  }
  if (batch < 1 || batch > (1 << 24)) {
    rc = sg_err_set(SG_ECONFIG, "batch: %lld out of range", (long long)batch);
    goto fail;
  }
  if (classes < 2 || classes > 100000) {
    rc = sg_err_set(SG_ECONFIG, "classes: %lld out of range 2..100000", (long long)classes);
    goto fail;
  }
  w->worker = worker;
  w->nworkers = nworkers;
  w->batch = (int)batch;
  w->seed = (uint64_t)seed;
  w->classes = (int)classes;
  sg_blas_set_threads((int)threads);

  if (!strcmp(dataset, "fashion-mnist") || !strcmp(dataset, "mnist")) {
    SG_TRY(load_idx(w, o, dataset, what, ntrain_lim, ntest_lim));
  } else if (!strcmp(dataset, "libsvm")) {
    SG_TRY(load_libsvm(w, o, what, features, ntrain_lim, ntest_lim));
  } else if (!strcmp(dataset, "synthetic") || !strcmp(dataset, "synthetic-sparse")) {
    SG_TRY(load_synth(w, what, dataset[9] == '-', features, nnz, ntrain_lim, ntest_lim));
  } else {
    rc = sg_err_set(SG_ECONFIG, "dataset: unknown dataset '%s'", dataset);
    goto fail;
  }

  int sparse = (w->train && sg_dataset_sparse(w->train)) ||
               (w->test && sg_dataset_sparse(w->test));
  int max_rows = w->batch > EVAL_CHUNK ? w->batch : EVAL_CHUNK;
  SG_TRY(sg_model_new(&w->model, model, w->d, w->classes, hidden, nhidden, sparse, max_rows));

  w->spe = sg_shard_steps_per_epoch(w->ntrain, nworkers, w->batch);
  if (w->spe < 1) {
    rc = sg_err_set(SG_ECONFIG, "batch: workers x batch = %d x %d exceeds the %lld training samples",
                    nworkers, w->batch, (long long)w->ntrain);
    goto fail;
  }
  w->total = (int64_t)ceil(epochs * (double)w->spe);
  if (max_steps > 0 && max_steps < w->total) w->total = max_steps;

  if (w->train) {
    w->perm = malloc((size_t)w->ntrain * sizeof *w->perm);
    w->idx = malloc((size_t)w->batch * sizeof *w->idx);
    if (!w->perm || !w->idx) {
      rc = sg_err_set(SG_ENOMEM, "permutation of %lld samples", (long long)w->ntrain);
      goto fail;
    }
    SG_TRY(sg_batch_buf_new(&w->bbuf, w->train, w->batch));
  }
  char ntest[32] = "-";
  if (w->test) snprintf(ntest, sizeof ntest, "%lld", (long long)w->ntest);
  snprintf(w->desc, sizeof w->desc, "%s, %s %lld/%s, batch %d", sg_model_describe(w->model),
           dataset, (long long)w->ntrain, ntest, w->batch);
  *out = w;
  return SG_OK;
fail:
  sg_workload_destroy(&w);
  return rc;
}

void sg_workload_destroy(sg_workload_t **pw) {
  if (!pw || !*pw) return;
  sg_workload_t *w = *pw;
  sg_model_destroy(&w->model);
  sg_dataset_destroy(&w->train);
  sg_dataset_destroy(&w->test);
  sg_batch_buf_destroy(&w->bbuf);
  free(w->perm);
  free(w->idx);
  free(w);
  *pw = NULL;
}

size_t sg_workload_nparams(const sg_workload_t *w) { return sg_model_nparams(w->model); }
int64_t sg_workload_steps_per_epoch(const sg_workload_t *w) { return w->spe; }
int64_t sg_workload_total_steps(const sg_workload_t *w) { return w->total; }
int sg_workload_batch(const sg_workload_t *w) { return w->batch; }
const char *sg_workload_describe(const sg_workload_t *w) { return w->desc; }

int sg_workload_init_params(const sg_workload_t *w, float *params) {
  sg_model_init(w->model, w->seed, params);
  return SG_OK;
}

int sg_workload_grad(sg_workload_t *w, const float *params, float *grad,
                     int64_t step, double *loss) {
  return sg_workload_grad_slice(w, params, grad, step, 0, w->batch, loss);
}

int sg_workload_grad_slice(sg_workload_t *w, const float *params, float *grad,
                           int64_t step, int64_t first, int64_t count, double *loss) {
  if (!w->train)
    return sg_err_set(SG_EINVAL, "grad: workload was created without the training set");
  if (step < 0) return sg_err_set(SG_EINVAL, "grad: step %lld < 0", (long long)step);
  if (first < 0 || count < 1 || count > w->batch - first)
    return sg_err_set(SG_EINVAL, "grad: slice [%lld, %lld) is not inside the batch of %d",
                      (long long)first, (long long)(first + count), w->batch);
  const int64_t epoch = step / w->spe, t = step % w->spe;
  if (epoch != w->perm_epoch) {
    sg_shard_permutation(w->seed, epoch, w->perm, w->ntrain);
    w->perm_epoch = epoch;
  }
  sg_shard_batch(w->perm, w->worker, w->nworkers, w->batch, t, w->idx);
  sg_batch_t b;
  sg_batch_gather(w->bbuf, w->train, w->idx + first, (int)count, &b);
  SG_CHECK(sg_model_grad(w->model, params, &b, grad, loss));
  return SG_OK;
}

int sg_workload_evaluate(sg_workload_t *w, const float *params, sg_eval_t *out) {
  if (!w->test || w->ntest < 1)
    return sg_err_set(SG_EINVAL, "evaluate: workload has no test set (libsvm: set test_file)");
  double loss = 0.0;
  int64_t correct = 0;
  for (int64_t s = 0; s < w->ntest; s += EVAL_CHUNK) {
    int n = (int)(w->ntest - s < EVAL_CHUNK ? w->ntest - s : EVAL_CHUNK);
    sg_batch_t b;
    sg_batch_view(w->test, s, n, &b);
    SG_CHECK(sg_model_eval(w->model, params, &b, &loss, &correct));
  }
  out->test_loss = loss / (double)w->ntest;
  out->test_acc = (double)correct / (double)w->ntest;
  return SG_OK;
}

int sg_workload_optim_new(const sg_workload_t *w, const sg_opts_t *o,
                          sg_optim_t **out) {
  return sg_optim_new(out, o, sg_model_nparams(w->model), w->spe, w->total);
}

sg_model_t *sg_workload_model(sg_workload_t *w) { return w->model; }
