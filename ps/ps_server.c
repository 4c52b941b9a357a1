/* ps_server.c - one parameter server: its shard, its optimizer, its loop.
 *
 * The loop (all modes):
 *
 *     while some worker has not said DONE:
 *       probe(ANY source)             -> who sent how many bytes (deadline!)
 *       recv into that worker's push slot (sync) or the scratch buffer
 *       (simulated: one blocking recv into scratch, receive_blocking)
 *       (sliced over mpi: a receive posted per worker into the slot
 *       of its next slice, the first to complete, receive_posted)
 *       check the header against this shard; reject + count if bad
 *       PUSH: sync: keep; when all N are in: sum, scale 1/N, apply, release
 *             sync with slices: per slice, the same, and the slice goes
 *             back to every worker at once (the slices section below)
 *             ssp/async: scale 1/N, apply now, release what the bound allows
 *       PULL: hold it; release if the barrier / bound already allows
 *             (the initial PULLs: once every worker has sent its own)
 *       DONE: that worker no longer counts for barriers and bounds
 *
 * ssp/async end by the servers, not by a quota of steps per worker: the
 * shard stops once it has applied `target` updates (N x the sync step
 * count: one push is 1/N of a sync step, so the same samples) or the
 * time budget is spent.  From then on every PARAMS carries PS_F_STOP,
 * pushes still in flight are counted as dropped and not applied (so a
 * shard applies exactly `target` updates), and each worker says DONE.
 * The evaluating worker instead sends a FINAL pull, answered once every
 * worker is done or dead, so it evaluates the parameters after the last
 * update.  sync keeps its quota: every worker runs the same steps.
 *
 * The shard's parameters live right after a 64-byte header slot
 * (pbuf = [hdr | params]), so a dense PARAMS reply is sent straight from
 * the parameters without copying them.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "compress_half.h"
#include "err.h"
#include "msgbuf.h"
#include "ps.h"
#include "ps_proto.h"
#include "topk_select.h"

enum { REJECT_LOG_MAX = 5 };
#define PROBE_MIN_S 0.01 /* shortest probe wait: no spin on a deadline just reached */

typedef struct pending {
  int active;
  int64_t clock;
  double since;      /* sg_now() when the PULL arrived */
  int sparse;        /* sparse pull: values at idx[0..nnz) only */
  uint32_t *idx;     /* sparse: requested indices (copied) */
  uint64_t nnz;
} pending_t;

typedef struct server {
  sg_rank_ctx_t *ctx;
  const ps_cfg_t *cfg;
  int k, S, N;
  size_t off, cnt;        /* this shard */
  size_t cap;             /* largest valid message */
  unsigned char *pbuf;    /* [hdr | params[cnt]] */
  float *params;
  float *acc;             /* [cnt] summed / scaled gradient */
  float *wide;            /* compress fp16: [cnt] a push widened to float32 */
  size_t topk_k;          /* compress topk: most pairs a push may carry */
  unsigned char **slot;   /* [N] sync: worker w's push of the current step */
  unsigned char *scratch; /* every other message */
  unsigned char *sreply;  /* sparse: [hdr | values] */
  int *final;             /* [N] the held pull is a FINAL one */
  sg_optim_t *opt;
  int sparse_apply;       /* sparse pushes, plain SGD: update the pushed coordinates only */
  /* per worker */
  int *have;              /* sync: pushed the current step */
  int *done, *dead;
  int64_t *clock;         /* pushes received */
  int64_t *stale;         /* staleness of the last push, -1 none */
  double *heard;          /* sg_now() of the last valid message */
  pending_t *pend;
  int ndone;
  int64_t version;        /* updates applied */
  int npushed;            /* sync: pushes of the current step so far */
  int started;            /* every worker's initial PULL arrived (start barrier) */
  int quiet;              /* deadlines in a row in which every worker was silent */
  int64_t target;         /* ssp/async: updates to apply (N x sync steps) */
  int stopped;            /* ssp/async: target reached or budget spent */
  double t_start, t_stop; /* sg_now() at the start barrier / the stop */
  int ignored_stop;        /* workers still training a deadline after the stop */
  int64_t dropped;        /* pushes that arrived after the stop */
  /* accounting for the step records */
  int64_t rejected, max_ahead;
  int complete, max_lead;   /* sliced: slices all N pushed this step; the most a
                               push ran ahead of them (ps_window_lag) */
  char first_reject[200];
  double rec_t0, wait_s, comm_s, compute_s;
  uint64_t sent0, recv0;
  int64_t rec_step, spe;
  /* slices (sync, dense: ps_slicing > 0; docs/engines/ps.md) */
  int sliced, nsl;        /* slicing on; slices of this shard */
  size_t elems, stride;   /* floats per slice; bytes per slice message slot */
  size_t slot_bytes;      /* sync: a worker's slot, whole push or every slice */
  int *got, *applied;     /* [nsl] pushes of the current step; slice updated */
  int *next;              /* [N] the slice worker w pushes next */
  double *arrived;        /* [N * nsl] sg_now() when worker w's slice c came in */
  sg_optim_t **sopt;      /* [nsl] the optimizer of each slice */
  unsigned char *rep;     /* [nsl] [hdr | params slice] replies */
  sg_req_t **rreq;        /* [nsl * N] their sends */
  int posted;             /* sliced over mpi: a receive posted per worker (receive_posted) */
  sg_req_t **preq;        /* [N] posted: worker w's receive, into pslot[w] */
  unsigned char **pslot;  /* [N] posted: where preq[w] receives */
} server_t;

static int worker_rank(const server_t *s, int w) { return s->S + w; }

static const char *host_of(const server_t *s, int rank) {
  sg_comm_t *c = s->ctx->comm;
  return c->hosts ? c->hosts[rank] : "?";
}

static void reject(server_t *s, int src, const char *why) {
  s->rejected++;
  if (s->rejected == 1)
    snprintf(s->first_reject, sizeof s->first_reject, "from rank %d: %s", src, why);
  if (s->rejected <= REJECT_LOG_MAX)
    fprintf(stderr, "ps server %d (rank %d): rejected a message from rank %d: %s\n", s->k,
            s->ctx->rank, src, why);
}

/* One step record per sync step, or per N updates in ssp/async. */
static int flush_record(server_t *s) {
  sg_comm_t *c = s->ctx->comm;
  uint64_t sent = sg_comm_bytes_sent(c), recv = sg_comm_bytes_recvd(c);
  sg_step_rec_t r = {
      .step = s->rec_step,
      .epoch = (int32_t)(s->rec_step / s->spe),
      .t_start = s->rec_t0,
      .compute_s = s->compute_s,
      .comm_s = s->comm_s,
      .wait_s = s->wait_s,
      .bytes_sent = sent - s->sent0,
      .bytes_recv = recv - s->recv0,
      .loss = NAN,
      .staleness = -1,
  };
  s->sent0 = sent;
  s->recv0 = recv;
  s->rec_step++;
  s->rec_t0 = sg_records_elapsed(s->ctx->rec);
  s->compute_s = s->comm_s = s->wait_s = 0;
  return sg_records_step(s->ctx->rec, &r);
}

/* ssp/async: whether training is over (the target of updates reached or
 * the time budget spent); latches, so the servers' answer never flips. */
static int stopping(server_t *s) {
  if (s->cfg->mode == PS_SYNC || !s->started) return 0;
  if (s->stopped) return 1;
  double now = sg_now();
  if (s->version >= s->target ||
      (s->cfg->time_budget > 0 && now - s->t_start >= s->cfg->time_budget)) {
    s->stopped = 1;
    s->t_stop = now;
  }
  return s->stopped;
}

/* Whether worker w's held PULL may be answered now. */
static int may_release(server_t *s, int w) {
  const pending_t *p = &s->pend[w];
  if (s->final[w]) return s->ndone == s->N; /* after the last update */
  if (stopping(s)) return 1;                /* a STOP is never held */
  switch (s->cfg->mode) {
  case PS_SYNC:
    return s->version >= p->clock;
  case PS_SSP: {
    int64_t need = p->clock - s->cfg->staleness;
    for (int v = 0; v < s->N; v++)
      if (!s->done[v] && s->clock[v] < need) return 0;
    return 1;
  }
  case PS_ASYNC:
    return 1;
  }
  return 1;
}

static int reply_sliced(server_t *s, int w);

static int reply(server_t *s, int w) {
  if (s->sliced) return reply_sliced(s, w);
  pending_t *p = &s->pend[w];
  int sparse = p->sparse;
  unsigned char *buf = sparse ? s->sreply : s->pbuf;
  ps_hdr_t h;
  int stop = stopping(s);
  uint32_t flags = (sparse ? PS_F_SPARSE : 0) | (stop ? PS_F_STOP : 0);
  ps_hdr_init(&h, PS_PARAMS, s->k, flags, p->clock, s->version, s->off, sparse ? p->nnz : s->cnt);
  h.held_s = sg_now() - p->since;
  h.staleness = s->stale[w];
  memcpy(buf, &h, sizeof h);
  if (sparse) {
    float *v = (float *)(buf + sizeof h);
    for (uint64_t i = 0; i < p->nnz; i++) v[i] = s->params[p->idx[i]];
  }
  p->active = 0;
  s->final[w] = 0;
  /* How far ahead of the slowest worker still training w now runs (a STOP
   * is released past the bound, and nothing is computed on it). */
  int64_t slowest = INT64_MAX;
  for (int v = 0; v < s->N && !stop; v++)
    if (!s->done[v] && !s->dead[v] && s->clock[v] < slowest) slowest = s->clock[v];
  if (slowest != INT64_MAX && p->clock - slowest > s->max_ahead) s->max_ahead = p->clock - slowest;
  double t = sg_now();
  int rc = sg_send(s->ctx->comm, worker_rank(s, w), PS_TAG_REPLY, buf,
                   sizeof h + ps_payload_bytes(PS_PARAMS, h.flags, h.count));
  s->comm_s += sg_now() - t;
  return rc;
}

/* Start barrier: the initial PULLs are answered together once every live
 * worker has loaded its data and asked, so worker 0 starts the training
 * clock (ps_worker.c) with every worker ready to train; a worker declared
 * dead meanwhile is not waited for.  Returns whether training started. */
static int started(server_t *s) {
  if (s->started) return 1;
  for (int v = 0; v < s->N; v++)
    if (!s->done[v] && !s->dead[v] && !s->pend[v].active) return 0;
  s->started = 1;
  s->t_start = sg_now();
  /* the wait at the barrier was the server's, not their silence */
  for (int v = 0; v < s->N; v++) s->heard[v] = s->t_start;
  return 1;
}

/* Replies go out one at a time (blocking sends), starting at this shard's
 * own offset in the workers, k N / S: with every server starting at worker
 * 0, all S servers sent to the same worker at once and shared its link,
 * so S servers answered the N workers no sooner than one (a simulated
 * sync step with S = 2 took as long as with S = 1, docs/simulate.md). */
static int release_all(server_t *s) {
  if (!started(s)) return SG_OK;
  int base = (int)(((int64_t)s->k * s->N) / s->S);
  for (int i = 0; i < s->N; i++) {
    int w = (base + i) % s->N;
    if (s->pend[w].active && !s->dead[w] && may_release(s, w)) SG_CHECK(reply(s, w));
  }
  return SG_OK;
}

/* acc[i] += scale * g for one push (dense or sparse). */
static void add_push(server_t *s, const unsigned char *msg, float scale) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  float *restrict acc = s->acc;
  if (h.flags & PS_F_SPARSE) {
    const uint32_t *idx = (const uint32_t *)(msg + sizeof h);
    const float *val = (const float *)(msg + sizeof h + 4 * h.count);
    for (uint64_t i = 0; i < h.count; i++) acc[idx[i]] += scale * val[i];
  } else {
    const float *restrict g = (const float *)(msg + sizeof h);
    if (h.flags & PS_F_FP16) { /* halves on the wire, the sum in float32 */
      sg_f16_to_f32(s->wide, (const uint16_t *)(msg + sizeof h), s->cnt);
      g = s->wide;
    }
    for (size_t i = 0; i < s->cnt; i++) acc[i] += scale * g[i];
  }
}

/* acc = 0 (sparse pushes only touched their indices, but a dense clear is
 * what the dense apply needs anyway). */
static void clear_acc(server_t *s) { memset(s->acc, 0, s->cnt * sizeof *s->acc); }

/* The sparse path, for an optimizer with sg_optim_sparse_exact (plain
 * SGD: a coordinate moves only when its gradient is nonzero): the core
 * update at the pushed coordinates alone is the dense update exactly, in
 * O(pushed) instead of O(shard).  acc is all zeros between updates: each
 * coordinate is applied once (a coordinate in several pushes finds
 * acc[i] = 0 the second time, an update of 0) and zeroed again.  With
 * momentum or weight decay every coordinate moves every step; those runs
 * take the dense path (apply). */
static void apply_at(server_t *s, const unsigned char *msg, int64_t step) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  if (h.flags & PS_F_SPARSE) {
    const uint32_t *idx = (const uint32_t *)(msg + sizeof h);
    sg_optim_apply_at(s->opt, s->params, s->acc, idx, h.count, step);
    for (uint64_t j = 0; j < h.count; j++) s->acc[idx[j]] = 0.0f;
  } else {
    sg_optim_apply(s->opt, s->params, s->acc, step);
    clear_acc(s);
  }
}

static int apply(server_t *s, int64_t step) {
  double t = sg_now();
  sg_optim_apply(s->opt, s->params, s->acc, step);
  s->version++;
  s->compute_s += sg_now() - t;
  return SG_OK;
}

/* sync: the N-th push of the step is in. */
static int apply_sync_step(server_t *s) {
  double t = sg_now();
  float inv = 1.0f / (float)s->N;
  if (!s->sparse_apply) clear_acc(s);
  /* Worker order, not arrival order: the same seed gives the same bits. */
  for (int w = 0; w < s->N; w++) {
    add_push(s, s->slot[w], inv);
    if (w == 0 && s->cfg->plant_double_count) add_push(s, s->slot[w], inv);
  }
  if (s->sparse_apply) {
    for (int w = 0; w < s->N; w++) apply_at(s, s->slot[w], s->version);
    s->version++;
    s->compute_s += sg_now() - t;
  } else {
    s->compute_s += sg_now() - t;
    SG_CHECK(apply(s, s->version));
  }
  for (int w = 0; w < s->N; w++) s->have[w] = 0;
  s->npushed = 0;
  SG_CHECK(release_all(s));
  return flush_record(s);
}


/* ---- slices (sync, dense): docs/engines/ps.md "Slices" ------------------
 * Worker w's push of slice c is received straight into its slot at
 * c * stride ([hdr | floats] per slice).  Once all N pushed slice c the
 * server sums it in worker order, applies the slice's optimizer and sends
 * the slice back to every worker from that worker's own slot (the push
 * there is used up); the worker pushes slice c again only after it has
 * every slice of the step, and the send is waited for before that
 * receive (wait_reply).  So each element sees the same sums and update as
 * without slices, while the next slices' pushes come in. */

static size_t slice_n(const server_t *s, int c) {
  size_t lo = (size_t)c * s->elems;
  return s->cnt - lo < s->elems ? s->cnt - lo : s->elems;
}

static unsigned char *slot_at(const server_t *s, int w, int c) {
  return s->slot[w] + (size_t)c * s->stride;
}

/* A send of slices to worker w failed (a worker that takes nothing for a
 * deadline is gone): name the worker and the step, keep the blame. */
static int reply_fail(server_t *s, int w, int rc, int64_t clock) {
  char msg[300];
  snprintf(msg, sizeof msg, "%s", sg_err_msg());
  int why, blamed = sg_err_blamed(&why);
  if (blamed < 0) {
    blamed = worker_rank(s, w);
    why = SG_BLAME_PEER_TIMEOUT;
  }
  return sg_err_blame(sg_err_set(rc, "ps server %d (rank %d): worker rank %d (%s) took no PARAMS "
                                 "for step %lld: %s", s->k, s->ctx->rank, worker_rank(s, w),
                                 host_of(s, worker_rank(s, w)), (long long)clock, msg),
                      blamed, why);
}

/* The reply to worker w from its slot of slice c has gone (bounded). */
static int wait_reply(server_t *s, int w, int c) {
  sg_req_t **r = &s->rreq[(size_t)w * (size_t)s->nsl + (size_t)c];
  if (!*r) return SG_OK;
  int rc = sg_wait_within(s->ctx->comm, s->ctx->comm->deadline_s, r, NULL);
  return rc < 0 ? reply_fail(s, w, rc, s->version) : SG_OK;
}

/* Send slice c of the parameters to worker w as PARAMS(clock). */
static int send_slice(server_t *s, int w, int c, int64_t clock, double held) {
  size_t lo = (size_t)c * s->elems, n = slice_n(s, c);
  unsigned char *m = slot_at(s, w, c);
  SG_CHECK(wait_reply(s, w, c));
  ps_hdr_t h;
  ps_hdr_init(&h, PS_PARAMS, s->k, 0, clock, clock, s->off + lo, n);
  h.held_s = held;
  h.staleness = s->stale[w];
  memcpy(m, &h, sizeof h);
  memcpy(m + sizeof h, s->params + lo, n * sizeof(float));
  double t = sg_now();
  int rc = sg_isend(s->ctx->comm, worker_rank(s, w), PS_TAG_REPLY, m, sizeof h + n * sizeof(float),
                    &s->rreq[(size_t)w * (size_t)s->nsl + (size_t)c]);
  s->comm_s += sg_now() - t;
  return rc < 0 ? reply_fail(s, w, rc, clock) : SG_OK;
}

/* The initial pull of a sliced server: every slice, version 0. */
static int reply_sliced(server_t *s, int w) {
  double held = sg_now() - s->pend[w].since;
  for (int c = 0; c < s->nsl; c++) SG_CHECK(send_slice(s, w, c, s->pend[w].clock, held));
  s->pend[w].active = 0;
  return SG_OK;
}

/* Whether worker w's push of slice c of the current step is in its slot. */
static int pushed(const server_t *s, int w, int c) { return s->have[w] || s->next[w] > c; }

/* acc[0..n) += scale * the floats (or halves) of one slice push. */
static void add_slice(server_t *s, const unsigned char *msg, float *restrict acc, float *wide,
                      size_t n, float scale) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  const float *restrict g = (const float *)(msg + sizeof h);
  if (h.flags & PS_F_FP16) {
    sg_f16_to_f32(wide, (const uint16_t *)(msg + sizeof h), n);
    g = wide;
  }
  for (size_t i = 0; i < n; i++) acc[i] += scale * g[i];
}

/* All N pushed slice c (or N-1, planted): the step's update of the slice. */
static void update_slice(server_t *s, int c) {
  double t = sg_now();
  size_t lo = (size_t)c * s->elems, n = slice_n(s, c);
  float inv = 1.0f / (float)s->N, *acc = s->acc + lo, *wide = s->wide ? s->wide + lo : NULL;
  memset(acc, 0, n * sizeof *acc);
  for (int w = 0; w < s->N; w++) { /* worker order, as apply_sync_step */
    if (!pushed(s, w, c)) continue; /* only under plant_early_slice */
    add_slice(s, slot_at(s, w, c), acc, wide, n, inv);
    if (w == 0 && s->cfg->plant_double_count) add_slice(s, slot_at(s, w, c), acc, wide, n, inv);
  }
  sg_optim_apply(s->sopt[c], s->params + lo, acc, s->version);
  s->applied[c] = 1;
  s->compute_s += sg_now() - t;
}

/* Slice c, updated, to every worker: PARAMS(t+1) of that slice. */
static int reply_slice(server_t *s, int c) {
  double now = sg_now();
  for (int w = 0; w < s->N; w++) {
    if (s->done[w] || s->dead[w]) continue;
    double held = now - s->arrived[(size_t)w * (size_t)s->nsl + (size_t)c];
    SG_CHECK(send_slice(s, w, c, s->version + 1, held));
  }
  return SG_OK;
}

/* Every slice of the step pushed by all N and applied: the shard is at
 * the next version. */
static int finish_sliced_step(server_t *s) {
  for (int c = 0; c < s->nsl; c++)
    if (!s->applied[c] || s->got[c] < s->N) return SG_OK;
  s->version++;
  for (int c = 0; c < s->nsl; c++) s->got[c] = s->applied[c] = 0;
  for (int w = 0; w < s->N; w++) s->have[w] = 0;
  s->complete = 0;
  return flush_record(s);
}

/* A sync push of one slice, received into slot_at(w, next[w]). */
static int on_slice_push(server_t *s, int w, const ps_hdr_t *h, char *why, size_t wl) {
  int c = s->elems ? (int)((h->offset - s->off) / s->elems) : 0;
  if (s->have[w])
    return snprintf(why, wl, "PUSH for step %lld before step %lld was applied", (long long)h->clock,
                    (long long)s->version), SG_EPROTO;
  if (c != s->next[w])
    return snprintf(why, wl, "PUSH of slice %d of step %lld, expected slice %d", c,
                    (long long)h->clock, s->next[w]), SG_EPROTO;
  s->arrived[(size_t)w * (size_t)s->nsl + (size_t)c] = sg_now();
  /* Slices complete in order (each worker pushes them in order), so c
   * minus the complete ones is how far this push ran ahead. */
  if (c - s->complete > s->max_lead) s->max_lead = c - s->complete;
  s->stale[w] = s->version - h->version;
  if (++s->next[w] == s->nsl) {
    s->next[w] = 0;
    s->clock[w]++;
    s->have[w] = 1;
  }
  /* planted: the update before the last push is in (the replies still
   * wait for it, so only the values are wrong) */
  int need = s->N - (s->cfg->plant_early_slice && s->N > 1);
  if (++s->got[c] >= need && !s->applied[c]) update_slice(s, c);
  if (s->got[c] == s->N) {
    s->complete++;
    SG_CHECK(reply_slice(s, c));
  }
  return finish_sliced_step(s);
}

static int on_push(server_t *s, int w, const unsigned char *msg, char *why, size_t wl) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  if (s->done[w]) return snprintf(why, wl, "PUSH after DONE"), SG_EPROTO;
  if (h.clock != s->clock[w])
    return snprintf(why, wl, "PUSH for step %lld, expected step %lld", (long long)h.clock,
                    (long long)s->clock[w]),
           SG_EPROTO;
  if (h.version > s->version)
    return snprintf(why, wl, "PUSH computed on version %lld, server is at %lld",
                    (long long)h.version, (long long)s->version),
           SG_EPROTO;
  if (s->sliced) return on_slice_push(s, w, &h, why, wl);
  s->clock[w]++;
  s->stale[w] = s->version - h.version;
  if (s->cfg->mode == PS_SYNC) {
    s->have[w] = 1;
    if (++s->npushed == s->N) SG_CHECK(apply_sync_step(s));
    return SG_OK;
  }
  if (stopping(s)) {
    s->dropped++; /* in flight when the stop came: the shard applies exactly target */
    return release_all(s);
  }
  /* The schedule's step is the shard's progress in sync steps (N pushes
   * each), not the pusher's own count: a fast worker runs past the sync
   * step count, the shard's progress never does. */
  int64_t step = s->version / s->N;
  double t = sg_now();
  if (s->sparse_apply) {
    add_push(s, msg, 1.0f / (float)s->N);
    apply_at(s, msg, step);
    s->version++;
    s->compute_s += sg_now() - t;
  } else {
    clear_acc(s);
    add_push(s, msg, 1.0f / (float)s->N);
    s->compute_s += sg_now() - t;
    SG_CHECK(apply(s, step));
  }
  if (s->version % s->N == 0) SG_CHECK(flush_record(s));
  return release_all(s);
}

static int on_done(server_t *s, int w);

static int on_pull(server_t *s, int w, const unsigned char *msg, char *why, size_t wl) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  pending_t *p = &s->pend[w];
  if (s->done[w]) return snprintf(why, wl, "PULL after DONE"), SG_EPROTO;
  /* Not "after this server's stop": another shard may have stopped first. */
  if ((h.flags & PS_F_FINAL) && s->cfg->mode == PS_SYNC)
    return snprintf(why, wl, "FINAL pull in sync mode"), SG_EPROTO;
  if (p->active) return snprintf(why, wl, "second PULL while one is held"), SG_EPROTO;
  if (s->sliced && s->started)
    return snprintf(why, wl, "PULL to a sliced server after the start (its pushes ask for the "
                    "slices)"), SG_EPROTO;
  if (h.clock != s->clock[w])
    return snprintf(why, wl, "PULL for step %lld after %lld pushes", (long long)h.clock,
                    (long long)s->clock[w]),
           SG_EPROTO;
  p->active = 1;
  p->clock = h.clock;
  p->since = sg_now();
  /* Sparse workers pull sparse, except worker 0 when it evaluates. */
  p->sparse = (h.flags & PS_F_SPARSE) != 0;
  p->nnz = p->sparse ? h.count : 0;
  if (p->sparse) memcpy(p->idx, msg + sizeof h, 4 * h.count);
  if (h.flags & PS_F_FINAL) {
    s->final[w] = 1; /* answered by release_all once every worker is done */
    return on_done(s, w);
  }
  if (!s->started) return release_all(s); /* the start barrier (started) */
  return may_release(s, w) ? reply(s, w) : SG_OK;
}

static int on_done(server_t *s, int w) {
  if (s->done[w]) return SG_OK;
  s->done[w] = 1;
  s->ndone++;
  /* A finished worker no longer holds back the ssp bound. */
  return release_all(s);
}

/* async: a worker silent for a deadline is dead (the others go on). */
static int check_dead(server_t *s, double now) {
  double d = s->ctx->comm->deadline_s;
  for (int w = 0; w < s->N; w++) {
    if (s->done[w] || s->dead[w] || now - s->heard[w] <= d) continue;
    /* Held at the start barrier: waiting for a slower loader, not silent. */
    if (!s->started && s->pend[w].active) continue;
    char v[160];
    snprintf(v, sizeof v, "worker rank %d (%s) silent for %.1f s after %lld pushes",
             worker_rank(s, w), host_of(s, worker_rank(s, w)), now - s->heard[w],
             (long long)s->clock[w]);
    fprintf(stderr, "ps server %d: %s; training goes on without it\n", s->k, v);
    SG_CHECK(sg_records_info(s->ctx->rec, "ps.dead_worker", v));
    s->dead[w] = 1;
    s->ndone++;
  }
  return SG_OK;
}

/* ssp/async: a worker still training one deadline after the stop (it
 * keeps pushing and pulling, so it is never silent) has ignored every
 * STOP: the server is done with it, as with a dead worker, so that one
 * misbehaving worker cannot keep a finished run serving forever. */
static int check_ignored_stop(server_t *s) {
  if (!s->stopped || sg_now() - s->t_stop <= s->ctx->comm->deadline_s) return SG_OK;
  for (int w = 0; w < s->N; w++) {
    if (s->done[w] || s->dead[w]) continue;
    char v[160];
    snprintf(v, sizeof v, "worker rank %d (%s) still training %.1f s after the stop",
             worker_rank(s, w), host_of(s, worker_rank(s, w)), sg_now() - s->t_stop);
    fprintf(stderr, "ps server %d: %s; the run ends without it\n", s->k, v);
    SG_CHECK(sg_records_info(s->ctx->rec, "ps.ignored_stop", v));
    s->dead[w] = 1;
    s->ignored_stop++;
    s->ndone++;
  }
  return release_all(s); /* the FINAL pull, once every worker is done */
}

/* How long the next probe may wait.  async: until the deadline of the
 * live worker heard from longest ago, so that a silent worker is declared
 * dead one deadline after its last message even when nothing else
 * arrives (the other workers finished, or all wait on it at the start
 * barrier), not one more full deadline after the last message of anyone.
 * Other modes: the deadline. */
static double probe_wait(const server_t *s, double d) {
  if (s->cfg->mode != PS_ASYNC) return d;
  double now = sg_now(), wait = d;
  for (int w = 0; w < s->N; w++)
    if (!s->done[w] && !s->dead[w] && !(!s->started && s->pend[w].active) &&
        s->heard[w] + d - now < wait)
      wait = s->heard[w] + d - now;
  return wait < PROBE_MIN_S ? PROBE_MIN_S : wait;
}

/* The probe timed out: nothing arrived for a whole deadline (async: until
 * the first live worker's deadline, probe_wait). */
/* Sync: a worker that said DONE having pushed fewer steps than another
 * worker (a broken or hostile one; a sound one runs the quota) leaves a
 * step nobody can complete (sliced: fewer slices; the others wait on its
 * slices within the window).  Sets the error naming it and returns
 * SG_EPEER, or SG_OK when there is none. */
static int64_t pushed_units(const server_t *s, int w) { /* whole pushes, or slices */
  return s->sliced ? s->clock[w] * s->nsl + s->next[w] : s->clock[w];
}

static int sync_done_early(server_t *s) {
  if (s->cfg->mode != PS_SYNC) return SG_OK;
  int64_t most = 0;
  for (int w = 0; w < s->N; w++)
    if (pushed_units(s, w) > most) most = pushed_units(s, w);
  for (int w = 0; w < s->N; w++)
    if (s->done[w] && pushed_units(s, w) < most)
      return sg_err_blame(
          sg_err_set(SG_EPEER, "ps server %d (rank %d): worker rank %d (%s) said DONE after %lld "
                     "pushes, where step %lld needs every worker's push", s->k, s->ctx->rank,
                     worker_rank(s, w), host_of(s, worker_rank(s, w)), (long long)s->clock[w],
                     (long long)s->version), worker_rank(s, w), SG_BLAME_BAD_MESSAGE);
  return SG_OK;
}

static int on_silence(server_t *s) {
  sg_comm_t *c = s->ctx->comm;
  if (s->cfg->mode == PS_ASYNC) {
    /* whoever has been silent that long is dead; this server is done with
     * them, and the pulls the start barrier held for them go out */
    SG_CHECK(check_dead(s, sg_now()));
    return release_all(s);
  }
  SG_CHECK(sync_done_early(s));
  char names[256] = "";
  size_t len = 0;
  int missing = 0, first = -1;
  for (int w = 0; w < s->N; w++) {
    if (s->done[w] || s->dead[w]) continue;
    /* sync: those who did not push the current step; ssp: everyone still
     * training (they all went quiet). */
    if (s->cfg->mode == PS_SYNC && s->have[w]) continue;
    missing++;
    if (first < 0) first = worker_rank(s, w);
    if (len < sizeof names - 40)
      len += (size_t)snprintf(names + len, sizeof names - len, "%sworker rank %d (%s)",
                              missing > 1 ? ", " : "", worker_rank(s, w),
                              host_of(s, worker_rank(s, w)));
  }
  int live = 0;
  for (int w = 0; w < s->N; w++) live += !s->done[w] && !s->dead[w];
  if (missing == live && s->quiet++ == 0) {
    /* Every worker is silent: they are probably all waiting on another
     * server that died or hangs.  They will name it after 1.15 deadlines (deadline.h);
     * fail only after a second one, naming nobody in particular. */
    return SG_OK;
  }
  if (missing == live)
    return sg_err_set(SG_EPEER, "ps server %d (rank %d): no message from any of the %d workers "
                      "for %.1f s (at step %lld; a server they wait on may have failed)",
                      s->k, s->ctx->rank, live, 2 * c->deadline_s, (long long)s->version);
  if (s->cfg->mode == PS_SYNC)
    return sg_err_blame(sg_err_set(SG_EPEER, "ps server %d (rank %d): no PUSH for step %lld from %s "
                                   "within %.1f s", s->k, s->ctx->rank, (long long)s->version,
                                   names, c->deadline_s), first, SG_BLAME_PEER_TIMEOUT);
  return sg_err_blame(sg_err_set(SG_EPEER, "ps server %d (rank %d): nothing from %s within %.1f s "
                                 "(ssp bound %d)", s->k, s->ctx->rank, names, c->deadline_s,
                                 s->cfg->staleness), first, SG_BLAME_PEER_TIMEOUT);
}

/* Whether a message that passed ps_proto_check has the form this run's
 * settings give it: sparse only with sparse: true or as a topk push of at
 * most topk_k pairs (the indices are checked already), halves only as the
 * dense push of compress: fp16, which sends nothing else. */
static int form_matches(const server_t *s, const ps_hdr_t *h, char *why, size_t wl) {
  ps_compress_t c = s->cfg->compress;
  int push = h->type == PS_PUSH, sparse = (h->flags & PS_F_SPARSE) != 0;
  int fp16 = (h->flags & PS_F_FP16) != 0;
  if (push && c == PS_COMPRESS_TOPK) {
    if (!sparse) return snprintf(why, wl, "dense PUSH to a server with compress: topk"), 0;
    if (h->count > s->topk_k)
      return snprintf(why, wl, "topk PUSH of %llu pairs, shard %d takes at most %zu",
                      (unsigned long long)h->count, s->k, s->topk_k), 0;
    return 1;
  }
  if (sparse && !s->cfg->sparse)
    return snprintf(why, wl, "sparse message to a dense server (sparse: false)"), 0;
  if (push && fp16 != (c == PS_COMPRESS_FP16))
    return snprintf(why, wl, "%s PUSH to a server with compress: %s", fp16 ? "fp16" : "float32",
                    c == PS_COMPRESS_FP16 ? "fp16" : "none"), 0;
  return 1;
}

/* Where the probed message of worker w (-1: not a worker) goes: sync,
 * the worker's slot; with slices, the slot of the slice it pushes next,
 * once that slot's last reply has gone (nothing longer than a slice is
 * a valid push); anything else, scratch; too big for any valid message,
 * *drain (malloc'd), to take it off the queue and reject it.  *room: the
 * space there. */
static int choose_buf(server_t *s, int w, size_t bytes, unsigned char **buf, size_t *room,
                      unsigned char **drain) {
  *buf = s->scratch;
  *room = s->cap;
  if (bytes > s->cap) {
    if (!(*drain = malloc(bytes ? bytes : 1))) return SG_ENOMEM;
    *buf = *drain;
    *room = bytes;
    return SG_OK;
  }
  if (w < 0 || s->cfg->mode != PS_SYNC || s->have[w]) return SG_OK;
  if (!s->sliced) {
    *buf = s->slot[w];
    return SG_OK;
  }
  if (bytes > s->stride) return SG_OK;
  SG_CHECK(wait_reply(s, w, s->next[w]));
  *buf = slot_at(s, w, s->next[w]);
  *room = s->stride;
  return SG_OK;
}

#ifdef SG_SMPI
/* Under simulation (sgdlab-rank-smpi) an unsliced server takes the next
 * message with one blocking receive into scratch, and a push that goes
 * to its worker's slot trades places with it: the scratch buffer becomes
 * the slot and the old slot the scratch (both hold cap bytes, and an
 * unsliced slot is read only until its worker's next push).  A copy
 * instead would be charged as computation under executed compute, a
 * cost the server does not have outside simulation.  SimGrid 3.32 runs
 * MPI_Probe as a loop of MPI_Iprobe calls, each a switch into its
 * kernel and a sleep of smpi/iprobe times a count of failed calls that
 * every rank shares and any success resets: with 32 servers waiting at
 * once the simulator spent its time in their probes (256 workers still
 * in step 0 after 7 minutes).  A blocking receive is one wait in the
 * simulator.  The bytes on the wire are the same; a wait in a
 * simulation has no deadline anyway (core/transport_mpi.c).  A message
 * larger than scratch (no valid one is) fails the receive instead of
 * being drained and rejected: a simulation runs only this program's
 * ranks.  Sliced shards keep the probe: a slice's slot may be taken only
 * once its last reply has gone (choose_buf). */
static int receive_blocking(server_t *s, unsigned char **buf, sg_status_t *st) {
  double t = sg_now();
  SG_CHECK(sg_recv(s->ctx->comm, SG_ANY_SOURCE, SG_ANY_TAG, s->scratch, s->cap, st));
  s->wait_s += sg_now() - t;
  int w = st->source - s->S;
  unsigned char *drain = NULL;
  size_t room;
  SG_CHECK(choose_buf(s, w >= 0 && w < s->N ? w : -1, st->bytes, buf, &room, &drain));
  if (*buf != s->scratch) { /* a push for slot[w]: scratch becomes the slot */
    s->slot[w] = s->scratch;
    s->scratch = *buf;
    *buf = s->slot[w];
  }
  return SG_OK;
}
#endif

/* ---- posted receives (sliced, a transport with waitany: mpi) ----------
 * A sliced server keeps one receive posted per worker, into the slot of
 * the slice that worker pushes next (once that slot's last reply has
 * gone), and takes whichever completes first.  With a probe instead
 * (one message at a time, from whichever worker's came first) a push
 * sent under a rendezvous protocol (above the eager limit: SimGrid's
 * own thresholds, or a slice above an MPI library's eager limit) moved
 * only once its receive was posted, so the server's link carried one
 * push at a time, and with S >= 2 every server took the same worker's
 * push at once and shared that worker's link: S = 2 no faster than
 * S = 1 (docs/engines/ps.md, "Slices").  No receive is posted for a
 * worker whose initial PULL is held (the slices go out from its slots),
 * that pushed every slice of the step (its next message is the next
 * step's, after the replies), or that is done or dead.  Only workers
 * send to a server; a message from any other rank is never taken. */
static int post_receives(server_t *s) {
  for (int w = 0; w < s->N; w++) {
    if (s->preq[w] || s->done[w] || s->dead[w] || s->have[w] || s->pend[w].active) continue;
    SG_CHECK(wait_reply(s, w, s->next[w]));
    s->pslot[w] = slot_at(s, w, s->next[w]);
    int rc = sg_irecv(s->ctx->comm, worker_rank(s, w), SG_ANY_TAG, s->pslot[w], s->stride,
                      &s->preq[w]);
    if (rc < 0) return rc;
  }
  return SG_OK;
}

/* The next message of the posted path: *buf, *st as receive_next. */
static int receive_posted(server_t *s, unsigned char **buf, sg_status_t *st, int *handled) {
  sg_comm_t *c = s->ctx->comm;
  SG_CHECK(post_receives(s));
  int any = 0;
  for (int w = 0; w < s->N; w++) any |= s->preq[w] != NULL;
  if (!any) { /* every worker still training pushed the whole step, yet it is incomplete */
    SG_CHECK(sync_done_early(s));
    return sg_err_set(SG_EPROTO, "ps server %d (rank %d): step %lld incomplete with no worker "
                      "left to push it (%d of %d workers done)", s->k, s->ctx->rank,
                      (long long)s->version, s->ndone, s->N);
  }
  double t = sg_now();
  int i = -1, rc = sg_waitany_within(c, probe_wait(s, c->deadline_s), s->N, s->preq, &i, st);
  s->wait_s += sg_now() - t;
  if (rc == SG_ETIMEOUT) {
    sg_err_clear();
    *handled = 1;
    return on_silence(s);
  }
  if (rc == SG_ETRUNC && i >= 0) { /* taken off the queue by the failed receive */
    char why[96];
    snprintf(why, sizeof why, "larger than any valid message from a worker (%zu B)", s->stride);
    sg_err_clear();
    reject(s, worker_rank(s, i), why);
    *handled = 1;
    return SG_OK;
  }
  SG_CHECK(rc);
  *buf = s->pslot[i];
  return SG_OK;
}

/* The next message, received into choose_buf's buffer (*buf, *st).
 * *handled: it was dealt with here (a silence, or a message too large
 * for any valid one, drained and rejected); nothing left to do. */
static int receive_next(server_t *s, unsigned char **buf, sg_status_t *st, int *handled) {
  sg_comm_t *c = s->ctx->comm;
  double t = sg_now();
  *handled = 0;
  if (s->posted) return receive_posted(s, buf, st, handled);
#ifdef SG_SMPI
  if (!s->sliced) return receive_blocking(s, buf, st);
#endif
  int rc = sg_probe_within(c, probe_wait(s, c->deadline_s), SG_ANY_SOURCE, SG_ANY_TAG, st);
  s->wait_s += sg_now() - t;
  if (rc == SG_ETIMEOUT) {
    sg_err_clear();
    *handled = 1;
    return on_silence(s);
  }
  SG_CHECK(rc);
  int w = st->source - s->S;
  unsigned char *drain = NULL;
  size_t room;
  SG_CHECK(choose_buf(s, w >= 0 && w < s->N ? w : -1, st->bytes, buf, &room, &drain));
  t = sg_now();
  rc = sg_recv(c, st->source, st->tag, *buf, room, st);
  s->comm_s += sg_now() - t;
  if (rc < 0 || !drain) {
    free(drain);
    return rc;
  }
  char why[96];
  snprintf(why, sizeof why, "%zu B, larger than any valid message (%zu B)", st->bytes, s->cap);
  free(drain);
  reject(s, st->source, why);
  *handled = 1;
  return SG_OK;
}

static int serve_one(server_t *s) {
  sg_status_t st;
  unsigned char *buf = NULL;
  int handled, rc;
  SG_CHECK(receive_next(s, &buf, &st, &handled));
  if (handled) return SG_OK;
  int w = st.source - s->S;
  int is_worker = w >= 0 && w < s->N;
  char why[200] = "";
  if (!is_worker) {
    snprintf(why, sizeof why, "rank %d is not a worker", st.source);
    reject(s, st.source, why);
    return SG_OK;
  }
  if (st.tag != PS_TAG_REQ) {
    snprintf(why, sizeof why, "tag %d, requests use tag %d", st.tag, PS_TAG_REQ);
    reject(s, st.source, why);
    return SG_OK;
  }
  if (ps_proto_check_sliced(buf, st.bytes, s->k, s->off, s->cnt, s->sliced ? s->elems : s->cnt,
                            why, sizeof why) < 0) {
    sg_err_clear();
    reject(s, st.source, why);
    return SG_OK;
  }
  ps_hdr_t h;
  memcpy(&h, buf, sizeof h);
  if (!form_matches(s, &h, why, sizeof why)) {
    reject(s, st.source, why);
    return SG_OK;
  }
  if (s->dead[w]) {
    reject(s, st.source, "message from a worker already declared dead");
    return SG_OK;
  }
  s->heard[w] = sg_now();
  s->quiet = 0;
  switch (h.type) {
  case PS_PUSH: rc = on_push(s, w, buf, why, sizeof why); break;
  case PS_PULL: rc = on_pull(s, w, buf, why, sizeof why); break;
  case PS_DONE: rc = on_done(s, w); break;
  default: rc = SG_EPROTO; snprintf(why, sizeof why, "%s is not a request", ps_type_name(h.type));
  }
  if (rc == SG_EPROTO && why[0]) {
    reject(s, st.source, why);
    rc = SG_OK;
  }
  SG_CHECK(rc);
  if (s->cfg->mode == PS_ASYNC) {
    SG_CHECK(check_dead(s, s->heard[w]));
    SG_CHECK(release_all(s)); /* a FINAL pull may wait on the one just declared dead */
  }
  return SG_OK;
}

/* ssp/async: why and when training stopped, and who did the work. */
static int report_stop(server_t *s, double train_s) {
  char v[400];
  size_t len = (size_t)snprintf(v, sizeof v, "%lld updates of target %lld in %.3f s, %s; %lld dropped; pushes per worker:",
                                (long long)s->version, (long long)s->target, train_s,
                                s->version >= s->target ? "target reached" : s->stopped ? "time budget spent" : "workers ended",
                                (long long)s->dropped);
  for (int w = 0; w < s->N && len < sizeof v - 24; w++)
    len += (size_t)snprintf(v + len, sizeof v - len, " %lld", (long long)s->clock[w]);
  return sg_records_info(s->ctx->rec, "ps.stop", v);
}

/* Slicing for this shard (ps_slicing > 0): the geometry, the
 * per-slice state and an optimizer per slice (elementwise, so together
 * they are the shard's). */
static int slices_new(server_t *s, const sg_workload_t *wl) {
  uint64_t bytes = ps_slicing(s->cfg, sg_workload_nparams(wl));
  s->sliced = bytes > 0;
  s->elems = s->sliced ? ps_slice_elems(s->cnt, bytes) : s->cnt;
  s->nsl = ps_slice_count(s->cnt, s->elems);
  s->stride = sizeof(ps_hdr_t) + s->elems * sizeof(float);
  s->slot_bytes = s->cap > s->stride * (size_t)s->nsl ? s->cap : s->stride * (size_t)s->nsl;
  if (!s->sliced) return SG_OK;
  size_t N = (size_t)s->N, C = (size_t)s->nsl;
  /* the rank's own (calloc; only sg_fold_alloc folds, core/msgbuf.h):
   * N x nsl 8-byte entries pass 64 KiB (N = 32 at 64 MB's 486 slices),
   * and folded, the payloads written into the shared block overwrote the
   * requests (SIGSEGV in MPI_Wait) */
  if (!(s->got = calloc(C, sizeof *s->got)) ||
      !(s->applied = calloc(C, sizeof *s->applied)) ||
      !(s->next = calloc(N, sizeof *s->next)) ||
      !(s->arrived = calloc(N * C, sizeof *s->arrived)) ||
      !(s->rreq = calloc(N * C, sizeof *s->rreq)) ||
      !(s->sopt = calloc(C, sizeof *s->sopt)))
    return sg_err_set(SG_ENOMEM, "ps server %d: state of %zu slices", s->k, C);
  s->posted = sg_comm_has_waitany(s->ctx->comm);
  if (s->posted && (!(s->preq = calloc(N, sizeof *s->preq)) ||
                    !(s->pslot = calloc(N, sizeof *s->pslot))))
    return sg_err_set(SG_ENOMEM, "ps server %d: posted receives of %zu workers", s->k, N);
  for (int c = 0; c < s->nsl; c++)
    SG_CHECK(sg_optim_new(&s->sopt[c], s->ctx->opts, slice_n(s, c),
                          sg_workload_steps_per_epoch(wl), sg_workload_total_steps(wl)));
  return SG_OK;
}

/* Replies still in flight from the slots (a failed run): wait a little;
 * returns whether the slots may be freed. */
static int slices_drain(server_t *s) {
  int clear = 1;
  for (int w = 0; s->preq && w < s->N; w++) {
    if (!s->preq[w]) continue;
#ifdef SG_SMPI
    clear = 0; /* a simulated wait has no deadline (core/transport_mpi.c): keep the slot */
#else
    /* a receive still posted (a failed run): cancelled once its short wait ends */
    if (sg_wait_within(s->ctx->comm, 0.01, &s->preq[w], NULL) < 0) sg_err_clear();
    if (s->preq[w]) clear = 0;
#endif
  }
  free(s->pslot);
  if (clear) free(s->preq);
  for (size_t i = 0; s->rreq && i < (size_t)s->N * (size_t)s->nsl; i++) {
    if (s->rreq[i] && sg_wait_within(s->ctx->comm, 2.0, &s->rreq[i], NULL) < 0) {
      sg_err_clear();
      clear = 0; /* the transport may still read the slot: keep it */
    }
  }
  for (int c = 0; s->sopt && c < s->nsl; c++) sg_optim_destroy(&s->sopt[c]);
  free(s->sopt);
  free(s->got);
  free(s->applied);
  free(s->next);
  free(s->arrived);
  if (clear) free(s->rreq);
  return clear;
}

/* Frees the server; the error that ended a failed run stays the one set
 * (slices_drain's waits set and clear errors of their own: without
 * sg_err_save a sync server's "worker rank 4 said DONE after 1 pushes"
 * over mpi reached the harness as "peer failed", its text cleared). */
static void server_free(server_t *s) {
  sg_err_saved_t e;
  sg_err_save(&e);
  int clear = slices_drain(s);
  if (s->slot && clear)
    for (int w = 0; w < s->N; w++) sg_fold_free(s->slot[w]); /* framed (msgbuf.h) */
  if (s->pend)
    for (int w = 0; w < s->N; w++) free(s->pend[w].idx);
  if (clear) free(s->slot);
  free(s->pend);
  sg_fold_free(s->pbuf);
  sg_fold_free(s->acc);
  sg_fold_free(s->wide);
  sg_fold_free(s->scratch);
  free(s->sreply);
  free(s->have);
  free(s->done);
  free(s->dead);
  free(s->clock);
  free(s->stale);
  free(s->heard);
  free(s->final);
  sg_optim_destroy(&s->opt);
  sg_err_restore(&e);
}

/* The shard's buffers and per-worker state (0 or SG_ENOMEM). */
static int server_alloc(server_t *s) {
  const ps_cfg_t *cfg = s->cfg;
  const size_t hdr = sizeof(ps_hdr_t), N = (size_t)s->N;
  const size_t whole = hdr + (s->cnt + 1) * sizeof(float);
  if (!(s->pbuf = sg_msg_malloc_framed(whole, whole, hdr, cfg->fold))) return SG_ENOMEM;
  s->params = (float *)(s->pbuf + hdr);
  /* the per-worker state is the rank's own (calloc, core/msgbuf.h): pend
   * is 48 B a worker, 64 KiB from 1,366 workers; acc and wide are sums a
   * modeled run never reads, folded there (sg_fold_alloc) */
  if (!(s->acc = sg_fold_alloc((s->cnt + 1) * sizeof(float))) ||
      (cfg->compress == PS_COMPRESS_FP16 &&
       !(s->wide = sg_fold_alloc((s->cnt + 1) * sizeof(float)))) ||
      !(s->scratch = sg_msg_malloc_framed(s->cap, s->cap, hdr, cfg->fold)) ||
      (cfg->sparse && !(s->sreply = malloc(hdr + (s->cnt + 1) * sizeof(float)))) ||
      !(s->slot = calloc(N, sizeof *s->slot)) ||
      !(s->pend = calloc(N, sizeof *s->pend)) ||
      !(s->have = calloc(N, sizeof *s->have)) ||
      !(s->done = calloc(N, sizeof *s->done)) ||
      !(s->dead = calloc(N, sizeof *s->dead)) ||
      !(s->clock = calloc(N, sizeof *s->clock)) ||
      !(s->stale = calloc(N, sizeof *s->stale)) ||
      !(s->heard = calloc(N, sizeof *s->heard)) ||
      !(s->final = calloc(N, sizeof *s->final)))
    return SG_ENOMEM;
  for (int w = 0; w < s->N; w++) {
    if (cfg->mode == PS_SYNC &&
        !(s->slot[w] = sg_msg_malloc_framed(s->slot_bytes, s->sliced ? s->stride : s->slot_bytes,
                                            hdr, cfg->fold)))
      return SG_ENOMEM;
    if (cfg->sparse && !(s->pend[w].idx = malloc((s->cnt + 1) * 4))) return SG_ENOMEM;
    s->stale[w] = -1;
  }
  return SG_OK;
}

/* The shard's initial parameters (from the seed, as every rank makes
 * them), the schedule and the optimizer; server 0 records the setup. */
static int server_init(server_t *s, sg_workload_t *wl, size_t n) {
  const ps_cfg_t *cfg = s->cfg;
  float *full = sg_fold_alloc((n ? n : 1) * sizeof *full); /* a vector (msgbuf.h) */
  if (!full) return SG_ENOMEM;
  int rc = sg_workload_init_params(wl, full);
  if (rc == SG_OK) memcpy(s->params, full + s->off, s->cnt * sizeof(float));
  sg_fold_free(full);
  SG_CHECK(rc);
  s->spe = sg_workload_steps_per_epoch(wl);
  if (s->spe < 1) s->spe = 1;
  s->target = sg_workload_total_steps(wl) * s->N;
  SG_CHECK(sg_optim_new(&s->opt, s->ctx->opts, s->cnt, sg_workload_steps_per_epoch(wl),
                        sg_workload_total_steps(wl)));
  s->sparse_apply = cfg->sparse && sg_optim_sparse_exact(s->opt);
  clear_acc(s);
  if (s->k != 0) return SG_OK;
  char v[160];
  static const char *const comp[] = {"", ", push fp16", ", push topk"};
  snprintf(v, sizeof v, "%s, %d server(s), %d worker(s), %s%s", ps_mode_name(cfg->mode), s->S,
           s->N, !cfg->sparse ? "dense" : s->sparse_apply ? "sparse (sparse update)"
                                        : "sparse (dense update: momentum/weight decay)",
           comp[cfg->compress]);
  return sg_records_info(s->ctx->rec, "ps", v);
}

/* After the run: the rejected count in run_info, the stats for tests. */
static int server_report(server_t *s, double train_s) {
  const ps_cfg_t *cfg = s->cfg;
  char key[64], v[300];
  snprintf(key, sizeof key, "ps.server%d.rejected", s->k);
  snprintf(v, sizeof v, "%lld%s%s", (long long)s->rejected, s->rejected ? "; first " : "",
           s->first_reject);
  SG_CHECK(sg_records_info(s->ctx->rec, key, v));
  if (!cfg->stats) return SG_OK;
  int dead = 0;
  for (int w = 0; w < s->N; w++) dead += s->dead[w];
  cfg->stats[s->k] = (ps_server_stats_t){
      .rejected = s->rejected, .updates = s->version, .dropped = s->dropped,
      .train_s = train_s, .dead_workers = dead, .ignored_stop = s->ignored_stop,
      .max_ahead = s->max_ahead, .slices = s->nsl, .max_lead = s->max_lead};
  for (int w = 0; w < s->N && w < PS_STATS_WORKERS; w++) cfg->stats[s->k].pushes[w] = s->clock[w];
  memcpy(cfg->stats[s->k].first_reject, s->first_reject, sizeof s->first_reject);
  return SG_OK;
}

int ps_server_run(sg_rank_ctx_t *ctx, const ps_cfg_t *cfg) {
  server_t s = {.ctx = ctx, .cfg = cfg, .k = ctx->rank, .S = cfg->servers, .N = cfg->workers};
  sg_workload_t *wl = NULL;
  int rc;

  /* No data: a server needs the model's shape, the seed and the schedule. */
  SG_TRY(sg_workload_new(&wl, ctx->opts, 0, cfg->workers, 0));
  size_t n = sg_workload_nparams(wl);
  ps_shard_range(n, s.S, s.k, &s.off, &s.cnt);
  /* topk pushes are (index, value) pairs as sparse ones, at most topk_k */
  s.cap = sizeof(ps_hdr_t) + s.cnt * (cfg->sparse || cfg->compress == PS_COMPRESS_TOPK ? 8 : 4);
  s.topk_k = sg_topk_k(cfg->topk, s.cnt);
  SG_TRY(slices_new(&s, wl));
  SG_TRY(server_alloc(&s));
  SG_TRY(server_init(&s, wl, n));

  double now = sg_now();
  for (int w = 0; w < s.N; w++) s.heard[w] = now;
  s.rec_t0 = sg_records_elapsed(ctx->rec);
  s.sent0 = sg_comm_bytes_sent(ctx->comm);
  s.recv0 = sg_comm_bytes_recvd(ctx->comm);
  while (s.ndone < s.N) {
    SG_TRY(serve_one(&s));
    SG_TRY(check_ignored_stop(&s));
  }
  double train_s = (s.stopped ? s.t_stop : sg_now()) - s.t_start;
  if (s.k == 0 && cfg->mode != PS_SYNC) SG_TRY(report_stop(&s, train_s));
  SG_TRY(server_report(&s, train_s));
  rc = SG_OK;
fail:
  server_free(&s);
  sg_workload_destroy(&wl);
  return rc;
}
