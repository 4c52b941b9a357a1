/* test_teardown_signals.c - `cluster down` (sg_cluster_daemons_down)
 * signals only the processes the cluster started, even when their pids
 * are reused under it, and trusts a recorded mount namespace only by its
 * inode and its device:
 *
 *  - a pid reused between the check and the signal: in a pid namespace of
 *    the test's own (where it decides which pid the next process gets,
 *    ns_last_pid), a recorded daemon and a session under a recorded sshd
 *    are killed and reaped at the moment between their check and their
 *    signal (sg_cluster_signal_race_hook_), and a stand-in that is not the
 *    cluster's is started with the very same pid: the stand-ins must get
 *    no signal (they do when down signals by pid; through a pidfd opened
 *    before the check, the signal finds the checked process gone);
 *  - a slurmd's recorded mount namespace whose device is not the one of
 *    the namespace pinned under its name: a process in that namespace
 *    survives down; with the device right, it is killed (the control).
 *
 * Root; skips otherwise.  The first case runs in mount and pid
 * namespaces of its own (a tmpfs on /run, so that /run/sgdlab is the
 * test's); the second, as up does, in the machine's /run/sgdlab under a
 * random cluster name, which it removes.  Every wait is bounded.
 */
#define _GNU_SOURCE
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"
#include "proc.h"

#define DIR_T SG_CLUSTER_RUN_DIR "/daemons-t"
#define BOUND_MS 60000

/* ---- helpers ------------------------------------------------------------------ */

static int write_all(int fd, const void *p, size_t n) {
  return write(fd, p, n) == (ssize_t)n ? 0 : -1;
}

static int read_int(int fd, int *v) {
  return read(fd, v, sizeof *v) == (ssize_t)sizeof *v ? 0 : -1;
}

/* A private mount namespace with its own /proc (of the pid namespace it
 * runs in) and a tmpfs of its own on /run with an empty /run/sgdlab
 * (0700): what down reads and removes is the test's. */
static int private_run(void) {
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return -1;
  if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
    return -1;
  if (mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m") < 0) return -1;
  return mkdir(SG_CLUSTER_RUN_DIR, 0700) < 0 || mkdir(DIR_T, 0700) < 0 ? -1 : 0;
}

static int write_records(const char *text) {
  int fd = open(DIR_T "/daemons", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
  int rc = fd >= 0 ? write_all(fd, text, strlen(text)) : -1;
  if (fd >= 0) close(fd);
  return rc;
}

/* The exit status of child pid, waited for at most BOUND_MS (then killed:
 * -1). */
static int wait_bounded(pid_t pid) {
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0), st = 0;
  struct pollfd p = {pfd, POLLIN, 0};
  if (pfd < 0 || poll(&p, 1, BOUND_MS) != 1) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    if (pfd >= 0) close(pfd);
    return -1;
  }
  close(pfd);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}

static pid_t idle_child(void) {
  pid_t p = fork();
  if (p == 0)
    for (;;) pause();
  return p;
}

/* ---- a pid reused between check and signal ------------------------------------ */

/* The driver (pid 2 of the namespace) and the namespace's init talk over
 * two pipes: the driver asks for a stand-in with a given pid, init forks
 * it (init's child, so not under the recorded sshd) and answers its pid. */
static int g_ask = -1, g_answer = -1, g_reaped = -1;
static int g_session, g_daemon, g_standin[2], g_hits;

static int stand_in(int pid) {
  int got = -1;
  if (write_all(g_ask, &pid, sizeof pid) < 0 || read_int(g_answer, &got) < 0) return -1;
  return got;
}

/* Between the check of g_session or g_daemon and its signal: kill and
 * reap it, then have a stand-in take its pid. */
static void reuse_pid(int pid) {
  char c;
  if (pid == g_session && g_standin[0] == 0) {
    kill(pid, SIGKILL);
    if (read(g_reaped, &c, 1) != 1) _exit(20); /* the sshd stand-in reaped it */
    g_standin[0] = stand_in(pid);
    g_hits++;
  } else if (pid == g_daemon && g_standin[1] == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    g_standin[1] = stand_in(pid);
    g_hits++;
  }
}

/* The "sshd": starts one session process, tells its pid, reaps it and
 * says so. */
static pid_t fake_sshd(int tell, int reaped) {
  pid_t s = fork();
  if (s != 0) return s;
  pid_t a = idle_child();
  if (write_all(tell, &a, sizeof a) < 0) _exit(1);
  while (waitpid(a, NULL, 0) < 0 && errno == EINTR) {
  }
  if (write_all(reaped, "r", 1) < 0) _exit(1);
  for (;;) pause();
}

/* The driver: records a daemon and an sshd, runs down with the hook. */
static void driver(void) {
  int tell[2], reaped[2];
  char rec[256];
  if (pipe(tell) < 0 || pipe(reaped) < 0) _exit(10);
  g_daemon = idle_child();
  pid_t sshd = fake_sshd(tell[1], reaped[1]);
  if (g_daemon < 0 || sshd < 0 || read_int(tell[0], &g_session) < 0) _exit(11);
  g_reaped = reaped[0];
  snprintf(rec, sizeof rec, "slurmctld %d %llu\nsshd-h0 %d %llu\n", g_daemon,
           sg_proc_start(g_daemon), (int)sshd, sg_proc_start(sshd));
  if (write_records(rec) < 0) _exit(12);
  sg_cluster_signal_race_hook_ = reuse_pid;
  int rc = sg_cluster_daemons_down("t");
  fprintf(stderr, "  down: %d (%s); pids reused under it: session %d -> %d, daemon %d -> %d\n",
          rc, rc ? sg_err_msg() : "ok", g_session, g_standin[0], g_daemon, g_standin[1]);
  kill(sshd, SIGKILL); /* stopped by down already, unless down failed */
  waitpid(sshd, NULL, 0);
  _exit(rc != 0 ? 13 : g_hits != 2 || g_standin[0] != g_session || g_standin[1] != g_daemon ? 14 : 0);
}

/* Init of the pid namespace: serves the driver's asks, then checks that
 * every stand-in is alive (no signal reached it).  Exit 0 when so. */
static void ns_init(void) {
  int ask[2], answer[2], n = 0;
  pid_t standin[4];
  if (private_run() < 0 || pipe(ask) < 0 || pipe(answer) < 0) _exit(30);
  pid_t drv = fork();
  if (drv == 0) {
    close(ask[0]), close(answer[1]);
    g_ask = ask[1], g_answer = answer[0];
    driver();
  }
  close(ask[1]), close(answer[0]);
  for (int want; n < 4 && read_int(ask[0], &want) == 0; n++) {
    int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
    char num[32];
    int len = snprintf(num, sizeof num, "%d", want - 1);
    if (fd < 0 || write_all(fd, num, (size_t)len) < 0) _exit(31);
    close(fd);
    standin[n] = idle_child();
    if (write_all(answer[1], &standin[n], sizeof standin[n]) < 0) _exit(32);
  }
  int st = 0, dead = 0;
  waitpid(drv, &st, 0);
  for (int i = 0; i < n; i++) {
    int s2 = 0;
    if (waitpid(standin[i], &s2, WNOHANG) != 0) {
      fprintf(stderr, "  the stand-in with pid %d got signal %d\n", (int)standin[i],
              WIFSIGNALED(s2) ? WTERMSIG(s2) : 0);
      dead++;
    }
  }
  _exit(!WIFEXITED(st) || WEXITSTATUS(st) ? 40 + (WIFEXITED(st) ? WEXITSTATUS(st) : 0)
                                           : dead ? 50 + dead : 0);
}

TEST(down_never_signals_a_process_that_took_a_checked_pid) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (pid and mount namespaces)\n");
    return;
  }
  pid_t c = fork();
  if (c == 0) {
    if (unshare(CLONE_NEWPID) < 0) _exit(77);
    pid_t init = fork();
    if (init == 0) ns_init();
    int st = init > 0 ? wait_bounded(init) : -1;
    _exit(st == -1 ? 99 : WIFEXITED(st) ? WEXITSTATUS(st) : 98);
  }
  int st = wait_bounded(c);
  int code = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -2;
  if (code == 77) {
    fprintf(stderr, "SKIP: no pid namespace here (unshare CLONE_NEWPID refused)\n");
    return;
  }
  CHECK_MSG(code != 51 && code != 52, "%d stand-in%s that took a checked pid got down's signal",
            code - 50, code == 51 ? "" : "s");
  CHECK_MSG(code == 0, "the namespace's driver failed (code %d: 4x the driver's exit 1x, "
            "3x init's own)", code);
}

/* ---- a namespace named by inode and device ------------------------------------- */

/* The cluster of this case: a random name, its state directory in the
 * machine's /run/sgdlab (as up makes it: the pin is bound from the
 * machine's mount namespace, where up binds it too). */
static char g_name[16], g_dir[128], g_pin[160];

static void name_case(void) {
  unsigned char r[6];
  FILE *f = fopen("/dev/urandom", "r");
  if (!f || fread(r, 1, sizeof r, f) != sizeof r) _exit(30);
  fclose(f);
  snprintf(g_name, sizeof g_name, "rt");
  for (int i = 0; i < 6; i++) g_name[2 + i] = "abcdefghijklmnopqrstuvwxyz0123456789"[r[i] % 36];
  g_name[8] = '\0';
  snprintf(g_dir, sizeof g_dir, "%s/daemons-%s", SG_CLUSTER_RUN_DIR, g_name);
  snprintf(g_pin, sizeof g_pin, "%s/slurmd-h0.mntns", g_dir);
}

/* A process in a mount namespace of its own; its inode and device. */
static pid_t in_new_ns(unsigned long long *ino, unsigned long long *dev) {
  int p[2];
  char c, path[64];
  struct stat st;
  if (pipe(p) < 0) return -1;
  pid_t v = fork();
  if (v == 0) { /* it goes with the case, whatever ends it */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || unshare(CLONE_NEWNS) < 0 ||
        write_all(p[1], "1", 1) < 0)
      _exit(1);
    for (;;) pause();
  }
  close(p[1]);
  int ok = v > 0 && read(p[0], &c, 1) == 1;
  close(p[0]);
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int)v);
  if (!ok || stat(path, &st) < 0) return -1;
  *ino = (unsigned long long)st.st_ino, *dev = (unsigned long long)st.st_dev;
  return v;
}

/* The state directory of a cluster whose slurmd-h0 (not running, start 1)
 * had namespace ino/dev, pinned on its TAG.mntns as up pins it. */
static int plant(pid_t v, unsigned long long ino, unsigned long long dev) {
  char rec[160], src[64], path[200];
  if (mkdir(SG_CLUSTER_RUN_DIR, 0700) < 0 && errno != EEXIST) return -1;
  if (mkdir(g_dir, 0700) < 0) return -1;
  snprintf(rec, sizeof rec, "slurmd-h0 %d 1 %llu %llu\n", (int)getpid(), ino, dev);
  snprintf(src, sizeof src, "/proc/%d/ns/mnt", (int)v);
  int fd = open(g_pin, O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return -1;
  close(fd);
  if (mount(src, g_pin, NULL, MS_BIND, NULL) < 0) {
    fprintf(stderr, "  bind %s: %s\n", src, strerror(errno));
    return -1;
  }
  snprintf(path, sizeof path, "%s/daemons", g_dir);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  int rc = fd >= 0 ? write_all(fd, rec, strlen(rec)) : -1;
  if (fd >= 0) close(fd);
  return rc;
}

/* A case that failed: v killed, the pin and the directory removed. */
static void fail_case(pid_t v, int code) {
  char path[200];
  if (v > 0) kill(v, SIGKILL), waitpid(v, NULL, 0);
  umount2(g_pin, MNT_DETACH);
  unlink(g_pin);
  snprintf(path, sizeof path, "%s/daemons", g_dir);
  unlink(path);
  rmdir(g_dir);
  _exit(code);
}

/* down with the device planted wrong (the process in the namespace must
 * live), then with it right (it must be killed). */
static void ns_case(void) {
  unsigned long long ino, dev;
  int st = 0;
  name_case();
  pid_t v = in_new_ns(&ino, &dev);
  if (v < 0 || plant(v, ino, dev + 1) < 0) fail_case(v, 31);
  int rc = sg_cluster_daemons_down(g_name);
  if (rc != 0 || waitpid(v, &st, WNOHANG) != 0) {
    fprintf(stderr, "  down (device %llu recorded, the namespace's is %llu): %d; the process in "
            "it %s\n", dev + 1, dev, rc, rc ? "" : "was killed");
    fail_case(v, 41);
  }
  if (access(g_dir, F_OK) == 0 || plant(v, ino, dev) < 0) fail_case(v, 32);
  rc = sg_cluster_daemons_down(g_name);
  int gone = waitpid(v, &st, 0) == v && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
  fprintf(stderr, "  control, device right: down %d; the process in the namespace %s\n", rc,
          gone ? "killed" : "alive");
  if (!gone || rc != 0) fail_case(gone ? -1 : v, 42);
  _exit(access(g_dir, F_OK) == 0 ? 43 : 0);
}

TEST(down_trusts_a_pinned_namespace_by_inode_and_device) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (mount namespaces, /run/sgdlab)\n");
    return;
  }
  pid_t c = fork();
  if (c == 0) ns_case();
  int st = wait_bounded(c);
  int code = st == -1 ? -1 : WIFEXITED(st) ? WEXITSTATUS(st) : -2;
  CHECK_MSG(code != 41, "down killed a process by a namespace whose inode matched the pin and "
            "whose device did not");
  CHECK_MSG(code == 0, "setup or control failed (code %d)", code);
}
