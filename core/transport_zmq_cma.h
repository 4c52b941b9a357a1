/* transport_zmq_cma.h - same-host sends read by the receiver over ipc
 * (transport_zmq_cma.c; the state: transport_zmq_comm.h). */
#ifndef SG_TRANSPORT_ZMQ_CMA_H
#define SG_TRANSPORT_ZMQ_CMA_H

#include "transport_zmq_comm.h"

/* ipc with CMA working: each peer's pid from its endpoint (z->pid). */
int zq_cma_setup(zcomm_t *z, const sg_zmq_cfg_t *cfg, char (*eps)[SG_ENDPOINT_MAX]);
/* The payload frame of a CMA send of buf: the descriptor {address, id};
 * zc joins the sends waiting for their acknowledgement.  0 or SG_ENOMEM. */
int zq_cma_frame(zcomm_t *z, sg_req_t *zc, const void *buf, zmq_msg_t *dm);
/* A CMA descriptor arrived: read the payload, acknowledge it. */
int zq_deliver_cma(zcomm_t *z, const zq_hdr_t *h, zmq_msg_t *data);
/* An acknowledgement arrived: release the CMA send it names. */
void zq_on_ack(zcomm_t *z, int src, zmq_msg_t *data);
/* Send the acknowledgements kept for want of room (every wait calls it). */
int zq_flush_acks(zcomm_t *z);
/* At destroy: the kept acknowledgements, for at most the linger. */
void zq_flush_acks_on_exit(zcomm_t *z);
/* A CMA send leaves the waiting list (acknowledged or given up on). */
void zq_cma_forget(zcomm_t *z, sg_req_t *r);
/* The error of a failed read of a len-byte CMA send from rank src. */
int zq_cma_read_failed(zcomm_t *z, int src, uint64_t len, int err);

#endif
