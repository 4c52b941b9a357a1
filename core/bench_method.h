/* bench_method.h - the one benchmark method every engine's communication
 * round runs through (`sgdlab bench allreduce`).
 *
 * An engine that can be benchmarked points its table entry
 * (sg_engine_t.bench) at an sg_bench_round_t: how to set up, run and check
 * one round of its communication, in the manner of nccl-tests' table of
 * collectives.  The method, for every size bytes = min, 2 min, .. <= max
 * (or every listed element count, in its order):
 *
 *   1. correctness, outside any timing: fill() puts the exact inputs,
 *      one run(), check() counts the elements that differ from the exact
 *      result (inputs (c+1) * (i%7 + 1) for contributor c, result
 *      (i%7 + 1) * N(N+1)/2: small integers in floats, so every summation
 *      order gives the same bits and a misplaced chunk changes a value);
 *      check() leaves zeros behind, harmless inputs for the timing.
 *      Wrong elements are summed over ranks.
 *   2. iteration count: _bench_iters, else the round's iters_hint, else
 *      about 0.2 s worth from the SLOWEST rank's time for two rounds,
 *      clamped to [5, 1000]; rank 0 decides and sends it to every rank.
 *   3. _bench_warmup untimed rounds, then a barrier.
 *   4. the timed rounds; the time of round i is the maximum over ranks;
 *      median (an even count averages the middle two), min and max.
 *   5. rank 0 sends one bench record: algbw = bytes / t_median,
 *      busbw = algbw * bus_factor(N), GB/s = 1e9 B/s.
 *
 * The harness selects the method with internal spec keys (never part of
 * an experiment file): _bench_min_bytes, _bench_max_bytes, _bench_iters,
 * _bench_warmup, _bench_counts ("0,1,1001"), and the test-only
 * _bench_plant_bug (a round may plant a known error so that tests can
 * show step 1 catches it; `sgdlab bench allreduce --plant-bug`).
 */
#ifndef SG_BENCH_METHOD_H
#define SG_BENCH_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define SG_BENCH_MAX_ITERS 1000
#define SG_BENCH_MAX_COUNTS 64

/* A name `sgdlab bench --impl` accepts and the engine options it selects,
 * as YAML flow pairs; "%S" stands for the --servers list, "%G" for
 * --segment (given only when the user gave it: "%G" then drops out). */
typedef struct sg_bench_variant {
  const char *name;      /* "ring" */
  const char *options;   /* "algorithm: ring%G" */
  const char *help;      /* one line of --help */
  const char *transport; /* the only transport it runs on, or NULL */
  int by_default;        /* in the default --impl list */
} sg_bench_variant_t;

typedef struct sg_bench_round {
  const char *collective; /* what a round computes: "allreduce" */
  size_t min_bytes;       /* smallest message a round can carry */
  int64_t iters_hint;     /* timed rounds when none are asked; 0: about 0.2 s worth */
  int exact_counts;       /* takes element counts (uneven chunks), not only sizes */
  const sg_bench_variant_t *variants; /* NULL-name terminated */
  /* busbw = algbw * bus_factor(workers) */
  double (*bus_factor)(int workers);
  /* The impl name the rows carry ("ring", "ps-S2", "mapreduce-tree"). */
  void (*impl)(const sg_opts_t *o, char *out, size_t cap);
  int (*init)(void **st, sg_rank_ctx_t *ctx, size_t max_count);
  int (*fill)(void *st, size_t count);
  int (*run)(void *st, size_t count);
  /* This rank's wrong elements after fill + run; leaves zeros behind. */
  int (*check)(void *st, size_t count, double *wrong);
  void (*destroy)(void **st);
} sg_bench_round_t;

/* The exact inputs and result of step 1. */
static inline float sg_bench_input(int contributor, size_t i) {
  return (float)(contributor + 1) * (float)(i % 7 + 1);
}
static inline float sg_bench_expected(int contributors, size_t i) {
  return (float)(i % 7 + 1) * ((float)contributors * (float)(contributors + 1) / 2);
}

/* qsort comparator for doubles, ascending; the median of sorted v[0..n). */
int sg_cmp_double(const void *a, const void *b);
double sg_median_sorted(const double *v, size_t n);

/* The ring's bus factor 2(N-1)/N (the bytes a ring link carries). */
double sg_bench_ring_factor(int workers);

/* Whether the run's spec asks for the benchmark instead of training. */
int sg_bench_requested(const sg_opts_t *o);

/* Run the method over engine e's round on this rank. */
int sg_bench_method_run(sg_rank_ctx_t *ctx, const sg_engine_t *e);

#endif
