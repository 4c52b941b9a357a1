/* test_records_batch.c - step records travel in batches (records.h): a
 * rank's steps reach the harness as few SG_REC_STEPS messages, and the
 * records server hands them out one STEP at a time, in the order they were
 * made, before any later record.  Real ipc sockets. */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "records.h"
#include "records_server.h"

enum { NSTEPS = 150 };

typedef struct where {
  char dir[32], ep[64];
} where_t;

static void where_new(where_t *w) {
  snprintf(w->dir, sizeof w->dir, "/tmp/sgdlab-recb-XXXXXX");
  CHECK(mkdtemp(w->dir));
  snprintf(w->ep, sizeof w->ep, "ipc://%s/rec", w->dir);
}

static void where_rm(where_t *w) {
  char p[64];
  snprintf(p, sizeof p, "%s/rec", w->dir);
  unlink(p);
  rmdir(w->dir);
}

/* NSTEPS steps back to back, then one evaluation. */
static void send_all(const char *ep) {
  sg_records_t *rec = NULL;
  CHECK(sg_records_open(&rec, ep, 1, "worker", sg_wall(), NULL) == SG_OK);
  for (int i = 0; i < NSTEPS; i++) {
    sg_step_rec_t s = {.step = i, .loss = 1.0, .staleness = -1};
    CHECK(sg_records_step(rec, &s) == SG_OK);
  }
  sg_eval_rec_t e = {.step = NSTEPS, .test_acc = 0.5};
  CHECK(sg_records_eval(rec, &e) == SG_OK);
  sg_records_close(&rec);
}

/* On the wire: HELLO, batches of at most SG_REC_STEPS_MAX steps holding
 * 0..NSTEPS-1 in order, then EVAL.  One message per step would be
 * NSTEPS + 2 messages; batching must make it far fewer. */
TEST(steps_travel_in_batches) {
  where_t w;
  where_new(&w);
  void *ctx = zmq_ctx_new(), *pull = zmq_socket(ctx, ZMQ_PULL);
  int tmo = 5000;
  zmq_setsockopt(pull, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  CHECK(zmq_bind(pull, w.ep) == 0);
  send_all(w.ep);
  int msgs = 0, next = 0, eval = 0;
  while (!eval && msgs < NSTEPS + 2) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, pull, 0) < 0) {
      zmq_msg_close(&m);
      break;
    }
    msgs++;
    sg_rec_header_t h;
    const unsigned char *p;
    CHECK(sg_rec_decode(zmq_msg_data(&m), zmq_msg_size(&m), 2, &h, &p) == SG_OK);
    if (h.type == SG_REC_STEPS || h.type == SG_REC_STEP) {
      CHECK(h.len / sizeof(sg_step_rec_t) <= SG_REC_STEPS_MAX);
      for (size_t k = 0; k < h.len / sizeof(sg_step_rec_t); k++) {
        sg_step_rec_t s;
        memcpy(&s, p + k * sizeof s, sizeof s);
        CHECK_EQ_INT((int)s.step, next++);
      }
    } else if (h.type == SG_REC_EVAL) {
      eval = 1;
    }
    zmq_msg_close(&m);
  }
  CHECK_EQ_INT(next, NSTEPS);
  CHECK_MSG(eval, "no EVAL after the steps");
  /* at least ceil(150/64) = 3 batches; a flush every 50 ms may add some */
  CHECK_MSG(msgs <= NSTEPS / 4, "%d messages for %d steps: not batched", msgs, NSTEPS);
  zmq_close(pull);
  zmq_ctx_term(ctx);
  where_rm(&w);
}

/* Through the records server: every step as its own STEP record, in
 * order, then the EVAL. */
TEST(the_server_hands_out_each_step_in_order) {
  where_t w;
  where_new(&w);
  sg_rec_server_t *srv = NULL;
  CHECK(sg_rec_server_open(&srv, w.ep, 2, NULL) == SG_OK);
  send_all(sg_rec_server_endpoint(srv));
  int next = 0, eval = 0;
  sg_rec_in_t in;
  for (double until = sg_now() + 5; !eval && sg_now() < until;) {
    sg_rec_server_wait(srv, -1, NULL, 50);
    while (!eval && sg_rec_server_recv(srv, &in) > 0) {
      CHECK(in.h.type != SG_REC_STEPS);
      if (in.h.type == SG_REC_STEP) {
        sg_step_rec_t s;
        CHECK_EQ_INT((int)in.h.len, (int)sizeof s);
        memcpy(&s, in.payload, sizeof s);
        CHECK_EQ_INT((int)s.step, next++);
        CHECK_EQ_INT(in.h.rank, 1);
      } else if (in.h.type == SG_REC_EVAL) {
        eval = 1;
      }
    }
  }
  CHECK_EQ_INT(next, NSTEPS);
  CHECK_MSG(eval, "no EVAL within 5 s");
  CHECK(sg_rec_server_dropped(srv) == 0);
  sg_rec_server_close(&srv);
  where_rm(&w);
}

/* A batch that is empty, cut inside a record, or longer than
 * SG_REC_STEPS_MAX is malformed. */
TEST(malformed_batches_are_refused) {
  enum { CAP = sizeof(sg_rec_header_t) + (SG_REC_STEPS_MAX + 1) * sizeof(sg_step_rec_t) };
  static unsigned char m[CAP];
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = SG_REC_STEPS, .rank = 0}, out;
  const unsigned char *p;
  const uint32_t lens[] = {0, sizeof(sg_step_rec_t) + 1,
                           (SG_REC_STEPS_MAX + 1) * sizeof(sg_step_rec_t)};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    h.len = lens[i];
    memcpy(m, &h, sizeof h);
    CHECK(sg_rec_decode(m, sizeof h + h.len, 2, &out, &p) == SG_EFORMAT);
  }
  h.len = 2 * sizeof(sg_step_rec_t); /* and a good one passes */
  memcpy(m, &h, sizeof h);
  CHECK(sg_rec_decode(m, sizeof h + h.len, 2, &out, &p) == SG_OK);
}
