/* cuda_workload.c - the workload's data and step on the device.
 *
 * The training and test sets are uploaded once (dense float32 rows and
 * int32 labels).  A step uploads only the batch's row indices (the host
 * computes them exactly as workload.c does), gathers the rows on the
 * device and runs the device model (cuda_model.c).  The host-pointer
 * variants copy the parameters up and the gradient down (whole vectors:
 * the engines that hold host vectors, ps and mapreduce, use these).
 */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "bucket_plan.h"
#include "cuda_cnn.h"
#include "cuda_impl.h"
#include "cuda_model.h"
#include "err.h"
#include "sg_cuda_rt.h"
#include "sg_cuda_wl.h"

struct sg_cuda_wl {
  sg_cmodel_t *model;
  sg_ccnn_t *cnn; /* model: cnn (cuda_cnn.h) instead of the layer stack */
  int64_t d;
  int max_rows;
  int64_t ntrain, ntest;
  float *train_x, *test_x, *xb;   /* device */
  int32_t *train_y, *test_y, *yb; /* device */
  uint32_t *didx;                 /* device, max_rows */
  uint32_t *hidx;                 /* pinned host, max_rows */
  float *dparams, *dgrad;         /* for the host-pointer variants */
  int last_n;                     /* rows of the last gradient (a deferred loss) */
};

static int upload(void **dst, const void *src, size_t bytes, const char *what) {
  cudaError_t e = cudaMalloc(dst, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    *dst = NULL;
    return sg_err_set(SG_ENOMEM, "device memory for the %s (%zu bytes): %s", what, bytes,
                      cudaGetErrorString(e));
  }
  SG_CU(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
  return SG_OK;
}

static int upload_set(const sg_dataset_t *ds, float **x, int32_t **y, const char *what) {
  if (sg_dataset_sparse(ds))
    return sg_err_set(SG_EUNSUPPORTED, "device: cuda runs dense input only; the %s is sparse "
                      "(CSR): use device: cpu for synthetic-sparse and sparse libsvm data", what);
  SG_CHECK(upload((void **)x, ds->x, (size_t)ds->n * (size_t)ds->d * sizeof(float), what));
  SG_CHECK(upload((void **)y, ds->y, (size_t)ds->n * sizeof(int32_t), what));
  return SG_OK;
}

int sg_cuda_wl_new(sg_cuda_wl_t **out, const sg_cuda_wl_desc_t *d) {
  int rc;
  sg_cuda_wl_t *w = calloc(1, sizeof *w);
  if (!w) return SG_ENOMEM;
  w->d = d->dims[0];
  w->max_rows = d->max_rows;
  if (d->cnn)
    SG_TRY(sg_ccnn_new(&w->cnn, d->dims[0], (int)d->dims[d->L], d->max_rows, d->tf32));
  else
    SG_TRY(sg_cmodel_new(&w->model, d->L, d->dims, d->max_rows, d->tf32));
  if (d->train) {
    SG_TRY(upload_set(d->train, &w->train_x, &w->train_y, "training set"));
    w->ntrain = d->train->n;
  }
  if (d->test) {
    SG_TRY(upload_set(d->test, &w->test_x, &w->test_y, "test set"));
    w->ntest = d->test->n;
  }
  const size_t rows = (size_t)d->max_rows;
  SG_TRY(sg_cuda_alloc(&w->xb, rows * (size_t)w->d, "the batch"));
  SG_TRY(sg_cuda_alloc((float **)&w->yb, rows, "the batch labels"));
  SG_TRY(sg_cuda_alloc((float **)&w->didx, rows, "the batch indices"));
  if (cudaMallocHost((void **)&w->hidx, rows * sizeof *w->hidx) != cudaSuccess) {
    w->hidx = NULL;
    rc = sg_err_set(SG_ENOMEM, "pinned host memory for %zu batch indices", rows);
    goto fail;
  }
  const size_t n = sg_cuda_wl_nparams(w);
  SG_TRY(sg_cuda_alloc(&w->dparams, n, "the parameters"));
  SG_TRY(sg_cuda_alloc(&w->dgrad, n, "the gradient"));
  *out = w;
  return SG_OK;
fail:
  sg_cuda_wl_destroy(&w);
  return rc;
}

void sg_cuda_wl_destroy(sg_cuda_wl_t **pw) {
  if (!pw || !*pw) return;
  sg_cuda_wl_t *w = *pw;
  sg_cmodel_destroy(&w->model);
  sg_ccnn_destroy(&w->cnn);
  cudaFree(w->train_x);
  cudaFree(w->train_y);
  cudaFree(w->test_x);
  cudaFree(w->test_y);
  cudaFree(w->xb);
  cudaFree(w->yb);
  cudaFree(w->didx);
  if (w->hidx) cudaFreeHost(w->hidx);
  sg_cuda_free(&w->dparams);
  sg_cuda_free(&w->dgrad);
  free(w);
  *pw = NULL;
}

size_t sg_cuda_wl_nparams(const sg_cuda_wl_t *w) {
  return w->cnn ? sg_ccnn_nparams(w->cnn) : sg_cmodel_nparams(w->model);
}

int sg_cuda_wl_grad(sg_cuda_wl_t *w, const float *dparams, float *dgrad, const uint32_t *idx,
                    int n, double *loss) {
  cudaStream_t s = NULL;
  if (!w->train_x)
    return sg_err_set(SG_EINVAL, "grad: device workload has no training set");
  if (n < 1 || n > w->max_rows)
    return sg_err_set(SG_EINVAL, "grad: batch of %d rows (device workload sized for %d)", n,
                      w->max_rows);
  SG_CHECK(sg_cuda_stream(&s));
  /* the pinned copy may be reused only once the previous upload is done:
   * the step ends with a stream synchronization (the loss), so it is */
  memcpy(w->hidx, idx, (size_t)n * sizeof *idx);
  SG_CU(cudaMemcpyAsync(w->didx, w->hidx, (size_t)n * sizeof *idx, cudaMemcpyHostToDevice, s));
  SG_CU(sg_k_gather(w->train_x, w->train_y, w->didx, n, w->d, w->xb, w->yb, s));
  w->last_n = n;
  if (w->cnn) return sg_ccnn_grad(w->cnn, dparams, w->xb, w->yb, n, dgrad, loss);
  return sg_cmodel_grad(w->model, dparams, w->xb, w->yb, n, dgrad, loss);
}

int sg_cuda_wl_set_ready(sg_cuda_wl_t *w, sg_cuda_ready_fn fn, void *arg) {
  if (w->cnn) sg_ccnn_set_ready(w->cnn, fn, arg);
  else sg_cmodel_set_ready(w->model, fn, arg);
  return SG_OK;
}

int sg_cuda_wl_loss(sg_cuda_wl_t *w, double *loss) {
  if (w->last_n < 1) return sg_err_set(SG_EINVAL, "grad: no deferred loss to wait for");
  if (w->cnn) return sg_ccnn_loss(w->cnn, w->last_n, loss);
  return sg_cmodel_loss(w->model, w->last_n, loss);
}

size_t sg_cuda_wl_buckets(const sg_cuda_wl_t *w, size_t bucket, sg_bucket_t *out, size_t cap) {
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  if (w->cnn) return sg_bucket_plan_cnn(sg_ccnn_geom(w->cnn), bucket, out, cap);
  const int L = sg_cmodel_dims(w->model, dims);
  return sg_bucket_plan_mlp(L, dims, bucket, out, cap);
}

int sg_cuda_wl_grad_host(sg_cuda_wl_t *w, const float *params, float *grad,
                         const uint32_t *idx, int n, double *loss) {
  const size_t np = sg_cuda_wl_nparams(w);
  SG_CHECK(sg_cuda_put(w->dparams, params, np));
  SG_CHECK(sg_cuda_wl_grad(w, w->dparams, w->dgrad, idx, n, loss));
  return sg_cuda_get(grad, w->dgrad, np);
}

int sg_cuda_wl_eval_host(sg_cuda_wl_t *w, const float *params, double *loss_sum,
                         int64_t *correct) {
  if (!w->test_x) return sg_err_set(SG_EINVAL, "evaluate: device workload has no test set");
  SG_CHECK(sg_cuda_put(w->dparams, params, sg_cuda_wl_nparams(w)));
  for (int64_t s = 0; s < w->ntest; s += w->max_rows) {
    int n = (int)(w->ntest - s < w->max_rows ? w->ntest - s : w->max_rows);
    const float *x = w->test_x + (size_t)s * (size_t)w->d;
    if (w->cnn)
      SG_CHECK(sg_ccnn_eval(w->cnn, w->dparams, x, w->test_y + s, n, loss_sum, correct));
    else
      SG_CHECK(sg_cmodel_eval(w->model, w->dparams, x, w->test_y + s, n, loss_sum, correct));
  }
  return SG_OK;
}
