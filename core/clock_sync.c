/* clock_sync.c - a rank's clock offset to the harness (clock_sync.h). */
#include "clock_sync.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "auth.h"
#include "clock.h"
#include "err.h"

double sg_clock_skew_s = 0.0;

#define SKEW_MAX_US 3.6e9 /* an hour */

/* One "rank:us" entry at text + at (len bytes): 0, or -1. */
static int skew_entry(const char *e, size_t len, long *rank, double *us) {
  char buf[64], *end;
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, e, len);
  buf[len] = '\0';
  char *colon = strchr(buf, ':');
  if (!colon) return -1;
  *colon = '\0';
  errno = 0;
  *rank = strtol(buf, &end, 10);
  if (end == buf || *end || errno || *rank < 0 || *rank > 1000000) return -1;
  long long v = strtoll(colon + 1, &end, 10);
  if (end == colon + 1 || *end || errno || (double)llabs(v) > SKEW_MAX_US) return -1;
  *us = (double)v;
  return 0;
}

int sg_clock_skew_parse(const char *text, int rank, double *skew_s) {
  *skew_s = 0.0;
  size_t at = 0, n = strlen(text);
  if (!n) return SG_OK;
  for (int i = 1; at <= n; i++) {
    size_t len = strcspn(text + at, ",");
    long r;
    double us;
    if (skew_entry(text + at, len, &r, &us) < 0)
      return sg_err_set(SG_ECONFIG, "SGDLAB_TEST_CLOCK_SKEW_US: entry %d (offset %zu): want "
                        "RANK:MICROSECONDS with |us| <= %.0f, got '%.*s'", i, at, SKEW_MAX_US,
                        (int)(len > 40 ? 40 : len), text + at);
    if (r == rank) *skew_s = us * 1e-6;
    at += len + 1;
  }
  return SG_OK;
}

int sg_clock_skew_apply(int rank) {
  const char *v = getenv("SGDLAB_TEST_CLOCK_SKEW_US");
  double s = 0.0;
  if (v && *v) SG_CHECK(sg_clock_skew_parse(v, rank, &s));
  sg_clock_skew_s = s;
  return SG_OK;
}

/* Wait at most deadline_s for the answer to ping `seq` on s; its harness
 * time into *h.  Answers to earlier pings (late) are skipped. */
static int clock_answer(void *s, const char *ep, int seq, double deadline_s, double *h) {
  double t0 = sg_now();
  for (;;) {
    double left = t0 + deadline_s - sg_now();
    if (left <= 0)
      return sg_err_set(SG_ETIMEOUT, "clock sync: %s did not answer within %.1f s (deadline)",
                        ep, deadline_s);
    zmq_pollitem_t it = {.socket = s, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, (long)(left * 1e3) + 1) < 0 && zmq_errno() != EINTR)
      return sg_err_set(SG_EIO, "clock sync: zmq_poll: %s", zmq_strerror(zmq_errno()));
    if (!(it.revents & ZMQ_POLLIN)) continue;
    char buf[128];
    int n = zmq_recv(s, buf, sizeof buf - 1, 0);
    if (n < 0) continue;
    buf[n < (int)sizeof buf - 1 ? n : (int)sizeof buf - 1] = '\0';
    int got;
    if (!strncmp(buf, "ERR ", 4))
      return sg_err_set(SG_EPEER, "clock sync: %s refused: %s", ep, buf + 4);
    if (sscanf(buf, "CLK %d %lf", &got, h) != 2 || !isfinite(*h))
      return sg_err_set(SG_EPROTO, "clock sync: %s: malformed answer", ep);
    if (got == seq) return SG_OK;
  }
}

/* The pings on a connected socket; the best one into est. */
static int clock_pings(void *s, const char *ep, int rank, double deadline_s, sg_clock_est_t *est) {
  double best = INFINITY;
  for (int i = 0; i < SG_CLOCK_PINGS; i++) {
    char msg[64];
    snprintf(msg, sizeof msg, "SGCLK1 %d %d", rank, i);
    double h, t1 = sg_wall();
    if (zmq_send(s, msg, strlen(msg), 0) < 0)
      return sg_err_set(SG_EIO, "clock sync: %s: send: %s", ep, zmq_strerror(zmq_errno()));
    SG_CHECK(clock_answer(s, ep, i, deadline_s, &h));
    double t2 = sg_wall();
    if (t2 - t1 < best) {
      best = t2 - t1;
      est->offset_s = h - 0.5 * (t1 + t2);
      est->unc_s = 0.5 * (t2 - t1);
      est->at_s = 0.5 * (t1 + t2);
    }
  }
  return SG_OK;
}

int sg_clock_sync(const char *ep, int rank, const sg_keys_t *keys, double deadline_s,
                  sg_clock_est_t *est) {
  int rc = SG_OK, zero = 0;
  int64_t maxmsg = 256;
  void *ctx = zmq_ctx_new(), *s = ctx ? zmq_socket(ctx, ZMQ_DEALER) : NULL;
  if (!s) {
    rc = sg_err_set(SG_ENOMEM, "clock sync: no ZeroMQ context or socket");
    goto out;
  }
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  if (keys && !strncmp(ep, "tcp://", 6))
    SG_TRY(sg_curve_client(s, keys, rank, SG_AUTH_HARNESS));
  if (zmq_connect(s, ep) != 0) {
    rc = sg_err_set(SG_EIO, "clock sync: cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
    goto out;
  }
  rc = clock_pings(s, ep, rank, deadline_s, est);
fail:
out:
  if (s) zmq_close(s);
  if (ctx) zmq_ctx_term(ctx);
  return rc;
}
