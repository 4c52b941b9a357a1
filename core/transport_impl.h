/* transport_impl.h - what transport_zmq.c and transport_mpi.c share (not
 * for engines: they see only transport.h).
 *
 * Tags.  User tags are 0..SG_TAG_MAX.  The ZeroMQ transport reserves
 * SG_TAG_MAX+1 .. SG_TAG_MAX+64 for its dissemination barrier (tag
 * SG_TAG_BARRIER + round); SG_ANY_TAG never matches them.  The MPI
 * transport keeps its barrier on a second duplicate of MPI_COMM_WORLD, so
 * the user communicator carries only user tags.
 */
#ifndef SG_TRANSPORT_IMPL_H
#define SG_TRANSPORT_IMPL_H

#include "transport_new.h"

#define SG_TAG_BARRIER (SG_TAG_MAX + 1)
#define SG_TAG_INTERNAL_END (SG_TAG_MAX + 64)

/* Allocate sent[], recvd[] and hosts[] for `size` ranks and set rank, size,
 * deadline_s and ops.  Freed by sg_comm_free_common(). */
int sg_comm_init_common(sg_comm_t *c, const struct sg_comm_ops *ops, int rank,
                        int size, double deadline_s);
void sg_comm_free_common(sg_comm_t *c);

/* Check a peer rank (or SG_ANY_SOURCE when any_ok) and a user tag (or
 * SG_ANY_TAG when any_ok); the message names the call. */
int sg_comm_check_peer(const sg_comm_t *c, const char *call, int peer,
                       int any_ok);
int sg_comm_check_tag(const sg_comm_t *c, const char *call, int tag,
                      int any_ok);

/* The SG_ETIMEOUT message of a receive: "rank 2 (host) sent nothing for
 * 5.0 s (deadline; rank 0 waiting for tag 7)"; for SG_ANY_SOURCE it lists
 * the ranks it was waiting on. */
int sg_comm_recv_timeout(const sg_comm_t *c, int src, int tag, double waited);
/* The SG_ETIMEOUT message of a send that the peer did not take. */
int sg_comm_send_timeout(const sg_comm_t *c, int dst, int tag, double waited);
/* SG_ETRUNC: "message of N bytes from rank 2 (host), tag 7, does not fit
 * a receive buffer of M bytes". */
int sg_comm_trunc(const sg_comm_t *c, int src, int tag, size_t len,
                  size_t cap);

/* This machine's host name (truncated to 63 characters). */
void sg_comm_hostname(char out[64]);

/* The rank side of the rendezvous (rendezvous.c): register (rank, host,
 * endpoint) at the harness's `rdv_endpoint` and wait, at most deadline_s,
 * for the table of all ranks: endpoints[size][SG_ENDPOINT_MAX] and
 * hosts[size].  keys: connect as a CURVE client (tcp). */
#define SG_ENDPOINT_MAX 256
int sg_rdv_exchange(void *zctx, const char *rdv_endpoint, int rank, int size,
                    const char *host, const char *endpoint, double deadline_s,
                    const struct sg_keys *keys,
                    char (*endpoints)[SG_ENDPOINT_MAX], char (*hosts)[64]);

#endif
