/* test_zmq_cma_attack.c - the ipc memory-read path (transport_zmq_cma.c, "same-
 * host sends read by the receiver") under forged frames.  Two forked ranks
 * over ipc; this process, the attacker, connects its own PUSH socket to a
 * rank's ipc socket and sends what no correct rank sends, claiming to be
 * the other rank.  The descriptors name g_src, which fork leaves at the
 * same address in rank 0.  OS pipes order the steps (no sleeps):
 *
 *   trunc  rank 1 posts 16 B, a descriptor says 1 MiB of rank 0's memory:
 *          SG_ETRUNC, and not a byte past the 16 written
 *   lost   rank 1 posts A (tag 6) and B (tag 8) and waits on B; the
 *          descriptor for A names an address range that wraps: the wait on
 *          B fails naming rank 0, and the later wait on A fails at once
 *          with the read's error, not at the deadline with a timeout
 *   zero   a descriptor of 0 bytes: an empty message, nothing read
 *   acks   acknowledgements to rank 0 for an id it never used, twice, and
 *          rank 1's own answers to the forged descriptors: all dropped and
 *          counted, rank 0 unharmed
 *   other  a process of another user (nobody) cannot connect to a rank's
 *          socket at all: the ipc directory is 0700 (only as root)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
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
#define DEADLINE 3.0
#define TAG_ACK (SG_TAG_MAX + 64) /* the transport's acknowledgement tag */
enum { F_CMA = 2, F_ACK = 4 };    /* its header flags */

typedef struct hdr { int32_t src, tag; uint64_t len; uint32_t flags, pad; } hdr_t;
typedef struct desc { uint64_t addr, id; } desc_t;

typedef struct result {
  int trunc_rc, guard_bad;          /* trunc */
  int lost_b_rc, lost_a_rc;         /* lost */
  double lost_a_s;                  /* how long the wait on A took */
  int zero_rc;                      /* zero */
  size_t zero_bytes;
  long long dropped;                /* rank 0: acks dropped */
  int rc;                           /* set-up */
  char msg_b[300], msg_a[300];
} result_t;

static uint8_t g_src[BIG]; /* at the same address in rank 0 (fork) */

static int hear(int fd) { uint8_t x; return read(fd, &x, 1) == 1 ? 0 : -1; }
static int tell(int fd) { uint8_t x = 1; return write(fd, &x, 1) == 1 ? 0 : -1; }

static void rank1(sg_comm_t *c, int to_att, int from_att, result_t *res) {
  uint8_t small[64], *big = calloc(1, BIG), four[4];
  sg_req_t *a = NULL, *b = NULL;
  sg_status_t st;
  memset(small, 0xAB, sizeof small);
  if (!big || sg_irecv(c, 0, 5, small, 16, &a) < 0 || tell(to_att) < 0) return;
  res->trunc_rc = sg_wait(c, &a, NULL);
  for (size_t k = 16; k < sizeof small; k++)
    if (small[k] != 0xAB) res->guard_bad = (int)k;
  sg_err_clear();
  if (sg_irecv(c, 0, 6, big, BIG, &a) < 0 || sg_irecv(c, 0, 8, four, 4, &b) < 0 || tell(to_att) < 0)
    return;
  res->lost_b_rc = sg_wait(c, &b, NULL);
  snprintf(res->msg_b, sizeof res->msg_b, "%s", sg_err_msg());
  double t0 = sg_now();
  res->lost_a_rc = sg_wait(c, &a, NULL);
  res->lost_a_s = sg_now() - t0;
  snprintf(res->msg_a, sizeof res->msg_a, "%s", sg_err_msg());
  sg_err_clear();
  if (sg_irecv(c, 0, 7, big, BIG, &a) < 0 || tell(to_att) < 0) return;
  res->zero_rc = sg_wait(c, &a, &st);
  res->zero_bytes = st.bytes;
  hear(from_att); /* the acknowledgements have been sent */
  sg_send(c, 0, 9, "end", 4);
  free(big);
}

/* Rank 0 stays alive (its memory is read) until rank 1's "end", then
 * counts what it dropped: the 2 forged acks and rank 1's 3 answers to the
 * forged descriptors, all for ids it never used. */
static void rank0(sg_comm_t *c, result_t *res) {
  char end[4];
  sg_status_t st;
  for (double t0 = sg_now(); c->dropped < 5 && sg_now() - t0 < 4 * DEADLINE;) {
    sg_probe_within(c, 0.05, 1, 10, &st); /* tag 10 never comes: takes what arrives */
    sg_err_clear();
  }
  res->rc = sg_recv(c, 1, 9, end, sizeof end, NULL);
  res->dropped = (long long)c->dropped;
}

static void child(int rank, const char *dir, const char *rdv, int to_att, int from_att, int out) {
  result_t res = {.rc = -1};
  sg_comm_t *c = NULL;
  sg_zmq_cfg_t cfg = {.rank = rank, .size = 2, .deadline_s = DEADLINE, .scheme = "ipc",
                      .rendezvous = rdv, .ipc_dir = dir};
  if (sg_comm_zmq_new(&c, &cfg) == 0) {
    res.rc = 0;
    if (rank == 0) rank0(c, &res);
    else rank1(c, to_att, from_att, &res);
  }
  sg_comm_destroy(&c);
  _exit(write(out, &res, sizeof res) == sizeof res ? 0 : 1);
}

/* The ipc socket path of `rank` in dir ("" when not there). */
static void rank_socket(const char *dir, int rank, char *path, size_t cap) {
  DIR *d = opendir(dir);
  path[0] = '\0';
  for (struct dirent *e; d && (e = readdir(d));) {
    long pid;
    int r, n;
    if (sscanf(e->d_name, "sgdlab-%ld-%d-%d", &pid, &r, &n) == 3 && r == rank)
      snprintf(path, cap, "%s/%s", dir, e->d_name);
  }
  if (d) closedir(d);
}

static void forge(void *s, int src, int tag, uint32_t flags, uint64_t len, uint64_t addr,
                  uint64_t id) {
  hdr_t h = {.src = src, .tag = tag, .len = len, .flags = flags};
  desc_t d = {.addr = addr, .id = id};
  zmq_send(s, &h, sizeof h, ZMQ_SNDMORE);
  zmq_send(s, &d, sizeof d, 0);
}

/* errno of connect(2) to path by user nobody, in a child; 0: connected,
 * -1: not root (nothing to check). */
static int nobody_connects(const char *path) {
  if (geteuid() != 0) return -1;
  int p[2];
  if (pipe(p)) return -2;
  pid_t pid = fork();
  if (pid == 0) {
    int e = 0;
    if (setgid(65534) || setuid(65534)) e = 255;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (!e && connect(fd, (struct sockaddr *)&a, sizeof a) < 0) e = errno;
    _exit(write(p[1], &e, sizeof e) == sizeof e ? 0 : 1);
  }
  int e = -2;
  if (read(p[0], &e, sizeof e) != sizeof e) e = -2;
  waitpid(pid, NULL, 0);
  close(p[0]), close(p[1]);
  return e;
}

/* The attacker's steps against rank 1 (at its pipe's signals) and rank 0. */
static void attack(const char *dir, int from1, int to1, int *other) {
  char p1[300], p0[300], ep[310];
  void *ctx = zmq_ctx_new(), *s1 = zmq_socket(ctx, ZMQ_PUSH), *s0 = zmq_socket(ctx, ZMQ_PUSH);
  int linger = 1000;
  zmq_setsockopt(s1, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s0, ZMQ_LINGER, &linger, sizeof linger);
  if (hear(from1) == 0) { /* trunc: rank 1 has posted 16 B */
    rank_socket(dir, 1, p1, sizeof p1);
    rank_socket(dir, 0, p0, sizeof p0);
    *other = nobody_connects(p1);
    snprintf(ep, sizeof ep, "ipc://%s", p1);
    zmq_connect(s1, ep);
    snprintf(ep, sizeof ep, "ipc://%s", p0);
    zmq_connect(s0, ep);
    forge(s1, 0, 5, F_CMA, BIG, (uint64_t)(uintptr_t)g_src, 1);
  }
  if (hear(from1) == 0) /* lost: a range from 4 KiB below the top of memory */
    forge(s1, 0, 6, F_CMA, BIG, UINT64_MAX - 4095, 2);
  if (hear(from1) == 0) forge(s1, 0, 7, F_CMA, 0, (uint64_t)(uintptr_t)g_src, 3); /* zero */
  forge(s0, 1, TAG_ACK, F_ACK, sizeof(desc_t), 0, 424242); /* acks: never sent, twice */
  forge(s0, 1, TAG_ACK, F_ACK, sizeof(desc_t), 0, 424242);
  tell(to1);
  zmq_close(s1);
  zmq_close(s0);
  zmq_ctx_term(ctx);
}

/* Run the ranks and the attack; res[r] is what rank r reported. */
static int run_case(result_t res[2], int *other) {
  char dir[] = "/tmp/sgcmaatk-XXXXXX", rdv_ep[64];
  if (!mkdtemp(dir)) return -1;
  snprintf(rdv_ep, sizeof rdv_ep, "ipc://%s/rdv", dir);
  int to_att[2], from_att[2], out[2][2];
  if (pipe(to_att) || pipe(from_att) || pipe(out[0]) || pipe(out[1])) return -1;
  for (size_t k = 0; k < BIG; k++) g_src[k] = (uint8_t)(k * 13);
  void *ctx = zmq_ctx_new();
  sg_rdv_t *rdv = NULL;
  if (sg_rdv_new(&rdv, ctx, rdv_ep, 2, NULL) < 0) return -1;
  pid_t pid[2];
  for (int r = 0; r < 2; r++)
    if ((pid[r] = fork()) == 0) child(r, dir, rdv_ep, to_att[1], from_att[0], out[r][1]);
  /* our copies of the ranks' ends closed: a rank that dies is an EOF */
  close(to_att[1]), close(from_att[0]), close(out[0][1]), close(out[1][1]);
  for (double t0 = sg_now(); !sg_rdv_complete(rdv) && sg_now() - t0 < 20;) {
    zmq_pollitem_t it = {.socket = sg_rdv_socket(rdv), .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, 100) > 0) sg_rdv_handle(rdv);
  }
  attack(dir, to_att[0], from_att[1], other);
  int got = 0;
  for (double t0 = sg_now(); got < 2 && sg_now() - t0 < 30;) {
    zmq_pollitem_t it[2] = {{.fd = out[0][0], .events = ZMQ_POLLIN},
                            {.fd = out[1][0], .events = ZMQ_POLLIN}};
    if (zmq_poll(it, 2, 100) <= 0) continue;
    for (int r = 0; r < 2; r++)
      if (it[r].revents && out[r][0] >= 0 && read(out[r][0], &res[r], sizeof res[r]) == sizeof res[r])
        close(out[r][0]), out[r][0] = -1, got++;
  }
  for (int r = 0; r < 2; r++) {
    kill(pid[r], SIGKILL); /* a rank that reported is exiting anyway */
    waitpid(pid[r], NULL, 0);
  }
  sg_rdv_destroy(&rdv);
  zmq_ctx_term(ctx);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    char path[sizeof dir + 258];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (e->d_name[0] != '.') unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
  return got == 2 ? 0 : -1;
}

TEST(forged_descriptors_and_acks_fail_cleanly) {
  result_t res[2] = {{0}, {0}};
  int other = -3;
  CHECK_EQ_INT(run_case(res, &other), 0);
  fprintf(stderr, "trunc: rc %d, guard %d\nlost: B rc %d (%s)\n      A rc %d after %.2f s (%s)\n"
          "zero: rc %d, %zu B\nacks: rank 0 dropped %lld, rc %d\nnobody's connect: %s\n",
          res[1].trunc_rc, res[1].guard_bad, res[1].lost_b_rc, res[1].msg_b, res[1].lost_a_rc,
          res[1].lost_a_s, res[1].msg_a, res[1].zero_rc, res[1].zero_bytes, res[0].dropped,
          res[0].rc, other > 0 ? strerror(other) : other == 0 ? "CONNECTED" : "not checked");
  CHECK_EQ_INT(res[1].rc, 0);
  CHECK_EQ_INT(res[1].trunc_rc, SG_ETRUNC);
  CHECK_EQ_INT(res[1].guard_bad, 0);
  CHECK_EQ_INT(res[1].lost_b_rc, SG_EIO);
  CHECK(strstr(res[1].msg_b, "from rank 0"));
  CHECK_EQ_INT(res[1].lost_a_rc, SG_EIO);
  CHECK_MSG(res[1].lost_a_s < DEADLINE / 2, "the wait on A took %.2f s", res[1].lost_a_s);
  CHECK(strstr(res[1].msg_a, "from rank 0") && strstr(res[1].msg_a, "Bad address"));
  CHECK_EQ_INT(res[1].zero_rc, 0);
  CHECK_EQ_INT((int)res[1].zero_bytes, 0);
  CHECK_EQ_INT(res[0].rc, 0);
  CHECK_MSG(res[0].dropped == 5, "rank 0 dropped %lld acks for ids it never used, not 5",
            res[0].dropped);
  CHECK_MSG(other != 0, "user nobody connected to a rank's ipc socket");
}
