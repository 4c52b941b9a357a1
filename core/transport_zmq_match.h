/* transport_zmq_match.h - matching arrivals to posted receives, as MPI
 * does it (transport_zmq_match.c; the state: transport_zmq_comm.h). */
#ifndef SG_TRANSPORT_ZMQ_MATCH_H
#define SG_TRANSPORT_ZMQ_MATCH_H

#include "transport_zmq_comm.h"

/* Whether a message (src, tag) matches a receive for (want_src, want_tag):
 * SG_ANY_SOURCE, and SG_ANY_TAG for user tags only. */
int zq_match(int want_src, int want_tag, int src, int tag);
/* Copy a matched message into the request's buffer; closes data. */
void zq_complete_recv(zcomm_t *z, sg_req_t *r, int src, int tag, zmq_msg_t *data);
/* The first posted receive that matches, taken off the list, or NULL. */
sg_req_t *zq_take_posted(zcomm_t *z, int src, int tag);
/* A message arrived: to the first matching posted receive, or queued
 * (copied out at once when sent zero-copy over inproc).  Takes data. */
int zq_deliver(zcomm_t *z, int src, int tag, unsigned flags, zmq_msg_t *data);
/* Post a receive: the oldest matching queued message, or the posted list. */
void zq_post_recv(zcomm_t *z, sg_req_t *r);
/* Take a receive off the posted list (timed out, failed). */
void zq_unpost(zcomm_t *z, sg_req_t *r);

#endif
