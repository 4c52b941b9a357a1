/* records.c - the rank side of the records stream (see records.h).
 *
 * One ZeroMQ PUSH socket per rank, connected to the harness's PULL
 * endpoint.  Every record is one message: sg_rec_header_t + payload.
 * Sends block at most SEND_TIMEOUT_MS (a harness that stopped reading is
 * then an error, never a hang); close lingers LINGER_MS so that DONE, the
 * last record, reaches the harness before the process exits.  The
 * connection is also the rank's lifeline (lifeline.h): when the harness's
 * end closes, the rank exits.
 *
 * A "file://PATH" endpoint (simulated runs: every rank is an actor of one
 * simulator process, records.h) writes the same messages, each behind its
 * length, to the rank's own file PATH.R instead: nothing blocks the
 * simulation, no socket or thread per rank.  The harness reads the files
 * as they grow.
 */
#include "records.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "opts.h"
#include "clock.h"
#include "err.h"
#include "lifeline.h"

enum {
  SEND_TIMEOUT_MS = 30000,
  LINGER_MS = 5000,
  HWM = 100000, /* records queued before send blocks */
};

struct sg_records {
  void *zctx;
  void *push; /* NULL: records are dropped (unless fd) */
  int fd;     /* file:// endpoint: the rank's records file, else -1 */
  sg_lifeline_t *life;
  int rank;
  double t0;
  unsigned char *buf; /* one message, reused */
  size_t cap;
  sg_step_rec_t steps[SG_REC_STEPS_MAX]; /* waiting to be sent (records.h) */
  int nsteps;
  double last_flush; /* sg_now() when the last batch left */
};

/* One message, behind its length (uint32_t), to the rank's file. */
static int write_msg(sg_records_t *r, size_t len) {
  uint32_t n = (uint32_t)len;
  memcpy(r->buf, &n, sizeof n);
  const unsigned char *p = r->buf;
  size_t left = len + sizeof n;
  while (left) {
    ssize_t w = write(r->fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return sg_err_set(SG_EIO, "rank %d: writing a record: %s", r->rank, strerror(errno));
    p += w;
    left -= (size_t)w;
  }
  return SG_OK;
}

static int send_msg(sg_records_t *r, uint32_t type, const void *a, size_t alen,
                    const void *b, size_t blen) {
  size_t len = sizeof(sg_rec_header_t) + alen + blen, pre = r->fd >= 0 ? sizeof(uint32_t) : 0;
  if (len + pre > r->cap) {
    unsigned char *nb = realloc(r->buf, len + pre);
    if (!nb) return SG_ENOMEM;
    r->buf = nb;
    r->cap = len + pre;
  }
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = type, .rank = r->rank,
                       .len = (uint32_t)(alen + blen)};
  memcpy(r->buf + pre, &h, sizeof h);
  if (alen) memcpy(r->buf + pre + sizeof h, a, alen);
  if (blen) memcpy(r->buf + pre + sizeof h + alen, b, blen);
  if (pre) return write_msg(r, len);
  while (zmq_send(r->push, r->buf, len, 0) < 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN)
      return sg_err_set(SG_ETIMEOUT, "rank %d: the harness took no records for %d s",
                        r->rank, SEND_TIMEOUT_MS / 1000);
    return sg_err_set(SG_EIO, "rank %d: sending a record: %s", r->rank,
                      zmq_strerror(errno));
  }
  return SG_OK;
}

/* The waiting step records as one SG_REC_STEPS message. */
static int flush_steps(sg_records_t *r) {
  if (!r->nsteps) return SG_OK;
  int n = r->nsteps;
  r->nsteps = 0;
  r->last_flush = sg_now();
  return send_msg(r, SG_REC_STEPS, r->steps, (size_t)n * sizeof r->steps[0], NULL, 0);
}

/* Any record but a step: the waiting steps go first. */
static int send_rec(sg_records_t *r, uint32_t type, const void *a, size_t alen,
                    const void *b, size_t blen) {
  if (!r || (!r->push && r->fd < 0)) return SG_OK;
  SG_CHECK(flush_steps(r));
  return send_msg(r, type, a, alen, b, blen);
}

int sg_records_open(sg_records_t **out, const char *endpoint, int rank,
                    const char *role, double t0, const sg_keys_t *keys) {
  int rc;
  sg_records_t *r = calloc(1, sizeof *r);
  if (!r) return SG_ENOMEM;
  r->rank = rank;
  r->t0 = t0;
  r->fd = -1;
  if (endpoint && !strncmp(endpoint, "file://", 7)) {
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", endpoint + 7, rank);
    if ((r->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600)) < 0) {
      rc = sg_err_set(SG_EIO, "records: %s: %s", path, strerror(errno));
      goto fail;
    }
  } else if (endpoint && *endpoint) {
    int hwm = HWM, tmo = SEND_TIMEOUT_MS, linger = LINGER_MS;
    if (!(r->zctx = zmq_ctx_new())) {
      rc = sg_err_set(SG_EIO, "records: zmq_ctx_new: %s", zmq_strerror(errno));
      goto fail;
    }
    if (!(r->push = zmq_socket(r->zctx, ZMQ_PUSH))) {
      rc = sg_err_set(SG_EIO, "records: zmq_socket: %s", zmq_strerror(errno));
      goto fail;
    }
    zmq_setsockopt(r->push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    zmq_setsockopt(r->push, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
    zmq_setsockopt(r->push, ZMQ_LINGER, &linger, sizeof linger);
    if (keys && !strncmp(endpoint, "tcp://", 6))
      SG_TRY(sg_curve_client(r->push, keys, rank, SG_AUTH_HARNESS));
    SG_TRY(sg_lifeline_start(&r->life, r->zctx, r->push, endpoint, rank));
    if (zmq_connect(r->push, endpoint) < 0) {
      rc = sg_err_set(SG_EIO, "records: connect to the harness at %s: %s", endpoint,
                      zmq_strerror(errno));
      goto fail;
    }
  }
  /* the process's own pid (under SMPI getpid() is the simulated actor's) */
  sg_rec_hello_t hello = {.pid = (int32_t)syscall(SYS_getpid)};
  strncpy(hello.role, role ? role : "worker", sizeof hello.role - 1);
  if (gethostname(hello.host, sizeof hello.host - 1) < 0) strcpy(hello.host, "?");
  SG_TRY(send_rec(r, SG_REC_HELLO, &hello, sizeof hello, NULL, 0));
  *out = r;
  return SG_OK;
fail:
  sg_records_close(&r);
  return rc;
}

int sg_records_step(sg_records_t *r, const sg_step_rec_t *s) {
  sg_opts_freeze(1); /* a rank that records a step trains: no lookup by key (opts.h) */
  if (!r || (!r->push && r->fd < 0)) return SG_OK;
  r->steps[r->nsteps++] = *s;
  /* a file takes every step at once (the harness's watchdog sees progress) */
  if (r->nsteps == SG_REC_STEPS_MAX || r->fd >= 0 ||
      sg_now() - r->last_flush >= SG_REC_STEPS_FLUSH_S)
    return flush_steps(r);
  return SG_OK;
}

int sg_records_eval(sg_records_t *r, const sg_eval_rec_t *e) {
  return send_rec(r, SG_REC_EVAL, e, sizeof *e, NULL, 0);
}

int sg_records_bench(sg_records_t *r, const sg_bench_rec_t *b) {
  return send_rec(r, SG_REC_BENCH, b, sizeof *b, NULL, 0);
}

int sg_records_bucket(sg_records_t *r, const sg_bucket_rec_t *b) {
  return send_rec(r, SG_REC_BUCKET, b, sizeof *b, NULL, 0);
}

/* The longest INFO value or DONE message: a record stays under SG_REC_MAX. */
enum { REC_TEXT_MAX = SG_REC_MAX - sizeof(sg_rec_header_t) - 256 };

/* A copy of s cut to at most max bytes (caller frees), or NULL. */
static char *cut(const char *s, size_t max) {
  size_t n = strnlen(s, max);
  char *c = malloc(n + 1);
  if (c) {
    memcpy(c, s, n);
    c[n] = '\0';
  }
  return c;
}

int sg_records_info(sg_records_t *r, const char *key, const char *value) {
  if (!value) value = "";
  char *k = cut(key, 200), *v = cut(value, REC_TEXT_MAX);
  int rc = k && v ? send_rec(r, SG_REC_INFO, k, strlen(k) + 1, v, strlen(v) + 1) : SG_ENOMEM;
  free(k);
  free(v);
  return rc;
}

int sg_records_done(sg_records_t *r, int status, const char *message, int blamed, int reason) {
  sg_rec_done_t d = {.status = status, .blamed = -1, .reason = SG_BLAME_NONE};
  if (status && (blamed < 0 || reason <= SG_BLAME_NONE || reason >= SG_BLAME_END_)) {
    d.blamed = r ? r->rank : -1;
    d.reason = SG_BLAME_SELF;
  } else if (status) {
    d.blamed = blamed;
    d.reason = reason;
  }
  char *m = cut(message ? message : "", REC_TEXT_MAX);
  int rc = m ? send_rec(r, SG_REC_DONE, &d, sizeof d, m, strlen(m) + 1) : SG_ENOMEM;
  free(m);
  return rc;
}

/* ---- the harness side ------------------------------------------------ */

/* n bytes holding exactly `strings` NUL-terminated strings. */
static int nul_strings(const unsigned char *p, size_t n, int strings) {
  for (int i = 0; i < strings; i++) {
    const unsigned char *z = n ? memchr(p, '\0', n) : NULL;
    if (!z) return 0;
    n -= (size_t)(z - p) + 1;
    p = z + 1;
  }
  return n == 0;
}

int sg_rec_decode(const void *msg, size_t len, int nprocs, sg_rec_header_t *h,
                  const unsigned char **payload) {
  if (len < sizeof *h || len > SG_REC_MAX) return SG_EFORMAT;
  memcpy(h, msg, sizeof *h);
  const unsigned char *p = (const unsigned char *)msg + sizeof *h;
  size_t n = len - sizeof *h;
  *payload = p;
  if (h->magic != SG_REC_MAGIC || h->rank < 0 || h->rank >= nprocs || h->len != n)
    return SG_EFORMAT;
  switch (h->type) {
  case SG_REC_HELLO: return n == sizeof(sg_rec_hello_t) ? 0 : SG_EFORMAT;
  case SG_REC_STEP: return n == sizeof(sg_step_rec_t) ? 0 : SG_EFORMAT;
  case SG_REC_STEPS:
    return n && n % sizeof(sg_step_rec_t) == 0 &&
                   n / sizeof(sg_step_rec_t) <= SG_REC_STEPS_MAX
               ? 0
               : SG_EFORMAT;
  case SG_REC_EVAL: return n == sizeof(sg_eval_rec_t) ? 0 : SG_EFORMAT;
  case SG_REC_BENCH: return n == sizeof(sg_bench_rec_t) ? 0 : SG_EFORMAT;
  case SG_REC_BUCKET: return n == sizeof(sg_bucket_rec_t) ? 0 : SG_EFORMAT;
  case SG_REC_INFO: return nul_strings(p, n, 2) ? 0 : SG_EFORMAT;
  case SG_REC_DONE: {
    sg_rec_done_t d;
    if (n < sizeof d || !nul_strings(p + sizeof d, n - sizeof d, 1)) return SG_EFORMAT;
    memcpy(&d, p, sizeof d);
    /* a blamed rank out of range is the harness's to ignore: the DONE
     * (and its message) still counts */
    return d.reason >= SG_BLAME_NONE && d.reason < SG_BLAME_END_ ? 0 : SG_EFORMAT;
  }
  default: return SG_EFORMAT;
  }
}

double sg_records_elapsed(const sg_records_t *r) { return sg_wall() - r->t0; }

void sg_records_close(sg_records_t **pr) {
  if (!pr || !*pr) return;
  sg_records_t *r = *pr;
  sg_lifeline_stop(&r->life); /* our own close is no death */
  if (r->push || r->fd >= 0) flush_steps(r); /* a close without DONE (unit tests) */
  if (r->push) zmq_close(r->push);
  if (r->fd >= 0) close(r->fd);
  if (r->zctx) zmq_ctx_term(r->zctx); /* lingers until queued records left */
  free(r->buf);
  free(r);
  *pr = NULL;
}
