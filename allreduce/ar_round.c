/* ar_round.c - the allreduce engine's benchmark round (bench_method.h):
 * one sg_ar_run of the run's `algorithm` over `count` floats on every
 * rank.  Contributor = rank; every rank checks its own result.  With
 * device: cuda the buffer is device memory and the sum is the device
 * path's (allreduce_device.c): ring/rhd/native staged through pinned host
 * slots, cuda-ring, nccl; fill and check go through a host copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "bench_method.h"
#include "cuda/sg_cuda.h"
#include "err.h"

typedef struct ar_round {
  sg_rank_ctx_t *ctx;
  sg_ar_cfg_t cfg;  /* the options, parsed once */
  sg_ar_t *ar;
  float *buf;
  sg_ar_dev_t *dev; /* device: cuda: the device path's summation ... */
  float *dbuf;      /* ... of this device buffer (buf stages fill/check) */
} ar_round_t;

/* device cuda: "cuda-ring-persistent", "ring-staged" (through pinned host
 * slots), "nccl"; device cpu: the algorithm. */
static void ar_impl(const sg_opts_t *o, char *out, size_t cap) {
  sg_ar_cfg_t c;
  if (sg_ar_cfg_from_opts(&c, o) < 0) {
    sg_err_clear();
    snprintf(out, cap, "?");
    return;
  }
  const char *algo = c.algorithm;
  if (!c.device) snprintf(out, cap, "%s", algo);
  else if (!strcmp(algo, "cuda-ring")) snprintf(out, cap, "cuda-ring-%s", c.cuda_ring);
  else if (!strcmp(algo, "nccl")) snprintf(out, cap, "nccl");
  else snprintf(out, cap, "%s-staged", algo);
}

static int dev_init(ar_round_t *b, sg_rank_ctx_t *ctx, size_t max_count) {
  SG_CHECK(sg_cuda_alloc(&b->dbuf, max_count, "the benchmark buffer"));
  return sg_ar_dev_new(&b->dev, ctx, max_count);
}

static int ar_init(void **st, sg_rank_ctx_t *ctx, size_t max_count) {
  ar_round_t *b = calloc(1, sizeof *b);
  if (!b) return sg_err_set(SG_ENOMEM, "bench: no memory");
  *st = b;
  b->ctx = ctx;
  const sg_ar_cfg_t *c = &b->cfg;
  SG_CHECK(sg_ar_cfg_from_opts(&b->cfg, ctx->opts));
  if (!(b->buf = sg_ar_alloc(max_count * sizeof(float)))) /* touched, huge pages */
    return sg_err_set(SG_ENOMEM, "bench: no memory for %zu floats", max_count);
  if (c->device) return dev_init(b, ctx, max_count);
  SG_CHECK(sg_ar_new(&b->ar, ctx->comm, c->algorithm, (size_t)sg_ar_cfg_segment(c, ctx->comm),
                     max_count));
  sg_ar_plant_bug(b->ar, c->plant_bug);
  sg_ar_set_group(b->ar, (int)sg_ar_cfg_group(c, ctx->comm));
  return SG_OK;
}

static int ar_fill(void *st, size_t count) {
  ar_round_t *b = st;
  for (size_t i = 0; i < count; i++) b->buf[i] = sg_bench_input(b->ctx->rank, i);
  return b->dbuf ? sg_cuda_put(b->dbuf, b->buf, count) : SG_OK;
}

static int ar_round_run(void *st, size_t count) {
  ar_round_t *b = st;
  return b->dev ? sg_ar_dev_run(b->dev, b->dbuf, count) : sg_ar_run(b->ar, b->buf, count);
}

static int ar_check(void *st, size_t count, double *wrong) {
  ar_round_t *b = st;
  *wrong = 0;
  if (b->dbuf) SG_CHECK(sg_cuda_get(b->buf, b->dbuf, count));
  for (size_t i = 0; i < count; i++) *wrong += b->buf[i] != sg_bench_expected(b->ctx->size, i);
  memset(b->buf, 0, count * sizeof(float));
  return b->dbuf ? sg_cuda_zero(b->dbuf, count) : SG_OK;
}

static void ar_destroy(void **st) {
  ar_round_t *b = *st;
  if (!b) return;
  sg_ar_destroy(&b->ar);
  sg_ar_dev_destroy(&b->dev);
  sg_cuda_free(&b->dbuf);
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
    {"cuda-ring", "algorithm: cuda-ring%G", "device cuda: ranks of one host, CUDA IPC, a kernel and a host sync per primitive", NULL, 0},
    {"cuda-ring-persistent", "algorithm: cuda-ring, cuda_ring: persistent%G", "device cuda: the same ring as one kernel per allreduce, flags in device memory", NULL, 0},
    {"nccl", "algorithm: nccl", "device cuda: ncclAllReduce (one GPU per rank; builds with NCCL)", NULL, 0},
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
