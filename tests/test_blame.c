/* test_blame.c - blame as data: sg_err_blame() next to the message, and
 * the DONE record carrying the blamed rank and reason from a rank's
 * records client to the harness's records server (a real ipc socket).
 * The silent-peer case end to end, through `sgdlab run`, is in
 * test_faults.c (ring over mpi, a stopped rank: run_info blame.*). */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "records.h"
#include "records_server.h"

TEST(blame_belongs_to_its_message) {
  int why;
  CHECK(sg_err_blame(sg_err_set(SG_ETIMEOUT, "rank 1 sent nothing"), 1, SG_BLAME_PEER_TIMEOUT) ==
        SG_ETIMEOUT);
  CHECK_EQ_INT(sg_err_blamed(&why), 1);
  CHECK_EQ_INT(why, SG_BLAME_PEER_TIMEOUT);
  sg_err_set(SG_EIO, "a later, unrelated error"); /* a new message: no stale blame */
  CHECK_EQ_INT(sg_err_blamed(&why), -1);
  CHECK_EQ_INT(why, SG_BLAME_NONE);
  sg_err_blame(SG_EIO, 2, 99); /* an unknown reason blames nobody */
  CHECK_EQ_INT(sg_err_blamed(&why), -1);
  CHECK(!strcmp(sg_blame_name(SG_BLAME_BAD_MESSAGE), "bad_message"));
  sg_err_clear();
}

/* Take the next record of `type` from the server, waiting up to 5 s. */
static int next_of(sg_rec_server_t *srv, uint32_t type, sg_rec_in_t *in) {
  for (double until = sg_now() + 5; sg_now() < until;) {
    sg_rec_server_wait(srv, -1, NULL, 50);
    while (sg_rec_server_recv(srv, in) > 0)
      if (in->h.type == type) return 1;
  }
  return 0;
}

/* rank 2 of 3 sends DONE(status, blamed, why); the server's view of it. */
static void done_round_trip(int status, int blamed, int why, sg_rec_done_t *got, char *msg,
                            size_t cap) {
  char dir[] = "/tmp/sgdlab-blame-XXXXXX", ep[64];
  CHECK(mkdtemp(dir));
  snprintf(ep, sizeof ep, "ipc://%s/rec", dir);
  sg_rec_server_t *srv = NULL;
  sg_records_t *rec = NULL;
  sg_rec_in_t in;
  memset(got, 0xff, sizeof *got);
  CHECK(sg_rec_server_open(&srv, ep, 3, NULL) == SG_OK);
  CHECK(sg_records_open(&rec, sg_rec_server_endpoint(srv), 2, "worker", sg_wall(), NULL) == SG_OK);
  CHECK(sg_records_done(rec, status, "rank 1 (vm) sent nothing", blamed, why) == SG_OK);
  int have = next_of(srv, SG_REC_DONE, &in);
  CHECK_MSG(have, "no DONE within 5 s");
  if (have) {
    CHECK_EQ_INT(in.h.rank, 2);
    memcpy(got, in.payload, sizeof *got);
    snprintf(msg, cap, "%s", (const char *)in.payload + sizeof *got);
  }
  sg_records_close(&rec); /* before the server: its close is the rank's lifeline */
  sg_rec_server_close(&srv);
  char p[64];
  snprintf(p, sizeof p, "%s/rec", dir);
  unlink(p);
  rmdir(dir);
}

TEST(done_carries_the_blamed_rank_and_reason) {
  sg_rec_done_t d;
  char msg[128] = "";
  done_round_trip(1, 1, SG_BLAME_PEER_TIMEOUT, &d, msg, sizeof msg);
  CHECK_EQ_INT(d.status, 1);
  CHECK_EQ_INT(d.blamed, 1);
  CHECK_EQ_INT(d.reason, SG_BLAME_PEER_TIMEOUT);
  CHECK(!strcmp(msg, "rank 1 (vm) sent nothing"));
  /* a failure nobody set a blame for: the rank blames itself */
  done_round_trip(1, -1, SG_BLAME_NONE, &d, msg, sizeof msg);
  CHECK_EQ_INT(d.blamed, 2);
  CHECK_EQ_INT(d.reason, SG_BLAME_SELF);
  /* ok: nobody */
  done_round_trip(0, 1, SG_BLAME_PEER_TIMEOUT, &d, msg, sizeof msg);
  CHECK_EQ_INT(d.blamed, -1);
  CHECK_EQ_INT(d.reason, SG_BLAME_NONE);
}

/* The server trusts nothing: a DONE without the blame fields, or with an
 * unknown reason, is malformed. */
TEST(done_without_its_fields_is_refused) {
  unsigned char m[128] = {0};
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = SG_REC_DONE, .rank = 1};
  sg_rec_header_t out;
  const unsigned char *p;
  int32_t st = 1;
  memcpy(m + sizeof h, &st, sizeof st); /* status, then the text: no fields */
  memcpy(m + sizeof h + 4, "x", 2);
  h.len = 6;
  memcpy(m, &h, sizeof h);
  CHECK(sg_rec_decode(m, sizeof h + h.len, 3, &out, &p) == SG_EFORMAT);
  sg_rec_done_t d = {.status = 1, .blamed = 0, .reason = SG_BLAME_END_};
  memcpy(m + sizeof h, &d, sizeof d);
  memcpy(m + sizeof h + sizeof d, "x", 2);
  h.len = sizeof d + 2;
  memcpy(m, &h, sizeof h);
  CHECK(sg_rec_decode(m, sizeof h + h.len, 3, &out, &p) == SG_EFORMAT);
  d.reason = SG_BLAME_BAD_MESSAGE;
  memcpy(m + sizeof h, &d, sizeof d);
  CHECK(sg_rec_decode(m, sizeof h + h.len, 3, &out, &p) == SG_OK);
}
