/* transport.h - one point-to-point interface, two implementations.
 *
 * Engines talk to each other only through this interface: the
 * ring allreduce is written once against send/recv to its neighbours and
 * runs unchanged over MPI (transport_mpi.c) and ZeroMQ (transport_zmq.c:
 * tcp and ipc between processes, inproc between threads for unit tests).
 *
 * Semantics (both implementations):
 *  - Messages between one (source, destination) pair with the same tag
 *    arrive in the order they were sent.  recv() matches on (source, tag);
 *    source may be SG_ANY_SOURCE and tag SG_ANY_TAG.
 *  - Tags are in [0, SG_TAG_MAX]; engines use a distinct tag per phase/step.
 *  - Every blocking call waits at most comm->deadline_s seconds for its
 *    peer; past that it returns SG_ETIMEOUT and the message (sg_err_msg)
 *    names the peer rank and host: "rank 3 (host) sent nothing for 30.0 s",
 *    and the error blames that rank (err.h, sg_err_blame).  A receive or
 *    probe that must wait longer or shorter takes its deadline as an
 *    argument (sg_recv_within, sg_probe_within); how long each layer waits
 *    is one rule, in deadline.h.
 *  - A message longer than the receive buffer is an error (SG_ETRUNC).
 *  - Bytes sent to and received from each peer are counted in sent[] and
 *    recvd[] (payload bytes; headers excluded), which the step records
 *    report.
 *  - Buffers passed to isend/irecv must stay valid until wait() returns.
 */
#ifndef SG_TRANSPORT_H
#define SG_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct sg_keys; /* auth.h */

#define SG_ANY_SOURCE (-1)
#define SG_ANY_TAG (-1)
#define SG_TAG_MAX 32767 /* the smallest MPI_TAG_UB the MPI standard allows */

typedef struct sg_comm sg_comm_t;
typedef struct sg_req sg_req_t; /* opaque; owned by the comm, freed by wait */

typedef struct sg_status {
  int source;
  int tag;
  size_t bytes;
} sg_status_t;

struct sg_comm_ops {
  const char *name; /* "mpi", "zmq" */
  int (*send)(sg_comm_t *c, int dst, int tag, const void *buf, size_t len);
  int (*recv)(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
              sg_status_t *st);
  /* Send to dst and receive from src at once (the ring step); never
   * deadlocks when every rank calls it in a cycle. */
  int (*sendrecv)(sg_comm_t *c, int dst, int stag, const void *sbuf,
                  size_t slen, int src, int rtag, void *rbuf, size_t rcap,
                  sg_status_t *st);
  int (*isend)(sg_comm_t *c, int dst, int tag, const void *buf, size_t len,
               sg_req_t **req);
  int (*irecv)(sg_comm_t *c, int src, int tag, void *buf, size_t cap,
               sg_req_t **req);
  /* Complete a request (and free it; *req becomes NULL). st may be NULL. */
  int (*wait)(sg_comm_t *c, sg_req_t **req, sg_status_t *st);
  /* Block until a matching message is available; fill st, leave it queued. */
  int (*probe)(sg_comm_t *c, int src, int tag, sg_status_t *st);
  int (*barrier)(sg_comm_t *c);
  void (*destroy)(sg_comm_t *c);
};

struct sg_comm {
  const struct sg_comm_ops *ops;
  int rank, size;
  double deadline_s; /* per blocking wait */
  uint64_t *sent;    /* [size] payload bytes sent to each peer */
  uint64_t *recvd;   /* [size] payload bytes received from each peer */
  char (*hosts)[64]; /* [size] host name of each rank, for messages */
  uint64_t dropped;  /* messages refused on arrival (malformed, oversized, or
                        not from the rank they claim): never fatal */
};

static inline int sg_send(sg_comm_t *c, int dst, int tag, const void *buf, size_t len) {
  return c->ops->send(c, dst, tag, buf, len);
}
static inline int sg_recv(sg_comm_t *c, int src, int tag, void *buf, size_t cap, sg_status_t *st) {
  return c->ops->recv(c, src, tag, buf, cap, st);
}
static inline int sg_sendrecv(sg_comm_t *c, int dst, int stag, const void *sbuf, size_t slen,
                              int src, int rtag, void *rbuf, size_t rcap, sg_status_t *st) {
  return c->ops->sendrecv(c, dst, stag, sbuf, slen, src, rtag, rbuf, rcap, st);
}
static inline int sg_isend(sg_comm_t *c, int dst, int tag, const void *buf, size_t len, sg_req_t **r) {
  return c->ops->isend(c, dst, tag, buf, len, r);
}
static inline int sg_irecv(sg_comm_t *c, int src, int tag, void *buf, size_t cap, sg_req_t **r) {
  return c->ops->irecv(c, src, tag, buf, cap, r);
}
static inline int sg_wait(sg_comm_t *c, sg_req_t **r, sg_status_t *st) {
  return c->ops->wait(c, r, st);
}
static inline int sg_probe(sg_comm_t *c, int src, int tag, sg_status_t *st) {
  return c->ops->probe(c, src, tag, st);
}
static inline int sg_barrier(sg_comm_t *c) { return c->ops->barrier(c); }

/* sg_recv / sg_probe waiting at most `deadline_s` seconds for this call
 * alone (the comm's deadline is left as it was); deadline.h says how long. */
int sg_recv_within(sg_comm_t *c, double deadline_s, int src, int tag, void *buf, size_t cap,
                   sg_status_t *st);
int sg_probe_within(sg_comm_t *c, double deadline_s, int src, int tag, sg_status_t *st);
/* sg_wait on a request, waiting at most `deadline_s` seconds for it. */
int sg_wait_within(sg_comm_t *c, double deadline_s, sg_req_t **r, sg_status_t *st);

/* NULL-safe; nulls the pointer. */
void sg_comm_destroy(sg_comm_t **c);

/* Sum of sent[] / recvd[] over all peers. */
uint64_t sg_comm_bytes_sent(const sg_comm_t *c);
uint64_t sg_comm_bytes_recvd(const sg_comm_t *c);

/* The local IPv4 address this host uses to reach `host` (a name or an
 * address): what a socket that peers on that network must reach binds to.
 * Loopback for this host's own names. */
int sg_net_addr_toward(const char *host, char *out, size_t cap);

/* Raise this process's soft RLIMIT_NOFILE to its hard limit (children
 * inherit it).  Anyone who can reach a tcp port holds one descriptor per
 * connection until the handshake times out, before CURVE can refuse him:
 * at the usual soft limit of 1024, a thousand idle connections made a
 * rank or the harness fail.  The hard limit is what this user may have
 * anyway.  Returns the soft limit now in force. */
long sg_fd_limit_raise(void);

/* ---- ZeroMQ ---------------------------------------------------------- */

typedef struct sg_zmq_cfg {
  int rank, size;
  double deadline_s;
  const char *scheme;     /* "tcp", "ipc" or "inproc" */
  const char *rendezvous; /* harness endpoint (tcp/ipc); NULL for inproc */
  const char *group;      /* inproc: name shared by the threads of a group */
  void *zctx;             /* inproc: the shared zmq context; NULL otherwise */
  int sndhwm;             /* messages queued per peer before send blocks; 0 = default */
  const char *ipc_dir;    /* ipc: directory for this rank's socket (the harness's
                             per-run dir, removed even when ranks are killed);
                             NULL = /tmp */
  const struct sg_keys *keys; /* tcp: the run's keys (auth.h): CURVE on every
                             socket, peers admitted by the ZAP allow-list and
                             identified by their key; NULL = no CURVE */
  size_t max_msg;         /* largest payload a peer may send; 0 = SG_ZMQ_MAX_MSG */
  const char *bind_addr;  /* tcp: the address to bind (a cluster host's, given by
                             the harness); NULL or "" = derived from the
                             rendezvous (loopback, or the address toward it) */
} sg_zmq_cfg_t;

/* Default cap on one message's payload (ZMQ_MAXMSGSIZE of the receiving
 * socket): larger than any model or benchmark message sgdlab sends. */
#define SG_ZMQ_MAX_MSG ((size_t)1 << 30)

/* Caller owns the result.  For tcp/ipc, binds this rank's endpoint and
 * exchanges endpoints through the harness's rendezvous server. */
int sg_comm_zmq_new(sg_comm_t **out, const sg_zmq_cfg_t *cfg);

/* ---- MPI (point-to-point only) --------------------------------------- */

/* Initialises MPI if needed; rank/size from MPI_COMM_WORLD. */
int sg_comm_mpi_new(sg_comm_t **out, double deadline_s);
/* The MPI_Comm (as MPI_Comm *) behind an MPI comm, or NULL for other
 * transports: only for engines whose point is the library's own
 * collective (allreduce native). */
void *sg_comm_mpi_handle(sg_comm_t *c);
/* Finalise MPI if this process initialised it (call once, at exit). */
void sg_mpi_finalize(void);
/* Nonzero when this build has MPI support (it always does; kept for tests). */
int sg_mpi_available(void);

/* ---- Rendezvous (the harness side of the ZeroMQ key-value exchange) -- */

typedef struct sg_rdv sg_rdv_t;
/* Bind a rendezvous server for `size` ranks on `endpoint_base` (e.g.
 * "tcp://127.0.0.1:*" or "ipc:///tmp/x/rdv"); zctx is the harness's zmq
 * context.  With keys (tcp), the socket is a CURVE server with the
 * harness's key (the context's ZAP handler must run) and a rank may
 * register only as itself.  Caller owns the result. */
int sg_rdv_new(sg_rdv_t **out, void *zctx, const char *endpoint_base, int size,
               const struct sg_keys *keys);
/* Registrations refused (malformed, or not from the rank they name). */
unsigned long sg_rdv_refused(const sg_rdv_t *r);
/* Parse one registration "SGRDV1 <rank> <size> <host> <endpoint>" (len
 * bytes, not NUL-terminated).  0, or SG_EFORMAT. */
int sg_rdv_parse_registration(const void *body, size_t len, int *rank, int *size,
                              char host[64], char endpoint[256]);
const char *sg_rdv_endpoint(const sg_rdv_t *r); /* what ranks connect to */
void *sg_rdv_socket(sg_rdv_t *r);               /* for zmq_poll */
/* Handle whatever is readable on the socket (non-blocking). */
int sg_rdv_handle(sg_rdv_t *r);
/* Nonzero once every rank has registered and received the table. */
int sg_rdv_complete(const sg_rdv_t *r);
void sg_rdv_destroy(sg_rdv_t **r);

#endif
