/* ps_worker.c - one parameter-server worker.
 *
 * Step t (ps.h has the whole schedule):
 *
 *     delay (the on-purpose straggler), g = grad(params, t)     compute_s
 *     PUSH(k, t, g slice) and PULL(k, t+1) to every shard k,     comm_s
 *     PARAMS(k) from every shard k -> params slice               wait_s = time
 *                                         the servers held the pull (barrier/bound)
 *
 * Every message of the step is posted at once (isend, isend, irecv for all
 * shards) before waiting on any: a worker never sits in a blocking send
 * while a server wants to send to it, which over MPI's rendezvous protocol
 * could close a cycle (worker A -> server 1 -> worker B -> server 0 -> A).
 *
 * Worker 0 holds the full fresh parameters after every pull and evaluates
 * them through sg_trainlog; it also dumps the final ones (dump_params).
 * sync: every worker runs the quota of steps.  ssp/async: workers step
 * until a server answers STOP; worker 0 then sends a FINAL pull and
 * evaluates what it returns, the servers' parameters after the last
 * update, and places its evaluations by the servers' progress.
 * The servers answer the initial pull only when every worker has asked
 * for it (ps_server.c, start barrier), so the training clock, started
 * right after it, leaves out every worker's start-up.
 *
 * With `device: cuda` the worker keeps a device replica
 * (core/cuda/replica.h): the gradient is computed on the device and
 * staged down chunk by chunk as each push needs it, and the pulled
 * parameters are staged up after every exchange; the messages are built
 * and checked on the host copies exactly as without a device
 * (docs/cuda.md).  Dense only: sparse and topk are refused.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "compress_half.h"
#include "cuda/replica.h"
#include "deadline.h"
#include "err.h"
#include "msgbuf.h"
#include "ps.h"
#include "ps_proto.h"
#include "ps_sparse.h"
#include "topk_select.h"

typedef struct worker {
  sg_rank_ctx_t *ctx;
  const ps_cfg_t *cfg;
  int w, S, N;
  size_t n;
  float *params, *grad;
  size_t *off, *cnt;       /* [S] shard ranges */
  unsigned char **push;    /* [S] [hdr | g slice] or [hdr | idx | val] */
  unsigned char **pull;    /* [S] [hdr | idx] */
  unsigned char **rep;     /* [S] [hdr | values] */
  int64_t *ver;            /* [S] version of the params last pulled from k */
  int64_t *vpush;          /* [S] sliced: ver[k] when the step's pushes began (a
                              reply taken mid-step moves ver[k] on) */
  sg_req_t **req;          /* [3S] */
  ps_needs_t *needs[2];    /* sparse: coordinates of steps t and t+1 (alternating) */
  ps_needs_t *pushn, *pulln; /* of this exchange's push (step t) and pull (t+1) */
  float *gval;             /* sparse: gradient at pushn's coordinates */
  size_t gcap;
  float *resid, *mag;      /* compress topk: error feedback [n], selection scratch */
  sg_topk_pair_t *pairs;   /* compress topk: the selected pairs of one shard */
  int sliced;              /* sync, dense: shards go in slices (ps_slicing) */
  size_t *elems;           /* [S] floats per slice of shard k */
  int *nsl;                /* [S] slices of shard k */
  int *rbase;              /* [S] request of shard k's slice 0 reply */
  int npush, *ok, *osl;    /* sliced: pushes per step, their shard and slice (ps_push_order) */
  sg_replica_t *dev;       /* device: cuda (or the CPU twin's device): params and
                              gradient on the device; grad and params are the
                              staged host copies the messages read and fill */
  int stop;                /* ssp/async: a server answered with PS_F_STOP */
  int final;               /* the next pull is the FINAL one */
} worker_t;

static size_t hdrsz(void) { return sizeof(ps_hdr_t); }

static int pair_by_index(const void *a, const void *b) {
  uint32_t x = ((const sg_topk_pair_t *)a)->idx, y = ((const sg_topk_pair_t *)b)->idx;
  return (x > y) - (x < y);
}

/* compress: fp16 halves or topk pairs of shard k's gradient slice (the
 * slice gets the residual added: it is the accumulated gradient). */
static size_t build_compressed(worker_t *wk, int k, int64_t t) {
  ps_hdr_t h;
  unsigned char *m = wk->push[k];
  float *g = wk->grad + wk->off[k];
  size_t cnt = wk->cnt[k];
  if (wk->cfg->compress == PS_COMPRESS_FP16) {
    ps_hdr_init(&h, PS_PUSH, k, PS_F_FP16, t, wk->ver[k], wk->off[k], cnt);
    memcpy(m, &h, sizeof h);
    sg_f32_to_f16((uint16_t *)(m + sizeof h), g, cnt);
    return sizeof h + 2 * cnt;
  }
  /* topk: the server takes at most k pairs per shard, the same k here */
  size_t kk = sg_topk_k(wk->cfg->topk, cnt);
  sg_topk_select(g, wk->resid + wk->off[k], wk->mag, cnt, kk, wk->pairs);
  /* in index order: a server takes sparse indices only strictly increasing */
  qsort(wk->pairs, kk, sizeof *wk->pairs, pair_by_index);
  uint32_t *idx = (uint32_t *)(m + sizeof h);
  float *val = (float *)(m + sizeof h + 4 * kk);
  for (size_t j = 0; j < kk; j++) {
    idx[j] = wk->pairs[j].idx;
    val[j] = wk->pairs[j].val;
  }
  ps_hdr_init(&h, PS_PUSH, k, PS_F_SPARSE, t, wk->ver[k], wk->off[k], kk);
  memcpy(m, &h, sizeof h);
  return sizeof h + 8 * kk;
}

/* Fill push[k] with the gradient slice of shard k; returns message bytes. */
static size_t build_push(worker_t *wk, int k, int64_t t) {
  ps_hdr_t h;
  unsigned char *m = wk->push[k];
  const float *g = wk->grad ? wk->grad + wk->off[k] : NULL;
  size_t cnt = wk->cnt[k];
  if (wk->cfg->compress != PS_COMPRESS_NONE) return build_compressed(wk, k, t);
  if (!wk->cfg->sparse) {
    ps_hdr_init(&h, PS_PUSH, k, 0, t, wk->ver[k], wk->off[k], cnt);
    memcpy(m, &h, sizeof h);
    memcpy(m + sizeof h, g, cnt * sizeof(float));
    return sizeof h + cnt * sizeof(float);
  }
  if (!ps_needs_all(wk->pushn)) {
    /* The gradient exists at the step's coordinates only: push them all. */
    size_t first;
    uint64_t nnz = ps_needs_shard(wk->pushn, wk->off[k], cnt, (uint32_t *)(m + sizeof h), &first);
    memcpy(m + sizeof h + 4 * nnz, wk->gval + first, nnz * sizeof(float));
    ps_hdr_init(&h, PS_PUSH, k, PS_F_SPARSE, t, wk->ver[k], wk->off[k], nnz);
    memcpy(m, &h, sizeof h);
    return sizeof h + 8 * nnz;
  }
  /* Dense gradient: two passes: count the nonzeros, then write idx[] and val[] back to back. */
  uint64_t nnz = 0;
  for (size_t i = 0; i < cnt; i++) nnz += g[i] != 0.0f;
  uint32_t *idx = (uint32_t *)(m + sizeof h);
  float *val = (float *)(m + sizeof h + 4 * nnz);
  uint64_t j = 0;
  for (size_t i = 0; i < cnt; i++)
    if (g[i] != 0.0f) {
      idx[j] = (uint32_t)i;
      val[j++] = g[i];
    }
  ps_hdr_init(&h, PS_PUSH, k, PS_F_SPARSE, t, wk->ver[k], wk->off[k], nnz);
  memcpy(m, &h, sizeof h);
  return sizeof h + 8 * nnz;
}

/* Fill pull[k] for step `clock`: dense (the whole shard) or the needed
 * coordinates of shard k; returns message bytes. */
static size_t build_pull(worker_t *wk, int k, int64_t clock, int dense) {
  ps_hdr_t h;
  unsigned char *m = wk->pull[k];
  if (wk->final || dense || !wk->cfg->sparse || ps_needs_all(wk->pulln)) {
    ps_hdr_init(&h, PS_PULL, k, wk->final ? PS_F_FINAL : 0, clock, 0, wk->off[k], wk->cnt[k]);
    memcpy(m, &h, sizeof h);
    return sizeof h;
  }
  size_t first;
  uint64_t nnz = ps_needs_shard(wk->pulln, wk->off[k], wk->cnt[k], (uint32_t *)(m + sizeof h), &first);
  ps_hdr_init(&h, PS_PULL, k, PS_F_SPARSE, clock, 0, wk->off[k], nnz);
  memcpy(m, &h, sizeof h);
  return sizeof h + 4 * nnz;
}

/* What every PARAMS from shard k tells besides the values. */
static void note_reply(worker_t *wk, int k, const ps_hdr_t *h, double *held, int64_t *stale) {
  wk->ver[k] = h->version;
  if ((h->flags & PS_F_STOP) && !(wk->cfg->plant_ignore_stop && wk->w == 1)) wk->stop = 1;
  if (h->held_s > *held) *held = h->held_s;
  if (h->staleness > *stale) *stale = h->staleness;
}

/* Check PARAMS from shard k for `clock` and copy them into params. */
static int take_params(worker_t *wk, int k, size_t bytes, int64_t clock, double *held,
                       int64_t *stale) {
  char why[200];
  const unsigned char *m = wk->rep[k];
  if (ps_proto_check(m, bytes, k, wk->off[k], wk->cnt[k], why, sizeof why) < 0)
    return sg_err_blame(sg_err_set(SG_EPROTO, "ps worker %d: bad reply from server rank %d: %s",
                                   wk->w, k, why), k, SG_BLAME_BAD_MESSAGE);
  ps_hdr_t h;
  memcpy(&h, m, sizeof h);
  if (h.type != PS_PARAMS || h.clock != clock)
    return sg_err_blame(sg_err_set(SG_EPROTO, "ps worker %d: server rank %d sent %s for step %lld, "
                                   "expected PARAMS for %lld", wk->w, k, ps_type_name(h.type),
                                   (long long)h.clock, (long long)clock), k, SG_BLAME_BAD_MESSAGE);
  const float *v = (const float *)(m + sizeof h);
  ps_hdr_t ph;
  memcpy(&ph, wk->pull[k], sizeof ph);
  /* sparse values land at the pull's indices: a dense pull has none */
  if ((h.flags ^ ph.flags) & PS_F_SPARSE)
    return sg_err_set(SG_EPROTO, "ps worker %d: server rank %d sent %s PARAMS for a %s PULL", wk->w,
                      k, (h.flags & PS_F_SPARSE) ? "sparse" : "dense",
                      (ph.flags & PS_F_SPARSE) ? "sparse" : "dense");
  if (h.flags & PS_F_SPARSE) {
    const uint32_t *idx = (const uint32_t *)(wk->pull[k] + sizeof h);
    if (ph.count != h.count)
      return sg_err_blame(sg_err_set(SG_EPROTO, "ps worker %d: server rank %d sent %llu values for "
                                     "%llu indices", wk->w, k, (unsigned long long)h.count,
                                     (unsigned long long)ph.count), k, SG_BLAME_BAD_MESSAGE);
    float *p = wk->params + wk->off[k];
    for (uint64_t i = 0; i < h.count; i++) p[idx[i]] = v[i];
  } else {
    memcpy(wk->params + wk->off[k], v, wk->cnt[k] * sizeof(float));
  }
  note_reply(wk, k, &h, held, stale);
  return SG_OK;
}

/* Name the server in a transport error. */
static int peer_fail(worker_t *wk, int rc, int k, const char *what, int64_t clock) {
  char msg[400];
  snprintf(msg, sizeof msg, "%s", sg_err_msg());
  int why, blamed = sg_err_blamed(&why); /* the transport's blame, if it named one */
  if (blamed < 0) {
    blamed = k;
    why = rc == SG_ETIMEOUT ? SG_BLAME_PEER_TIMEOUT : SG_BLAME_PEER_CLOSED;
  }
  return sg_err_blame(sg_err_set(rc, "ps worker %d (rank %d): %s step %lld, server rank %d: %s",
                                 wk->w, wk->ctx->rank, what, (long long)clock, k, msg),
                      blamed, why);
}

/* How long a worker waits on a server: the server that misses a push
 * knows who is missing; it gets the first word because a worker waits on
 * a server that waits on workers, level 1 of deadline.h (ps.h, Failure). */
static double server_wait(const sg_comm_t *c) { return sg_deadline_factor(1, 0) * c->deadline_s; }

/* ---- slices (sync, dense; docs/engines/ps.md "Slices") -----------------
 * Shard k goes as nsl[k] PUSH messages of elems[k] floats (the last one
 * shorter), each [hdr | slice] at sl * slice_stride(k) of push[k]; the
 * server answers each slice with PARAMS(t+1) as soon as all N workers
 * pushed it, into the same place of rep[k].  No PULL after the first:
 * the step's pushes ask for the slices. */

static size_t slice_stride(const worker_t *wk, int k) { return hdrsz() + wk->elems[k] * sizeof(float); }

static size_t slice_len(const worker_t *wk, int k, int sl) {
  size_t lo = (size_t)sl * wk->elems[k];
  return wk->cnt[k] - lo < wk->elems[k] ? wk->cnt[k] - lo : wk->elems[k];
}

/* Fill the push of slice sl of shard k (float32, or halves with
 * compress: fp16); returns message bytes. */
static size_t build_slice(worker_t *wk, int k, int sl, int64_t t) {
  size_t lo = (size_t)sl * wk->elems[k], n = slice_len(wk, k, sl);
  unsigned char *m = wk->push[k] + (size_t)sl * slice_stride(wk, k);
  const float *g = wk->grad + wk->off[k] + lo;
  int fp16 = wk->cfg->compress == PS_COMPRESS_FP16;
  ps_hdr_t h;
  ps_hdr_init(&h, PS_PUSH, k, fp16 ? PS_F_FP16 : 0, t, wk->vpush[k], wk->off[k] + lo, n);
  memcpy(m, &h, sizeof h);
  if (fp16) sg_f32_to_f16((uint16_t *)(m + sizeof h), g, n);
  else memcpy(m + sizeof h, g, n * sizeof(float));
  return sizeof h + n * (fp16 ? 2 : 4);
}

/* Check PARAMS of slice sl of shard k for `clock` and copy it into params. */
static int take_slice(worker_t *wk, int k, int sl, size_t bytes, int64_t clock, double *held,
                      int64_t *stale) {
  char why[200];
  const unsigned char *m = wk->rep[k] + (size_t)sl * slice_stride(wk, k);
  if (ps_proto_check_sliced(m, bytes, k, wk->off[k], wk->cnt[k], wk->elems[k], why, sizeof why) < 0)
    return sg_err_blame(sg_err_set(SG_EPROTO, "ps worker %d: bad reply from server rank %d: %s",
                                   wk->w, k, why), k, SG_BLAME_BAD_MESSAGE);
  ps_hdr_t h;
  memcpy(&h, m, sizeof h);
  size_t at = wk->off[k] + (size_t)sl * wk->elems[k];
  if (h.type != PS_PARAMS || h.clock != clock || h.offset != at || (h.flags & PS_F_SPARSE))
    return sg_err_blame(sg_err_set(SG_EPROTO, "ps worker %d: server rank %d sent %s%s for step %lld "
                                   "at element %llu, expected PARAMS for %lld at %zu", wk->w, k,
                                   (h.flags & PS_F_SPARSE) ? "sparse " : "", ps_type_name(h.type),
                                   (long long)h.clock, (unsigned long long)h.offset,
                                   (long long)clock, at), k, SG_BLAME_BAD_MESSAGE);
  memcpy(wk->params + at, m + sizeof h, h.count * sizeof(float));
  note_reply(wk, k, &h, held, stale);
  return SG_OK;
}

/* Wait for the PARAMS of push j's slice (receive request rbase[k] + sl)
 * and take them. */
static int take_reply(worker_t *wk, int j, int64_t clock, double *held, int64_t *stale) {
  sg_comm_t *c = wk->ctx->comm;
  int k = wk->ok[j], sl = wk->osl[j], rc;
  sg_status_t st;
  if ((rc = sg_wait_within(c, server_wait(c), &wk->req[wk->rbase[k] + sl], &st)) < 0)
    return peer_fail(wk, rc, k, "waiting for PARAMS of", clock);
  return take_slice(wk, k, sl, st.bytes, clock, held, stale);
}

/* Post every slice's receive, then the pushes of step t in ps_push_order,
 * each once the PARAMS slice_window slices back are in (push), or the
 * first PULL of each shard (!push); wait for the sends, then take the
 * slices not yet taken. */
static int exchange_sliced(worker_t *wk, int push, int64_t t, int64_t clock, double *held,
                           int64_t *stale) {
  sg_comm_t *c = wk->ctx->comm;
  sg_req_t **r = wk->req;
  size_t nr = 0, ns;
  int rc, taken = 0, np = push ? wk->npush : wk->S;
  *held = 0;
  *stale = -1;
  for (int k = 0; k < wk->S; k++)
    for (int sl = 0; sl < wk->nsl[k]; sl++)
      if ((rc = sg_irecv(c, k, PS_TAG_REPLY, wk->rep[k] + (size_t)sl * slice_stride(wk, k),
                         slice_stride(wk, k), &r[nr++])) < 0)
        return peer_fail(wk, rc, k, "posting the receive of PARAMS for", clock);
  ns = nr;
  memcpy(wk->vpush, wk->ver, (size_t)wk->S * sizeof *wk->vpush);
  for (int j = 0; j < np; j++) {
    int k = push ? wk->ok[j] : j, sl = push ? wk->osl[j] : 0;
    while (push && ps_window_lag(j, wk->cfg->slice_window, wk->S) >= taken)
      SG_CHECK(take_reply(wk, taken++, clock, held, stale));
    unsigned char *m = push ? wk->push[k] + (size_t)sl * slice_stride(wk, k) : wk->pull[k];
    if (push && wk->dev) /* the slice's gradient on the host (staged down) */
      SG_CHECK(sg_replica_grad_until(wk->dev, wk->off[k] + (size_t)sl * wk->elems[k] +
                                                  slice_len(wk, k, sl)));
    size_t len = push ? build_slice(wk, k, sl, t) : build_pull(wk, k, clock, 1);
    if ((rc = sg_isend(c, k, PS_TAG_REQ, m, len, &r[nr++])) < 0)
      return peer_fail(wk, rc, k, push ? "sending PUSH of" : "sending PULL of", push ? t : clock);
  }
  for (int j = 0; j < np; j++) {
    int k = push ? wk->ok[j] : j;
    if ((rc = sg_wait_within(c, server_wait(c), &r[ns + (size_t)j], NULL)) < 0)
      return peer_fail(wk, rc, k, push ? "PUSH of" : "PULL of", push ? t : clock);
  }
  while (taken < wk->npush) SG_CHECK(take_reply(wk, taken++, clock, held, stale));
  return wk->dev ? sg_replica_put(wk->dev, wk->params) : SG_OK;
}

/* Push step t (when push) and pull the params for step `clock` from every
 * shard.  held/stale get the largest hold time and staleness reported. */
static int exchange(worker_t *wk, int push, int64_t t, int64_t clock, int dense_pull,
                    double *held, int64_t *stale) {
  sg_comm_t *c = wk->ctx->comm;
  int S = wk->S, rc = SG_OK;
  sg_req_t **rs = wk->req, **rp = wk->req + S, **rr = wk->req + 2 * S;
  if (wk->sliced) return exchange_sliced(wk, push, t, clock, held, stale);
  *held = 0;
  *stale = -1;
  for (int k = 0; k < S; k++)
    if ((rc = sg_irecv(c, k, PS_TAG_REPLY, wk->rep[k], hdrsz() + wk->cnt[k] * sizeof(float),
                       &rr[k])) < 0)
      return peer_fail(wk, rc, k, "posting the receive of PARAMS for", clock);
  /* Shards in turn from this worker's own, w S / N (the server that answers
   * it first, release_all in ps_server.c), each push sent before the next
   * starts: posted at once, every worker's pushes reached all S servers
   * together, each server took the same worker first, and S servers
   * shared that worker's link (S = 2 no faster than S = 1).  Every
   * receive is posted first, so no server's reply waits on this wait. */
  int first = (int)(((int64_t)wk->w * S) / wk->N);
  for (int j = 0; j < S; j++) {
    int k = (first + j) % S;
    if (push) {
      if (wk->dev) SG_CHECK(sg_replica_grad_until(wk->dev, wk->off[k] + wk->cnt[k]));
      size_t len = build_push(wk, k, t);
      if ((rc = sg_isend(c, k, PS_TAG_REQ, wk->push[k], len, &rs[k])) < 0)
        return peer_fail(wk, rc, k, "sending PUSH of", t);
    }
    size_t len = build_pull(wk, k, clock, dense_pull);
    if ((rc = sg_isend(c, k, PS_TAG_REQ, wk->pull[k], len, &rp[k])) < 0)
      return peer_fail(wk, rc, k, "sending PULL of", clock);
    if (push && j + 1 < S && (rc = sg_wait_within(c, server_wait(c), &rs[k], NULL)) < 0)
      return peer_fail(wk, rc, k, "PUSH of", t);
  }
  for (int k = 0; k < S; k++) {
    if (push && rs[k] && (rc = sg_wait_within(c, server_wait(c), &rs[k], NULL)) < 0)
      return peer_fail(wk, rc, k, "PUSH of", t);
    if ((rc = sg_wait_within(c, server_wait(c), &rp[k], NULL)) < 0)
      return peer_fail(wk, rc, k, "PULL of", clock);
  }
  for (int k = 0; k < S; k++) {
    sg_status_t st;
    if ((rc = sg_wait_within(c, server_wait(c), &rr[k], &st)) < 0)
      return peer_fail(wk, rc, k, "waiting for PARAMS of", clock);
    SG_CHECK(take_params(wk, k, st.bytes, clock, held, stale));
  }
  /* device: the pulled parameters up (dense: the whole vector) */
  return wk->dev ? sg_replica_put(wk->dev, wk->params) : SG_OK;
}

static int say_done(worker_t *wk, int64_t steps) {
  for (int k = 0; k < wk->S; k++) {
    ps_hdr_t h;
    ps_hdr_init(&h, PS_DONE, k, 0, steps, 0, 0, 0);
    int rc = sg_send(wk->ctx->comm, k, PS_TAG_REQ, &h, sizeof h);
    if (rc < 0) return peer_fail(wk, rc, k, "sending DONE after", steps);
  }
  return SG_OK;
}

/* ssp/async: training progress in sync steps, from the servers' update
 * counts (N pushes = one sync step); the least advanced shard counts. */
static int64_t progress(const worker_t *wk) {
  int64_t v = INT64_MAX;
  for (int k = 0; k < wk->S; k++)
    if (wk->ver[k] < v) v = wk->ver[k];
  return v / wk->N;
}

/* ssp/async, evaluating worker: evaluate when the servers' progress
 * crossed an eval period; a sparse worker first pulls everything. */
static int eval_by_progress(worker_t *wk, sg_trainlog_t *log, int64_t done) {
  if (!sg_trainlog_due_at(log, progress(wk))) return SG_OK;
  double held;
  int64_t stale;
  if (wk->cfg->sparse) SG_CHECK(exchange(wk, 0, done, done, 1, &held, &stale));
  return sg_trainlog_eval_at(log, progress(wk), wk->params);
}

/* ssp/async, evaluating worker: the FINAL pull (it counts as DONE) comes
 * back once every worker is done, with the parameters after the last
 * update; those are evaluated and dumped. */
static int final_params(worker_t *wk, sg_trainlog_t *log, int64_t steps) {
  double held;
  int64_t stale;
  wk->final = 1;
  int rc = exchange(wk, 0, steps, steps, 1, &held, &stale);
  wk->final = 0;
  SG_CHECK(rc);
  return sg_trainlog_end(log, progress(wk), wk->params);
}

static void worker_free(worker_t *wk) {
  for (int k = 0; k < wk->S; k++) {
    if (wk->push) sg_fold_free(wk->push[k]); /* framed (msgbuf.h) */
    if (wk->pull) free(wk->pull[k]);
    if (wk->rep) sg_fold_free(wk->rep[k]);
  }
  free(wk->push);
  free(wk->pull);
  free(wk->rep);
  free(wk->off);
  free(wk->cnt);
  free(wk->ver);
  free(wk->req);
  free(wk->elems);
  free(wk->nsl);
  free(wk->rbase);
  free(wk->vpush);
  free(wk->ok);
  free(wk->osl);
  sg_fold_free(wk->params);
  sg_fold_free(wk->grad);
  free(wk->gval);
  sg_fold_free(wk->resid);
  sg_fold_free(wk->mag);
  free(wk->pairs);
  ps_needs_destroy(&wk->needs[0]);
  ps_needs_destroy(&wk->needs[1]);
  sg_replica_destroy(&wk->dev);
}

/* Per shard: its range, its slices, and the push, pull and reply buffers
 * (a slice message each with slices); the requests of one exchange. */
static int buffers_new(worker_t *wk) {
  const ps_cfg_t *cfg = wk->cfg;
  size_t nreq = 3 * (size_t)wk->S;
  uint64_t bytes = ps_slicing(cfg, wk->n);
  wk->sliced = bytes > 0;
  for (int k = 0; k < wk->S; k++) {
    ps_shard_range(wk->n, wk->S, k, &wk->off[k], &wk->cnt[k]);
    wk->elems[k] = wk->sliced ? ps_slice_elems(wk->cnt[k], bytes) : wk->cnt[k];
    wk->nsl[k] = ps_slice_count(wk->cnt[k], wk->elems[k]);
    nreq += 2 * (size_t)wk->nsl[k];
    size_t cnt = wk->cnt[k] + 1, sliced = wk->sliced ? wk->nsl[k] * slice_stride(wk, k) : 0;
    int pairs = cfg->sparse || cfg->compress == PS_COMPRESS_TOPK;
    size_t push = hdrsz() + cnt * (pairs ? 8 : 4), rep = hdrsz() + cnt * 4;
    /* sliced: a frame per slice, [hdr | slice] at sl * slice_stride(k) */
    size_t frame = wk->sliced ? slice_stride(wk, k) : 0;
    push = push > sliced ? push : sliced;
    rep = rep > sliced ? rep : sliced;
    if (!(wk->push[k] = sg_msg_malloc_framed(push, frame ? frame : push, hdrsz(), cfg->fold)) ||
        !(wk->pull[k] = malloc(hdrsz() + (cfg->sparse ? cnt * 4 : 0))) ||
        !(wk->rep[k] = sg_msg_malloc_framed(rep, frame ? frame : rep, hdrsz(), cfg->fold)))
      return sg_err_set(SG_ENOMEM, "ps worker %d: buffers of shard %d", wk->w, k);
  }
  /* the rank's own (calloc; only sg_fold_alloc folds, core/msgbuf.h):
   * 2 x slices request pointers pass 64 KiB from 4,096 slices (64 MB in
   * 16 KiB slices), and folded, the other ranks' requests and payloads
   * overwrote this worker's */
  if (!(wk->req = calloc(nreq, sizeof *wk->req)))
    return sg_err_set(SG_ENOMEM, "ps worker %d: %zu requests", wk->w, nreq);
  int total = 0;
  for (int k = 0; k < wk->S; k++) wk->rbase[k] = total, total += wk->nsl[k];
  if (!(wk->ok = malloc((size_t)total * sizeof *wk->ok)) ||
      !(wk->osl = malloc((size_t)total * sizeof *wk->osl)))
    return sg_err_set(SG_ENOMEM, "ps worker %d: push order of %d slices", wk->w, total);
  wk->npush = ps_push_order(wk->S, wk->nsl, wk->ok, wk->osl);
  return SG_OK;
}

/* compress topk: the residual over the whole model (zero: nothing held
 * back yet) and scratch for the largest shard. */
static int topk_alloc(worker_t *wk) {
  size_t most = 1;
  for (int k = 0; k < wk->S; k++)
    if (wk->cnt[k] > most) most = wk->cnt[k];
  /* the residual and the magnitudes: vectors (the magnitudes read in the
   * burst that writes them), folded under compute: modeled (msgbuf.h) */
  wk->resid = sg_fold_alloc((wk->n + 1) * sizeof *wk->resid);
  wk->mag = sg_fold_alloc(most * sizeof *wk->mag);
  wk->pairs = malloc(most * sizeof *wk->pairs);
  if (!wk->resid || !wk->mag || !wk->pairs)
    return sg_err_set(SG_ENOMEM, "ps worker %d: topk buffers for %zu floats", wk->w, wk->n);
  return SG_OK;
}

/* Every buffer of the run; *sparse_grad: the gradient is computed at the
 * pushed coordinates only (no whole-model gradient buffer). */
static int worker_alloc(worker_t *wk, sg_workload_t *wl, int *sparse_grad) {
  const ps_cfg_t *cfg = wk->cfg;
  const size_t S = (size_t)wk->S;
  wk->n = sg_workload_nparams(wl);
  /* the parameters and the gradient: vectors nobody reads under compute:
   * modeled, folded there (core/msgbuf.h) */
  if (!(wk->params = sg_fold_alloc((wk->n + 1) * sizeof(float))) ||
      !(wk->off = calloc(S, sizeof *wk->off)) || !(wk->cnt = calloc(S, sizeof *wk->cnt)) ||
      !(wk->push = calloc(S, sizeof *wk->push)) || !(wk->pull = calloc(S, sizeof *wk->pull)) ||
      !(wk->rep = calloc(S, sizeof *wk->rep)) || !(wk->ver = calloc(S, sizeof *wk->ver)) ||
      !(wk->elems = calloc(S, sizeof *wk->elems)) || !(wk->nsl = calloc(S, sizeof *wk->nsl)) ||
      !(wk->rbase = calloc(S, sizeof *wk->rbase)) || !(wk->vpush = calloc(S, sizeof *wk->vpush)))
    return SG_ENOMEM;
  SG_CHECK(buffers_new(wk));
  if (cfg->compress == PS_COMPRESS_TOPK) SG_CHECK(topk_alloc(wk));
  if (cfg->sparse) {
    SG_CHECK(ps_needs_new(&wk->needs[0], wl, wk->ctx->opts));
    SG_CHECK(ps_needs_new(&wk->needs[1], wl, wk->ctx->opts));
  }
  /* The whole-model gradient buffer only where the gradient is dense. */
  *sparse_grad = cfg->sparse && !ps_needs_all(wk->needs[0]);
  if (!*sparse_grad && !(wk->grad = sg_fold_alloc((wk->n + 1) * sizeof(float)))) return SG_ENOMEM;
  return SG_OK;
}

/* device: cuda (or the twin's device): a replica of the parameters and
 * the gradient on the device.  Dense pushes only: sparse and topk select
 * on host vectors (refused before launch, ps_engine.c). */
static int worker_device(worker_t *wk, sg_workload_t *wl) {
  const ps_cfg_t *cfg = wk->cfg;
  const int on_dev = sg_workload_on_device(wl);
  if (!on_dev && !cfg->dev_twin) return SG_OK;
  if (cfg->sparse || cfg->compress == PS_COMPRESS_TOPK)
    return sg_err_set(SG_ECONFIG, "ps worker %d: device: cuda pushes dense gradients (none or "
                      "fp16); sparse: true and compress: topk need device cpu", wk->w);
  size_t chunk = cfg->dev_chunk ? cfg->dev_chunk : PS_DEV_CHUNK;
  if (chunk > wk->n && wk->n > 0) chunk = wk->n;
  sg_rdev_t dev;
  SG_CHECK(on_dev ? sg_cuda_rdev_new(&dev, chunk) : cfg->dev_twin(&dev, chunk, wk->w));
  SG_CHECK(sg_replica_new(&wk->dev, &dev, wk->n, wk->grad));
  wk->dev->plant = cfg->dev_plant;
  return SG_OK;
}

/* Step t's gradient: at the coordinates it pushes (sparse_grad, into
 * gval) or whole (grad). */
static int worker_grad(worker_t *wk, sg_workload_t *wl, int64_t t, int sparse_grad,
                       double *loss) {
  if (wk->dev) return sg_replica_grad(wk->dev, wl, t, loss);
  if (!sparse_grad) return sg_workload_grad(wl, wk->params, wk->grad, t, loss);
  size_t m;
  const uint32_t *idx = ps_needs_idx(wk->pushn, &m);
  if (m > wk->gcap) {
    float *g = realloc(wk->gval, (m + m / 4) * sizeof *g);
    if (!g) return sg_err_set(SG_ENOMEM, "ps worker %d: sparse gradient of %zu values", wk->w, m);
    wk->gval = g;
    wk->gcap = m + m / 4;
  }
  return sg_workload_grad_sparse(wl, wk->params, t, idx, m, wk->gval, loss);
}

/* One step: gradient, push and pull, the step record; an ssp/async
 * evaluating worker evaluates when the servers' progress says so. */
static int worker_step(worker_t *wk, sg_workload_t *wl, sg_trainlog_t *log, int64_t t,
                       int64_t total, int sparse_grad) {
  const ps_cfg_t *cfg = wk->cfg;
  sg_rank_ctx_t *ctx = wk->ctx;
  sg_comm_t *c = ctx->comm;
  const int sync = cfg->mode == PS_SYNC, evaluates = wk->w == 0;
  int64_t spe = sg_workload_steps_per_epoch(wl);
  if (spe < 1) spe = 1;
  sg_step_rec_t s = {.step = t, .epoch = (int32_t)(t / spe),
                     .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
  uint64_t sent0 = sg_comm_bytes_sent(c), recv0 = sg_comm_bytes_recvd(c);
  double t0 = sg_now(), held;
  int64_t stale;
  sg_engine_delay(ctx, t);
  wk->pushn = wk->needs[t % 2];
  wk->pulln = wk->needs[(t + 1) % 2];
  SG_CHECK(worker_grad(wk, wl, t, sparse_grad, &s.loss));
  double t1 = sg_now();
  s.compute_s = t1 - t0;
  /* sync: worker 0 pulls everything when it is about to evaluate, and
   * every worker at the end (no next batch to pull for). */
  int64_t done = t + 1;
  int last = sync && done == total;
  int dense = !cfg->sparse || last || (sync && sg_trainlog_due(log, t));
  if (cfg->sparse && !last) SG_CHECK(ps_needs_step(wk->pulln, done));
  SG_CHECK(exchange(wk, 1, t, done, dense, &held, &stale));
  double t2 = sg_now();
  s.wait_s = held < t2 - t1 ? held : t2 - t1;
  s.comm_s = (t2 - t1) - s.wait_s;
  s.bytes_sent = sg_comm_bytes_sent(c) - sent0;
  s.bytes_recv = sg_comm_bytes_recvd(c) - recv0;
  s.staleness = stale;
  SG_CHECK(sg_trainlog_step(log, &s, sync ? wk->params : NULL));
  if (!sync && evaluates) SG_CHECK(eval_by_progress(wk, log, done));
  return SG_OK;
}

int ps_worker_run(sg_rank_ctx_t *ctx, const ps_cfg_t *cfg) {
  worker_t wk = {.ctx = ctx, .cfg = cfg, .w = ctx->rank - cfg->servers, .S = cfg->servers,
                 .N = cfg->workers};
  sg_workload_t *wl = NULL;
  sg_trainlog_t *log = NULL;
  int evaluates = wk.w == 0, rc, sparse_grad = 0;
  /* read before training (options are not read while it runs) */
  int early = wk.w == wk.N - 1 && !strcmp(sg_opts_str_or(ctx->opts, "_plant_bug", ""),
                                         "ps-done-early");

  SG_TRY(sg_workload_new(&wl, ctx->opts, wk.w, wk.N, SG_WL_TRAIN | (evaluates ? SG_WL_TEST : 0)));
  int64_t total = sg_workload_total_steps(wl);
  SG_TRY(worker_alloc(&wk, wl, &sparse_grad));
  SG_TRY(worker_device(&wk, wl));
  if (evaluates) {
    SG_TRY(sg_records_info(ctx->rec, "workload", sg_workload_describe(wl)));
    SG_TRY(sg_records_info(ctx->rec, "blas", sg_blas_info()));
  }
  SG_TRY(sg_trainlog_new(&log, ctx, wl, evaluates));

  /* Initial parameters: the servers made them from the seed. */
  double held;
  int64_t stale;
  if (cfg->sparse) SG_TRY(ps_needs_step(wk.needs[0], 0));
  wk.pulln = wk.needs[0];
  SG_TRY(exchange(&wk, 0, 0, 0, evaluates || !cfg->sparse, &held, &stale));
  SG_TRY(sg_trainlog_begin(log, wk.params));

  /* sync: every worker runs the quota; ssp/async: until a server says stop.
   * Test only: _plant_bug = ps-done-early makes the last worker say DONE
   * after one step, which a sync server must name (a broken or hostile
   * worker: the step after can never be complete). */
  int sync = cfg->mode == PS_SYNC;
  int64_t t;
  for (t = 0; sync ? t < total && !(early && t == 1) : !wk.stop; t++)
    SG_TRY(worker_step(&wk, wl, log, t, total, sparse_grad));
  if (!sync && evaluates) SG_TRY(final_params(&wk, log, t));
  else SG_TRY(say_done(&wk, t));
  if (evaluates) SG_TRY(sg_engine_dump_params(ctx, wk.params, wk.n));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  worker_free(&wk);
  sg_workload_destroy(&wl);
  return rc;
}
