/* allreduce_device.c - the allreduce engine with `device: cuda`.
 *
 * The same schedule as allreduce_engine.c, with the parameters, the
 * gradient and the momentum in device memory (the host vector's layout):
 *
 *   rank 0: params = init(seed) on the host; broadcast (host); upload
 *   every step t, on every rank r:
 *     g_r = grad on the device (batch_t of worker r)        compute_s
 *     g   = allreduce_sum(g_r) of the device vector         comm_s
 *     params = sgd(params, g / N, t)   one kernel: the scale and
 *                                      optim.c's update
 *   rank 0 copies params to the host only when it evaluates, and at the end
 *   for dump_params.
 *
 * How the device vector is summed: the row of the algorithm table
 * (allreduce.h) named by `algorithm`.  A host row (memory SG_AR_MEM_HOST)
 * runs on pinned host slots; a device row (SG_AR_MEM_DEVICE) carries its
 * own setup and run (struct sg_ar_dev_algo, below):
 *   ring | rhd | native  host-staged: chunks copied down into pinned slots,
 *                        summed by that host algorithm over the transport,
 *                        copied up, pipelined (core/cuda/stage_plan.h)
 *   cuda-ring            ranks on one host, inboxes shared by CUDA IPC;
 *                        cuda_ring: staged = ring primitives as kernels,
 *                        one host synchronization each (ring_prims.h);
 *                        persistent = one kernel per allreduce, flags in
 *                        device memory (core/cuda/pring_plan.h)
 *   nccl                 ncclAllReduce (one GPU per rank)
 * Step records carry the transport's byte counters plus, for cuda-ring and
 * nccl, the bytes the devices moved (cuda-ring: exact; nccl: the ring's
 * 2K(N-1)/N, K = 4 * nparams).
 */
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "clock.h"
#include "cuda/sg_cuda.h"
#include "cuda/ring_prims.h"
#include "device.h"
#include "engine.h"
#include "err.h"

#define STAGE_SLOTS 2 /* double buffering */

typedef struct dev_comm {
  const struct sg_ar_dev_algo *ops; /* the algorithm row's, or host-staged */
  sg_ar_t *ar;            /* host-staged: the host algorithm ... */
  sg_cuda_stage_t *stage; /* ... and the pinned slots */
  sg_cuda_ring_t *ring;
  sg_cuda_nccl_t *nccl;
  size_t seg;             /* cuda-ring: floats per inbox slot */
} dev_comm_t;

/* How a row of the algorithm table sums a device vector: setup once
 * (collective), then run per call; *dev_bytes = the bytes the devices
 * moved directly (past the transport's counters).  dc_destroy frees
 * whatever setup made. */
struct sg_ar_dev_algo {
  int (*setup)(dev_comm_t *dc, sg_rank_ctx_t *ctx, const char *algo, size_t n, size_t segment);
  int (*run)(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes);
};

/* ---- host rows (ring, rhd, tree, hier, native): staged through pinned slots */

static int host_reduce(void *arg, float *host, size_t len) { return sg_ar_run(arg, host, len); }

static int staged_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const char *algo, size_t n,
                        size_t segment) {
  int64_t chunk = 0;
  SG_CHECK(sg_opts_int_or(ctx->opts, "stage_chunk", 4 << 20, &chunk));
  size_t cf = (size_t)chunk / sizeof(float);
  if (cf == 0) cf = 1;
  if (cf > n && n > 0) cf = n;
  SG_CHECK(sg_ar_new(&dc->ar, ctx->comm, algo, segment, cf));
  return sg_cuda_stage_new(&dc->stage, cf, STAGE_SLOTS);
}

static int staged_run(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes) {
  (void)c;
  *dev_bytes = 0;
  return sg_cuda_stage_run(dc->stage, dgrad, n, host_reduce, dc->ar);
}

static const struct sg_ar_dev_algo staged_ops = {staged_setup, staged_run};

/* ---- cuda-ring ---------------------------------------------------------- */

static int ring_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const char *algo, size_t n,
                      size_t segment) {
  (void)algo, (void)n;
  const int mode = strcmp(sg_opts_str_or(ctx->opts, "cuda_ring", "staged"), "persistent")
                       ? SG_CUDA_RING_STAGED
                       : SG_CUDA_RING_PERSISTENT;
  dc->seg = segment / sizeof(float);
  return sg_cuda_ring_new(&dc->ring, ctx->comm, dc->seg, mode);
}

static int ring_run(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes) {
  *dev_bytes = 4 * (uint64_t)sg_dring_floats_sent(c->size, c->rank, n, dc->seg);
  return sg_cuda_ring_run(dc->ring, dgrad, n);
}

static const struct sg_ar_dev_algo cuda_ring_ops = {ring_setup, ring_run};

const sg_ar_algo_t sg_ar_cuda_ring = {
    .name = "cuda-ring",
    .summary = "device ring within one host: inboxes shared by CUDA IPC, the ring's steps as "
               "kernels (staged) or one kernel per allreduce (persistent)",
    .memory = SG_AR_MEM_DEVICE,
    .dev = &cuda_ring_ops,
};

/* ---- nccl --------------------------------------------------------------- */

/* NCCL refuses two ranks on one GPU: say so before it does. */
static int nccl_fits(const sg_rank_ctx_t *ctx) {
  int count = 0, lr = 0, ls = 0;
  int64_t g = 0;
  SG_CHECK(sg_cuda_probe(&count));
  SG_CHECK(sg_opts_int_or(ctx->opts, "gpus_per_host", 0, &g));
  if (g <= 0 || g > count) g = count;
  sg_device_local_rank(ctx->comm, &lr, &ls);
  if (ls > g)
    return sg_err_set(SG_ECONFIG, "algorithm: nccl needs a GPU per rank, but host %s runs %d "
                      "ranks on %lld GPU%s (NCCL refuses two ranks on one GPU); use cuda-ring "
                      "or a host algorithm", ctx->comm->hosts[ctx->rank], ls, (long long)g,
                      g == 1 ? "" : "s");
  return SG_OK;
}

static int nccl_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const char *algo, size_t n,
                      size_t segment) {
  (void)algo, (void)n, (void)segment;
  unsigned char id[SG_NCCL_ID_BYTES] = {0};
  SG_CHECK(nccl_fits(ctx));
  if (ctx->rank == 0) SG_CHECK(sg_cuda_nccl_id(id));
  SG_CHECK(sg_ar_bcast(ctx->comm, id, sizeof id, 0));
  return sg_cuda_nccl_new(&dc->nccl, id, ctx->rank, ctx->size);
}

static int nccl_run(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes) {
  *dev_bytes = (uint64_t)(2.0 * (c->size - 1) / c->size * 4.0 * (double)n);
  return sg_cuda_nccl_run(dc->nccl, dgrad, n);
}

static const struct sg_ar_dev_algo nccl_ops = {nccl_setup, nccl_run};

const sg_ar_algo_t sg_ar_nccl = {
    .name = "nccl",
    .summary = "ncclAllReduce on the device vector (one GPU per rank; builds with NCCL)",
    .memory = SG_AR_MEM_DEVICE,
    .dev = &nccl_ops,
};

/* ---- the row of the run's `algorithm` ------------------------------------ */

static int dc_new(dev_comm_t *dc, sg_rank_ctx_t *ctx, const char *algo, size_t n) {
  int64_t segment = 0;
  SG_CHECK(sg_opts_int_or(ctx->opts, "segment", 0, &segment));
  if (segment <= 0) segment = SG_AR_SEGMENT_DEFAULT;
  const sg_ar_algo_t *row = sg_ar_algo_find(algo);
  dc->ops = row && row->memory == SG_AR_MEM_DEVICE ? row->dev : &staged_ops;
  return dc->ops->setup(dc, ctx, algo, n, (size_t)segment);
}

/* Sum dgrad over the ranks; *dev_bytes = bytes the devices moved directly. */
static int dc_run(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes) {
  return dc->ops->run(dc, c, dgrad, n, dev_bytes);
}

static void dc_destroy(dev_comm_t *dc) {
  sg_cuda_nccl_destroy(&dc->nccl);
  sg_cuda_ring_destroy(&dc->ring);
  sg_cuda_stage_destroy(&dc->stage);
  sg_ar_destroy(&dc->ar);
}

struct sg_ar_dev {
  dev_comm_t dc;
  sg_comm_t *c;
};

int sg_ar_dev_new(sg_ar_dev_t **out, sg_rank_ctx_t *ctx, size_t n) {
  sg_ar_dev_t *d = calloc(1, sizeof *d);
  if (!d) return SG_ENOMEM;
  d->c = ctx->comm;
  int rc = dc_new(&d->dc, ctx, sg_opts_str_or(ctx->opts, "algorithm", "ring"), n);
  if (rc < 0) {
    sg_ar_dev_destroy(&d);
    return rc;
  }
  *out = d;
  return SG_OK;
}

int sg_ar_dev_run(sg_ar_dev_t *d, float *dbuf, size_t count) {
  uint64_t dev = 0; /* every path returns once the sum is in dbuf */
  return dc_run(&d->dc, d->c, dbuf, count, &dev);
}

void sg_ar_dev_destroy(sg_ar_dev_t **pd) {
  if (!pd || !*pd) return;
  dc_destroy(&(*pd)->dc);
  free(*pd);
  *pd = NULL;
}

typedef struct dev_state {
  sg_workload_t *wl;
  sg_optim_t *opt;
  sg_trainlog_t *log;
  dev_comm_t dc;
  float *params;          /* host: init, broadcast, evaluation, dump */
  float *dp, *dg, *dv;    /* device */
  double mu, wd;
} dev_state_t;

static int setup(dev_state_t *d, sg_rank_ctx_t *ctx, size_t *np) {
  const int root = ctx->rank == 0;
  SG_CHECK(sg_workload_new(&d->wl, ctx->opts, ctx->rank, ctx->size,
                           root ? SG_WL_ALL : SG_WL_TRAIN));
  const size_t n = *np = sg_workload_nparams(d->wl);
  if (!(d->params = sg_ar_alloc(n * sizeof *d->params)))
    return sg_err_set(SG_ENOMEM, "allreduce: no memory for %zu parameters", n);
  SG_CHECK(sg_cuda_alloc(&d->dp, n, "the parameters"));
  SG_CHECK(sg_cuda_alloc(&d->dg, n, "the gradient"));
  SG_CHECK(sg_opts_double_or(ctx->opts, "momentum", 0.0, &d->mu));
  SG_CHECK(sg_opts_double_or(ctx->opts, "weight_decay", 0.0, &d->wd));
  if (d->mu > 0) {
    SG_CHECK(sg_cuda_alloc(&d->dv, n, "the momentum"));
    SG_CHECK(sg_cuda_zero(d->dv, n));
  }
  SG_CHECK(dc_new(&d->dc, ctx, sg_opts_str_or(ctx->opts, "algorithm", "ring"), n));
  /* one set of initial parameters, rank 0's; init: per-rank (a teaching
   * fault) leaves every rank its own */
  const int own = sg_workload_init_per_rank(d->wl);
  if (root || own) SG_CHECK(sg_workload_init_params(d->wl, d->params));
  if (!own) SG_CHECK(sg_ar_bcast(ctx->comm, d->params, n * sizeof *d->params, 0));
  SG_CHECK(sg_cuda_put(d->dp, d->params, n));
  SG_CHECK(sg_workload_optim_new(d->wl, ctx->opts, &d->opt));
  if (root) {
    SG_CHECK(sg_records_info(ctx->rec, "workload", sg_workload_describe(d->wl)));
    SG_CHECK(sg_records_info(ctx->rec, "device", sg_device_build()));
  }
  return sg_trainlog_new(&d->log, ctx, d->wl, root);
}

static int train(dev_state_t *d, sg_rank_ctx_t *ctx, size_t n) {
  const int root = ctx->rank == 0;
  sg_comm_t *c = ctx->comm;
  const int64_t total = sg_workload_total_steps(d->wl), spe = sg_workload_steps_per_epoch(d->wl);
  const float scale = 1.0f / (float)ctx->size;
  SG_CHECK(sg_barrier(c));
  SG_CHECK(sg_trainlog_begin(d->log, root ? d->params : NULL));
  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    uint64_t s0 = sg_comm_bytes_sent(c), r0 = sg_comm_bytes_recvd(c), dev = 0;
    double t = sg_now();
    sg_engine_delay(ctx);
    SG_CHECK(sg_workload_grad_device(d->wl, d->dp, d->dg, step, &s.loss));
    double t1 = sg_now();
    SG_CHECK(dc_run(&d->dc, c, d->dg, n, &dev));
    double t2 = sg_now();
    SG_CHECK(sg_cuda_sgd(d->dp, d->dg, d->dv, n, scale, (float)sg_optim_lr(d->opt, step),
                         (float)d->wd, (float)d->mu));
    const int eval = root && sg_trainlog_due(d->log, step);
    if (eval) SG_CHECK(sg_cuda_get(d->params, d->dp, n)); /* waits for the update */
    s.compute_s = (t1 - t) + (sg_now() - t2);
    s.comm_s = t2 - t1;
    s.bytes_sent = sg_comm_bytes_sent(c) - s0 + dev;
    s.bytes_recv = sg_comm_bytes_recvd(c) - r0 + dev;
    SG_CHECK(sg_trainlog_step(d->log, &s, eval ? d->params : NULL));
  }
  if (root) {
    SG_CHECK(sg_cuda_get(d->params, d->dp, n));
    SG_CHECK(sg_engine_dump_params(ctx, d->params, n));
  }
  return SG_OK;
}

int sg_ar_run_device(sg_rank_ctx_t *ctx) {
  dev_state_t d = {0};
  size_t n = 0;
  int rc;
  SG_TRY(setup(&d, ctx, &n));
  SG_TRY(train(&d, ctx, n));
fail:
  sg_trainlog_destroy(&d.log);
  dc_destroy(&d.dc);
  sg_optim_destroy(&d.opt);
  sg_workload_destroy(&d.wl);
  sg_cuda_free(&d.dp);
  sg_cuda_free(&d.dg);
  sg_cuda_free(&d.dv);
  sg_ar_free(d.params);
  return rc;
}
