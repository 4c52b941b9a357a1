/* transport_rank.c - one rank of a transport test, as a real process.
 *
 * Started by test_transport_proc.c: directly (ZeroMQ: the test forks N of
 * these and serves the rendezvous) or through mpirun (MPI).
 *
 *   transport_rank MODE mpi
 *   transport_rank MODE zmq SCHEME RANK SIZE RENDEZVOUS [IPC_DIR]
 *
 * MODE:
 *   conform     run the conformance suite (transport_cases.c); exit 0 if
 *               it passed, 1 with the failure on stderr otherwise
 *   fault-stop  after a barrier rank 1 stops itself (SIGSTOP) and the
 *   fault-kill  others' receives from it must fail with SG_ETIMEOUT naming
 *               rank 1 and its host within 2 x deadline; they print
 *               "FAULT-OK rank R: <message>" and exit 0 (rank 1 kills
 *               itself with SIGKILL in fault-kill)
 *   bench       ping-pong and exchange bandwidth between ranks 0 and 1,
 *               1..64 MiB, printed as "BENCH ..." lines by rank 0
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "transport_new.h"
#include "transport_cases.h"

#define FAULT_DEADLINE 1.0

static int usage(void) {
  fprintf(stderr, "usage: transport_rank conform|fault-stop|fault-kill|bench "
                  "mpi | zmq SCHEME RANK SIZE RENDEZVOUS\n");
  return 2;
}

static int fault(sg_comm_t *c, int kill_it, int is_mpi) {
  char want[128];
  if (sg_barrier(c) < 0) {
    fprintf(stderr, "rank %d: barrier: %s\n", c->rank, sg_err_msg());
    return 1;
  }
  /* Everyone tells rank 1 to go: rank 1 fails only once it has nothing
   * of its own in flight (a message still queued when it dies could leave
   * another rank stuck in the barrier above, not where we expect it). */
  if (c->rank != 1 && sg_send(c, 1, 2, "go", 2) < 0) {
    fprintf(stderr, "rank %d: send: %s\n", c->rank, sg_err_msg());
    return 1;
  }
  if (c->rank == 1) {
    for (int i = 0; i < c->size - 1; i++)
      if (sg_recv(c, SG_ANY_SOURCE, 2, want, sizeof want, NULL) < 0) {
        fprintf(stderr, "rank 1: recv: %s\n", sg_err_msg());
        return 1;
      }
    printf("VICTIM %ld\n", (long)getpid());
    fflush(stdout);
    raise(kill_it ? SIGKILL : SIGSTOP);
    return 0; /* after SIGCONT: nothing to do */
  }
  char buf[8];
  double t0 = sg_now();
  int rc = sg_recv(c, 1, 1, buf, sizeof buf, NULL);
  double took = sg_now() - t0;
  snprintf(want, sizeof want, "rank 1 (%s)", c->hosts[1]);
  if (rc != SG_ETIMEOUT || !strstr(sg_err_msg(), want) ||
      took > 2 * FAULT_DEADLINE) {
    fprintf(stderr, "rank %d: recv from the failed rank 1 returned %s after "
            "%.2f s: '%s'\n", c->rank, sg_errname(rc), took, sg_err_msg());
    return 1;
  }
  printf("FAULT-OK rank %d: %s\n", c->rank, sg_err_msg());
  fflush(stdout);
  /* The survivors agree before anyone exits: under mpirun the first exit
   * ends the job, which must not cut off another survivor's report. */
  if (c->rank == 0) {
    for (int r = 2; r < c->size; r++)
      if (sg_recv(c, r, 3, buf, sizeof buf, NULL) < 0) return 1;
    for (int r = 2; r < c->size; r++)
      if (sg_send(c, r, 4, "", 0) < 0) return 1;
  } else if (sg_send(c, 0, 3, "", 0) < 0 ||
             sg_recv(c, 0, 4, buf, sizeof buf, NULL) < 0) {
    return 1;
  }
  if (is_mpi) _exit(0); /* MPI_Finalize would wait for the stopped rank */
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Ranks 0 and 1: ping-pong (one direction at a time) and exchange
 * (sendrecv, both directions at once); others only take the barriers. */
static int bench(sg_comm_t *c, const char *label) {
  size_t max = (size_t)64 << 20;
  char *a = malloc(max), *b = malloc(max);
  if (!a || !b) return 1;
  memset(a, 1, max);
  memset(b, 2, max);
  for (size_t n = (size_t)1 << 20; n <= max; n <<= 1) {
    int iters = n >= ((size_t)16 << 20) ? 6 : 16, peer = 1 - c->rank;
    double pp[16], ex[16];
    for (int i = -2; i < iters; i++) { /* 2 untimed warm-up rounds */
      if (sg_barrier(c) < 0) goto fail;
      double t0 = sg_now();
      if (c->rank == 0) {
        if (sg_send(c, 1, 1, a, n) < 0 || sg_recv(c, 1, 2, b, n, NULL) < 0)
          goto fail;
      } else if (c->rank == 1) {
        if (sg_recv(c, 0, 1, b, n, NULL) < 0 || sg_send(c, 0, 2, a, n) < 0)
          goto fail;
      }
      double t1 = sg_now();
      if (c->rank <= 1 &&
          sg_sendrecv(c, peer, 3, a, n, peer, 3, b, n, NULL) < 0)
        goto fail;
      double t2 = sg_now();
      if (i >= 0) {
        pp[i] = (t1 - t0) / 2;
        ex[i] = t2 - t1;
      }
    }
    qsort(pp, (size_t)iters, sizeof *pp, cmp_double);
    qsort(ex, (size_t)iters, sizeof *ex, cmp_double);
    if (c->rank == 0)
      printf("BENCH %s np=%d bytes=%zu pingpong_median_s=%.6f "
             "pingpong_GBps=%.2f exchange_median_s=%.6f "
             "exchange_GBps_per_direction=%.2f\n",
             label, c->size, n, pp[iters / 2], n / pp[iters / 2] / 1e9,
             ex[iters / 2], n / ex[iters / 2] / 1e9);
  }
  free(a);
  free(b);
  return 0;
fail:
  fprintf(stderr, "rank %d: bench: %s\n", c->rank, sg_err_msg());
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  const char *mode = argv[1];
  int is_mpi = strcmp(argv[2], "mpi") == 0, rc;
  double deadline = strncmp(mode, "fault", 5) == 0 ? FAULT_DEADLINE : 30.0;
  sg_comm_t *c = NULL;
  if (is_mpi) {
    rc = sg_comm_mpi_new(&c, deadline);
  } else {
    if (argc < 7 || strcmp(argv[2], "zmq")) return usage();
    sg_zmq_cfg_t cfg = {.rank = atoi(argv[4]), .size = atoi(argv[5]),
                        .deadline_s = deadline, .scheme = argv[3],
                        .rendezvous = argv[6], .ipc_dir = argc > 7 ? argv[7] : NULL};
    rc = sg_comm_zmq_new(&c, &cfg);
  }
  if (rc < 0) {
    fprintf(stderr, "transport_rank: %s: %s\n", sg_errname(rc), sg_err_msg());
    return 1;
  }
  int status = 0;
  if (strcmp(mode, "conform") == 0) {
    char err[1024];
    if (tc_run_all(c, err, sizeof err) != 0) {
      fprintf(stderr, "%s transport: %s\n", c->ops->name, err);
      status = 1;
    }
  } else if (strcmp(mode, "fault-stop") == 0 ||
             strcmp(mode, "fault-kill") == 0) {
    status = fault(c, strcmp(mode, "fault-kill") == 0, is_mpi);
  } else if (strcmp(mode, "bench") == 0) {
    status = bench(c, is_mpi ? "mpi" : argv[3]);
  } else {
    status = usage();
  }
  sg_comm_destroy(&c);
  if (is_mpi) sg_mpi_finalize();
  return status;
}
