/* records_server.c - the harness's side of the records stream (see
 * records_server.h; the rank side is records.c). */
#include "records_server.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "auth.h"
#include "err.h"

enum { REC_RCVHWM = 100000 }; /* records queued before ranks' sends block */

struct sg_rec_server {
  void *zctx, *pull;
  sg_zap_t *zap;
  int nprocs;
  int keyed; /* CURVE: the sender of each record is known */
  zmq_msg_t msg;
  int have_msg;
  /* an SG_REC_STEPS message being handed out one STEP at a time */
  sg_rec_header_t batch_h;
  const unsigned char *batch_p;
  int batch_left;
  unsigned long dropped;
  char endpoint[256];
};

static int bind_pull(sg_rec_server_t *s, const char *endpoint, const struct sg_keys *keys) {
  int hwm = REC_RCVHWM;
  int64_t maxmsg = SG_REC_MAX; /* longer messages never reach us */
  if (!(s->pull = zmq_socket(s->zctx, ZMQ_PULL)))
    return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
  zmq_setsockopt(s->pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(s->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  if (keys && !strncmp(endpoint, "tcp://", 6)) {
    SG_CHECK(sg_curve_server(s->pull, keys, SG_AUTH_HARNESS));
    s->keyed = 1;
  }
  if (zmq_bind(s->pull, endpoint) < 0)
    return sg_err_set(SG_EIO, "records socket: bind %s: %s", endpoint, zmq_strerror(errno));
  size_t n = sizeof s->endpoint;
  if (zmq_getsockopt(s->pull, ZMQ_LAST_ENDPOINT, s->endpoint, &n) != 0)
    return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
  return SG_OK;
}

int sg_rec_server_open(sg_rec_server_t **out, const char *endpoint, int nprocs,
                       const struct sg_keys *keys) {
  int rc;
  sg_rec_server_t *s = calloc(1, sizeof *s);
  *out = NULL;
  if (!s) return sg_err_set(SG_ENOMEM, "records socket: no memory");
  s->nprocs = nprocs;
  if (!(s->zctx = zmq_ctx_new())) {
    rc = sg_err_set(SG_EIO, "zmq: %s", zmq_strerror(errno));
    goto fail;
  }
  if (keys) SG_TRY(sg_zap_start(&s->zap, s->zctx, keys));
  SG_TRY(bind_pull(s, endpoint, keys));
  *out = s;
  return SG_OK;
fail:
  sg_rec_server_close(&s);
  return rc;
}

const char *sg_rec_server_endpoint(const sg_rec_server_t *s) { return s->endpoint; }

void *sg_rec_server_zctx(sg_rec_server_t *s) { return s->zctx; }

void sg_rec_server_wait(sg_rec_server_t *s, int fd, void *zsock, int ms) {
  zmq_pollitem_t it[3] = {{.socket = s->pull, .events = ZMQ_POLLIN}};
  int n = 1;
  if (fd >= 0) it[n++] = (zmq_pollitem_t){.socket = NULL, .fd = fd, .events = ZMQ_POLLIN};
  if (zsock) it[n++] = (zmq_pollitem_t){.socket = zsock, .events = ZMQ_POLLIN};
  zmq_poll(it, n, ms);
}

/* The next STEP of the batch being handed out. */
static int next_of_batch(sg_rec_server_t *s, sg_rec_in_t *in) {
  in->h = s->batch_h;
  in->h.type = SG_REC_STEP;
  in->h.len = sizeof(sg_step_rec_t);
  in->payload = s->batch_p;
  s->batch_p += sizeof(sg_step_rec_t);
  s->batch_left--;
  return 1;
}

int sg_rec_server_recv(sg_rec_server_t *s, sg_rec_in_t *in) {
  if (s->batch_left > 0) return next_of_batch(s, in);
  for (;;) {
    if (s->have_msg) zmq_msg_close(&s->msg);
    zmq_msg_init(&s->msg);
    s->have_msg = 1;
    if (zmq_msg_recv(&s->msg, s->pull, ZMQ_DONTWAIT) < 0) {
      if (errno == EAGAIN || errno == EINTR) return 0;
      return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
    }
    int sender = sg_auth_sender(&s->msg);
    if (sg_rec_decode(zmq_msg_data(&s->msg), zmq_msg_size(&s->msg), s->nprocs, &in->h,
                      &in->payload) < 0 || (s->keyed && sender != in->h.rank)) {
      s->dropped++; /* malformed, or (CURVE) not from the rank it names */
      continue;
    }
    if (in->h.type == SG_REC_STEPS) { /* STEP records, one at a time */
      s->batch_h = in->h;
      s->batch_p = in->payload;
      s->batch_left = (int)(in->h.len / sizeof(sg_step_rec_t));
      return next_of_batch(s, in);
    }
    return 1;
  }
}

unsigned long sg_rec_server_dropped(const sg_rec_server_t *s) { return s ? s->dropped : 0; }

unsigned long sg_rec_server_auth_refused(const sg_rec_server_t *s) {
  return s ? sg_zap_refused(s->zap) : 0;
}

void sg_rec_server_zmq_version(char *out, size_t cap) {
  int maj, min, pat;
  zmq_version(&maj, &min, &pat);
  snprintf(out, cap, "%d.%d.%d", maj, min, pat);
}

void sg_rec_server_close(sg_rec_server_t **ps) {
  if (!ps || !*ps) return;
  sg_rec_server_t *s = *ps;
  if (s->have_msg) zmq_msg_close(&s->msg);
  if (s->pull) {
    int zero = 0;
    zmq_setsockopt(s->pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(s->pull);
  }
  sg_zap_stop(&s->zap); /* shuts the context down once its sockets are closed */
  if (s->zctx) zmq_ctx_term(s->zctx);
  free(s);
  *ps = NULL;
}
