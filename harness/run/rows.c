/* rows.c - the records the records server hands out, into rows: each
 * record type to its table or run_info key, a rank's HELLO and DONE into
 * the run's state (run.h). */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"

/* A rank's own time.* INFO: data load (the longest rank's counts), time
 * spent evaluating, and of it the part between the first and last step. */
static void rank_time(run_times_t *t, const char *key, const char *val) {
  char *end;
  double v = strtod(val, &end);
  if (end == val || !(v >= 0) || v > 1e9) return;
  if (!strcmp(key, "time.data_s")) t->data_s = isnan(t->data_s) || v > t->data_s ? v : t->data_s;
  else if (!strcmp(key, "time.eval_s")) t->eval_s = (isnan(t->eval_s) ? 0 : t->eval_s) + v;
  else if (!strcmp(key, "time.eval_in_s")) t->eval_in_s = (isnan(t->eval_in_s) ? 0 : t->eval_in_s) + v;
}

/* The rank's kind from the engine's role table, decided by the harness
 * (not by what the rank says): what the views and the report read.
 * Looked up once per rank (a role() may parse the engine's options). */
static sg_role_kind_t rank_kind(serve_t *s, int rank) {
  rank_info_t *ri = &s->ranks[rank];
  if (!ri->kind)
    ri->kind = 1 + (int)sg_engine_role_kind(s->run->engine, s->run->opts, s->run->workers, rank);
  return (sg_role_kind_t)(ri->kind - 1);
}

/* HELLO: the rank's role, host and pid (one per rank). */
static int on_hello(serve_t *s, int rank, const unsigned char *p) {
  rank_info_t *ri = &s->ranks[rank];
  sg_rec_hello_t x;
  if (ri->hello) return SG_OK;
  memcpy(&x, p, sizeof x);
  x.role[sizeof x.role - 1] = '\0';
  x.host[sizeof x.host - 1] = '\0';
  ri->hello = 1;
  snprintf(ri->role, sizeof ri->role, "%s", x.role);
  snprintf(ri->host, sizeof ri->host, "%s", x.host);
  ri->pid = x.pid;
  s->times.nhello++;
  s->times.last_hello = s->last_rec;
  return sg_recorder_rank(s->env->db, s->run_id, rank, ri->role, rank_kind(s, rank), ri->host,
                          ri->pid, sg_run_cluster_host(s->cluster, rank),
                          sg_run_cluster_addr(s->cluster, rank));
}

/* A step's start and end on the rank's clock (seconds since t0), bounded
 * by the harness's clock when its record arrived: a record cannot leave
 * before its step ends, so a rank whose clock runs ahead, or a buggy or
 * lying one, cannot stretch time.train_s.  0 when the start is no time at
 * all (not a number, before t0): the record then says nothing of when. */
static int step_span(const serve_t *s, const sg_step_rec_t *x, double *start, double *end) {
  /* simulated ranks' clocks are the simulation's: no bound from ours */
  double now = s->sim ? INFINITY : sg_wall() - s->times.t0;
  if (!(x->t_start >= 0)) return 0;
  *start = *end = x->t_start < now ? x->t_start : now;
  const double part[] = {x->compute_s, x->comm_s, x->wait_s};
  for (int i = 0; i < 3; i++) *end += isfinite(part[i]) && part[i] > 0 ? part[i] : 0;
  if (!(*end <= now)) *end = now;
  return 1;
}

static int on_step(serve_t *s, int rank, const unsigned char *p) {
  rank_info_t *ri = &s->ranks[rank];
  sg_step_rec_t x;
  memcpy(&x, p, sizeof x);
  double raw = x.t_start; /* the rank's clock; to the harness's by its offset */
  if (ri->clocked) x.t_start += ri->clk_off;
  const char *role =
      ri->hello ? ri->role : sg_engine_role(s->run->engine, s->run->opts, s->run->workers, rank);
  SG_CHECK(sg_recorder_step(s->env->db, s->run_id, rank, role, rank_kind(s, rank), &x, raw));
  /* training is under way once every rank has begun: the latest first
   * step start (a rank that starts earlier waits on the evaluating
   * rank's first evaluation inside its step).  The step's end on the
   * rank's clock, not the record's arrival: step records travel in
   * batches (records.h), and the last batch may leave only after the
   * evaluation that follows the last step. */
  double start, end;
  if (step_span(s, &x, &start, &end)) {
    if (ri->last_step < 0 && !(start <= s->times.first_step)) s->times.first_step = start;
    if (!(end <= s->times.last_step_end)) s->times.last_step_end = end;
  }
  ri->last_step = x.step;
  s->armed = 1;
  sg_progress_step(s->env->progress, x.step, x.epoch);
  return SG_OK;
}

/* INFO clock.start / clock.end: "offset unc at" (clock_sync.h), each
 * taken once per rank.  The start's offset corrects every later step of
 * the rank (on_step); the end's re-corrects them all with the offset
 * interpolated between the two, which absorbs a clock's drift (an offset
 * within its uncertainty of zero counts as zero).  A value
 * that is not three finite numbers in range says nothing and is dropped;
 * a rank moves only its own rows, as its t_start could anyway. */
static int on_clock(serve_t *s, int rank, const char *key, const char *val) {
  rank_info_t *ri = &s->ranks[rank];
  double off, unc, at;
  char tail;
  int end = !strcmp(key, "clock.end");
  if ((!end && strcmp(key, "clock.start")) || (end ? ri->clocked_end : ri->clocked) ||
      sscanf(val, "%lf %lf %lf %c", &off, &unc, &at, &tail) != 3 || !(fabs(off) <= 86400) ||
      !(unc >= 0 && unc <= 3600) || !(fabs(at) <= 1e9))
    return SG_OK;
  SG_CHECK(sg_recorder_clock(s->env->db, s->run_id, rank, end, off, unc, at));
  /* an offset within its uncertainty of zero is no offset: ranks on the
   * harness's host read its very clock, and their order stays exact */
  if (fabs(off) <= unc) off = 0;
  if (!end) {
    ri->clocked = 1;
    ri->clk_off = off;
    ri->clk_at = at;
    return SG_OK;
  }
  ri->clocked_end = 1;
  if (!ri->clocked || !(at - ri->clk_at > 1e-3)) return SG_OK;
  return sg_recorder_clock_drift(s->env->db, s->run_id, rank, ri->clk_off,
                                 (off - ri->clk_off) / (at - ri->clk_at), ri->clk_at);
}

static int on_info(serve_t *s, int rank, const unsigned char *p) {
  const char *key = (const char *)p, *val = key + strlen(key) + 1;
  if (!strncmp(key, "clock.", 6)) return on_clock(s, rank, key, val);
  if (!strncmp(key, "time.", 5)) { /* the harness writes time.* (record_times) */
    rank_time(&s->times, key, val);
    return SG_OK;
  }
  SG_CHECK(sg_recorder_info(s->env->db, s->run_id, key, val));
  if (!strcmp(key, "total_steps")) sg_progress_total(s->env->progress, atoll(val));
  return SG_OK;
}

/* DONE: ok, or failed with a message and whom it blames (the fields, a
 * blamed rank out of range counting as none). */
static void on_done(serve_t *s, int rank, const unsigned char *p) {
  rank_info_t *ri = &s->ranks[rank];
  sg_rec_done_t d;
  memcpy(&d, p, sizeof d);
  if (ri->done) return;
  ri->done = 1;
  s->times.last_done = s->last_rec;
  ri->status = d.status;
  ri->blamed = d.blamed >= 0 && d.blamed < s->nprocs ? d.blamed : -1;
  ri->reason = ri->blamed >= 0 ? d.reason : SG_BLAME_NONE;
  s->ndone++;
  snprintf(ri->msg, sizeof ri->msg, "%s", (const char *)p + sizeof d);
  if (d.status == 0) return;
  char who[160];
  run_rank_name(s, rank, who, sizeof who);
  if (!s->error[0]) {
    s->first_fail = rank;
    s->settle_until = sg_now() + SETTLE_S;
  }
  run_fail(s, "%s: %s", who, ri->msg[0] ? ri->msg : "failed");
}

/* One record, checked by the records server (sizes, terminators, sender;
 * malformed or forged ones never get here: run_info records.dropped). */
static int handle_record(serve_t *s, const sg_rec_in_t *in) {
  const unsigned char *p = in->payload;
  int rank = in->h.rank;
  s->last_rec = sg_now();
  s->ranks[rank].last_t = s->last_rec;
  switch (in->h.type) {
  case SG_REC_HELLO: return on_hello(s, rank, p);
  case SG_REC_STEP: return on_step(s, rank, p);
  case SG_REC_EVAL: {
    sg_eval_rec_t x;
    memcpy(&x, p, sizeof x);
    SG_CHECK(sg_recorder_eval(s->env->db, s->run_id, &x));
    s->final_acc = x.test_acc;
    sg_progress_eval(s->env->progress, x.test_acc);
    return SG_OK;
  }
  case SG_REC_BENCH: {
    sg_bench_rec_t x;
    memcpy(&x, p, sizeof x);
    x.collective[sizeof x.collective - 1] = x.impl[sizeof x.impl - 1] = '\0';
    x.transport[sizeof x.transport - 1] = '\0';
    return sg_recorder_bench(s->env->db, s->env->exp_id, &x);
  }
  case SG_REC_BUCKET: {
    sg_bucket_rec_t x;
    memcpy(&x, p, sizeof x);
    return sg_recorder_bucket(s->env->db, s->run_id, rank, &x);
  }
  case SG_REC_INFO: return on_info(s, rank, p);
  case SG_REC_DONE: on_done(s, rank, p); return SG_OK;
  default: return SG_OK;
  }
}

/* Handle every record waiting at the records server. */
int run_drain(serve_t *s) {
  sg_rec_in_t in;
  int got;
  while ((got = sg_rec_server_recv(s->rec, &in)) > 0) SG_CHECK(handle_record(s, &in));
  return got;
}

/* Wait up to `secs` for records (e.g. the DONE of a rank that just exited). */
int run_drain_for(serve_t *s, double secs, int want_rank) {
  double until = sg_now() + secs;
  for (;;) {
    SG_CHECK(run_drain(s));
    if (want_rank >= 0 ? s->ranks[want_rank].done : s->ndone >= s->nprocs) return SG_OK;
    double left = until - sg_now();
    if (left <= 0) return SG_OK;
    sg_rec_server_wait(s->rec, -1, NULL, (int)(left * 1000) + 1);
  }
}
