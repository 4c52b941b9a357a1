/* transport_zmq_comm.h - the ZeroMQ comm's state and wire format, shared
 * by its pieces (not for engines: they see only transport.h):
 *   transport_zmq.c        progress, sending, requests, the interface,
 *                          construction and destroy
 *   transport_zmq_match.c  matching arrivals to posted receives
 *   transport_zmq_cma.c    same-host sends read by the receiver (ipc)
 *   transport_zmq_sock.c   sockets, endpoints, CURVE, the arrival checks
 * transport_zmq.c's header describes the whole.
 */
#ifndef SG_TRANSPORT_ZMQ_COMM_H
#define SG_TRANSPORT_ZMQ_COMM_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <zmq.h>

#include "auth.h"
#include "transport_impl.h"

#define SG_ZMQ_DEFAULT_HWM 16
#define SG_ZMQ_SEND_BLOCK_MS 1 /* see zq_push_frame */
#define SG_ZMQ_ZEROCOPY_MIN (256u * 1024u)
/* ipc isends from here on are read by the receiver.  Each costs an
 * acknowledgement's round trip through both I/O threads (~100 us on 2
 * loaded cores), so an isend + wait of 256 KiB ran at 0.28x of a
 * zero-copy socket send and 512 KiB at 0.57x; from 1 MiB it wins (1.3x,
 * 2 MiB 2.1x: zmq_raw_bench --mode isend). */
#define SG_ZMQ_CMA_MIN (1u << 20)
#define ZQ_ZEROCOPY 1u
#define ZQ_CMA 2u /* ipc: the payload frame is a zq_cma_t, the data stays with the sender */
#define ZQ_ACK 4u /* the receiver has read that send (zq_cma_t: id, error) */
#define ZQ_TAG_ACK SG_TAG_INTERNAL_END

typedef struct zq_hdr {
  int32_t src, tag;
  uint64_t len;
  uint32_t flags, pad_;
} zq_hdr_t;

typedef struct zq_cma { /* CMA: where the payload is; ACK: which send, errno */
  uint64_t addr, id;
} zq_cma_t;

typedef struct zq_ack { /* an acknowledgement the peer's full queue refused */
  struct zq_ack *next;
  int dst;
  zq_cma_t a;
} zq_ack_t;

typedef struct zq_msg { /* an unexpected message */
  struct zq_msg *next;
  int src, tag;
  zmq_msg_t data;
} zq_msg_t;

enum { ZQ_SEND = 1, ZQ_RECV = 2 };

struct sg_req {
  struct sg_req *next; /* posted receives, in posting order */
  struct sg_req *snext; /* heap requests not yet waited for (zcomm.live) */
  int kind, peer, tag;
  void *buf;
  size_t cap;
  int done;
  int trunc; /* recv: message was longer than cap */
  sg_status_t st;
  atomic_int released; /* zero-copy send: zmq (or, CMA, the reader) let go of buf */
  int zerocopy;
  int cma, cma_err;     /* CMA send; errno the reader reported (recv: of its own read) */
  uint64_t id;          /* CMA send: matches the reader's ZQ_ACK */
  struct sg_req *cnext; /* CMA sends not yet acknowledged (zcomm.cma_wait) */
};

typedef struct zcomm {
  sg_comm_t base;
  void *ctx;
  int own_ctx, linger_ms, hwm, inproc;
  int rcvtimeo_ms; /* the PULL socket's ZMQ_RCVTIMEO as last set */
  const sg_keys_t *keys; /* CURVE (tcp) or NULL */
  sg_zap_t *zap;         /* this comm's ZAP handler (with keys) */
  size_t max_msg;
  void *pull;
  void **push; /* [size]; NULL for self and for a peer given up on */
  zq_msg_t *uq_head, *uq_tail;
  sg_req_t *posted_head, *posted_tail;
  sg_req_t *live; /* isend/irecv requests not yet waited for: destroy frees them */
  pid_t *pid;        /* [size] ipc with CMA: each peer's pid, else NULL */
  uint64_t cma_seq;  /* ids of CMA sends */
  sg_req_t *cma_wait; /* CMA sends the reader has not acknowledged */
  zq_ack_t *acks;    /* acknowledgements not sent yet */
  int plant_keep_acks; /* tests only (sg_zmq_cfg_t) */
  char endpoint[SG_ENDPOINT_MAX];
} zcomm_t;

#endif
