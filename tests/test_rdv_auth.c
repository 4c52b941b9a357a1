/* test_rdv_auth.c - the rendezvous takes a registration only from the rank
 * it names (the hijack: register as rank k before rank k does, and receive
 * its traffic).  A real rendezvous server on loopback tcp with the run's
 * keys and a ZAP handler; clients are DEALER sockets in this process.
 */
#include <zmq.h>

#include "auth.h"
#include "clock.h"
#include "clock_sync.h"
#include "test.h"
#include "rendezvous.h"
#include "transport.h"

/* Register `body` as identity `as` (its CURVE key; -1: no CURVE) and
 * return the server's reply (static), serving the rendezvous meanwhile. */
static const char *reg(void *ctx, sg_rdv_t *rdv, const sg_keys_t *k, int as, const char *body,
                       void **keep) {
  static char reply[4096];
  void *d = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0;
  zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
  if (as >= 0) sg_curve_client(d, k, as, SG_AUTH_HARNESS);
  zmq_connect(d, sg_rdv_endpoint(rdv));
  zmq_send(d, body, strlen(body), 0);
  reply[0] = '\0';
  for (double t0 = sg_now(); sg_now() - t0 < 5;) {
    sg_rdv_handle(rdv);
    zmq_pollitem_t it = {.socket = d, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 20) == 1) {
      int n = zmq_recv(d, reply, sizeof reply - 1, 0);
      reply[n < 0 ? 0 : n] = '\0';
      break;
    }
    if (keep) break; /* a registration that waits for the others */
  }
  if (keep) *keep = d;
  else zmq_close(d);
  return reply;
}

TEST(registration_only_as_yourself) {
  sg_keys_t *k = NULL;
  sg_zap_t *zap = NULL;
  sg_rdv_t *rdv = NULL;
  void *ctx = zmq_ctx_new(), *r0 = NULL;
  CHECK(sg_keys_new(&k, 2) == 0);
  CHECK(sg_zap_start(&zap, ctx, k) == 0);
  CHECK(sg_rdv_new(&rdv, ctx, "tcp://127.0.0.1:*", 2, k) == 0);
  /* rank 1's key registering as rank 0 first: refused */
  const char *r = reg(ctx, rdv, k, 1, "SGRDV1 0 2 evil tcp://127.0.0.1:9", NULL);
  CHECK_MSG(!strncmp(r, "ERR refused", 11), "reply '%s'", r);
  /* a refusal names neither the rank count nor a host */
  CHECK_MSG(!strstr(r, " 2 ") && !strstr(r, "evil"), "reply '%s'", r);
  /* the real ranks then register and get the table */
  reg(ctx, rdv, k, 0, "SGRDV1 0 2 h0 tcp://127.0.0.1:10", &r0);
  r = reg(ctx, rdv, k, 1, "SGRDV1 1 2 h1 tcp://127.0.0.1:11", NULL);
  CHECK_MSG(!strncmp(r, "OK 2\n0 h0 tcp://127.0.0.1:10\n", 29), "table '%s'", r);
  CHECK(sg_rdv_refused(rdv) == 1);
  zmq_close(r0);
  sg_rdv_destroy(&rdv);
  sg_zap_stop(&zap);
  zmq_ctx_term(ctx);
  sg_keys_destroy(&k);
}

/* The same hijack without keys succeeds: what the check above prevents. */
TEST(without_keys_the_hijack_works) {
  sg_rdv_t *rdv = NULL;
  void *ctx = zmq_ctx_new(), *r0 = NULL;
  CHECK(sg_rdv_new(&rdv, ctx, "tcp://127.0.0.1:*", 2, NULL) == 0);
  reg(ctx, rdv, NULL, -1, "SGRDV1 0 2 evil tcp://127.0.0.1:9", &r0);
  const char *r = reg(ctx, rdv, NULL, -1, "SGRDV1 1 2 h1 tcp://127.0.0.1:11", NULL);
  CHECK_MSG(strstr(r, "0 evil tcp://127.0.0.1:9"), "table '%s'", r);
  zmq_close(r0);
  sg_rdv_destroy(&rdv);
  zmq_ctx_term(ctx);
}

/* Clock pings (clock_sync.h): answered with the harness's time only for
 * the rank whose key sent them, at most SG_CLOCK_PINGS_MAX per rank;
 * malformed ones are refused.  Without the identity check (no keys) a
 * ping naming another rank is answered: what the check prevents. */
TEST(clock_pings_only_as_yourself_and_bounded) {
  sg_keys_t *k = NULL;
  sg_zap_t *zap = NULL;
  sg_rdv_t *rdv = NULL, *open_rdv = NULL;
  void *ctx = zmq_ctx_new();
  CHECK(sg_keys_new(&k, 2) == 0);
  CHECK(sg_zap_start(&zap, ctx, k) == 0);
  CHECK(sg_rdv_new(&rdv, ctx, "tcp://127.0.0.1:*", 2, k) == 0);
  const char *r = reg(ctx, rdv, k, 1, "SGCLK1 0 5", NULL);
  CHECK_MSG(!strcmp(r, "ERR clock ping refused"), "reply '%s'", r);
  r = reg(ctx, rdv, k, 1, "SGCLK1 1 5 x", NULL);
  CHECK_MSG(!strcmp(r, "ERR clock ping refused"), "reply '%s'", r);
  double before = sg_wall();
  r = reg(ctx, rdv, k, 1, "SGCLK1 1 5", NULL);
  int seq = -1;
  double h = 0;
  CHECK_MSG(sscanf(r, "CLK %d %lf", &seq, &h) == 2 && seq == 5, "reply '%s'", r);
  CHECK(h >= before - 1e-6 && h <= sg_wall() + 1e-6);
  for (int i = 1; i < SG_CLOCK_PINGS_MAX; i++) {
    char body[32];
    snprintf(body, sizeof body, "SGCLK1 1 %d", i);
    r = reg(ctx, rdv, k, 1, body, NULL);
    CHECK_MSG(!strncmp(r, "CLK ", 4), "ping %d: '%s'", i, r);
  }
  r = reg(ctx, rdv, k, 1, "SGCLK1 1 99", NULL);
  CHECK_MSG(!strcmp(r, "ERR clock ping refused"), "reply '%s'", r);
  CHECK(sg_rdv_refused(rdv) == 3);
  CHECK(sg_rdv_new(&open_rdv, ctx, "tcp://127.0.0.1:*", 2, NULL) == 0);
  r = reg(ctx, open_rdv, NULL, -1, "SGCLK1 0 1", NULL);
  CHECK_MSG(!strncmp(r, "CLK 1 ", 6), "reply '%s'", r);
  sg_rdv_destroy(&open_rdv);
  sg_rdv_destroy(&rdv);
  sg_zap_stop(&zap);
  zmq_ctx_term(ctx);
  sg_keys_destroy(&k);
}
