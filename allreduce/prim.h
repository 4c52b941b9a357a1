/* prim.h - the primitives ring and rhd are composed of (as NCCL's).
 *
 * A rank of a ring receives only from its left neighbour and sends only to
 * its right one.  Every collective on a ring is a sequence of units (one
 * segment of one step); each unit's receive is posted ahead by the caller
 * (the caller knows where it may land) and each unit's send is posted by
 * exactly one of these primitives:
 *
 *   send                 send my input                          (RS step 0)
 *   recvReduceSend       in += recv;        send in             (RS middle)
 *   recvReduceCopySend   out = in + recv;   send out            (RS last)
 *   recvCopySend         recv lands in out; send out            (AG middle)
 *   recv                 recv lands in out                      (AG last)
 *
 * recvReduceSend writes the partial sum over its input segment, which the
 * schedule never reads again (the allgather brings the chunk's final sum
 * there), and sends it from there.  It is recvReduceCopySend with float32
 * on the wire; with halves only recvReduceCopySend keeps the (rounded) sum.
 * Partial sums kept out of the user buffer need a staging area of about
 * a chunk (a partial sum waits nseg units for the neighbour to take it),
 * never in cache: summing a receive slot and the input into it cost the
 * reduce 39 % more CPU at N = 4 (its lines read for ownership, then
 * written back), landing the receive in it instead cost the kernel's copy
 * 8 % more; on two cores with four ranks the ring is CPU-bound, so either
 * made it slower than the in-place ring (docs/engines/allreduce.md).
 *
 * Two more primitives serve the pairwise exchanges of rhd, where the
 * partner changes per step (the caller sets left = right = partner):
 *
 *   recvReduceCopy       out += recv                            (halving)
 *   and `recv` above                                            (doubling)
 *
 * Units are numbered 0, 1, ..; receive unit u uses request rreq[u % d]
 * and lands in receive slot u % d or the caller's buffer; send unit v uses
 * request sreq[v % q] and, when staged (halves), staging slot v % qs.
 * The caller keeps at most q sends (qs with halves) in flight
 * (sg_prim_wait_sends) and at most d receives posted.  A length of 0
 * means an empty unit: nothing travels and both sides skip it.
 */
#ifndef SG_AR_PRIM_H
#define SG_AR_PRIM_H

#include <stddef.h>

#include "transport.h"

typedef struct sg_prim {
  sg_comm_t *c;
  const char *what;     /* "ring", "rhd": names the algorithm in errors */
  int left, right, tag; /* tag of step s = tag + s */
  size_t d, q;          /* receive slots; send (request) slots */
  size_t qs;            /* staging slots (halves to send); 0: q of them */
  size_t slot_floats;   /* floats per receive / staging slot */
  float *rslot;         /* d receive slots */
  float *stage;         /* q staging slots */
  sg_req_t **rreq;      /* d */
  sg_req_t **sreq;      /* q */
  size_t posted_send, sent_done; /* sends below are posted / complete */
  int half; /* compress: fp16 -- halves on the wire, every receive lands in
             * a slot and is widened into place; sums stay float32 */
} sg_prim_t;

/* Post receive unit u of step s into dst (NULL: its receive slot). */
int sg_prim_post_recv(sg_prim_t *p, size_t u, int s, float *dst, size_t len);
/* Wait for the sends below unit `limit`. */
int sg_prim_wait_sends(sg_prim_t *p, size_t limit);

/* The five primitives.  v is the send unit, s_send its step; u the
 * receive unit, len the floats of both (a ring forwards what it gets). */
int sg_prim_send(sg_prim_t *p, size_t v, int s_send, const float *in, size_t len);
int sg_prim_recv_reduce_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                             int s_send);
int sg_prim_recv_reduce_copy_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                                  int s_send);
int sg_prim_recv_copy_send(sg_prim_t *p, size_t u, float *out, size_t len, size_t v,
                           int s_send);
int sg_prim_recv(sg_prim_t *p, size_t u, float *out, size_t len);
/* Wait for receive unit u (float32, in its receive slot) and return the
 * slot: the caller reads it before the slot's next receive is posted. */
const float *sg_prim_recv_slot(sg_prim_t *p, size_t u, size_t len, int *rc);
/* inout += recv, summed in float32 (halves widened first); no send. */
int sg_prim_recv_reduce_copy(sg_prim_t *p, size_t u, float *inout, size_t len);

#endif
