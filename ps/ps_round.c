/* ps_round.c - the parameter server's benchmark round (bench_method.h):
 * push+pull as a collective, so it compares with the allreduce at equal
 * message sizes.
 *
 * One round for count floats: every worker pushes its buffer, cut into
 * S shards, to the servers, each shard in slices of the engine's `slice`
 * bytes (one message per slice, the ps header in front; slice: 0, or a
 * shard below slice_from bytes, is one message); each server sums the N pushes of a slice as soon as
 * they are all in and sends the sum back to every worker while the next
 * slices come in, the schedule of the engine's sync step (ps_server.c).
 * The round ends with the allreduce (sum) of the buffers.  Bytes per round: each worker sends and receives K; server k
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
#include "msgbuf.h"
#include "ps.h"
#include "ps_proto.h"

typedef struct ps_round {
  sg_rank_ctx_t *ctx;
  int S, N;
  ps_cfg_t cfg;          /* the engine's settings (slice, slice_from) */
  unsigned char *msg;   /* server: one received slice [hdr | floats] */
  unsigned char *rep;   /* server: [hdr | floats] per slice of its shard */
  float *acc, *buf;
  int *got;             /* server: pushes of each slice so far */
  unsigned char **out, **in; /* worker: per shard, [hdr | floats] per slice */
  size_t *off, *cnt, *elems; /* worker: per shard, this round's range and slice */
  int *nsl, *rbase;     /* worker: per shard, slices and first reply request */
  int *ok, *osl;        /* worker: the round's pushes (ps_push_order) */
  sg_req_t **req;
  int nreq;
} ps_round_t;

#define HS sizeof(ps_hdr_t)

static void ps_impl(const sg_opts_t *o, char *out, size_t cap) {
  int64_t S = sg_setting_int_or(o, sg_engine_ps.options, "servers");
  snprintf(out, cap, "ps-S%lld", (long long)S);
}

/* Shard k of a count-float round and how it is cut: *elems floats a slice,
 * *nsl slices; slice c's message sits at c * (HS + 4 * elems) of a
 * per-slice buffer. */
static void slicing(const ps_round_t *b, size_t count, int k, size_t *off, size_t *cnt,
                    size_t *elems, int *nsl) {
  ps_shard_range(count, b->S, k, off, cnt);
  *elems = ps_slice_elems(*cnt, ps_slicing(&b->cfg, count));
  *nsl = ps_slice_count(*cnt, *elems);
}

static size_t slice_len(size_t cnt, size_t elems, int c) {
  size_t lo = (size_t)c * elems;
  return cnt - lo < elems ? cnt - lo : elems;
}

static int wait_all(ps_round_t *b) {
  for (int i = 0; i < b->nreq; i++) /* NULL: taken already */
    if (b->req[i]) SG_CHECK(sg_wait(b->ctx->comm, &b->req[i], NULL));
  b->nreq = 0;
  return SG_OK;
}

/* Slice c is summed: send it to every worker without waiting, so that the
 * next slices' pushes come in while it goes out. */
static int send_slice(ps_round_t *b, size_t off, size_t cnt, size_t elems, int c) {
  size_t lo = (size_t)c * elems, n = slice_len(cnt, elems, c);
  unsigned char *m = b->rep + (size_t)c * (HS + 4 * elems);
  ps_hdr_t h;
  ps_hdr_init(&h, PS_PARAMS, b->ctx->rank, 0, 0, 0, off + lo, n);
  memcpy(m, &h, HS);
  memcpy(m + HS, b->acc + lo, n * 4);
  for (int w = 0; w < b->N; w++)
    SG_CHECK(sg_isend(b->ctx->comm, b->S + w, PS_TAG_REPLY, m, HS + n * 4, &b->req[b->nreq++]));
  return SG_OK;
}

/* The slice a push covers, or -1 when it is none of the shard's. */
static int slice_of(const ps_hdr_t *h, size_t off, size_t cnt, size_t elems, int nsl) {
  if (h->offset < off) return -1;
  uint64_t rel = h->offset - off;
  if (elems == 0) return rel == 0 && h->count == 0 ? 0 : -1;
  if (rel % elems || rel / elems >= (uint64_t)nsl) return -1;
  int sl = (int)(rel / elems);
  return h->count == slice_len(cnt, elems, sl) ? sl : -1;
}

static int server_round(ps_round_t *b, size_t count) {
  sg_comm_t *c = b->ctx->comm;
  size_t off, cnt, elems;
  int nsl;
  slicing(b, count, b->ctx->rank, &off, &cnt, &elems, &nsl);
  memset(b->got, 0, (size_t)nsl * sizeof *b->got);
  for (int i = 0; i < b->N * nsl; i++) {
    SG_CHECK(sg_recv(c, SG_ANY_SOURCE, PS_TAG_REQ, b->msg, HS + elems * 4, NULL));
    ps_hdr_t h;
    memcpy(&h, b->msg, HS);
    int sl = slice_of(&h, off, cnt, elems, nsl);
    if (sl < 0)
      return sg_err_set(SG_EPROTO, "bench ps: push of elements %llu+%llu, not a slice of shard "
                        "%zu..%zu", (unsigned long long)h.offset, (unsigned long long)h.count,
                        off, off + cnt);
    size_t lo = (size_t)sl * elems, n = slice_len(cnt, elems, sl);
    const float *g = (const float *)(b->msg + HS);
    if (b->got[sl] == 0) memcpy(b->acc + lo, g, n * 4);
    else
      for (size_t j = 0; j < n; j++) b->acc[lo + j] += g[j];
    if (++b->got[sl] == b->N) SG_CHECK(send_slice(b, off, cnt, elems, sl));
  }
  return wait_all(b);
}

/* Every reply receive is posted before the first push goes out; the
 * pushes go in ps_push_order, each once the reply slice_window slices
 * back is in (the engine's schedule, ps_worker.c): the server can answer
 * slice 0 while slice 1 is still on the way in. */
static int worker_round(ps_round_t *b, size_t count) {
  sg_comm_t *c = b->ctx->comm;
  int S = b->S, nr = 0;
  for (int k = 0; k < S; k++) {
    slicing(b, count, k, &b->off[k], &b->cnt[k], &b->elems[k], &b->nsl[k]);
    b->rbase[k] = nr;
    for (int sl = 0; sl < b->nsl[k]; sl++, nr++)
      SG_CHECK(sg_irecv(c, k, PS_TAG_REPLY, b->in[k] + (size_t)sl * (HS + 4 * b->elems[k]),
                        HS + b->elems[k] * 4, &b->req[nr]));
  }
  int np = ps_push_order(S, b->nsl, b->ok, b->osl), taken = 0;
  for (int j = 0; j < np; j++, nr++) {
    for (; ps_window_lag(j, b->cfg.slice_window, S) >= taken; taken++)
      SG_CHECK(sg_wait(c, &b->req[b->rbase[b->ok[taken]] + b->osl[taken]], NULL));
    int k = b->ok[j], sl = b->osl[j];
    size_t elems = b->elems[k], lo = (size_t)sl * elems, n = slice_len(b->cnt[k], elems, sl);
    unsigned char *m = b->out[k] + (size_t)sl * (HS + 4 * elems);
    ps_hdr_t h;
    ps_hdr_init(&h, PS_PUSH, k, 0, 0, 0, b->off[k] + lo, n);
    memcpy(m, &h, HS);
    memcpy(m + HS, b->buf + b->off[k] + lo, n * 4);
    SG_CHECK(sg_isend(c, k, PS_TAG_REQ, m, HS + n * 4, &b->req[nr]));
  }
  b->nreq = nr;
  SG_CHECK(wait_all(b));
  for (int k = 0; k < S; k++)
    for (int sl = 0; sl < b->nsl[k]; sl++)
      memcpy(b->buf + b->off[k] + (size_t)sl * b->elems[k],
             b->in[k] + (size_t)sl * (HS + 4 * b->elems[k]) + HS,
             slice_len(b->cnt[k], b->elems[k], sl) * 4);
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
  free(b->off);
  free(b->cnt);
  free(b->elems);
  free(b->nsl);
  free(b->rbase);
  free(b->ok);
  free(b->osl);
  free(b->msg);
  free(b->rep);
  free(b->got);
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
  b->cfg = cfg;
  size_t maxc = max_count + PS_SHARD_ALIGN, S = (size_t)b->S;
  /* the most slices and requests any round of at most maxc floats needs */
  size_t most = (size_t)ps_slice_count(maxc, ps_slice_elems(maxc, cfg.slice_bytes)) + 1;
  size_t sbuf = most * HS + maxc * 4, nreq = S * 2 * most + most * (size_t)b->N;
  if (!(b->msg = malloc(HS + maxc * 4)) || !(b->rep = malloc(sbuf)) ||
      !(b->got = calloc(most, sizeof *b->got)) || !(b->acc = malloc(maxc * 4)) ||
      !(b->buf = calloc(maxc, 4)) || !(b->out = calloc(S, sizeof *b->out)) ||
      !(b->in = calloc(S, sizeof *b->in)) || !(b->req = calloc(nreq, sizeof *b->req)) ||
      !(b->off = calloc(S, sizeof *b->off)) || !(b->cnt = calloc(S, sizeof *b->cnt)) ||
      !(b->elems = calloc(S, sizeof *b->elems)) || !(b->nsl = calloc(S, sizeof *b->nsl)) ||
      !(b->rbase = calloc(S, sizeof *b->rbase)) || !(b->ok = calloc(S * most, sizeof *b->ok)) ||
      !(b->osl = calloc(S * most, sizeof *b->osl)))
    return sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", maxc);
  for (size_t k = 0; k < S; k++)
    if (!(b->out[k] = malloc(sbuf)) || !(b->in[k] = malloc(sbuf)))
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
