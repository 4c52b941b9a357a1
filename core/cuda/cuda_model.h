/* cuda_model.h - model.h's layer stack on the device (dense input only):
 * the same parameter layout (per layer W_l, dims[l+1] x dims[l] row-major,
 * then b_l), the same loss and the same step, with cuBLAS sgemm for the
 * products and cuda_kernels.cu for the rest. */
#ifndef SG_CUDA_MODEL_H
#define SG_CUDA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct sg_cmodel sg_cmodel_t;

int sg_cmodel_new(sg_cmodel_t **out, int L, const int64_t *dims, int max_rows, int tf32);
void sg_cmodel_destroy(sg_cmodel_t **m);
size_t sg_cmodel_nparams(const sg_cmodel_t *m);
/* Offsets of W_l and b_l in the flat vector (as model_mlp.c lays it out). */
size_t sg_cmodel_off_w(const sg_cmodel_t *m, int l);
size_t sg_cmodel_off_b(const sg_cmodel_t *m, int l);
/* Layer sizes into dims[0..L]; returns L. */
int sg_cmodel_dims(const sg_cmodel_t *m, int64_t *dims);

/* Mean loss over n rows (X n x dims[0] and y on the device) and its
 * gradient into dgrad (fully overwritten). */
int sg_cmodel_grad(sg_cmodel_t *m, const float *dparams, const float *X, const int32_t *y,
                   int n, float *dgrad, double *loss);
/* Overlap with backprop: fn(arg, off, len) right after backward issues
 * the op that completes dgrad[off, off+len) on the process stream
 * (descending offsets: per layer from the last, db then the whole dW);
 * a negative return stops the step.  With fn set, sg_cmodel_grad does
 * not wait for the stream and sets *loss = 0: sg_cmodel_loss waits and
 * gives the mean loss of that step's n rows.  fn NULL: the plain step. */
typedef int (*sg_cmodel_ready_fn)(void *arg, size_t off, size_t len);
void sg_cmodel_set_ready(sg_cmodel_t *m, sg_cmodel_ready_fn fn, void *arg);
int sg_cmodel_loss(sg_cmodel_t *m, int n, double *loss);
/* Adds the summed loss and the correct rows of n rows. */
int sg_cmodel_eval(sg_cmodel_t *m, const float *dparams, const float *X, const int32_t *y,
                   int n, double *loss_sum, int64_t *correct);

#endif
