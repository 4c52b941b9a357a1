/* bench_engine.c - `bench-allreduce`: the rank side of
 * `sgdlab bench allreduce` (harness/bench.c), run by the same launchers as
 * training, so the numbers are real processes over the real transports.
 *
 * Method (nccl-tests / OSU), for every implementation in
 * `impl` and every size bytes = min_bytes, 2 min_bytes, .. <= max_bytes
 * (or, when `counts` is given, every listed element count, in its order:
 * 0, 1, N-1, N+1, odd counts -- the uneven chunks correctness tests need):
 *
 *   1. correctness, outside any timing: buf[i] = (rank+1) * (i%7 + 1), one
 *      allreduce, compare exactly with (i%7 + 1) * N(N+1)/2 -- small
 *      integers in floats, so every summation order gives the same bits,
 *      and a misplaced chunk changes the value (i%7 differs between
 *      neighbouring positions).  Wrong elements are summed over ranks.
 *   2. iteration count: `iters`, or (iters = 0) about 0.2 s worth, from the
 *      SLOWEST rank's time for two calls, clamped to [5, 1000]; rank 0
 *      decides and broadcasts, so every rank runs the same count.
 *   3. `warmup` untimed calls, then a barrier.
 *   4. `iters` timed calls; each rank keeps its per-call times; the time of
 *      call i is the maximum over ranks (the slowest rank finishes the
 *      collective); median, min and max of those.
 *   5. rank 0 sends one bench record: algbw = bytes / t_median,
 *      busbw = algbw * 2(N-1)/N (what each link carries), GB/s = 1e9 B/s.
 *
 * The buffer, the allreduce context's scratch and the timing arrays are
 * allocated once and touched before any timing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "clock.h"
#include "engine.h"
#include "err.h"

#define BENCH_MAX_ITERS 1000
#define BENCH_TARGET_S 0.2
#define BENCH_MAX_COUNTS 64

/* clang-format off */
static const sg_setting_t bench_options[] = {
  {"impl", SG_T_STR, "ring,native", "implementations to measure, comma-separated (ring, rhd, native)", NULL, 1, 0, SG_S_ENGINE},
  {"min_bytes", SG_T_INT, "1M", "smallest message in bytes (K/M/G suffixes)", NULL, 4, 4e9, SG_S_ENGINE},
  {"max_bytes", SG_T_INT, "256M", "largest message in bytes; sizes double from min_bytes", NULL, 4, 4e9, SG_S_ENGINE},
  {"iters", SG_T_INT, "0", "timed iterations per size (0 = about 0.2 s worth, 5..1000)", NULL, 0, BENCH_MAX_ITERS, SG_S_ENGINE},
  {"warmup", SG_T_INT, "3", "untimed iterations before timing", NULL, 0, 1000, SG_S_ENGINE},
  {"counts", SG_T_INTLIST, "", "element counts (floats) to check and time instead of the sizes, e.g. [0, 1, 1001]", NULL, 0, 1e9, SG_S_ENGINE},
  {"segment", SG_T_INT, "1M", "ring: pipeline segment in bytes", NULL, 4, 1 << 30, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

/* Each name of the comma-separated list, in turn (name has room for 32). */
static const char *next_impl(const char *p, char name[32]) {
  while (*p == ',' || *p == ' ') p++;
  if (!*p) return NULL;
  size_t n = 0;
  while (p[n] && p[n] != ',' && p[n] != ' ') n++;
  snprintf(name, 32, "%.*s", (int)n, p);
  return p + n;
}

static int bench_check_transport(const sg_opts_t *o, const char *transport) {
  char name[32];
  for (const char *p = sg_opts_str_or(o, "impl", ""); (p = next_impl(p, name));) {
    const sg_ar_algo_t *a = sg_ar_algo_find(name);
    if (!a)
      return sg_err_set(SG_ECONFIG, "impl: '%s' is not one of %s", name, SG_AR_ALGORITHMS);
    if (a->needs_mpi && strcmp(transport, "mpi") != 0)
      return sg_err_set(SG_ECONFIG, "impl: %s is MPI_Allreduce and needs transport mpi, not %s",
                        name, transport);
  }
  return SG_OK;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct bench {
  sg_rank_ctx_t *ctx;
  float *buf;
  double *times, *tmp;
  int64_t iters_opt, warmup;
  const char *transport;
} bench_t;

static int check_once(bench_t *b, sg_ar_t *ar, size_t count, double *wrong) {
  int r = b->ctx->rank, n = b->ctx->size;
  for (size_t i = 0; i < count; i++) b->buf[i] = (float)(r + 1) * (float)(i % 7 + 1);
  SG_CHECK(sg_ar_run(ar, b->buf, count));
  const float tri = (float)n * (float)(n + 1) / 2;
  double bad = 0;
  for (size_t i = 0; i < count; i++)
    if (b->buf[i] != (float)(i % 7 + 1) * tri) bad++;
  *wrong = bad;
  return sg_ar_reduce_to0(b->ctx->comm, wrong, 1, b->tmp, SG_AR_SUM);
}

static int bench_size(bench_t *b, sg_ar_t *ar, const char *impl, size_t bytes) {
  sg_comm_t *c = b->ctx->comm;
  size_t count = bytes / sizeof(float);
  double wrong;
  SG_CHECK(check_once(b, ar, count, &wrong));

  /* The same, harmless inputs for every timed call (zeros stay zeros: no
   * overflow, no denormals). */
  memset(b->buf, 0, count * sizeof(float));
  int64_t iters = b->iters_opt;
  if (iters == 0) {
    double t = sg_now();
    SG_CHECK(sg_ar_run(ar, b->buf, count));
    SG_CHECK(sg_ar_run(ar, b->buf, count));
    double est = (sg_now() - t) / 2;
    SG_CHECK(sg_ar_reduce_to0(c, &est, 1, b->tmp, SG_AR_MAX));
    iters = (int64_t)(BENCH_TARGET_S / (est > 1e-7 ? est : 1e-7));
    iters = iters < 5 ? 5 : iters > BENCH_MAX_ITERS ? BENCH_MAX_ITERS : iters;
  }
  SG_CHECK(sg_ar_bcast(c, &iters, sizeof iters, 0));
  for (int64_t i = 0; i < b->warmup; i++) SG_CHECK(sg_ar_run(ar, b->buf, count));
  SG_CHECK(sg_barrier(c));
  for (int64_t i = 0; i < iters; i++) {
    double t = sg_now();
    SG_CHECK(sg_ar_run(ar, b->buf, count));
    b->times[i] = sg_now() - t;
  }
  SG_CHECK(sg_ar_reduce_to0(c, b->times, (size_t)iters, b->tmp, SG_AR_MAX));
  if (b->ctx->rank != 0) return SG_OK;

  qsort(b->times, (size_t)iters, sizeof *b->times, cmp_double);
  int n = c->size;
  sg_bench_rec_t rec = {.np = n, .iters = (int32_t)iters, .bytes = count * sizeof(float),
                        .t_min = b->times[0], .t_max = b->times[iters - 1],
                        .wrong = (int64_t)wrong};
  rec.t_median = iters % 2 ? b->times[iters / 2]
                           : (b->times[iters / 2 - 1] + b->times[iters / 2]) / 2;
  rec.algbw = rec.t_median > 0 ? (double)rec.bytes / rec.t_median / 1e9 : 0;
  rec.busbw = rec.algbw * 2.0 * (n - 1) / n;
  snprintf(rec.collective, sizeof rec.collective, "allreduce");
  snprintf(rec.impl, sizeof rec.impl, "%s", impl);
  snprintf(rec.transport, sizeof rec.transport, "%s", b->transport);
  return sg_records_bench(b->ctx->rec, &rec);
}

static int bench_run(sg_rank_ctx_t *ctx) {
  bench_t b = {.ctx = ctx};
  sg_ar_t *ar = NULL;
  int64_t lo, hi, segment, counts[BENCH_MAX_COUNTS];
  size_t ncounts = 0;
  int rc;
  SG_TRY(sg_opts_int(ctx->opts, "min_bytes", &lo));
  SG_TRY(sg_opts_int(ctx->opts, "max_bytes", &hi));
  if (sg_opts_str_or(ctx->opts, "counts", "")[0])
    SG_TRY(sg_opts_intlist(ctx->opts, "counts", counts, BENCH_MAX_COUNTS, &ncounts));
  SG_TRY(sg_opts_int_or(ctx->opts, "iters", 0, &b.iters_opt));
  SG_TRY(sg_opts_int_or(ctx->opts, "warmup", 3, &b.warmup));
  SG_TRY(sg_opts_int_or(ctx->opts, "segment", SG_AR_SEGMENT_DEFAULT, &segment));
  b.transport = sg_opts_str_or(ctx->opts, "transport", ctx->comm->ops->name);
  if (lo < 4 || hi < lo) {
    rc = sg_err_set(SG_ECONFIG, "min_bytes/max_bytes: need 4 <= %lld <= %lld",
                    (long long)lo, (long long)hi);
    goto fail;
  }
  size_t max_count = (size_t)hi / sizeof(float);
  if (ncounts) {
    max_count = 1; /* count 0 still gets a buffer */
    for (size_t k = 0; k < ncounts; k++) {
      if (counts[k] < 0) {
        rc = sg_err_set(SG_ECONFIG, "counts: %lld is negative", (long long)counts[k]);
        goto fail;
      }
      if ((size_t)counts[k] > max_count) max_count = (size_t)counts[k];
    }
  }
  b.buf = sg_ar_alloc(max_count * sizeof(float)); /* touched, huge pages */
  b.times = calloc(BENCH_MAX_ITERS, sizeof(double));
  b.tmp = calloc(BENCH_MAX_ITERS, sizeof(double));
  if (!b.buf || !b.times || !b.tmp) {
    rc = sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", max_count);
    goto fail;
  }
  char name[32];
  for (const char *p = sg_opts_str_or(ctx->opts, "impl", "ring"); (p = next_impl(p, name));) {
    SG_TRY(sg_ar_new(&ar, ctx->comm, name, (size_t)segment, max_count));
    if (ncounts)
      for (size_t k = 0; k < ncounts; k++)
        SG_TRY(bench_size(&b, ar, name, (size_t)counts[k] * sizeof(float)));
    else
      for (int64_t bytes = lo; bytes <= hi; bytes *= 2)
        SG_TRY(bench_size(&b, ar, name, (size_t)bytes));
    sg_ar_destroy(&ar);
  }
  rc = SG_OK;
fail:
  sg_ar_destroy(&ar);
  sg_ar_free(b.buf);
  free(b.times);
  free(b.tmp);
  return rc;
}

const sg_engine_t sg_engine_bench_allreduce = {
    .name = "bench-allreduce",
    .summary = "(internal) rank side of `sgdlab bench allreduce`: times allreduce per size",
    .options = bench_options,
    .layout = NULL,
    .role = NULL,
    .check_transport = bench_check_transport,
    .run = bench_run,
};
