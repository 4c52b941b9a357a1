/* ps_round.c - the parameter server's benchmark round (bench_method.h):
 * push+pull as a collective, so it compares with the allreduce at equal
 * message sizes.
 *
 * One round for count floats: every worker pushes its buffer, sliced into
 * S shards, to the servers (one message per shard, the ps header in
 * front); each server sums the N pushes of its shard and sends the sum
 * back to every worker, which ends with the allreduce (sum) of the
 * buffers.  Bytes per round: each worker sends and receives K; server k
 * receives N*K/S and sends N*K/S, so its link carries 2*N*K/S against
 * 2*K*(N-1)/N for a ring: with S = 1 the server link carries about N
 * times a ring link, and S = N servers bring it to 2K.  Contributor =
 * worker index; servers check nothing (wrong = 0).  Messages of at least
 * 64 bytes: a shard boundary falls on PS_SHARD_ALIGN floats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_method.h"
#include "err.h"
#include "ps.h"
#include "ps_proto.h"

typedef struct ps_round {
  sg_rank_ctx_t *ctx;
  int S, N;
  unsigned char *msg; /* server: [hdr | floats] of its largest shard */
  float *acc, *buf;
  unsigned char **out, **in; /* worker: per shard */
  sg_req_t **req;
} ps_round_t;

#define HS sizeof(ps_hdr_t)

static void ps_impl(const sg_opts_t *o, char *out, size_t cap) {
  int64_t S = 1;
  sg_opts_int_or(o, "servers", 1, &S);
  snprintf(out, cap, "ps-S%lld", (long long)S);
}

static int server_round(ps_round_t *b, size_t count) {
  sg_comm_t *c = b->ctx->comm;
  size_t off, cnt;
  ps_shard_range(count, b->S, b->ctx->rank, &off, &cnt);
  for (int i = 0; i < b->N; i++) {
    SG_CHECK(sg_recv(c, SG_ANY_SOURCE, PS_TAG_REQ, b->msg, HS + cnt * 4, NULL));
    const float *g = (const float *)(b->msg + HS);
    if (i == 0) memcpy(b->acc, g, cnt * 4);
    else
      for (size_t j = 0; j < cnt; j++) b->acc[j] += g[j];
  }
  ps_hdr_t h;
  ps_hdr_init(&h, PS_PARAMS, b->ctx->rank, 0, 0, 0, off, cnt);
  memcpy(b->msg, &h, HS);
  memcpy(b->msg + HS, b->acc, cnt * 4);
  for (int w = 0; w < b->N; w++) SG_CHECK(sg_send(c, b->S + w, PS_TAG_REPLY, b->msg, HS + cnt * 4));
  return SG_OK;
}

static int worker_round(ps_round_t *b, size_t count) {
  sg_comm_t *c = b->ctx->comm;
  for (int k = 0; k < b->S; k++) {
    size_t off, cnt;
    ps_shard_range(count, b->S, k, &off, &cnt);
    ps_hdr_t h;
    ps_hdr_init(&h, PS_PUSH, k, 0, 0, 0, off, cnt);
    memcpy(b->out[k], &h, HS);
    memcpy(b->out[k] + HS, b->buf + off, cnt * 4);
    SG_CHECK(sg_isend(c, k, PS_TAG_REQ, b->out[k], HS + cnt * 4, &b->req[k]));
    SG_CHECK(sg_irecv(c, k, PS_TAG_REPLY, b->in[k], HS + cnt * 4, &b->req[b->S + k]));
  }
  for (int k = 0; k < 2 * b->S; k++) SG_CHECK(sg_wait(c, &b->req[k], NULL));
  for (int k = 0; k < b->S; k++) {
    size_t off, cnt;
    ps_shard_range(count, b->S, k, &off, &cnt);
    memcpy(b->buf + off, b->in[k] + HS, cnt * 4);
  }
  return SG_OK;
}

static int ps_round_run(void *st, size_t count) {
  ps_round_t *b = st;
  return b->ctx->rank < b->S ? server_round(b, count) : worker_round(b, count);
}

static int ps_fill(void *st, size_t count) {
  ps_round_t *b = st;
  int w = b->ctx->rank - b->S;
  if (w >= 0)
    for (size_t i = 0; i < count; i++) b->buf[i] = sg_bench_input(w, i);
  return SG_OK;
}

static int ps_check(void *st, size_t count, double *wrong) {
  ps_round_t *b = st;
  *wrong = 0;
  if (b->ctx->rank < b->S) return SG_OK;
  for (size_t i = 0; i < count; i++) *wrong += b->buf[i] != sg_bench_expected(b->N, i);
  memset(b->buf, 0, count * 4);
  return SG_OK;
}

static void ps_destroy(void **st) {
  ps_round_t *b = *st;
  if (!b) return;
  for (int k = 0; b->out && b->in && k < b->S; k++) {
    free(b->out[k]);
    free(b->in[k]);
  }
  free(b->out);
  free(b->in);
  free(b->req);
  free(b->msg);
  free(b->acc);
  free(b->buf);
  free(b);
  *st = NULL;
}

static int ps_init(void **st, sg_rank_ctx_t *ctx, size_t max_count) {
  ps_cfg_t cfg;
  SG_CHECK(ps_cfg_from_opts(&cfg, ctx->opts, ctx->workers));
  ps_round_t *b = calloc(1, sizeof *b);
  if (!b) return sg_err_set(SG_ENOMEM, "bench: no memory");
  *st = b;
  b->ctx = ctx;
  b->S = cfg.servers;
  b->N = cfg.workers;
  size_t maxc = max_count + PS_SHARD_ALIGN, S = (size_t)b->S;
  if (!(b->msg = malloc(HS + maxc * 4)) || !(b->acc = malloc(maxc * 4)) ||
      !(b->buf = calloc(maxc, 4)) || !(b->out = calloc(S, sizeof *b->out)) ||
      !(b->in = calloc(S, sizeof *b->in)) || !(b->req = calloc(2 * S, sizeof *b->req)))
    return sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", maxc);
  for (size_t k = 0; k < S; k++)
    if (!(b->out[k] = malloc(HS + maxc * 4)) || !(b->in[k] = malloc(HS + maxc * 4)))
      return sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", maxc);
  return SG_OK;
}

static const sg_bench_variant_t ps_variants[] = {
    {"ps", "servers: [%S]", "push + pull through S sharded servers (ps-S<S>, per --servers)",
     NULL, 0},
    {NULL, NULL, NULL, NULL, 0},
};

const sg_bench_round_t sg_ps_bench_round = {
    .collective = "allreduce",
    .min_bytes = 64,
    .iters_hint = 20, /* the count ps rows have always been measured with */
    .exact_counts = 0,
    .variants = ps_variants,
    .bus_factor = sg_bench_ring_factor,
    .impl = ps_impl,
    .init = ps_init,
    .fill = ps_fill,
    .run = ps_round_run,
    .check = ps_check,
    .destroy = ps_destroy,
};
