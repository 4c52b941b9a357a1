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
 *
 * A comm is made by a rank's main (transport_new.h: the ZeroMQ and MPI
 * constructors); the harness's side of the ZeroMQ rendezvous is in
 * rendezvous.h.  Engines include only this header.
 */
#ifndef SG_TRANSPORT_H
#define SG_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

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
  /* Complete whichever of reqs[0..n) completes first (NULL entries are
   * skipped): *index is its place, and it is freed (reqs[*index] = NULL)
   * whether it succeeded or failed (a message longer than its buffer:
   * SG_ETRUNC, *index naming it).  Past the deadline SG_ETIMEOUT, *index
   * -1, and every request stays posted.  NULL where the transport has
   * none (zmq: a message moves when sent, so a posted receive does not
   * change when its bytes move; sg_comm_has_waitany). */
  int (*waitany)(sg_comm_t *c, int n, sg_req_t **reqs, int *index, sg_status_t *st);
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
/* The comm's waitany, waiting at most `deadline_s` seconds (SG_EINVAL
 * where the transport has none: check sg_comm_has_waitany). */
int sg_waitany_within(sg_comm_t *c, double deadline_s, int n, sg_req_t **reqs, int *index,
                      sg_status_t *st);
static inline int sg_comm_has_waitany(const sg_comm_t *c) { return c->ops->waitany != NULL; }

/* NULL-safe; nulls the pointer. */
void sg_comm_destroy(sg_comm_t **c);

/* Sum of sent[] / recvd[] over all peers. */
uint64_t sg_comm_bytes_sent(const sg_comm_t *c);
uint64_t sg_comm_bytes_recvd(const sg_comm_t *c);

/* The MPI_Comm (as MPI_Comm *) behind an MPI comm, or NULL for other
 * transports: only for engines whose point is the library's own
 * collective (allreduce native). */
void *sg_comm_mpi_handle(sg_comm_t *c);

#endif
