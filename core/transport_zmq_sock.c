/* transport_zmq_sock.c - the ZeroMQ comm's sockets, endpoints, security
 * and arrival checks (transport_zmq.c).
 *
 * Sockets.  Each rank binds ONE receiving PULL socket and keeps one PUSH
 * socket per peer, connected to that peer's PULL endpoint:
 *   inproc  inproc://sgdlab-<group>-<rank>     (threads sharing cfg->zctx;
 *                                               derived, no rendezvous)
 *   ipc     ipc://<ipc_dir>/sgdlab-<pid>-<rank>-<n> (exchanged by
 *           rendezvous; the harness passes its per-run dir as ipc_dir;
 *           refused without one: no socket in a shared /tmp)
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
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "transport_zmq_sock.h"

/* Whether a header frame is acceptable: the size and framing of ours, a
 * source in range that is, over CURVE, the rank the connection was
 * authenticated as, a tag we use, known flags.  Anything else is dropped
 * and counted: bytes from the network never end a run. */
int zq_header_ok(zcomm_t *z, zmq_msg_t *hdr, zq_hdr_t *h) {
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

void *zq_socket(zcomm_t *z, int type) {
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

/* Keep freed zmq payloads in the heap (see "Receive buffers" at the top).  A
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
int zq_bind(zcomm_t *z, const sg_zmq_cfg_t *cfg) {
  static atomic_int ipc_seq; /* several comms in one process */
  char ep[SG_ENDPOINT_MAX];
  if (z->inproc)
    snprintf(ep, sizeof ep, "inproc://sgdlab-%s-%d", cfg->group, cfg->rank);
  else if (strcmp(cfg->scheme, "ipc") == 0 && !(cfg->ipc_dir && cfg->ipc_dir[0]))
    return sg_err_set(SG_EINVAL, "rank %d: zmq over ipc needs a private directory (ipc_dir) for "
                      "its socket; none in /tmp, where a killed rank would leave it", cfg->rank);
  else if (strcmp(cfg->scheme, "ipc") == 0)
    snprintf(ep, sizeof ep, "ipc://%s/sgdlab-%ld-%d-%d", cfg->ipc_dir, (long)getpid(), cfg->rank,
             atomic_fetch_add(&ipc_seq, 1));
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

/* CURVE between ranks over tcp: this rank's ZAP handler, its PULL socket
 * a CURVE server (before it binds). */
int zq_secure(zcomm_t *z, const sg_zmq_cfg_t *cfg) {
  if (!cfg->keys || strcmp(cfg->scheme, "tcp")) return 0;
  if (sg_keys_nranks(cfg->keys) != cfg->size)
    return sg_err_set(SG_EINVAL, "rank %d: keys for %d ranks, the run has %d",
                      cfg->rank, sg_keys_nranks(cfg->keys), cfg->size);
  z->keys = cfg->keys;
  SG_CHECK(sg_zap_start(&z->zap, z->ctx, z->keys));
  return sg_curve_server(z->pull, z->keys, cfg->rank);
}

int sg_zmq_max_sockets(void) {
  void *z = zmq_ctx_new(); /* starts no thread before its first socket */
  int n = z ? zmq_ctx_get(z, ZMQ_MAX_SOCKETS) : ZMQ_MAX_SOCKETS_DFLT;
  if (z) zmq_ctx_term(z);
  return n < 1 ? ZMQ_MAX_SOCKETS_DFLT : n;
}
