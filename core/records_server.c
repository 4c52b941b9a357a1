/* records_server.c - the harness's side of the records stream (see
 * records_server.h; the rank side is records.c). */
#include "records_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "err.h"

enum { REC_RCVHWM = 100000, /* records queued before ranks' sends block */
       FILE_POLL_MS = 20,     /* file mode: how often the files are looked at, */
       FILE_POLL_RANKS = 64,  /* once more FILE_POLL_MS apart per this many ranks, */
       FILE_POLL_MAX_MS = 250 }; /* at most this long apart */

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
  /* file://PATH (records.h): rank r's records in PATH.r, read as they grow */
  int *fds;          /* per rank, -1 until its file exists */
  off_t *offs;       /* per rank: bytes taken */
  unsigned char *bad; /* per rank: a length out of bounds; the rest is ignored */
  int cursor;        /* the rank read next */
  unsigned char *fbuf; /* one message */
};

/* file mode: the per-rank state; the files appear as the ranks start. */
static int files_open(sg_rec_server_t *s, const char *endpoint) {
  size_t n = (size_t)s->nprocs;
  if (!(s->fds = malloc(n * sizeof *s->fds)) || !(s->offs = calloc(n, sizeof *s->offs)) ||
      !(s->bad = calloc(n, 1)) || !(s->fbuf = malloc(SG_REC_MAX)))
    return sg_err_set(SG_ENOMEM, "records files: no memory");
  for (size_t i = 0; i < n; i++) s->fds[i] = -1;
  snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);
  return SG_OK;
}

/* The next whole message of rank r's file into fbuf: its length, 0 when
 * none is complete yet. */
static size_t file_next(sg_rec_server_t *s, int r) {
  if (s->bad[r]) return 0;
  if (s->fds[r] < 0) {
    char path[300];
    snprintf(path, sizeof path, "%s.%d", s->endpoint + 7, r);
    if ((s->fds[r] = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) return 0;
  }
  uint32_t len;
  if (pread(s->fds[r], &len, sizeof len, s->offs[r]) != (ssize_t)sizeof len) return 0;
  if (len < sizeof(sg_rec_header_t) || len > SG_REC_MAX) {
    s->bad[r] = 1; /* no way to find the next message: count one drop, stop */
    s->dropped++;
    return 0;
  }
  if (pread(s->fds[r], s->fbuf, len, s->offs[r] + (off_t)sizeof len) != (ssize_t)len) return 0;
  s->offs[r] += (off_t)(sizeof len + len);
  return len;
}

/* One message from any rank's file (round robin): 1 and *in filled (the
 * record not yet checked), 0 when none is waiting. */
static int file_recv(sg_rec_server_t *s, const unsigned char **msg, size_t *len, int *from) {
  for (int i = 0; i < s->nprocs; i++) {
    int r = (s->cursor + i) % s->nprocs;
    size_t n = file_next(s, r);
    if (n) {
      s->cursor = r; /* the same rank next: its records in order, in bursts */
      *msg = s->fbuf;
      *len = n;
      *from = r;
      return 1;
    }
  }
  return 0;
}

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
  if (!strncmp(endpoint, "file://", 7)) SG_TRY(files_open(s, endpoint));
  else {
    if (keys) SG_TRY(sg_zap_start(&s->zap, s->zctx, keys));
    SG_TRY(bind_pull(s, endpoint, keys));
  }
  *out = s;
  return SG_OK;
fail:
  sg_rec_server_close(&s);
  return rc;
}

const char *sg_rec_server_endpoint(const sg_rec_server_t *s) { return s->endpoint; }

void *sg_rec_server_zctx(sg_rec_server_t *s) { return s->zctx; }

void sg_rec_server_wait(sg_rec_server_t *s, int fd, void *zsock, int ms) {
  if (s->fds) { /* files: no readiness to wait on; look again soon (each look
                  reads every rank's file: with many ranks, less often) */
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    int every = FILE_POLL_MS * (1 + s->nprocs / FILE_POLL_RANKS);
    if (every > FILE_POLL_MAX_MS) every = FILE_POLL_MAX_MS;
    poll(&pf, fd >= 0 ? 1 : 0, ms < every ? ms : every);
    return;
  }
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
    const unsigned char *data;
    size_t len;
    int sender;
    if (s->fds) {
      if (!file_recv(s, &data, &len, &sender)) return 0;
    } else {
      if (s->have_msg) zmq_msg_close(&s->msg);
      zmq_msg_init(&s->msg);
      s->have_msg = 1;
      if (zmq_msg_recv(&s->msg, s->pull, ZMQ_DONTWAIT) < 0) {
        if (errno == EAGAIN || errno == EINTR) return 0;
        return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
      }
      sender = sg_auth_sender(&s->msg);
      data = zmq_msg_data(&s->msg);
      len = zmq_msg_size(&s->msg);
    }
    /* a file is its rank's own: a record naming another rank is dropped */
    if (sg_rec_decode(data, len, s->nprocs, &in->h, &in->payload) < 0 ||
        ((s->keyed || s->fds) && sender != in->h.rank)) {
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
  for (int r = 0; s->fds && r < s->nprocs; r++)
    if (s->fds[r] >= 0) close(s->fds[r]);
  free(s->fds);
  free(s->offs);
  free(s->bad);
  free(s->fbuf);
  sg_zap_stop(&s->zap); /* shuts the context down once its sockets are closed */
  if (s->zctx) zmq_ctx_term(s->zctx);
  free(s);
  *ps = NULL;
}
