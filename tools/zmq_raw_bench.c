/* zmq_raw_bench - plain libzmq against sgdlab's ZeroMQ transport, same pattern.
 *
 *   zmq_raw_bench [--scheme ipc|tcp] [--sizes MIN:MAX] [--reps R] [--mode send|isend]
 *
 * Two processes (rank 0 and rank 1, forked), for every power-of-two size
 * from MIN to MAX (default 1K:64M):
 *   throughput  rank 0 sends a burst of messages to rank 1, which answers
 *               an empty message after the last one; bytes / time.
 *   round trip  rank 0 sends one message, rank 1 sends it back; the
 *               median of the round trips.
 * raw    libzmq alone: a PUSH socket to the peer's PULL, zmq_send from the
 *        caller's buffer and zmq_recv into the caller's buffer (one copy
 *        each side, like sg_send / sg_recv), with the transport's queue
 *        length (HWM 16) and malloc setting.
 * sgdlab sg_comm over the zmq transport (rendezvous through this process,
 *        no CURVE): sg_send / sg_recv, or with --mode isend sg_isend +
 *        sg_wait (zero-copy from 256 KiB) on the sending side.
 * Each pair of runs is repeated R times (default 3), raw and sgdlab
 * interleaved; the table gives medians.  Output: one line per size with
 * MB/s and microseconds of both and their ratios, and the CPU time each
 * rank's process (main and zmq I/O thread) spent per GiB of the burst:
 * on a loaded machine the wall clock says little, the CPU cost still
 * compares the two.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "transport.h"
#include "rendezvous.h"
#include "transport_new.h"

#define MAX_SIZES 32
#define MAX_REPS 9

typedef struct bench {
  const char *scheme, *mode;
  size_t min, max;
  int reps, nsizes;
  char dir[64];
} bench_t;

typedef struct one { /* what one pass measured, per size */
  double mbs[MAX_SIZES], rtt_us[MAX_SIZES];
  double cpu[2][MAX_SIZES]; /* CPU seconds per GiB of the burst, rank 0 and 1 */
  int rank;                 /* which rank wrote it */
} one_t;

/* CPU time of the whole process (its zmq I/O thread included): what a rank
 * spends per byte, which a loaded machine disturbs far less than the wall
 * clock does. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int iters_for(size_t size) { /* ~256 MiB per throughput burst, 8..2000 */
  size_t n = ((size_t)256 << 20) / size;
  return n < 8 ? 8 : n > 2000 ? 2000 : (int)n;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- the two patterns over an abstract send/recv ----------------------- */

typedef struct io {
  int (*send)(struct io *io, const void *buf, size_t len);
  int (*recv)(struct io *io, void *buf, size_t cap);
  void *a, *b; /* raw: push, pull; sgdlab: the comm */
  int rank;
  const char *mode;
} io_t;

static int pattern(io_t *io, const bench_t *b, one_t *out, char *buf) {
  int k = 0;
  for (size_t s = b->min; s <= b->max; s *= 2, k++) {
    int n = iters_for(s), rt = n < 200 ? n : 200;
    for (int w = 0; w < 2; w++) { /* warm-up round trips: connected, pages touched, in step */
      if (io->rank == 0 && (io->send(io, buf, s) || io->recv(io, buf, s))) return -1;
      if (io->rank == 1 && (io->recv(io, buf, s) || io->send(io, buf, s))) return -1;
    }
    double t0 = sg_now(), c0 = cpu_now();
    for (int i = 0; i < n; i++)
      if (io->rank == 0 ? io->send(io, buf, s) : io->recv(io, buf, s)) return -1;
    if (io->rank == 0 ? io->recv(io, buf, 0) : io->send(io, buf, 0)) return -1;
    out->mbs[k] = (double)s * n / (sg_now() - t0) / 1e6;
    out->cpu[io->rank][k] = (cpu_now() - c0) / ((double)s * n / (1 << 30));
    double rtt[200];
    for (int i = 0; i < rt; i++) {
      double t1 = sg_now();
      if (io->rank == 0 && (io->send(io, buf, s) || io->recv(io, buf, s))) return -1;
      if (io->rank == 1 && (io->recv(io, buf, s) || io->send(io, buf, s))) return -1;
      rtt[i] = (sg_now() - t1) * 1e6;
    }
    out->rtt_us[k] = median(rtt, rt);
  }
  return 0;
}

/* ---- raw libzmq --------------------------------------------------------- */

static int raw_send(io_t *io, const void *buf, size_t len) {
  return zmq_send(io->a, buf, len, 0) < 0;
}
static int raw_recv(io_t *io, void *buf, size_t cap) {
  return zmq_recv(io->b, buf, cap, 0) < 0;
}

static void endpoint(const bench_t *b, int rank, int port, char *ep, size_t cap) {
  if (!strcmp(b->scheme, "ipc")) snprintf(ep, cap, "ipc://%s/raw-%d", b->dir, rank);
  else snprintf(ep, cap, "tcp://127.0.0.1:%d", port + rank);
}

static int raw_rank(const bench_t *b, int rank, int port, one_t *out, char *buf) {
  /* the allocator setting sgdlab-rank makes for zmq ranks: without it glibc
   * returns every large zmq buffer to the kernel and the next one is
   * page-faulted in again, which would measure malloc, not libzmq */
  sg_zmq_malloc_keep();
  void *ctx = zmq_ctx_new();
  io_t io = {raw_send, raw_recv, zmq_socket(ctx, ZMQ_PUSH), zmq_socket(ctx, ZMQ_PULL), rank, b->mode};
  int hwm = 16; /* the transport's default queue per peer (SG_ZMQ_DEFAULT_HWM) */
  zmq_setsockopt(io.a, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(io.b, ZMQ_RCVHWM, &hwm, sizeof hwm);
  char mine[128], peer[128];
  endpoint(b, rank, port, mine, sizeof mine);
  endpoint(b, 1 - rank, port, peer, sizeof peer);
  int rc = zmq_bind(io.b, mine) || zmq_connect(io.a, peer) || pattern(&io, b, out, buf);
  zmq_close(io.a);
  zmq_close(io.b);
  zmq_ctx_term(ctx);
  return rc ? -1 : 0;
}

/* ---- sgdlab's transport -------------------------------------------------- */

static int sg_send_(io_t *io, const void *buf, size_t len) {
  sg_comm_t *c = io->a;
  if (strcmp(io->mode, "isend") || !len) return sg_send(c, 1 - io->rank, 1, buf, len) < 0;
  sg_req_t *r;
  return sg_isend(c, 1 - io->rank, 1, buf, len, &r) < 0 || sg_wait(c, &r, NULL) < 0;
}
static int sg_recv_(io_t *io, void *buf, size_t cap) {
  return sg_recv(io->a, 1 - io->rank, 1, buf, cap, NULL) < 0;
}

static int sg_rank(const bench_t *b, int rank, const char *rdv, one_t *out, char *buf) {
  sg_comm_t *c = NULL;
  sg_zmq_malloc_keep(); /* as sgdlab-rank's main does, and as the raw side does */
  sg_zmq_cfg_t cfg = {.rank = rank, .size = 2, .deadline_s = 60, .scheme = b->scheme,
                      .rendezvous = rdv, .ipc_dir = b->dir};
  if (sg_comm_zmq_new(&c, &cfg) < 0) {
    fprintf(stderr, "zmq_raw_bench: rank %d: %s\n", rank, sg_err_msg());
    return -1;
  }
  io_t io = {sg_send_, sg_recv_, c, NULL, rank, b->mode};
  int rc = pattern(&io, b, out, buf);
  if (rc < 0) fprintf(stderr, "zmq_raw_bench: rank %d: %s\n", rank, sg_err_msg());
  sg_comm_destroy(&c);
  return rc;
}

/* ---- one pass: two forked ranks, the rendezvous served here -------------- */

static int pass(const bench_t *b, int sg, int port, one_t *out) {
  char rdv_ep[128];
  snprintf(rdv_ep, sizeof rdv_ep, "ipc://%s/rdv", b->dir);
  int fd[2];
  if (pipe(fd) < 0) return -1;
  pid_t pid[2];
  for (int r = 0; r < 2; r++) {
    if ((pid[r] = fork()) == 0) {
      close(fd[0]);
      char *buf = malloc(b->max);
      one_t res = {.rank = r};
      if (!buf) _exit(1);
      memset(buf, r + 1, b->max);
      int rc = sg ? sg_rank(b, r, rdv_ep, &res, buf) : raw_rank(b, r, port, &res, buf);
      if (rc == 0 && write(fd[1], &res, sizeof res) != (ssize_t)sizeof res) rc = -1;
      _exit(rc ? 1 : 0);
    }
  }
  close(fd[1]);
  void *ctx = zmq_ctx_new();
  sg_rdv_t *rdv = NULL;
  if (sg && sg_rdv_new(&rdv, ctx, rdv_ep, 2, NULL) < 0) fprintf(stderr, "%s\n", sg_err_msg());
  int left = 2, ok = 1;
  while (left > 0) { /* serve the rendezvous while the ranks run */
    if (rdv) {
      zmq_pollitem_t it = {.socket = sg_rdv_socket(rdv), .events = ZMQ_POLLIN};
      if (zmq_poll(&it, 1, 50) > 0) sg_rdv_handle(rdv);
    }
    for (int r = 0; r < 2; r++) {
      int st;
      if (pid[r] > 0 && waitpid(pid[r], &st, rdv ? WNOHANG : 0) == pid[r]) {
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
        pid[r] = 0;
        left--;
      }
    }
  }
  sg_rdv_destroy(&rdv);
  zmq_ctx_term(ctx);
  one_t res[2]; /* one from each rank, in either order (each write < PIPE_BUF: whole) */
  int got = read(fd[0], &res[0], sizeof res[0]) == (ssize_t)sizeof res[0] &&
            read(fd[0], &res[1], sizeof res[1]) == (ssize_t)sizeof res[1];
  close(fd[0]);
  if (got) { /* rank 0 measured the wall clock; each rank its own CPU */
    const one_t *r0 = res[0].rank == 0 ? &res[0] : &res[1], *r1 = r0 == res ? &res[1] : &res[0];
    *out = *r0;
    memcpy(out->cpu[1], r1->cpu[1], sizeof out->cpu[1]);
  }
  return ok && got ? 0 : -1;
}

static size_t parse_size(const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (*end == 'K' || *end == 'k') v *= 1024;
  else if (*end == 'M' || *end == 'm') v *= 1024 * 1024;
  return (size_t)v;
}

static int usage(void) {
  fprintf(stderr, "usage: zmq_raw_bench [--scheme ipc|tcp] [--sizes MIN:MAX] [--reps R] "
                  "[--mode send|isend]\n");
  return 2;
}

static void report(const bench_t *b, one_t *raw, one_t *sg) {
  printf("# scheme %s, mode %s, median of %d interleaved passes; cpu = CPU s per GiB of the\n"
         "# burst, whole process (sender tx, receiver rx)\n", b->scheme, b->mode, b->reps);
  printf("%10s %9s %9s %6s %9s %9s %6s %6s %6s %6s %6s %6s %6s\n", "size(B)", "raw MB/s",
         "sg MB/s", "ratio", "raw rtt", "sg rtt", "ratio", "rawtx", "sgtx", "ratio", "rawrx",
         "sgrx", "ratio");
  for (int k = 0; k < b->nsizes; k++) {
    double v[8][MAX_REPS], m[8];
    for (int r = 0; r < b->reps; r++) {
      v[0][r] = raw[r].mbs[k], v[1][r] = sg[r].mbs[k];
      v[2][r] = raw[r].rtt_us[k], v[3][r] = sg[r].rtt_us[k];
      v[4][r] = raw[r].cpu[0][k], v[5][r] = sg[r].cpu[0][k];
      v[6][r] = raw[r].cpu[1][k], v[7][r] = sg[r].cpu[1][k];
    }
    for (int i = 0; i < 8; i++) m[i] = median(v[i], b->reps);
    printf("%10zu %9.0f %9.0f %6.2f %9.1f %9.1f %6.2f %6.3f %6.3f %6.2f %6.3f %6.3f %6.2f\n",
           b->min << k, m[0], m[1], m[1] / m[0], m[2], m[3], m[3] / m[2], m[4], m[5],
           m[5] / m[4], m[6], m[7], m[7] / m[6]);
  }
}

int main(int argc, char **argv) {
  bench_t b = {.scheme = "ipc", .mode = "send", .min = 1024, .max = 64u << 20, .reps = 3};
  for (int i = 1; i < argc; i++) {
    if (i + 1 >= argc) return usage();
    if (!strcmp(argv[i], "--scheme")) b.scheme = argv[++i];
    else if (!strcmp(argv[i], "--mode")) b.mode = argv[++i];
    else if (!strcmp(argv[i], "--reps")) b.reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--sizes")) {
      const char *s = argv[++i], *colon = strchr(s, ':');
      if (!colon) return usage();
      b.min = parse_size(s);
      b.max = parse_size(colon + 1);
    } else return usage();
  }
  if ((strcmp(b.scheme, "ipc") && strcmp(b.scheme, "tcp")) || b.reps < 1 || b.reps > MAX_REPS ||
      b.min < 1 || b.max < b.min || (strcmp(b.mode, "send") && strcmp(b.mode, "isend")))
    return usage();
  for (size_t s = b.min; s <= b.max && b.nsizes < MAX_SIZES; s *= 2) b.nsizes++;
  snprintf(b.dir, sizeof b.dir, "/tmp/zrb-XXXXXX");
  if (!mkdtemp(b.dir)) return perror("mkdtemp"), 1;
  one_t raw[MAX_REPS], sg[MAX_REPS];
  int port = 20000 + (int)(getpid() % 20000), rc = 0;
  for (int r = 0; r < b.reps && !rc; r++)
    rc = pass(&b, 0, port + 4 * r, &raw[r]) || pass(&b, 1, 0, &sg[r]);
  char path[128];
  snprintf(path, sizeof path, "%s/raw-0", b.dir), unlink(path);
  snprintf(path, sizeof path, "%s/raw-1", b.dir), unlink(path);
  rmdir(b.dir);
  if (rc) return fprintf(stderr, "zmq_raw_bench: a pass failed\n"), 1;
  report(&b, raw, sg);
  return 0;
}
