/* transport_zmq.c - the point-to-point interface over ZeroMQ (libzmq 4.3).
 *
 * Pieces: sockets, endpoints, CURVE and the checks of every arrival
 * (transport_zmq_sock.c), matching (transport_zmq_match.c), same-host
 * sends read by the receiver (transport_zmq_cma.c); this file: progress,
 * sending, requests, the interface, construction and destroy.  A message
 * is two frames: a header {src, tag, len, flags} and the payload.
 *
 * Progress.  There is no background thread: a call that waits takes
 * messages off the PULL socket one at a time with a blocking receive
 * (ZMQ_RCVTIMEO = the time left), which costs what a plain zmq_recv costs;
 * zmq_poll plus a nonblocking drain cost 2.5x the system calls per message.
 * A send that finds the peer's queue full (SNDHWM messages, default 16,
 * bounded on purpose) blocks for up to 1 ms, then drains its own PULL
 * socket while it waits (zmq_poll on both), so two ranks sending to each
 * other, or a ring of ranks in sendrecv, always progress; only a peer that
 * is in no transport call at all holds a sender back.
 *
 * Copies per payload byte:
 *   send()          1 memcpy into a zmq message (the call returns at once,
 *                   so zmq cannot keep pointing at the caller's buffer)
 *   isend/sendrecv  ipc, >= SG_ZMQ_CMA_MIN: 1 in all, the receiver's
 *                   process_vm_readv from the sender's buffer (below)
 *   isend/sendrecv  tcp/inproc, 0 for payloads >= SG_ZMQ_ZEROCOPY_MIN: zmq_msg_init_data
 *                   on the caller's buffer, which must stay valid until
 *                   wait() anyway; wait() returns when zmq releases it
 *                   (tcp/ipc: written to the kernel; inproc: the receiver
 *                   has copied it out)
 *   receive         1 memcpy from the zmq message into the caller's buffer
 *                   (zmq has no receive-into-user-buffer for messages)
 *   tcp/ipc add the kernel's two socket copies.
 * An unexpected inproc message that was sent zero-copy is copied out at
 * once (flag ZQ_ZEROCOPY), so its sender is never held back by a receive
 * that is posted late.
 *
 * Receive buffers: transport_zmq_sock.c (sg_zmq_malloc_keep).
 *
 * Shutdown.  ZMQ_LINGER is min(deadline, 2 s): enough for the last
 * messages to leave, and a dead peer cannot make destroy block longer.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "transport_zmq_cma.h"
#include "transport_zmq_match.h"
#include "transport_zmq_sock.h"

static const struct sg_comm_ops zmq_ops;

/* ---- receiving -------------------------------------------------------- */

/* Receive the rest of a message whose first frame was refused. */
static void zq_discard_rest(zcomm_t *z, int more) {
  while (more) {
    zmq_msg_t junk;
    zmq_msg_init(&junk);
    if (zmq_msg_recv(&junk, z->pull, 0) < 0) more = zmq_errno() == EINTR;
    else more = zmq_msg_more(&junk);
    zmq_msg_close(&junk);
  }
}

/* Receive one message from the PULL socket: flags 0 waits up to the
 * socket's ZMQ_RCVTIMEO, ZMQ_DONTWAIT not at all.  1 when a message was
 * taken (delivered, queued or dropped), 0 when none came in time. */
static int zq_recv_one(zcomm_t *z, int flags) {
  zmq_msg_t hdr, data;
  zmq_msg_init(&hdr);
  if (zmq_msg_recv(&hdr, z->pull, flags) < 0) {
    int e = zmq_errno();
    zmq_msg_close(&hdr);
    if (e == EAGAIN || e == EINTR) return 0;
    return sg_err_set(SG_EIO, "rank %d: zmq receive: %s", z->base.rank,
                      zmq_strerror(e));
  }
  zq_hdr_t h;
  int ok = zq_header_ok(z, &hdr, &h), more = zmq_msg_more(&hdr);
  zmq_msg_close(&hdr);
  if (!ok) {
    z->base.dropped++;
    zq_discard_rest(z, more);
    return 1;
  }
  zmq_msg_init(&data);
  /* The payload frame is already here: multipart messages are atomic. */
  while (zmq_msg_recv(&data, z->pull, 0) < 0) {
    if (zmq_errno() != EINTR) {
      zmq_msg_close(&data);
      return sg_err_set(SG_EIO, "rank %d: zmq receive from rank %d: %s",
                        z->base.rank, h.src, zmq_strerror(zmq_errno()));
    }
  }
  size_t want = h.flags & (ZQ_CMA | ZQ_ACK) ? sizeof(zq_cma_t) : h.len;
  if (zmq_msg_size(&data) != want || zmq_msg_more(&data)) {
    z->base.dropped++;
    zq_discard_rest(z, zmq_msg_more(&data));
    zmq_msg_close(&data);
    return 1;
  }
  if (h.flags & ZQ_ACK) zq_on_ack(z, h.src, &data);
  else if (h.flags & ZQ_CMA) SG_CHECK(zq_deliver_cma(z, &h, &data));
  else SG_CHECK(zq_deliver(z, h.src, h.tag, h.flags, &data));
  return 1;
}

/* Receive everything already waiting on the PULL socket (never blocks). */
static int zq_drain(zcomm_t *z) {
  int rc;
  if (z->acks) SG_CHECK(zq_flush_acks(z));
  while ((rc = zq_recv_one(z, ZMQ_DONTWAIT)) > 0) {}
  return rc;
}

/* Wait at most timeout_s for ONE message and take it.  A blocking receive
 * (ZMQ_RCVTIMEO) rather than zmq_poll and a drain: zmq_poll costs a
 * ZMQ_EVENTS check per call and a drain ends on a failing nonblocking
 * receive, each a poll(2) of zmq's mailbox, 2.5x the system calls of a
 * plain blocking zmq_recv per message at 1 MiB.  One message per call
 * also leaves the rest in zmq's pipe (RCVHWM), so a fast sender is held
 * back there instead of filling the unexpected queue. */
static int zq_progress(zcomm_t *z, double timeout_s) {
  if (z->acks) { /* retried every millisecond until their peers take them */
    SG_CHECK(zq_flush_acks(z));
    if (z->acks && timeout_s > 1e-3) timeout_s = 1e-3;
  }
  int ms = timeout_s <= 0 ? 0 : timeout_s > 1e6 ? 1000000000 : (int)(timeout_s * 1e3) + 1;
  if (ms != z->rcvtimeo_ms) {
    if (zmq_setsockopt(z->pull, ZMQ_RCVTIMEO, &ms, sizeof ms) != 0)
      return sg_err_set(SG_EIO, "rank %d: ZMQ_RCVTIMEO: %s", z->base.rank,
                        zmq_strerror(zmq_errno()));
    z->rcvtimeo_ms = ms;
  }
  int rc = zq_recv_one(z, 0);
  return rc < 0 ? rc : 0;
}

/* ---- sending ---------------------------------------------------------- */

/* Queue one frame to dst.  First a blocking send of at most
 * SG_ZMQ_SEND_BLOCK_MS (the push sockets' ZMQ_SNDTIMEO): the common wait,
 * a peer a little behind, costs what a plain zmq_send costs.  Past it the
 * peer may be waiting on us, so drain our own PULL socket while dst's
 * queue is full (zmq_poll on both).  On failure the frame is closed. */
static int zq_push_frame(zcomm_t *z, int dst, int tag, zmq_msg_t *m,
                         int more, double t0) {
  int flags = more ? ZMQ_SNDMORE : 0, blocked = 0;
  for (;;) {
    double left = t0 + z->base.deadline_s - sg_now();
    int nb = blocked || left * 1e3 < SG_ZMQ_SEND_BLOCK_MS;
    if (zmq_msg_send(m, z->push[dst], flags | (nb ? ZMQ_DONTWAIT : 0)) >= 0) return 0;
    int e = zmq_errno();
    if (e == EINTR) continue;
    if (e != EAGAIN) {
      zmq_msg_close(m);
      return sg_err_set(SG_EIO, "rank %d: zmq send to rank %d (%s): %s",
                        z->base.rank, dst, z->base.hosts[dst], zmq_strerror(e));
    }
    if (!nb) {
      blocked = 1;
      SG_CHECK(zq_drain(z));
      continue;
    }
    if (left <= 0) {
      zmq_msg_close(m);
      return sg_comm_send_timeout(&z->base, dst, tag, sg_now() - t0);
    }
    zmq_pollitem_t it[2] = {{.socket = z->push[dst], .events = ZMQ_POLLOUT},
                            {.socket = z->pull, .events = ZMQ_POLLIN}};
    if (zmq_poll(it, 2, (long)(left * 1e3) + 1) < 0 && zmq_errno() != EINTR)
      return sg_err_set(SG_EIO, "rank %d: zmq_poll: %s", z->base.rank,
                        zmq_strerror(zmq_errno()));
    if (it[1].revents & ZMQ_POLLIN) SG_CHECK(zq_drain(z));
  }
}

static void zq_release(void *data, void *hint) {
  (void)data;
  atomic_store_explicit((atomic_int *)hint, 1, memory_order_release);
}

/* Send (tag may be internal).  With zc (a request), the payload is sent
 * from buf without a copy and zc->released is set when zmq lets go. */
static int zq_send(zcomm_t *z, int dst, int tag, const void *buf, size_t len,
                   sg_req_t *zc) {
  sg_comm_t *c = &z->base;
  double t0 = sg_now();
  zmq_msg_t hm, dm;
  if (dst != c->rank && !z->push[dst])
    return sg_err_blame(sg_err_set(SG_EPEER, "rank %d: rank %d (%s) was given up on after "
                                   "an earlier timeout", c->rank, dst, c->hosts[dst]),
                        dst, SG_BLAME_PEER_CLOSED);
  c->sent[dst] += len;
  zq_hdr_t h = {.src = c->rank, .tag = tag, .len = len};
  if (zc && dst != c->rank && z->pid && z->pid[dst] && len >= SG_ZMQ_CMA_MIN) {
    if (zq_cma_frame(z, zc, buf, &dm)) goto nomem; /* dst reads buf itself */
    h.flags = ZQ_CMA;
  } else if (zc && dst != c->rank) {
    zc->zerocopy = 1;
    atomic_store(&zc->released, 0);
    if (zmq_msg_init_data(&dm, (void *)buf, len, zq_release, &zc->released))
      goto nomem;
    if (z->inproc) h.flags |= ZQ_ZEROCOPY;
  } else {
    if (zmq_msg_init_size(&dm, len) != 0) goto nomem;
    if (len) memcpy(zmq_msg_data(&dm), buf, len);
    if (dst == c->rank) return zq_deliver(z, dst, tag, 0, &dm);
  }
  if (zmq_msg_init_size(&hm, sizeof h) != 0) {
    zmq_msg_close(&dm);
    goto nomem;
  }
  memcpy(zmq_msg_data(&hm), &h, sizeof h);
  int rc = zq_push_frame(z, dst, tag, &hm, 1, t0);
  if (rc < 0) {
    zmq_msg_close(&dm);
    return rc;
  }
  /* The header is queued, so the payload frame joins it at once. */
  return zq_push_frame(z, dst, tag, &dm, 0, t0);
nomem:
  return sg_err_set(SG_ENOMEM, "rank %d: no memory for a %zu-byte message "
                    "to rank %d", c->rank, len, dst);
}

/* ---- requests --------------------------------------------------------- */

static sg_req_t *zq_req_new(int kind, int peer, int tag, void *buf,
                            size_t cap) {
  sg_req_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->kind = kind;
  r->peer = peer;
  r->tag = tag;
  r->buf = buf;
  r->cap = cap;
  return r;
}

/* A zero-copy send whose peer took nothing within the deadline: zmq still
 * points at the caller's buffer, which the caller may free once we return.
 * Close the socket to that peer without linger so zmq drops the message,
 * and wait (bounded) for the release; the peer is given up on.  Known
 * weakness: over inproc a peer thread that is stuck holds the message, so
 * the release may not come within the bound; the caller should then treat
 * the comm as broken and keep the buffer until it destroys the comm. */
static void zq_abandon_peer(zcomm_t *z, sg_req_t *r) {
  int zero = 0;
  if (r->cma) zq_cma_forget(z, r); /* zmq holds nothing; the reader may still read */
  zmq_setsockopt(z->push[r->peer], ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(z->push[r->peer]);
  z->push[r->peer] = NULL;
  double t0 = sg_now();
  while (!atomic_load(&r->released) && sg_now() - t0 < 2.0) sched_yield();
}

static int zq_wait_req(zcomm_t *z, sg_req_t *r, sg_status_t *st) {
  double t0 = sg_now();
  int spins = 0;
  if (r->kind == ZQ_SEND) {
    while (r->zerocopy &&
           !atomic_load_explicit(&r->released, memory_order_acquire)) {
      double left = t0 + z->base.deadline_s - sg_now();
      if (left <= 0) {
        zq_abandon_peer(z, r);
        return sg_comm_send_timeout(&z->base, r->peer, r->tag, sg_now() - t0);
      }
      /* CMA: the release is a message.  Otherwise no fd tells us of it:
       * spin briefly, then poll in 1 ms slices, draining arrivals
       * meanwhile (the peer may wait on us). */
      if (r->cma) {
        SG_CHECK(zq_progress(z, left));
      } else if (++spins < 2000) {
        SG_CHECK(zq_drain(z));
        sched_yield();
      } else {
        SG_CHECK(zq_progress(z, left < 1e-3 ? left : 1e-3));
      }
    }
    if (st) *st = r->st;
    if (r->cma_err)
      return sg_err_set(SG_EIO, "rank %d: rank %d (%s) could not read a %zu-byte message from "
                        "this process: %s", z->base.rank, r->peer, z->base.hosts[r->peer],
                        r->st.bytes, strerror(r->cma_err));
    return 0;
  }
  while (!r->done) {
    double left = t0 + z->base.deadline_s - sg_now();
    if (left <= 0) {
      zq_unpost(z, r);
      return sg_comm_recv_timeout(&z->base, r->peer, r->tag, sg_now() - t0);
    }
    /* On any error the request leaves the posted list: it may live on the
     * caller's stack (recv, sendrecv), and destroy frees what is posted. */
    int rc = zq_progress(z, left);
    if (rc < 0) {
      zq_unpost(z, r);
      sg_err_trace_push(__FILE__, __LINE__);
      return rc;
    }
  }
  if (st) *st = r->st;
  if (r->cma_err) /* its read failed while another call waited */
    return zq_cma_read_failed(z, r->st.source, r->st.bytes, r->cma_err);
  if (r->trunc)
    return sg_comm_trunc(&z->base, r->st.source, r->st.tag, r->st.bytes,
                         r->cap);
  return 0;
}

/* ---- the interface ---------------------------------------------------- */

static int zmq_send_(sg_comm_t *c, int dst, int tag, const void *buf,
                     size_t len) {
  SG_CHECK(sg_comm_check_peer(c, "send", dst, 0));
  SG_CHECK(sg_comm_check_tag(c, "send", tag, 0));
  SG_CHECK(zq_send((zcomm_t *)c, dst, tag, buf, len, NULL));
  return 0;
}

static int zq_recv_any(zcomm_t *z, int src, int tag, void *buf, size_t cap,
                       sg_status_t *st) {
  sg_req_t r = {.kind = ZQ_RECV, .peer = src, .tag = tag, .buf = buf,
                .cap = cap};
  zq_post_recv(z, &r);
  return zq_wait_req(z, &r, st);
}

static int zmq_recv_(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
                     sg_status_t *st) {
  SG_CHECK(sg_comm_check_peer(c, "recv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "recv", tag, 1));
  SG_CHECK(zq_recv_any((zcomm_t *)c, src, tag, buf, cap, st));
  return 0;
}

static int zmq_isend_(sg_comm_t *c, int dst, int tag, const void *buf,
                      size_t len, sg_req_t **req) {
  zcomm_t *z = (zcomm_t *)c;
  *req = NULL;
  SG_CHECK(sg_comm_check_peer(c, "isend", dst, 0));
  SG_CHECK(sg_comm_check_tag(c, "isend", tag, 0));
  sg_req_t *r = zq_req_new(ZQ_SEND, dst, tag, (void *)buf, len);
  if (!r) return sg_err_set(SG_ENOMEM, "rank %d: no memory", c->rank);
  r->st.source = c->rank;
  r->st.tag = tag;
  r->st.bytes = len;
  int zc = len >= SG_ZMQ_ZEROCOPY_MIN && dst != c->rank;
  int rc = zq_send(z, dst, tag, buf, len, zc ? r : NULL);
  if (rc < 0) {
    if (r->cma) zq_cma_forget(z, r);
    else if (r->zerocopy && !atomic_load(&r->released)) zq_abandon_peer(z, r);
    free(r);
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  r->snext = z->live; /* a caller that fails before its wait leaves it to destroy */
  z->live = r;
  *req = r;
  return 0;
}

static int zmq_irecv_(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
                      sg_req_t **req) {
  *req = NULL;
  SG_CHECK(sg_comm_check_peer(c, "irecv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "irecv", tag, 1));
  sg_req_t *r = zq_req_new(ZQ_RECV, src, tag, buf, cap);
  if (!r) return sg_err_set(SG_ENOMEM, "rank %d: no memory", c->rank);
  zq_post_recv((zcomm_t *)c, r);
  r->snext = ((zcomm_t *)c)->live; /* posted, or completed and not waited for */
  ((zcomm_t *)c)->live = r;
  *req = r;
  return 0;
}

static int zmq_wait_(sg_comm_t *c, sg_req_t **req, sg_status_t *st) {
  if (!req || !*req)
    return sg_err_set(SG_EINVAL, "wait: rank %d: no request", c->rank);
  zcomm_t *z = (zcomm_t *)c;
  for (sg_req_t **p = &z->live; *p; p = &(*p)->snext)
    if (*p == *req) {
      *p = (*req)->snext;
      break;
    }
  int rc = zq_wait_req(z, *req, st);
  if ((*req)->cma) zq_cma_forget(z, *req); /* a wait that failed early */
  free(*req);
  *req = NULL;
  if (rc < 0) sg_err_trace_push(__FILE__, __LINE__);
  return rc;
}

static int zmq_sendrecv_(sg_comm_t *c, int dst, int stag, const void *sbuf,
                         size_t slen, int src, int rtag, void *rbuf,
                         size_t rcap, sg_status_t *st) {
  SG_CHECK(sg_comm_check_peer(c, "sendrecv", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "sendrecv", rtag, 1));
  zcomm_t *z = (zcomm_t *)c;
  sg_req_t r = {.kind = ZQ_RECV, .peer = src, .tag = rtag, .buf = rbuf,
                .cap = rcap};
  sg_req_t *s = NULL;
  zq_post_recv(z, &r); /* posted first: our peer's message lands in rbuf */
  int rc = zmq_isend_(c, dst, stag, sbuf, slen, &s);
  if (rc < 0) {
    zq_unpost(z, &r);
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  rc = zq_wait_req(z, &r, st);
  int rc2 = zmq_wait_(c, &s, NULL);
  if (rc < 0) {
    sg_err_trace_push(__FILE__, __LINE__);
    return rc;
  }
  return rc2;
}

static int zmq_probe_(sg_comm_t *c, int src, int tag, sg_status_t *st) {
  SG_CHECK(sg_comm_check_peer(c, "probe", src, 1));
  SG_CHECK(sg_comm_check_tag(c, "probe", tag, 1));
  zcomm_t *z = (zcomm_t *)c;
  double t0 = sg_now();
  for (;;) {
    for (zq_msg_t *m = z->uq_head; m; m = m->next) {
      if (!zq_match(src, tag, m->src, m->tag)) continue;
      if (st) {
        st->source = m->src;
        st->tag = m->tag;
        st->bytes = zmq_msg_size(&m->data);
      }
      return 0;
    }
    double left = t0 + c->deadline_s - sg_now();
    if (left <= 0) return sg_comm_recv_timeout(c, src, tag, sg_now() - t0);
    SG_CHECK(zq_progress(z, left));
  }
}

/* Dissemination barrier: in round k every rank sends an empty message to
 * rank+2^k and waits for one from rank-2^k; after ceil(log2 N) rounds each
 * rank has heard, transitively, from all.  N=5: rounds k=0,1,2; rank 0
 * sends to 1,2,4 and hears from 4,3,1. */
static int zmq_barrier_(sg_comm_t *c) {
  zcomm_t *z = (zcomm_t *)c;
  for (int k = 0, d = 1; d < c->size; k++, d <<= 1) {
    int to = (c->rank + d) % c->size;
    int from = (c->rank - d + c->size) % c->size;
    SG_CHECK(zq_send(z, to, SG_TAG_BARRIER + k, NULL, 0, NULL));
    SG_CHECK(zq_recv_any(z, from, SG_TAG_BARRIER + k, NULL, 0, NULL));
  }
  return 0;
}

static void zmq_destroy_(sg_comm_t *c) {
  zcomm_t *z = (zcomm_t *)c;
  if (z->push && z->acks) zq_flush_acks_on_exit(z);
  if (z->push)
    for (int i = 0; i < c->size; i++)
      if (z->push[i]) zmq_close(z->push[i]);
  free(z->push);
  if (z->pull) zmq_close(z->pull);
  while (z->uq_head) {
    zq_msg_t *m = z->uq_head;
    z->uq_head = m->next;
    zmq_msg_close(&m->data);
    free(m);
  }
  /* Requests from irecv without wait belong to the comm: posted, or
   * completed and never waited for; both are on the live list, freed
   * below (anything else posted lives on a caller's stack). */
  z->posted_head = z->posted_tail = NULL;
  sg_zap_stop(&z->zap); /* after every socket of the context is closed */
  if (z->own_ctx && z->ctx) zmq_ctx_term(z->ctx);
  /* Requests never waited for (a failed collective).  Sends: once the sockets are
   * gone zmq releases their zero-copy buffers (at once with our own
   * context, which zmq_ctx_term has drained).  One zmq may still hold (a
   * shared context whose peer is stuck) is left rather than freed under
   * its release callback. */
  while (z->cma_wait) zq_cma_forget(z, z->cma_wait); /* zmq holds none of them */
  while (z->acks) {
    zq_ack_t *k = z->acks;
    z->acks = k->next;
    free(k);
  }
  free(z->pid);
  double give_up = sg_now() + 2.0; /* one bound for all of them */
  while (z->live) {
    sg_req_t *r = z->live;
    z->live = r->snext;
    while (r->zerocopy && !atomic_load(&r->released) && sg_now() < give_up) sched_yield();
    if (!r->zerocopy || atomic_load(&r->released)) free(r);
  }
  if (z->endpoint[0] && strncmp(z->endpoint, "ipc://", 6) == 0)
    unlink(z->endpoint + 6);
  sg_comm_free_common(c);
  free(z);
}

static const struct sg_comm_ops zmq_ops = {
    .name = "zmq",
    .send = zmq_send_,
    .recv = zmq_recv_,
    .sendrecv = zmq_sendrecv_,
    .isend = zmq_isend_,
    .irecv = zmq_irecv_,
    .wait = zmq_wait_,
    .probe = zmq_probe_,
    .barrier = zmq_barrier_,
    .destroy = zmq_destroy_,
};

/* ---- construction ----------------------------------------------------- */

int sg_comm_zmq_new(sg_comm_t **out, const sg_zmq_cfg_t *cfg) {
  int rc;
  char (*eps)[SG_ENDPOINT_MAX] = NULL;
  *out = NULL;
  if (!cfg || !cfg->scheme)
    return sg_err_set(SG_EINVAL, "zmq transport: no scheme given");
  int inproc = strcmp(cfg->scheme, "inproc") == 0;
  if (!inproc && strcmp(cfg->scheme, "tcp") && strcmp(cfg->scheme, "ipc"))
    return sg_err_set(SG_EINVAL, "zmq transport: scheme '%s' is not tcp, ipc "
                      "or inproc", cfg->scheme);
  if (inproc && (!cfg->zctx || !cfg->group))
    return sg_err_set(SG_EINVAL, "zmq transport: inproc needs a shared "
                      "context and a group name");
  if (!inproc && !cfg->rendezvous && cfg->size > 1)
    return sg_err_set(SG_EINVAL, "zmq transport: %s with %d ranks needs a "
                      "rendezvous endpoint", cfg->scheme, cfg->size);
  zcomm_t *z = calloc(1, sizeof *z);
  if (!z) return sg_err_set(SG_ENOMEM, "zmq transport: no memory");
  SG_TRY(sg_comm_init_common(&z->base, &zmq_ops, cfg->rank, cfg->size,
                             cfg->deadline_s));
  z->inproc = inproc;
  z->rcvtimeo_ms = -1; /* zmq's default: block */
  z->hwm = cfg->sndhwm > 0 ? cfg->sndhwm : SG_ZMQ_DEFAULT_HWM;
  z->max_msg = cfg->max_msg ? cfg->max_msg : SG_ZMQ_MAX_MSG;
  z->linger_ms = cfg->deadline_s < 2.0 ? (int)(cfg->deadline_s * 1e3) : 2000;
  z->plant_keep_acks = cfg->plant_keep_acks;
  sg_comm_hostname(z->base.hosts[cfg->rank]);
  z->ctx = cfg->zctx;
  if (!z->ctx) {
    z->own_ctx = 1;
    z->ctx = zmq_ctx_new();
    if (!z->ctx) {
      rc = sg_err_set(SG_EIO, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
      goto fail;
    }
  }
  z->push = calloc((size_t)cfg->size, sizeof *z->push);
  eps = calloc((size_t)cfg->size, sizeof *eps);
  z->pull = zq_socket(z, ZMQ_PULL);
  if (!z->push || !eps || !z->pull) {
    rc = sg_err_set(SG_ENOMEM, "zmq transport: rank %d: no memory or "
                    "sockets", cfg->rank);
    goto fail;
  }
  SG_TRY(zq_secure(z, cfg));
  SG_TRY(zq_bind(z, cfg));
  if (inproc || !cfg->rendezvous) { /* inproc, or tcp/ipc alone */
    for (int r = 0; r < cfg->size; r++) {
      snprintf(eps[r], SG_ENDPOINT_MAX, "inproc://sgdlab-%s-%d",
               inproc ? cfg->group : "", r);
      memcpy(z->base.hosts[r], z->base.hosts[cfg->rank], 64);
    }
  } else {
    SG_TRY(sg_rdv_exchange(z->ctx, cfg->rendezvous, cfg->rank, cfg->size,
                           z->base.hosts[cfg->rank], z->endpoint,
                           cfg->deadline_s,
                           strncmp(cfg->rendezvous, "tcp://", 6) ? NULL : cfg->keys,
                           eps, z->base.hosts));
  }
  SG_TRY(zq_cma_setup(z, cfg, eps));
  for (int r = 0; r < cfg->size; r++) {
    if (r == cfg->rank) continue;
    z->push[r] = zq_socket(z, ZMQ_PUSH);
    if (z->push[r] && z->keys)
      SG_TRY(sg_curve_client(z->push[r], z->keys, cfg->rank, r));
    if (!z->push[r] || zmq_connect(z->push[r], eps[r]) != 0) {
      rc = sg_err_set(SG_EIO, "rank %d: cannot connect to rank %d (%s) at "
                      "%s: %s", cfg->rank, r, z->base.hosts[r], eps[r],
                      zmq_strerror(zmq_errno()));
      goto fail;
    }
  }
  free(eps);
  *out = &z->base;
  return 0;
fail:
  free(eps);
  zmq_destroy_(&z->base);
  return rc;
}

int sg_comm_zmq_cma(const sg_comm_t *c) {
  return c && c->ops == &zmq_ops && ((const zcomm_t *)c)->pid != NULL;
}

int sg_comm_zmq_curve(const sg_comm_t *c) {
  return c && c->ops == &zmq_ops && ((const zcomm_t *)c)->keys != NULL;
}
