/* transport_zmq_sock.h - the ZeroMQ comm's sockets, endpoints, CURVE and
 * the check of every arrival (transport_zmq_sock.c; the state:
 * transport_zmq_comm.h). */
#ifndef SG_TRANSPORT_ZMQ_SOCK_H
#define SG_TRANSPORT_ZMQ_SOCK_H

#include "transport_zmq_comm.h"

/* A PUSH or PULL socket with the comm's linger, HWM, send timeout and
 * largest message; NULL on failure. */
void *zq_socket(zcomm_t *z, int type);
/* CURVE over tcp with keys: the ZAP handler, the PULL socket a server. */
int zq_secure(zcomm_t *z, const sg_zmq_cfg_t *cfg);
/* Bind the PULL socket (inproc, ipc or one tcp address, never all). */
int zq_bind(zcomm_t *z, const sg_zmq_cfg_t *cfg);
/* Whether a header frame is acceptable (anything else is dropped). */
int zq_header_ok(zcomm_t *z, zmq_msg_t *hdr, zq_hdr_t *h);

#endif
