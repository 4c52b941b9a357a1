/* cost_model.h - the alpha-beta-gamma cost model of one training step
 * (docs/model.md).
 *
 * Time per step = compute + communication, communication the larger of
 * what the links and what the shared CPU need:
 *   alpha  seconds per message on a link (latency),
 *   beta   seconds per byte on a link (8 / rate, less for the protocol's
 *          overhead and CURVE's CPU cost: fitted, not assumed),
 *   gamma  seconds per byte of float summation on a host,
 *   kappa  CPU seconds per byte a process sends or receives (zmq, CURVE,
 *          TCP and the emulated link's kernel work), on `cores` cores that
 *          every process of the run shares; fitted from bench rows with as
 *          many processes as the run has.
 * One formula per engine and variant, each with its engine (the `cost` hook
 * of core/engine.h; core/cost.h), called through one table here
 * (cost_model.c) with the references that belong to no engine (root); the
 * fit of alpha and beta from `bench allreduce` rows; `sgdlab model`
 * (report/cost_model_cmd.c, over the results database) puts the
 * prediction next to a run's measured step time, and `sgdlab model
 * --what-if` (report/cost_model_whatif.c) evaluates the table for any case
 * without a run.
 */
#ifndef SG_MODEL_COST_H
#define SG_MODEL_COST_H

#include <stddef.h>
#include <stdint.h>

#include "cost.h" /* sg_cost_params_t, sg_cost_case_t, sg_cost_split_t */
#include "engine.h"

/* The two bounds of c's communication under p; SG_ENOTFOUND as below. */
int sg_cost_detail(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *out);

/* Predicted communication seconds per step of c under p, the larger of the
 * links' and the CPU's time (docs/model.md); SG_ENOTFOUND
 * (message names engine and variant) when the table has no formula. */
int sg_cost_comm(const sg_cost_case_t *c, const sg_cost_params_t *p, double *seconds);

/* 1 when the table has a formula for c's engine and variant. */
int sg_cost_known(const sg_cost_case_t *c);

/* The table's name for c (ring, ps-sync-S2, mapreduce-tree/flat) into
 * out: the engine's label hook (core/cost.h), else c's variant, else the
 * engine's name. */
void sg_cost_label(const sg_cost_case_t *c, char *out, size_t cap);

/* The engine's part of a recorded run's case from the run's options (the
 * engine's read hook; c->N and c->K set before): variant "" and nothing
 * else for an engine without one (eng may be NULL).  c->variant may
 * point into o. */
void sg_cost_read(const sg_engine_t *eng, const sg_opts_t *o, sg_cost_case_t *c);

/* A what-if case by name: an engine's (core/cost.h, what_if) or a
 * reference's (root): sets c's engine, variant and tree_aggregate; -1 for
 * a name none has. */
int sg_cost_whatif_find(const char *name, sg_cost_case_t *c);

/* The default --engines list: the engines' default what-if cases in their
 * places, then root (ring,rhd,tree,hier,ps,root). */
void sg_cost_whatif_defaults(char *out, size_t cap);

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

/* kappa from a series of ring rows of np N on `cores` cores: every rank
 * sends and receives 2(N-1)/N bytes, so the slope b of t over bytes gives
 * kappa = b cores / 4(N-1).  Rows that the links bound give a kappa too low,
 * so the caller takes the rows with as many processes as its run.
 * SG_EINVAL for fewer than two sizes. */
int sg_cost_fit_kappa(const double *bytes, const double *t, size_t n, int N, double cores,
                      double *kappa);

/* gamma on this host: seconds per byte of sg_sum_f32 over two buffers of
 * `bytes` (median of `reps`); SG_ENOMEM. */
int sg_cost_measure_gamma(size_t bytes, int reps, double *gamma);

#endif
