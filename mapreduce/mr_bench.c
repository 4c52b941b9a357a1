/* mr_bench.c - `bench-mapreduce`: one step of the mapreduce engine's
 * communication (broadcast K bytes, reduce N gradients of K bytes), timed
 * like bench-allreduce (allreduce/bench_engine.c) so that
 * `sgdlab bench allreduce --impl mapreduce` compares it with the
 * collectives at equal message sizes.  Internal: run by harness/bench.c.
 *
 * Ranks: 0 is the driver, 1..N the executors (N = workers).  One
 * iteration for bytes = K, with the engine's own functions:
 *   mr_broadcast(driver's K bytes -> every executor)   flat or tree
 *   mr_aggregate(every executor's K bytes -> driver)   flat or tree
 * The driver ends holding the sum of the executors' buffers -- an
 * allreduce's result on one rank.  Link bytes: flat, the driver's link
 * carries 2*N*K per iteration (N sends, N receives) against 2*K*(N-1)/N
 * for a ring link; the tree variants bring the driver's share to
 * K*ceil(log2(N+1)) + K*ceil(N/f^(d-1)) (mapreduce.h).
 *
 *   1. correctness, untimed: the driver broadcasts buf[i] = i%7 + 1; each
 *      executor e checks what it received, then contributes e * buf[i];
 *      the driver's sum must be exactly (i%7 + 1) * N(N+1)/2 (small
 *      integers in floats: every order gives the same bits).  Wrong
 *      elements on executors (broadcast) and on the driver (reduce) add up.
 *   2. iteration count: `iters`, or (0) about 0.2 s worth from the
 *      driver's time for two iterations (the driver finishes last: the
 *      reduce ends there), clamped to [5, 1000], sent to every executor.
 *   3. `warmup` untimed iterations, a barrier over all N+1 ranks.
 *   4. `iters` timed iterations; the time of iteration i is the slowest
 *      rank's (every rank's times are gathered on the driver).
 *   5. the driver sends one bench record per size: collective
 *      "allreduce", impl "mapreduce-flat" / "mapreduce-tree" (or
 *      "mapreduce-b<bcast>-a<aggregate>" when they differ), np = N,
 *      algbw = K / t_median, busbw = algbw * 2(N-1)/N: the ring formula,
 *      so the column reads "allreduce-equivalent bandwidth", not the
 *      bytes the driver's link moves.
 *
 * Tests: SG_MAPREDUCE_PLANT_BUG=1 in the ranks' environment makes the
 * driver add executor 1's contribution twice (mr_config_t's
 * plant_double_rank), which step 1 must report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "err.h"
#include "mapreduce.h"

#define MRB_MAX_ITERS 1000
#define MRB_TARGET_S 0.2
enum { TAG_MRB_ITERS = 120, TAG_MRB_TIMES = 121 };

/* clang-format off */
static const sg_setting_t mrb_options[] = {
  {"broadcast", SG_T_ENUM, "flat", "driver -> executors: flat or tree (binomial)", "flat|tree", 1, 0, SG_S_ENGINE},
  {"aggregate", SG_T_ENUM, "flat", "executors -> driver: flat or tree (treeAggregate, see depth)", "flat|tree", 1, 0, SG_S_ENGINE},
  {"depth", SG_T_INT, "2", "aggregate tree: levels, driver included", NULL, 1, 16, SG_S_ENGINE},
  {"min_bytes", SG_T_INT, "1M", "smallest message in bytes (K/M/G suffixes)", NULL, 4, 4e9, SG_S_ENGINE},
  {"max_bytes", SG_T_INT, "16M", "largest message in bytes; sizes double from min_bytes", NULL, 4, 4e9, SG_S_ENGINE},
  {"iters", SG_T_INT, "0", "timed iterations per size (0 = about 0.2 s worth, 5..1000)", NULL, 0, MRB_MAX_ITERS, SG_S_ENGINE},
  {"warmup", SG_T_INT, "3", "untimed iterations before timing", NULL, 0, 1000, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

typedef struct mrb {
  sg_rank_ctx_t *ctx;
  mr_config_t cfg;
  float *buf, *acc, *tmp; /* max_bytes each */
  double *times, *peer;   /* MRB_MAX_ITERS + 1 */
  char impl[32];
} mrb_t;

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return a < c ? -1 : a > c;
}

/* One iteration: broadcast buf, reduce acc into the driver's acc. */
static int mrb_iter(mrb_t *b, size_t n) {
  sg_comm_t *c = b->ctx->comm;
  SG_CHECK(mr_broadcast(c, &b->cfg, b->buf, n));
  return mr_aggregate(c, &b->cfg, b->acc, b->tmp, n);
}

static int mrb_check(mrb_t *b, size_t n, double *wrong) {
  int r = b->ctx->rank, N = b->cfg.executors;
  *wrong = 0;
  if (r == 0)
    for (size_t i = 0; i < n; i++) b->buf[i] = (float)(i % 7 + 1);
  SG_CHECK(mr_broadcast(b->ctx->comm, &b->cfg, b->buf, n));
  if (r != 0) {
    for (size_t i = 0; i < n; i++) {
      *wrong += b->buf[i] != (float)(i % 7 + 1);
      b->acc[i] = (float)r * b->buf[i];
    }
  }
  SG_CHECK(mr_aggregate(b->ctx->comm, &b->cfg, b->acc, b->tmp, n));
  if (r == 0) {
    const float tri = (float)N * (float)(N + 1) / 2;
    for (size_t i = 0; i < n; i++) *wrong += b->acc[i] != (float)(i % 7 + 1) * tri;
  }
  /* harmless inputs for the timed iterations */
  memset(b->buf, 0, n * sizeof *b->buf);
  memset(b->acc, 0, n * sizeof *b->acc);
  return SG_OK;
}

static int mrb_size(mrb_t *b, size_t bytes, int64_t iters_opt, int64_t warmup) {
  sg_rank_ctx_t *ctx = b->ctx;
  sg_comm_t *c = ctx->comm;
  size_t n = bytes / sizeof(float);
  double wrong;
  SG_CHECK(mrb_check(b, n, &wrong));

  int64_t iters = iters_opt;
  if (ctx->rank == 0) {
    if (iters == 0) {
      double t = sg_now();
      SG_CHECK(mrb_iter(b, n));
      SG_CHECK(mrb_iter(b, n));
      double est = (sg_now() - t) / 2;
      iters = (int64_t)(MRB_TARGET_S / (est > 1e-7 ? est : 1e-7));
      iters = iters < 5 ? 5 : iters > MRB_MAX_ITERS ? MRB_MAX_ITERS : iters;
    }
    for (int r = 1; r < ctx->size; r++)
      SG_CHECK(sg_send(c, r, TAG_MRB_ITERS, &iters, sizeof iters));
  } else {
    if (iters == 0) {
      SG_CHECK(mrb_iter(b, n));
      SG_CHECK(mrb_iter(b, n));
    }
    SG_CHECK(mr_recv_dl(c, MR_DL_EXECUTOR, 0, TAG_MRB_ITERS, &iters, sizeof iters, NULL));
    if (iters < 1 || iters > MRB_MAX_ITERS)
      return sg_err_set(SG_EPROTO, "bench-mapreduce: rank %d got iteration count %lld from the driver",
                        ctx->rank, (long long)iters);
  }
  for (int64_t i = 0; i < warmup; i++) SG_CHECK(mrb_iter(b, n));
  SG_CHECK(sg_barrier(c));
  for (int64_t i = 0; i < iters; i++) {
    double t = sg_now();
    SG_CHECK(mrb_iter(b, n));
    b->times[i] = sg_now() - t;
  }

  /* the slowest rank per iteration, and the wrong counts, on the driver */
  size_t len = (size_t)(iters + 1) * sizeof(double);
  if (ctx->rank != 0) {
    b->peer[0] = wrong;
    memcpy(b->peer + 1, b->times, (size_t)iters * sizeof(double));
    return sg_send(c, 0, TAG_MRB_TIMES, b->peer, len);
  }
  for (int r = 1; r < ctx->size; r++) {
    sg_status_t st;
    SG_CHECK(mr_recv_dl(c, MR_DL_REDUCE, r, TAG_MRB_TIMES, b->peer, len, &st));
    if (st.bytes != len)
      return sg_err_set(SG_EPROTO, "bench-mapreduce: %zu timing bytes from rank %d, expected %zu",
                        st.bytes, r, len);
    wrong += b->peer[0];
    for (int64_t i = 0; i < iters; i++)
      if (b->peer[1 + i] > b->times[i]) b->times[i] = b->peer[1 + i];
  }
  qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
  int N = b->cfg.executors;
  sg_bench_rec_t rec = {.np = N, .iters = (int32_t)iters, .bytes = n * sizeof(float),
                        .t_min = b->times[0], .t_max = b->times[iters - 1],
                        .wrong = (int64_t)wrong};
  rec.t_median = iters % 2 ? b->times[iters / 2]
                           : (b->times[iters / 2 - 1] + b->times[iters / 2]) / 2;
  rec.algbw = (double)rec.bytes / rec.t_median / 1e9;
  rec.busbw = rec.algbw * 2.0 * (N - 1) / N;
  snprintf(rec.collective, sizeof rec.collective, "allreduce");
  snprintf(rec.impl, sizeof rec.impl, "%s", b->impl);
  snprintf(rec.transport, sizeof rec.transport, "%s", c->ops->name);
  return sg_records_bench(ctx->rec, &rec);
}

static int mrb_run(sg_rank_ctx_t *ctx) {
  mrb_t b = {.ctx = ctx};
  int64_t lo, hi, iters, warmup, depth;
  int rc;
  SG_CHECK(sg_opts_int_or(ctx->opts, "min_bytes", 1 << 20, &lo));
  SG_CHECK(sg_opts_int_or(ctx->opts, "max_bytes", 16 << 20, &hi));
  SG_CHECK(sg_opts_int_or(ctx->opts, "iters", 0, &iters));
  SG_CHECK(sg_opts_int_or(ctx->opts, "warmup", 3, &warmup));
  SG_CHECK(sg_opts_int_or(ctx->opts, "depth", 2, &depth));
  if (lo < 4 || hi < lo)
    return sg_err_set(SG_ECONFIG, "min_bytes/max_bytes: need 4 <= %lld <= %lld", (long long)lo,
                      (long long)hi);
  const char *bc = sg_opts_str_or(ctx->opts, "broadcast", "flat");
  const char *ag = sg_opts_str_or(ctx->opts, "aggregate", "flat");
  b.cfg.tree_broadcast = strcmp(bc, "tree") == 0;
  b.cfg.depth = strcmp(ag, "tree") == 0 ? (int)depth : 1;
  b.cfg.executors = ctx->workers;
  b.cfg.partitions = ctx->workers;
  b.cfg.batch = 1;
  const char *plant = getenv("SG_MAPREDUCE_PLANT_BUG");
  if (plant && plant[0] && strcmp(plant, "0") != 0) b.cfg.plant_double_rank = 1;
  if (!strcmp(bc, ag)) snprintf(b.impl, sizeof b.impl, "mapreduce-%s", bc);
  else snprintf(b.impl, sizeof b.impl, "mapreduce-b%s-a%s", bc, ag);

  size_t cap = (size_t)hi / sizeof(float) + 1;
  rc = SG_ENOMEM;
  if (!(b.buf = calloc(cap, sizeof(float))) || !(b.acc = calloc(cap, sizeof(float))) ||
      !(b.tmp = calloc(cap, sizeof(float))) || !(b.times = calloc(MRB_MAX_ITERS + 1, sizeof(double))) ||
      !(b.peer = calloc(MRB_MAX_ITERS + 1, sizeof(double)))) {
    sg_err_set(SG_ENOMEM, "bench-mapreduce: no memory for 3 x %lld bytes", (long long)hi);
    goto fail;
  }
  for (int64_t bytes = lo; bytes <= hi; bytes *= 2)
    SG_TRY(mrb_size(&b, (size_t)bytes, iters, warmup));
  rc = SG_OK;
fail:
  free(b.buf);
  free(b.acc);
  free(b.tmp);
  free(b.times);
  free(b.peer);
  return rc;
}

static int mrb_layout(const sg_opts_t *o, int workers, int *nprocs) {
  (void)o;
  if (workers < 1) return sg_err_set(SG_ECONFIG, "workers: bench-mapreduce needs >= 1, got %d", workers);
  *nprocs = workers + 1;
  return SG_OK;
}

static const char *mrb_role(const sg_opts_t *o, int workers, int rank) {
  (void)o;
  (void)workers;
  return rank == 0 ? "driver" : "executor";
}

const sg_engine_t sg_engine_bench_mapreduce = {
    .name = "bench-mapreduce",
    .summary = "(internal) `sgdlab bench allreduce --impl mapreduce`: driver broadcast + reduce per size",
    .options = mrb_options,
    .layout = mrb_layout,
    .role = mrb_role,
    .check_transport = NULL,
    .run = mrb_run,
};
