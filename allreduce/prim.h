/* prim.h - the five ring primitives (as NCCL composes its collectives).
 *
 * A rank of a ring receives only from its left neighbour and sends only to
 * its right one.  Every collective on a ring is a sequence of units (one
 * segment of one step); each unit's receive is posted ahead by the caller
 * (the caller knows where it may land) and each unit's send is posted by
 * exactly one of these primitives:
 *
 *   send                 send my input                          (RS step 0)
 *   recvReduceSend       stage = in + recv; send stage          (RS middle)
 *   recvReduceCopySend   out = in + recv;   send out            (RS last)
 *   recvCopySend         recv lands in out; send out            (AG middle)
 *   recv                 recv lands in out                      (AG last)
 *
 * Partial sums never touch the user buffer: recvReduceSend writes them
 * into the staging slot of the send it feeds, so only recvReduceCopySend
 * (the final sum of a chunk) and the allgather's receives write there.
 * Its receive is posted with sg_prim_post_recv_fwd and lands in that
 * staging slot itself, so the partial sum is made in place there (input
 * read, slot updated while still in cache) and sent from there.  Summing
 * a receive slot and the input into a third buffer cost one more stream
 * through memory per element (the staging slot's lines read for
 * ownership, then written back): 6-20 % of the ring at N = 4.
 *
 * Two more primitives serve the pairwise exchanges of rhd, where the
 * partner changes per step (the caller sets left = right = partner):
 *
 *   recvReduceCopy       out += recv                            (halving)
 *   and `recv` above                                            (doubling)
 *
 * Units are numbered 0, 1, ..; receive unit u uses request rreq[u % d]
 * and lands in receive slot u % d, the caller's buffer or (fwd) a staging
 * slot, recorded in rat[u % d]; send unit v uses request sreq[v % q] and,
 * when staged, staging slot v % q.  The caller keeps at most q sends in
 * flight (sg_prim_wait_sends) and at most d receives posted.  A length of
 * 0 means an empty unit: nothing travels and both sides skip it.
 */
#ifndef SG_AR_PRIM_H
#define SG_AR_PRIM_H

#include <stddef.h>

#include "transport.h"

typedef struct sg_prim {
  sg_comm_t *c;
  const char *what;     /* "ring", "rhd": names the algorithm in errors */
  int left, right, tag; /* tag of step s = tag + s */
  size_t d, q;          /* receive slots; send slots */
  size_t slot_floats;   /* floats per receive / staging slot */
  float *rslot;         /* d receive slots */
  float *stage;         /* q staging slots */
  sg_req_t **rreq;      /* d */
  sg_req_t **sreq;      /* q */
  float **rat;          /* d: where receive unit u % d lands */
  size_t posted_send, sent_done; /* sends below are posted / complete */
  int half; /* compress: fp16 -- halves on the wire, every receive lands in
             * a slot and is widened into place; sums stay float32 */
} sg_prim_t;

/* Post receive unit u of step s into dst (NULL: its receive slot). */
int sg_prim_post_recv(sg_prim_t *p, size_t u, int s, float *dst, size_t len);
/* Post receive unit u of step s, which recvReduceSend will reduce and
 * forward as send unit v: it lands in v's staging slot (float32; halves
 * land in the receive slot), once send v - q no longer reads that slot. */
int sg_prim_post_recv_fwd(sg_prim_t *p, size_t u, int s, size_t v, size_t len);
/* Wait for the sends below unit `limit`. */
int sg_prim_wait_sends(sg_prim_t *p, size_t limit);

/* The five primitives.  v is the send unit, s_send its step; u the
 * receive unit, len the floats of both (a ring forwards what it gets). */
int sg_prim_send(sg_prim_t *p, size_t v, int s_send, const float *in, size_t len);
int sg_prim_recv_reduce_send(sg_prim_t *p, size_t u, const float *in, size_t len, size_t v,
                             int s_send);
int sg_prim_recv_reduce_copy_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                                  int s_send);
int sg_prim_recv_copy_send(sg_prim_t *p, size_t u, float *out, size_t len, size_t v,
                           int s_send);
int sg_prim_recv(sg_prim_t *p, size_t u, float *out, size_t len);
/* inout += recv, summed in float32 (halves widened first); no send. */
int sg_prim_recv_reduce_copy(sg_prim_t *p, size_t u, float *inout, size_t len);

#endif
