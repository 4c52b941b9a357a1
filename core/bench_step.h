/* bench_step.h - single-process training-step throughput next to the
 * sgemm bound (`sgdlab bench step`).
 *
 * Step = sg_workload_grad + sg_optim_apply on the configured workload
 * (default mlp 784-256-10, batch 64, Fashion-MNIST), timed after an untimed
 * warm-up as the median of several blocks of steps.  Bound = the same
 * step's sgemm calls (sg_model_gemms: shapes and call order of the real
 * step) timed alone with cblas_sgemm; bound samples/s = batch / sum of
 * their median times.  Ratio = step samples/s / bound samples/s.
 */
#ifndef SG_BENCH_STEP_H
#define SG_BENCH_STEP_H

#include <stdio.h>

#include "opts.h"

typedef struct sg_bench_step_result {
  double step_s;       /* median seconds per step (grad + apply) */
  double step_sps;     /* samples/s */
  double gemm_s;       /* sum of the step's sgemm median times */
  double bound_sps;    /* batch / gemm_s (0 when the step has no sgemm) */
  double gemm_flops;   /* FLOPs of the step's sgemm calls */
  double ratio;        /* step_sps / bound_sps */
} sg_bench_step_result_t;

/* Measure and print a report to `out` (may be NULL); `res` may be NULL.
 * Keys of `o` not set take the settings defaults, except model (mlp),
 * hidden (256) and batch (64). */
int sg_bench_step_run(const sg_opts_t *o, FILE *out, sg_bench_step_result_t *res);

/* The CLI entry: sg_bench_step_run with a report to `out`. */
int sg_bench_step(const sg_opts_t *o, FILE *out);

#endif
