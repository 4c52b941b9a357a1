/* rendezvous.c - how ZeroMQ ranks of one run find each other (tcp/ipc).
 *
 * Like Horovod's rendezvous server: a small key-value exchange, served by
 * the harness from its poll loop.
 *
 *   rank (DEALER)                          harness (ROUTER, sg_rdv_*)
 *   "SGRDV1 <rank> <size> <host> <endpoint>"  ->
 *                                          ... waits until all `size` ranks
 *                                          have registered, then to each:
 *   <- "OK <size>\n<rank> <host> <endpoint>\n" x size
 *   <- "ERR <reason>"   (bad rank, size mismatch, rank registered twice,
 *                        not the rank's own key)
 *
 * Over tcp the socket is a CURVE server (auth.h): only the run's ranks can
 * connect, and a registration is taken only for the rank whose key the
 * connection was authenticated with, so no one can register in a rank's
 * place and receive its traffic.  A refusal names only what the sender
 * claimed (never the rank count or another rank's host).  Messages are
 * capped at RDV_MSG_MAX bytes (ZMQ_MAXMSGSIZE): a larger one drops the
 * connection before it is buffered.
 *
 * The same socket answers the ranks' clock pings (clock_sync.h), of
 * every run that is not simulated, whatever its transport:
 *   "SGCLK1 <rank> <seq>"  ->  <- "CLK <seq> <the harness's sg_wall()>"
 * under the same rule (over tcp a rank pings only as itself), at most
 * SG_CLOCK_PINGS_MAX per rank; a refused ping counts as a refused
 * registration.
 *
 * Host names and endpoints contain no spaces.  The server never blocks: it
 * reads what is there and answers with ZMQ_DONTWAIT.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "auth.h"
#include "clock.h"
#include "clock_sync.h"
#include "deadline.h"
#include "err.h"
#include "rendezvous.h"
#include "transport_impl.h"

#define RDV_ID_MAX 256
#define RDV_MSG_MAX 1024 /* a registration is < 400 bytes */

typedef struct rdv_rank {
  int registered;
  size_t id_len;
  unsigned char id[RDV_ID_MAX];
  char host[64];
  char endpoint[SG_ENDPOINT_MAX];
  int pings; /* clock pings answered (clock_sync.h) */
} rdv_rank_t;

struct sg_rdv {
  void *sock;
  const sg_keys_t *keys; /* tcp: registrations must come from the rank's key */
  unsigned long refused;
  int size, count, complete;
  char endpoint[SG_ENDPOINT_MAX];
  rdv_rank_t *ranks;
};

int sg_rdv_new(sg_rdv_t **out, void *zctx, const char *endpoint_base,
               int size, const sg_keys_t *keys) {
  int rc;
  *out = NULL;
  if (size < 1)
    return sg_err_set(SG_EINVAL, "rendezvous: size %d must be >= 1", size);
  sg_rdv_t *r = calloc(1, sizeof *r);
  if (!r) return sg_err_set(SG_ENOMEM, "rendezvous: no memory");
  r->size = size;
  r->keys = keys;
  r->ranks = calloc((size_t)size, sizeof *r->ranks);
  r->sock = zmq_socket(zctx, ZMQ_ROUTER);
  if (!r->ranks || !r->sock) {
    rc = sg_err_set(SG_ENOMEM, "rendezvous: no memory or socket");
    goto fail;
  }
  int zero = 0;
  int64_t maxmsg = RDV_MSG_MAX;
  zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(r->sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  if (keys) SG_TRY(sg_curve_server(r->sock, keys, SG_AUTH_HARNESS));
  if (zmq_bind(r->sock, endpoint_base) != 0) {
    rc = sg_err_set(SG_EIO, "rendezvous: cannot bind %s: %s", endpoint_base,
                    zmq_strerror(zmq_errno()));
    goto fail;
  }
  size_t n = sizeof r->endpoint;
  if (zmq_getsockopt(r->sock, ZMQ_LAST_ENDPOINT, r->endpoint, &n) != 0) {
    rc = sg_err_set(SG_EIO, "rendezvous: ZMQ_LAST_ENDPOINT: %s",
                    zmq_strerror(zmq_errno()));
    goto fail;
  }
  *out = r;
  return 0;
fail:
  sg_rdv_destroy(&r);
  return rc;
}

const char *sg_rdv_endpoint(const sg_rdv_t *r) { return r->endpoint; }
void *sg_rdv_socket(sg_rdv_t *r) { return r->sock; }
int sg_rdv_complete(const sg_rdv_t *r) { return r->complete; }
unsigned long sg_rdv_refused(const sg_rdv_t *r) { return r ? r->refused : 0; }

void sg_rdv_destroy(sg_rdv_t **rp) {
  if (!rp || !*rp) return;
  sg_rdv_t *r = *rp;
  if (r->sock) zmq_close(r->sock);
  free(r->ranks);
  free(r);
  *rp = NULL;
}

static void rdv_reply(sg_rdv_t *r, const void *id, size_t id_len,
                      const char *text) {
  /* Best effort: a rank that is gone cannot be answered anyway. */
  if (zmq_send(r->sock, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return;
  zmq_send(r->sock, text, strlen(text), ZMQ_DONTWAIT);
}

static int rdv_send_table(sg_rdv_t *r) {
  size_t cap = 32 + (size_t)r->size * (SG_ENDPOINT_MAX + 64 + 16);
  char *t = malloc(cap);
  if (!t) return sg_err_set(SG_ENOMEM, "rendezvous: no memory");
  size_t n = (size_t)snprintf(t, cap, "OK %d\n", r->size);
  for (int i = 0; i < r->size; i++)
    n += (size_t)snprintf(t + n, cap - n, "%d %s %s\n", i, r->ranks[i].host,
                          r->ranks[i].endpoint);
  for (int i = 0; i < r->size; i++)
    rdv_reply(r, r->ranks[i].id, r->ranks[i].id_len, t);
  free(t);
  r->complete = 1;
  return 0;
}

/* The next blank-separated token of *p into out (cap bytes, NUL
 * included); -1 when there is none or it does not fit. */
static int rdv_token(const char **p, char *out, size_t cap) {
  const char *t = *p;
  while (*t == ' ') t++;
  size_t n = strcspn(t, " ");
  if (n == 0 || n >= cap) return -1;
  memcpy(out, t, n);
  out[n] = '\0';
  *p = t + n;
  return 0;
}

static int rdv_int(const char **p, int *out) {
  char tok[16], *end;
  if (rdv_token(p, tok, sizeof tok) < 0) return -1;
  errno = 0;
  long v = strtol(tok, &end, 10);
  if (*end || errno || v < INT32_MIN || v > INT32_MAX) return -1;
  *out = (int)v;
  return 0;
}

int sg_rdv_parse_registration(const void *body, size_t len, int *rank,
                              int *size, char host[64], char endpoint[256]) {
  char b[RDV_MSG_MAX], magic[8];
  const char *p = b;
  if (len >= sizeof b || memchr(body, '\0', len))
    return sg_err_set(SG_EFORMAT, "registration of %zu bytes", len);
  memcpy(b, body, len);
  b[len] = '\0';
  for (size_t i = 0; i < len; i++)
    if ((unsigned char)b[i] < 0x20 || (unsigned char)b[i] > 0x7e)
      return sg_err_set(SG_EFORMAT, "registration with a control byte");
  if (rdv_token(&p, magic, sizeof magic) < 0 || strcmp(magic, "SGRDV1") ||
      rdv_int(&p, rank) < 0 || rdv_int(&p, size) < 0 ||
      rdv_token(&p, host, 64) < 0 || rdv_token(&p, endpoint, 256) < 0 ||
      p[strspn(p, " ")] != '\0')
    return sg_err_set(SG_EFORMAT, "malformed registration");
  return 0;
}

/* Read one message from the ROUTER: the routing id and ONE body frame
 * (further frames are dropped).  1 = got one, 0 = nothing waiting. */
static int rdv_read(sg_rdv_t *r, unsigned char *id, int *id_len,
                    zmq_msg_t *body) {
  for (;;) {
    *id_len = zmq_recv(r->sock, id, RDV_ID_MAX, ZMQ_DONTWAIT);
    if (*id_len >= 0) break;
    if (zmq_errno() == EAGAIN) return 0;
    if (zmq_errno() != EINTR)
      return sg_err_set(SG_EIO, "rendezvous %s: receive: %s", r->endpoint,
                        zmq_strerror(zmq_errno()));
  }
  int more = 0;
  size_t ml = sizeof more;
  zmq_getsockopt(r->sock, ZMQ_RCVMORE, &more, &ml);
  zmq_msg_init(body);
  if (more && zmq_msg_recv(body, r->sock, 0) >= 0) {
    more = zmq_msg_more(body);
  } else { /* no body: the caller ignores it */
    more = 0;
    *id_len = -1;
  }
  while (more) { /* drop any further frames */
    zmq_msg_t junk;
    zmq_msg_init(&junk);
    if (zmq_msg_recv(&junk, r->sock, 0) < 0) more = 0;
    else more = zmq_msg_more(&junk);
    zmq_msg_close(&junk);
  }
  return 1;
}

/* Why a registration is refused ("" = accepted).  The reasons name only
 * what the sender itself claimed: no rank count, no other rank's host. */
static void rdv_check(const sg_rdv_t *r, int sender, int rank, int size,
                      char *err, size_t cap) {
  err[0] = '\0';
  if (r->keys && sender != rank)
    snprintf(err, cap, "ERR refused: a rank registers only as itself");
  else if (size != r->size)
    snprintf(err, cap, "ERR rank %d: the run size it was given does not "
             "match this run's", rank);
  else if (rank < 0 || rank >= r->size)
    snprintf(err, cap, "ERR rank %d is not a rank of this run", rank);
  else if (r->ranks[rank].registered)
    snprintf(err, cap, "ERR rank %d registered twice", rank);
}

/* A clock ping (body "SGCLK1 <rank> <seq>"): answer with this host's
 * time, read as late as possible. */
static void rdv_clock(sg_rdv_t *r, const unsigned char *id, int id_len, int sender,
                      const char *body, size_t len) {
  char b[64], magic[8];
  const char *p = b;
  int rank, seq;
  if (len >= sizeof b || memchr(body, '\0', len)) goto refuse;
  memcpy(b, body, len);
  b[len] = '\0';
  if (rdv_token(&p, magic, sizeof magic) < 0 || rdv_int(&p, &rank) < 0 ||
      rdv_int(&p, &seq) < 0 || p[strspn(p, " ")] != '\0')
    goto refuse;
  if ((r->keys && sender != rank) || rank < 0 || rank >= r->size ||
      r->ranks[rank].pings >= SG_CLOCK_PINGS_MAX)
    goto refuse;
  r->ranks[rank].pings++;
  char out[64];
  snprintf(out, sizeof out, "CLK %d %.9f", seq, sg_wall());
  rdv_reply(r, id, (size_t)id_len, out);
  return;
refuse:
  r->refused++;
  rdv_reply(r, id, (size_t)id_len, "ERR clock ping refused");
}

int sg_rdv_handle(sg_rdv_t *r) {
  for (;;) {
    unsigned char id[RDV_ID_MAX];
    char host[64], ep[SG_ENDPOINT_MAX], err[200];
    int id_len, rank, size;
    zmq_msg_t body;
    int got = rdv_read(r, id, &id_len, &body);
    if (got <= 0) return got;
    if (id_len < 0) { /* no body */
      zmq_msg_close(&body);
      r->refused++;
      continue;
    }
    int sender = sg_auth_sender(&body);
    if (zmq_msg_size(&body) >= 7 && !memcmp(zmq_msg_data(&body), "SGCLK1 ", 7)) {
      rdv_clock(r, id, id_len, sender, zmq_msg_data(&body), zmq_msg_size(&body));
      zmq_msg_close(&body);
      continue;
    }
    int prc = sg_rdv_parse_registration(zmq_msg_data(&body),
                                        zmq_msg_size(&body), &rank, &size,
                                        host, ep);
    zmq_msg_close(&body);
    if (prc < 0) {
      r->refused++;
      rdv_reply(r, id, (size_t)id_len, "ERR malformed registration");
      continue;
    }
    rdv_check(r, sender, rank, size, err, sizeof err);
    if (err[0]) {
      r->refused++;
      rdv_reply(r, id, (size_t)id_len, err);
      continue;
    }
    rdv_rank_t *k = &r->ranks[rank];
    k->registered = 1;
    k->id_len = (size_t)id_len;
    memcpy(k->id, id, (size_t)id_len);
    snprintf(k->host, sizeof k->host, "%s", host);
    snprintf(k->endpoint, sizeof k->endpoint, "%s", ep);
    if (++r->count == r->size) SG_CHECK(rdv_send_table(r));
  }
}

/* ---- the rank side ---------------------------------------------------- */

static int rdv_parse_table(const char *t, const char *rdv, int size,
                           char (*endpoints)[SG_ENDPOINT_MAX],
                           char (*hosts)[64]) {
  int n;
  if (strncmp(t, "ERR ", 4) == 0)
    return sg_err_set(SG_EPEER, "rendezvous %s refused: %s", rdv, t + 4);
  if (sscanf(t, "OK %d", &n) != 1 || n != size)
    return sg_err_set(SG_EPROTO, "rendezvous %s: malformed table", rdv);
  const char *p = strchr(t, '\n');
  for (int i = 0; i < size; i++) {
    int r;
    char host[64], ep[SG_ENDPOINT_MAX];
    if (!p || sscanf(p + 1, "%d %63s %255s", &r, host, ep) != 3 || r != i)
      return sg_err_set(SG_EPROTO, "rendezvous %s: malformed table line %d",
                        rdv, i + 2);
    snprintf(endpoints[i], SG_ENDPOINT_MAX, "%s", ep);
    snprintf(hosts[i], 64, "%s", host);
    p = strchr(p + 1, '\n');
  }
  return 0;
}

int sg_rdv_exchange(void *zctx, const char *rdv, int rank, int size,
                    const char *host, const char *endpoint, double deadline_s,
                    const sg_keys_t *keys,
                    char (*endpoints)[SG_ENDPOINT_MAX], char (*hosts)[64]) {
  int rc = 0, zero = 0;
  char *table = NULL;
  double t0 = sg_now();
  void *s = zmq_socket(zctx, ZMQ_DEALER);
  if (!s) return sg_err_set(SG_EIO, "rendezvous: no socket");
  int64_t table_max = 64 + (int64_t)size * (SG_ENDPOINT_MAX + 64 + 16);
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &table_max, sizeof table_max);
  if (keys) SG_TRY(sg_curve_client(s, keys, rank, SG_AUTH_HARNESS));
  if (zmq_connect(s, rdv) != 0) {
    rc = sg_err_set(SG_EIO, "rank %d: cannot connect to rendezvous %s: %s",
                    rank, rdv, zmq_strerror(zmq_errno()));
    goto fail;
  }
  char msg[512];
  snprintf(msg, sizeof msg, "SGRDV1 %d %d %s %s", rank, size, host, endpoint);
  if (zmq_send(s, msg, strlen(msg), 0) < 0) {
    rc = sg_err_set(SG_EIO, "rank %d: rendezvous %s: send: %s", rank, rdv,
                    zmq_strerror(zmq_errno()));
    goto fail;
  }
  for (;;) {
    double left = t0 + deadline_s - sg_now();
    if (left <= 0) {
      char ws[32];
      rc = sg_err_set(SG_ETIMEOUT, "rank %d (%s): rendezvous %s sent no table "
                      "of the %d ranks within %s s (deadline)", rank, host,
                      rdv, size, sg_fmt_secs(ws, sg_now() - t0));
      goto fail;
    }
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, (long)(left * 1e3) + 1) < 0 &&
        zmq_errno() != EINTR) {
      rc = sg_err_set(SG_EIO, "rendezvous: zmq_poll: %s",
                      zmq_strerror(zmq_errno()));
      goto fail;
    }
    if (it.revents & ZMQ_POLLIN) break;
  }
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, s, 0) < 0) {
    zmq_msg_close(&m);
    rc = sg_err_set(SG_EIO, "rendezvous: receive: %s",
                    zmq_strerror(zmq_errno()));
    goto fail;
  }
  table = malloc(zmq_msg_size(&m) + 1);
  if (!table) {
    zmq_msg_close(&m);
    rc = sg_err_set(SG_ENOMEM, "rendezvous: no memory");
    goto fail;
  }
  memcpy(table, zmq_msg_data(&m), zmq_msg_size(&m));
  table[zmq_msg_size(&m)] = '\0';
  zmq_msg_close(&m);
  SG_TRY(rdv_parse_table(table, rdv, size, endpoints, hosts));
fail:
  free(table);
  zmq_close(s);
  return rc;
}
