/* bench_method.c - the benchmark method (bench_method.h), shared by every
 * engine's communication round. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_method.h"
#include "clock.h"
#include "err.h"

#define TARGET_S 0.2
enum { TAG_BENCH_ITERS = 140, TAG_BENCH_GATHER = 141 };

typedef struct method {
  sg_rank_ctx_t *ctx;
  const sg_bench_round_t *r;
  void *st;
  int64_t iters_opt, warmup;
  double *times, *peer; /* SG_BENCH_MAX_ITERS + 1 */
  char impl[32];
} method_t;

double sg_bench_ring_factor(int workers) {
  return workers > 0 ? 2.0 * (workers - 1) / workers : 0;
}

int sg_bench_requested(const sg_opts_t *o) { return sg_opts_get(o, "_bench_max_bytes") != NULL; }

int sg_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double sg_median_sorted(const double *v, size_t n) {
  if (!n) return 0;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* v[0] summed, v[1..n) maxed over ranks, on rank 0. */
static int gather_to0(method_t *m, double *v, size_t n) {
  sg_comm_t *c = m->ctx->comm;
  size_t len = n * sizeof *v;
  if (m->ctx->rank != 0) return sg_send(c, 0, TAG_BENCH_GATHER, v, len);
  for (int r = 1; r < m->ctx->size; r++) {
    sg_status_t st;
    SG_CHECK(sg_recv(c, r, TAG_BENCH_GATHER, m->peer, len, &st));
    if (st.bytes != len)
      return sg_err_set(SG_EPROTO, "bench: %zu timing bytes from rank %d, expected %zu", st.bytes,
                        r, len);
    v[0] += m->peer[0];
    for (size_t i = 1; i < n; i++)
      if (m->peer[i] > v[i]) v[i] = m->peer[i];
  }
  return SG_OK;
}

/* Step 2: every rank ends with rank 0's count. */
static int agree_iters(method_t *m, size_t count, int64_t *iters) {
  sg_comm_t *c = m->ctx->comm;
  *iters = m->iters_opt ? m->iters_opt : m->r->iters_hint;
  if (*iters == 0) {
    double t = sg_now(), est[2] = {0, 0};
    SG_CHECK(m->r->run(m->st, count));
    SG_CHECK(m->r->run(m->st, count));
    est[1] = (sg_now() - t) / 2;
    SG_CHECK(gather_to0(m, est, 2));
    *iters = (int64_t)(TARGET_S / (est[1] > 1e-7 ? est[1] : 1e-7));
    *iters = *iters < 5 ? 5 : *iters > SG_BENCH_MAX_ITERS ? SG_BENCH_MAX_ITERS : *iters;
  }
  if (m->ctx->rank == 0) {
    for (int r = 1; r < m->ctx->size; r++)
      SG_CHECK(sg_send(c, r, TAG_BENCH_ITERS, iters, sizeof *iters));
    return SG_OK;
  }
  SG_CHECK(sg_recv(c, 0, TAG_BENCH_ITERS, iters, sizeof *iters, NULL));
  if (*iters < 1 || *iters > SG_BENCH_MAX_ITERS)
    return sg_err_set(SG_EPROTO, "bench: rank %d got iteration count %lld from rank 0",
                      m->ctx->rank, (long long)*iters);
  return SG_OK;
}

/* Step 5, on rank 0: times[1..iters] are the slowest rank's, times[0] the
 * wrong elements of every rank. */
static int record(method_t *m, size_t bytes, int64_t iters) {
  double *t = m->times + 1;
  qsort(t, (size_t)iters, sizeof *t, sg_cmp_double);
  int n = m->ctx->workers;
  sg_bench_rec_t rec = {.np = n, .iters = (int32_t)iters, .bytes = bytes, .t_min = t[0],
                        .t_max = t[iters - 1], .wrong = (int64_t)m->times[0]};
  rec.t_median = sg_median_sorted(t, (size_t)iters);
  rec.algbw = rec.t_median > 0 ? (double)bytes / rec.t_median / 1e9 : 0;
  rec.busbw = rec.algbw * m->r->bus_factor(n);
  snprintf(rec.collective, sizeof rec.collective, "%s", m->r->collective);
  snprintf(rec.impl, sizeof rec.impl, "%s", m->impl);
  snprintf(rec.transport, sizeof rec.transport, "%s",
           sg_opts_str_or(m->ctx->opts, "transport", m->ctx->comm->ops->name));
  return sg_records_bench(m->ctx->rec, &rec);
}

static int one_size(method_t *m, size_t count) {
  double wrong;
  SG_CHECK(m->r->fill(m->st, count));
  SG_CHECK(m->r->run(m->st, count));
  SG_CHECK(m->r->check(m->st, count, &wrong));
  int64_t iters;
  SG_CHECK(agree_iters(m, count, &iters));
  for (int64_t i = 0; i < m->warmup; i++) SG_CHECK(m->r->run(m->st, count));
  SG_CHECK(sg_barrier(m->ctx->comm));
  for (int64_t i = 0; i < iters; i++) {
    double t = sg_now();
    SG_CHECK(m->r->run(m->st, count));
    m->times[1 + i] = sg_now() - t;
  }
  m->times[0] = wrong;
  SG_CHECK(gather_to0(m, m->times, (size_t)iters + 1));
  return m->ctx->rank == 0 ? record(m, count * sizeof(float), iters) : SG_OK;
}

/* The sizes or counts to run, from the spec; *max the largest count. */
static int plan(const sg_rank_ctx_t *ctx, const sg_bench_round_t *r, int64_t *counts,
                size_t *n, size_t *max) {
  int64_t lo, hi;
  SG_CHECK(sg_opts_int(ctx->opts, "_bench_min_bytes", &lo));
  SG_CHECK(sg_opts_int(ctx->opts, "_bench_max_bytes", &hi));
  if (lo < (int64_t)r->min_bytes || hi < lo)
    return sg_err_set(SG_ECONFIG, "bench sizes: need %zu <= %lld <= %lld", r->min_bytes,
                      (long long)lo, (long long)hi);
  *n = 0;
  *max = 1; /* count 0 still gets a buffer */
  if (sg_opts_str_or(ctx->opts, "_bench_counts", "")[0]) {
    if (!r->exact_counts) return sg_err_set(SG_ECONFIG, "bench counts: this round takes sizes only");
    SG_CHECK(sg_opts_intlist(ctx->opts, "_bench_counts", counts, SG_BENCH_MAX_COUNTS, n));
  } else {
    for (int64_t b = lo; b <= hi && *n < SG_BENCH_MAX_COUNTS; b *= 2) counts[(*n)++] = b / 4;
  }
  for (size_t k = 0; k < *n; k++) {
    if (counts[k] < 0) return sg_err_set(SG_ECONFIG, "bench counts: %lld is negative", (long long)counts[k]);
    if ((size_t)counts[k] > *max) *max = (size_t)counts[k];
  }
  return SG_OK;
}

int sg_bench_method_run(sg_rank_ctx_t *ctx, const sg_engine_t *e) {
  const sg_bench_round_t *r = e->bench;
  method_t m = {.ctx = ctx, .r = r};
  int64_t counts[SG_BENCH_MAX_COUNTS];
  size_t n = 0, max = 1;
  int rc;
  if (!r) return sg_err_set(SG_ECONFIG, "engine %s has no benchmark round", e->name);
  SG_CHECK(plan(ctx, r, counts, &n, &max));
  SG_CHECK(sg_opts_int_or(ctx->opts, "_bench_iters", 0, &m.iters_opt));
  SG_CHECK(sg_opts_int_or(ctx->opts, "_bench_warmup", 3, &m.warmup));
  if (m.iters_opt < 0 || m.iters_opt > SG_BENCH_MAX_ITERS)
    return sg_err_set(SG_ECONFIG, "bench iters: %lld is not in 0..%d", (long long)m.iters_opt,
                      SG_BENCH_MAX_ITERS);
  r->impl(ctx->opts, m.impl, sizeof m.impl);
  m.times = calloc(SG_BENCH_MAX_ITERS + 1, sizeof(double));
  m.peer = calloc(SG_BENCH_MAX_ITERS + 1, sizeof(double));
  if (!m.times || !m.peer) {
    rc = sg_err_set(SG_ENOMEM, "bench: no memory for timings");
    goto fail;
  }
  SG_TRY(r->init(&m.st, ctx, max));
  for (size_t k = 0; k < n; k++) SG_TRY(one_size(&m, (size_t)counts[k]));
  rc = SG_OK;
fail:
  if (m.st) r->destroy(&m.st);
  free(m.times);
  free(m.peer);
  return rc;
}
