/* transport_mpi.c - the point-to-point interface over MPI (Open MPI 4.1).
 *
 * Point-to-point only: every blocking call is a nonblocking MPI call plus a
 * test loop with the comm's deadline, because MPI's own blocking calls wait
 * forever for a dead or stopped peer.  The loop spins on MPI_Test for a
 * short while (latency) and then yields the core between tests
 * (sched_yield), which matters when ranks outnumber cores.
 *
 * Communicators: `user` (a dup of MPI_COMM_WORLD) carries the engines'
 * tags; `internal` (a second dup) carries the barrier and setup, so
 * SG_ANY_TAG on `user` can never take a barrier message.
 *
 * On a timeout a pending receive is cancelled (MPI_Cancel works for
 * receives); a pending send cannot be cancelled reliably in Open MPI, so it
 * is released with MPI_Request_free.  Open MPI may also end the whole job
 * itself when a process dies (mpirun sees the exit); either way no process
 * is left hanging.
 *
 * send() has MPI's standard-mode meaning: a large message may wait for
 * the matching receive (rendezvous protocol), where ZeroMQ's send returns
 * once queued.  Engines that both send and receive in a cycle must use
 * sendrecv or isend/irecv, which work on both.
 *
 * Copies per payload byte (Open MPI's shared-memory BTL on one host): small
 * messages go eagerly through a shared buffer (2 copies); large ones use
 * single-copy CMA (process_vm_readv) when the kernel permits, else 2.
 */
#include <limits.h>
#include "sg_mpi.h"
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "transport_impl.h"
#ifdef SG_SMPI
#include <xbt/config.h>
#include "msgbuf.h"
#include "share.h"
#else
#include <zmq.h>
#endif

#define MQ_SPINS 200 /* MPI_Test calls before yielding between tests */
/* MQ_BLOCKING: in a simulation (SG_SMPI, sgdlab-rank-smpi) a wait is
 * MPI_Wait / MPI_Probe, with no deadline: every MPI_Test would be one
 * switch to SimGrid's kernel (64 simulated ranks spent seconds of real
 * time per step polling), and SMPI itself ends a simulation whose ranks
 * all wait on each other (a deadlock); the harness's watchdog ends one
 * that hangs otherwise.  The deadline paths then never fire: a
 * simulation has no dead or stopped peers. */

/* Deferred sends (simulated only).  SimGrid 3.32 keeps every detached
 * send (SMPI's eager send: the sender goes on at once) in one list of the
 * whole simulation and takes each that ends out of it with a scan of the
 * list (CommImpl::finish): with all of them in flight together (ps with
 * S servers: 3 N S messages a step) a step cost O((N S)^2) of the
 * simulator's time.  With compute: modeled (_sim_defer,
 * harness/run/execute.c) every rank therefore lowers
 * smpi/send-is-detached-thresh to 1 byte after setup (SMPI checks the
 * thresholds only at its start, where the harness gives both
 * simulate.eager), and smpi/async-small-thresh stays at simulate.eager:
 * a message from 1 byte up to it is not detached, but its bytes still
 * leave at once, whether or not the receive is posted (SMPI's "small"
 * mailbox), and SimGrid keeps it in the sender's own list.  Such a send
 * would wait for its transfer; the transport keeps the eager behaviour:
 * a deferred send (mq_defers) moves from a staged copy of the buffer
 * (sg_share_stage, core/share.h), and its wait returns at once, as a
 * detached send's does.  Its request joins the rank's pending list and
 * is completed (MPI_Wait, which returns at once, then out of SimGrid's
 * list) by a later wait of the rank once SMPI has copied the message to
 * its receiver: completed before, SMPI 3.32 would free the request that
 * the receive still has to read.  Before its end a rank waits in
 * MPI_Barrier for all (SimGrid cancels an exiting rank's sends).
 * Nothing changes where the two thresholds are equal (compute: executed,
 * or simulate.eager simgrid). */
typedef struct mcomm {
  sg_comm_t base;
  MPI_Comm user, internal;
#ifdef SG_SMPI
  size_t defer_lo, defer_hi; /* a send of defer_lo <= bytes < defer_hi is deferred */
  struct mq_pending {
    MPI_Request r;
    void *copy;
  } *pend; /* deferred sends not yet completed */
  int npend, cap;
#endif
} mcomm_t;

enum { MQ_SEND = 1, MQ_RECV = 2 };

struct sg_req {
  MPI_Request r;
  int kind, peer, tag;
  int deferred; /* simulated: a deferred send, from copy */
  void *copy;
  size_t len;   /* send: bytes; recv: capacity */
};

/* This process called MPI_Init_thread (so sg_mpi_finalize must finalise);
 * process-wide by nature, like MPI's own state. */
static int mq_we_initialised;

static const struct sg_comm_ops mpi_ops;

static int mq_mpierr(const sg_comm_t *c, const char *call, int code) {
  char s[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(code, s, &n);
  return sg_err_set(SG_EIO, "rank %d (%s): %s: %s", c->rank,
                    c->hosts[c->rank], call, s);
}

static int mq_count(const sg_comm_t *c, size_t n, int *out) {
  if (n > INT_MAX)
    return sg_err_set(SG_ERANGE, "rank %d: message of %zu bytes exceeds MPI's "
                      "int count", c->rank, n);
  *out = (int)n;
  return 0;
}

/* What a request's completion (MPI error code e, status s) means: an
 * error (SG_ETRUNC for a receive longer than its buffer), or success with
 * st (recv) and the byte counters filled. */
static int mq_finish(mcomm_t *m, sg_req_t *q, int e, const MPI_Status *s, sg_status_t *st) {
  sg_comm_t *c = &m->base;
  if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS) {
    if (q->kind == MQ_RECV) {
      int cls = 0;
      MPI_Error_class(e, &cls);
      if (cls == MPI_ERR_TRUNCATE)
        return sg_err_set(SG_ETRUNC, "rank %d: message from rank %d (%s), "
                          "tag %d, is longer than the receive buffer of %zu "
                          "bytes", c->rank, s->MPI_SOURCE,
                          s->MPI_SOURCE >= 0 && s->MPI_SOURCE < c->size
                              ? c->hosts[s->MPI_SOURCE] : "?",
                          s->MPI_TAG, q->len);
    }
    return mq_mpierr(c, q->kind == MQ_RECV ? "MPI_Irecv" : "MPI_Isend", e);
  }
  if (q->kind == MQ_SEND) {
    c->sent[q->peer] += q->len;
    if (st) *st = (sg_status_t){c->rank, q->tag, q->len};
    return 0;
  }
  if (s->MPI_ERROR == MPI_ERR_TRUNCATE)
    return sg_err_set(SG_ETRUNC, "rank %d: message from rank %d (%s), tag %d, "
                      "is longer than the receive buffer of %zu bytes",
                      c->rank, s->MPI_SOURCE, c->hosts[s->MPI_SOURCE], s->MPI_TAG,
                      q->len);
  int n = 0;
  MPI_Get_count(s, MPI_BYTE, &n);
  c->recvd[s->MPI_SOURCE] += (uint64_t)n;
  if (st) *st = (sg_status_t){s->MPI_SOURCE, s->MPI_TAG, (size_t)n};
  return 0;
}

#ifdef SG_SMPI
/* a staged copy takes at most this many own parts of its message, else
 * all of it (sg_fold_private) */
#define MQ_STAGE_PARTS 8
static int mq_sim_defer; /* this rank: sg_mpi_sim_defer was called (2: planted) */
/* How many of this rank's deferred sends SMPI has copied and no wait has
 * completed yet (share.h).  The rank's own (SMPI privatizes this file's
 * globals per rank), not its comm's: a copy that SMPI makes after the comm
 * is gone (a message received after the closing barrier) counts here, not
 * in freed memory. */
static int mq_delivered;
void sg_mpi_sim_defer(int plant_early) { mq_sim_defer = plant_early ? 2 : 1; }

static int mq_defers(const mcomm_t *m, int kind, size_t len) {
  return kind == MQ_SEND && len >= m->defer_lo && len < m->defer_hi;
}

/* Deferred send q (staged copy `copy`) joins the pending list; its wait
 * is done. */
static int mq_pend(mcomm_t *m, sg_req_t *q, void *copy) {
  if (m->npend == m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    struct mq_pending *p = realloc(m->pend, (size_t)cap * sizeof *p);
    if (!p) return sg_err_set(SG_ENOMEM, "rank %d: no memory", m->base.rank);
    m->pend = p;
    m->cap = cap;
  }
  m->pend[m->npend++] = (struct mq_pending){q->r, copy};
  q->r = MPI_REQUEST_NULL;
  return 0;
}

/* Complete the pending sends that SMPI has copied to their receivers:
 * each MPI_Wait returns at once (its transfer has ended). */
static void mq_reap(mcomm_t *m) {
  for (int j = 0; j < m->npend && mq_delivered > 0;) {
    if (!sg_share_stage_done(m->pend[j].copy)) {
      j++;
      continue;
    }
    MPI_Wait(&m->pend[j].r, MPI_STATUS_IGNORE);
    sg_share_stage_free(m->pend[j].copy);
    mq_delivered--;
    m->pend[j] = m->pend[--m->npend];
  }
}
#endif

/* Complete one request within the deadline (from t0).  On success fills
 * st (recv) and the byte counters. */
static int mq_wait_one(mcomm_t *m, sg_req_t *q, double t0, sg_status_t *st) {
  sg_comm_t *c = &m->base;
  /* MPI_Test and MPI_Wait do not set MPI_ERROR on success (only the
   * multiple-completion calls do, with MPI_ERR_IN_STATUS): mq_finish
   * reads it, so it starts as success, never as the stack's leftovers */
  MPI_Status s = {.MPI_ERROR = MPI_SUCCESS};
  int flag = 0, spins = 0;
  for (;;) {
#ifdef SG_SMPI
    if (q->deferred && mq_sim_defer == 2) { /* tests only: completed at once */
      MPI_Wait(&q->r, &s);
      break;
    }
    if (q->deferred) { /* see "Deferred sends" */
      SG_CHECK(mq_pend(m, q, q->copy));
      break;
    }
    mq_reap(m);
    int e = MPI_Wait(&q->r, &s); /* simulated: see MQ_BLOCKING */
    flag = 1;
#else
    int e = MPI_Test(&q->r, &flag, &s);
#endif
    if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS) return mq_finish(m, q, e, &s, st);
    if (flag) break;
    if (++spins > MQ_SPINS) {
      if (sg_now() - t0 >= c->deadline_s) {
        if (q->kind == MQ_RECV) {
          MPI_Cancel(&q->r);
          MPI_Wait(&q->r, MPI_STATUS_IGNORE);
          return sg_comm_recv_timeout(c, q->peer, q->tag, sg_now() - t0);
        }
        MPI_Request_free(&q->r);
        return sg_comm_send_timeout(c, q->peer, q->tag, sg_now() - t0);
      }
      sched_yield();
    }
  }
  return mq_finish(m, q, MPI_SUCCESS, &s, st);
}

static int mq_post(mcomm_t *m, MPI_Comm comm, int kind, int peer, int tag,
                   void *buf, size_t len, sg_req_t *q) {
  int n = 0, e;
  SG_CHECK(mq_count(&m->base, len, &n));
  q->kind = kind;
  q->peer = peer;
  q->tag = tag;
  q->len = len;
  q->deferred = 0;
#ifdef SG_SMPI
  if (mq_defers(m, kind, len)) { /* see "Deferred sends" */
    size_t own[2 * MQ_STAGE_PARTS];
    int nown = sg_fold_private(buf, len, own, MQ_STAGE_PARTS);
    if (!(buf = q->copy = sg_share_stage(buf, len, own, nown, &mq_delivered)))
      return sg_err_set(SG_ENOMEM, "rank %d: no memory", m->base.rank);
    q->deferred = 1;
  }
#endif
  if (kind == MQ_SEND)
    e = MPI_Isend(buf, n, MPI_BYTE, peer, tag, comm, &q->r);
  else
    e = MPI_Irecv(buf, n, MPI_BYTE, peer == SG_ANY_SOURCE ? MPI_ANY_SOURCE
                  : peer, tag == SG_ANY_TAG ? MPI_ANY_TAG : tag, comm, &q->r);
  if (e != MPI_SUCCESS)
    return mq_mpierr(&m->base, kind == MQ_SEND ? "MPI_Isend" : "MPI_Irecv", e);
  return 0;
}

static int mpi_send_(sg_comm_t *c, int dst, int tag, const void *buf,
                     size_t len) {
  mcomm_t *m = (mcomm_t *)c;
  sg_req_t q;
  SG_CHECK(sg_comm_check_peer(c, "send", dst, 0));
  SG_CHECK(sg_comm_check_tag(c, "send", tag, 0));
  double t0 = sg_now();
  SG_CHECK(mq_post(m, m->user, MQ_SEND, dst, tag, (void *)buf, len, &q));
  SG_CHECK(mq_wait_one(m, &q, t0, NULL));
  return 0;
}

static int mpi_recv_(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
                     sg_status_t *st) {
  mcomm_t *m = (mcomm_t *)c;
  sg_req_t q;
  SG_CHECK(sg_comm_check_peer(c, "recv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "recv", tag, 1));
  double t0 = sg_now();
  SG_CHECK(mq_post(m, m->user, MQ_RECV, src, tag, buf, cap, &q));
  SG_CHECK(mq_wait_one(m, &q, t0, st));
  return 0;
}

static int mq_sendrecv(mcomm_t *m, MPI_Comm comm, int dst, int stag,
                       const void *sbuf, size_t slen, int src, int rtag,
                       void *rbuf, size_t rcap, sg_status_t *st) {
  sg_req_t rq, sq;
  double t0 = sg_now();
  SG_CHECK(mq_post(m, comm, MQ_RECV, src, rtag, rbuf, rcap, &rq));
  int rc = mq_post(m, comm, MQ_SEND, dst, stag, (void *)sbuf, slen, &sq);
  if (rc < 0) {
    MPI_Cancel(&rq.r);
    MPI_Wait(&rq.r, MPI_STATUS_IGNORE);
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  rc = mq_wait_one(m, &rq, t0, st);
  if (rc < 0) {
#ifdef SG_SMPI
    if (sq.deferred) /* never freed early (see "Deferred sends") */
      (void)mq_pend(m, &sq, sq.copy);
    else
#endif
      MPI_Request_free(&sq.r);
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  SG_CHECK(mq_wait_one(m, &sq, t0, NULL));
  return 0;
}

static int mpi_sendrecv_(sg_comm_t *c, int dst, int stag, const void *sbuf,
                         size_t slen, int src, int rtag, void *rbuf,
                         size_t rcap, sg_status_t *st) {
  mcomm_t *m = (mcomm_t *)c;
  SG_CHECK(sg_comm_check_peer(c, "sendrecv", dst, 0));
  SG_CHECK(sg_comm_check_tag(c, "sendrecv", stag, 0));
  SG_CHECK(sg_comm_check_peer(c, "sendrecv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "sendrecv", rtag, 1));
  SG_CHECK(mq_sendrecv(m, m->user, dst, stag, sbuf, slen, src, rtag, rbuf,
                       rcap, st));
  return 0;
}

static int mq_inew(mcomm_t *m, int kind, int peer, int tag, void *buf,
                   size_t len, sg_req_t **req) {
  *req = NULL;
  sg_req_t *q = malloc(sizeof *q);
  if (!q) return sg_err_set(SG_ENOMEM, "rank %d: no memory", m->base.rank);
  int rc = mq_post(m, m->user, kind, peer, tag, buf, len, q);
  if (rc < 0) {
    free(q);
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  *req = q;
  return 0;
}

static int mpi_isend_(sg_comm_t *c, int dst, int tag, const void *buf,
                      size_t len, sg_req_t **req) {
  SG_CHECK(sg_comm_check_peer(c, "isend", dst, 0));
  SG_CHECK(sg_comm_check_tag(c, "isend", tag, 0));
  SG_CHECK(mq_inew((mcomm_t *)c, MQ_SEND, dst, tag, (void *)buf, len, req));
  return 0;
}

static int mpi_irecv_(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
                      sg_req_t **req) {
  SG_CHECK(sg_comm_check_peer(c, "irecv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "irecv", tag, 1));
  SG_CHECK(mq_inew((mcomm_t *)c, MQ_RECV, src, tag, buf, cap, req));
  return 0;
}

static int mpi_wait_(sg_comm_t *c, sg_req_t **req, sg_status_t *st) {
  if (!req || !*req)
    return sg_err_set(SG_EINVAL, "wait: rank %d: no request", c->rank);
  int rc = mq_wait_one((mcomm_t *)c, *req, sg_now(), st);
  free(*req);
  *req = NULL;
  if (rc < 0) sg_err_trace_push(__FILE__, __LINE__);
  return rc;
}

/* The first of reqs[0..n) to complete (transport.h).  Real MPI: a test
 * of each in turn, as mq_wait_one's loop; a timeout leaves them posted.
 * Simulated: MPI_Waitany, one wait in the simulator (MQ_BLOCKING). */
static int mpi_waitany_(sg_comm_t *c, int n, sg_req_t **reqs, int *index, sg_status_t *st) {
  mcomm_t *m = (mcomm_t *)c;
  MPI_Status s = {.MPI_ERROR = MPI_SUCCESS}; /* as mq_wait_one */
  int e = MPI_SUCCESS, i = -1;
  *index = -1;
#ifdef SG_SMPI
  /* the rank's own, as every allocation but sg_fold_alloc's
   * (core/msgbuf.h): 8,192 requests or more were once folded */
  MPI_Request *rs = malloc((size_t)(n > 0 ? n : 1) * sizeof *rs);
  if (!rs) return sg_err_set(SG_ENOMEM, "waitany: rank %d: no memory", c->rank);
  for (int j = 0; j < n; j++) rs[j] = reqs[j] ? reqs[j]->r : MPI_REQUEST_NULL;
  /* a deferred send is done at once, the first in order, as SMPI's
   * MPI_Waitany takes a detached send (see "Deferred sends") */
  for (int j = 0; j < n && i < 0; j++)
    if (reqs[j] && reqs[j]->deferred) i = j;
  if (i >= 0) {
    free(rs);
    int rc = mq_pend(m, reqs[i], reqs[i]->copy);
    if (rc < 0) return rc;
  } else {
    mq_reap(m);
    e = MPI_Waitany(n, rs, &i, &s);
    free(rs);
  }
  if (i == MPI_UNDEFINED || i < 0) {
    if (e != MPI_SUCCESS) return mq_mpierr(c, "MPI_Waitany", e);
    return sg_err_set(SG_EINVAL, "waitany: rank %d: no request", c->rank);
  }
#else
  double t0 = sg_now();
  int any = 0, spins = 0;
  for (int j = 0; j < n; j++) any |= reqs[j] != NULL;
  if (!any) return sg_err_set(SG_EINVAL, "waitany: rank %d: no request", c->rank);
  for (;;) {
    int flag = 0;
    for (int j = 0; j < n && !flag; j++) {
      if (!reqs[j]) continue;
      e = MPI_Test(&reqs[j]->r, &flag, &s);
      if (e != MPI_SUCCESS && e != MPI_ERR_IN_STATUS) flag = 1;
      if (flag) i = j;
    }
    if (flag) break;
    if (++spins > MQ_SPINS) {
      if (sg_now() - t0 >= c->deadline_s)
        return sg_comm_recv_timeout(c, SG_ANY_SOURCE, SG_ANY_TAG, sg_now() - t0);
      sched_yield();
    }
  }
#endif
  *index = i;
  int rc = mq_finish(m, reqs[i], e, &s, st);
  free(reqs[i]);
  reqs[i] = NULL;
  if (rc < 0) sg_err_trace_push(__FILE__, __LINE__);
  return rc;
}

static int mpi_probe_(sg_comm_t *c, int src, int tag, sg_status_t *st) {
  mcomm_t *m = (mcomm_t *)c;
  SG_CHECK(sg_comm_check_peer(c, "probe", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "probe", tag, 1));
  double t0 = sg_now();
  int flag = 0, spins = 0;
  MPI_Status s;
  for (;;) {
#ifdef SG_SMPI
    int e = MPI_Probe(src == SG_ANY_SOURCE ? MPI_ANY_SOURCE : src,
                      tag == SG_ANY_TAG ? MPI_ANY_TAG : tag, m->user, &s);
    flag = 1;
#else
    int e = MPI_Iprobe(src == SG_ANY_SOURCE ? MPI_ANY_SOURCE : src,
                       tag == SG_ANY_TAG ? MPI_ANY_TAG : tag, m->user, &flag,
                       &s);
#endif
    if (e != MPI_SUCCESS) return mq_mpierr(c, "MPI_Iprobe", e);
    if (flag) break;
    if (++spins > MQ_SPINS) {
      if (sg_now() - t0 >= c->deadline_s)
        return sg_comm_recv_timeout(c, src, tag, sg_now() - t0);
      sched_yield();
    }
  }
  int n = 0;
  MPI_Get_count(&s, MPI_BYTE, &n);
  if (st) *st = (sg_status_t){s.MPI_SOURCE, s.MPI_TAG, (size_t)n};
  return 0;
}

/* Dissemination barrier on the internal communicator (same schedule as
 * the ZeroMQ one): round k sends to rank+2^k, receives from rank-2^k. */
static int mpi_barrier_(sg_comm_t *c) {
  mcomm_t *m = (mcomm_t *)c;
#ifdef SG_SMPI
  if (m->internal == MPI_COMM_WORLD) /* simulated (mpi_create_) */
  {
    int e = MPI_Barrier(MPI_COMM_WORLD);
    return e == MPI_SUCCESS ? 0 : mq_mpierr(c, "MPI_Barrier", e);
  }
#endif
  for (int k = 0, d = 1; d < c->size; k++, d <<= 1) {
    int to = (c->rank + d) % c->size, from = (c->rank - d + c->size) % c->size;
    SG_CHECK(mq_sendrecv(m, m->internal, to, k, NULL, 0, from,
                         k, NULL, 0, NULL));
  }
  return 0;
}

static void mpi_destroy_(sg_comm_t *c) {
  mcomm_t *m = (mcomm_t *)c;
  int fin = 0;
  MPI_Finalized(&fin);
#ifdef SG_SMPI
  if (!fin && m->defer_hi) { /* see "Deferred sends" */
    mq_reap(m);
    MPI_Barrier(MPI_COMM_WORLD);
    mq_reap(m); /* what is left is never received: left to the simulator */
  }
  free(m->pend);
#endif
  if (!fin) {
    if (m->user != MPI_COMM_NULL && m->user != MPI_COMM_WORLD) MPI_Comm_free(&m->user);
    if (m->internal != MPI_COMM_NULL && m->internal != MPI_COMM_WORLD)
      MPI_Comm_free(&m->internal);
  }
  sg_comm_free_common(c);
  free(m);
}

static const struct sg_comm_ops mpi_ops = {
    .name = "mpi",
    .send = mpi_send_,
    .recv = mpi_recv_,
    .sendrecv = mpi_sendrecv_,
    .isend = mpi_isend_,
    .irecv = mpi_irecv_,
    .wait = mpi_wait_,
    .probe = mpi_probe_,
    .waitany = mpi_waitany_,
    .barrier = mpi_barrier_,
    .destroy = mpi_destroy_,
};

int sg_comm_mpi_new(sg_comm_t **out, double deadline_s) {
  int rc, init = 0, rank = 0, size = 0, e = MPI_SUCCESS;
  *out = NULL;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    e = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (e != MPI_SUCCESS)
      return sg_err_set(SG_EIO, "MPI_Init_thread failed (code %d)", e);
    mq_we_initialised = 1;
  }
  mcomm_t *m = calloc(1, sizeof *m);
  if (!m) return sg_err_set(SG_ENOMEM, "mpi transport: no memory");
  m->user = m->internal = MPI_COMM_NULL;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  SG_TRY(sg_comm_init_common(&m->base, &mpi_ops, rank, size, deadline_s));
  sg_comm_hostname(m->base.hosts[rank]);
#ifdef SG_SMPI
  /* simulated: SMPI sets up every new communicator with a ring allgather
   * over all ranks (N^2 messages: 1024 ranks spent minutes in the two
   * dups before their first step), so the ranks talk on MPI_COMM_WORLD
   * itself and the barrier is MPI_Barrier (mpi_barrier_): the library's
   * collectives use tags no MPI_ANY_TAG receive takes */
  m->user = m->internal = MPI_COMM_WORLD;
  if (0) {
#else
  if ((e = MPI_Comm_dup(MPI_COMM_WORLD, &m->user)) != MPI_SUCCESS ||
      (e = MPI_Comm_dup(MPI_COMM_WORLD, &m->internal)) != MPI_SUCCESS) {
#endif
    rc = mq_mpierr(&m->base, "MPI_Comm_dup", e);
    goto fail;
  }
  MPI_Comm_set_errhandler(m->user, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(m->internal, MPI_ERRORS_RETURN);
  /* Host names, once, at setup (not on any engine's path). */
  e = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m->base.hosts, 64,
                    MPI_CHAR, m->internal);
  if (e != MPI_SUCCESS) {
    rc = mq_mpierr(&m->base, "MPI_Allgather of host names", e);
    goto fail;
  }
#ifdef SG_SMPI
  /* see "Deferred sends": from here on (setup as before) SMPI detaches
   * only empty sends and moves the others at once up to
   * smpi/async-small-thresh */
  int hi = sg_cfg_get_int("smpi/async-small-thresh");
  if (mq_sim_defer && hi > 1) {
    sg_share_stage_hook();
    sg_cfg_set_int("smpi/send-is-detached-thresh", 1); /* the whole simulation's */
    m->defer_lo = 1;
    m->defer_hi = (size_t)hi;
  }
#endif
  *out = &m->base;
  return 0;
fail:
  mpi_destroy_(&m->base);
  return rc;
}

void *sg_comm_mpi_handle(sg_comm_t *c) {
  if (!c || c->ops != &mpi_ops) return NULL;
  return &((mcomm_t *)c)->user;
}

#ifndef SG_SMPI
/* MPI_Init_thread (once), then the harness's rendezvous as a barrier:
 * every rank has returned from MPI_Init before this one sends an MPI
 * message.  Open MPI 4.1 goes on when a process manager's fence fails
 * (it does not check the fence's status), so a rank may leave MPI_Init
 * while a peer is still inside its first fence; an MPI message reaching
 * that peer before its PML has registered its receive handlers is
 * dispatched to a NULL callback by the TCP BTL (SIGSEGV in ompi_mpi_init,
 * seen under srun --mpi=pmix on a loaded machine). */
int sg_mpi_init_barrier(const char *rdv, int rank, int size, double deadline_s,
                        const struct sg_keys *keys) {
  int init = 0, provided = 0;
  MPI_Initialized(&init);
  if (!init) {
    int e = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (e != MPI_SUCCESS) return sg_err_set(SG_EIO, "MPI_Init_thread failed (code %d)", e);
    mq_we_initialised = 1;
  }
  if (!rdv || !rdv[0] || size < 2) return SG_OK;
  char host[64] = "?", (*eps)[SG_ENDPOINT_MAX] = calloc((size_t)size, sizeof *eps);
  char (*hosts)[64] = calloc((size_t)size, sizeof *hosts);
  void *z = zmq_ctx_new();
  int rc = eps && hosts && z ? SG_OK : sg_err_set(SG_ENOMEM, "MPI barrier: no memory");
  gethostname(host, sizeof host - 1);
  host[strcspn(host, " ")] = '\0';
  if (rc == SG_OK)
    rc = sg_rdv_exchange(z, rdv, rank, size, host[0] ? host : "?", "mpi", deadline_s, keys, eps,
                         hosts);
  if (z) zmq_ctx_term(z);
  free(eps);
  free(hosts);
  return rc;
}
#endif

void sg_mpi_finalize(void) {
  int fin = 0;
  MPI_Finalized(&fin);
  if (mq_we_initialised && !fin) MPI_Finalize();
}

int sg_mpi_available(void) { return 1; }
