/* mr_driver.c - rank 0: holds the model, schedules tasks, applies updates.
 *
 * Start: send every executor the JOB, then a barrier with all executors
 * (each joins it after loading its training set), then the training clock
 * starts, so time to accuracy leaves out the executors' start-up.
 *
 * Per step t (the schedule and bytes are drawn in mapreduce.h):
 *
 *   broadcast(params)                       comm_s
 *   send each executor its first task       comm_s
 *   until every task is DONE:
 *       recv DONE from any executor         wait_s  (waiting for tasks)
 *       send it its next task, or STOP      comm_s
 *   aggregate(grad)  (sum of w_p * g_p)     comm_s
 *   apply(params, grad, t)                  compute_s
 *   trainlog (evaluates every eval period; evaluation time excluded)
 *
 * The step record's loss is sum_p w_p * loss_p: the mean over the global
 * batch, `local`'s loss at the same step.
 *
 * A dead or silent executor: the driver's wait for DONE runs into the
 * deadline, and the error names every executor still holding a task
 * (rank, host, task, step) instead of "any source".
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "msgbuf.h"
#include "mapreduce.h"

typedef struct sched {
  const mr_config_t *cfg;
  int P, N;
  int64_t step;
  unsigned char *assigned; /* [P] task handed out this step */
  int *running;            /* [N+1] task running on executor rank e, -1 none */
} sched_t;

/* The next task for executor rank e: its own home tasks (p % N == e-1)
 * first (Spark's preferred location; with P = N this keeps each task on
 * one executor), then the highest pending task of anyone (stealing from
 * the tail: the task its home executor would reach last).  Every
 * executor holds the whole training set, so a stolen task costs nothing
 * extra.  -1 when none is left. */
static int sched_next(sched_t *s, int e) {
  int pick = -1;
  for (int p = e - 1; p < s->P && pick < 0; p += s->N)
    if (!s->assigned[p]) pick = p;
  for (int p = s->P - 1; p >= 0 && pick < 0; p--)
    if (!s->assigned[p]) pick = p;
  if (pick >= 0) s->assigned[pick] = 1;
  return pick;
}

/* Send executor rank e its next task (or STOP); 1 if a task went out. */
static int sched_give(sg_comm_t *c, sched_t *s, int e, int *gave) {
  mr_task_msg_t m = {.step = s->step, .task = sched_next(s, e)};
  s->running[e] = m.task;
  *gave = m.task >= 0;
  return sg_send(c, e, MR_TAG_TASK, &m, sizeof m);
}

/* The DONE wait timed out: name whoever still holds a task. */
static int name_stragglers(sg_comm_t *c, const sched_t *s, int rc) {
  char msg[512], cause[256];
  size_t at = 0;
  snprintf(cause, sizeof cause, "%s", sg_err_msg());
  int named = 0, first = -1;
  for (int e = 1; e <= s->N && at < sizeof msg - 64; e++) {
    if (s->running[e] < 0) continue;
    if (first < 0) first = e;
    at += (size_t)snprintf(msg + at, sizeof msg - at, "%sexecutor rank %d (%s) task %d",
                           named++ ? ", " : "", e, c->hosts ? c->hosts[e] : "?",
                           s->running[e]);
  }
  return sg_err_blame(sg_err_set(rc, "mapreduce driver: step %lld: no result within %.1f s from %s "
                                 "(%s)", (long long)s->step, c->deadline_s,
                                 named ? msg : "no executor", cause),
                      first, SG_BLAME_PEER_TIMEOUT);
}

/* Hand out all P tasks of one step and collect their DONEs; loss gets
 * sum_p w_p * loss_p. */
static int map_stage(sg_comm_t *c, sched_t *s, double *loss, double *comm_s,
                     double *wait_s) {
  int outstanding = 0, gave;
  double t = sg_now(), wsum = 0;
  memset(s->assigned, 0, (size_t)s->P);
  *loss = 0;
  for (int e = 1; e <= s->N; e++) {
    SG_CHECK(sched_give(c, s, e, &gave));
    outstanding += gave;
  }
  *comm_s += sg_now() - t;
  while (outstanding > 0) {
    mr_done_msg_t d;
    sg_status_t st;
    t = sg_now();
    int rc = sg_recv(c, SG_ANY_SOURCE, MR_TAG_DONE, &d, sizeof d, &st);
    if (rc == SG_ETIMEOUT) return name_stragglers(c, s, rc);
    SG_CHECK(rc);
    *wait_s += sg_now() - t;
    int e = st.source;
    if (st.bytes != sizeof d || e < 1 || e > s->N || d.step != s->step || d.task != s->running[e])
      return sg_err_blame(sg_err_set(SG_EPROTO, "mapreduce driver: step %lld: rank %d reported task "
                                     "%d of step %lld, expected task %d", (long long)s->step, e,
                                     d.task, (long long)d.step,
                                     e >= 1 && e <= s->N ? s->running[e] : -1),
                          e, SG_BLAME_BAD_MESSAGE);
    /* the weight must be the task's share n_p / B of the global batch */
    int64_t first, count;
    mr_task_slice(s->cfg, d.task, &first, &count);
    double want = (double)count / (double)(s->cfg->batch * s->N);
    if (d.weight != want)
      return sg_err_blame(sg_err_set(SG_EPROTO, "mapreduce driver: step %lld: rank %d weighted task "
                                     "%d (%lld samples) by %.12g, expected %.12g",
                                     (long long)s->step, e, d.task, (long long)count, d.weight,
                                     want), e, SG_BLAME_BAD_MESSAGE);
    *loss += d.weight * d.loss;
    wsum += d.weight;
    outstanding--;
    t = sg_now();
    SG_CHECK(sched_give(c, s, e, &gave));
    outstanding += gave;
    *comm_s += sg_now() - t;
  }
  /* Every sample of the global batch counted exactly once. */
  if (fabs(wsum - 1.0) > 1e-9)
    return sg_err_set(SG_EPROTO, "mapreduce driver: step %lld: task weights sum to %.12g, not 1",
                      (long long)s->step, wsum);
  return SG_OK;
}

int mr_driver_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg) {
  sg_comm_t *c = ctx->comm;
  sg_workload_t *wl = NULL;
  sg_optim_t *opt = NULL;
  sg_trainlog_t *log = NULL;
  float *params = NULL, *grad = NULL, *tmp = NULL;
  sched_t s = {.cfg = cfg, .P = cfg->partitions, .N = cfg->executors};
  int rc;

  if (c->size != cfg->executors + 1)
    return sg_err_set(SG_ECONFIG, "mapreduce: %d processes for %d executors (need workers + 1)",
                      c->size, cfg->executors);
  /* The driver evaluates and computes no gradients: it loads the test set
   * only (worker 0 of N gives it the same steps per epoch as everyone). */
  SG_TRY(sg_workload_new(&wl, ctx->opts, 0, cfg->executors, SG_WL_TEST));
  size_t n = sg_workload_nparams(wl);
  int64_t total = sg_workload_total_steps(wl), spe = sg_workload_steps_per_epoch(wl);
  /* vectors nobody reads under compute: modeled (core/msgbuf.h) */
  params = sg_fold_alloc(n * sizeof *params);
  grad = sg_fold_alloc(n * sizeof *grad);
  tmp = sg_fold_alloc(n * sizeof *tmp);
  s.assigned = calloc((size_t)s.P, 1);
  s.running = malloc((size_t)(s.N + 1) * sizeof *s.running);
  if (!params || !grad || !tmp || !s.assigned || !s.running) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_workload_init_params(wl, params)); /* from the seed, here only */
  SG_TRY(sg_workload_optim_new(wl, ctx->opts, &opt));
  SG_TRY(sg_records_info(ctx->rec, "workload", sg_workload_describe(wl)));
  SG_TRY(sg_records_info(ctx->rec, "blas", sg_blas_info()));

  mr_job_msg_t job = {.total_steps = total, .steps_per_epoch = spe, .nparams = (int64_t)n, .partitions = s.P};
  for (int e = 1; e <= s.N; e++) SG_TRY(sg_send(c, e, MR_TAG_JOB, &job, sizeof job));

  SG_TRY(sg_trainlog_new(&log, ctx, wl, 1));
  /* Executors join this barrier once they have loaded the training set and
   * checked the job: the training clock starts with every rank ready. */
  SG_TRY(sg_barrier(c));
  SG_TRY(sg_trainlog_begin(log, params));
  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t r = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    uint64_t sent0 = sg_comm_bytes_sent(c), recv0 = sg_comm_bytes_recvd(c);
    double t = sg_now();
    s.step = step;
    SG_TRY(mr_broadcast(c, cfg, params, n));
    r.comm_s += sg_now() - t;
    SG_TRY(map_stage(c, &s, &r.loss, &r.comm_s, &r.wait_s));
    t = sg_now();
    SG_TRY(mr_aggregate(c, cfg, grad, tmp, n));
    r.comm_s += sg_now() - t;
    if (cfg->step_check) cfg->step_check(cfg->step_check_arg, step, params, grad, n);
    t = sg_now();
    sg_optim_apply(opt, params, grad, step);
    r.compute_s = sg_now() - t;
    r.bytes_sent = sg_comm_bytes_sent(c) - sent0;
    r.bytes_recv = sg_comm_bytes_recvd(c) - recv0;
    SG_TRY(sg_trainlog_step(log, &r, params));
  }
  SG_TRY(sg_engine_dump_params(ctx, params, n));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&wl);
  sg_fold_free(params);
  sg_fold_free(grad);
  sg_fold_free(tmp);
  free(s.assigned);
  free(s.running);
  return rc;
}
