/* sg_cuda_wl.h - the workload on the device: datasets uploaded once, gradient and evaluation.
 * Part of the CUDA layer's interface (sg_cuda.h includes every part);
 * cuda_none.c stands in for all of it in a build without CUDA. */
#ifndef SG_CUDA_WL_H
#define SG_CUDA_WL_H

#include <stddef.h>
#include <stdint.h>

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
/* The same with host params and grad (copied through the device). */
int sg_cuda_wl_grad_host(sg_cuda_wl_t *cw, const float *params, float *grad,
                         const uint32_t *idx, int n, double *loss);
/* Adds the test set's summed loss and correct rows for host params. */
int sg_cuda_wl_eval_host(sg_cuda_wl_t *cw, const float *params, double *loss_sum,
                         int64_t *correct);

#endif
