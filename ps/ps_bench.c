/* ps_bench.c - `bench-ps`: the parameter server's push+pull as a
 * collective, measured like the allreduce benchmark, so the
 * two can be compared at equal message sizes.
 *
 * One iteration for `bytes` = K: every worker pushes its K-byte buffer,
 * sliced into S shards, to the servers (one message per shard, the ps
 * header in front); each server sums the N pushes of its shard and sends
 * the sum back to every worker.  The result on every worker is the
 * allreduce (sum) of the buffers.  Bytes per iteration: each worker sends
 * and receives K; server k receives N*K/S and sends N*K/S, so its link
 * carries 2*N*K/S against 2*K*(N-1)/N for a ring: with S = 1 the server
 * link carries about N times a ring link, and S = N servers bring it to 2K.
 *
 *   1. correctness, untimed: buf[i] = (w+1) * (i%7 + 1) on worker w; the
 *      sum must be exactly (i%7 + 1) * N(N+1)/2 (small integers in floats).
 *   2. `warmup` untimed iterations, a barrier over all ranks.
 *   3. `iters` timed iterations (every rank runs the same count: it is a
 *      setting); the time of iteration i is the slowest worker's.
 *   4. worker 0 gathers the workers' times and sends one bench record per
 *      size: collective "allreduce", impl "ps-S<S>", np = N.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "err.h"
#include "ps_proto.h"

enum { TAG_BENCH_TIMES = 103 };

/* clang-format off */
static const sg_setting_t bench_ps_options[] = {
  {"servers", SG_T_INT, "1", "number of server processes S", NULL, 1, 1024, SG_S_ENGINE},
  {"min_bytes", SG_T_INT, "1M", "smallest message in bytes (K/M/G suffixes)", NULL, 64, 4e9, SG_S_ENGINE},
  {"max_bytes", SG_T_INT, "16M", "largest message in bytes; sizes double from min_bytes", NULL, 64, 4e9, SG_S_ENGINE},
  {"iters", SG_T_INT, "20", "timed iterations per size", NULL, 1, 10000, SG_S_ENGINE},
  {"warmup", SG_T_INT, "3", "untimed iterations before timing", NULL, 0, 1000, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

typedef struct bps {
  sg_rank_ctx_t *ctx;
  int S, N;
  size_t count;
  unsigned char *msg; /* [hdr | floats], the largest shard or a worker's slices */
  float *acc, *buf;
  unsigned char **out, **in; /* worker: per shard */
  sg_req_t **req;
} bps_t;

static int server_iter(bps_t *b) {
  sg_comm_t *c = b->ctx->comm;
  size_t off, cnt, hs = sizeof(ps_hdr_t);
  ps_shard_range(b->count, b->S, b->ctx->rank, &off, &cnt);
  for (int i = 0; i < b->N; i++) {
    sg_status_t st;
    SG_CHECK(sg_recv(c, SG_ANY_SOURCE, PS_TAG_REQ, b->msg, hs + cnt * 4, &st));
    const float *g = (const float *)(b->msg + hs);
    if (i == 0) memcpy(b->acc, g, cnt * 4);
    else
      for (size_t j = 0; j < cnt; j++) b->acc[j] += g[j];
  }
  ps_hdr_t h;
  ps_hdr_init(&h, PS_PARAMS, b->ctx->rank, 0, 0, 0, off, cnt);
  memcpy(b->msg, &h, hs);
  memcpy(b->msg + hs, b->acc, cnt * 4);
  for (int w = 0; w < b->N; w++) SG_CHECK(sg_send(c, b->S + w, PS_TAG_REPLY, b->msg, hs + cnt * 4));
  return SG_OK;
}

static int worker_iter(bps_t *b) {
  sg_comm_t *c = b->ctx->comm;
  size_t hs = sizeof(ps_hdr_t);
  for (int k = 0; k < b->S; k++) {
    size_t off, cnt;
    ps_shard_range(b->count, b->S, k, &off, &cnt);
    ps_hdr_t h;
    ps_hdr_init(&h, PS_PUSH, k, 0, 0, 0, off, cnt);
    memcpy(b->out[k], &h, hs);
    memcpy(b->out[k] + hs, b->buf + off, cnt * 4);
    SG_CHECK(sg_isend(c, k, PS_TAG_REQ, b->out[k], hs + cnt * 4, &b->req[k]));
    SG_CHECK(sg_irecv(c, k, PS_TAG_REPLY, b->in[k], hs + cnt * 4, &b->req[b->S + k]));
  }
  for (int k = 0; k < 2 * b->S; k++) SG_CHECK(sg_wait(c, &b->req[k], NULL));
  for (int k = 0; k < b->S; k++) {
    size_t off, cnt;
    ps_shard_range(b->count, b->S, k, &off, &cnt);
    memcpy(b->buf + off, b->in[k] + hs, cnt * 4);
  }
  return SG_OK;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, c = *(const double *)y;
  return a < c ? -1 : a > c;
}

static int bench_size(bps_t *b, size_t bytes, int64_t iters, int64_t warmup, double *times,
                      double *tmp) {
  sg_rank_ctx_t *ctx = b->ctx;
  int server = ctx->rank < b->S, w = ctx->rank - b->S;
  b->count = bytes / 4;
  /* 1. correctness */
  double wrong = 0;
  if (server) {
    SG_CHECK(server_iter(b));
  } else {
    for (size_t i = 0; i < b->count; i++) b->buf[i] = (float)(w + 1) * (float)(i % 7 + 1);
    SG_CHECK(worker_iter(b));
    const float tri = (float)b->N * (float)(b->N + 1) / 2;
    for (size_t i = 0; i < b->count; i++) wrong += b->buf[i] != (float)(i % 7 + 1) * tri;
    memset(b->buf, 0, b->count * 4);
  }
  for (int64_t i = 0; i < warmup; i++) SG_CHECK(server ? server_iter(b) : worker_iter(b));
  SG_CHECK(sg_barrier(ctx->comm));
  for (int64_t i = 0; i < iters; i++) {
    double t = sg_now();
    SG_CHECK(server ? server_iter(b) : worker_iter(b));
    times[i] = sg_now() - t;
  }
  if (server) return SG_OK;
  /* 4. worker 0 takes the slowest worker's time per iteration. */
  sg_comm_t *c = ctx->comm;
  if (w != 0) {
    tmp[0] = wrong;
    memcpy(tmp + 1, times, (size_t)iters * sizeof *times);
    return sg_send(c, b->S, TAG_BENCH_TIMES, tmp, (size_t)(iters + 1) * sizeof *tmp);
  }
  for (int v = 1; v < b->N; v++) {
    SG_CHECK(sg_recv(c, b->S + v, TAG_BENCH_TIMES, tmp, (size_t)(iters + 1) * sizeof *tmp, NULL));
    wrong += tmp[0];
    for (int64_t i = 0; i < iters; i++)
      if (tmp[1 + i] > times[i]) times[i] = tmp[1 + i];
  }
  qsort(times, (size_t)iters, sizeof *times, cmp_double);
  sg_bench_rec_t r = {.np = b->N, .iters = (int32_t)iters, .bytes = bytes, .wrong = (int64_t)wrong};
  snprintf(r.collective, sizeof r.collective, "allreduce");
  snprintf(r.impl, sizeof r.impl, "ps-S%d", b->S);
  snprintf(r.transport, sizeof r.transport, "%s", c->ops->name);
  r.t_min = times[0];
  r.t_max = times[iters - 1];
  r.t_median = times[iters / 2];
  r.algbw = (double)bytes / r.t_median / 1e9;
  r.busbw = r.algbw * 2.0 * (b->N - 1) / b->N;
  printf("ps-S%d np %d bytes %zu: median %.3f ms, algbw %.2f GB/s, wrong %lld\n", b->S, b->N,
         bytes, r.t_median * 1e3, r.algbw, (long long)r.wrong);
  return sg_records_bench(ctx->rec, &r);
}

static int bench_ps_layout(const sg_opts_t *o, int workers, int *nprocs) {
  int64_t S;
  SG_CHECK(sg_opts_int_or(o, "servers", 1, &S));
  *nprocs = (int)S + workers;
  return SG_OK;
}

static const char *bench_ps_role(const sg_opts_t *o, int workers, int rank) {
  int64_t S = 1;
  (void)workers;
  sg_opts_int_or(o, "servers", 1, &S);
  return rank < S ? "server" : "worker";
}

static int bench_ps_run(sg_rank_ctx_t *ctx) {
  int64_t S, lo, hi, iters, warmup;
  int rc;
  SG_CHECK(sg_opts_int_or(ctx->opts, "servers", 1, &S));
  SG_CHECK(sg_opts_int_or(ctx->opts, "min_bytes", 1 << 20, &lo));
  SG_CHECK(sg_opts_int_or(ctx->opts, "max_bytes", 16 << 20, &hi));
  SG_CHECK(sg_opts_int_or(ctx->opts, "iters", 20, &iters));
  SG_CHECK(sg_opts_int_or(ctx->opts, "warmup", 3, &warmup));
  bps_t b = {.ctx = ctx, .S = (int)S, .N = ctx->workers};
  size_t hs = sizeof(ps_hdr_t), maxc = (size_t)hi / 4 + PS_SHARD_ALIGN;
  double *times = malloc((size_t)iters * sizeof *times), *tmp = malloc((size_t)(iters + 1) * sizeof *tmp);
  rc = SG_ENOMEM;
  if (!times || !tmp || !(b.msg = malloc(hs + maxc * 4)) || !(b.acc = malloc(maxc * 4)) ||
      !(b.buf = calloc(maxc, 4)) || !(b.out = calloc((size_t)S, sizeof *b.out)) ||
      !(b.in = calloc((size_t)S, sizeof *b.in)) || !(b.req = calloc(2 * (size_t)S, sizeof *b.req)))
    goto fail;
  for (int k = 0; k < S; k++)
    if (!(b.out[k] = malloc(hs + maxc * 4)) || !(b.in[k] = malloc(hs + maxc * 4))) goto fail;
  for (int64_t bytes = lo; bytes <= hi; bytes *= 2)
    SG_TRY(bench_size(&b, (size_t)bytes, iters, warmup, times, tmp));
  rc = SG_OK;
fail:
  for (int k = 0; b.out && b.in && k < S; k++) {
    free(b.out[k]);
    free(b.in[k]);
  }
  free(b.out);
  free(b.in);
  free(b.req);
  free(b.msg);
  free(b.acc);
  free(b.buf);
  free(times);
  free(tmp);
  return rc;
}

const sg_engine_t sg_engine_bench_ps = {
    .name = "bench-ps",
    .summary = "benchmark: ps push+pull (server-side sum) of min_bytes..max_bytes, like bench-allreduce",
    .options = bench_ps_options,
    .layout = bench_ps_layout,
    .role = bench_ps_role,
    .check_transport = NULL,
    .run = bench_ps_run,
};
