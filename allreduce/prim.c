/* prim.c - the primitives of ring and rhd (prim.h). */
#include "prim.h"

#include <string.h>

#include "err.h"
#include "compress_half.h"
#include "reduce.h"

static float *rslot(sg_prim_t *p, size_t u) { return p->rslot + (u % p->d) * p->slot_floats; }
static float *stage(sg_prim_t *p, size_t v) {
  return p->stage + (v % (p->qs ? p->qs : p->q)) * p->slot_floats;
}
/* The same slots hold halves when p->half (a slot of floats fits them). */
static uint16_t *rslot16(sg_prim_t *p, size_t u) { return (uint16_t *)rslot(p, u); }
static uint16_t *stage16(sg_prim_t *p, size_t v) { return (uint16_t *)stage(p, v); }
static size_t wire(const sg_prim_t *p, size_t len) { return len * (p->half ? 2 : sizeof(float)); }

int sg_prim_post_recv(sg_prim_t *p, size_t u, int s, float *dst, size_t len) {
  sg_req_t **rq = &p->rreq[u % p->d];
  *rq = NULL;
  if (!len) return SG_OK;
  void *at = dst && !p->half ? (void *)dst : (void *)rslot(p, u);
  return sg_irecv(p->c, p->left, p->tag + s, at, wire(p, len), rq);
}

int sg_prim_wait_sends(sg_prim_t *p, size_t limit) {
  while (p->sent_done < limit && p->sent_done < p->posted_send) {
    sg_req_t **rq = &p->sreq[p->sent_done % p->q];
    if (*rq) SG_CHECK(sg_wait(p->c, rq, NULL));
    p->sent_done++;
  }
  return SG_OK;
}

/* A segment shorter than len would leave older bytes in the rest of the
 * slot (or of the caller's buffer), summed or kept as if received. */
static int wait_recv(sg_prim_t *p, size_t u, size_t len) {
  sg_req_t **rq = &p->rreq[u % p->d];
  sg_status_t st;
  if (!*rq) return SG_OK;
  SG_CHECK(sg_wait(p->c, rq, &st));
  if (st.bytes != wire(p, len))
    return sg_err_set(SG_EPROTO, "%s: %zu B from rank %d, tag %d, where the segment is %zu B",
                      p->what, st.bytes, p->left, st.tag, wire(p, len));
  return SG_OK;
}

static int post_send(sg_prim_t *p, size_t v, int s_send, const void *src, size_t len) {
  sg_req_t **rq = &p->sreq[v % p->q];
  *rq = NULL;
  if (len) SG_CHECK(sg_isend(p->c, p->right, p->tag + s_send, src, wire(p, len), rq));
  p->posted_send = v + 1;
  return SG_OK;
}

int sg_prim_send(sg_prim_t *p, size_t v, int s_send, const float *in, size_t len) {
  if (!p->half) return post_send(p, v, s_send, in, len);
  sg_f32_to_f16(stage16(p, v), in, len);
  return post_send(p, v, s_send, stage16(p, v), len);
}

/* Receive unit u, add it into inout and send the sum as unit v.  float32:
 * the sum overwrites the input (prim.h) and goes from there.  Halves: it
 * goes to the staging slot of send unit v, last read by send v - qs, which
 * the caller has waited for (it keeps fewer than qs sends in flight); keep
 * also rounds inout to what was sent. */
static int reduce_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v, int s_send,
                       int keep) {
  if (len) SG_CHECK(wait_recv(p, u, len));
  if (!p->half) {
    sg_sum_f32(inout, rslot(p, u), len);
    return post_send(p, v, s_send, inout, len);
  }
  sg_sum_f16(stage16(p, v), inout, rslot16(p, u), len);
  if (keep) sg_f16_to_f32(inout, stage16(p, v), len);
  return post_send(p, v, s_send, stage16(p, v), len);
}

int sg_prim_recv_reduce_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                             int s_send) {
  return reduce_send(p, u, inout, len, v, s_send, 0);
}

/* With halves on the wire the owner keeps the rounded sum too, so that
 * every replica holds the same bits. */
int sg_prim_recv_reduce_copy_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                                  int s_send) {
  return reduce_send(p, u, inout, len, v, s_send, 1);
}

int sg_prim_recv_copy_send(sg_prim_t *p, size_t u, float *out, size_t len, size_t v,
                           int s_send) {
  if (len) SG_CHECK(wait_recv(p, u, len));
  if (!p->half) return post_send(p, v, s_send, out, len);
  sg_f16_to_f32(out, rslot16(p, u), len);
  memcpy(stage16(p, v), rslot16(p, u), len * 2);
  return post_send(p, v, s_send, stage16(p, v), len);
}

int sg_prim_recv(sg_prim_t *p, size_t u, float *out, size_t len) {
  if (len) SG_CHECK(wait_recv(p, u, len));
  if (p->half && len) sg_f16_to_f32(out, rslot16(p, u), len);
  return SG_OK;
}

const float *sg_prim_recv_slot(sg_prim_t *p, size_t u, size_t len, int *rc) {
  *rc = len ? wait_recv(p, u, len) : SG_OK;
  return *rc < 0 ? NULL : rslot(p, u);
}

int sg_prim_recv_reduce_copy(sg_prim_t *p, size_t u, float *inout, size_t len) {
  if (!len) return SG_OK;
  SG_CHECK(wait_recv(p, u, len));
  if (p->half) sg_acc_f16(inout, rslot16(p, u), len);
  else sg_sum_f32(inout, rslot(p, u), len);
  return SG_OK;
}
