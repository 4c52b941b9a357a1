/* mr_executor.c - ranks 1..N: compute the gradients of the tasks the
 * driver hands out.
 *
 * Start: load the training set, receive and check the JOB, join the
 * driver's ready barrier (its training clock starts after it).
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
 * The executor holds ONE workload: worker 0 of 1 with batch B = N*b, so
 * its step-t batch is the global batch of step t, and task p is the
 * slice mr_task_slice(p) of it, computed with sg_workload_grad_slice into
 * buffers allocated once.  Every executor can run every task without
 * loading anything (each loads the whole training set once, before
 * training: Spark with the dataset cached on every executor).
 *
 * The step record's loss is the mean over the samples of the tasks this
 * executor ran (NaN when it ran none this step).  The on-purpose delay
 * (delay_rank, delay_ms) models a slower machine: each task sleeps
 * delay_ms * n_p / b, its share of a worker's batch, so with P = N it is
 * delay_ms per step as in every engine, and with P > N the slow
 * executor's extra tasks can go elsewhere.  (A fixed sleep per step
 * would hit its first task whatever the partitioning, and no scheduler
 * could hide it.)
 *
 * With `device: cuda` the executor keeps a device replica
 * (core/cuda/replica.h): the broadcast parameters are staged up, each
 * task's gradient is computed and accumulated on the device, and the
 * accumulator is staged down for the reduce; the driver stays on the
 * host (docs/cuda.md).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "cuda/replica.h"
#include "err.h"
#include "msgbuf.h"
#include "mapreduce.h"

typedef struct executor {
  const mr_config_t *cfg;
  sg_workload_t *wl; /* worker 0 of 1, batch B = N*b */
  double delay_ms;   /* per worker batch of work; 0 = not a slow rank */
  int64_t delay_rank, seed; /* which executor is slowed (engine.h, sg_delay_hit) */
  double delay_prob;
  mr_job_msg_t job;  /* the driver's */
  size_t n;          /* parameters */
  float *params, *grad, *acc, *tmp; /* [n] each */
  sg_replica_t *dev; /* device: cuda (or the CPU twin's device): params, the
                        task gradient and the accumulator on the device;
                        params and acc are the staged host copies */
} executor_t;

/* Task p's gradient, weighted by w_p = n_p / B, into acc (first task of
 * the step: acc = w*g).  *weight and *loss get w_p and the task's mean
 * loss. */
static int run_task(executor_t *x, int p, const float *params, float *grad,
                    float *acc, size_t n, int first_task, int64_t step,
                    double *weight, double *loss) {
  int64_t first, count;
  mr_task_slice(x->cfg, p, &first, &count);
  *weight = (double)count / (double)(x->cfg->batch * x->cfg->executors);
  const float w = (float)*weight;
  if (x->dev) {
    SG_CHECK(sg_replica_grad_slice(x->dev, x->wl, step, first, count, loss));
    return sg_replica_acc(x->dev, w, first_task);
  }
  SG_CHECK(sg_workload_grad_slice(x->wl, params, grad, step, first, count, loss));
  if (first_task)
    for (size_t i = 0; i < n; i++) acc[i] = w * grad[i];
  else
    for (size_t i = 0; i < n; i++) acc[i] += w * grad[i];
  return SG_OK;
}

/* The straggler's sleep for task p of `step` on executor e: delay_ms *
 * n_p / b (see above), on the steps sg_delay_hit picks. */
static void task_delay(const executor_t *x, int p, int e, int64_t step) {
  if (x->delay_ms <= 0 || !sg_delay_hit(x->delay_rank, x->delay_prob, (uint64_t)x->seed, e, step))
    return;
  int64_t first, count;
  mr_task_slice(x->cfg, p, &first, &count);
  double ms = x->delay_ms * (double)count / (double)x->cfg->batch;
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

/* device: cuda (or the twin's device): the parameters, a task's gradient
 * and the accumulator on the device.  The driver stays on the host. */
static int executor_device(executor_t *x, int e) {
  const mr_config_t *cfg = x->cfg;
  if (!sg_workload_on_device(x->wl) && !cfg->dev_twin) return SG_OK;
  size_t chunk = cfg->dev_chunk ? cfg->dev_chunk : MR_DEV_CHUNK;
  if (chunk > x->n && x->n > 0) chunk = x->n;
  sg_rdev_t dev;
  SG_CHECK(cfg->dev_twin && !sg_workload_on_device(x->wl)
               ? cfg->dev_twin(&dev, chunk, e)
               : sg_cuda_rdev_new(&dev, chunk));
  SG_CHECK(sg_replica_new(&x->dev, &dev, x->n, x->grad));
  x->dev->plant = cfg->dev_plant;
  return sg_replica_want_acc(x->dev);
}

/* The driver's job, checked against this rank's own workload. */
static int executor_job(sg_comm_t *c, executor_t *x) {
  mr_job_msg_t *job = &x->job;
  sg_status_t st;
  int e = c->rank, P = x->cfg->partitions;
  SG_CHECK(mr_recv_dl(c, MR_DL_EXECUTOR, 0, MR_TAG_JOB, job, sizeof *job, &st));
  if (st.bytes != sizeof *job || job->partitions != P || job->nparams <= 0 ||
      job->steps_per_epoch <= 0)
    return sg_err_set(SG_EPROTO, "mapreduce: rank %d: driver's job (%d partitions) does not match ours (%d)",
                      e, job->partitions, P);
  if (sg_workload_nparams(x->wl) != (size_t)job->nparams ||
      sg_workload_total_steps(x->wl) != job->total_steps ||
      sg_workload_steps_per_epoch(x->wl) != job->steps_per_epoch)
    return sg_err_set(SG_EPROTO, "mapreduce: rank %d: %zu params, %lld steps (%lld per epoch); the driver %lld, %lld (%lld)",
                      e, sg_workload_nparams(x->wl), (long long)sg_workload_total_steps(x->wl),
                      (long long)sg_workload_steps_per_epoch(x->wl), (long long)job->nparams,
                      (long long)job->total_steps, (long long)job->steps_per_epoch);
  return SG_OK;
}

/* The tasks the driver hands this rank for `step`, until its STOP: each
 * one's weighted gradient into x->acc, its DONE to the driver.  *ntasks,
 * and the weighted loss sum and weight sum, for the step record. */
static int executor_tasks(sg_comm_t *c, executor_t *x, int64_t step, sg_step_rec_t *r,
                          int *ntasks, double *loss_sum, double *weight_sum) {
  int task = -1, P = x->cfg->partitions;
  for (;;) {
    SG_CHECK(next_task(c, step, &task, &r->comm_s, &r->wait_s));
    if (task < 0) return SG_OK;
    if (task >= P)
      return sg_err_set(SG_EPROTO, "mapreduce: rank %d got task %d of %d", c->rank, task, P);
    double t = sg_now();
    task_delay(x, task, c->rank, step);
    mr_done_msg_t d = {.step = step, .task = task};
    SG_CHECK(run_task(x, task, x->params, x->grad, x->acc, x->n, *ntasks == 0, step, &d.weight,
                      &d.loss));
    double t1 = sg_now();
    r->compute_s += t1 - t;
    SG_CHECK(sg_send(c, 0, MR_TAG_DONE, &d, sizeof d));
    r->comm_s += sg_now() - t1;
    *loss_sum += d.weight * d.loss;
    *weight_sum += d.weight;
    (*ntasks)++;
  }
}

/* One step: the parameters (broadcast), the tasks, the reduce of this
 * rank's sum of weighted gradients; its step record. */
static int executor_step(sg_rank_ctx_t *ctx, executor_t *x, int parent, int64_t step,
                         sg_trainlog_t *log) {
  sg_comm_t *c = ctx->comm;
  sg_step_rec_t r = {.step = step, .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
  uint64_t sent0 = sg_comm_bytes_sent(c), recv0 = sg_comm_bytes_recvd(c);
  sg_status_t st;
  double t = sg_now();
  SG_CHECK(mr_probe_dl(c, MR_DL_EXECUTOR, parent, MR_TAG_PARAMS, &st));
  double t1 = sg_now();
  r.wait_s += t1 - t;
  SG_CHECK(mr_broadcast(c, x->cfg, x->params, x->n));
  if (x->dev) SG_CHECK(sg_replica_put(x->dev, x->params)); /* the parameters up */
  r.comm_s += sg_now() - t1;

  int ntasks = 0;
  double loss_sum = 0, weight_sum = 0;
  SG_CHECK(executor_tasks(c, x, step, &r, &ntasks, &loss_sum, &weight_sum));
  t = sg_now();
  if (ntasks == 0)
    for (size_t i = 0; i < x->n; i++) x->acc[i] = 0.0f;
  else if (x->dev) /* the tasks' sum down */
    SG_CHECK(sg_replica_get_acc(x->dev, x->acc));
  SG_CHECK(mr_aggregate(c, x->cfg, x->acc, x->tmp, x->n));
  r.comm_s += sg_now() - t;
  r.loss = ntasks ? loss_sum / weight_sum : NAN;
  r.epoch = (int32_t)(step / x->job.steps_per_epoch);
  r.bytes_sent = sg_comm_bytes_sent(c) - sent0;
  r.bytes_recv = sg_comm_bytes_recvd(c) - recv0;
  return sg_trainlog_step(log, &r, NULL);
}

int mr_executor_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg) {
  sg_comm_t *c = ctx->comm;
  executor_t x = {.cfg = cfg};
  sg_opts_t *wl_opts = NULL;
  sg_trainlog_t *log = NULL;
  int N = cfg->executors, e = ctx->rank;
  int parent = mr_bcast_parent(cfg, e, c->size);
  int rc;

  SG_TRY(sg_setting_int(ctx->opts, NULL, "delay_rank", &x.delay_rank));
  SG_TRY(sg_setting_double(ctx->opts, NULL, "delay_ms", &x.delay_ms));
  SG_TRY(sg_setting_double(ctx->opts, NULL, "delay_prob", &x.delay_prob));
  SG_TRY(sg_setting_int(ctx->opts, NULL, "seed", &x.seed));
  /* The run's settings with batch = N*b: the workload of one worker that
   * sees the whole global batch. */
  if (!(wl_opts = sg_opts_dup(ctx->opts))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_opts_setf(wl_opts, "batch", "%lld", (long long)(cfg->batch * N)));
  SG_TRY(sg_workload_new(&x.wl, wl_opts, 0, 1, SG_WL_TRAIN));
  SG_TRY(executor_job(c, &x));
  x.n = (size_t)x.job.nparams;
  /* vectors nobody reads under compute: modeled (core/msgbuf.h) */
  x.params = sg_fold_alloc(x.n * sizeof *x.params);
  x.grad = sg_fold_alloc(x.n * sizeof *x.grad);
  x.acc = sg_fold_alloc(x.n * sizeof *x.acc);
  x.tmp = sg_fold_alloc(x.n * sizeof *x.tmp);
  if (!x.params || !x.grad || !x.acc || !x.tmp) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(executor_device(&x, e));
  SG_TRY(sg_trainlog_new(&log, ctx, NULL, 0));
  /* Ready: the driver starts the training clock after this barrier. */
  SG_TRY(sg_barrier(c));
  SG_TRY(sg_trainlog_begin(log, NULL));
  for (int64_t step = 0; step < x.job.total_steps; step++)
    SG_TRY(executor_step(ctx, &x, parent, step, log));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  sg_workload_destroy(&x.wl);
  sg_opts_destroy(&wl_opts);
  sg_fold_free(x.params);
  sg_fold_free(x.grad);
  sg_fold_free(x.acc);
  sg_fold_free(x.tmp);
  sg_replica_destroy(&x.dev);
  return rc;
}
