/* ps_engine.c - the `ps` engine table: options, layout, roles, dispatch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "ps.h"
#include "ps_proto.h"

extern const sg_engine_t sg_engine_ps;

#define NOB 1, 0

/* clang-format off */
static const sg_setting_t ps_options[] = {
  {"mode", SG_T_ENUM, "sync", "ps: sync (barrier per step, = local with batch N*b), ssp (bounded staleness) or async", "sync|ssp|async", NOB, SG_S_ENGINE},
  {"staleness", SG_T_INT, "2", "ps ssp: a worker may run this many clocks ahead of the slowest (0 = bulk-synchronous)", NULL, 0, 1e6, SG_S_ENGINE},
  {"servers", SG_T_INT, "1", "ps: number of server processes S; each owns 1/S of the parameters (by bytes)", NULL, 1, 1024, SG_S_ENGINE},
  {"time_budget", SG_T_FLOAT, "0", "ps ssp/async: stop after this many seconds of training even if the target number of updates (epochs x samples / batch) was not reached; 0 = no budget", NULL, 0, 1e9, SG_S_ENGINE},
  {"sparse", SG_T_BOOL, "false", "ps: push only nonzero gradient coordinates, pull only those the next batch reads", NULL, NOB, SG_S_ENGINE},
  {"compress", SG_T_ENUM, "none", "ps, dense path: gradient compression of the push; none; fp16 (IEEE halves on the wire, the server sums in float32); topk (per shard the topk fraction of largest entries as index/value pairs, the worker keeps the rest as error feedback).  Parameters are pulled in float32 either way", "none|fp16|topk", NOB, SG_S_ENGINE},
  {"slice", SG_T_INT, "128K", "ps sync, dense path: bytes per slice of a shard; a worker pushes its slices back to back and a server sums, applies and sends back each slice as soon as all N workers pushed it, so the server link carries pushes in and parameters out at once; 0 = one message per shard.  Ignored with sparse: true or compress: topk", NULL, 0, 1e12, SG_S_ENGINE},
  {"slice_window", SG_T_INT, "2", "ps sync, sliced shards: slices a worker has in flight per server; its next push waits for the parameters of the slice this many back, so no worker runs ahead of the others and each slice is complete at the server early (docs/engines/ps.md, Slices); 0 = no limit", NULL, 0, 1048576, SG_S_ENGINE},
  {"slice_from", SG_T_INT, "1M", "ps sync, dense path: shards smaller than this many bytes go whole (one message each way): on one host the extra messages of slicing cost more than the overlap gains", NULL, 0, 1e12, SG_S_ENGINE},
  {"topk", SG_T_FLOAT, "0.01", "ps compress: topk: fraction of each shard's gradient entries a worker pushes per step", NULL, 1e-6, 1, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

/* compress and topk; after sparse, which they exclude. */
static int compress_from_opts(ps_cfg_t *cfg, const sg_opts_t *o) {
  const char *c;
  SG_CHECK(sg_setting_str(o, ps_options, "compress", &c));
  if (!strcmp(c, "none")) cfg->compress = PS_COMPRESS_NONE;
  else if (!strcmp(c, "fp16")) cfg->compress = PS_COMPRESS_FP16;
  else if (!strcmp(c, "topk")) cfg->compress = PS_COMPRESS_TOPK;
  else return sg_err_set(SG_ECONFIG, "compress: '%s' is not one of none|fp16|topk", c);
  /* The sparse path already pushes only the coordinates a batch touched,
   * as exact (index, value) pairs; compressing them again is not built. */
  if (cfg->compress != PS_COMPRESS_NONE && cfg->sparse)
    return sg_err_set(SG_ECONFIG, "compress: %s works on the dense path; it does not combine with "
                      "sparse: true", c);
  SG_CHECK(sg_setting_double(o, ps_options, "topk", &cfg->topk));
  if (!(cfg->topk > 0 && cfg->topk <= 1))
    return sg_err_set(SG_ECONFIG, "topk: must be in (0, 1], got %g", cfg->topk);
  return SG_OK;
}

int ps_cfg_from_opts(ps_cfg_t *cfg, const sg_opts_t *o, int workers) {
  memset(cfg, 0, sizeof *cfg);
  const char *mode;
  SG_CHECK(sg_setting_str(o, ps_options, "mode", &mode));
  if (!strcmp(mode, "sync")) cfg->mode = PS_SYNC;
  else if (!strcmp(mode, "ssp")) cfg->mode = PS_SSP;
  else if (!strcmp(mode, "async")) cfg->mode = PS_ASYNC;
  else return sg_err_set(SG_ECONFIG, "mode: '%s' is not one of sync|ssp|async", mode);
  int64_t s, S;
  SG_CHECK(sg_setting_int(o, ps_options, "staleness", &s));
  SG_CHECK(sg_setting_int(o, ps_options, "servers", &S));
  double budget = 0;
  SG_CHECK(sg_setting_double(o, ps_options, "time_budget", &budget));
  if (!(budget >= 0)) return sg_err_set(SG_ECONFIG, "time_budget: must be >= 0 seconds, got %g", budget);
  const char *sp;
  SG_CHECK(sg_setting_str(o, ps_options, "sparse", &sp));
  if (s < 0) return sg_err_set(SG_ECONFIG, "staleness: must be >= 0, got %lld", (long long)s);
  if (S < 1 || S > 1024) return sg_err_set(SG_ECONFIG, "servers: must be 1..1024, got %lld", (long long)S);
  if (workers < 1) return sg_err_set(SG_ECONFIG, "workers: must be >= 1, got %d", workers);
  cfg->staleness = cfg->mode == PS_SSP ? (int)s : 0;
  cfg->servers = (int)S;
  cfg->workers = workers;
  cfg->sparse = !strcmp(sp, "true");
  cfg->time_budget = cfg->mode == PS_SYNC ? 0 : budget;
  SG_CHECK(compress_from_opts(cfg, o));
  int64_t slice, from;
  SG_CHECK(sg_setting_int(o, ps_options, "slice", &slice));
  SG_CHECK(sg_setting_int(o, ps_options, "slice_from", &from));
  if (slice < 0) return sg_err_set(SG_ECONFIG, "slice: must be >= 0 bytes, got %lld", (long long)slice);
  if (from < 0) return sg_err_set(SG_ECONFIG, "slice_from: must be >= 0 bytes, got %lld", (long long)from);
  cfg->slice_from = (uint64_t)from;
  int64_t window;
  SG_CHECK(sg_setting_int(o, ps_options, "slice_window", &window));
  if (window < 0 || window > 1 << 20)
    return sg_err_set(SG_ECONFIG, "slice_window: must be 0..1048576 slices, got %lld",
                      (long long)window);
  cfg->slice_window = (int)window;
  /* Slices are cut from a dense shard and applied once per sync step; the
   * sparse paths send (index, value) pairs of varying length. */
  int dense = !cfg->sparse && cfg->compress != PS_COMPRESS_TOPK;
  cfg->slice_bytes = cfg->mode == PS_SYNC && dense ? (uint64_t)slice : 0;
  /* simulated with compute modeled (_sim_step_s): dense payloads are
   * folded across the ranks, every header kept (core/msgbuf.h) */
  double sim_step = 0;
  SG_CHECK(sg_opts_double_or(o, "_sim_step_s", 0, &sim_step));
  cfg->fold = sim_step > 0 && dense;
  return SG_OK;
}

uint64_t ps_slicing(const ps_cfg_t *cfg, size_t n) {
  size_t off, cnt;
  ps_shard_range(n, cfg->servers, 0, &off, &cnt); /* shard 0 is the largest */
  return (uint64_t)cnt * sizeof(float) >= cfg->slice_from ? cfg->slice_bytes : 0;
}

/* sparse: true under simulate.compute: modeled: a sparse worker asks its
 * batch which coordinates it reads (ps_sparse.c), and compute: modeled
 * loads no data (at most a libsvm file's shape), so every such run failed
 * at its first step; refused here, before launch.  Simulation is on unless
 * simulate: false (harness/run/config.c check_simulate). */
static int ps_layout(const sg_opts_t *o, int workers, int *nprocs) {
  ps_cfg_t cfg;
  SG_CHECK(ps_cfg_from_opts(&cfg, o, workers));
  const char *sim = sg_opts_str_or(o, "simulate", "");
  if (cfg.sparse && strcmp(sim, "false") && strcmp(sim, "0") &&
      !strcmp(sg_opts_str_or(o, "simulate.compute", "executed"), "modeled"))
    return sg_err_set(SG_ECONFIG, "sparse: true needs simulate.compute: executed (a sparse "
                      "worker reads its batch's coordinates from the data, which compute: "
                      "modeled does not load)");
  *nprocs = cfg.servers + workers;
  return SG_OK;
}

static const sg_role_info_t ps_roles[] = {
    {"server", SG_ROLE_HUB}, {"worker", SG_ROLE_WORKER}, {NULL, SG_ROLE_WORKER}};

/* ssp and async apply gradients computed on older parameters. */
static int ps_stale(const sg_opts_t *o) {
  ps_cfg_t cfg;
  return ps_cfg_from_opts(&cfg, o, 1) == SG_OK && cfg.mode != PS_SYNC;
}

static const char *ps_role(const sg_opts_t *o, int workers, int rank) {
  ps_cfg_t cfg;
  if (ps_cfg_from_opts(&cfg, o, workers) < 0) return "worker";
  return rank < cfg.servers ? "server" : "worker";
}

/* async rides out a dead worker (the servers stop counting it after one
 * deadline, ps.h Failure); sync and ssp cannot, nor can a server die. */
static int ps_tolerates_exit(const sg_opts_t *o, int workers, int rank) {
  ps_cfg_t cfg;
  if (ps_cfg_from_opts(&cfg, o, workers) < 0) return 0;
  return cfg.mode == PS_ASYNC && rank >= cfg.servers;
}

static int ps_run(sg_rank_ctx_t *ctx) {
  ps_cfg_t cfg;
  SG_CHECK(ps_cfg_from_opts(&cfg, ctx->opts, ctx->workers));
  if (ctx->size != cfg.servers + cfg.workers)
    return sg_err_set(SG_ECONFIG, "ps: %d processes, expected %d servers + %d workers", ctx->size,
                      cfg.servers, cfg.workers);
  if (ctx->rank < cfg.servers) return ps_server_run(ctx, &cfg);
  return ps_worker_run(ctx, &cfg);
}

/* "ps sync", "ps ssp(2)" (staleness means something only under ssp),
 * then the other options not at their default: "ps async servers=2". */
static void ps_label(const sg_opts_t *o, char *out, size_t cap) {
  static const char *const spelled[] = {"mode", "staleness", NULL};
  const char *mode = sg_setting_or(o, ps_options, "mode");
  int n = !strcmp(mode, "ssp") ? snprintf(out, cap, "ps ssp(%s)", sg_setting_or(o, ps_options, "staleness"))
                               : snprintf(out, cap, "ps %s", mode);
  sg_engine_label_options(&sg_engine_ps, o, spelled, out, cap, n < 0 ? 0 : (size_t)n);
}

extern const struct sg_bench_round sg_ps_bench_round; /* the benchmark round, next to the engine */

static const sg_option_need_t ps_needs[] = {
    {"staleness", "mode", "|ssp|"},
    {"time_budget", "mode", "|ssp|async|"},
    {"topk", "compress", "|topk|"},
    {"slice", "mode", "|sync|"},
    {"slice_from", "mode", "|sync|"},
    {"slice_window", "mode", "|sync|"},
    {NULL, NULL, NULL},
};

/* A server: the full vector at init, its shard's parameters (with their
 * header), sum and scratch, one slot per worker in sync to hold the
 * pushes, momentum for its shard; fp16 a wide sum.  The evaluating worker
 * (the first after the servers) holds the test set; every worker a push,
 * a pull and a reply per shard.  A push, and so a server's scratch and
 * slots, holds 8-byte (index, value) pairs per element of its shard with
 * sparse: true or compress: topk (ps_worker.c buffers_new, ps_server.c
 * s.cap): 2 P/S where a dense push is P/S; a topk push writes only its
 * topk fraction of them (2 topk P/S), and the pages past it are never
 * touched.  Message buffers (msg): a
 * server's parameters-with-header, scratch and sync slots; a worker's
 * push and reply per shard, each one message, or one per slice where the
 * shard is sliced.  In flight at once (msg_out; a simulated deferred
 * send holds a copy of each): a server's reply to each worker (its
 * shard, N times; sparse: the rows asked for, left out), a worker's push
 * to each server (the whole gradient; topk: its pairs; sparse: left
 * out).  The rank's own besides them (own: parsed, never
 * folded): a sparse server's requested indices per worker and its reply
 * (ps_server.c, pend[w].idx and sreply), a sparse worker's pulls (their
 * indices), a topk worker's selected pairs (ps_worker.c, pairs: 8 bytes
 * per element of its largest shard, the topk fraction of them written);
 * a topk worker also holds its
 * residual (P) and magnitudes (P/S), folded under compute: modeled. */
static void ps_memory(const sg_opts_t *o, int workers, int rank, sg_mem_plan_t *m) {
  int64_t servers = sg_setting_int_or(o, ps_options, "servers");
  double S = servers > 0 ? (double)servers : 1, N = workers, P = m->in_P;
  ps_cfg_t cfg;
  int ok = ps_cfg_from_opts(&cfg, o, workers) == SG_OK;
  if (!ok) sg_err_clear();
  size_t n = (size_t)(P / 4);
  uint64_t slice = ok ? ps_slicing(&cfg, n) : 0;
  double shard = P / S, per = slice ? ceil(shard / (double)slice) : 1;
  int sparse = !strcmp(sg_setting_or(o, ps_options, "sparse"), "true");
  const char *compress = sg_setting_or(o, ps_options, "compress");
  int topk = !sparse && !strcmp(compress, "topk"), fp16 = !sparse && !strcmp(compress, "fp16");
  int dense = ok && !cfg.sparse && cfg.compress != PS_COMPRESS_TOPK;
  /* what a push fills, in floats per element of its shard: 8-byte pairs
   * for every element the sparse path may push; the topk fraction of
   * them with topk (the rest of its buffer is never written, nor is the
   * rest of a server's scratch and slots that receive it) */
  const double t = topk ? (ok ? cfg.topk : 1) : 0, wire = sparse ? 2 : topk ? 2 * t : 1;
  if (rank < servers) {
    int sync = !strcmp(sg_setting_or(o, ps_options, "mode"), "sync");
    double msg = 1 + wire + (sync ? N * wire : 0);
    *m = (sg_mem_plan_t){.params = 1, .optim = 1 / S,
                         .engine = (msg + 1 + (fp16 ? 1 : 0) + (sparse ? N + 1 : 0)) / S,
                         .train = !strcmp(sg_setting_or(o, ps_options, "dataset"), "libsvm"),
                         .msg = msg / S, .msg_out = sparse ? 0 : N / S,
                         .msg_frames = 2 + (sync ? N * per : 0),
                         .msg_fold = dense, .own = sparse ? (N + 1) / S : 0};
    return;
  }
  const double pairs = topk ? 2 * t / S : 0, pulls = sparse ? 1 : 0;
  *m = (sg_mem_plan_t){.params = 1, .grad = 1,
                       .engine = wire + 2 + (topk ? 1 + 1 / S + pairs : 0), .batch_mult = 1,
                       .train = 1, .test = rank == servers, .msg = wire + 1,
                       .msg_out = dense ? 1 : topk ? 2 * t : 0,
                       .msg_frames = 2 * S * per, .msg_fold = dense, .own = pairs + pulls};
}

/* device: cuda workers keep a device replica and push dense gradients
 * (ps_worker.c): the sparse path and topk select on host vectors. */
static int ps_check_transport(const sg_opts_t *o, const char *transport) {
  (void)transport;
  if (strcmp(sg_opts_str_or(o, "device", "cpu"), "cuda") != 0) return SG_OK;
  if (!strcmp(sg_opts_str_or(o, "sparse", "false"), "true"))
    return sg_err_set(SG_ECONFIG, "sparse: true needs device cpu (the sparse push and pull run "
                      "on host vectors); device cuda pushes dense gradients");
  if (!strcmp(sg_opts_str_or(o, "compress", "none"), "topk"))
    return sg_err_set(SG_ECONFIG, "compress: topk needs device cpu (its selection and error "
                      "feedback run on host vectors); device cuda has none and fp16");
  return SG_OK;
}

extern const sg_cost_info_t sg_ps_cost_info; /* ps_cost.c */

const sg_engine_t sg_engine_ps = {
    .name = "ps",
    .summary = "parameter server: S sharded servers, N workers; sync, ssp (bounded staleness) or async; sparse push/pull",
    .options = ps_options,
    .layout = ps_layout,
    .role = ps_role,
    .roles = ps_roles,
    .stale = ps_stale,
    .check_transport = ps_check_transport,
    .run = ps_run,
    .tolerates_exit = ps_tolerates_exit,
    .bench = &sg_ps_bench_round,
    .label = ps_label,
    .needs = ps_needs,
    .memory = ps_memory,
    .cost = &sg_ps_cost_info,
};
