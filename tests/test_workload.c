/* The workload API end to end on real Fashion-MNIST, LIBSVM files and
 * synthetic data: determinism, workers' union == local, evaluation, errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "err.h"
#include "opts.h"
#include "settings.h"
#include "run_util.h"
#include "test.h"
#include "workload.h"

/* Train `steps` steps; losses[] gets each step's loss. */
static int train(const char *kv, int steps, double *losses, sg_eval_t *ev) {
  sg_opts_t *o = ru_opts_kv(kv);
  sg_workload_t *w = NULL;
  sg_optim_t *opt = NULL;
  float *p = NULL, *g = NULL;
  int rc;
  SG_TRY(sg_workload_new(&w, o, 0, 1, ev ? SG_WL_ALL : SG_WL_TRAIN));
  SG_TRY(sg_workload_optim_new(w, o, &opt));
  p = malloc(sg_workload_nparams(w) * sizeof *p);
  g = malloc(sg_workload_nparams(w) * sizeof *g);
  SG_TRY(sg_workload_init_params(w, p));
  if (steps < 0) steps = (int)sg_workload_total_steps(w);
  for (int s = 0; s < steps; s++) {
    double l;
    SG_TRY(sg_workload_grad(w, p, g, s, &l));
    if (losses) losses[s] = l;
    sg_optim_apply(opt, p, g, s);
  }
  if (ev) SG_TRY(sg_workload_evaluate(w, p, ev));
fail:
  free(p);
  free(g);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
  return rc;
}

#define FM "dataset=fashion-mnist train_samples=3000 "

TEST(same_seed_same_losses_bitwise) {
  double a[50], b[50], c[50];
  CHECK_OK(train(FM "model=mlp hidden=32 batch=16 lr=0.05 momentum=0.9 seed=4", 50, a, NULL));
  CHECK_OK(train(FM "model=mlp hidden=32 batch=16 lr=0.05 momentum=0.9 seed=4", 50, b, NULL));
  CHECK_OK(train(FM "model=mlp hidden=32 batch=16 lr=0.05 momentum=0.9 seed=5", 50, c, NULL));
  CHECK(memcmp(a, b, sizeof a) == 0);
  CHECK(memcmp(a, c, sizeof a) != 0);
  CHECK(a[49] < a[0]); /* it learns */
}

/* Mean of N workers' gradients (batch b) == local's gradient (batch N*b)
 * for the same parameters, up to summation order; across an epoch boundary. */
TEST(workers_union_equals_local) {
  enum { N = 3, b = 8 };
  sg_opts_t *ow = ru_opts_kv("dataset=fashion-mnist train_samples=600 model=mlp hidden=16 batch=8 seed=2");
  sg_opts_t *ol = ru_opts_kv("dataset=fashion-mnist train_samples=600 model=mlp hidden=16 batch=24 seed=2");
  sg_workload_t *w[N] = {0}, *l = NULL;
  for (int i = 0; i < N; i++) CHECK_OK(sg_workload_new(&w[i], ow, i, N, SG_WL_TRAIN));
  CHECK_OK(sg_workload_new(&l, ol, 0, 1, SG_WL_TRAIN));
  CHECK_EQ_INT(sg_workload_steps_per_epoch(l), 25);
  CHECK_EQ_INT(sg_workload_steps_per_epoch(w[1]), 25);
  size_t n = sg_workload_nparams(l);
  float *p = malloc(n * 4), *gl = malloc(n * 4), *gw = malloc(n * 4), *sum = malloc(n * 4);
  CHECK_OK(sg_workload_init_params(l, p));
  const int64_t steps[] = {0, 1, 24, 25, 26};
  for (int k = 0; k < 5; k++) {
    double ll, lw, lsum = 0;
    CHECK_OK(sg_workload_grad(l, p, gl, steps[k], &ll));
    memset(sum, 0, n * 4);
    for (int i = 0; i < N; i++) {
      CHECK_OK(sg_workload_grad(w[i], p, gw, steps[k], &lw));
      lsum += lw;
      for (size_t j = 0; j < n; j++) sum[j] += gw[j] / N;
    }
    CHECK_NEAR(lsum / N, ll, 1e-5);
    double worst = 0;
    for (size_t j = 0; j < n; j++) worst = fmax(worst, fabs(sum[j] - gl[j]));
    CHECK_MSG(worst < 1e-5, "step %lld: max |diff| %g", (long long)steps[k], worst);
  }
  /* planted: worker 0 at the wrong step differs from local */
  double ll, lw;
  CHECK_OK(sg_workload_grad(l, p, gl, 0, &ll));
  CHECK_OK(sg_workload_grad(w[0], p, gw, 1, &lw));
  CHECK(fabs(lw - ll) > 1e-4 || memcmp(gl, gw, n * 4) != 0);
  for (int i = 0; i < N; i++) sg_workload_destroy(&w[i]);
  sg_workload_destroy(&l);
  free(p);
  free(gl);
  free(gw);
  free(sum);
  sg_opts_destroy(&ow);
  sg_opts_destroy(&ol);
}

TEST(fashion_mnist_softmax_learns_and_describes) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist model=mlp");
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 0, 1, SG_WL_TEST));
  CHECK_STR_CONTAINS(sg_workload_describe(w),
                     "mlp 784-128-10 (101770 params), fashion-mnist 60000/10000, batch 64");
  CHECK_EQ_INT(sg_workload_steps_per_epoch(w), 937);
  /* no training set loaded: grad refuses */
  float *p = malloc(101770 * 4), *g = malloc(101770 * 4);
  double l;
  CHECK_EQ_INT(sg_workload_grad(w, p, g, 0, &l), SG_EINVAL);
  free(p);
  free(g);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
  sg_eval_t ev;
  CHECK_OK(train("dataset=fashion-mnist model=softmax lr=0.1 epochs=1", -1, NULL, &ev));
  CHECK_MSG(ev.test_acc > 0.80, "accuracy %.4f", ev.test_acc);
  CHECK(ev.test_loss < 0.7);
}

TEST(server_needs_no_data) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist model=mlp hidden=64 batch=32 epochs=2.5 workers=4");
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 1, 4, 0));
  CHECK_EQ_INT(sg_workload_nparams(w), 784 * 64 + 64 + 64 * 10 + 10);
  CHECK_EQ_INT(sg_workload_steps_per_epoch(w), 60000 / 128);
  CHECK_EQ_INT(sg_workload_total_steps(w), (int64_t)ceil(2.5 * (60000 / 128)));
  sg_eval_t ev;
  CHECK_EQ_INT(sg_workload_evaluate(w, NULL, &ev), SG_EINVAL);
  sg_workload_destroy(&w);
  sg_opts_set(o, "max_steps", "10");
  CHECK_OK(sg_workload_new(&w, o, 0, 4, 0));
  CHECK_EQ_INT(sg_workload_total_steps(w), 10);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
}

/* denormals: flush (the default) makes a product below the smallest
 * normal float 0 in the thread that built the workload, keep leaves IEEE
 * gradual underflow; the BLAS line records which. */
static float tiny_product(void) {
  volatile float a = 1e-20f, b = 1e-20f; /* 1e-40: a denormal */
  return a * b;
}

TEST(denormals_flush_by_default_and_keep_on_request) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist model=mlp hidden=64 batch=32 workers=4");
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 1, 4, 0));
  CHECK(sg_denormals_flushed());
  CHECK(tiny_product() == 0.0f);
  CHECK(strstr(sg_blas_info(), "denormals=flush") != NULL);
  sg_workload_destroy(&w);
  sg_opts_set(o, "denormals", "keep");
  CHECK_OK(sg_workload_new(&w, o, 1, 4, 0));
  CHECK(!sg_denormals_flushed());
  CHECK(tiny_product() > 0.0f);
  CHECK(strstr(sg_blas_info(), "denormals=keep") != NULL);
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
  sg_denormals_flush(1);
}

static char dir[64];

static void write_sep(const char *path, int rows, int seed) {
  /* 3 classes, feature c+1 large for class c: trivially separable */
  FILE *f = fopen(path, "w");
  unsigned x = (unsigned)seed * 2654435761u;
  for (int i = 0; i < rows; i++) {
    x = x * 1103515245u + 12345u;
    int c = (int)((x >> 16) % 3);
    fprintf(f, "%d", c);
    for (int j = 1; j <= 5; j++) {
      x = x * 1103515245u + 12345u;
      double noise = ((x >> 16) % 1000) / 5000.0;
      fprintf(f, " %d:%.4f", j, (j == c + 1 ? 1.0 : 0.0) + noise);
    }
    fputc('\n', f);
  }
  fclose(f);
}

TEST(libsvm_separable_evaluates_high) {
  strcpy(dir, "/tmp/sgdlab-wl.XXXXXX");
  CHECK(mkdtemp(dir));
  char tr[128], te[128], kv[512];
  snprintf(tr, sizeof tr, "%s/train.svm", dir);
  snprintf(te, sizeof te, "%s/test.svm", dir);
  write_sep(tr, 600, 1);
  write_sep(te, 300, 2);
  sg_eval_t ev;
  snprintf(kv, sizeof kv, "dataset=libsvm train_file=%s test_file=%s classes=3 model=softmax "
                          "batch=10 lr=0.5 epochs=3", tr, te);
  CHECK_OK(train(kv, -1, NULL, &ev));
  CHECK_MSG(ev.test_acc >= 0.99, "accuracy %.4f", ev.test_acc);
  snprintf(kv, sizeof kv, "dataset=libsvm train_file=%s test_file=%s classes=3 model=mlp "
                          "hidden=8 batch=10 lr=0.2 epochs=3", tr, te);
  CHECK_OK(train(kv, -1, NULL, &ev));
  CHECK_MSG(ev.test_acc >= 0.99, "mlp accuracy %.4f", ev.test_acc);
  /* classes=2: label 2 on some line is out of range, named file:line */
  snprintf(kv, sizeof kv, "dataset=libsvm train_file=%s test_file=%s classes=2 model=softmax", tr,
           te);
  sg_opts_t *o = ru_opts_kv(kv);
  sg_workload_t *w = NULL;
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 1, SG_WL_ALL), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), tr);
  CHECK_STR_CONTAINS(sg_err_msg(), "label 2 out of range 0..1");
  sg_opts_destroy(&o);
}

/* 1-based labels, no classes, no test file: 3 outputs, a held-out test set */
TEST(libsvm_one_based_infers_classes_and_holds_out) {
  char tr[128], kv[512];
  snprintf(tr, sizeof tr, "%s/one.svm", dir);
  FILE *f = fopen(tr, "w");
  for (int i = 0; i < 300; i++) fprintf(f, "%d %d:1 4:0.5\n", i % 3 + 1, i % 3 + 1);
  fclose(f);
  snprintf(kv, sizeof kv, "dataset=libsvm train_file=%s holdout=0.1 model=softmax batch=10 "
                          "lr=0.5 epochs=3", tr);
  sg_opts_t *o = ru_opts_kv(kv);
  sg_workload_t *w = NULL;
  CHECK_OK(sg_workload_new(&w, o, 0, 1, SG_WL_ALL));
  CHECK_EQ_INT(sg_workload_nparams(w), (4 + 1) * 3); /* (d + 1) x 3 classes, not 10 */
  CHECK_STR_CONTAINS(sg_workload_describe(w), "libsvm 270/30");
  sg_workload_destroy(&w);
  sg_opts_destroy(&o);
  sg_eval_t ev;
  CHECK_OK(train(kv, -1, NULL, &ev));
  CHECK_MSG(ev.test_acc >= 0.99, "accuracy %.4f", ev.test_acc);
}

TEST(synthetic_dense_and_sparse_learn) {
  sg_eval_t ev;
  CHECK_OK(train("dataset=synthetic features=50 classes=5 train_samples=4000 test_samples=1000 "
                 "model=softmax lr=0.1 epochs=2", -1, NULL, &ev));
  CHECK_MSG(ev.test_acc > 0.6, "dense synthetic accuracy %.4f (chance 0.2)", ev.test_acc);
  CHECK_OK(train("dataset=synthetic-sparse features=1000000 nnz=40 classes=10 "
                 "train_samples=3000 test_samples=500 model=softmax lr=5 epochs=1", -1, NULL,
                 &ev));
  CHECK_MSG(ev.test_acc > 0.6, "sparse synthetic accuracy %.4f (chance 0.1)", ev.test_acc);
}

TEST(config_errors_name_the_key) {
  sg_opts_t *o = ru_opts_kv("dataset=fashion-mnist batch=40000");
  sg_workload_t *w = NULL;
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 2, 0), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "batch");
  sg_opts_destroy(&o);
  o = ru_opts_kv("dataset=fashion-mnist data_dir=/nonexistent/fm");
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 1, SG_WL_ALL), SG_ENOTFOUND);
  CHECK_STR_CONTAINS(sg_err_msg(), "/nonexistent/fm");
  sg_opts_destroy(&o);
  o = ru_opts_kv("dataset=libsvm");
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 1, SG_WL_ALL), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "train_file");
  sg_opts_destroy(&o);
  o = ru_opts_kv("dataset=synthetic");
  CHECK_EQ_INT(sg_workload_new(&w, o, 2, 2, 0), SG_EINVAL);
  sg_opts_destroy(&o);
  CHECK(w == NULL);
}

TEST(blas_info) {
  sg_blas_set_threads(1);
  const char *s = sg_blas_info();
  CHECK_STR_CONTAINS(s, "OpenBLAS 0.");
  CHECK_STR_CONTAINS(s, "core=");
  CHECK_STR_CONTAINS(s, "threads=1");
  CHECK_STR_CONTAINS(s, "(OPENBLAS_CORETYPE=");
  /* scripts/test.sh forces kernels by OPENBLAS_CORETYPE: they must be
   * the ones in use, or that pass tests nothing */
  const char *want = getenv("OPENBLAS_CORETYPE");
  if (want && *want) {
    const char *core = strstr(s, "core=") + 5;
    const size_t len = strcspn(core, " ");
    CHECK_MSG(len == strlen(want) && !strncasecmp(core, want, len),
              "OPENBLAS_CORETYPE=%s not in effect: %s", want, s);
  }
}
