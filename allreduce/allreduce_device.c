/* allreduce_device.c - the allreduce engine's device ops (`device: cuda`).
 *
 * The training loop is allreduce_engine.c's, the same for host and
 * device (ar_loop.h); this file is its row sg_ar_mem_cuda: the
 * parameters, the gradient and the momentum in device memory (the host
 * vector's layout), the gradient by sg_workload_grad_device, the update
 * one kernel (the 1/N scale and optim.c's update), and the parameters
 * copied to the host only when rank 0 evaluates and at the end for
 * dump_params.
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
 * compress: fp16 applies to the host-staged ring and rhd (each chunk
 * crosses the wire as halves, the host algorithm's own compression).
 * Step records carry the transport's byte counters plus, for cuda-ring and
 * nccl, the bytes the devices moved (cuda-ring: exact; nccl: the ring's
 * 2K(N-1)/N, K = 4 * nparams).
 */
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "ar_loop.h"
#include "clock.h"
#include "cuda/sg_cuda.h"
#include "cuda/ring_prims.h"
#include "device.h"
#include "engine.h"
#include "err.h"
#include "settings.h"

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
  int (*setup)(dev_comm_t *dc, sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg, size_t n,
               size_t segment);
  int (*run)(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes);
};

/* ---- host rows (ring, rhd, tree, hier, native): staged through pinned slots */

static int host_reduce(void *arg, float *host, size_t len) { return sg_ar_run(arg, host, len); }

/* compress: fp16 is the host algorithm's own (ring, rhd): each staged
 * chunk crosses the wire as halves and is summed in float32. */
static int staged_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg, size_t n,
                        size_t segment) {
  size_t cf = (size_t)cfg->stage_chunk / sizeof(float);
  if (cf == 0) cf = 1;
  if (cf > n && n > 0) cf = n;
  SG_CHECK(sg_ar_new(&dc->ar, ctx->comm, cfg->algorithm, segment, cf));
  sg_ar_set_group(dc->ar, (int)sg_ar_cfg_group(cfg, ctx->comm));
  SG_CHECK(sg_ar_set_compress(dc->ar, cfg->compress));
  return sg_cuda_stage_new(&dc->stage, cf, STAGE_SLOTS);
}

static int staged_run(dev_comm_t *dc, sg_comm_t *c, float *dgrad, size_t n, uint64_t *dev_bytes) {
  (void)c;
  *dev_bytes = 0;
  return sg_cuda_stage_run(dc->stage, dgrad, n, host_reduce, dc->ar);
}

static const struct sg_ar_dev_algo staged_ops = {staged_setup, staged_run};

/* ---- cuda-ring ---------------------------------------------------------- */

static int ring_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg, size_t n,
                      size_t segment) {
  (void)n;
  const int mode = strcmp(cfg->cuda_ring, "persistent") ? SG_CUDA_RING_STAGED
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
static int nccl_fits(const sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg) {
  int count = 0, lr = 0, ls = 0;
  int64_t g = cfg->gpus_per_host;
  SG_CHECK(sg_cuda_probe(&count));
  if (g <= 0 || g > count) g = count;
  sg_device_local_rank(ctx->comm, &lr, &ls);
  if (ls > g)
    return sg_err_set(SG_ECONFIG, "algorithm: nccl needs a GPU per rank, but host %s runs %d "
                      "ranks on %lld GPU%s (NCCL refuses two ranks on one GPU); use cuda-ring "
                      "or a host algorithm", ctx->comm->hosts[ctx->rank], ls, (long long)g,
                      g == 1 ? "" : "s");
  return SG_OK;
}

static int nccl_setup(dev_comm_t *dc, sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg, size_t n,
                      size_t segment) {
  (void)n, (void)segment;
  unsigned char id[SG_NCCL_ID_BYTES] = {0};
  SG_CHECK(nccl_fits(ctx, cfg));
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

/* segment: sg_ar_cfg_segment's (cuda-ring's slot: the set `segment`, or
 * SG_AR_SEGMENT_DEFAULT). */
static int dc_new(dev_comm_t *dc, sg_rank_ctx_t *ctx, const sg_ar_cfg_t *cfg, size_t n,
                  int64_t segment) {
  const sg_ar_algo_t *row = sg_ar_algo_find(cfg->algorithm);
  dc->ops = row && row->memory == SG_AR_MEM_DEVICE ? row->dev : &staged_ops;
  return dc->ops->setup(dc, ctx, cfg, n, (size_t)segment);
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
  sg_ar_cfg_t cfg;
  int rc = sg_ar_cfg_from_opts(&cfg, ctx->opts);
  if (rc == SG_OK) rc = dc_new(&d->dc, ctx, &cfg, n, sg_ar_cfg_segment(&cfg, ctx->comm));
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

/* ---- the device ops of the training loop (ar_loop.h) --------------------- */

struct ar_dev_state {
  dev_comm_t dc;
  float *dp, *dg, *dv;    /* params, grad, momentum on the device */
  double mu, wd;          /* momentum, weight_decay: the settings table's */
};

static int cuda_alloc(ar_loop_t *lp) {
  const size_t n = lp->n;
  struct ar_dev_state *d = lp->dev = calloc(1, sizeof *lp->dev);
  if (!d || !(lp->params = sg_ar_alloc(n * sizeof *lp->params)))
    return sg_err_set(SG_ENOMEM, "allreduce: no memory for %zu parameters", n);
  SG_CHECK(sg_setting_double(lp->ctx->opts, NULL, "momentum", &d->mu));
  SG_CHECK(sg_setting_double(lp->ctx->opts, NULL, "weight_decay", &d->wd));
  SG_CHECK(sg_cuda_alloc(&d->dp, n, "the parameters"));
  SG_CHECK(sg_cuda_alloc(&d->dg, n, "the gradient"));
  if (d->mu > 0) {
    SG_CHECK(sg_cuda_alloc(&d->dv, n, "the momentum"));
    SG_CHECK(sg_cuda_zero(d->dv, n));
  }
  return SG_OK;
}

static int cuda_comm(ar_loop_t *lp, int64_t segment) {
  return dc_new(&lp->dev->dc, lp->ctx, &lp->cfg, lp->n, segment);
}

static int cuda_load(ar_loop_t *lp) { return sg_cuda_put(lp->dev->dp, lp->params, lp->n); }

static int cuda_grad(ar_loop_t *lp, int64_t step, double *loss) {
  return sg_workload_grad_device(lp->wl, lp->dev->dp, lp->dev->dg, step, loss);
}

static int cuda_reduce(ar_loop_t *lp) {
  return dc_run(&lp->dev->dc, lp->ctx->comm, lp->dev->dg, lp->n, &lp->dev_bytes);
}

/* One kernel: the 1/N scale and optim.c's update. */
static int cuda_apply(ar_loop_t *lp, int64_t step) {
  struct ar_dev_state *d = lp->dev;
  return sg_cuda_sgd(d->dp, d->dg, d->dv, lp->n, lp->scale, (float)sg_optim_lr(lp->opt, step),
                     (float)d->wd, (float)d->mu);
}

/* Waits for the update queued before it. */
static int cuda_view(ar_loop_t *lp) { return sg_cuda_get(lp->params, lp->dev->dp, lp->n); }

static void cuda_fini(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  if (d) {
    dc_destroy(&d->dc);
    sg_cuda_free(&d->dp);
    sg_cuda_free(&d->dg);
    sg_cuda_free(&d->dv);
    free(d);
    lp->dev = NULL;
  }
  sg_ar_free(lp->params);
}

const ar_mem_ops_t sg_ar_mem_cuda = {
    .name = "cuda", .info_key = "device", .info = sg_device_build,
    .alloc = cuda_alloc, .comm = cuda_comm, .load = cuda_load, .grad = cuda_grad,
    .reduce = cuda_reduce, .apply = cuda_apply, .view = cuda_view, .fini = cuda_fini,
};
