/* engine_util.c - bookkeeping every training loop shares: step records,
 * periodic evaluation, the on-purpose straggler, the final-params dump. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "engine.h"
#include "err.h"
#include "rng.h"

struct sg_trainlog {
  sg_rank_ctx_t *ctx;
  sg_workload_t *wl;
  int evaluates;
  int64_t eval_every;   /* steps between evaluations */
  int64_t total_steps;
  int64_t global_batch; /* samples per step over all workers */
  int64_t steps_per_epoch;
  double train0;        /* sg_now() when training started */
  double eval_time;     /* seconds spent evaluating (excluded from wall_s) */
  double eval_edge;     /* of which before the first step and after the last */
  int64_t last_eval;    /* steps_done of the last evaluation */
  double loss_sum;      /* this rank's losses since the last evaluation */
  int64_t loss_n;
  int begun;
};

static int send_seconds(sg_rank_ctx_t *ctx, const char *key, double secs) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.6f", secs);
  return sg_records_info(ctx->rec, key, buf);
}

/* The trainlog is made once the rank's workload is built and it is about
 * to train: the time since the engine started (rank_main's _engine_t, the
 * rank's own monotonic clock) is its data load and setup, time.data_s
 * (the harness keeps the longest of the ranks). */
static int send_data_time(sg_rank_ctx_t *ctx) {
  double e0 = NAN;
  SG_CHECK(sg_opts_double_or(ctx->opts, "_engine_t", NAN, &e0));
  return isnan(e0) ? SG_OK : send_seconds(ctx, "time.data_s", sg_now() - e0);
}

static int run_conf_load(sg_run_conf_t *c, const sg_opts_t *o) {
  SG_CHECK(sg_setting_int(o, NULL, "delay_rank", &c->delay_rank));
  SG_CHECK(sg_setting_double(o, NULL, "delay_ms", &c->delay_ms));
  SG_CHECK(sg_setting_double(o, NULL, "delay_prob", &c->delay_prob));
  SG_CHECK(sg_setting_int(o, NULL, "seed", &c->seed));
  SG_CHECK(sg_setting_str(o, NULL, "dump_params", &c->dump_params));
  c->parsed = 1;
  return SG_OK;
}

int sg_trainlog_new(sg_trainlog_t **out, sg_rank_ctx_t *ctx, sg_workload_t *wl,
                    int evaluates) {
  SG_CHECK(run_conf_load(&ctx->run, ctx->opts));
  sg_trainlog_t *t = calloc(1, sizeof *t);
  if (!t) return SG_ENOMEM;
  int64_t every = 0;
  int rc;
  SG_TRY(sg_setting_int(ctx->opts, NULL, "eval_every", &every));
  t->ctx = ctx;
  t->wl = wl;
  t->evaluates = evaluates && wl;
  t->steps_per_epoch = wl ? sg_workload_steps_per_epoch(wl) : 1;
  t->total_steps = wl ? sg_workload_total_steps(wl) : 0;
  t->eval_every = every > 0 ? every : t->steps_per_epoch;
  t->global_batch = wl ? (int64_t)sg_workload_batch(wl) * ctx->workers : 0;
  t->train0 = sg_now();
  SG_TRY(send_data_time(ctx));
  if (t->evaluates) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", (long long)t->total_steps);
    SG_TRY(sg_records_info(ctx->rec, "total_steps", buf));
  }
  *out = t;
  return SG_OK;
fail:
  free(t);
  return rc;
}

/* Set the global batch explicitly (engines whose workload instance does
 * not see the per-worker batch, e.g. `local` running N*b in one process). */
void sg_trainlog_set_global_batch(sg_trainlog_t *t, int64_t global_batch) {
  t->global_batch = global_batch;
}

static int evaluate(sg_trainlog_t *t, int64_t steps_done, const float *params) {
  double t_eval = sg_now();
  sg_eval_t ev;
  SG_CHECK(sg_workload_evaluate(t->wl, params, &ev));
  sg_eval_rec_t e = {
      .step = steps_done,
      .epoch = (int32_t)(steps_done / (t->steps_per_epoch ? t->steps_per_epoch : 1)),
      .wall_s = t_eval - t->train0 - t->eval_time,
      .samples = steps_done * t->global_batch,
      .train_loss = t->loss_n ? t->loss_sum / (double)t->loss_n : NAN,
      .test_loss = ev.test_loss,
      .test_acc = ev.test_acc,
  };
  t->loss_sum = 0;
  t->loss_n = 0;
  t->last_eval = steps_done;
  double took = sg_now() - t_eval;
  t->eval_time += took;
  if (steps_done == 0 || steps_done == t->total_steps) t->eval_edge += took;
  return sg_records_eval(t->ctx->rec, &e);
}

int sg_trainlog_begin(sg_trainlog_t *t, const float *params) {
  sg_opts_freeze(1); /* from here on a lookup by key is a late read */
  t->train0 = sg_now();
  t->begun = 1;
  if (!t->evaluates) return SG_OK;
  return evaluate(t, 0, params);
}

int sg_trainlog_step(sg_trainlog_t *t, const sg_step_rec_t *s, const float *params) {
  SG_CHECK(sg_records_step(t->ctx->rec, s));
  if (!isnan(s->loss)) {
    t->loss_sum += s->loss;
    t->loss_n++;
  }
  if (!t->evaluates || !params) return SG_OK;
  if (sg_trainlog_due(t, s->step)) SG_CHECK(evaluate(t, s->step + 1, params));
  return SG_OK;
}

int sg_trainlog_due(const sg_trainlog_t *t, int64_t step) {
  const int64_t done = step + 1;
  return t->evaluates && (done % t->eval_every == 0 || done == t->total_steps);
}

int sg_trainlog_due_at(const sg_trainlog_t *t, int64_t steps_done) {
  return t->evaluates && steps_done < t->total_steps &&
         steps_done / t->eval_every > t->last_eval / t->eval_every;
}

int sg_trainlog_eval_at(sg_trainlog_t *t, int64_t steps_done, const float *params) {
  return t->evaluates ? evaluate(t, steps_done, params) : SG_OK;
}

int sg_trainlog_end(sg_trainlog_t *t, int64_t steps_done, const float *params) {
  if (!t->evaluates) return SG_OK;
  /* counted as an edge evaluation, like the one after a quota's last step */
  double before = t->eval_time;
  SG_CHECK(evaluate(t, steps_done, params));
  if (steps_done != t->total_steps) t->eval_edge += t->eval_time - before;
  return SG_OK;
}

double sg_trainlog_eval_time(const sg_trainlog_t *t) { return t->eval_time; }

void sg_trainlog_destroy(sg_trainlog_t **pt) {
  if (!pt || !*pt) return;
  sg_trainlog_t *t = *pt;
  /* The harness sums these over the ranks (time.eval_s) and takes the
   * evaluations between the first and the last step out of the training
   * window (time.train_s).  Sent before the rank's DONE; a failure to
   * send changes nothing about the run. */
  if (t->begun && t->evaluates) {
    send_seconds(t->ctx, "time.eval_s", t->eval_time);
    send_seconds(t->ctx, "time.eval_in_s", t->eval_time - t->eval_edge);
  }
  free(*pt);
  *pt = NULL;
}

int sg_delay_hit(int64_t delay_rank, double prob, uint64_t seed, int rank, int64_t step) {
  if (delay_rank != rank && delay_rank != -2) return 0;
  if (prob >= 1) return 1;
  uint64_t h = sg_hash64(sg_hash64(seed ^ 0x5354524147474c45ULL) ^
                         sg_hash64((uint64_t)rank * 0x9e3779b97f4a7c15ULL) ^
                         sg_hash64((uint64_t)step + 0x2545f4914f6cdd1dULL));
  return (double)(h >> 11) * 0x1.0p-53 < prob;
}

void sg_engine_delay(const sg_rank_ctx_t *ctx, int64_t step) {
  sg_run_conf_t c = ctx->run;
  if (!c.parsed && run_conf_load(&c, ctx->opts) < 0) return; /* a loop without a trainlog */
  if (c.delay_ms <= 0 || !sg_delay_hit(c.delay_rank, c.delay_prob, (uint64_t)c.seed, ctx->rank, step))
    return;
  double ms = c.delay_ms;
  struct timespec ts = {.tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(fmod(ms, 1000) * 1e6)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

int sg_engine_dump_params(const sg_rank_ctx_t *ctx, const float *params, size_t n) {
  sg_run_conf_t c = ctx->run;
  if (!c.parsed) SG_CHECK(run_conf_load(&c, ctx->opts));
  const char *path = c.dump_params;
  if (!path[0]) return SG_OK;
  FILE *f = fopen(path, "wb");
  if (!f) return sg_err_set(SG_EIO, "dump_params: %s: %s", path, strerror(errno));
  size_t w = fwrite(params, sizeof(float), n, f);
  if (fclose(f) != 0 || w != n)
    return sg_err_set(SG_EIO, "dump_params: %s: write failed", path);
  return SG_OK;
}
