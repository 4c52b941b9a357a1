/* transport_zmq_cma.c - the ZeroMQ comm's same-host sends read by the
 * receiver (transport_zmq.c).
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
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "transport_zmq_cma.h"
#include "transport_zmq_match.h"

/* The descriptor frame of a send dst reads itself (transport_zmq_cma.h). */
int zq_cma_frame(zcomm_t *z, sg_req_t *zc, const void *buf, zmq_msg_t *dm) {
  zq_cma_t d = {.addr = (uint64_t)(uintptr_t)buf, .id = ++z->cma_seq};
  zc->zerocopy = zc->cma = 1;
  zc->id = d.id;
  atomic_store(&zc->released, 0);
  if (zmq_msg_init_size(dm, sizeof d) != 0) return SG_ENOMEM;
  memcpy(zmq_msg_data(dm), &d, sizeof d);
  zc->cnext = z->cma_wait;
  z->cma_wait = zc;
  return 0;
}

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
int zq_flush_acks(zcomm_t *z) {
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
void zq_on_ack(zcomm_t *z, int src, zmq_msg_t *data) {
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
void zq_cma_forget(zcomm_t *z, sg_req_t *r) {
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
int zq_cma_read_failed(zcomm_t *z, int src, uint64_t len, int err) {
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
int zq_deliver_cma(zcomm_t *z, const zq_hdr_t *h, zmq_msg_t *data) {
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

/* Acknowledgements still kept when the comm goes: their senders wait on
 * them (the last message of a run is the common case, its reader leaving
 * at once), so they go before the sockets close, for at most the linger.
 * zmq_poll makes the socket take in the room its reader has returned; a
 * nonblocking send may not have seen it yet (zmq hands the reader's count
 * back every few messages and a send looks for it at most once a
 * millisecond), which is why an acknowledgement is kept now and then even
 * when the peer has almost nothing queued. */
void zq_flush_acks_on_exit(zcomm_t *z) {
  double give_up = sg_now() + z->linger_ms / 1e3;
  z->plant_keep_acks = 0;
  while (zq_flush_acks(z) == 0 && z->acks && sg_now() < give_up) {
    zmq_pollitem_t it = {.socket = z->push[z->acks->dst], .events = ZMQ_POLLOUT};
    if (zmq_poll(&it, 1, 1) < 0 && zmq_errno() != EINTR) break;
  }
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
int zq_cma_setup(zcomm_t *z, const sg_zmq_cfg_t *cfg, char (*eps)[SG_ENDPOINT_MAX]) {
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
