/* rendezvous.h - the harness's side of the ZeroMQ rendezvous: ranks
 * register (rank, host, endpoint) and receive the table of all ranks
 * (the rank's side, sg_rdv_exchange, is in transport_impl.h).  The same
 * socket answers every rank's clock pings (clock_sync.h), whatever the
 * run's transport.
 */
#ifndef SG_RENDEZVOUS_H
#define SG_RENDEZVOUS_H

#include <stddef.h>

struct sg_keys; /* auth.h */

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
