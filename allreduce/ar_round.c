/* ar_round.c - the allreduce engine's benchmark round (bench_method.h):
 * one sg_ar_run of the run's `algorithm` over `count` floats on every
 * rank.  Contributor = rank; every rank checks its own result. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "bench_method.h"
#include "err.h"

typedef struct ar_round {
  sg_rank_ctx_t *ctx;
  sg_ar_t *ar;
  float *buf;
} ar_round_t;

static void ar_impl(const sg_opts_t *o, char *out, size_t cap) {
  snprintf(out, cap, "%s", sg_opts_str_or(o, "algorithm", "ring"));
}

static int ar_init(void **st, sg_rank_ctx_t *ctx, size_t max_count) {
  ar_round_t *b = calloc(1, sizeof *b);
  int64_t segment;
  if (!b) return sg_err_set(SG_ENOMEM, "bench: no memory");
  *st = b;
  b->ctx = ctx;
  SG_CHECK(sg_ar_segment_opt(ctx->opts, ctx->comm, &segment));
  SG_CHECK(sg_ar_new(&b->ar, ctx->comm, sg_opts_str_or(ctx->opts, "algorithm", "ring"),
                     (size_t)segment, max_count));
  sg_ar_plant_bug(b->ar, sg_ar_plant_requested(ctx->opts));
  int64_t group = 0;
  SG_CHECK(sg_ar_group_opt(ctx->opts, ctx->comm, &group));
  sg_ar_set_group(b->ar, (int)group);
  if (!(b->buf = sg_ar_alloc(max_count * sizeof(float)))) /* touched, huge pages */
    return sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", max_count);
  return SG_OK;
}

static int ar_fill(void *st, size_t count) {
  ar_round_t *b = st;
  for (size_t i = 0; i < count; i++) b->buf[i] = sg_bench_input(b->ctx->rank, i);
  return SG_OK;
}

static int ar_round_run(void *st, size_t count) {
  ar_round_t *b = st;
  return sg_ar_run(b->ar, b->buf, count);
}

static int ar_check(void *st, size_t count, double *wrong) {
  ar_round_t *b = st;
  *wrong = 0;
  for (size_t i = 0; i < count; i++) *wrong += b->buf[i] != sg_bench_expected(b->ctx->size, i);
  memset(b->buf, 0, count * sizeof(float));
  return SG_OK;
}

static void ar_destroy(void **st) {
  ar_round_t *b = *st;
  if (!b) return;
  sg_ar_destroy(&b->ar);
  sg_ar_free(b->buf);
  free(b);
  *st = NULL;
}

static const sg_bench_variant_t ar_variants[] = {
    {"ring", "algorithm: ring%G", "ring reduce-scatter + allgather, pipelined", NULL, 1},
    {"rhd", "algorithm: rhd%G", "recursive halving/doubling (Rabenseifner)", NULL, 1},
    {"tree", "algorithm: tree%G", "pipelined binary tree: reduce to rank 0, broadcast", NULL, 0},
    {"hier", "algorithm: hier%G", "reduce-scatter in groups (group), ring across, allgather in groups", NULL, 0},
    {"native", "algorithm: native", "MPI_Allreduce", "mpi", 1},
    {NULL, NULL, NULL, NULL, 0},
};

const sg_bench_round_t sg_ar_bench_round = {
    .collective = "allreduce",
    .min_bytes = 4,
    .iters_hint = 0,
    .exact_counts = 1,
    .variants = ar_variants,
    .bus_factor = sg_bench_ring_factor,
    .impl = ar_impl,
    .init = ar_init,
    .fill = ar_fill,
    .run = ar_round_run,
    .check = ar_check,
    .destroy = ar_destroy,
};
