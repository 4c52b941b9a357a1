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
 *  - without pidfds (pidfd_open fails with ENOSYS, as on Linux < 5.3: a
 *    seccomp filter in the process that runs down), down says so in one
 *    line and signals by pid right after each check: the two recorded
 *    daemons get SIGTERM, a process recorded with a start time not its
 *    own and one not recorded get nothing; the same with pidfds, with
 *    nothing said, is the control.
 *
 * Root; skips otherwise.  The first case runs in mount and pid
 * namespaces of its own (the third in a mount namespace of its own) (a tmpfs on /run, so that /run/sgdlab is the
 * test's); the second, as up does, in the machine's /run/sgdlab under a
 * random cluster name, which it removes.  Every wait is bounded.
 */
#define _GNU_SOURCE
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stddef.h>
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

/* ---- without pidfds: by pid, right after the check ------------------------------ */

/* In the child that runs down: pidfd_open fails with ENOSYS, as on a
 * kernel older than 5.3 (a seccomp filter of this process alone). */
static int no_pidfd_open(void) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pidfd_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
  if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) return -1;
  return syscall(SYS_pidfd_open, getpid(), 0) < 0 && errno == ENOSYS ? 0 : -1;
}

/* Four idle processes of the test: two recorded daemons (pid and start
 * time right), one recorded with a start time that is not its own (the
 * record of a process that ended and whose pid was given to this one),
 * one not recorded.  down runs in a child, in a mount namespace with a
 * /run of its own (private_run), without pidfds when `forced`, its stderr
 * into err.  Each idle process's fate in st[] (0: alive). */
enum { FB_A, FB_B, FB_WRONG_START, FB_UNRECORDED, FB_N };

static int fallback_case(int forced, char *err, size_t cap, int st[FB_N]) {
  pid_t v[FB_N];
  int p[2], code = -1;
  for (int i = 0; i < FB_N; i++) v[i] = idle_child();
  if (pipe(p) < 0) return -1;
  pid_t c = fork();
  if (c == 0) {
    char rec[256];
    close(p[0]);
    dup2(p[1], 2);
    if (private_run() < 0) _exit(30);
    snprintf(rec, sizeof rec, "slurmctld %d %llu\nslurmd-h0 %d %llu\nslurmd-h1 %d %llu\n",
             (int)v[FB_A], sg_proc_start(v[FB_A]), (int)v[FB_B], sg_proc_start(v[FB_B]),
             (int)v[FB_WRONG_START], sg_proc_start(v[FB_WRONG_START]) + 1);
    if (write_records(rec) < 0) _exit(31);
    if (forced && no_pidfd_open() < 0) _exit(32);
    int rc = sg_cluster_daemons_down("t");
    _exit(rc != 0 ? 33 : access(DIR_T, F_OK) == 0 ? 34 : 0);
  }
  close(p[1]);
  size_t n = 0;
  for (ssize_t r; n + 1 < cap && (r = read(p[0], err + n, cap - 1 - n)) > 0;) n += (size_t)r;
  err[n] = '\0'; /* EOF: the child has ended (bounded by its own waits: 2 x 2 s + 5 s) */
  close(p[0]);
  int s = c > 0 ? wait_bounded(c) : -1;
  code = s == -1 ? -1 : WIFEXITED(s) ? WEXITSTATUS(s) : -2;
  for (int i = 0; i < FB_N; i++) {
    int w = 0;
    st[i] = waitpid(v[i], &w, WNOHANG) == v[i] ? (WIFSIGNALED(w) ? WTERMSIG(w) : 100) : 0;
    if (!st[i]) kill(v[i], SIGKILL), waitpid(v[i], NULL, 0);
  }
  return code;
}

TEST(down_without_pidfds_signals_by_pid_only_what_passed_its_check) {
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (a mount namespace with a /run of its own)\n");
    return;
  }
  static const char line[] = "sgdlab cluster: no pidfd (this kernel has no pidfd_open, Linux < "
                             "5.3): processes are signalled by pid right after their check\n";
  char err[2][4096];
  int st[2][FB_N], code[2];
  for (int forced = 0; forced < 2; forced++) {
    code[forced] = fallback_case(forced, err[forced], sizeof err[forced], st[forced]);
    fprintf(stderr, "  %s: down's child exit %d; signals: recorded %d %d, wrong start %d, "
            "unrecorded %d; stderr: %s%s", forced ? "pidfd_open fails (ENOSYS)" : "pidfds",
            code[forced], st[forced][FB_A], st[forced][FB_B], st[forced][FB_WRONG_START],
            st[forced][FB_UNRECORDED], err[forced], err[forced][0] ? "" : "(none)\n");
  }
  for (int forced = 0; forced < 2; forced++) {
    CHECK_MSG(code[forced] == 0, "down's child (forced %d): code %d (3x: setup, down, its "
              "directory left)", forced, code[forced]);
    CHECK_EQ_INT(st[forced][FB_A], SIGTERM);
    CHECK_EQ_INT(st[forced][FB_B], SIGTERM);
    CHECK_EQ_INT(st[forced][FB_WRONG_START], 0);
    CHECK_EQ_INT(st[forced][FB_UNRECORDED], 0);
  }
  CHECK_MSG(err[0][0] == '\0', "with pidfds down said: %s", err[0]);
  CHECK_MSG(!strcmp(err[1], line), "without pidfds down said:\n%s\ninstead of the one line:\n%s",
            err[1], line);
}
