/* transport_zmq.c - the point-to-point interface over ZeroMQ (libzmq 4.3).
 *
 * Sockets.  Each rank binds ONE receiving PULL socket and keeps one PUSH
 * socket per peer, connected to that peer's PULL endpoint:
 *   inproc  inproc://sgdlab-<group>-<rank>     (threads sharing cfg->zctx;
 *                                               derived, no rendezvous)
 *   ipc     ipc://<ipc_dir or /tmp>/sgdlab-<pid>-<rank>-<n> (exchanged by
 *           rendezvous; the harness passes its per-run dir as ipc_dir)
 *   tcp     tcp://127.0.0.1:<port>, or tcp://<addr>:<port> with the address
 *           this host uses to reach a rendezvous that is not on loopback,
 *           or the address the harness gave (cfg->bind_addr: a rank on an
 *           emulated cluster host, whose rendezvous is ipc) (exchanged by
 *           rendezvous); never the wildcard address.  With
 *           the run's keys every tcp socket speaks CURVE (auth.h).
 * A message is two frames: a header {src, tag, len, flags} and the payload.
 *
 * Arrivals are checked before anything else looks at them: a header of the
 * wrong size or framing, a source out of range, an unknown tag or flag, a
 * payload longer than max_msg or not the length announced, or (CURVE) a
 * source other than the rank the connection was authenticated as, is
 * dropped and counted in comm->dropped; it never ends the run.
 * PUSH/PULL keeps the frames of one message together and keeps the order of
 * messages between one pair of ranks, which is all the matching needs.
 *
 * Matching (as MPI does it).  Arriving messages are matched against posted
 * receives in the order they were posted; a message nobody waits for goes
 * to the unexpected queue (kept as the zmq_msg_t, no copy) and a later
 * receive takes the oldest match from there.  SG_ANY_TAG matches user tags
 * only, never the barrier's internal tags (transport_impl.h).
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
 * Receive buffers.  zmq's I/O thread mallocs every arriving payload (in its
 * own malloc arena) and our thread frees it after the copy out.  With
 * glibc's defaults that arena's top is trimmed on nearly every free
 * (madvise), so the next 1 MiB ring segment lands in fresh pages: a page
 * fault and a page clear per 4 KiB, 10-15% of all cycles in `perf record`
 * of the ring.  A rank's main therefore sets, process-wide, a fixed
 * mmap threshold of 32 MiB and a trim threshold of 128 MiB
 * (sg_zmq_malloc_keep), so freed payloads are reused hot.  Measured, ring over
 * ipc on 2 cores, 16-256 MiB, median of 3 interleaved runs, busbw GB/s:
 * N = 2 0.85-1.42 -> 1.19-1.66, N = 4 0.48-0.69 -> 0.72-0.84 (MPI: 5.3-7.4
 * and 2.9-3.3).  What is left is copies: per byte the kernel's two socket
 * copies (I/O threads) and the copy out of the zmq message, against MPI's
 * one (CMA).  Tried without gain beyond noise: ZMQ_IO_THREADS 2,
 * SNDBUF/RCVBUF 4 MiB, tcp instead of ipc, ring segments 256K-8M, an
 * eventfd for zero-copy release instead of the spin in zq_wait_req.
 *
 * Same-host sends read by the receiver (ipc).  Over a socket a byte is
 * copied three times (into the kernel, out of it into zmq's message, into
 * the receive buffer) where Open MPI's shared-memory transport copies it
 * once (CMA: process_vm_readv).  So over ipc, whose ranks share a host, an
 * isend of >= SG_ZMQ_CMA_MIN sends only a descriptor {address, id}
 * (flag ZQ_CMA); the receiver reads the payload from the sender's memory
 * straight into the matching posted receive, or into a queued message
 * when none is posted (so the sender never waits for a receive to be
 * posted), and answers ZQ_ACK {id, errno} on the internal tag ZQ_TAG_ACK,
 * which releases the sender's wait.  The peer's pid is the one in its ipc
 * endpoint name.  Off where the kernel refuses the read (Yama
 * ptrace_scope > 0, or process_vm_readv itself refused); a read that fails
 * anyway fails the receive, and the send through the acknowledgement.  An
 * acknowledgement never waits for room: one that the peer's full queue
 * refuses is kept and retried every millisecond of any wait, and at
 * destroy for up to the linger (the reader of a run's last message leaves
 * at once; its sender waits on that acknowledgement).  ipc is not
 * authenticated (its socket files lie in the harness's run directory): a
 * process that could connect could already inject any payload; with a
 * descriptor it can make a receive fail (a bad address), which over ipc
 * is therefore an error, not a dropped message.
 *
 * Shutdown.  ZMQ_LINGER is min(deadline, 2 s): enough for the last
 * messages to leave, and a dead peer cannot make destroy block longer.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "clock.h"
#include "err.h"
#include "transport_impl.h"

#define SG_ZMQ_DEFAULT_HWM 16
#define SG_ZMQ_SEND_BLOCK_MS 1 /* see zq_push_frame */
#define SG_ZMQ_ZEROCOPY_MIN (256u * 1024u)
/* ipc isends from here on are read by the receiver.  Each costs an
 * acknowledgement's round trip through both I/O threads (~100 us on 2
 * loaded cores), so an isend + wait of 256 KiB ran at 0.28x of a
 * zero-copy socket send and 512 KiB at 0.57x; from 1 MiB it wins (1.3x,
 * 2 MiB 2.1x: zmq_raw_bench --mode isend). */
#define SG_ZMQ_CMA_MIN (1u << 20)
#define ZQ_ZEROCOPY 1u
#define ZQ_CMA 2u /* ipc: the payload frame is a zq_cma_t, the data stays with the sender */
#define ZQ_ACK 4u /* the receiver has read that send (zq_cma_t: id, error) */
#define ZQ_TAG_ACK SG_TAG_INTERNAL_END

typedef struct zq_hdr {
  int32_t src, tag;
  uint64_t len;
  uint32_t flags, pad_;
} zq_hdr_t;

typedef struct zq_cma { /* CMA: where the payload is; ACK: which send, errno */
  uint64_t addr, id;
} zq_cma_t;

typedef struct zq_ack { /* an acknowledgement the peer's full queue refused */
  struct zq_ack *next;
  int dst;
  zq_cma_t a;
} zq_ack_t;

typedef struct zq_msg { /* an unexpected message */
  struct zq_msg *next;
  int src, tag;
  zmq_msg_t data;
} zq_msg_t;

enum { ZQ_SEND = 1, ZQ_RECV = 2 };

struct sg_req {
  struct sg_req *next; /* posted receives, in posting order */
  struct sg_req *snext; /* heap requests not yet waited for (zcomm.live) */
  int kind, peer, tag;
  void *buf;
  size_t cap;
  int done;
  int trunc; /* recv: message was longer than cap */
  sg_status_t st;
  atomic_int released; /* zero-copy send: zmq (or, CMA, the reader) let go of buf */
  int zerocopy;
  int cma, cma_err;     /* CMA send; errno the reader reported (recv: of its own read) */
  uint64_t id;          /* CMA send: matches the reader's ZQ_ACK */
  struct sg_req *cnext; /* CMA sends not yet acknowledged (zcomm.cma_wait) */
};

typedef struct zcomm {
  sg_comm_t base;
  void *ctx;
  int own_ctx, linger_ms, hwm, inproc;
  int rcvtimeo_ms; /* the PULL socket's ZMQ_RCVTIMEO as last set */
  const sg_keys_t *keys; /* CURVE (tcp) or NULL */
  sg_zap_t *zap;         /* this comm's ZAP handler (with keys) */
  size_t max_msg;
  void *pull;
  void **push; /* [size]; NULL for self and for a peer given up on */
  zq_msg_t *uq_head, *uq_tail;
  sg_req_t *posted_head, *posted_tail;
  sg_req_t *live; /* isend/irecv requests not yet waited for: destroy frees them */
  pid_t *pid;        /* [size] ipc with CMA: each peer's pid, else NULL */
  uint64_t cma_seq;  /* ids of CMA sends */
  sg_req_t *cma_wait; /* CMA sends the reader has not acknowledged */
  zq_ack_t *acks;    /* acknowledgements not sent yet */
  int plant_keep_acks; /* tests only (sg_zmq_cfg_t) */
  char endpoint[SG_ENDPOINT_MAX];
} zcomm_t;

static const struct sg_comm_ops zmq_ops;

/* ---- matching --------------------------------------------------------- */

static int zq_match(int want_src, int want_tag, int src, int tag) {
  if (want_src != SG_ANY_SOURCE && want_src != src) return 0;
  if (want_tag == SG_ANY_TAG) return tag <= SG_TAG_MAX;
  return want_tag == tag;
}

/* Copy a matched message into the request's buffer; closes data. */
static void zq_complete_recv(zcomm_t *z, sg_req_t *r, int src, int tag,
                             zmq_msg_t *data) {
  size_t len = zmq_msg_size(data);
  r->st.source = src;
  r->st.tag = tag;
  r->st.bytes = len;
  if (len > r->cap) {
    r->trunc = 1;
  } else {
    if (len) memcpy(r->buf, zmq_msg_data(data), len);
    z->base.recvd[src] += len;
  }
  zmq_msg_close(data);
  r->done = 1;
}

/* The first posted receive that matches (src, tag), taken off the list;
 * NULL when none does. */
static sg_req_t *zq_take_posted(zcomm_t *z, int src, int tag) {
  sg_req_t **pp = &z->posted_head, *prev = NULL;
  for (sg_req_t *r = z->posted_head; r; prev = r, r = r->next) {
    if (!zq_match(r->peer, r->tag, src, tag)) {
      pp = &r->next;
      continue;
    }
    *pp = r->next;
    if (z->posted_tail == r) z->posted_tail = prev;
    r->next = NULL;
    return r;
  }
  return NULL;
}

/* A message arrived: hand it to the first posted receive that matches, or
 * queue it.  Takes ownership of data. */
static int zq_deliver(zcomm_t *z, int src, int tag, unsigned flags,
                      zmq_msg_t *data) {
  sg_req_t *r = zq_take_posted(z, src, tag);
  if (r) {
    zq_complete_recv(z, r, src, tag, data);
    return 0;
  }
  zq_msg_t *m = malloc(sizeof *m);
  if (!m) {
    zmq_msg_close(data);
    return sg_err_set(SG_ENOMEM, "rank %d: no memory to queue a message",
                      z->base.rank);
  }
  m->next = NULL;
  m->src = src;
  m->tag = tag;
  if (flags & ZQ_ZEROCOPY) { /* release the sender's buffer now */
    size_t len = zmq_msg_size(data);
    if (zmq_msg_init_size(&m->data, len) != 0) {
      free(m);
      zmq_msg_close(data);
      return sg_err_set(SG_ENOMEM, "rank %d: no memory for %zu bytes",
                        z->base.rank, len);
    }
    if (len) memcpy(zmq_msg_data(&m->data), zmq_msg_data(data), len);
    zmq_msg_close(data);
  } else {
    zmq_msg_init(&m->data);
    zmq_msg_move(&m->data, data);
  }
  if (z->uq_tail) z->uq_tail->next = m;
  else z->uq_head = m;
  z->uq_tail = m;
  return 0;
}

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

/* Whether a header frame is acceptable: the size and framing of ours, a
 * source in range that is, over CURVE, the rank the connection was
 * authenticated as, a tag we use, known flags.  Anything else is dropped
 * and counted: bytes from the network never end a run. */
static int zq_header_ok(zcomm_t *z, zmq_msg_t *hdr, zq_hdr_t *h) {
  if (zmq_msg_size(hdr) != sizeof *h || !zmq_msg_more(hdr)) return 0;
  memcpy(h, zmq_msg_data(hdr), sizeof *h);
  if (h->src < 0 || h->src >= z->base.size || h->src == z->base.rank) return 0;
  if (h->tag < 0 || h->tag > SG_TAG_INTERNAL_END || h->len > z->max_msg) return 0;
  unsigned known = ZQ_ZEROCOPY | (z->pid ? ZQ_CMA | ZQ_ACK : 0);
  if (h->flags & ~known || ((h->flags & ZQ_ZEROCOPY) && !z->inproc)) return 0;
  if ((h->flags & ZQ_CMA) && (h->flags & ZQ_ACK || !z->pid[h->src] || h->tag > SG_TAG_MAX))
    return 0;
  if (((h->flags & ZQ_ACK) != 0) != (h->tag == ZQ_TAG_ACK)) return 0;
  if (z->keys && sg_auth_sender(hdr) != h->src) return 0;
  return 1;
}

/* ---- same-host sends read by the receiver (CMA) ------------------------ */

/* Send a header and a zq_cma_t without waiting: 1 sent, 0 dst's queue is
 * full, < 0 an error. */
static int zq_try_send_small(zcomm_t *z, int dst, int tag, unsigned flags,
                             const zq_cma_t *a) {
  zq_hdr_t h = {.src = z->base.rank, .tag = tag, .len = sizeof *a, .flags = flags};
  if (!z->push[dst]) return 1; /* given up on: nobody to tell */
  for (;;) {
    if (zmq_send(z->push[dst], &h, sizeof h, ZMQ_DONTWAIT | ZMQ_SNDMORE) >= 0) break;
    if (zmq_errno() == EAGAIN) return 0;
    if (zmq_errno() != EINTR) goto fail;
  }
  /* The header is queued, so the second frame joins it at once. */
  while (zmq_send(z->push[dst], a, sizeof *a, 0) < 0)
    if (zmq_errno() != EINTR) goto fail;
  return 1;
fail:
  return sg_err_set(SG_EIO, "rank %d: zmq send to rank %d (%s): %s", z->base.rank, dst,
                    z->base.hosts[dst], zmq_strerror(zmq_errno()));
}

/* Send the acknowledgements that waited for room in their peer's queue. */
static int zq_flush_acks(zcomm_t *z) {
  if (z->plant_keep_acks) return 0;
  for (zq_ack_t **p = &z->acks; *p;) {
    zq_ack_t *k = *p;
    int rc = zq_try_send_small(z, k->dst, ZQ_TAG_ACK, ZQ_ACK, &k->a);
    if (rc < 0) return rc;
    if (rc == 0) {
      p = &k->next;
      continue;
    }
    *p = k->next;
    free(k);
  }
  return 0;
}

/* Tell rank dst that its CMA send `id` was read (err 0) or failed (errno).
 * Never waits: a full queue keeps it for zq_flush_acks, which every wait
 * calls, because dst may be waiting on us with its queue to us full. */
static int zq_ack(zcomm_t *z, int dst, uint64_t id, int err) {
  zq_cma_t a = {.addr = (uint64_t)err, .id = id};
  int rc = z->acks || z->plant_keep_acks ? 0 : zq_try_send_small(z, dst, ZQ_TAG_ACK, ZQ_ACK, &a);
  if (rc != 0) return rc < 0 ? rc : 0;
  zq_ack_t *k = malloc(sizeof *k), **p = &z->acks;
  if (!k) return sg_err_set(SG_ENOMEM, "rank %d: no memory", z->base.rank);
  *k = (zq_ack_t){.dst = dst, .a = a};
  while (*p) p = &(*p)->next;
  *p = k;
  return 0;
}

/* An acknowledgement: the CMA send it names is released. */
static void zq_on_ack(zcomm_t *z, int src, zmq_msg_t *data) {
  zq_cma_t a;
  memcpy(&a, zmq_msg_data(data), sizeof a);
  zmq_msg_close(data);
  for (sg_req_t **p = &z->cma_wait; *p; p = &(*p)->cnext) {
    sg_req_t *r = *p;
    if (r->id != a.id || r->peer != src) continue;
    *p = r->cnext;
    r->cma_err = a.addr > 4095 ? EIO : (int)a.addr;
    atomic_store_explicit(&r->released, 1, memory_order_release);
    return;
  }
  z->base.dropped++; /* names no send of ours that is waiting */
}

/* A CMA send leaves the waiting list (acknowledged or given up on). */
static void zq_cma_forget(zcomm_t *z, sg_req_t *r) {
  for (sg_req_t **p = &z->cma_wait; *p; p = &(*p)->cnext)
    if (*p == r) {
      *p = r->cnext;
      break;
    }
  atomic_store(&r->released, 1);
}

/* Read len bytes at addr in rank src's process into buf: 0 or an errno. */
static int zq_cma_read(zcomm_t *z, int src, void *buf, uint64_t addr, size_t len) {
  size_t got = 0;
  while (got < len) {
    struct iovec l = {(char *)buf + got, len - got};
    struct iovec r = {(void *)(uintptr_t)(addr + got), len - got};
    ssize_t n = process_vm_readv(z->pid[src], &l, 1, &r, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EFAULT;
    got += (size_t)n;
  }
  return 0;
}

/* The error of a failed read of a `len`-byte CMA send from rank src. */
static int zq_cma_read_failed(zcomm_t *z, int src, uint64_t len, int err) {
  return sg_err_set(SG_EIO, "rank %d: cannot read a %llu-byte message from rank %d (%s, "
                    "pid %ld): %s", z->base.rank, (unsigned long long)len, src,
                    z->base.hosts[src], (long)z->pid[src], strerror(err));
}

/* A CMA send arrived: read its payload from the sender's memory straight
 * into the matching posted receive (one copy, as Open MPI's CMA does,
 * where a socket costs three), or into a queued message when no receive
 * is posted, and acknowledge it at once either way, so the sender never
 * waits for a receive to be posted.  A failed read fails this call and,
 * through the acknowledgement, the sender's wait. */
static int zq_deliver_cma(zcomm_t *z, const zq_hdr_t *h, zmq_msg_t *data) {
  zq_cma_t d;
  memcpy(&d, zmq_msg_data(data), sizeof d);
  zmq_msg_close(data);
  sg_req_t *r = zq_take_posted(z, h->src, h->tag);
  int err;
  if (r && h->len <= r->cap) {
    if (!(err = zq_cma_read(z, h->src, r->buf, d.addr, h->len))) {
      r->st = (sg_status_t){.source = h->src, .tag = h->tag, .bytes = h->len};
      z->base.recvd[h->src] += h->len;
      r->done = 1;
    }
  } else {
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, h->len) != 0) err = ENOMEM;
    else if ((err = zq_cma_read(z, h->src, zmq_msg_data(&m), d.addr, h->len)))
      zmq_msg_close(&m);
    if (!err && r) zq_complete_recv(z, r, h->src, h->tag, &m); /* truncated */
    else if (!err) SG_CHECK(zq_deliver(z, h->src, h->tag, 0, &m));
  }
  if (err && r) { /* off the posted list: its own wait must fail, not time out */
    r->st = (sg_status_t){.source = h->src, .tag = h->tag, .bytes = h->len};
    r->cma_err = err;
    r->done = 1;
  }
  SG_CHECK(zq_ack(z, h->src, d.id, err));
  return err ? zq_cma_read_failed(z, h->src, h->len, err) : 0;
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
    /* dst reads buf itself */
    zq_cma_t d = {.addr = (uint64_t)(uintptr_t)buf, .id = ++z->cma_seq};
    zc->zerocopy = zc->cma = 1;
    zc->id = d.id;
    atomic_store(&zc->released, 0);
    if (zmq_msg_init_size(&dm, sizeof d) != 0) goto nomem;
    memcpy(zmq_msg_data(&dm), &d, sizeof d);
    h.flags = ZQ_CMA;
    zc->cnext = z->cma_wait;
    z->cma_wait = zc;
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

/* Post a receive (tag may be internal): take a queued message at once or
 * append to the posted list. */
static void zq_post_recv(zcomm_t *z, sg_req_t *r) {
  zq_msg_t *prev = NULL;
  for (zq_msg_t *m = z->uq_head; m; prev = m, m = m->next) {
    if (!zq_match(r->peer, r->tag, m->src, m->tag)) continue;
    if (prev) prev->next = m->next;
    else z->uq_head = m->next;
    if (z->uq_tail == m) z->uq_tail = prev;
    zq_complete_recv(z, r, m->src, m->tag, &m->data);
    free(m);
    return;
  }
  if (z->posted_tail) z->posted_tail->next = r;
  else z->posted_head = r;
  z->posted_tail = r;
}

static void zq_unpost(zcomm_t *z, sg_req_t *r) {
  sg_req_t *prev = NULL;
  for (sg_req_t *p = z->posted_head; p; prev = p, p = p->next) {
    if (p != r) continue;
    if (prev) prev->next = p->next;
    else z->posted_head = p->next;
    if (z->posted_tail == p) z->posted_tail = prev;
    return;
  }
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

/* Acknowledgements still kept when the comm goes: their senders wait on
 * them (the last message of a run is the common case, its reader leaving
 * at once), so they go before the sockets close, for at most the linger.
 * zmq_poll makes the socket take in the room its reader has returned; a
 * nonblocking send may not have seen it yet (zmq hands the reader's count
 * back every few messages and a send looks for it at most once a
 * millisecond), which is why an acknowledgement is kept now and then even
 * when the peer has almost nothing queued. */
static void zq_flush_acks_on_exit(zcomm_t *z) {
  double give_up = sg_now() + z->linger_ms / 1e3;
  z->plant_keep_acks = 0;
  while (zq_flush_acks(z) == 0 && z->acks && sg_now() < give_up) {
    zmq_pollitem_t it = {.socket = z->push[z->acks->dst], .events = ZMQ_POLLOUT};
    if (zmq_poll(&it, 1, 1) < 0 && zmq_errno() != EINTR) break;
  }
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

static void *zq_socket(zcomm_t *z, int type) {
  void *s = zmq_socket(z->ctx, type);
  if (!s) return NULL;
  zmq_setsockopt(s, ZMQ_LINGER, &z->linger_ms, sizeof z->linger_ms);
  zmq_setsockopt(s, type == ZMQ_PULL ? ZMQ_RCVHWM : ZMQ_SNDHWM, &z->hwm,
                 sizeof z->hwm);
  if (type == ZMQ_PUSH) {
    int ms = SG_ZMQ_SEND_BLOCK_MS;
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &ms, sizeof ms);
  }
  if (type == ZMQ_PULL) { /* a larger message drops its connection unread */
    int64_t max = (int64_t)z->max_msg;
    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof max);
  }
  return s;
}

/* Is the rendezvous on this host only (loopback or ipc)? */
static int zq_rdv_is_local(const char *rdv) {
  return strncmp(rdv, "ipc://", 6) == 0 ||
         strncmp(rdv, "tcp://127.", 10) == 0 ||
         strncmp(rdv, "tcp://localhost:", 16) == 0;
}

/* Keep freed zmq payloads in the heap (see "Receive buffers" above).  A
 * process-wide allocator setting, so the process's main calls it. */
void sg_zmq_malloc_keep(void) {
  mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest dynamic value */
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

/* The host part of "tcp://HOST:PORT" (IPv4 or a name). */
static int zq_endpoint_host(const char *ep, char *out, size_t cap) {
  const char *h = ep + 6, *colon = strrchr(ep, ':');
  if (strncmp(ep, "tcp://", 6) || !colon || colon <= h || (size_t)(colon - h) >= cap)
    return sg_err_set(SG_EINVAL, "not a tcp endpoint: %s", ep);
  memcpy(out, h, (size_t)(colon - h));
  out[colon - h] = '\0';
  return 0;
}

/* tcp binds to one address, never all of them: loopback when the
 * rendezvous is on this host, else the address this host uses to reach
 * the rendezvous (the interface on the run's network). */
static int zq_bind(zcomm_t *z, const sg_zmq_cfg_t *cfg) {
  static atomic_int ipc_seq; /* several comms in one process */
  char ep[SG_ENDPOINT_MAX];
  if (z->inproc)
    snprintf(ep, sizeof ep, "inproc://sgdlab-%s-%d", cfg->group, cfg->rank);
  else if (strcmp(cfg->scheme, "ipc") == 0)
    snprintf(ep, sizeof ep, "ipc://%s/sgdlab-%ld-%d-%d",
             cfg->ipc_dir && cfg->ipc_dir[0] ? cfg->ipc_dir : "/tmp",
             (long)getpid(), cfg->rank, atomic_fetch_add(&ipc_seq, 1));
  else if (cfg->bind_addr && cfg->bind_addr[0])
    snprintf(ep, sizeof ep, "tcp://%s:*", cfg->bind_addr);
  else if (!cfg->rendezvous || zq_rdv_is_local(cfg->rendezvous))
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
  else {
    char host[SG_ENDPOINT_MAX], addr[64];
    SG_CHECK(zq_endpoint_host(cfg->rendezvous, host, sizeof host));
    SG_CHECK(sg_net_addr_toward(host, addr, sizeof addr));
    snprintf(ep, sizeof ep, "tcp://%s:*", addr);
  }
  if (zmq_bind(z->pull, ep) != 0)
    return sg_err_set(SG_EIO, "rank %d: cannot bind %s: %s", cfg->rank, ep,
                      zmq_strerror(zmq_errno()));
  size_t n = sizeof z->endpoint;
  if (zmq_getsockopt(z->pull, ZMQ_LAST_ENDPOINT, z->endpoint, &n) != 0)
    return sg_err_set(SG_EIO, "rank %d: ZMQ_LAST_ENDPOINT: %s", cfg->rank,
                      zmq_strerror(zmq_errno()));
  return 0;
}

/* Can this process read its peers' memory (process_vm_readv, as Open
 * MPI's CMA does)?  Not under a Yama ptrace_scope above 0, which refuses
 * it between sibling processes, nor where the call itself is refused. */
static int zq_cma_works(void) {
  FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
  if (f) {
    int scope = 1;
    if (fscanf(f, "%d", &scope) != 1) scope = 1;
    fclose(f);
    if (scope != 0) return 0;
  }
  uint64_t x = 42, y = 0;
  struct iovec l = {&y, sizeof y}, r = {&x, sizeof x};
  return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)sizeof y && y == 42;
}

/* ipc: ranks are on this host, and each endpoint names its rank's pid
 * (zq_bind), so large isends can be read by the receiver from the
 * sender's memory.  A peer whose endpoint does not parse keeps sockets. */
static int zq_cma_setup(zcomm_t *z, const sg_zmq_cfg_t *cfg, char (*eps)[SG_ENDPOINT_MAX]) {
  if (cfg->no_cma || strcmp(cfg->scheme, "ipc") || !cfg->rendezvous || !zq_cma_works()) return 0;
  z->pid = calloc((size_t)cfg->size, sizeof *z->pid);
  if (!z->pid) return sg_err_set(SG_ENOMEM, "zmq transport: rank %d: no memory", cfg->rank);
  for (int r = 0; r < cfg->size; r++) {
    const char *base = strrchr(eps[r], '/');
    long pid;
    int rank, seq, n = 0;
    if (r == cfg->rank || !base || sscanf(base, "/sgdlab-%ld-%d-%d%n", &pid, &rank, &seq, &n) != 3 ||
        base[n] || rank != r || pid <= 0)
      continue;
    z->pid[r] = (pid_t)pid;
  }
  return 0;
}

/* CURVE between ranks over tcp: this rank's ZAP handler, its PULL socket
 * a CURVE server (before it binds). */
static int zq_secure(zcomm_t *z, const sg_zmq_cfg_t *cfg) {
  if (!cfg->keys || strcmp(cfg->scheme, "tcp")) return 0;
  if (sg_keys_nranks(cfg->keys) != cfg->size)
    return sg_err_set(SG_EINVAL, "rank %d: keys for %d ranks, the run has %d",
                      cfg->rank, sg_keys_nranks(cfg->keys), cfg->size);
  z->keys = cfg->keys;
  SG_CHECK(sg_zap_start(&z->zap, z->ctx, z->keys));
  return sg_curve_server(z->pull, z->keys, cfg->rank);
}

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

int sg_zmq_max_sockets(void) {
  void *z = zmq_ctx_new(); /* starts no thread before its first socket */
  int n = z ? zmq_ctx_get(z, ZMQ_MAX_SOCKETS) : ZMQ_MAX_SOCKETS_DFLT;
  if (z) zmq_ctx_term(z);
  return n < 1 ? ZMQ_MAX_SOCKETS_DFLT : n;
}

int sg_comm_zmq_cma(const sg_comm_t *c) {
  return c && c->ops == &zmq_ops && ((const zcomm_t *)c)->pid != NULL;
}

int sg_comm_zmq_curve(const sg_comm_t *c) {
  return c && c->ops == &zmq_ops && ((const zcomm_t *)c)->keys != NULL;
}
