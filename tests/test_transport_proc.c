/* test_transport_proc.c - the transports between real processes.
 *
 * ZeroMQ: this test is the launcher.  It binds a rendezvous (sg_rdv_*),
 * forks+execs N transport_rank processes and serves the rendezvous from
 * its poll loop until they exit, as the harness's local launcher does.
 * MPI: it runs `mpirun --allow-run-as-root --oversubscribe -np N
 * transport_rank ...`.
 *
 * No process may outlive a test: children die with this process
 * (PR_SET_PDEATHSIG), this process is a child subreaper so ranks orphaned
 * by mpirun come back to it, and every test ends by killing and reaping
 * whatever is left, failing if anything was left.  No sleeps: waits are
 * zmq_poll / sigtimedwait with timeouts, bounded by a deadline.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "test.h"
#include "rendezvous.h"
#include "transport.h"

#define MAXP 8
#define GROUP_DEADLINE 100.0

typedef struct proc {
  pid_t pid;
  int done, status, stopped;
} proc_t;

static char rank_bin[1024];

/* This process's scratch directory (mkdtemp, 0700): the rendezvous socket
 * and the ranks' output live there, never under a predictable name in
 * /tmp, where another local user could plant a symlink that a root test
 * would follow (open with O_TRUNC) or a file it would read as output. */
static char scratch[64];

/* Everything in scratch goes (the rendezvous sockets, the ipc sockets
 * and Open MPI segments of killed ranks: a flat directory), then it. */
static void scratch_rm(void) {
  DIR *d = opendir(scratch);
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(dirfd(d), e->d_name, 0);
  if (d) closedir(d);
  rmdir(scratch);
}

/* scratch/leaf into out. */
static void scratch_path(char *out, size_t cap, const char *leaf) {
  snprintf(out, cap, "%s/%s", scratch, leaf);
}

static int setup(void) {
  const char *dir = getenv("SGDLAB_BIN_DIR");
  snprintf(rank_bin, sizeof rank_bin, "%s/tests/transport_rank",
           dir ? dir : ".");
  if (access(rank_bin, X_OK) != 0) { /* run by hand next to the binary */
    char self[900];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
      self[n] = '\0';
      char *slash = strrchr(self, '/');
      if (slash) *slash = '\0';
      snprintf(rank_bin, sizeof rank_bin, "%s/transport_rank", self);
    }
  }
  if (!scratch[0]) {
    snprintf(scratch, sizeof scratch, "/tmp/sgdlab-test-proc-XXXXXX");
    if (!mkdtemp(scratch)) return scratch[0] = '\0', -1;
    atexit(scratch_rm);
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGCHLD);
  sigprocmask(SIG_BLOCK, &s, NULL); /* for sigtimedwait */
  return access(rank_bin, X_OK);
}

/* fork+exec argv with stdout to out_path (or inherited); the child dies
 * with us and gets its own process group. */
static pid_t spawn(char *const argv[], const char *out_path) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  setpgid(0, 0);
  sigset_t s;
  sigemptyset(&s);
  sigprocmask(SIG_SETMASK, &s, NULL);
  if (out_path) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) dup2(fd, 1);
  }
  execv(argv[0], argv);
  _exit(127);
}

/* Wait for something to happen: the rendezvous socket, or a child. */
static void wait_event(sg_rdv_t *rdv, double max_s) {
  if (rdv) {
    zmq_pollitem_t it = {.socket = sg_rdv_socket(rdv), .events = ZMQ_POLLIN};
    zmq_poll(&it, 1, (long)(max_s * 1e3));
    sg_rdv_handle(rdv);
  } else {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGCHLD);
    struct timespec ts = {0, (long)(max_s * 1e9)};
    sigtimedwait(&s, NULL, &ts);
  }
}

static void reap(proc_t *p, int n) {
  for (int i = 0; i < n; i++) {
    if (p[i].done) continue;
    int st;
    pid_t r = waitpid(p[i].pid, &st, WNOHANG | WUNTRACED);
    if (r != p[i].pid) continue;
    if (WIFSTOPPED(st)) {
      p[i].stopped = 1;
    } else {
      p[i].done = 1;
      p[i].status = st;
    }
  }
}

/* Kill and reap every descendant left (our children, and ranks orphaned to
 * us as subreaper).  Returns how many were still alive. */
static int cleanup(proc_t *p, int n) {
  int left = 0;
  for (int i = 0; i < n; i++)
    if (!p[i].done) {
      kill(p[i].pid, SIGKILL);
      kill(-p[i].pid, SIGKILL);
      left++;
    }
  double t0 = sg_now();
  for (;;) {
    int st;
    pid_t r = waitpid(-1, &st, WNOHANG);
    if (r < 0 && errno == ECHILD) break;
    if (r > 0) {
      for (int i = 0; i < n; i++)
        if (p[i].pid == r) p[i].done = 1;
      continue;
    }
    if (sg_now() - t0 > 10) {
      fprintf(stderr, "cleanup: descendants still alive after 10 s\n");
      return left + 1;
    }
    wait_event(NULL, 0.05);
  }
  return left;
}

static int all_done(const proc_t *p, int n, int except) {
  for (int i = 0; i < n; i++)
    if (i != except && !p[i].done) return 0;
  return 1;
}

/* Run N ZeroMQ ranks of `mode` over `scheme`; victim is the rank that is
 * expected to stop or die (-1: none).  Returns 0 when every other rank
 * exited 0 within the deadline and nothing was left behind. */
static int run_zmq(const char *mode, const char *scheme, int n, int victim,
                   char *err, size_t errlen) {
  void *zctx = zmq_ctx_new();
  sg_rdv_t *rdv = NULL;
  proc_t p[MAXP] = {{0}};
  char ep[256], sz[16], rk[MAXP][16];
  int rc = -1, started = 0;
  if (strcmp(scheme, "ipc") == 0)
    snprintf(ep, sizeof ep, "ipc://%s/rdv-%d", scratch, n);
  else
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:*");
  if (sg_rdv_new(&rdv, zctx, ep, n, NULL) < 0) {
    snprintf(err, errlen, "sg_rdv_new: %s", sg_err_msg());
    goto out;
  }
  snprintf(sz, sizeof sz, "%d", n);
  for (int r = 0; r < n; r++) {
    snprintf(rk[r], sizeof rk[r], "%d", r);
    char *argv[] = {rank_bin, (char *)mode, "zmq", (char *)scheme, rk[r], sz,
                    (char *)sg_rdv_endpoint(rdv), scratch, NULL};
    p[r].pid = spawn(argv, NULL);
    started++;
  }
  double t0 = sg_now();
  while (!all_done(p, n, victim) && sg_now() - t0 < GROUP_DEADLINE) {
    wait_event(rdv, 0.05);
    reap(p, n);
  }
  if (!all_done(p, n, victim)) {
    snprintf(err, errlen, "ranks still running after %.0f s", GROUP_DEADLINE);
    goto out;
  }
  if (!sg_rdv_complete(rdv)) {
    snprintf(err, errlen, "rendezvous never completed");
    goto out;
  }
  for (int r = 0; r < n; r++) {
    if (r == victim) continue;
    if (!WIFEXITED(p[r].status) || WEXITSTATUS(p[r].status) != 0) {
      snprintf(err, errlen, "rank %d ended with status 0x%x", r, p[r].status);
      goto out;
    }
  }
  rc = 0;
out:
  if (started && cleanup(p, started) > (victim >= 0 && rc == 0 ? 1 : 0) &&
      rc == 0) {
    snprintf(err, errlen, "processes were left behind");
    rc = -1;
  }
  if (victim >= 0 && rc == 0 && !p[victim].done) {
    snprintf(err, errlen, "victim rank %d was not reaped", victim);
    rc = -1;
  }
  sg_rdv_destroy(&rdv);
  zmq_ctx_term(zctx);
  return rc;
}

/* Run `mpirun -np N transport_rank mode mpi`, stdout to out_path.  Returns
 * mpirun's wait status, or -1 on timeout; kills and reaps everything. */
static int run_mpi(const char *mode, int n, const char *out_path,
                   char *err, size_t errlen, int *left_behind) {
  char np[16];
  snprintf(np, sizeof np, "%d", n);
  char *argv[] = {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                  "--mca", "btl_vader_backing_directory", scratch, /* not /dev/shm */
                  "-np", np, rank_bin, (char *)mode, "mpi", NULL};
  proc_t p = {.pid = spawn(argv, out_path)};
  double t0 = sg_now();
  while (!p.done && sg_now() - t0 < GROUP_DEADLINE) {
    wait_event(NULL, 0.05);
    reap(&p, 1);
  }
  int status = p.done ? p.status : -1;
  if (!p.done) snprintf(err, errlen, "mpirun still running after %.0f s",
                        GROUP_DEADLINE);
  *left_behind = cleanup(&p, 1);
  return status;
}

static int count_lines(const char *path, const char *prefix) {
  FILE *f = fopen(path, "r");
  char line[1024];
  int n = 0;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, prefix, strlen(prefix)) == 0) n++;
  fclose(f);
  return n;
}

TEST(zmq_ipc_processes_1_to_5) {
  char err[512];
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  for (int n = 1; n <= 5; n++)
    CHECK_MSG(run_zmq("conform", "ipc", n, -1, err, sizeof err) == 0,
              "ipc N=%d: %s", n, err);
}

TEST(zmq_tcp_processes_1_to_5) {
  char err[512];
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  for (int n = 1; n <= 5; n++)
    CHECK_MSG(run_zmq("conform", "tcp", n, -1, err, sizeof err) == 0,
              "tcp N=%d: %s", n, err);
}

TEST(mpi_processes_1_to_5) {
  char err[512] = "";
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  for (int n = 1; n <= 5; n++) {
    int left = 0;
    int st = run_mpi("conform", n, NULL, err, sizeof err, &left);
    CHECK_MSG(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "mpirun -np %d: status 0x%x %s", n, st, err);
    CHECK_EQ_INT(left, 0);
  }
}

/* Rank 1 of 3 stops (SIGSTOP) or dies (SIGKILL) after a barrier; ranks 0
 * and 2 must report SG_ETIMEOUT naming it (checked in transport_rank). */
TEST(zmq_fault_stop_and_kill) {
  char err[512];
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  CHECK_MSG(run_zmq("fault-stop", "ipc", 3, 1, err, sizeof err) == 0,
            "fault-stop: %s", err);
  CHECK_MSG(run_zmq("fault-kill", "tcp", 3, 1, err, sizeof err) == 0,
            "fault-kill: %s", err);
}

TEST(mpi_fault_stop) {
  char err[512] = "", out[128];
  int left = 0;
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  scratch_path(out, sizeof out, "mpi-fault.txt");
  int st = run_mpi("fault-stop", 3, out, err, sizeof err, &left);
  int ok = count_lines(out, "FAULT-OK rank ");
  unlink(out);
  CHECK_MSG(st >= 0, "%s", err); /* mpirun ended by itself */
  CHECK_EQ_INT(ok, 2);           /* ranks 0 and 2 named rank 1 in time */
  CHECK_EQ_INT(left, 0);         /* the stopped rank did not outlive it */
}

/* A rank that dies: Open MPI may end the job itself before the others'
 * deadline; either way mpirun must end and nothing may be left. */
TEST(mpi_fault_kill) {
  char err[512] = "", out[128];
  int left = 0;
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  scratch_path(out, sizeof out, "mpi-kill.txt");
  int st = run_mpi("fault-kill", 3, out, err, sizeof err, &left);
  int victim = count_lines(out, "VICTIM ");
  unlink(out);
  CHECK_MSG(st >= 0, "%s", err);
  CHECK_EQ_INT(victim, 1);
  CHECK_MSG(!(WIFEXITED(st) && WEXITSTATUS(st) == 0),
            "mpirun reported success although rank 1 died");
  CHECK_EQ_INT(left, 0);
}

/* Bandwidth numbers (not asserted): run with SGDLAB_TRANSPORT_BENCH=1. */
TEST(bench_np2) {
  char err[512] = "";
  if (!getenv("SGDLAB_TRANSPORT_BENCH")) {
    fprintf(stderr, "  (set SGDLAB_TRANSPORT_BENCH=1 to run)\n");
    return;
  }
  CHECK_MSG(setup() == 0, "no helper at %s", rank_bin);
  CHECK_MSG(run_zmq("bench", "ipc", 2, -1, err, sizeof err) == 0, "%s", err);
  CHECK_MSG(run_zmq("bench", "tcp", 2, -1, err, sizeof err) == 0, "%s", err);
  int left = 0;
  int st = run_mpi("bench", 2, NULL, err, sizeof err, &left);
  CHECK_MSG(st == 0, "mpirun status 0x%x %s", st, err);
}
