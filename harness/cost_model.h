/* cost_model.h - the alpha-beta-gamma cost model of one training step
 * (docs/model.md).
 *
 * Time per step = compute + communication, communication from three link
 * and host constants:
 *   alpha  seconds per message on a link (latency),
 *   beta   seconds per byte on a link (8 / rate, less for the protocol's
 *          overhead and CURVE's CPU cost: fitted, not assumed),
 *   gamma  seconds per byte of float summation on a host.
 * One formula per engine and variant, in one table (cost_model.c); the fit of
 * alpha and beta from `bench allreduce` rows; `sgdlab model` (cost_model_cmd.c)
 * puts the prediction next to a run's measured step time.
 */
#ifndef SG_MODEL_COST_H
#define SG_MODEL_COST_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct sg_cost_params {
  double alpha, beta, gamma;
} sg_cost_params_t;

/* What the formulas need from a run. */
typedef struct sg_cost_case {
  const char *engine; /* "allreduce", "ps", "mapreduce" (also bench-*) */
  const char *variant; /* ring|rhd|native; sync|ssp|async; flat|tree (broadcast) */
  int N;               /* workers / executors */
  int S;               /* ps: servers */
  int sparse;          /* ps: K is then the measured bytes per worker step */
  int tree_aggregate;  /* mapreduce: aggregate tree */
  int depth;           /* mapreduce: aggregate tree levels, driver included */
  double K;            /* bytes through the formula (model bytes, dense) */
} sg_cost_case_t;

/* Predicted communication seconds per step of c under p; SG_ENOTFOUND
 * (message names engine and variant) when the table has no formula. */
int sg_cost_comm(const sg_cost_case_t *c, const sg_cost_params_t *p, double *seconds);

/* 1 when the table has a formula for c's engine and variant. */
int sg_cost_known(const sg_cost_case_t *c);

/* The table's name for c ("ring", "ps-sync-S2", "mapreduce-tree/flat") into
 * out. */
void sg_cost_label(const sg_cost_case_t *c, char *out, size_t cap);

/* Bytes through the busiest link per step, one direction (the beta term
 * divided by beta), for the monotonicity checks and the docs. */
double sg_cost_link_bytes(const sg_cost_case_t *c);

/* Least squares t = a + b*x over n >= 2 points with two distinct x;
 * SG_EINVAL otherwise. */
int sg_cost_fit_line(const double *x, const double *t, size_t n, double *a, double *b);

/* alpha and beta from a series of `bench allreduce` ring rows of np N
 * (bytes, t_median): t = 2(N-1)alpha + 2(N-1)/N bytes beta + (N-1)/N bytes
 * gamma, so the line's intercept and slope give alpha and beta once gamma
 * is known.  A negative intercept (noise around a latency of microseconds
 * under messages of megabytes) gives alpha 0. */
int sg_cost_fit_ring(const double *bytes, const double *t, size_t n, int N, double gamma,
                     sg_cost_params_t *p);

/* gamma on this host: seconds per byte of sg_sum_f32 over two buffers of
 * `bytes` (median of `reps`); SG_ENOMEM. */
int sg_cost_measure_gamma(size_t bytes, int reps, double *gamma);

/* The "Cost model" section of summary.md for the experiments' runs on a
 * cluster that have matching bench rows; nothing when none has. */
int sg_cost_summary_md(FILE *f, sqlite3 *db, const int64_t *exps, size_t nexp);

/* `sgdlab model` */
int sg_cmd_model(int argc, char **argv);

#endif
