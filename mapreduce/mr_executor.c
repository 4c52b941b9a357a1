/* mr_executor.c - ranks 1..N: compute the gradients of the tasks the
 * driver hands out.
 *
 * Per step t (the schedule and bytes are drawn in mapreduce.h):
 *
 *   wait for the parameters                 wait_s  (the step barrier)
 *   broadcast: receive (and, in a tree,
 *              forward) the parameters      comm_s
 *   until STOP:
 *       wait for a task id                  wait_s
 *       acc += w_p * grad(task p)           compute_s
 *       send DONE(p, loss_p, w_p)           comm_s
 *   aggregate(acc) toward the driver        comm_s
 *
 * Task p of P is worker p of P with batch N*b/P in the workload's
 * sharding: its step-t samples are positions p, p+P, ... of the global
 * step-t batch.  Each task gets its own workload instance, created the
 * first time this executor runs the task (home tasks before training
 * starts, stolen ones on first use) and kept: Spark's cached partitions.
 *
 * The step record's loss is the mean of this executor's task losses (NaN
 * when it ran none this step).  The on-purpose delay (delay_rank,
 * delay_ms) models a slower machine: each task sleeps delay_ms * N / P,
 * its share of a worker's batch, so with P = N it is delay_ms per step as
 * in every engine, and with P > N the slow executor's extra tasks can go
 * elsewhere.  (A fixed sleep per step would hit its first task whatever
 * the partitioning, and no scheduler could hide it.)
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "mapreduce.h"

typedef struct executor {
  sg_rank_ctx_t *ctx;
  const mr_config_t *cfg;
  sg_opts_t *task_opts;  /* the run's settings with batch = N*b/P */
  sg_workload_t **tasks; /* [P] workload of task p, NULL until used */
  float weight;          /* w_p = (N*b/P) / (N*b) = 1/P */
} executor_t;

static int task_workload(executor_t *x, int p, sg_workload_t **out) {
  if (!x->tasks[p])
    SG_CHECK(sg_workload_new(&x->tasks[p], x->task_opts, p, x->cfg->partitions, SG_WL_TRAIN));
  *out = x->tasks[p];
  return SG_OK;
}

/* The task's gradient, weighted, into acc (first task: acc = w*g). */
static int run_task(executor_t *x, int p, const float *params, float *grad,
                    float *acc, size_t n, int first, int64_t step, double *loss) {
  sg_workload_t *wl;
  SG_CHECK(task_workload(x, p, &wl));
  SG_CHECK(sg_workload_grad(wl, params, grad, step, loss));
  const float w = x->weight;
  if (first)
    for (size_t i = 0; i < n; i++) acc[i] = w * grad[i];
  else
    for (size_t i = 0; i < n; i++) acc[i] += w * grad[i];
  return SG_OK;
}

/* The straggler's sleep for one task: delay_ms * N / P (see above). */
static void task_delay(const executor_t *x) {
  int64_t rank = -1;
  double ms = 0;
  const sg_opts_t *o = x->ctx->opts;
  if (sg_opts_int_or(o, "delay_rank", -1, &rank) < 0 || rank != x->ctx->rank) return;
  if (sg_opts_double_or(o, "delay_ms", 0, &ms) < 0 || ms <= 0) return;
  ms = ms * x->cfg->executors / x->cfg->partitions;
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(fmod(ms, 1000) * 1e6)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Wait for the driver's next message for this step; *task < 0 = STOP. */
static int next_task(sg_comm_t *c, int64_t step, int *task, double *comm_s,
                     double *wait_s) {
  mr_task_msg_t m;
  sg_status_t st;
  double t = sg_now();
  SG_CHECK(mr_probe_dl(c, MR_DL_EXECUTOR, 0, MR_TAG_TASK, &st));
  double t1 = sg_now();
  *wait_s += t1 - t;
  SG_CHECK(sg_recv(c, 0, MR_TAG_TASK, &m, sizeof m, &st));
  *comm_s += sg_now() - t1;
  if (st.bytes != sizeof m || m.step != step)
    return sg_err_set(SG_EPROTO, "mapreduce: rank %d expected a task of step %lld, got step %lld",
                      c->rank, (long long)step, (long long)m.step);
  *task = m.task;
  return SG_OK;
}

int mr_executor_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg) {
  sg_comm_t *c = ctx->comm;
  executor_t x = {.ctx = ctx, .cfg = cfg, .weight = 1.0f / (float)cfg->partitions};
  sg_trainlog_t *log = NULL;
  float *params = NULL, *grad = NULL, *acc = NULL, *tmp = NULL;
  int P = cfg->partitions, N = cfg->executors, e = ctx->rank;
  int parent = mr_bcast_parent(cfg, e, c->size);
  int rc;

  if (!(x.task_opts = sg_opts_dup(ctx->opts)) || !(x.tasks = calloc((size_t)P, sizeof *x.tasks))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_opts_setf(x.task_opts, "batch", "%lld", (long long)(cfg->batch * N / P)));
  for (int p = e - 1; p < P; p += N) { /* home partitions, loaded up front */
    sg_workload_t *wl;
    SG_TRY(task_workload(&x, p, &wl));
  }

  mr_job_msg_t job;
  sg_status_t st;
  SG_TRY(mr_recv_dl(c, MR_DL_EXECUTOR, 0, MR_TAG_JOB, &job, sizeof job, &st));
  if (st.bytes != sizeof job || job.partitions != P || job.nparams <= 0 ||
      job.steps_per_epoch <= 0) {
    rc = sg_err_set(SG_EPROTO, "mapreduce: rank %d: driver's job (%d partitions) does not match ours (%d)",
                    e, job.partitions, P);
    goto fail;
  }
  for (int p = 0; p < P; p++)
    if (x.tasks[p] && (sg_workload_nparams(x.tasks[p]) != (size_t)job.nparams ||
                       sg_workload_total_steps(x.tasks[p]) != job.total_steps)) {
      rc = sg_err_set(SG_EPROTO, "mapreduce: rank %d: task %d has %zu params and %lld steps, the driver %lld and %lld",
                      e, p, sg_workload_nparams(x.tasks[p]), (long long)sg_workload_total_steps(x.tasks[p]),
                      (long long)job.nparams, (long long)job.total_steps);
      goto fail;
    }
  size_t n = (size_t)job.nparams;
  params = malloc(n * sizeof *params);
  grad = malloc(n * sizeof *grad);
  acc = malloc(n * sizeof *acc);
  tmp = malloc(n * sizeof *tmp);
  if (!params || !grad || !acc || !tmp) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_trainlog_new(&log, ctx, NULL, 0));
  SG_TRY(sg_trainlog_begin(log, NULL));

  for (int64_t step = 0; step < job.total_steps; step++) {
    sg_step_rec_t r = {.step = step, .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    uint64_t sent0 = sg_comm_bytes_sent(c), recv0 = sg_comm_bytes_recvd(c);
    double t = sg_now();
    SG_TRY(mr_probe_dl(c, MR_DL_EXECUTOR, parent, MR_TAG_PARAMS, &st));
    double t1 = sg_now();
    r.wait_s += t1 - t;
    SG_TRY(mr_broadcast(c, cfg, params, n));
    r.comm_s += sg_now() - t1;

    int ntasks = 0, task = -1;
    double loss_sum = 0;
    for (;;) {
      SG_TRY(next_task(c, step, &task, &r.comm_s, &r.wait_s));
      if (task < 0) break;
      if (task >= P) {
        rc = sg_err_set(SG_EPROTO, "mapreduce: rank %d got task %d of %d", e, task, P);
        goto fail;
      }
      t = sg_now();
      task_delay(&x);
      mr_done_msg_t d = {.step = step, .task = task, .weight = 1.0 / P};
      SG_TRY(run_task(&x, task, params, grad, acc, n, ntasks == 0, step, &d.loss));
      t1 = sg_now();
      r.compute_s += t1 - t;
      SG_TRY(sg_send(c, 0, MR_TAG_DONE, &d, sizeof d));
      r.comm_s += sg_now() - t1;
      loss_sum += d.loss;
      ntasks++;
    }
    if (ntasks == 0)
      for (size_t i = 0; i < n; i++) acc[i] = 0.0f;
    t = sg_now();
    SG_TRY(mr_aggregate(c, cfg, acc, tmp, n));
    r.comm_s += sg_now() - t;
    r.loss = ntasks ? loss_sum / ntasks : NAN;
    r.epoch = (int32_t)(step / job.steps_per_epoch);
    r.bytes_sent = sg_comm_bytes_sent(c) - sent0;
    r.bytes_recv = sg_comm_bytes_recvd(c) - recv0;
    SG_TRY(sg_trainlog_step(log, &r, NULL));
  }
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  if (x.tasks)
    for (int p = 0; p < P; p++) sg_workload_destroy(&x.tasks[p]);
  free(x.tasks);
  sg_opts_destroy(&x.task_opts);
  free(params);
  free(grad);
  free(acc);
  free(tmp);
  return rc;
}
