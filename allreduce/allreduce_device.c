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
 *
 * overlap: true: the host overlap's buckets, planned from the layer sizes
 * (core/cuda/bucket_plan.h).  The device model calls back as backward
 * issues each layer's db and dW; a bucket whose ops are all issued gets
 * its event recorded on the compute stream.  Host-staged rows: the staged
 * run then goes over the buckets' pieces in order, each bucket's first
 * down-copy waiting on the device for its event, so the last layers'
 * buckets cross the transport while backward computes the layers below.
 * cuda-ring and nccl: each bucket's collective runs on a second stream
 * that waits for the bucket's event only, and the update waits for that
 * stream (core/cuda/coll_plan.h).  The host waits for the loss only after
 * the sum.
 *
 * update: sharded: the host-staged ring (the owner's update through the
 * staging, sg_ar_shard_*), the staged cuda-ring (its ring with the
 * owner's step, ring_prims.h) and nccl (reduce-scatter, the owner's
 * update, allgather on vectors padded to N shards, coll_plan.h); the
 * momentum exists for the owned ranges only.
 * Step records carry the transport's byte counters plus, for cuda-ring and
 * nccl, the bytes the devices moved (cuda-ring: exact; nccl: the ring's
 * 2K(N-1)/N, K = 4 * nparams).
 */
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "ar_loop.h"
#include "clock.h"
#include "cuda/bucket_plan.h"
#include "cuda/coll_plan.h"
#include "cuda/sg_cuda.h"
#include "cuda/ring_prims.h"
#include "opts.h"
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
  int persistent;         /* cuda-ring: cuda_ring: persistent */
  sg_comm_t *comm;        /* the run's comm */
  float *dgrad;           /* overlap: the step's device gradient */
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
  dc->persistent = mode == SG_CUDA_RING_PERSISTENT;
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
  dc->comm = ctx->comm;
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

/* overlap: the plan and the last step's bucket times */
typedef struct dev_overlap {
  sg_bucket_t *b;
  size_t nb, next;          /* buckets; how many are complete (marked) */
  sg_stage_piece_t *pieces;
  size_t npieces, done;     /* pieces; how many reduced this step */
  sg_ar_bucket_time_t *bt;  /* per bucket: ready, start, end (sg_now()) */
  sg_cuda_stage_t *stage;
  sg_ar_t *ar;
  sg_cuda_coll_t *co;       /* cuda-ring, nccl: the comm stream and the buckets' events */
  dev_comm_t *dc;
  uint64_t dev_bytes;       /* the devices' bytes of this step's buckets */
} dev_overlap_t;

struct ar_dev_state {
  dev_comm_t dc;
  float *dp, *dg, *dv;    /* params, grad, momentum on the device */
  double mu, wd;          /* momentum, weight_decay: the settings table's */
  dev_overlap_t ov;
  sg_ar_shard_t sh;       /* update: sharded (dv then holds the owned ranges' momentum) */
  size_t npad;            /* nccl sharded: the vectors' floats, N x shard */
  sg_cuda_sgd_args_t sgd; /* sharded device rows: this step's update */
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

/* ---- overlap with backprop (bucket_plan.h) ------------------------------ */

int sg_ar_dev_check_overlap(const sg_opts_t *o, const sg_ar_cfg_t *c) {
  (void)o;
  if (!c->overlap || !c->device) return SG_OK;
  static const char *const taken[] = {"ring", "rhd", "tree", "cuda-ring", "nccl", NULL};
  int ok = 0;
  for (int i = 0; taken[i]; i++) ok |= !strcmp(c->algorithm, taken[i]);
  if (!ok)
    return sg_err_set(SG_ECONFIG, "overlap: true with device cuda runs the host-staged ring, "
                      "rhd and tree, cuda-ring and nccl; %s has no bucket hand-over on the "
                      "device", c->algorithm);
  return SG_OK;
}

int sg_ar_dev_check_sharded(const sg_ar_cfg_t *c) {
  if (!c->device || strcmp(c->update, "sharded") != 0) return SG_OK;
  if (!strcmp(c->algorithm, "cuda-ring") && !strcmp(c->cuda_ring, "persistent"))
    return sg_err_set(SG_ECONFIG, "update: sharded with algorithm cuda-ring needs cuda_ring: "
                      "staged (the persistent kernel has no owner's update)");
  return SG_OK;
}

/* backward issued the op completing grad[off, off+len): mark the buckets
 * now complete (their events on the compute stream) */
static int dev_ready(void *arg, size_t off, size_t len) {
  dev_overlap_t *ov = arg;
  (void)len;
  const size_t to = sg_bucket_track(ov->b, ov->nb, ov->next, off);
  for (; ov->next < to; ov->next++)
    SG_CHECK(ov->co ? sg_cuda_coll_mark(ov->co, ov->next)
                    : sg_cuda_stage_mark(ov->stage, ov->next));
  return SG_OK;
}

/* A piece's host reduce (pieces come in order): the bucket's times. */
static int piece_reduce(void *arg, float *host, size_t len) {
  dev_overlap_t *ov = arg;
  sg_ar_bucket_time_t *t = &ov->bt[ov->pieces[ov->done].bucket];
  const double t0 = sg_now();
  if (t->off == ov->pieces[ov->done].off) t->ready = t->start = t0; /* its down-copy is done */
  int rc = sg_ar_run(ov->ar, host, len);
  t->end = sg_now();
  ov->done++;
  return rc;
}

/* The host overlap's buckets of the device model (bucket_plan.h) and
 * their pieces of at most one staging slot. */
static int overlap_plan(ar_loop_t *lp, dev_overlap_t *ov) {
  const struct sg_cuda_wl *cw = sg_workload_device(lp->wl);
  size_t bucket = (size_t)lp->cfg.bucket / sizeof(float);
  ov->nb = sg_cuda_wl_buckets(cw, bucket ? bucket : 1, NULL, 0);
  ov->b = calloc(ov->nb ? ov->nb : 1, sizeof *ov->b);
  ov->bt = calloc(ov->nb ? ov->nb : 1, sizeof *ov->bt);
  if (!ov->b || !ov->bt || !ov->nb) return sg_err_set(SG_ENOMEM, "overlap: no memory for the plan");
  sg_cuda_wl_buckets(cw, bucket ? bucket : 1, ov->b, ov->nb);
  for (size_t i = 0; i < ov->nb; i++)
    ov->bt[i] = (sg_ar_bucket_time_t){.off = ov->b[i].off, .len = ov->b[i].len};
  if (!lp->dev->dc.stage) return SG_OK; /* a device row: whole buckets, no pieces */
  size_t cf = (size_t)lp->cfg.stage_chunk / sizeof(float);
  ov->npieces = sg_bucket_pieces(ov->b, ov->nb, cf ? cf : 1, NULL, 0);
  if (!(ov->pieces = calloc(ov->npieces, sizeof *ov->pieces)))
    return sg_err_set(SG_ENOMEM, "overlap: no memory for the plan");
  sg_bucket_pieces(ov->b, ov->nb, cf ? cf : 1, ov->pieces, ov->npieces);
  return SG_OK;
}

/* The staging of the host algorithm (staged_setup) with one event per
 * bucket, and the device model's hand-over; not for N = 1 (nothing to
 * reduce), as on the host. */
static int overlap_new(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  dev_overlap_t *ov = &d->ov;
  if (!lp->cfg.overlap || lp->ctx->size == 1) return SG_OK;
  SG_CHECK(sg_ar_dev_check_overlap(lp->ctx->opts, &lp->cfg));
  SG_CHECK(overlap_plan(lp, ov));
  ov->stage = d->dc.stage;
  ov->ar = d->dc.ar;
  ov->dc = &d->dc;
  if (ov->stage)
    SG_CHECK(sg_cuda_stage_buckets(ov->stage, ov->nb));
  else
    SG_CHECK(sg_cuda_coll_new(&ov->co, ov->nb));
  SG_CHECK(sg_cuda_wl_set_ready(sg_workload_device(lp->wl), dev_ready, ov));
  lp->overlapped = 1;
  return SG_OK;
}

static void overlap_free(dev_overlap_t *ov) {
  sg_cuda_coll_destroy(&ov->co);
  free(ov->b);
  free(ov->bt);
  free(ov->pieces);
}

/* ---- overlap for the device rows (cuda-ring, nccl; coll_plan.h) ---------- */

static int co_wait(void *ctx, long b) {
  dev_overlap_t *ov = ctx;
  return sg_cuda_coll_wait(ov->co, (size_t)b);
}

/* The bucket's collective on the comm stream; staged cuda-ring returns
 * when done (start and end are the host's), the others once enqueued. */
static int co_sum(void *ctx, long b, size_t off, size_t len) {
  dev_overlap_t *ov = ctx;
  dev_comm_t *dc = ov->dc;
  sg_comm_t *c = dc->comm;
  float *x = dc->dgrad + off;
  ov->bt[b].start = sg_now();
  if (dc->ring) {
    SG_CHECK(sg_cuda_ring_run_on(dc->ring, ov->co, x, len));
    ov->dev_bytes += 4 * (uint64_t)sg_dring_floats_sent(c->size, c->rank, len, dc->seg);
  } else {
    SG_CHECK(sg_cuda_nccl_run_on(dc->nccl, ov->co, x, len));
    ov->dev_bytes += (uint64_t)(2.0 * (c->size - 1) / c->size * 4.0 * (double)len);
  }
  ov->bt[b].end = sg_now();
  return sg_cuda_coll_done(ov->co, (size_t)b);
}

static int co_join(void *ctx) {
  dev_overlap_t *ov = ctx;
  return sg_cuda_coll_join(ov->co);
}

/* Backward issued with an event per bucket; each bucket's collective on
 * the comm stream after its event (coll_plan.h); the update, queued next
 * on the process stream, waits for the join.  The host then sees each
 * bucket's events pass in turn (its times; staged cuda-ring: start and
 * end around its ring on the host, ready when its event was seen), and
 * the loss.  *t_grad: when the last bucket's event was seen to pass. */
static int coll_overlap(ar_loop_t *lp, double *loss, double *t_grad) {
  dev_overlap_t *ov = &lp->dev->ov;
  ov->dc->dgrad = lp->dev->dg;
  ov->dev_bytes = 0;
  const sg_coll_ops_t ops = {ov, co_wait, co_sum, co_join};
  SG_CHECK(sg_coll_overlap_run(ov->b, ov->nb, &ops, 0));
  const int async = !ov->dc->ring || ov->dc->persistent;
  for (size_t i = 0; i < ov->nb; i++) {
    sg_ar_bucket_time_t *t = &ov->bt[i];
    double r, e;
    SG_CHECK(sg_cuda_coll_times(ov->co, i, &r, &e));
    if (async) t->start = r, t->end = e;
    t->ready = t->start; /* staged: its first kernel waited for the event */
  }
  SG_CHECK(sg_cuda_wl_loss(sg_workload_device(lp->wl), loss));
  if (ov->dc->ring) SG_CHECK(sg_cuda_ring_settle(ov->dc->ring));
  *t_grad = ov->bt[ov->nb - 1].ready;
  lp->bt = ov->bt;
  lp->nbt = ov->nb;
  lp->dev_bytes = ov->dev_bytes;
  return SG_OK;
}

/* Backward issued (events marked as it goes), then the pieces staged as
 * their events pass, then the loss.  *t_grad: when the last bucket's
 * first piece came down (backward had ended on the device). */
static int cuda_overlap(ar_loop_t *lp, int64_t step, double *loss, double *t_grad) {
  struct ar_dev_state *d = lp->dev;
  dev_overlap_t *ov = &d->ov;
  ov->next = ov->done = 0;
  SG_CHECK(sg_workload_grad_device(lp->wl, d->dp, d->dg, step, loss));
  if (ov->next != ov->nb)
    return sg_err_set(SG_EINTERNAL, "overlap: backward completed %zu of %zu buckets", ov->next,
                      ov->nb);
  if (ov->co) return coll_overlap(lp, loss, t_grad);
  SG_CHECK(sg_cuda_stage_run_pieces(ov->stage, d->dg, ov->pieces, ov->npieces, piece_reduce, ov));
  SG_CHECK(sg_cuda_wl_loss(sg_workload_device(lp->wl), loss));
  *t_grad = ov->bt[ov->nb - 1].ready;
  lp->bt = ov->bt;
  lp->nbt = ov->nb;
  lp->dev_bytes = 0;
  return SG_OK;
}

/* ---- update: sharded (ar_loop.h) ---------------------------------------- */

size_t sg_ar_shard_cap(size_t n, size_t chunk, int nranks) {
  size_t cap = 0;
  for (size_t off = 0; off < n; off += chunk) {
    const size_t len = n - off < chunk ? n - off : chunk;
    cap += (len + (size_t)nranks - 1) / (size_t)nranks;
  }
  return cap;
}

int sg_ar_shard_init(sg_ar_shard_t *sh, sg_ar_t *ar, size_t chunk, size_t scap,
                     const sg_ar_shard_ops_t *ops) {
  *sh = (sg_ar_shard_t){.ar = ar, .ops = *ops, .chunk = chunk, .scap = scap};
  sh->sum = malloc(chunk * sizeof *sh->sum);
  sh->pslot = malloc(chunk * sizeof *sh->pslot);
  if (!sh->sum || !sh->pslot)
    return sg_err_set(SG_ENOMEM, "update: sharded: no memory for two chunks of %zu floats", chunk);
  return SG_OK;
}

void sg_ar_shard_begin(sg_ar_shard_t *sh) {
  sh->chunk_off = sh->soff = 0;
  sh->rc = SG_OK;
}

/* The ring's owner callback: the segment's sum, its update on the device. */
static void shard_update(void *arg, size_t off, size_t len, const float *recv) {
  sg_ar_shard_t *sh = arg;
  if (sh->rc) return;
  if (sh->soff + len > sh->scap) {
    sh->rc = sg_err_set(SG_EINTERNAL, "update: sharded: owned floats past the shard's %zu",
                        sh->scap);
    return;
  }
  const float *g = sh->cur + off;
  for (size_t i = 0; i < len; i++) sh->sum[i] = recv ? g[i] + recv[i] : g[i];
  const size_t upd = sh->plant && len ? len - 1 : len; /* planted: one float short */
  for (size_t i = upd; i < len; i++) sh->pslot[off + i] = 0; /* what a missed update leaves */
  if (upd) sh->rc = sh->ops.update(sh->ops.ctx, sh->chunk_off + off, upd, sh->soff, sh->sum,
                                   sh->pslot + off);
  sh->soff += len;
}

int sg_ar_shard_reduce(void *arg, float *slot, size_t len) {
  sg_ar_shard_t *sh = arg;
  sh->cur = slot;
  SG_CHECK(sg_ar_run_update(sh->ar, slot, sh->pslot, len, shard_update, sh));
  if (sh->rc) return sh->rc;
  memcpy(slot, sh->pslot, len * sizeof *slot); /* the parameters go up */
  sh->chunk_off += len;
  return SG_OK;
}

void sg_ar_shard_free(sg_ar_shard_t *sh) {
  free(sh->sum);
  free(sh->pslot);
  sh->sum = sh->pslot = NULL;
}

/* The device's part: the sum up, the optimizer on the range (momentum at
 * soff of the shard's vector), the parameters down. */
static int dev_shard_update(void *ctx, size_t off, size_t len, size_t soff, const float *sum,
                            float *out) {
  ar_loop_t *lp = ctx;
  struct ar_dev_state *d = lp->dev;
  SG_CHECK(sg_cuda_put(d->dg + off, sum, len));
  SG_CHECK(sg_cuda_sgd(d->dp + off, d->dg + off, d->dv ? d->dv + soff : NULL, len, lp->scale,
                       (float)sg_optim_lr(lp->opt, lp->step), (float)d->wd, (float)d->mu));
  return sg_cuda_get(out, d->dp + off, len);
}

/* The momentum of the owned ranges only (cap floats), replacing the
 * whole vector's. */
static int shard_momentum(struct ar_dev_state *d, size_t cap) {
  sg_cuda_free(&d->dv);
  if (d->mu <= 0) return SG_OK;
  SG_CHECK(sg_cuda_alloc(&d->dv, cap ? cap : 1, "the momentum of the owned shard"));
  return sg_cuda_zero(d->dv, cap ? cap : 1);
}

/* nccl: the vectors padded to N x shard floats, the padding zero (the
 * gradient never writes it), so that the reduce-scatter and the
 * allgather work in place (coll_plan.h). */
static int nccl_shard_new(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  const int N = lp->ctx->size;
  const size_t s = sg_coll_shard(lp->n, N);
  d->npad = s * (size_t)N;
  sg_cuda_free(&d->dp);
  sg_cuda_free(&d->dg);
  SG_CHECK(sg_cuda_alloc(&d->dp, d->npad, "the parameters (padded to N shards)"));
  SG_CHECK(sg_cuda_alloc(&d->dg, d->npad, "the gradient (padded to N shards)"));
  SG_CHECK(sg_cuda_zero(d->dp, d->npad));
  SG_CHECK(sg_cuda_zero(d->dg, d->npad));
  return shard_momentum(d, s);
}

/* update: sharded on the device, N > 1: the host-staged ring (its
 * owner's update through the staging), the staged cuda-ring (the owner's
 * step, ring_prims.h) or nccl (reduce-scatter, update, allgather); the
 * momentum for the owned ranges only. */
static int shard_new(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  const sg_comm_t *c = lp->ctx->comm;
  if (strcmp(lp->cfg.update, "sharded") != 0 || lp->ctx->size == 1) return SG_OK;
  SG_CHECK(sg_ar_dev_check_sharded(&lp->cfg));
  if (d->dc.ring || d->dc.nccl) {
    if (d->dc.ring)
      SG_CHECK(shard_momentum(d, sg_dring_floats_owned(c->size, c->rank, lp->n, d->dc.seg)));
    else
      SG_CHECK(nccl_shard_new(lp));
    lp->sharded = 1;
    return SG_OK;
  }
  if (!d->dc.ar || !sg_ar_can_update(d->dc.ar))
    return sg_err_set(SG_ECONFIG, "update: sharded on the device needs the host-staged ring "
                      "with compress none");
  size_t cf = (size_t)lp->cfg.stage_chunk / sizeof(float);
  if (cf == 0) cf = 1;
  if (cf > lp->n && lp->n > 0) cf = lp->n;
  const size_t cap = sg_ar_shard_cap(lp->n, cf, lp->ctx->size);
  sg_cuda_free(&d->dv);
  if (d->mu > 0) {
    SG_CHECK(sg_cuda_alloc(&d->dv, cap, "the momentum of the owned shard"));
    SG_CHECK(sg_cuda_zero(d->dv, cap));
  }
  const sg_ar_shard_ops_t ops = {lp, dev_shard_update};
  SG_CHECK(sg_ar_shard_init(&d->sh, d->dc.ar, cf, cap, &ops));
  lp->sharded = 1;
  return SG_OK;
}

static int cuda_comm(ar_loop_t *lp, int64_t segment) {
  SG_CHECK(dc_new(&lp->dev->dc, lp->ctx, &lp->cfg, lp->n, segment));
  SG_CHECK(shard_new(lp));
  return overlap_new(lp);
}

static int cuda_load(ar_loop_t *lp) { return sg_cuda_put(lp->dev->dp, lp->params, lp->n); }

static int cuda_grad(ar_loop_t *lp, int64_t step, double *loss) {
  return sg_workload_grad_device(lp->wl, lp->dev->dp, lp->dev->dg, step, loss);
}

/* ---- the sharded update of the device rows ------------------------------- */

static int nc_rs(void *ctx, size_t shard) {
  struct ar_dev_state *d = ctx;
  return sg_cuda_nccl_reduce_scatter(d->dc.nccl, d->dg, shard);
}

static int nc_update(void *ctx, size_t off, size_t len) {
  struct ar_dev_state *d = ctx;
  const sg_cuda_sgd_args_t *a = &d->sgd;
  return sg_cuda_sgd(d->dp + off, d->dg + off, d->dv, len, a->gscale, a->lr, a->wd, a->mu);
}

static int nc_ag(void *ctx, size_t shard) {
  struct ar_dev_state *d = ctx;
  return sg_cuda_nccl_all_gather(d->dc.nccl, d->dp, shard);
}

/* cuda-ring: the ring with the owner's step; nccl: reduce-scatter, the
 * owner's update, allgather, all queued on the process stream. */
static int dev_sharded(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  const sg_comm_t *c = lp->ctx->comm;
  d->sgd = (sg_cuda_sgd_args_t){lp->scale, (float)sg_optim_lr(lp->opt, lp->step), (float)d->wd,
                                (float)d->mu};
  if (d->dc.ring) {
    lp->dev_bytes = 4 * (uint64_t)sg_dring_floats_sent(c->size, c->rank, lp->n, d->dc.seg);
    return sg_cuda_ring_run_sharded(d->dc.ring, d->dg, d->dp, d->dv, lp->n, &d->sgd);
  }
  lp->dev_bytes = (uint64_t)(2.0 * (c->size - 1) / c->size * 4.0 * (double)d->npad);
  const sg_coll_shard_ops_t ops = {d, nc_rs, nc_update, nc_ag};
  return sg_coll_shard_run(lp->n, c->size, c->rank, &ops, 0);
}

/* sharded: the staged ring updates the owned ranges and moves the
 * parameters; the gradient vector then holds them, so the two swap. */
static int cuda_reduce(ar_loop_t *lp) {
  struct ar_dev_state *d = lp->dev;
  if (!lp->sharded) return dc_run(&d->dc, lp->ctx->comm, d->dg, lp->n, &lp->dev_bytes);
  if (d->dc.ring || d->dc.nccl) return dev_sharded(lp);
  lp->dev_bytes = 0;
  sg_ar_shard_begin(&d->sh);
  SG_CHECK(sg_cuda_stage_run(d->dc.stage, d->dg, lp->n, sg_ar_shard_reduce, &d->sh));
  float *t = d->dp;
  d->dp = d->dg;
  d->dg = t;
  return SG_OK;
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
    if (d->ov.stage) sg_cuda_wl_set_ready(sg_workload_device(lp->wl), NULL, NULL);
    overlap_free(&d->ov);
    sg_ar_shard_free(&d->sh);
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
    .reduce = cuda_reduce, .apply = cuda_apply, .overlap = cuda_overlap, .view = cuda_view,
    .fini = cuda_fini,
};
