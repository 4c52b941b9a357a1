/* records_server.h - the harness's side of the records stream (records.h).
 *
 * One ZeroMQ PULL socket bound on the run's endpoint (ipc in the run's
 * private directory, or tcp); over tcp with the run's keys it speaks CURVE
 * and a ZAP handler admits only the run's ranks, so every record comes with
 * its authenticated sender.  The server owns the run's ZeroMQ context (the
 * rendezvous shares it, sg_rec_server_zctx) and checks every record before
 * handing it out: sg_rec_decode's checks, and over CURVE that the sender is
 * the rank the record names.  What fails a check is dropped and counted,
 * never acted on.
 *
 * A "file://PATH" endpoint (a simulated run, records.c) binds nothing:
 * rank r's records are read from PATH.r as the file grows, each message
 * behind its length; a record naming another rank than its file's is
 * dropped, a length out of bounds stops reading that file (one drop).
 */
#ifndef SG_RECORDS_SERVER_H
#define SG_RECORDS_SERVER_H

#include <stddef.h>

#include "records.h"

struct sg_keys;
typedef struct sg_rec_server sg_rec_server_t;

/* One checked record, valid until the next sg_rec_server_recv/close. */
typedef struct sg_rec_in {
  sg_rec_header_t h;
  const unsigned char *payload; /* h.len bytes */
} sg_rec_in_t;

/* Bind "ipc://DIR/rec" or "tcp://ADDR:*" for a run of nprocs ranks.  keys
 * (NULL: none) start the context's ZAP handler, which every CURVE server
 * socket of the context needs (the rendezvous's too), and make a tcp
 * endpoint CURVE.  Caller owns the result. */
int sg_rec_server_open(sg_rec_server_t **out, const char *endpoint, int nprocs,
                       const struct sg_keys *keys);
/* The endpoint ranks connect to (the port resolved). */
const char *sg_rec_server_endpoint(const sg_rec_server_t *s);
/* The ZeroMQ context, for the rendezvous (destroy it before closing). */
void *sg_rec_server_zctx(sg_rec_server_t *s);
/* Wait up to ms for a record, for `fd` (>= 0) to be readable, or for the
 * ZeroMQ socket `zsock` (NULL: none) to have a message. */
void sg_rec_server_wait(sg_rec_server_t *s, int fd, void *zsock, int ms);
/* Take one waiting record: 1 and *in filled, 0 when none is waiting. */
int sg_rec_server_recv(sg_rec_server_t *s, sg_rec_in_t *in);
/* Records dropped (malformed, or not from the rank they name). */
unsigned long sg_rec_server_dropped(const sg_rec_server_t *s);
/* Connections the ZAP handler refused (0 without keys). */
unsigned long sg_rec_server_auth_refused(const sg_rec_server_t *s);
/* "4.3.4": the ZeroMQ library the stream runs on. */
void sg_rec_server_zmq_version(char *out, size_t cap);
void sg_rec_server_close(sg_rec_server_t **s);

#endif
