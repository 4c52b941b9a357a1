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
#include <sys/stat.h>
#include <unistd.h>

#include "cuda/sg_cuda.h"
#ifdef SG_SMPI
#include "sg_mpi.h" /* smpi_execute (simulated runs) */
#include "share.h"
#endif
#include "dataset.h"
#include "dataset_clicks.h"
#include "device.h"
#include "err.h"
#include "model.h"
#include "model_embed.h"
#include "shard.h"
#include "workload.h"

#define EVAL_CHUNK 1000 /* test rows per forward pass in evaluate */

struct sg_workload {
  sg_model_t *model;
  sg_dataset_t *train, *test;
  sg_batch_buf_t *bbuf;
  uint32_t *perm, *idx;
  uint32_t *shard; /* non-IID partition: this worker's samples (NULL: iid) */
  int64_t shard_len;
  int64_t perm_epoch;
  int worker, nworkers, batch;
  int init_per_rank; /* init: per-rank, the teaching fault */
  uint64_t seed;
  int64_t ntrain, ntest, d, spe, total;
  int classes;
  char desc[512];
  struct sg_wl_sparse *sp; /* sparse step buffers (sg_workload_grad_sparse) */
  sg_cuda_wl_t *dev;       /* device: cuda -- the data and the step on the device */
  int tf32;                /* device: cuda with tf32: true */
  double modeled_s; /* simulated run, compute modeled (_sim_step_s): a step's charge, 0: computed */
  int borrowed;     /* train and test belong to the process (share.h), not to this workload */
};

static void wl_sparse_free(struct sg_wl_sparse **ps);

/* The training set through the per-host cache (dataset_cache.c) unless
 * data_cache is 'off'; no usable cache directory (no HOME) decodes a
 * private copy. */
static int load_train_idx(sg_workload_t *w, const sg_opts_t *o, const char *ti, const char *tl,
                          int64_t lim) {
  char dir[1024];
  const char *opt = sg_opts_str_or(o, "data_cache", ""), *xdg = getenv("XDG_CACHE_HOME"),
             *home = getenv("HOME");
  if (!strcmp(opt, "off")) return sg_dataset_load_idx(&w->train, ti, tl, lim);
  if (*opt) snprintf(dir, sizeof dir, "%s", opt);
  else if (xdg && *xdg == '/') snprintf(dir, sizeof dir, "%s/sgdlab", xdg);
  else if (home && *home == '/') snprintf(dir, sizeof dir, "%s/.cache/sgdlab", home);
  else return sg_dataset_load_idx(&w->train, ti, tl, lim);
  if (!*opt) {
    /* the default place: make ~/.cache if missing; unusable, a private copy */
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) *slash = '\0', mkdir(parent, 0700);
    int rc = sg_dataset_load_idx_shared(&w->train, ti, tl, lim, dir);
    if (rc != SG_EIO) return rc;
    fprintf(stderr, "sgdlab: no shared data cache (%s); decoding a private copy\n", sg_err_msg());
    sg_err_clear();
    return sg_dataset_load_idx(&w->train, ti, tl, lim);
  }
  return sg_dataset_load_idx_shared(&w->train, ti, tl, lim, dir);
}

static int load_idx(sg_workload_t *w, const sg_opts_t *o, const char *name,
                    unsigned what, int64_t ntrain_lim, int64_t ntest_lim) {
  char dflt[256], ti[1024], tl[1024], ei[1024], el[1024];
  const char *dir = sg_opts_str_or(o, "data_dir", "");
  int given = *dir != '\0';
  if (!given) {
    snprintf(dflt, sizeof dflt, "/usr/share/datasets/%s", name);
    dir = dflt;
  }
  SG_CHECK(sg_idx_find(ti, sizeof ti, dir, "train-images-idx3-ubyte", name, given));
  SG_CHECK(sg_idx_find(tl, sizeof tl, dir, "train-labels-idx1-ubyte", name, given));
  w->classes = 10;
  if (what & SG_WL_TRAIN) {
    SG_CHECK(load_train_idx(w, o, ti, tl, ntrain_lim));
    w->ntrain = w->train->n;
    w->d = w->train->d;
  } else {
    SG_CHECK(sg_dataset_probe_idx(ti, &w->ntrain, &w->d));
    if (ntrain_lim > 0 && ntrain_lim < w->ntrain) w->ntrain = ntrain_lim;
  }
  if (what & SG_WL_TEST) {
    SG_CHECK(sg_idx_find(ei, sizeof ei, dir, "t10k-images-idx3-ubyte", name, given));
    SG_CHECK(sg_idx_find(el, sizeof el, dir, "t10k-labels-idx1-ubyte", name, given));
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

/* test_file, else `holdout` of the training file (seeded by `seed`). */
static int libsvm_test_set(sg_workload_t *w, const sg_opts_t *o, unsigned what, int64_t features,
                           int64_t ntest_lim, sg_libsvm_labels_t *lab) {
  const char *ef = sg_opts_str_or(o, "test_file", "");
  double holdout = 0;
  SG_CHECK(sg_opts_double_or(o, "holdout", 0, &holdout));
  if (*ef && holdout > 0)
    return sg_err_set(SG_ECONFIG, "holdout: only used without a test_file (test_file: %s)", ef);
  if (holdout > 0) return sg_dataset_holdout(&w->train, &w->test, holdout, w->seed);
  /* With features == 0 the dimension is inferred from BOTH files, so every
   * rank (whatever splits it needs) agrees on the model's size. */
  if (*ef && ((what & SG_WL_TEST) || features == 0))
    SG_CHECK(sg_dataset_load_libsvm_labels(&w->test, ef, features, lab, ntest_lim));
  return SG_OK;
}

static int load_libsvm(sg_workload_t *w, const sg_opts_t *o, unsigned what,
                       int64_t features, int64_t ntrain_lim, int64_t ntest_lim) {
  const char *tf = sg_opts_str_or(o, "train_file", "");
  if (!*tf) return sg_err_set(SG_ECONFIG, "train_file: required for dataset libsvm");
  /* the training file decides the label rule and (classes: 0) the classes;
   * the test file is read with both */
  sg_libsvm_labels_t lab = {SG_LABELS_DECIDE, w->classes};
  SG_CHECK(sg_dataset_load_libsvm_labels(&w->train, tf, features, &lab, ntrain_lim));
  w->classes = lab.classes;
  SG_CHECK(libsvm_test_set(w, o, what, features, ntest_lim, &lab));
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

/* device: cuda: the same model and data on the device (core/cuda). */
static int attach_device(sg_workload_t *w, int max_rows) {
  if (sg_model_embed(w->model))
    return sg_err_set(SG_ECONFIG, "device: the embedding model runs on the cpu only");
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  sg_cuda_wl_desc_t d = {.dims = dims, .max_rows = max_rows, .train = w->train, .test = w->test};
  d.L = sg_model_dims(w->model, dims);
  if (d.L == 0) { /* model: cnn, the image and the classes */
    d.cnn = d.L = 1;
    dims[0] = w->d;
    dims[1] = w->classes;
  }
  d.tf32 = w->tf32;
  return sg_cuda_wl_new(&w->dev, &d);
}

void sg_denormals_apply(const sg_opts_t *o) {
  sg_denormals_flush(strcmp(sg_opts_str_or(o, "denormals", "flush"), "keep") != 0);
}

/* The workload's settings, read and checked once (sg_workload_new). */
typedef struct wl_cfg {
  const char *dataset, *model;
  const char *partition;
  double alpha;
  int64_t batch, seed, threads, classes, features, ntrain_lim, ntest_lim, nnz, max_steps;
  int64_t hidden[SG_MODEL_MAX_LAYERS];
  size_t nhidden;
  double epochs;
  int64_t fields, table_rows, embed_dim, keys_per_field; /* model embedding, dataset clicks */
  double zipf;
} wl_cfg_t;

/* model: embedding and dataset: clicks (settings.c rows). */
static int wl_read_embed_opts(const sg_opts_t *o, wl_cfg_t *c) {
  SG_CHECK(sg_opts_int_or(o, "fields", 8, &c->fields));
  SG_CHECK(sg_opts_int_or(o, "table_rows", 262144, &c->table_rows));
  SG_CHECK(sg_opts_int_or(o, "embed_dim", 16, &c->embed_dim));
  SG_CHECK(sg_opts_int_or(o, "keys_per_field", 100000, &c->keys_per_field));
  SG_CHECK(sg_opts_double_or(o, "zipf", 1.05, &c->zipf));
  const int embed = !strcmp(c->model, "embedding"), clicks = !strcmp(c->dataset, "clicks");
  if (embed != clicks)
    return sg_err_set(SG_ECONFIG, "%s", embed ? "model: embedding needs dataset: clicks"
                                              : "dataset: clicks needs model: embedding");
  if (!embed) return SG_OK;
  c->classes = 2;
  if (!sg_opts_has(o, "hidden")) {
    c->hidden[0] = 128;
    c->nhidden = 1;
  } else {
    SG_CHECK(sg_opts_intlist(o, "hidden", c->hidden, SG_MODEL_MAX_LAYERS - 1, &c->nhidden));
  }
  if (c->nhidden != 1 || c->hidden[0] < 1 || c->hidden[0] > 4096)
    return sg_err_set(SG_ECONFIG, "hidden: the embedding model has one hidden layer of 1..4096 "
                      "units, e.g. [64]");
  return SG_OK;
}

static int wl_read_opts(const sg_opts_t *o, wl_cfg_t *c) {
  c->dataset = sg_opts_str_or(o, "dataset", "fashion-mnist");
  c->model = sg_opts_str_or(o, "model", "mlp");
  SG_CHECK(sg_opts_int_or(o, "batch", 64, &c->batch));
  SG_CHECK(sg_opts_int_or(o, "seed", 1, &c->seed));
  SG_CHECK(sg_opts_int_or(o, "threads", 1, &c->threads));
  SG_CHECK(sg_opts_int_or(o, "classes", 0, &c->classes));
  SG_CHECK(sg_opts_int_or(o, "features", 0, &c->features));
  SG_CHECK(sg_opts_int_or(o, "train_samples", 0, &c->ntrain_lim));
  SG_CHECK(sg_opts_int_or(o, "test_samples", 0, &c->ntest_lim));
  SG_CHECK(sg_opts_int_or(o, "nnz", 100, &c->nnz));
  SG_CHECK(sg_opts_int_or(o, "max_steps", 0, &c->max_steps));
  SG_CHECK(sg_opts_double_or(o, "epochs", 1.0, &c->epochs));
  c->partition = sg_opts_str_or(o, "partition", "iid");
  SG_CHECK(sg_opts_double_or(o, "partition_alpha", 0.5, &c->alpha));
  c->nhidden = 0;
  if (!strcmp(c->model, "mlp")) {
    if (!sg_opts_has(o, "hidden")) {
      c->hidden[0] = 128;
      c->nhidden = 1;
    } else {
      SG_CHECK(sg_opts_intlist(o, "hidden", c->hidden, SG_MODEL_MAX_LAYERS - 1, &c->nhidden));
    }
  }
  if (c->batch < 1 || c->batch > (1 << 24))
    return sg_err_set(SG_ECONFIG, "batch: %lld out of range", (long long)c->batch);
  SG_CHECK(wl_read_embed_opts(o, c));
  /* 0: libsvm infers it from the training file, synthetic data has 10 */
  const int libsvm = !strcmp(c->dataset, "libsvm");
  if (c->classes == 0 && !libsvm) c->classes = 10;
  if ((c->classes < 2 && (c->classes != 0 || !libsvm)) || c->classes > 100000)
    return sg_err_set(SG_ECONFIG, "classes: %lld out of range 2..100000 (0 = infer)",
                      (long long)c->classes);
  return SG_OK;
}

/* dataset: clicks -- the seeded generator, or train_file (and test_file
 * or holdout) in `format`. */
static int load_clicks(sg_workload_t *w, const sg_opts_t *o, const wl_cfg_t *c, unsigned what) {
  const char *tf = sg_opts_str_or(o, "train_file", ""), *ef = sg_opts_str_or(o, "test_file", "");
  const int F = (int)c->fields;
  w->classes = 2;
  if (!*tf) {
    w->d = c->keys_per_field;
    w->ntrain = c->ntrain_lim > 0 ? c->ntrain_lim : 60000;
    w->ntest = c->ntest_lim > 0 ? c->ntest_lim : 10000;
    if (what & SG_WL_TRAIN)
      SG_CHECK(sg_dataset_clicks_synth(&w->train, w->seed, SG_SPLIT_TRAIN, w->ntrain, F,
                                       c->keys_per_field, c->zipf));
    if (what & SG_WL_TEST)
      SG_CHECK(sg_dataset_clicks_synth(&w->test, w->seed, SG_SPLIT_TEST, w->ntest, F,
                                       c->keys_per_field, c->zipf));
    return SG_OK;
  }
  int fmt = sg_clicks_format(sg_opts_str_or(o, "format", "libsvm"));
  double holdout = 0;
  SG_CHECK(sg_opts_double_or(o, "holdout", 0, &holdout));
  if (fmt < 0) return sg_err_set(SG_ECONFIG, "format: libsvm or csv");
  if (!*ef && !(holdout > 0))
    return sg_err_set(SG_ECONFIG, "test_file: required for a click log file, or set holdout");
  if (*ef && holdout > 0)
    return sg_err_set(SG_ECONFIG, "holdout: only used without a test_file (test_file: %s)", ef);
  /* the training set's size decides the schedule: always read */
  SG_CHECK(sg_dataset_load_clicks(&w->train, tf, fmt, F, c->ntrain_lim));
  if (holdout > 0) SG_CHECK(sg_dataset_holdout(&w->train, &w->test, holdout, w->seed));
  else if (what & SG_WL_TEST) SG_CHECK(sg_dataset_load_clicks(&w->test, ef, fmt, F, c->ntest_lim));
  w->ntrain = w->train->n;
  w->ntest = w->test ? w->test->n : 0;
  w->d = w->train->d;
  if (!(what & SG_WL_TRAIN)) sg_dataset_destroy(&w->train);
  if (!(what & SG_WL_TEST)) sg_dataset_destroy(&w->test);
  return SG_OK;
}

static int wl_load_data(sg_workload_t *w, const sg_opts_t *o, const wl_cfg_t *c,
                        unsigned what) {
  const char *ds = c->dataset;
  if (!strcmp(ds, "fashion-mnist") || !strcmp(ds, "mnist"))
    return load_idx(w, o, ds, what, c->ntrain_lim, c->ntest_lim);
  if (!strcmp(ds, "libsvm"))
    return load_libsvm(w, o, what, c->features, c->ntrain_lim, c->ntest_lim);
  if (!strcmp(ds, "clicks")) return load_clicks(w, o, c, what);
  if (!strcmp(ds, "synthetic") || !strcmp(ds, "synthetic-sparse"))
    return load_synth(w, what, ds[9] == '-', c->features, c->nnz, c->ntrain_lim, c->ntest_lim);
  return sg_err_set(SG_ECONFIG, "dataset: unknown dataset '%s'", ds);
}

#ifdef SG_SMPI
/* What a rank's data depends on: the spec's data keys and what it loads. */
static void data_key(const sg_opts_t *o, unsigned what, char *out, size_t cap) {
  static const char *const keys[] = {"dataset", "data_dir", "data_cache", "train_file",
      "test_file", "features", "classes", "holdout", "train_samples", "test_samples", "nnz",
      "seed", "device", "fields", "keys_per_field", "zipf", "format", NULL};
  size_t n = (size_t)snprintf(out, cap, "data %u", what);
  for (int i = 0; keys[i] && n < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "|%s", sg_opts_str_or(o, keys[i], ""));
}

/* Simulated ranks (one process): the first loads, the rest borrow. */
static int load_data_once(sg_workload_t *w, const sg_opts_t *o, const wl_cfg_t *c,
                          unsigned what) {
  char key[2048];
  data_key(o, what, key, sizeof key);
  sg_workload_t *held = sg_share_get(key);
  if (!held) {
    SG_CHECK(wl_load_data(w, o, c, what));
    if (!(held = calloc(1, sizeof *held))) return SG_OK; /* this rank keeps its own */
    *held = *w;
    if (sg_share_put(key, held) < 0) {
      free(held);
      return SG_OK;
    }
  }
  w->train = held->train;
  w->test = held->test;
  w->ntrain = held->ntrain;
  w->ntest = held->ntest;
  w->d = held->d;
  w->classes = held->classes;
  w->borrowed = 1;
  return SG_OK;
}
#else
static int load_data_once(sg_workload_t *w, const sg_opts_t *o, const wl_cfg_t *c,
                          unsigned what) {
  return wl_load_data(w, o, c, what);
}
#endif

/* Steps per epoch and in all, and the training buffers. */
/* A non-IID partition: this worker's fixed shard (shard.h).  One worker
 * holds the whole set, so N = 1 (local) keeps the iid schedule. */
static int wl_partition(sg_workload_t *w, const wl_cfg_t *c) {
  sg_partition_t kind;
  SG_CHECK(sg_partition_parse(c->partition, &kind));
  if (kind == SG_PART_IID || w->nworkers == 1) return SG_OK;
  int64_t cap = sg_shard_size(w->ntrain, w->worker, w->nworkers);
  if (!(w->shard = malloc((size_t)cap * sizeof *w->shard)))
    return sg_err_set(SG_ENOMEM, "shard of %lld samples", (long long)cap);
  return sg_shard_build(kind, c->alpha, w->seed, w->train->y, w->ntrain, w->train->classes,
                        w->worker, w->nworkers, w->shard, &w->shard_len);
}

static int wl_plan(sg_workload_t *w, const wl_cfg_t *c) {
  w->spe = sg_shard_steps_per_epoch(w->ntrain, w->nworkers, w->batch);
  if (w->spe < 1)
    return sg_err_set(SG_ECONFIG, "batch: workers x batch = %d x %d exceeds the %lld training "
                      "samples", w->nworkers, w->batch, (long long)w->ntrain);
  SG_CHECK(sg_workload_plan_steps(c->epochs, w->spe, c->max_steps, &w->total));
  if (!w->train) return SG_OK;
  w->perm = malloc((size_t)w->ntrain * sizeof *w->perm);
  w->idx = malloc((size_t)w->batch * sizeof *w->idx);
  if (!w->perm || !w->idx)
    return sg_err_set(SG_ENOMEM, "permutation of %lld samples", (long long)w->ntrain);
  SG_CHECK(wl_partition(w, c));
  return sg_batch_buf_new(&w->bbuf, w->train, w->batch);
}

int sg_workload_new(sg_workload_t **out, const sg_opts_t *o, int worker,
                    int nworkers, unsigned what) {
  int rc = SG_OK;
  wl_cfg_t c;
  sg_workload_t *w = calloc(1, sizeof *w);
  if (!w) return SG_ENOMEM;
  w->perm_epoch = -1;
  if (nworkers < 1 || worker < 0 || worker >= nworkers) {
    rc = sg_err_set(SG_EINVAL, "worker %d of %d", worker, nworkers);
    goto fail;
  }
  SG_TRY(wl_read_opts(o, &c));
  SG_TRY(sg_opts_double_or(o, "_sim_step_s", 0, &w->modeled_s));
  w->worker = worker;
  w->nworkers = nworkers;
  w->batch = (int)c.batch;
  w->seed = (uint64_t)c.seed;
  w->init_per_rank = !strcmp(sg_opts_str_or(o, "init", "consistent"), "per-rank");
  w->classes = (int)c.classes;
  sg_blas_set_threads((int)c.threads);
  sg_denormals_apply(o);
  /* compute modeled: no step reads the data; its shape is enough (libsvm
   * reads its files for features, classes and samples, and keeps no row) */
  if (w->modeled_s > 0) what &= ~(unsigned)SG_WL_ALL;
  SG_TRY(load_data_once(w, o, &c, what));

  int sparse = (w->train && sg_dataset_sparse(w->train)) ||
               (w->test && sg_dataset_sparse(w->test));
  int max_rows = w->batch > EVAL_CHUNK ? w->batch : EVAL_CHUNK;
  if (!strcmp(c.model, "embedding"))
    SG_TRY(sg_model_new_embed(&w->model, (int)c.fields, c.table_rows, (int)c.embed_dim,
                              (int)c.hidden[0], max_rows));
  else
    SG_TRY(sg_model_new(&w->model, c.model, w->d, w->classes, c.hidden, c.nhidden, sparse,
                        max_rows));
  SG_TRY(wl_plan(w, &c));
  if (!strcmp(sg_opts_str_or(o, "device", "cpu"), "cuda") && (w->train || w->test)) {
    if (sg_opts_has(o, "tf32")) SG_TRY(sg_opts_bool(o, "tf32", &w->tf32));
    SG_TRY(attach_device(w, max_rows));
  }
  char ntest[32] = "-", on[32] = "";
  if (w->test) snprintf(ntest, sizeof ntest, "%lld", (long long)w->ntest);
  if (w->dev)
    snprintf(on, sizeof on, ", on cuda:%d%s", sg_device_current(), w->tf32 ? " tf32" : "");
  snprintf(w->desc, sizeof w->desc, "%s, %s %lld/%s, batch %d%s", sg_model_describe(w->model),
           c.dataset, (long long)w->ntrain, ntest, w->batch, on);
  *out = w;
  return SG_OK;
fail:
  sg_workload_destroy(&w);
  return rc;
}

int sg_workload_plan_steps(double epochs, int64_t spe, int64_t max_steps, int64_t *total) {
  /* the float -> integer cast below is defined only for a finite value in
   * range, so both are checked first (nan passes every comparison) */
  if (!isfinite(epochs) || !(epochs >= 0))
    return sg_err_set(SG_ECONFIG, "epochs: must be a finite number >= 0, got %g", epochs);
  if (spe < 0) return sg_err_set(SG_EINVAL, "steps per epoch %lld", (long long)spe);
  double t = ceil(epochs * (double)spe);
  if (max_steps > 0 && (double)max_steps < t) t = (double)max_steps;
  if (!(t <= (double)SG_MAX_TOTAL_STEPS))
    return sg_err_set(SG_ECONFIG, "epochs: %g x %lld steps per epoch = %.3g steps, more than "
                      "the %lld one run may take (set max_steps, or fewer epochs)",
                      epochs, (long long)spe, t, (long long)SG_MAX_TOTAL_STEPS);
  if (t < 1)
    return sg_err_set(SG_ECONFIG, "epochs: %g x %lld steps per epoch gives 0 steps; a run takes "
                      "at least one step", epochs, (long long)spe);
  *total = (int64_t)t;
  return SG_OK;
}

void sg_workload_destroy(sg_workload_t **pw) {
  if (!pw || !*pw) return;
  sg_workload_t *w = *pw;
  sg_model_destroy(&w->model);
  if (!w->borrowed) sg_dataset_destroy(&w->train);
  if (!w->borrowed) sg_dataset_destroy(&w->test);
  sg_batch_buf_destroy(&w->bbuf);
  free(w->perm);
  free(w->shard);
  free(w->idx);
  wl_sparse_free(&w->sp);
  sg_cuda_wl_destroy(&w->dev);
  free(w);
  *pw = NULL;
}

size_t sg_workload_nparams(const sg_workload_t *w) { return sg_model_nparams(w->model); }
int64_t sg_workload_steps_per_epoch(const sg_workload_t *w) { return w->spe; }
int64_t sg_workload_total_steps(const sg_workload_t *w) { return w->total; }
int sg_workload_batch(const sg_workload_t *w) { return w->batch; }
const char *sg_workload_describe(const sg_workload_t *w) { return w->desc; }

int sg_workload_init_params(const sg_workload_t *w, float *params) {
  uint64_t seed = w->seed;
  /* init: per-rank (a teaching fault): worker w > 0 draws from a seed of its own */
  if (w->init_per_rank && w->worker > 0) seed ^= 0x9e3779b97f4a7c15ull * (uint64_t)w->worker;
  sg_model_init(w->model, seed, params);
  return SG_OK;
}

int sg_workload_init_per_rank(const sg_workload_t *w) { return w->init_per_rank; }

int sg_workload_grad(sg_workload_t *w, const float *params, float *grad,
                     int64_t step, double *loss) {
  return sg_workload_grad_slice(w, params, grad, step, 0, w->batch, loss);
}

/* w->idx = this worker's row indices of global step `step`. */
static void step_indices(sg_workload_t *w, int64_t step) {
  const int64_t epoch = step / w->spe, t = step % w->spe;
  if (epoch != w->perm_epoch && w->shard)
    sg_shard_order(w->seed, epoch, w->worker, w->shard, w->shard_len, w->perm);
  else if (epoch != w->perm_epoch)
    sg_shard_permutation(w->seed, epoch, w->perm, w->ntrain);
  w->perm_epoch = epoch;
  if (w->shard) memcpy(w->idx, w->perm + t * w->batch, (size_t)w->batch * sizeof *w->idx);
  else sg_shard_batch(w->perm, w->worker, w->nworkers, w->batch, t, w->idx);
}

int sg_workload_on_device(const sg_workload_t *w) { return w->dev != NULL; }
struct sg_cuda_wl *sg_workload_device(sg_workload_t *w) { return w->dev; }

int sg_workload_grad_device(sg_workload_t *w, const float *dparams, float *dgrad, int64_t step,
                            double *loss) {
  if (!w->dev) return sg_err_set(SG_EINVAL, "grad: the workload is not on a device");
  if (step < 0) return sg_err_set(SG_EINVAL, "grad: step %lld < 0", (long long)step);
  step_indices(w, step);
  return sg_cuda_wl_grad(w->dev, dparams, dgrad, w->idx, w->batch, loss);
}

/* The slice [first, first + count) of the step's batch on the device. */
int sg_workload_grad_slice_device(sg_workload_t *w, const float *dparams, float *dgrad,
                                  int64_t step, int64_t first, int64_t count, double *loss) {
  if (!w->dev) return sg_err_set(SG_EINVAL, "grad: the workload is not on a device");
  if (step < 0) return sg_err_set(SG_EINVAL, "grad: step %lld < 0", (long long)step);
  if (first < 0 || count < 1 || count > w->batch - first)
    return sg_err_set(SG_EINVAL, "grad: slice [%lld, %lld) is not inside the batch of %d",
                      (long long)first, (long long)(first + count), w->batch);
  step_indices(w, step);
  return sg_cuda_wl_grad(w->dev, dparams, dgrad, w->idx + first, (int)count, loss);
}

int sg_workload_grad_slice(sg_workload_t *w, const float *params, float *grad,
                           int64_t step, int64_t first, int64_t count, double *loss) {
#ifdef SG_SMPI
  if (w->modeled_s > 0 && count >= 1 && count <= w->batch) {
    /* simulate: compute: modeled -- charge the step, compute nothing */
    smpi_execute(w->modeled_s * (double)count / (double)w->batch);
    *loss = NAN;
    return SG_OK;
  }
#endif
  if (!w->train)
    return sg_err_set(SG_EINVAL, "grad: workload was created without the training set");
  if (step < 0) return sg_err_set(SG_EINVAL, "grad: step %lld < 0", (long long)step);
  if (first < 0 || count < 1 || count > w->batch - first)
    return sg_err_set(SG_EINVAL, "grad: slice [%lld, %lld) is not inside the batch of %d",
                      (long long)first, (long long)(first + count), w->batch);
  step_indices(w, step);
  if (w->dev)
    return sg_cuda_wl_grad_host(w->dev, params, grad, w->idx + first, (int)count, loss);
  sg_batch_t b;
  sg_batch_gather(w->bbuf, w->train, w->idx + first, (int)count, &b);
  SG_CHECK(sg_model_grad(w->model, params, &b, grad, loss));
  return SG_OK;
}

int sg_workload_evaluate(sg_workload_t *w, const float *params, sg_eval_t *out) {
  if (w->modeled_s > 0 && !w->test) { /* compute modeled: nothing real to evaluate */
    out->test_loss = out->test_acc = NAN;
    return SG_OK;
  }
  if (!w->test || w->ntest < 1)
    return sg_err_set(SG_EINVAL, "evaluate: workload has no test set (libsvm: set test_file)");
  double loss = 0.0;
  int64_t correct = 0;
  if (w->dev) SG_CHECK(sg_cuda_wl_eval_host(w->dev, params, &loss, &correct));
  for (int64_t s = 0; !w->dev && s < w->ntest; s += EVAL_CHUNK) {
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

/* ---- sparse step (softmax on CSR input) ------------------------------
 *
 * Softmax regression's parameters are W (C x d, row-major) then b (C).  A
 * batch whose rows hold the feature set F (sorted, unique) reads and
 * writes exactly W[c][f] for c < C, f in F, and the C biases: the indices
 * c*d + f (class-major, so sorted) and then C*d + c.  The step below works
 * on a compact copy Wc[|F| x C] (feature-major, so the inner loop over
 * classes is contiguous) and performs the dense path's float operations in
 * the same order (sg_csr_forward / sg_csr_backward): gval is bit-equal to
 * the dense gradient at idx, and the dense gradient is exactly zero
 * elsewhere.  Cost O(batch nnz * (C + log nnz) + n); nothing of size
 * nparams is touched.  Buffers grow once to the largest batch. */

struct sg_wl_sparse {
  size_t cap;        /* nonzeros the buffers hold */
  int C;
  uint32_t *feat;    /* [cap] F, sorted unique features of the batch */
  uint32_t *pos;     /* [cap] position in F of each nonzero */
  float *wc, *dwc;   /* [cap * C] compact W and its gradient */
  float *bias, *db;  /* [C] */
  float *z;          /* [batch * C] logits, then d loss / d logits */
  sg_batch_t b;      /* the batch of the step last prepared */
  size_t nf;         /* |F| */
};

static void wl_sparse_free(struct sg_wl_sparse **ps) {
  if (!ps || !*ps) return;
  struct sg_wl_sparse *s = *ps;
  free(s->feat);
  free(s->pos);
  free(s->wc);
  free(s->dwc);
  free(s->bias);
  free(s->db);
  free(s->z);
  free(s);
  *ps = NULL;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

/* Gather the batch of `step`, its feature set F and each nonzero's place
 * in F into w->sp. */
static int sparse_prepare(sg_workload_t *w, int64_t step) {
  if (!w->train)
    return sg_err_set(SG_EINVAL, "sparse grad: workload was created without the training set");
  if (step < 0) return sg_err_set(SG_EINVAL, "sparse grad: step %lld < 0", (long long)step);
  /* The model's kind is private to model_mlp.c; its description names it. */
  if (strncmp(sg_model_describe(w->model), "softmax ", 8) != 0 || !sg_dataset_sparse(w->train))
    return sg_err_set(SG_EUNSUPPORTED, "sparse grad: needs model softmax on CSR input "
                      "(synthetic-sparse, libsvm), not %s", w->desc);
  if ((uint64_t)sg_model_nparams(w->model) > UINT32_MAX)
    return sg_err_set(SG_EUNSUPPORTED, "sparse grad: %zu parameters do not fit 32-bit indices",
                      sg_model_nparams(w->model));
  const int C = w->classes;
  struct sg_wl_sparse *s = w->sp;
  size_t need = (size_t)w->batch * (size_t)(w->train->max_row_nnz > 0 ? w->train->max_row_nnz : 1);
  if (!s) {
    if (!(s = w->sp = calloc(1, sizeof *s))) return SG_ENOMEM;
    s->C = C;
    s->bias = malloc((size_t)C * sizeof *s->bias);
    s->db = malloc((size_t)C * sizeof *s->db);
    s->z = malloc((size_t)w->batch * (size_t)C * sizeof *s->z);
    if (!s->bias || !s->db || !s->z) return sg_err_set(SG_ENOMEM, "sparse grad: %d classes", C);
  }
  if (need > s->cap) {
    free(s->feat), free(s->pos), free(s->wc), free(s->dwc);
    s->feat = malloc(need * sizeof *s->feat);
    s->pos = malloc(need * sizeof *s->pos);
    s->wc = malloc(need * (size_t)C * sizeof *s->wc);
    s->dwc = malloc(need * (size_t)C * sizeof *s->dwc);
    s->cap = need;
    if (!s->feat || !s->pos || !s->wc || !s->dwc) {
      s->cap = 0;
      return sg_err_set(SG_ENOMEM, "sparse grad: buffers for %zu nonzeros x %d classes", need, C);
    }
  }
  step_indices(w, step);
  sg_batch_gather(w->bbuf, w->train, w->idx, w->batch, &s->b);
  const sg_batch_t *b = &s->b;
  const size_t nnz = (size_t)b->rowptr[b->n];
  memcpy(s->feat, b->col, nnz * sizeof *s->feat);
  qsort(s->feat, nnz, sizeof *s->feat, cmp_u32);
  size_t nf = 0;
  for (size_t k = 0; k < nnz; k++)
    if (nf == 0 || s->feat[nf - 1] != s->feat[k]) s->feat[nf++] = s->feat[k];
  s->nf = nf;
  for (size_t k = 0; k < nnz; k++) {
    size_t lo = 0, hi = nf; /* binary search: feat[lo] == col[k] */
    while (hi - lo > 1) {
      size_t mid = (lo + hi) / 2;
      if (s->feat[mid] <= b->col[k]) lo = mid;
      else hi = mid;
    }
    s->pos[k] = (uint32_t)lo;
  }
  return SG_OK;
}

/* The embedding model (model_embed.h): the dense MLP and the rows the
 * batch of `step` touches; *b gets the gathered batch. */
static sg_embed_t *embed_batch(sg_workload_t *w, int64_t step, sg_batch_t *b) {
  sg_embed_t *m = sg_model_embed(w->model);
  if (!m || !w->train || step < 0) return NULL;
  step_indices(w, step);
  sg_batch_gather(w->bbuf, w->train, w->idx, w->batch, b);
  return m;
}

int sg_workload_sparse_coords(sg_workload_t *w, int64_t step, uint32_t *idx, size_t cap,
                              size_t *n) {
  sg_batch_t eb;
  sg_embed_t *em = embed_batch(w, step, &eb);
  if (em) return sg_embed_batch_coords(em, &eb, idx, cap, n, NULL);
  SG_CHECK(sparse_prepare(w, step));
  const struct sg_wl_sparse *s = w->sp;
  const size_t C = (size_t)w->classes, d = (size_t)w->d;
  *n = C * s->nf + C;
  if (cap < *n)
    return sg_err_set(SG_ERANGE, "sparse coords: step %lld needs %zu indices, room for %zu",
                      (long long)step, *n, cap);
  size_t j = 0;
  for (size_t c = 0; c < C; c++)
    for (size_t p = 0; p < s->nf; p++) idx[j++] = (uint32_t)(c * d + s->feat[p]);
  for (size_t c = 0; c < C; c++) idx[j++] = (uint32_t)(C * d + c);
  return SG_OK;
}

/* Walk idx (strictly increasing) against the step's coordinates: calls
 * visit(j, slot) with slot = place in [wc | bias] of idx[j], or -1 when
 * idx[j] is not one the batch reads.  Returns how many matched, or a
 * negative error for an unsorted / out-of-range idx. */
#define SPARSE_WALK(w, s, idx, n, VISIT)                                              \
  do {                                                                                \
    const uint64_t d_ = (uint64_t)(w)->d, C_ = (uint64_t)(w)->classes;               \
    size_t p_ = 0;                                                                    \
    uint64_t cprev_ = UINT64_MAX;                                                     \
    for (size_t j = 0; j < (n); j++) {                                                \
      if (j && (idx)[j] <= (idx)[j - 1])                                              \
        return sg_err_set(SG_EINVAL, "sparse grad: idx[%zu] = %u after %u (not increasing)", \
                          j, (unsigned)(idx)[j], (unsigned)(idx)[j - 1]);             \
      const uint64_t i_ = (idx)[j], c_ = i_ / d_, f_ = i_ % d_;                       \
      int64_t slot = -1;                                                              \
      if (c_ < C_) {                                                                  \
        if (c_ != cprev_) p_ = 0, cprev_ = c_;                                        \
        while (p_ < (s)->nf && (s)->feat[p_] < f_) p_++;                              \
        if (p_ < (s)->nf && (s)->feat[p_] == f_) slot = (int64_t)(p_ * C_ + c_);      \
      } else if (i_ < C_ * d_ + C_) {                                                 \
        slot = (int64_t)((s)->nf * C_ + (i_ - C_ * d_));                              \
      } else {                                                                        \
        return sg_err_set(SG_ERANGE, "sparse grad: idx[%zu] = %llu >= %llu parameters", \
                          j, (unsigned long long)i_, (unsigned long long)(C_ * d_ + C_)); \
      }                                                                               \
      VISIT;                                                                          \
    }                                                                                 \
  } while (0)

int sg_workload_grad_sparse(sg_workload_t *w, const float *params, int64_t step,
                            const uint32_t *idx, size_t n, float *gval, double *loss) {
  sg_batch_t eb;
  sg_embed_t *em = embed_batch(w, step, &eb);
  if (em) return sg_embed_batch_grad_at(em, params, &eb, idx, n, gval, loss);
  SG_CHECK(sparse_prepare(w, step));
  struct sg_wl_sparse *s = w->sp;
  const int C = w->classes;
  const size_t ncoef = s->nf * (size_t)C;
  size_t matched = 0;
  /* Read params at idx only, into Wc and the bias. */
  SPARSE_WALK(w, s, idx, n, {
    if (slot >= 0) {
      if ((size_t)slot < ncoef) s->wc[slot] = params[idx[j]];
      else s->bias[(size_t)slot - ncoef] = params[idx[j]];
      matched++;
    }
  });
  if (matched != ncoef + (size_t)C)
    return sg_err_set(SG_EINVAL, "sparse grad: idx holds %zu of the %zu coordinates step %lld "
                      "reads (use sg_workload_sparse_coords)", matched, ncoef + (size_t)C,
                      (long long)step);
  /* Forward and backward in sg_csr_forward / sg_csr_backward's order. */
  const sg_batch_t *b = &s->b;
  for (int i = 0; i < b->n; i++) {
    float *z = s->z + (size_t)i * C;
    memcpy(z, s->bias, (size_t)C * sizeof *z);
    for (int64_t k = b->rowptr[i]; k < b->rowptr[i + 1]; k++) {
      const float v = b->val[k];
      const float *wr = s->wc + (size_t)s->pos[k] * C;
      for (int c = 0; c < C; c++) z[c] += v * wr[c];
    }
  }
  double sum = sg_softmax_xent(s->z, b->y, b->n, C, 1.0f / (float)b->n, 1, NULL);
  *loss = sum / b->n;
  memset(s->dwc, 0, ncoef * sizeof *s->dwc);
  memset(s->db, 0, (size_t)C * sizeof *s->db);
  for (int i = 0; i < b->n; i++) {
    const float *g = s->z + (size_t)i * C;
    for (int c = 0; c < C; c++) s->db[c] += g[c];
    for (int64_t k = b->rowptr[i]; k < b->rowptr[i + 1]; k++) {
      const float v = b->val[k];
      float *dr = s->dwc + (size_t)s->pos[k] * C;
      for (int c = 0; c < C; c++) dr[c] += v * g[c];
    }
  }
  SPARSE_WALK(w, s, idx, n, {
    gval[j] = slot < 0 ? 0.0f
              : (size_t)slot < ncoef ? s->dwc[slot] : s->db[(size_t)slot - ncoef];
  });
  return SG_OK;
}
#undef SPARSE_WALK
