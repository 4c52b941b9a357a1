/* mr_round.c - the mapreduce engine's benchmark round (bench_method.h):
 * one step of its communication (broadcast K bytes, reduce N gradients of
 * K bytes), so it compares with the collectives at equal message sizes.
 *
 * Ranks: 0 is the driver, 1..N the executors.  One round, with the
 * engine's own functions:
 *   mr_broadcast(driver's K bytes -> every executor)   flat or tree
 *   mr_aggregate(every executor's K bytes -> driver)   flat or tree
 * The driver ends holding the sum of the executors' buffers -- an
 * allreduce's result on one rank.  Link bytes: flat, the driver's link
 * carries 2*N*K per round (N sends, N receives) against 2*K*(N-1)/N for a
 * ring link; the tree variants bring the driver's share to
 * K*ceil(log2(N+1)) + K*ceil(N/f^(d-1)) (mapreduce.h).
 *
 * Check: the driver broadcasts contributor 0's input, which every
 * executor compares; executor e contributes contributor e-1's input, and
 * the driver compares the sum.  Rows: impl "mapreduce-flat" /
 * "mapreduce-tree", or "mapreduce-b<bcast>-a<aggregate>" when they
 * differ.  Test-only: _plant_bug = mapreduce-double makes the
 * driver add executor 1's contribution twice (mr_config_t's
 * plant_double_rank), which the check must report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_method.h"
#include "err.h"
#include "mapreduce.h"

typedef struct mr_round {
  sg_rank_ctx_t *ctx;
  mr_config_t cfg;
  float *buf, *acc, *tmp; /* max_count each */
} mr_round_t;

static void mr_impl(const sg_opts_t *o, char *out, size_t cap) {
  const char *bc = sg_setting_or(o, sg_engine_mapreduce.options, "broadcast");
  const char *ag = sg_setting_or(o, sg_engine_mapreduce.options, "aggregate");
  if (!strcmp(bc, ag)) snprintf(out, cap, "mapreduce-%s", bc);
  else snprintf(out, cap, "mapreduce-b%s-a%s", bc, ag);
}

static int mr_round_run(void *st, size_t count) {
  mr_round_t *b = st;
  SG_CHECK(mr_broadcast(b->ctx->comm, &b->cfg, b->buf, count));
  return mr_aggregate(b->ctx->comm, &b->cfg, b->acc, b->tmp, count);
}

static int mr_fill(void *st, size_t count) {
  mr_round_t *b = st;
  int r = b->ctx->rank;
  for (size_t i = 0; i < count; i++) {
    if (r == 0) b->buf[i] = sg_bench_input(0, i);
    else b->acc[i] = sg_bench_input(r - 1, i);
  }
  return SG_OK;
}

static int mr_check(void *st, size_t count, double *wrong) {
  mr_round_t *b = st;
  *wrong = 0;
  for (size_t i = 0; i < count; i++)
    *wrong += b->ctx->rank == 0 ? b->acc[i] != sg_bench_expected(b->cfg.executors, i)
                                : b->buf[i] != sg_bench_input(0, i);
  memset(b->buf, 0, count * sizeof *b->buf);
  memset(b->acc, 0, count * sizeof *b->acc);
  return SG_OK;
}

static void mr_destroy(void **st) {
  mr_round_t *b = *st;
  if (!b) return;
  free(b->buf);
  free(b->acc);
  free(b->tmp);
  free(b);
  *st = NULL;
}

static int mr_init(void **st, sg_rank_ctx_t *ctx, size_t max_count) {
  mr_round_t *b = calloc(1, sizeof *b);
  if (!b) return sg_err_set(SG_ENOMEM, "bench: no memory");
  *st = b;
  b->ctx = ctx;
  SG_CHECK(mr_config_parse(ctx->opts, ctx->workers, &b->cfg));
  b->cfg.partitions = ctx->workers;
  b->cfg.plant_double_rank = !strcmp(sg_opts_str_or(ctx->opts, "_plant_bug", ""),
                                     "mapreduce-double");
  if (!(b->buf = calloc(max_count, sizeof(float))) || !(b->acc = calloc(max_count, sizeof(float))) ||
      !(b->tmp = calloc(max_count, sizeof(float))))
    return sg_err_set(SG_ENOMEM, "bench: no memory for 3 x %zu floats", max_count);
  return SG_OK;
}

static const sg_bench_variant_t mr_variants[] = {
    {"mapreduce", "broadcast: flat, aggregate: flat",
     "driver broadcast + reduce of K bytes, flat", NULL, 0},
    {"mapreduce-flat", "broadcast: flat, aggregate: flat", "the same as mapreduce", NULL, 0},
    {"mapreduce-tree", "broadcast: tree, aggregate: tree",
     "binomial broadcast, treeAggregate of depth 2", NULL, 0},
    {NULL, NULL, NULL, NULL, 0},
};

const sg_bench_round_t sg_mr_bench_round = {
    .collective = "allreduce",
    .min_bytes = 4,
    .iters_hint = 0,
    .exact_counts = 0,
    .variants = mr_variants,
    .bus_factor = sg_bench_ring_factor,
    .impl = mr_impl,
    .init = mr_init,
    .fill = mr_fill,
    .run = mr_round_run,
    .check = mr_check,
    .destroy = mr_destroy,
};
