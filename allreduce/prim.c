/* prim.c - the five ring primitives (prim.h). */
#include "prim.h"

#include "err.h"
#include "reduce.h"

static float *rslot(sg_prim_t *p, size_t u) { return p->rslot + (u % p->d) * p->slot_floats; }

int sg_prim_post_recv(sg_prim_t *p, size_t u, int s, float *dst, size_t len) {
  sg_req_t **rq = &p->rreq[u % p->d];
  *rq = NULL;
  if (!len) return SG_OK;
  return sg_irecv(p->c, p->left, p->tag + s, dst ? dst : rslot(p, u), len * sizeof(float), rq);
}

int sg_prim_wait_sends(sg_prim_t *p, size_t limit) {
  while (p->sent_done < limit && p->sent_done < p->posted_send) {
    sg_req_t **rq = &p->sreq[p->sent_done % p->q];
    if (*rq) SG_CHECK(sg_wait(p->c, rq, NULL));
    p->sent_done++;
  }
  return SG_OK;
}

static int wait_recv(sg_prim_t *p, size_t u) {
  sg_req_t **rq = &p->rreq[u % p->d];
  return *rq ? sg_wait(p->c, rq, NULL) : SG_OK;
}

int sg_prim_send(sg_prim_t *p, size_t v, int s_send, const float *in, size_t len) {
  sg_req_t **rq = &p->sreq[v % p->q];
  *rq = NULL;
  if (len)
    SG_CHECK(sg_isend(p->c, p->right, p->tag + s_send, in, len * sizeof(float), rq));
  p->posted_send = v + 1;
  return SG_OK;
}

/* The staging slot of send unit v was last read by send v - q, which the
 * caller has waited for (it keeps fewer than q sends in flight). */
int sg_prim_recv_reduce_send(sg_prim_t *p, size_t u, const float *in, size_t len, size_t v,
                             int s_send) {
  float *st = p->stage + (v % p->q) * p->slot_floats;
  if (len) {
    SG_CHECK(wait_recv(p, u));
    sg_sum3_f32(st, in, rslot(p, u), len);
  }
  return sg_prim_send(p, v, s_send, st, len);
}

int sg_prim_recv_reduce_copy_send(sg_prim_t *p, size_t u, float *inout, size_t len, size_t v,
                                  int s_send) {
  if (len) {
    SG_CHECK(wait_recv(p, u));
    sg_sum_f32(inout, rslot(p, u), len);
  }
  return sg_prim_send(p, v, s_send, inout, len);
}

int sg_prim_recv_copy_send(sg_prim_t *p, size_t u, const float *out, size_t len, size_t v,
                           int s_send) {
  if (len) SG_CHECK(wait_recv(p, u));
  return sg_prim_send(p, v, s_send, out, len);
}

int sg_prim_recv(sg_prim_t *p, size_t u) { return wait_recv(p, u); }
