/* blame.c - the one-line reason a run failed and whom it names: the first
 * cause wins, the blame chain of the ranks' DONE fields is followed to its
 * root, and a stopped or dead process of this host is named first (run.h). */
#include "run_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "err.h"

void run_rank_name(const serve_t *s, int r, char *out, size_t cap) {
  const rank_info_t *ri = &s->ranks[r];
  const char *role = ri->hello ? ri->role
                               : sg_engine_role(s->run->engine, s->run->opts, s->run->workers, r);
  if (ri->pid) snprintf(out, cap, "rank %d (%s, %s, pid %d)", r, role, ri->hello ? ri->host : "?", ri->pid);
  else snprintf(out, cap, "rank %d (%s)", r, role);
}

void run_fail(serve_t *s, const char *fmt, ...) {
  if (s->error[0]) return; /* the first cause wins */
  char raw[sizeof s->error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* one printable line: a rank's message (or a forged record's) is data */
  sg_printable(s->error, sizeof s->error, raw);
}

/* The rank a failed DONE blames (its blamed field, set by the engine
 * through sg_err_blame()), or -1 when it blames itself or nobody. */
static int run_blamed_rank(const serve_t *s, int self) {
  const rank_info_t *ri = &s->ranks[self];
  return ri->blamed != self && ri->reason > SG_BLAME_SELF ? ri->blamed : -1;
}

/* Deadlines cascade: when rank 1 goes silent, rank 2 times out waiting on
 * it, and rank 0, waiting on rank 2, may time out a moment earlier and
 * report first, blaming rank 2.  So the first failure is followed along
 * the blame chain (rank 0 -> rank 2 -> rank 1) to the last rank that
 * reported a failure itself: rank 2's message, naming rank 1, is the
 * cause.  SETTLE_S after the first failure gives the others time to
 * report. */
void run_root_cause(serve_t *s) {
  int r = s->first_fail;
  if (r < 0) return;
  for (int hops = 0;; hops++) {
    int b = run_blamed_rank(s, r);
    if (b < 0 || !s->ranks[b].done || !s->ranks[b].status || !s->ranks[b].msg[0]) break;
    if (hops == s->nprocs) { /* ranks blaming each other in a circle: keep the first */
      r = s->first_fail;
      break;
    }
    r = b;
  }
  s->cause = r;
  if (r == s->first_fail) return;
  char who[160];
  run_rank_name(s, r, who, sizeof who);
  s->error[0] = '\0';
  run_fail(s, "%s: %s", who, s->ranks[r].msg);
}

/* The run just failed: note, before anything is stopped, a rank of this
 * host whose process is stopped (the one stopped longest) or dead without
 * having reported, for run_blame().  Once. */
void run_note_culprit(serve_t *s) {
  if (s->noted) return;
  s->noted = 1;
  run_scan_states(s, 1);
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (ri->stopped_since &&
        (s->culprit < 0 || !s->ranks[s->culprit].stopped_since ||
         ri->stopped_since < s->ranks[s->culprit].stopped_since))
      s->culprit = r;
    else if (s->culprit < 0 && (ri->state == 0 || ri->state == 'Z' || ri->state == 'X'))
      s->culprit = r;
  }
}

/* A run that failed because a rank timed out waiting on a peer, or that
 * the watchdog failed, names first the process that caused it, when one
 * of this host was stopped or dead at the time:
 *   "rank 2 (worker, vm, pid 4242) is stopped (state T); rank 0 (server,
 *    vm, pid 4240): ps server 0 (rank 0): no PUSH for step 12 from ..."
 * (a healthy peer's message alone would lead with the healthy peer). */
void run_blame(serve_t *s) {
  if (s->culprit < 0 || !s->error[0] || (s->first_fail < 0 && !s->hung)) return;
  const rank_info_t *ri = &s->ranks[s->culprit];
  char who[160], what[64], pre[240];
  run_rank_name(s, s->culprit, who, sizeof who);
  if (!strncmp(s->error, who, strlen(who))) return; /* it is named first already */
  if (ri->stopped_since) snprintf(what, sizeof what, "is stopped (state %c)", ri->state);
  else if (ri->state) snprintf(what, sizeof what, "is dead (state %c)", ri->state);
  else snprintf(what, sizeof what, "is gone (no such process)");
  snprintf(pre, sizeof pre, "%s %s; ", who, what);
  size_t pl = strlen(pre), el = strlen(s->error);
  if (pl + el >= sizeof s->error) el = sizeof s->error - pl - 1;
  memmove(s->error + pl, s->error, el);
  memcpy(s->error, pre, pl);
  s->error[pl + el] = '\0';
}

/* Whom the failed rank that is the run's reason blames, from its DONE's
 * fields: run_info blame.rank ("rank 1 (worker, host, pid 4242)", for
 * people), blame.rank_number ("1", for programs: `sgdlab lab check`
 * reads it, never the text), blame.reason ("peer_timeout", "self", ...). */
int run_record_blame(const serve_t *s) {
  if (s->cause < 0) return SG_OK;
  const rank_info_t *ri = &s->ranks[s->cause];
  int blamed = ri->blamed >= 0 ? ri->blamed : s->cause;
  char who[160], num[16];
  run_rank_name(s, blamed, who, sizeof who);
  snprintf(num, sizeof num, "%d", blamed);
  SG_CHECK(sg_recorder_info(s->env->db, s->run_id, "blame.rank", who));
  SG_CHECK(sg_recorder_info(s->env->db, s->run_id, "blame.rank_number", num));
  return sg_recorder_info(s->env->db, s->run_id, "blame.reason",
                          sg_blame_name(ri->blamed >= 0 ? ri->reason : SG_BLAME_SELF));
}
