/* toy_engine.c - `toy`: the smallest engine, built only in tests.
 *
 * It follows docs/design.md, "Adding an engine", and touches no file
 * under harness/ or rank/: its table registers itself before main
 * (sg_engine_register), and tests/engine_toy/CMakeLists.txt links it into
 * a copy of `sgdlab` and of `sgdlab-rank` of its own.
 *
 * Schedule (all N ranks are workers; toy_root also evaluates):
 *   every step t, on every rank r:
 *     g_r = grad(params, batch_t of worker r)
 *     ranks != toy_root send g_r to toy_root; it sums g_0..g_{N-1} in rank
 *     order, divides by N and sends the mean back to each
 *     params = apply(params, mean, t)         the same on every rank
 * Bytes per step: 4*nparams each way per non-root rank.
 *
 * Its one option, toy_root, is parsed once into toy_conf_t before the
 * loop.  Built with TOY_PLANT_LATE_READ it reads it again by string every
 * step: the planted fault that the late-read count (core/opts.h) catches.
 */
#include <stdlib.h>

#include "clock.h"
#include "engine.h"
#include "err.h"

#define TOY_TAG_GRAD 1
#define TOY_TAG_MEAN 2

/* clang-format off */
static const sg_setting_t toy_options[] = {
  {"toy_root", SG_T_INT, "0", "toy: the rank that averages the gradients and evaluates", NULL, 0, 1 << 20, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

/* The engine's options, typed, filled and checked once at rank start. */
typedef struct toy_conf {
  int root;
} toy_conf_t;

static int toy_conf_load(toy_conf_t *c, const sg_rank_ctx_t *ctx) {
  int64_t root;
  SG_CHECK(sg_opts_int(ctx->opts, "toy_root", &root));
  if (root >= ctx->size)
    return sg_err_set(SG_ECONFIG, "toy_root: %lld is not a rank of %d", (long long)root,
                      ctx->size);
  c->root = (int)root;
  return SG_OK;
}

/* The harness's check before anything starts: toy_root names a worker. */
static int toy_layout(const sg_opts_t *o, int workers, int *nprocs) {
  int64_t root;
  SG_CHECK(sg_opts_int(o, "toy_root", &root));
  if (root >= workers)
    return sg_err_set(SG_ECONFIG, "toy_root: %lld is not a rank of %d workers", (long long)root,
                      workers);
  *nprocs = workers;
  return SG_OK;
}

typedef struct toy {
  toy_conf_t conf;
  sg_rank_ctx_t *ctx;
  size_t n;
  float *params, *grad, *peer;
} toy_t;

/* The mean gradient into t->grad on every rank. */
static int toy_average(toy_t *t) {
  sg_comm_t *c = t->ctx->comm;
  size_t len = t->n * sizeof *t->grad;
  sg_status_t st;
  if (c->rank != t->conf.root) {
    SG_CHECK(sg_send(c, t->conf.root, TOY_TAG_GRAD, t->grad, len));
    SG_CHECK(sg_recv(c, t->conf.root, TOY_TAG_MEAN, t->grad, len, &st));
    return st.bytes == len ? SG_OK : sg_err_set(SG_EPROTO, "toy: short mean from the root");
  }
  for (int r = 0; r < c->size; r++) {
    if (r == c->rank) continue;
    SG_CHECK(sg_recv(c, r, TOY_TAG_GRAD, t->peer, len, &st));
    if (st.bytes != len) return sg_err_set(SG_EPROTO, "toy: rank %d sent a short gradient", r);
    for (size_t i = 0; i < t->n; i++) t->grad[i] += t->peer[i];
  }
  const float scale = 1.0f / (float)c->size;
  for (size_t i = 0; i < t->n; i++) t->grad[i] *= scale;
  for (int r = 0; r < c->size; r++)
    if (r != c->rank) SG_CHECK(sg_send(c, r, TOY_TAG_MEAN, t->grad, len));
  return SG_OK;
}

static int toy_train(toy_t *t, sg_workload_t *wl, sg_optim_t *opt, sg_trainlog_t *log) {
  int64_t total = sg_workload_total_steps(wl), spe = sg_workload_steps_per_epoch(wl);
  const int root = t->ctx->rank == t->conf.root;
  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(t->ctx->rec), .staleness = -1};
#ifdef TOY_PLANT_LATE_READ
    SG_CHECK(toy_conf_load(&t->conf, t->ctx));
#endif
    double t0 = sg_now();
    sg_engine_delay(t->ctx, step);
    SG_CHECK(sg_workload_grad(wl, t->params, t->grad, step, &s.loss));
    double t1 = sg_now();
    SG_CHECK(toy_average(t));
    double t2 = sg_now();
    sg_optim_apply(opt, t->params, t->grad, step);
    s.compute_s = (t1 - t0) + (sg_now() - t2);
    s.comm_s = t2 - t1;
    SG_CHECK(sg_trainlog_step(log, &s, root ? t->params : NULL));
  }
  return root ? sg_engine_dump_params(t->ctx, t->params, t->n) : SG_OK;
}

static int toy_run(sg_rank_ctx_t *ctx) {
  toy_t t = {.ctx = ctx};
  sg_workload_t *wl = NULL;
  sg_optim_t *opt = NULL;
  sg_trainlog_t *log = NULL;
  int rc;
  SG_TRY(toy_conf_load(&t.conf, ctx));
  const int root = ctx->rank == t.conf.root;
  SG_TRY(sg_workload_new(&wl, ctx->opts, ctx->rank, ctx->size, root ? SG_WL_ALL : SG_WL_TRAIN));
  t.n = sg_workload_nparams(wl);
  t.params = malloc(t.n * sizeof *t.params);
  t.grad = malloc(t.n * sizeof *t.grad);
  t.peer = malloc(t.n * sizeof *t.peer);
  if (!t.params || !t.grad || !t.peer) {
    rc = sg_err_set(SG_ENOMEM, "toy: no memory for %zu parameters", t.n);
    goto fail;
  }
  SG_TRY(sg_workload_init_params(wl, t.params));
  SG_TRY(sg_workload_optim_new(wl, ctx->opts, &opt));
  SG_TRY(sg_trainlog_new(&log, ctx, wl, root));
  SG_TRY(sg_barrier(ctx->comm));
  SG_TRY(sg_trainlog_begin(log, root ? t.params : NULL));
  SG_TRY(toy_train(&t, wl, opt, log));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&wl);
  free(t.params);
  free(t.grad);
  free(t.peer);
  return rc;
}

static const sg_role_info_t toy_roles[] = {{"worker", SG_ROLE_WORKER}, {NULL, 0}};

const sg_engine_t sg_engine_toy = {
    .name = "toy",
    .summary = "test only: every worker sends its gradient to toy_root, which averages and sends the mean back",
    .options = toy_options,
    .layout = toy_layout,
    .roles = toy_roles,
    .devices = "|cpu|",
    .run = toy_run,
};

/* Registration: before main, in whichever program links this file. */
__attribute__((constructor)) static void toy_register(void) {
  if (sg_engine_register(&sg_engine_toy) < 0) abort();
}
