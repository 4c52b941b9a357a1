/* test_zmq_cma.c - large isends over ipc are read by the receiver from the
 * sender's memory (transport_zmq_cma.c, "same-host sends read by the
 * receiver").  Two forked ranks, the rendezvous served here, OS pipes to
 * order the ranks' steps (no sleeps):
 *
 *   rank 0: isend A (tag 5) [broken: unmap A] | tell 1 | hear 1 |
 *           isend B (tag 6) | send 4 B (tag 7) | wait A, wait B
 *   rank 1: hear 0 | irecv B (tag 6) | tell 0 | recv tag 7 | recv A | wait B
 *
 * While rank 1 waits for tag 7 it takes A unexpected (read into a queued
 * message) and B into its posted irecv, so both paths are checked byte for
 * byte.  Broken: A is unmapped before rank 1 reads it, which only a reader
 * of rank 0's memory notices: both ranks must fail, loudly and at once,
 * where a socket transport would have delivered A or crashed rank 0.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "rendezvous.h"
#include "test.h"
#include "transport.h"
#include "transport_new.h"

#define BIG (((size_t)1 << 20) + 3)

typedef struct result {
  int rc, bad_a, bad_b; /* bad_*: index of the first wrong byte + 1, or 0 */
  int cma;              /* sg_comm_zmq_cma of the rank's comm */
  char msg[512];
} result_t;

static void fill(uint8_t *b, int seed) {
  for (size_t k = 0; k < BIG; k++) b[k] = (uint8_t)(k * 7 + (k >> 9) + (size_t)seed);
}
static int first_bad(const uint8_t *b, int seed) {
  for (size_t k = 0; k < BIG; k++)
    if (b[k] != (uint8_t)(k * 7 + (k >> 9) + (size_t)seed)) return (int)k + 1;
  return 0;
}

static int fail(result_t *res, int rc) {
  res->rc = rc;
  snprintf(res->msg, sizeof res->msg, "%s", sg_err_msg());
  return rc;
}

static int rank0(sg_comm_t *c, int broken, int to1, int from1, result_t *res) {
  uint8_t *a = mmap(NULL, BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uint8_t *b = malloc(BIG), x = 1;
  sg_req_t *ra = NULL, *rb = NULL;
  if (a == MAP_FAILED || !b) return fail(res, -1);
  fill(a, 1);
  fill(b, 2);
  if (sg_isend(c, 1, 5, a, BIG, &ra) < 0) return fail(res, -1);
  if (broken) munmap(a, BIG); /* the planted fault: what rank 1 reads is gone */
  if (write(to1, &x, 1) != 1 || read(from1, &x, 1) != 1) return fail(res, -1);
  if (sg_isend(c, 1, 6, b, BIG, &rb) < 0 || sg_send(c, 1, 7, "go!", 4) < 0)
    return fail(res, -1);
  int rc = sg_wait(c, &ra, NULL);
  if (rc < 0) return fail(res, rc);
  if ((rc = sg_wait(c, &rb, NULL)) < 0) return fail(res, rc);
  return 0;
}

static int rank1(sg_comm_t *c, int to0, int from0, result_t *res) {
  uint8_t *a = calloc(1, BIG), *b = calloc(1, BIG), x = 1;
  char go[4];
  sg_req_t *rb = NULL;
  if (!a || !b || read(from0, &x, 1) != 1) return fail(res, -1);
  if (sg_irecv(c, 0, 6, b, BIG, &rb) < 0 || write(to0, &x, 1) != 1) return fail(res, -1);
  int rc = sg_recv(c, 0, 7, go, sizeof go, NULL);
  if (rc < 0 || (rc = sg_recv(c, 0, 5, a, BIG, NULL)) < 0 || (rc = sg_wait(c, &rb, NULL)) < 0)
    return fail(res, rc);
  res->bad_a = first_bad(a, 1);
  res->bad_b = first_bad(b, 2);
  return 0;
}

/* The acknowledgement of a rank's last read must reach its sender even
 * when the reader leaves at once (destroys its comm) with that
 * acknowledgement kept, not sent (as one the sender's full queue refused;
 * planted here: plant_keep_acks keeps every acknowledgement until
 * destroy):
 *
 *   rank 0: isend A (tag 5) | wait A
 *   rank 1: recv A | destroy
 *
 * A destroy that dropped what was kept left rank 0's wait for A to end at
 * the deadline ("rank 1 (vm) accepted nothing for 10.0 s"). */
static int rank0_exit(sg_comm_t *c, result_t *res) {
  uint8_t *a = malloc(BIG);
  sg_req_t *ra = NULL;
  if (!a) return fail(res, -1);
  fill(a, 1);
  if (sg_isend(c, 1, 5, a, BIG, &ra) < 0) return fail(res, -1);
  int rc = sg_wait(c, &ra, NULL);
  return rc < 0 ? fail(res, rc) : 0;
}

static int rank1_exit(sg_comm_t **c, result_t *res) {
  uint8_t *a = calloc(1, BIG);
  if (!a || sg_recv(*c, 0, 5, a, BIG, NULL) < 0) return fail(res, -1);
  res->cma = sg_comm_zmq_cma(*c);
  sg_comm_destroy(c); /* at once, as a rank whose run is over */
  res->bad_a = first_bad(a, 1);
  return 0;
}

static int no_cma;   /* zmq_cma: off for the next pair */
static int exit_ack; /* run rank0_exit / rank1_exit */

static void child(int rank, const char *dir, const char *rdv, int broken, int p01[2],
                  int p10[2], int out) {
  result_t res = {0};
  sg_comm_t *c = NULL;
  sg_zmq_cfg_t cfg = {.rank = rank, .size = 2, .deadline_s = 10, .scheme = "ipc",
                      .rendezvous = rdv, .ipc_dir = dir, .no_cma = no_cma,
                      .plant_keep_acks = exit_ack && rank == 1};
  if (sg_comm_zmq_new(&c, &cfg) < 0) fail(&res, -1);
  else if (exit_ack && rank == 0) rank0_exit(c, &res);
  else if (exit_ack) rank1_exit(&c, &res);
  else if (rank == 0) rank0(c, broken, p01[1], p10[0], &res);
  else rank1(c, p10[1], p01[0], &res);
  if (c) res.cma = sg_comm_zmq_cma(c);
  sg_comm_destroy(&c);
  _exit(write(out, &res, sizeof res) == sizeof res ? 0 : 1);
}

/* Run the two ranks; res[r] is what rank r reported.  0, or -1 when a
 * rank did not report within 30 s. */
static int run_pair(int broken, result_t res[2]) {
  char dir[] = "/tmp/sgcma-XXXXXX", rdv_ep[64];
  if (!mkdtemp(dir)) return -1;
  snprintf(rdv_ep, sizeof rdv_ep, "ipc://%s/rdv", dir);
  int p01[2], p10[2], out[2][2];
  if (pipe(p01) || pipe(p10) || pipe(out[0]) || pipe(out[1])) return -1;
  void *ctx = zmq_ctx_new();
  sg_rdv_t *rdv = NULL;
  if (sg_rdv_new(&rdv, ctx, rdv_ep, 2, NULL) < 0) return -1;
  pid_t pid[2];
  for (int r = 0; r < 2; r++)
    if ((pid[r] = fork()) == 0) child(r, dir, rdv_ep, broken, p01, p10, out[r][1]);
  int got = 0, rc = 0;
  for (double t0 = sg_now(); got < 2 && sg_now() - t0 < 30;) {
    zmq_pollitem_t it[3] = {{.socket = sg_rdv_socket(rdv), .events = ZMQ_POLLIN},
                            {.fd = out[0][0], .events = ZMQ_POLLIN},
                            {.fd = out[1][0], .events = ZMQ_POLLIN}};
    if (zmq_poll(it, 3, 100) <= 0) continue;
    if (it[0].revents) sg_rdv_handle(rdv);
    for (int r = 0; r < 2; r++)
      if (it[1 + r].revents && read(out[r][0], &res[r], sizeof res[r]) == sizeof res[r]) {
        close(out[r][0]), out[r][0] = -1, got++;
      }
  }
  if (got < 2) rc = -1;
  for (int r = 0; r < 2; r++) {
    kill(pid[r], SIGKILL); /* a rank that reported is exiting anyway */
    waitpid(pid[r], NULL, 0);
  }
  sg_rdv_destroy(&rdv);
  zmq_ctx_term(ctx);
  DIR *d = opendir(dir); /* the rendezvous socket and what a rank left */
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[sizeof dir + 258];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.') unlink(path);
  }
  if (d) closedir(d);
  if (rmdir(dir) != 0) rc = -1;
  return rc;
}

TEST(cma_delivers_posted_and_unexpected_byte_for_byte) {
  result_t res[2] = {{0}, {0}};
  CHECK_EQ_INT(run_pair(0, res), 0);
  CHECK_MSG(res[0].rc == 0, "rank 0: %s", res[0].msg);
  CHECK_MSG(res[1].rc == 0, "rank 1: %s", res[1].msg);
  CHECK_MSG(res[1].bad_a == 0, "unexpected message: byte %d wrong", res[1].bad_a - 1);
  CHECK_MSG(res[1].bad_b == 0, "posted receive: byte %d wrong", res[1].bad_b - 1);
}

TEST(cma_read_failure_fails_both_ranks_loudly) {
  result_t res[2] = {{0}, {0}};
  double t0 = sg_now();
  CHECK_EQ_INT(run_pair(1, res), 0);
  fprintf(stderr, "rank 0: %s\nrank 1: %s\n", res[0].msg, res[1].msg);
  CHECK(sg_now() - t0 < 9); /* well inside the 10 s deadline: no timeout */
  CHECK_EQ_INT(res[1].rc, SG_EIO);
  CHECK(strstr(res[1].msg, "cannot read a 1048579-byte message from rank 0"));
  CHECK_EQ_INT(res[0].rc, SG_EIO);
  CHECK(strstr(res[0].msg, "rank 1") && strstr(res[0].msg, "could not read"));
}

/* zmq_cma: off keeps every byte in ZeroMQ's sockets: the comm says so and
 * the same transfers arrive byte for byte; auto (the pair above) reads. */
TEST(cma_off_sends_through_the_sockets) {
  result_t res[2] = {{0}, {0}};
  CHECK_EQ_INT(run_pair(0, res), 0);
  CHECK(res[0].cma == 1 && res[1].cma == 1);
  no_cma = 1;
  memset(res, 0, sizeof res);
  CHECK_EQ_INT(run_pair(0, res), 0);
  no_cma = 0;
  CHECK(res[0].cma == 0 && res[1].cma == 0);
  CHECK_MSG(res[0].rc == 0 && res[1].rc == 0, "%s / %s", res[0].msg, res[1].msg);
  CHECK_MSG(res[1].bad_a == 0 && res[1].bad_b == 0, "bytes wrong: %d %d", res[1].bad_a,
            res[1].bad_b);
}

/* The last read's acknowledgement outlives the reader's comm (see
 * rank0_exit): rank 0's wait ends well inside its 10 s deadline. */
TEST(cma_ack_kept_at_destroy_still_reaches_the_sender) {
  result_t res[2] = {{0}, {0}};
  double t0 = sg_now();
  exit_ack = 1;
  int rc = run_pair(0, res);
  exit_ack = 0;
  CHECK_EQ_INT(rc, 0);
  CHECK(res[1].cma == 1);
  CHECK_MSG(res[1].rc == 0, "rank 1: %s", res[1].msg);
  CHECK_MSG(res[0].rc == 0, "rank 0: %s", res[0].msg);
  CHECK_MSG(res[1].bad_a == 0, "byte %d wrong", res[1].bad_a - 1);
  CHECK(sg_now() - t0 < 9);
}
