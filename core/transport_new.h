/* transport_new.h - making a comm (transport.h): the ZeroMQ and MPI
 * constructors and the process-wide settings they rely on.  For a rank's
 * main, the harness and the tests; engines get a made comm and never
 * include this header.
 */
#ifndef SG_TRANSPORT_NEW_H
#define SG_TRANSPORT_NEW_H

#include <stddef.h>

#include "transport.h"

struct sg_keys; /* auth.h */

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
                             required for ipc (NULL: SG_EINVAL, no /tmp fallback) */
  const struct sg_keys *keys; /* tcp: the run's keys (auth.h): CURVE on every
                             socket, peers admitted by the ZAP allow-list and
                             identified by their key; NULL = no CURVE */
  size_t max_msg;         /* largest payload a peer may send; 0 = SG_ZMQ_MAX_MSG */
  const char *bind_addr;  /* tcp: the address to bind (a cluster host's, given by
                             the harness); NULL or "" = derived from the
                             rendezvous (loopback, or the address toward it) */
  int no_cma;             /* ipc: 1 = never read a peer's memory (zmq_cma: off) */
  int plant_keep_acks;    /* tests only: every acknowledgement is kept, as one
                             the peer's full queue refused, and only destroy
                             sends it (the reader that leaves at once) */
} sg_zmq_cfg_t;

/* 1 when this zmq comm reads large ipc sends from the sender's memory
 * (zmq_cma: auto where the kernel allows it), 0 otherwise. */
int sg_comm_zmq_cma(const sg_comm_t *c);

/* 1 when this zmq comm's sockets speak CURVE (tcp with the run's keys):
 * every message is encrypted whole before its first byte leaves and
 * decrypted whole after its last arrives. */
int sg_comm_zmq_curve(const sg_comm_t *c);

/* Default cap on one message's payload (ZMQ_MAXMSGSIZE of the receiving
 * socket): larger than any model or benchmark message sgdlab sends. */
#define SG_ZMQ_MAX_MSG ((size_t)1 << 30)

/* Caller owns the result.  For tcp/ipc, binds this rank's endpoint and
 * exchanges endpoints through the harness's rendezvous server. */
int sg_comm_zmq_new(sg_comm_t **out, const sg_zmq_cfg_t *cfg);

/* Keep freed receive payloads in the heap: a fixed mmap threshold of 32
 * MiB and a trim threshold of 128 MiB for this process's allocator
 * (transport_zmq_sock.c, "Receive buffers", has the measurement).  The
 * allocator is the process's, so the process's main decides: the rank's
 * main calls it once before making a comm; a test process that leaves it
 * out only runs slower. */
void sg_zmq_malloc_keep(void);
/* How many sockets one libzmq context may hold (ZMQ_MAX_SOCKETS of a
 * fresh context; the library's default when it cannot say). */
int sg_zmq_max_sockets(void);

/* ---- MPI (point-to-point only) --------------------------------------- */

/* Initialises MPI if needed; rank/size from MPI_COMM_WORLD. */
int sg_comm_mpi_new(sg_comm_t **out, double deadline_s);
#ifdef SG_SMPI
/* Simulated, compute: modeled: every rank calls it before
 * sg_comm_mpi_new, which then has SMPI detach only empty sends (the whole
 * simulation's setting) and defers the wait of the others
 * (transport_mpi.c, "Deferred sends").  plant_early, tests only: a
 * deferred send's wait completes its request at once (MPI_Wait), before
 * its receiver may have matched it (_plant_bug defer-early-wait). */
void sg_mpi_sim_defer(int plant_early);
#endif
/* MPI_Init_thread if needed, then (rdv non-empty, size > 1) a barrier
 * through the harness's rendezvous at rdv: no rank sends an MPI message
 * before every rank has returned from MPI_Init.  Not in simulations. */
int sg_mpi_init_barrier(const char *rdv, int rank, int size, double deadline_s,
                        const struct sg_keys *keys);
/* Finalise MPI if this process initialised it (call once, at exit). */
void sg_mpi_finalize(void);
/* Nonzero when this build has MPI support (it always does; kept for tests). */
int sg_mpi_available(void);

#endif
