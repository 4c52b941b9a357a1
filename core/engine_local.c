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
 * Bytes moved per step: none.
 */
#include <math.h>
#include <stdlib.h>

#include "clock.h"
#include "engine.h"
#include "err.h"

static int local_layout(const sg_opts_t *o, int workers, int *nprocs) {
  (void)o;
  (void)workers;
  *nprocs = 1;
  return SG_OK;
}

static int local_run(sg_rank_ctx_t *ctx) {
  sg_opts_t *o = NULL;
  sg_workload_t *wl = NULL;
  sg_optim_t *opt = NULL;
  sg_trainlog_t *log = NULL;
  float *params = NULL, *grad = NULL;
  int64_t batch;
  int rc;

  /* One process does the work of N workers: batch N*b. */
  SG_TRY(sg_opts_int(ctx->opts, "batch", &batch));
  if (!(o = sg_opts_dup(ctx->opts))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_opts_setf(o, "batch", "%lld", (long long)batch * ctx->workers));
  SG_TRY(sg_workload_new(&wl, o, 0, 1, SG_WL_ALL));

  size_t n = sg_workload_nparams(wl);
  int64_t total = sg_workload_total_steps(wl), spe = sg_workload_steps_per_epoch(wl);
  params = malloc(n * sizeof *params);
  grad = malloc(n * sizeof *grad);
  if (!params || !grad) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_workload_init_params(wl, params));
  SG_TRY(sg_workload_optim_new(wl, o, &opt));
  SG_TRY(sg_records_info(ctx->rec, "workload", sg_workload_describe(wl)));
  SG_TRY(sg_records_info(ctx->rec, "blas", sg_blas_info()));
  SG_TRY(sg_trainlog_new(&log, ctx, wl, 1));
  sg_trainlog_set_global_batch(log, batch * ctx->workers);
  SG_TRY(sg_trainlog_begin(log, params));

  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    double t = sg_now();
    sg_engine_delay(ctx);
    SG_TRY(sg_workload_grad(wl, params, grad, step, &s.loss));
    sg_optim_apply(opt, params, grad, step);
    s.compute_s = sg_now() - t;
    SG_TRY(sg_trainlog_step(log, &s, params));
  }
  SG_TRY(sg_engine_dump_params(ctx, params, n));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&wl);
  sg_opts_destroy(&o);
  free(params);
  free(grad);
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
