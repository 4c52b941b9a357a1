/* transport_zmq_match.c - matching, for the ZeroMQ comm (transport_zmq.c).
 *
 * Matching (as MPI does it).  Arriving messages are matched against posted
 * receives in the order they were posted; a message nobody waits for goes
 * to the unexpected queue (kept as the zmq_msg_t, no copy) and a later
 * receive takes the oldest match from there.  SG_ANY_TAG matches user tags
 * only, never the barrier's internal tags (transport_impl.h).
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "transport_zmq_match.h"

int zq_match(int want_src, int want_tag, int src, int tag) {
  if (want_src != SG_ANY_SOURCE && want_src != src) return 0;
  if (want_tag == SG_ANY_TAG) return tag <= SG_TAG_MAX;
  return want_tag == tag;
}

/* Copy a matched message into the request's buffer; closes data. */
void zq_complete_recv(zcomm_t *z, sg_req_t *r, int src, int tag,
                      zmq_msg_t *data) {
  size_t len = zmq_msg_size(data);
  r->st.source = src;
  r->st.tag = tag;
  r->st.bytes = len;
  if (len > r->cap) {
    r->trunc = 1;
  } else {
    if (len) memcpy(r->buf, zmq_msg_data(data), len);
    z->base.recvd[src] += len;
  }
  zmq_msg_close(data);
  r->done = 1;
}

/* The first posted receive that matches (src, tag), taken off the list;
 * NULL when none does. */
sg_req_t *zq_take_posted(zcomm_t *z, int src, int tag) {
  sg_req_t **pp = &z->posted_head, *prev = NULL;
  for (sg_req_t *r = z->posted_head; r; prev = r, r = r->next) {
    if (!zq_match(r->peer, r->tag, src, tag)) {
      pp = &r->next;
      continue;
    }
    *pp = r->next;
    if (z->posted_tail == r) z->posted_tail = prev;
    r->next = NULL;
    return r;
  }
  return NULL;
}

/* A message arrived: hand it to the first posted receive that matches, or
 * queue it.  Takes ownership of data. */
int zq_deliver(zcomm_t *z, int src, int tag, unsigned flags,
               zmq_msg_t *data) {
  sg_req_t *r = zq_take_posted(z, src, tag);
  if (r) {
    zq_complete_recv(z, r, src, tag, data);
    return 0;
  }
  zq_msg_t *m = malloc(sizeof *m);
  if (!m) {
    zmq_msg_close(data);
    return sg_err_set(SG_ENOMEM, "rank %d: no memory to queue a message",
                      z->base.rank);
  }
  m->next = NULL;
  m->src = src;
  m->tag = tag;
  if (flags & ZQ_ZEROCOPY) { /* release the sender's buffer now */
    size_t len = zmq_msg_size(data);
    if (zmq_msg_init_size(&m->data, len) != 0) {
      free(m);
      zmq_msg_close(data);
      return sg_err_set(SG_ENOMEM, "rank %d: no memory for %zu bytes",
                        z->base.rank, len);
    }
    if (len) memcpy(zmq_msg_data(&m->data), zmq_msg_data(data), len);
    zmq_msg_close(data);
  } else {
    zmq_msg_init(&m->data);
    zmq_msg_move(&m->data, data);
  }
  if (z->uq_tail) z->uq_tail->next = m;
  else z->uq_head = m;
  z->uq_tail = m;
  return 0;
}

/* Post a receive (tag may be internal): take a queued message at once or
 * append to the posted list. */
void zq_post_recv(zcomm_t *z, sg_req_t *r) {
  zq_msg_t *prev = NULL;
  for (zq_msg_t *m = z->uq_head; m; prev = m, m = m->next) {
    if (!zq_match(r->peer, r->tag, m->src, m->tag)) continue;
    if (prev) prev->next = m->next;
    else z->uq_head = m->next;
    if (z->uq_tail == m) z->uq_tail = prev;
    zq_complete_recv(z, r, m->src, m->tag, &m->data);
    free(m);
    return;
  }
  if (z->posted_tail) z->posted_tail->next = r;
  else z->posted_head = r;
  z->posted_tail = r;
}

void zq_unpost(zcomm_t *z, sg_req_t *r) {
  sg_req_t *prev = NULL;
  for (sg_req_t *p = z->posted_head; p; prev = p, p = p->next) {
    if (p != r) continue;
    if (prev) prev->next = p->next;
    else z->posted_head = p->next;
    if (z->posted_tail == p) z->posted_tail = prev;
    return;
  }
}
