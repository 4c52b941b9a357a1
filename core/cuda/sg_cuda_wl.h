/* sg_cuda_wl.h - the workload on the device: datasets uploaded once, gradient and evaluation.
 * Part of the CUDA layer's interface (sg_cuda.h includes every part);
 * cuda_none.c stands in for all of it in a build without CUDA. */
#ifndef SG_CUDA_WL_H
#define SG_CUDA_WL_H

#include <stddef.h>
#include <stdint.h>

#include "bucket_plan.h"
#include "dataset.h"

/* ---- the workload on the device (cuda_workload.c, cuda_model.c) -------- */

typedef struct sg_cuda_wl sg_cuda_wl_t;
typedef struct sg_cuda_wl_desc {
  int L;                /* layers */
  const int64_t *dims;  /* L + 1 sizes: input, hidden..., classes (model.h) */
  int max_rows;         /* largest batch or evaluation chunk */
  const sg_dataset_t *train, *test; /* dense; either may be NULL */
  int tf32;             /* GEMMs on TF32 tensor cores (default fp32) */
  int cnn;              /* model: cnn (cuda_cnn.h): L = 1, dims = {side^2, classes} */
} sg_cuda_wl_desc_t;

/* Uploads the datasets and allocates every buffer once.  SG_EUNSUPPORTED
 * for CSR data (the device path is dense only). */
int sg_cuda_wl_new(sg_cuda_wl_t **out, const sg_cuda_wl_desc_t *d);
void sg_cuda_wl_destroy(sg_cuda_wl_t **cw);
size_t sg_cuda_wl_nparams(const sg_cuda_wl_t *cw);
/* Gradient of the mean loss over training rows idx[0..n) (model.h's
 * definition, the host model's parameter layout); dgrad fully
 * overwritten. */
int sg_cuda_wl_grad(sg_cuda_wl_t *cw, const float *dparams, float *dgrad, const uint32_t *idx,
                    int n, double *loss);
/* Overlap with backprop (cuda_model.h, cuda_cnn.h): fn(arg, off, len) as
 * backward issues the op that completes dgrad[off, off+len) on the
 * process stream, descending offsets (bucket_plan.h: sg_bucket_dev_ranges,
 * sg_bucket_cnn_ranges); with fn set, sg_cuda_wl_grad returns without
 * waiting (*loss = 0) and sg_cuda_wl_loss waits for the stream and gives
 * the loss. */
typedef int (*sg_cuda_ready_fn)(void *arg, size_t off, size_t len);
int sg_cuda_wl_set_ready(sg_cuda_wl_t *cw, sg_cuda_ready_fn fn, void *arg);
int sg_cuda_wl_loss(sg_cuda_wl_t *cw, double *loss);
/* The host overlap's buckets of this model with buckets of `bucket`
 * floats (bucket_plan.h): how many, written up to cap. */
size_t sg_cuda_wl_buckets(const sg_cuda_wl_t *cw, size_t bucket, sg_bucket_t *out, size_t cap);
/* The same with host params and grad (copied through the device). */
int sg_cuda_wl_grad_host(sg_cuda_wl_t *cw, const float *params, float *grad,
                         const uint32_t *idx, int n, double *loss);
/* Adds the test set's summed loss and correct rows for host params. */
int sg_cuda_wl_eval_host(sg_cuda_wl_t *cw, const float *params, double *loss_sum,
                         int64_t *correct);

#endif
