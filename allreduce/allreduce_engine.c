/* allreduce_engine.c - `allreduce`: every worker holds a full replica.
 *
 * Schedule (all N ranks are workers; rank 0 also evaluates):
 *
 *   rank 0: params = init(seed);  broadcast params (binomial tree)
 *   barrier, then the training clock starts (time to accuracy and
 *   samples/s leave out loading the data and the broadcast)
 *   every step t, on every rank r:
 *     g_r  = grad(params, batch_t of worker r)        compute_s
 *     barrier                     (the slowest rank)    wait_s
 *     g    = allreduce_sum(g_r)  (ring | rhd | native) comm_s
 *     params = apply(params, g / N, t) -- the mean over the global batch
 *                                     N*b, the same on every rank, so the
 *                                     replicas stay identical bit for bit
 *   rank 0 evaluates every eval_every steps and dumps the final params.
 *
 * update: sharded (the float32 ring's default) moves the apply into the
 * ring (sg_ar_run_update): the owner of each chunk's sum updates that
 * chunk of params as the sum completes, and the allgather moves params
 * instead of sums; comm_s then holds this rank's 1/N of the update.  The
 * same arithmetic per element, so the same bits as the replicated apply.
 *
 * overlap: true (overlap.h) replaces "grad, barrier, allreduce" by a
 * compute thread that runs backward and hands the gradient over in
 * buckets of `bucket` bytes, last layer first, while this thread
 * allreduces each bucket as it comes (device: cuda, allreduce_device.c:
 * the same buckets, backward issued with an event per bucket and the
 * staged copies waiting for them on the device): compute_s ends with backward,
 * comm_s is the allreduce time left after it (the exposed part), wait_s
 * is 0 (no barrier; waiting for a slow rank happens inside comm_s).
 *
 * Because worker r's batch is positions r, r+N, .. of the global batch
 * (workload.h), g equals `local`'s gradient on batch N*b up to float
 * summation order, and the run performs the same updates as `local`.
 *
 * Bytes per rank per step (K = 4 * nparams): ring 2K(N-1)/N sent and
 * received; rhd the same for power-of-two N; native: Open MPI's choice.
 * The step records carry the transport's own byte counters.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "allreduce.h"
#include "ar_loop.h"
#include "overlap.h"
#include "topk.h"
#include "clock.h"
#include "device.h"
#include "engine.h"
#include "err.h"

/* clang-format off */
const sg_setting_t sg_ar_options[] = {
  {"algorithm", SG_T_ENUM, "ring", "allreduce algorithm: ring (pipelined reduce-scatter + allgather), rhd (Rabenseifner), tree (pipelined binary tree: reduce to rank 0, broadcast back), hier (hierarchical: reduce-scatter inside groups of `group` ranks, ring across groups, allgather inside), native (MPI_Allreduce; transport mpi); with device cuda also cuda-ring (GPUs of one host, CUDA IPC) and nccl (builds with NCCL)", SG_AR_ALGORITHMS "|" SG_AR_DEVICE_ALGORITHMS, 1, 0, SG_S_ENGINE},
  {"group", SG_T_INT, "0", "hier: ranks per group, consecutive ranks (0 = auto: on an emulated cluster the ranks from rank 0 on that share rank 0's host (cluster.placement: pack) or, with cluster.racks, its rack; every rank without a cluster, which is one host)", NULL, 0, 1024, SG_S_ENGINE},
  {"segment", SG_T_INT, "0", "ring, rhd, tree, hier: pipeline segment in bytes (K/M suffixes; 0 = auto: 4M for zmq over ipc with zmq_cma on, 256K for zmq with CURVE, else 1M); cuda-ring: the chunk of a ring step (0 = 1M)", NULL, 0, 1 << 30, SG_S_ENGINE},
  {"compress", SG_T_ENUM, "none", "gradient compression on the wire: none; fp16 (ring, rhd, also host-staged with device cuda: IEEE halves on the wire, sums in float32; every replica keeps the rounded sum); topk (device cpu: the topk fraction of largest entries as index/value pairs, allgathered around the ring, the rest carried over as error feedback)", "none|fp16|topk", 1, 0, SG_S_ENGINE},
  {"topk", SG_T_FLOAT, "0.01", "compress: topk: fraction of the gradient's entries each rank sends per step", NULL, 1e-6, 1, SG_S_ENGINE},
  {"overlap", SG_T_BOOL, "false", "allreduce the gradient in buckets while backward still computes the layers below (device cpu: a compute thread runs backward, the rank's thread the allreduce; device cuda: host-staged ring, rhd or tree, each bucket's copies waiting on the device for backward's event; cuda-ring and nccl, each bucket's collective on a second stream waiting for backward's event); compress none|fp16", NULL, 1, 0, SG_S_ENGINE},
  {"bucket", SG_T_INT, "512K", "overlap: bytes of gradient gathered before a bucket is allreduced (K/M suffixes)", NULL, 4, 1 << 30, SG_S_ENGINE},
  {"bucket_every", SG_T_INT, "50", "record the gradient's buckets (when backward handed each over, when its allreduce started and ended; table buckets) on every bucket_every-th step from step 0; 0 = never. Without overlap the whole gradient is one bucket", NULL, 0, 1e9, SG_S_ENGINE},
  {"update", SG_T_ENUM, "auto", "where the optimizer runs: replicated (every rank updates the whole vector after the allreduce); sharded (ring, compress none, no overlap: each rank updates the 1/N of the vector whose sum it completes, inside the reduce-scatter, and the allgather moves parameters instead of sums; device cuda: the host-staged ring, cuda-ring with cuda_ring staged, or nccl (reduce-scatter, update, allgather); the owner's update runs on the device and the momentum exists for its shard only); auto = sharded where it applies on device cpu, else replicated (device cuda: replicated)", "auto|sharded|replicated", 1, 0, SG_S_ENGINE},
  {"cuda_ring", SG_T_ENUM, "staged", "algorithm cuda-ring: staged (one kernel and one host synchronization per ring primitive, flow control over the transport) or persistent (one kernel per allreduce, flow control by flags in device memory)", "staged|persistent", 1, 0, SG_S_ENGINE},
  {"stage_chunk", SG_T_INT, "4M", "device cuda with ring/rhd/native: bytes per chunk copied between device and host, overlapped with the transport", NULL, 4, 1 << 30, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

/* The device rows of the algorithm table (cuda-ring, nccl) sum device
 * vectors; nccl needs a build with it. */
static int ar_check_device(const sg_ar_cfg_t *c) {
  int nccl = !strcmp(c->algorithm, "nccl");
  const sg_ar_algo_t *row = sg_ar_algo_find(c->algorithm);
  if (row && row->memory == SG_AR_MEM_DEVICE && !c->device)
    return sg_err_set(SG_ECONFIG, "algorithm: %s sums device buffers; it needs device: cuda",
                      c->algorithm);
  if (nccl && !sg_device_build_has_nccl())
    return sg_err_set(SG_ECONFIG, "algorithm: nccl: this build has no NCCL (devices: %s)",
                      sg_device_build());
  return SG_OK;
}

static int ar_check_transport(const sg_opts_t *o, const char *transport) {
  sg_ar_cfg_t c;
  SG_CHECK(sg_ar_cfg_from_opts(&c, o));
  SG_CHECK(ar_check_device(&c));
  const char *algo = c.algorithm, *compress = c.compress;
  int fp16 = !strcmp(compress, "fp16"), ring = !strcmp(algo, "ring");
  if (strcmp(compress, "none") != 0 && !ring && !(fp16 && !strcmp(algo, "rhd")))
    return sg_err_set(SG_ECONFIG, "compress: %s is implemented for algorithm%s%s", compress,
                      fp16 ? "s ring and rhd" : " ring", c.device ? " (host-staged)" : "");
  if (c.device && !strcmp(compress, "topk"))
    return sg_err_set(SG_ECONFIG, "compress: topk needs device cpu (its selection and error "
                      "feedback run on host vectors); device cuda has none and fp16");
  if (c.overlap && !strcmp(compress, "topk"))
    return sg_err_set(SG_ECONFIG, "overlap: true needs compress none or fp16");
  SG_CHECK(sg_ar_dev_check_overlap(o, &c));
  const int dev_row = c.device && (!strcmp(algo, "cuda-ring") || !strcmp(algo, "nccl"));
  if (!strcmp(c.update, "sharded") &&
      (!(ring || dev_row) || strcmp(compress, "none") != 0 || c.overlap))
    return sg_err_set(SG_ECONFIG, "update: sharded needs algorithm ring (device cuda: the "
                      "host-staged ring, cuda-ring or nccl), compress none and overlap false");
  SG_CHECK(sg_ar_dev_check_sharded(&c));
  if (c.segment > 0 && c.segment < 4)
    return sg_err_set(SG_ECONFIG, "segment: %lld bytes is less than one float (4; 0 = auto)",
                      (long long)c.segment);
  if (strcmp(algo, "native") == 0 && strcmp(transport, "mpi") != 0)
    return sg_err_set(SG_ECONFIG,
                      "algorithm: native is MPI_Allreduce and needs transport mpi, not %s",
                      transport);
  return SG_OK;
}

/* compress: topk replaces the allreduce by its own allgather (topk.h);
 * none and fp16 are the allreduce context's. */
static int compress_new(sg_rank_ctx_t *ctx, const sg_ar_cfg_t *c, sg_ar_t *ar, size_t n,
                        sg_topk_t **tk) {
  if (strcmp(c->compress, "topk") != 0) return sg_ar_set_compress(ar, c->compress);
  return sg_topk_new(tk, ctx->comm, n, c->topk);
}

static uint64_t bytes_moved(const sg_comm_t *c, uint64_t *recvd) {
  *recvd = sg_comm_bytes_recvd(c);
  return sg_comm_bytes_sent(c);
}

/* ---- the host ops (ar_loop.h): vectors in host memory ----------------- */

static int host_alloc(ar_loop_t *lp) {
  lp->params = sg_ar_alloc(lp->n * sizeof *lp->params); /* touched, huge pages */
  lp->grad = sg_ar_alloc(lp->n * sizeof *lp->grad);
  if (!lp->params || !lp->grad)
    return sg_err_set(SG_ENOMEM, "allreduce: no memory for %zu parameters", lp->n);
  return SG_OK;
}

/* overlap: true starts the compute thread (overlap.h); not for N = 1,
 * which has nothing to reduce (the thread's hand-offs cost ~13% there). */
static int overlap_new(ar_loop_t *lp) {
  if (!lp->cfg.overlap || lp->ctx->size == 1) return SG_OK;
  return sg_ar_overlap_new(&lp->ov, lp->wl, lp->ar, (size_t)lp->cfg.bucket);
}

static int host_comm(ar_loop_t *lp, int64_t segment) {
  const sg_ar_cfg_t *c = &lp->cfg;
  sg_comm_t *comm = lp->ctx->comm;
  SG_CHECK(sg_ar_new(&lp->ar, comm, c->algorithm, (size_t)segment, lp->n));
  sg_ar_plant_bug(lp->ar, c->plant_bug);
  sg_ar_set_group(lp->ar, (int)sg_ar_cfg_group(c, comm));
  SG_CHECK(compress_new(lp->ctx, c, lp->ar, lp->n, &lp->tk));
  SG_CHECK(overlap_new(lp));
  lp->overlapped = lp->ov != NULL;
  lp->sharded = comm->size > 1 && strcmp(c->update, "replicated") != 0 && !lp->ov && !lp->tk &&
                sg_ar_can_update(lp->ar); /* N = 1: the whole update, booked as compute */
  return SG_OK;
}

static int host_load(ar_loop_t *lp) {
  (void)lp;
  return SG_OK;
}

static int host_grad(ar_loop_t *lp, int64_t step, double *loss) {
  return sg_workload_grad(lp->wl, lp->params, lp->grad, step, loss);
}

/* The update of one owned range, called by the ring as the range's sum
 * completes (update: sharded). */
static void update_range(void *arg, size_t off, size_t len, const float *recv) {
  ar_loop_t *lp = arg;
  sg_optim_apply_range2(lp->opt, lp->params, lp->grad, recv, off, len, lp->scale, lp->step);
}

/* sharded: the owners update inside the ring, so comm_s holds this
 * rank's 1/N of the update */
static int host_reduce(ar_loop_t *lp) {
  return lp->sharded ? sg_ar_run_update(lp->ar, lp->grad, lp->params, lp->n, update_range, lp)
         : lp->tk    ? sg_topk_run(lp->tk, lp->grad)
                     : sg_ar_run(lp->ar, lp->grad, lp->n);
}

static int host_overlap(ar_loop_t *lp, int64_t step, double *loss, double *t_grad) {
  return sg_ar_overlap_step(lp->ov, lp->params, lp->grad, step, loss, t_grad);
}

static int host_apply(ar_loop_t *lp, int64_t step) {
  sg_optim_apply_range(lp->opt, lp->params, lp->grad, 0, lp->n, lp->scale, step);
  return SG_OK;
}

static void host_fini(ar_loop_t *lp) {
  sg_ar_overlap_destroy(&lp->ov); /* joins the compute thread before wl goes */
  sg_ar_destroy(&lp->ar);
  sg_topk_destroy(&lp->tk);
  sg_ar_free(lp->params);
  sg_ar_free(lp->grad);
}

const ar_mem_ops_t sg_ar_mem_host = {
    .name = "host", .info_key = "blas", .info = sg_blas_info,
    .alloc = host_alloc, .comm = host_comm, .load = host_load, .grad = host_grad,
    .reduce = host_reduce, .apply = host_apply, .overlap = host_overlap, .view = host_load,
    .fini = host_fini,
};

/* ---- the loop --------------------------------------------------------- */

/* Gradient, then barrier and allreduce.  Wait and comm booked apart
 * (docs/engines/allreduce.md): the barrier returns once the slowest rank
 * has its gradient, so the allreduce after it moves bytes between ranks
 * that are all ready. */
static int grad_then_reduce(ar_loop_t *lp, sg_step_rec_t *s, double t) {
  SG_CHECK(lp->mem->grad(lp, s->step, &s->loss));
  double t1 = sg_now();
  SG_CHECK(sg_barrier(lp->ctx->comm));
  double tw = sg_now();
  lp->t_ready = t1;
  lp->t_ar0 = tw;
  lp->step = s->step;
  SG_CHECK(lp->mem->reduce(lp));
  lp->t_ar1 = sg_now();
  s->compute_s = t1 - t;
  s->wait_s = tw - t1;
  s->comm_s = lp->t_ar1 - tw;
  return SG_OK;
}

/* overlap: buckets reduced while backward runs.  compute_s ends when
 * backward does; comm_s is what is left after it, the exposed part.  No
 * barrier: it would serialize the two, so a straggler's delay is waited
 * for inside the allreduce and lands in comm_s (wait_s 0). */
static int grad_overlapped(ar_loop_t *lp, sg_step_rec_t *s, double t) {
  double tg = t;
  SG_CHECK(lp->mem->overlap(lp, s->step, &s->loss, &tg));
  s->compute_s = tg - t;
  s->wait_s = 0;
  s->comm_s = sg_now() - tg;
  return SG_OK;
}

/* The buckets of a sampled step (bucket_every), times after t, the
 * step's start: overlap's, or the whole gradient as one. */
static int send_buckets(ar_loop_t *lp, int64_t step, double t) {
  size_t nb = 1;
  sg_ar_bucket_time_t one = {0, lp->n, lp->t_ready, lp->t_ar0, lp->t_ar1};
  const sg_ar_bucket_time_t *b = lp->ov ? sg_ar_overlap_buckets(lp->ov, &nb) : &one;
  if (lp->bt) b = lp->bt, nb = lp->nbt; /* the device overlap's */
  for (size_t i = 0; i < nb; i++) {
    sg_bucket_rec_t r = {.step = step, .bucket = (int32_t)i, .nbuckets = (int32_t)nb,
                         .offset = b[i].off, .floats = b[i].len, .ready_s = b[i].ready - t,
                         .start_s = b[i].start - t, .end_s = b[i].end - t};
    SG_CHECK(sg_records_bucket(lp->ctx->rec, &r));
  }
  return SG_OK;
}

/* The update (unless the ring made it), then the host copy of the
 * parameters where rank 0 evaluates this step. */
static int apply_and_view(ar_loop_t *lp, sg_trainlog_t *log, sg_step_rec_t *s) {
  double t2 = sg_now();
  if (!lp->sharded) SG_CHECK(lp->mem->apply(lp, s->step));
  if (lp->ctx->rank == 0 && sg_trainlog_due(log, s->step)) SG_CHECK(lp->mem->view(lp));
  s->compute_s += sg_now() - t2;
  return SG_OK;
}

static int ar_step(ar_loop_t *lp, sg_trainlog_t *log, int64_t step, int64_t spe) {
  sg_rank_ctx_t *ctx = lp->ctx;
  sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                     .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
  uint64_t r0, s0 = bytes_moved(ctx->comm, &r0), r1;
  double t = sg_now();
  sg_engine_delay(ctx, step);
  lp->dev_bytes = 0;
  SG_CHECK(lp->overlapped ? grad_overlapped(lp, &s, t) : grad_then_reduce(lp, &s, t));
  SG_CHECK(apply_and_view(lp, log, &s));
  s.bytes_sent = bytes_moved(ctx->comm, &r1) - s0 + lp->dev_bytes;
  s.bytes_recv = r1 - r0 + lp->dev_bytes;
  SG_CHECK(sg_trainlog_step(log, &s, ctx->rank == 0 ? lp->params : NULL));
  int64_t every = lp->cfg.bucket_every;
  return every > 0 && step % every == 0 && !lp->tk ? send_buckets(lp, step, t) : SG_OK;
}

static int ar_records(ar_loop_t *lp, int64_t segment) {
  sg_records_t *rec = lp->ctx->rec;
  SG_CHECK(sg_records_info(rec, "workload", sg_workload_describe(lp->wl)));
  SG_CHECK(sg_records_info(rec, lp->mem->info_key, lp->mem->info()));
  char seg[24];
  snprintf(seg, sizeof seg, "%lld", (long long)segment);
  SG_CHECK(sg_records_info(rec, "allreduce.segment", seg));
  return sg_records_info(rec, "allreduce.update", lp->sharded ? "sharded" : "replicated");
}

static int ar_setup(ar_loop_t *lp) {
  sg_rank_ctx_t *ctx = lp->ctx;
  const int root = ctx->rank == 0;
  int64_t segment = sg_ar_cfg_segment(&lp->cfg, ctx->comm);
  SG_CHECK(sg_workload_new(&lp->wl, ctx->opts, ctx->rank, ctx->size,
                           root ? SG_WL_ALL : SG_WL_TRAIN));
  lp->n = sg_workload_nparams(lp->wl);
  SG_CHECK(lp->mem->alloc(lp));
  SG_CHECK(lp->mem->comm(lp, segment));
  /* one set of initial parameters, rank 0's; init: per-rank (a teaching
   * fault) leaves every rank its own */
  const int own = sg_workload_init_per_rank(lp->wl);
  if (root || own) SG_CHECK(sg_workload_init_params(lp->wl, lp->params));
  if (!own) SG_CHECK(sg_ar_bcast(ctx->comm, lp->params, lp->n * sizeof *lp->params, 0));
  SG_CHECK(lp->mem->load(lp));
  SG_CHECK(sg_workload_optim_new(lp->wl, ctx->opts, &lp->opt));
  lp->scale = 1.0f / (float)ctx->size;
  return root ? ar_records(lp, segment) : SG_OK;
}

static int ar_run(sg_rank_ctx_t *ctx) {
  ar_loop_t lp = {.ctx = ctx};
  sg_trainlog_t *log = NULL;
  int rc;
  const int root = ctx->rank == 0;

  SG_CHECK(sg_ar_cfg_from_opts(&lp.cfg, ctx->opts));
  lp.mem = lp.cfg.device ? &sg_ar_mem_cuda : &sg_ar_mem_host;
  SG_TRY(ar_setup(&lp));
  SG_TRY(sg_trainlog_new(&log, ctx, lp.wl, root));
  /* The training clock starts when every rank holds the parameters: the
   * broadcast's root may return before the last rank has even loaded its
   * data (buffered sends), so a barrier first. */
  SG_TRY(sg_barrier(ctx->comm));
  SG_TRY(sg_trainlog_begin(log, root ? lp.params : NULL));
  int64_t total = sg_workload_total_steps(lp.wl), spe = sg_workload_steps_per_epoch(lp.wl);
  for (int64_t step = 0; step < total; step++) SG_TRY(ar_step(&lp, log, step, spe));
  if (root) SG_TRY(lp.mem->view(&lp));
  if (root) SG_TRY(sg_engine_dump_params(ctx, lp.params, lp.n));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  lp.mem->fini(&lp); /* joins any compute thread before wl goes */
  sg_optim_destroy(&lp.opt);
  sg_workload_destroy(&lp.wl);
  return rc;
}

/* MPI_Allreduce moves its bytes inside MPI, past the transport's counters. */
static int ar_bytes_uncounted(const sg_opts_t *o) {
  sg_ar_cfg_t c;
  return sg_ar_cfg_from_opts(&c, o) == SG_OK && !strcmp(c.algorithm, "native");
}

extern const struct sg_bench_round sg_ar_bench_round; /* the benchmark round, next to the engine */

extern const sg_engine_t sg_engine_allreduce;

static const sg_option_need_t ar_needs[] = {
    {"segment", "algorithm", "|ring|rhd|tree|hier|cuda-ring|"},
    {"group", "algorithm", "|hier|"},
    {"stage_chunk", "device", "|cuda|"},
    {"cuda_ring", "algorithm", "|cuda-ring|"},
    {"topk", "compress", "|topk|"},
    {"bucket", "overlap", "|true|"},
    {NULL, NULL, NULL},
};

/* A replica plus one vector of ring/rhd scratch. */
static void ar_memory(const sg_opts_t *o, int workers, int rank, sg_mem_plan_t *m) {
  (void)o, (void)workers;
  *m = (sg_mem_plan_t){.params = 1, .grad = 1, .optim = 1, .engine = 1, .batch_mult = 1,
                       .train = 1, .test = rank == 0};
}

/* "allreduce ring", "allreduce rhd": the algorithm always, then every
 * other option not at its default ("allreduce ring compress=fp16"). */
static void ar_label(const sg_opts_t *o, char *out, size_t cap) {
  static const char *const spelled[] = {"algorithm", NULL};
  const char *algo = "?";
  if (sg_setting_str(o, sg_ar_options, "algorithm", &algo) < 0) sg_err_clear();
  int n = snprintf(out, cap, "allreduce %s", algo);
  sg_engine_label_options(&sg_engine_allreduce, o, spelled, out, cap, n < 0 ? 0 : (size_t)n);
}

const sg_engine_t sg_engine_allreduce = {
    .name = "allreduce",
    .summary = "every worker a replica: gradients summed by allreduce (ring, rhd, tree, hier or native MPI), same update everywhere",
    .options = sg_ar_options,
    .layout = NULL,
    .role = NULL,
    .check_transport = ar_check_transport,
    .run = ar_run,
    .label = ar_label,
    .needs = ar_needs,
    .memory = ar_memory,
    .cost = &sg_ar_cost_info, /* allreduce_cost.c */
    .bench = &sg_ar_bench_round,
    .bytes_uncounted = ar_bytes_uncounted,
};
