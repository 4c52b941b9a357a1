/* engine_local.c - `local`: plain minibatch SGD in one process.
 *
 * The reference every other engine is checked against.  With `workers: N`
 * and `batch: b` in the experiment file, `local` trains ONE process on the
 * global batch N*b, so that its updates are exactly those a synchronous
 * engine with N workers of batch b performs: for every
 * step t,
 *
 *     g_t = grad(params, batch_t)         batch_t = N*b samples
 *     params = apply(params, g_t, t)      SGD + momentum + decay + schedule
 *
 * With `device: cuda` the parameters, the gradient and the momentum live
 * in device memory for the whole run: a step uploads only the batch's row
 * indices (the data sets are on the device), the update is one kernel
 * (optim.c's, sg_cuda_sgd), and the parameters come down only when the
 * step is evaluated (sg_trainlog_due) and at the end (dump_params).
 *
 * Bytes moved per step: none.
 */
#include <math.h>
#include <stdlib.h>

#include "clock.h"
#include "cuda/sg_cuda.h"
#include "device.h"
#include "engine.h"
#include "err.h"

static int local_layout(const sg_opts_t *o, int workers, int *nprocs) {
  (void)o;
  (void)workers;
  *nprocs = 1;
  return SG_OK;
}

typedef struct local_state {
  sg_opts_t *o;
  sg_workload_t *wl;
  sg_optim_t *opt;
  sg_trainlog_t *log;
  float *params, *grad; /* host (grad: cpu only) */
  float *dp, *dg, *dv;  /* device: cuda */
  double mu, wd;        /* momentum, weight_decay: parsed once (device update) */
  size_t n;
} local_state_t;

/* The device vectors: params uploaded once, momentum zeroed once. */
static int device_setup(local_state_t *L) {
  SG_CHECK(sg_setting_double(L->o, NULL, "momentum", &L->mu));
  SG_CHECK(sg_setting_double(L->o, NULL, "weight_decay", &L->wd));
  SG_CHECK(sg_cuda_alloc(&L->dp, L->n, "the parameters"));
  SG_CHECK(sg_cuda_alloc(&L->dg, L->n, "the gradient"));
  if (L->mu > 0) {
    SG_CHECK(sg_cuda_alloc(&L->dv, L->n, "the momentum"));
    SG_CHECK(sg_cuda_zero(L->dv, L->n));
  }
  return sg_cuda_put(L->dp, L->params, L->n);
}

static int setup(local_state_t *L, sg_rank_ctx_t *ctx) {
  int64_t batch;
  /* One process does the work of N workers: batch N*b. */
  SG_CHECK(sg_opts_int(ctx->opts, "batch", &batch));
  if (!(L->o = sg_opts_dup(ctx->opts))) return SG_ENOMEM;
  SG_CHECK(sg_opts_setf(L->o, "batch", "%lld", (long long)batch * ctx->workers));
  SG_CHECK(sg_workload_new(&L->wl, L->o, 0, 1, SG_WL_ALL));
  L->n = sg_workload_nparams(L->wl);
  const int dev = sg_workload_on_device(L->wl);
  L->params = malloc(L->n * sizeof *L->params);
  L->grad = dev ? NULL : malloc(L->n * sizeof *L->grad);
  if (!L->params || (!dev && !L->grad)) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(L->wl, L->params));
  SG_CHECK(sg_workload_optim_new(L->wl, L->o, &L->opt));
  if (dev) SG_CHECK(device_setup(L));
  SG_CHECK(sg_records_info(ctx->rec, "workload", sg_workload_describe(L->wl)));
  SG_CHECK(sg_records_info(ctx->rec, "blas", sg_blas_info()));
  if (dev) SG_CHECK(sg_records_info(ctx->rec, "device", sg_device_build()));
  SG_CHECK(sg_trainlog_new(&L->log, ctx, L->wl, 1));
  sg_trainlog_set_global_batch(L->log, batch * ctx->workers);
  return SG_OK;
}

/* One step on the host vectors, or on the device ones; *eval_params is
 * the host vector the trainlog evaluates (NULL when it does not). */
static int one_step(local_state_t *L, int64_t step, double *loss, const float **eval_params) {
  if (!L->dp) {
    SG_CHECK(sg_workload_grad(L->wl, L->params, L->grad, step, loss));
    sg_optim_apply(L->opt, L->params, L->grad, step);
    *eval_params = L->params;
    return SG_OK;
  }
  SG_CHECK(sg_workload_grad_device(L->wl, L->dp, L->dg, step, loss));
  SG_CHECK(sg_cuda_sgd(L->dp, L->dg, L->dv, L->n, 1.0f, (float)sg_optim_lr(L->opt, step),
                       (float)L->wd, (float)L->mu));
  *eval_params = NULL;
  if (sg_trainlog_due(L->log, step)) { /* waits for the update */
    SG_CHECK(sg_cuda_get(L->params, L->dp, L->n));
    *eval_params = L->params;
  }
  return SG_OK;
}

static int train(local_state_t *L, sg_rank_ctx_t *ctx) {
  int64_t total = sg_workload_total_steps(L->wl), spe = sg_workload_steps_per_epoch(L->wl);
  SG_CHECK(sg_trainlog_begin(L->log, L->params));
  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    const float *ep = NULL;
    double t = sg_now();
    sg_engine_delay(ctx, step);
    SG_CHECK(one_step(L, step, &s.loss, &ep));
    s.compute_s = sg_now() - t;
    SG_CHECK(sg_trainlog_step(L->log, &s, ep));
  }
  if (L->dp) SG_CHECK(sg_cuda_get(L->params, L->dp, L->n));
  return sg_engine_dump_params(ctx, L->params, L->n);
}

static int local_run(sg_rank_ctx_t *ctx) {
  local_state_t L = {0};
  int rc;
  SG_TRY(setup(&L, ctx));
  SG_TRY(train(&L, ctx));
fail:
  sg_trainlog_destroy(&L.log);
  sg_optim_destroy(&L.opt);
  sg_workload_destroy(&L.wl);
  sg_opts_destroy(&L.o);
  sg_cuda_free(&L.dp);
  sg_cuda_free(&L.dg);
  sg_cuda_free(&L.dv);
  free(L.params);
  free(L.grad);
  return rc;
}
const sg_engine_t sg_engine_local = {
    .name = "local",
    .summary = "one process, plain minibatch SGD on the global batch workers*batch: the reference",
    .options = NULL,
    .layout = local_layout,
    .role = NULL,
    .check_transport = NULL,
    .run = local_run,
    .baseline = 1,
};
