/* workload.h - the one SGD workload every engine runs.
 *
 * A workload is a dataset, a model and an optimizer.  The model's
 * parameters are ONE contiguous float vector (layers are views into it), so
 * an engine can push, shard, reduce or broadcast the model as a flat buffer.
 *
 * Sharding: each epoch has one global permutation of the
 * training set, a pure function of (seed, epoch).  Worker w of N takes
 * positions w, w+N, w+2N, ... of it and cuts its list into batches of b.
 * The union of the N workers' step-t batches is then exactly `local`'s
 * step-t batch of size N*b.  Steps per epoch = floor(train / (N*b)): the
 * last partial global batch of an epoch is dropped, for every worker alike.
 */
#ifndef SG_WORKLOAD_H
#define SG_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "opts.h"

typedef struct sg_workload sg_workload_t;

enum {
  SG_WL_TRAIN = 1, /* load the training set (grad needs it) */
  SG_WL_TEST = 2,  /* load the test set (evaluate needs it) */
  SG_WL_ALL = 3,
};

typedef struct sg_eval {
  double test_loss;
  double test_acc;
} sg_eval_t;

/* Build the workload described by the settings in `o` (dataset, model,
 * batch, optimizer, seed; see settings.c) for worker `worker` of
 * `nworkers`.  `what` says which splits to load (a PS server needs none).
 * Errors name the file and offset (bad IDX), file:line (bad LIBSVM), or
 * the key (bad setting).  Caller owns the result. */
int sg_workload_new(sg_workload_t **out, const sg_opts_t *o, int worker,
                    int nworkers, unsigned what);
void sg_workload_destroy(sg_workload_t **w);

size_t sg_workload_nparams(const sg_workload_t *w);
int64_t sg_workload_steps_per_epoch(const sg_workload_t *w);
/* ceil(epochs * steps_per_epoch), capped by max_steps when it is > 0. */
int64_t sg_workload_total_steps(const sg_workload_t *w);
int sg_workload_batch(const sg_workload_t *w); /* per-worker batch b */

/* The most steps one run may take: a step sends a record the harness
 * commits, so more is never a real experiment (and max_steps allows no
 * more). */
#define SG_MAX_TOTAL_STEPS 1000000000000LL

/* *total = ceil(epochs * spe), capped by max_steps when it is > 0, computed
 * without overflow.  SG_ECONFIG (message names epochs / max_steps) when
 * epochs is not a finite number >= 0, when the count exceeds
 * SG_MAX_TOTAL_STEPS, or when it is 0: a run takes at least one step. */
int sg_workload_plan_steps(double epochs, int64_t spe, int64_t max_steps, int64_t *total);
/* A one-line description ("mlp 784-128-10 (101770 params), fashion-mnist
 * 60000/10000, batch 64"). */
const char *sg_workload_describe(const sg_workload_t *w);

/* Initial parameters, a pure function of the seed. */
int sg_workload_init_params(const sg_workload_t *w, float *params);
/* init: per-rank (a teaching fault): every worker makes its own initial
 * parameters and the engines skip the broadcast that would make them one. */
int sg_workload_init_per_rank(const sg_workload_t *w);

/* Gradient of the mean loss over this worker's batch of global step `step`
 * (epoch = step / steps_per_epoch).  grad has nparams elements and is fully
 * overwritten; *loss gets the batch's mean loss. */
int sg_workload_grad(sg_workload_t *w, const float *params, float *grad,
                     int64_t step, double *loss);

/* Gradient of the mean loss over positions [first, first+count) of this
 * worker's step-`step` batch of b samples (0 <= first, 1 <= count <=
 * b - first).  For a workload created as worker 0 of 1 with batch N*b
 * that is a slice of `local`'s global step-`step` batch, so any partition
 * of [0, b) into slices, each gradient weighted by count/b, sums to the
 * full-batch gradient (up to float summation order).  Reuses the buffers
 * sized for the full batch: allocates nothing.  sg_workload_grad is this
 * with first = 0, count = b.  grad is fully overwritten; *loss gets the
 * slice's mean loss. */
int sg_workload_grad_slice(sg_workload_t *w, const float *params, float *grad,
                           int64_t step, int64_t first, int64_t count, double *loss);

/* ---- device: cuda (device.h, core/cuda) --------------------------------
 * With `device: cuda` the workload keeps its data and runs its step on
 * the rank's CUDA device; sg_workload_grad / _grad_slice / _evaluate then
 * take host vectors and copy them through the device.  These two take
 * device vectors and copy nothing but the batch's row indices. */
int sg_workload_on_device(const sg_workload_t *w);
/* sg_workload_grad with device pointers (the parameter layout of the host
 * vector).  SG_EINVAL when the workload is not on a device. */
int sg_workload_grad_device(sg_workload_t *w, const float *dparams, float *dgrad, int64_t step,
                            double *loss);
/* The device side of the workload (sg_cuda_wl.h), or NULL on the cpu:
 * for an engine that hands backward's ranges over as they are issued
 * (allreduce's overlap). */
struct sg_cuda_wl *sg_workload_device(sg_workload_t *w);
/* sg_workload_grad_slice with device pointers (a mapreduce task). */
int sg_workload_grad_slice_device(sg_workload_t *w, const float *dparams, float *dgrad,
                                  int64_t step, int64_t first, int64_t count, double *loss);

/* ---- sparse step: softmax on CSR input (synthetic-sparse, LIBSVM), and
 * the embedding model (model_embed.h: the dense MLP prefix [0, dense_len)
 * and whole table rows, dense_len + r*E + e for each row r the batch
 * touches).  Other models/inputs return SG_EUNSUPPORTED.  Indices are uint32_t:
 * the model must have < 2^32 parameters (else SG_EUNSUPPORTED).
 *
 * idx[0..*n) = the sorted, unique parameter indices this worker's batch of
 * `step` reads and writes: W[c][f] = c*d + f for every class c and every
 * feature f present in the batch, then the C biases C*d + c.  *n is set
 * even when cap is too small (SG_ERANGE): grow to *n and call again. */
int sg_workload_sparse_coords(sg_workload_t *w, int64_t step, uint32_t *idx,
                              size_t cap, size_t *n);

/* gval[j] = d loss / d params[idx[j]] for this worker's batch of `step`,
 * bit-equal to sg_workload_grad's value there (0 for an idx[j] the batch
 * does not read; the dense gradient is exactly zero off the coordinates).
 * idx must be strictly increasing and contain every coordinate
 * sg_workload_sparse_coords returns (else SG_EINVAL).  params is read at
 * idx only: the rest may be stale.  O(batch nnz * classes + n): nothing of
 * the model's full size is touched. */
int sg_workload_grad_sparse(sg_workload_t *w, const float *params, int64_t step,
                            const uint32_t *idx, size_t n, float *gval,
                            double *loss);

/* Loss and accuracy of params on the test set. */
int sg_workload_evaluate(sg_workload_t *w, const float *params, sg_eval_t *out);

/* ---- optimizer: SGD with momentum, weight decay, lr schedule ---------- */

typedef struct sg_optim sg_optim_t;

/* An optimizer for `n` parameters (the whole vector, or a PS server's
 * shard): update is elementwise, so a shard's update equals the same slice
 * of the whole vector's.  The schedule (warm-up, step, cosine) is computed
 * from the settings and the workload's steps per epoch / total steps.
 * Caller owns the result. */
int sg_optim_new(sg_optim_t **out, const sg_opts_t *o, size_t n,
                 int64_t steps_per_epoch, int64_t total_steps);
void sg_optim_destroy(sg_optim_t **opt);
/* Learning rate at `step`. */
double sg_optim_lr(const sg_optim_t *opt, int64_t step);
/* params[i] -= update(grad[i]) for i < n, momentum state kept inside. */
void sg_optim_apply(sg_optim_t *opt, float *params, const float *grad,
                    int64_t step);

/* The update of params[off, off+len) from scale * grad[off, off+len)
 * (the momentum state of the same range): what an allreduce worker
 * applies to the sum of N gradients (scale 1/N), over the whole vector or
 * over the range it owns (docs/engines/allreduce.md, sharded update). */
void sg_optim_apply_range(sg_optim_t *opt, float *params, const float *grad, size_t off,
                          size_t len, float scale, int64_t step);
/* The same with the gradient given as two parts, grad[off + i] + more[i]
 * for i < len (more NULL: grad alone), added in float32 and never
 * stored: the same bits as storing the sum and calling the above. */
void sg_optim_apply_range2(sg_optim_t *opt, float *params, const float *grad,
                           const float *more, size_t off, size_t len, float scale, int64_t step);

/* Whether a coordinate whose gradient is zero stays put (plain SGD: no
 * momentum, no weight decay), so that updating only the coordinates with
 * a gradient is the whole update exactly (a PS server's sparse path). */
int sg_optim_sparse_exact(const sg_optim_t *opt);
/* The update at params[idx[j]] for j < m only, the same per-coordinate
 * arithmetic as sg_optim_apply; only when sg_optim_sparse_exact. */
void sg_optim_apply_at(sg_optim_t *opt, float *params, const float *grad,
                       const uint32_t *idx, size_t m, int64_t step);

/* Convenience: an optimizer for this workload's whole parameter vector. */
int sg_workload_optim_new(const sg_workload_t *w, const sg_opts_t *o,
                          sg_optim_t **out);

/* The BLAS library in use, e.g. "OpenBLAS 0.3.21 core=Haswell threads=1". */
const char *sg_blas_info(void);
/* denormals: flush (1) or keep (0) in the calling thread (blas.c). */
void sg_denormals_flush(int on);
int sg_denormals_flushed(void);
/* The run's `denormals` setting (flush unless "keep") in the calling
 * thread; sg_workload_new applies it too. */
void sg_denormals_apply(const sg_opts_t *o);
/* Set the BLAS thread count for this process. */
void sg_blas_set_threads(int n);

#endif
