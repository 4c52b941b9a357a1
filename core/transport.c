/* transport.c - what both transports share: allocation of the per-peer
 * counters and host table, argument checks, and the user-facing messages
 * for timeouts and truncation (one wording for MPI and ZeroMQ). */
#include "transport_impl.h"

#include "deadline.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

void sg_comm_destroy(sg_comm_t **c) {
  if (!c || !*c) return;
  (*c)->ops->destroy(*c);
  *c = NULL;
}

uint64_t sg_comm_bytes_sent(const sg_comm_t *c) {
  uint64_t s = 0;
  for (int i = 0; i < c->size; i++) s += c->sent[i];
  return s;
}

uint64_t sg_comm_bytes_recvd(const sg_comm_t *c) {
  uint64_t s = 0;
  for (int i = 0; i < c->size; i++) s += c->recvd[i];
  return s;
}

void sg_comm_hostname(char out[64]) {
  if (gethostname(out, 64) != 0) snprintf(out, 64, "unknown-host");
  out[63] = '\0';
}

int sg_comm_init_common(sg_comm_t *c, const struct sg_comm_ops *ops, int rank,
                        int size, double deadline_s) {
  if (size < 1 || rank < 0 || rank >= size)
    return sg_err_set(SG_EINVAL, "%s transport: rank %d of size %d is invalid",
                      ops->name, rank, size);
  if (!(deadline_s > 0))
    return sg_err_set(SG_EINVAL, "%s transport: deadline %.3g s must be > 0",
                      ops->name, deadline_s);
  c->ops = ops;
  c->rank = rank;
  c->size = size;
  c->deadline_s = deadline_s;
  c->sent = calloc((size_t)size, sizeof *c->sent);
  c->recvd = calloc((size_t)size, sizeof *c->recvd);
  c->hosts = calloc((size_t)size, sizeof *c->hosts);
  if (!c->sent || !c->recvd || !c->hosts) {
    sg_comm_free_common(c);
    return sg_err_set(SG_ENOMEM, "%s transport: no memory for %d ranks",
                      ops->name, size);
  }
  return 0;
}

void sg_comm_free_common(sg_comm_t *c) {
  free(c->sent);
  free(c->recvd);
  free(c->hosts);
  c->sent = c->recvd = NULL;
  c->hosts = NULL;
}

int sg_comm_check_peer(const sg_comm_t *c, const char *call, int peer,
                       int any_ok) {
  if (peer >= 0 && peer < c->size) return 0;
  if (any_ok && peer == SG_ANY_SOURCE) return 0;
  return sg_err_set(SG_EINVAL, "%s: rank %d: peer %d out of range 0..%d",
                    call, c->rank, peer, c->size - 1);
}

int sg_comm_check_tag(const sg_comm_t *c, const char *call, int tag,
                      int any_ok) {
  if (tag >= 0 && tag <= SG_TAG_MAX) return 0;
  if (any_ok && tag == SG_ANY_TAG) return 0;
  return sg_err_set(SG_EINVAL, "%s: rank %d: tag %d out of range 0..%d", call,
                    c->rank, tag, SG_TAG_MAX);
}

static const char *tag_text(int tag, char buf[32]) {
  if (tag == SG_ANY_TAG) snprintf(buf, 32, "any tag");
  else if (tag >= SG_TAG_BARRIER) snprintf(buf, 32, "barrier");
  else snprintf(buf, 32, "tag %d", tag);
  return buf;
}

/* The implementations read the deadline from the comm at every wait: it
 * is set for the one call and put back. */
int sg_recv_within(sg_comm_t *c, double deadline_s, int src, int tag, void *buf, size_t cap,
                   sg_status_t *st) {
  double d0 = c->deadline_s;
  c->deadline_s = deadline_s;
  int rc = sg_recv(c, src, tag, buf, cap, st);
  c->deadline_s = d0;
  return rc;
}

int sg_probe_within(sg_comm_t *c, double deadline_s, int src, int tag, sg_status_t *st) {
  double d0 = c->deadline_s;
  c->deadline_s = deadline_s;
  int rc = sg_probe(c, src, tag, st);
  c->deadline_s = d0;
  return rc;
}

int sg_wait_within(sg_comm_t *c, double deadline_s, sg_req_t **r, sg_status_t *st) {
  double d0 = c->deadline_s;
  c->deadline_s = deadline_s;
  int rc = sg_wait(c, r, st);
  c->deadline_s = d0;
  return rc;
}

int sg_waitany_within(sg_comm_t *c, double deadline_s, int n, sg_req_t **reqs, int *index,
                      sg_status_t *st) {
  *index = -1;
  if (!c->ops->waitany)
    return sg_err_set(SG_EINVAL, "waitany: rank %d: the %s transport has none", c->rank,
                      c->ops->name);
  double d0 = c->deadline_s;
  c->deadline_s = deadline_s;
  int rc = c->ops->waitany(c, n, reqs, index, st);
  c->deadline_s = d0;
  return rc;
}

int sg_comm_recv_timeout(const sg_comm_t *c, int src, int tag, double waited) {
  char tb[32], ws[32];
  if (src != SG_ANY_SOURCE)
    return sg_err_blame(sg_err_set(SG_ETIMEOUT,
                                   "rank %d (%s) sent nothing for %s s (deadline; rank %d "
                                   "waiting for %s)",
                                   src, c->hosts[src], sg_fmt_secs(ws, waited), c->rank, tag_text(tag, tb)),
                        src, SG_BLAME_PEER_TIMEOUT);
  /* Any source: name the ranks it could have come from. */
  char list[512];
  size_t n = 0;
  list[0] = '\0';
  for (int r = 0; r < c->size && n + 80 < sizeof list; r++) {
    if (r == c->rank && c->size > 1) continue;
    n += (size_t)snprintf(list + n, sizeof list - n, "%s%d (%s)",
                          n ? ", " : "", r, c->hosts[r]);
  }
  return sg_err_set(SG_ETIMEOUT,
                    "none of ranks %s sent anything for %s s (deadline; "
                    "rank %d waiting for %s from any source)",
                    list, sg_fmt_secs(ws, waited), c->rank, tag_text(tag, tb));
}

int sg_comm_send_timeout(const sg_comm_t *c, int dst, int tag, double waited) {
  char tb[32], ws[32];
  return sg_err_blame(sg_err_set(SG_ETIMEOUT,
                                 "rank %d (%s) accepted nothing for %s s (deadline; rank "
                                 "%d sending %s)",
                                 dst, c->hosts[dst], sg_fmt_secs(ws, waited), c->rank, tag_text(tag, tb)),
                      dst, SG_BLAME_PEER_TIMEOUT);
}

int sg_comm_trunc(const sg_comm_t *c, int src, int tag, size_t len,
                  size_t cap) {
  return sg_err_blame(sg_err_set(SG_ETRUNC,
                                 "rank %d: message of %zu bytes from rank %d (%s), tag %d, "
                                 "does not fit a receive buffer of %zu bytes",
                                 c->rank, len, src, c->hosts[src], tag, cap),
                      src, SG_BLAME_BAD_MESSAGE);
}

/* A UDP socket "connected" to the host sends nothing, but makes the kernel
 * choose the route and so the source address that reaches it. */
int sg_net_addr_toward(const char *host, char *out, size_t cap) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
  int e = getaddrinfo(host, "9", &hints, &ai);
  if (e != 0)
    return sg_err_set(SG_ENOTFOUND, "cannot resolve host '%s': %s", host, gai_strerror(e));
  int rc = 0, fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in me;
  socklen_t len = sizeof me;
  if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
      getsockname(fd, (struct sockaddr *)&me, &len) != 0 ||
      !inet_ntop(AF_INET, &me.sin_addr, out, (socklen_t)cap))
    rc = sg_err_set(SG_EIO, "no route from this host to '%s': %s", host, strerror(errno));
  if (fd >= 0) close(fd);
  freeaddrinfo(ai);
  return rc;
}

long sg_fd_limit_raise(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return -1;
  }
  return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}
