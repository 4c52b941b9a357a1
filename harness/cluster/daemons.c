/* daemons.c - Slurm on an emulated cluster (see cluster.h): munged,
 * slurmctld on h0 and one slurmd per host, configured, logged and spooled
 * in /run/sgdlab/daemons-NAME (0700), every daemon's pid and start time
 * recorded there before anything waits on it, so that `down` and the sweep
 * stop exactly the processes they started (never by name). */
#define _GNU_SOURCE
#include "cluster_impl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "proc.h"
#include "safedir.h"

#define DAEMONS_FILE "daemons"
/* SIGTERM to SIGKILL when the daemons stop.  Their state goes with the
 * directory, so a graceful end buys nothing; slurmctld, after a node was
 * lost under a job, took 2.5-9 s to end on SIGTERM (its RPCs to the dead
 * node wait for MessageTimeout), which made `down` take 3.5-9.4 s. */
#define STOP_GRACE_S 2.0

void sg_cluster_daemons_dir(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/daemons-%s", SG_CLUSTER_RUN_DIR, name);
}

void sg_cluster_slurm_conf(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/daemons-%s/slurm.conf", SG_CLUSTER_RUN_DIR, name);
}

int sg_cluster_has_slurm(const char *name) {
  char conf[256];
  sg_cluster_slurm_conf(name, conf, sizeof conf);
  return access(conf, R_OK) == 0;
}

/* A file of the daemons' directory, 0600 (0400 for the key), with text. */
static int write_file(const char *dir, const char *leaf, const void *p, size_t n, mode_t mode) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, leaf);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  ssize_t w = write(fd, p, n);
  if (close(fd) != 0 || w != (ssize_t)n) return sg_err_set(SG_EIO, "%s: write failed", path);
  return SG_OK;
}

static int make_dir(const char *dir, const char *leaf, const char *sub) {
  char path[512];
  snprintf(path, sizeof path, "%s%s%s%s%s", dir, leaf ? "/" : "", leaf ? leaf : "", sub ? "/" : "",
           sub ? sub : "");
  if (mkdir(path, 0700) < 0) return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  return SG_OK;
}

/* slurm.conf for the cluster: slurmctld on h0, node hI at its address.
 * KillWait=0: a step or job that ends (srun's --kill-on-bad-exit, scancel,
 * the allocation's command gone) gets SIGKILL right after SIGTERM; a step
 * daemon sleeps KillWait even when its tasks are already gone, so with 2 s
 * every failed run left its step daemons (one per node) 2 s past srun's
 * and salloc's return.  sgdlab's ranks keep nothing to save on SIGTERM. */
static int write_conf(const sg_cluster_t *cl, const char *dir) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return SG_ENOMEM;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  fprintf(f,
          "# made by sgdlab cluster up --slurm; removed by sgdlab cluster down\n"
          "ClusterName=sgc%s\nSlurmctldHost=h0(%s)\n"
          "SlurmUser=root\nSlurmdUser=root\n"
          "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=%s/munge.sock\n"
          "StateSaveLocation=%s/state\nSlurmdSpoolDir=%s/spool/%%n\nTmpFS=%s/tmp/%%n\n"
          "SlurmctldPidFile=%s/slurmctld.pid\nSlurmdPidFile=%s/slurmd-%%n.pid\n"
          "SlurmctldLogFile=%s/slurmctld.log\nSlurmdLogFile=%s/slurmd-%%n.log\n"
          "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSwitchType=switch/none\n"
          "MpiDefault=none\nReturnToService=2\nSchedulerType=sched/backfill\n"
          "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n"
          "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
          "JobAcctGatherType=jobacct_gather/none\nSlurmctldTimeout=30\nSlurmdTimeout=30\n"
          "InactiveLimit=0\nKillWait=0\nMinJobAge=5\n",
          cl->d.name, cl->addr[0], dir, dir, dir, dir, dir, dir, dir, dir);
  for (int h = 0; h < cl->d.nhosts; h++)
    fprintf(f, "NodeName=h%d NodeAddr=%s CPUs=%ld State=UNKNOWN\n", h, cl->addr[h],
            cpus > 0 ? cpus : 1);
  fprintf(f, "PartitionName=sgdlab Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
             "OverSubscribe=FORCE:4\n");
  int bad = ferror(f);
  fclose(f);
  int rc = bad ? sg_err_set(SG_EIO, "slurm.conf: cannot format") :
                 write_file(dir, "slurm.conf", text, len, 0600);
  free(text);
  return rc;
}

/* In the forked child: leave our session, enter host h (network
 * namespace, and a UTS namespace named hI; with SGC_PRIVATE_TMP also a
 * mount namespace whose /tmp is a tmpfs of its own, as a separate
 * machine's), tell the parent through `ready` that the namespaces exist,
 * exec. */
static void daemon_child(const sg_cluster_t *cl, int h, int flags, int ready, char *const *argv,
                         const char *log) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  setsid();
  if (h >= 0) {
    char hn[16];
    snprintf(hn, sizeof hn, "h%d", h);
    int ns = CLONE_NEWUTS | (flags & SGC_PRIVATE_TMP ? CLONE_NEWNS : 0);
    if (setns(cl->ns_fd[h], CLONE_NEWNET) < 0 || unshare(ns) < 0 ||
        sethostname(hn, strlen(hn)) < 0)
      _exit(126);
    /* private propagation first, so that the tmpfs is not seen outside */
    if ((flags & SGC_PRIVATE_TMP) &&
        (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
         mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g") < 0))
      _exit(126);
  }
  if (write(ready, "1", 1) != 1) _exit(126);
  close(ready);
  int in = open("/dev/null", O_RDONLY), out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, 0600);
  if (in < 0 || out < 0) _exit(126);
  dup2(in, STDIN_FILENO);
  dup2(out, STDOUT_FILENO);
  dup2(out, STDERR_FILENO);
  execv(argv[0], argv);
  _exit(127);
}

/* The inode of process pid's mount namespace, or 0; its device (nsfs)
 * into *dev.  A namespace is named by both: an inode number alone could
 * be any file system's. */
static unsigned long long mnt_ns(int pid, unsigned long long *dev) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof path, "/proc/%d/ns/mnt", pid);
  if (stat(path, &st) < 0) return *dev = 0, 0;
  *dev = (unsigned long long)st.st_dev;
  return (unsigned long long)st.st_ino;
}

/* DIR/TAG.mntns: where the mount namespace made for daemon TAG is pinned. */
static void pin_path(const char *dir, const char *tag, char *out, size_t cap) {
  int n = snprintf(out, cap, "%s/%s.mntns", dir, tag);
  if (n < 0 || (size_t)n >= cap) out[0] = '\0'; /* no such path: open and stat fail */
}

/* Pin the mount namespace ns of our child pid (not yet reaped, so pid is
 * still it) with a bind mount of its namespace file on DIR/TAG.mntns:
 * while the cluster is up the kernel cannot free the namespace and give
 * its number to another (a namespace number is an inode, reused once
 * freed), so `down` may trust the number even after the daemon died. */
static int pin_ns(const char *dir, const char *tag, int pid, unsigned long long ns,
                  unsigned long long dev) {
  char pin[512], src[64];
  struct stat st;
  pin_path(dir, tag, pin, sizeof pin);
  snprintf(src, sizeof src, "/proc/%d/ns/mnt", pid);
  int fd = open(pin, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  close(fd);
  if (mount(src, pin, NULL, MS_BIND, NULL) < 0) return unlink(pin), -1;
  if (stat(pin, &st) < 0 || (unsigned long long)st.st_ino != ns ||
      (unsigned long long)st.st_dev != dev) /* it died in between */
    return umount2(pin, MNT_DETACH), unlink(pin), -1;
  return 0;
}

/* Start one daemon (in the foreground: it stays our child's process, not
 * a double fork we could lose) and record "TAG PID START [MNTNS MNTDEV]"
 * before returning; MNTNS MNTDEV: the inode and device of the mount
 * namespace made for it (SGC_PRIVATE_TMP), which every process it starts
 * inherits. */
int sgc_start_daemon(const sg_cluster_t *cl, const char *dir, const char *tag, int h, int flags,
                     char **argv) {
  char prog[512], log[512], rec[160], ok;
  SG_CHECK(sgc_find_prog(argv[0], prog, sizeof prog));
  argv[0] = prog;
  snprintf(log, sizeof log, "%s/%s.out", dir, tag);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return sg_err_set(SG_EIO, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) return close(p[0]), close(p[1]), sg_err_set(SG_EIO, "fork: %s", strerror(errno));
  if (pid == 0) close(p[0]), daemon_child(cl, h, flags, p[1], argv, log);
  close(p[1]);
  ssize_t r; /* the child's namespaces exist (or it exited): bounded by its exit */
  while ((r = read(p[0], &ok, 1)) < 0 && errno == EINTR) {
  }
  close(p[0]);
  unsigned long long start = sg_proc_start(pid), ns = 0, dev = 0;
  if (r == 1 && (flags & SGC_PRIVATE_TMP)) ns = mnt_ns(pid, &dev);
  int n = ns ? snprintf(rec, sizeof rec, "%s %d %llu %llu %llu\n", tag, (int)pid, start, ns, dev)
             : snprintf(rec, sizeof rec, "%s %d %llu\n", tag, (int)pid, start);
  char path[512];
  snprintf(path, sizeof path, "%s/" DAEMONS_FILE, dir);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (r != 1 || fd < 0 || (ns && pin_ns(dir, tag, (int)pid, ns, dev) < 0) ||
      write(fd, rec, (size_t)n) != n) {
    kill(pid, SIGKILL);
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "%s: cannot %s daemon %s", path, r != 1 ? "start" : "record", tag);
  }
  close(fd);
  return SG_OK;
}

static int start_all(const sg_cluster_t *cl, const char *dir) {
  char a[6][600], conf[512];
  snprintf(conf, sizeof conf, "%s/slurm.conf", dir);
  snprintf(a[0], sizeof a[0], "--socket=%s/munge.sock", dir);
  snprintf(a[1], sizeof a[1], "--key-file=%s/munge.key", dir);
  snprintf(a[2], sizeof a[2], "--pid-file=%s/munged.pid", dir);
  snprintf(a[3], sizeof a[3], "--log-file=%s/munged.log", dir);
  snprintf(a[4], sizeof a[4], "--seed-file=%s/munged.seed", dir);
  /* --force: the socket sits in this 0700 directory, which munged would
   * refuse (it wants other users to reach it; here only root may) */
  char *munged[] = {"munged", "--foreground", "--force", a[0], a[1], a[2], a[3], a[4], NULL};
  SG_CHECK(sgc_start_daemon(cl, dir, "munged", -1, 0, munged));
  char *ctld[] = {"slurmctld", "-D", "-i", "-f", conf, NULL};
  SG_CHECK(sgc_start_daemon(cl, dir, "slurmctld", 0, 0, ctld));
  for (int h = 0; h < cl->d.nhosts; h++) {
    char node[16], tag[24];
    snprintf(node, sizeof node, "h%d", h);
    snprintf(tag, sizeof tag, "slurmd-h%d", h);
    char *sd[] = {"slurmd", "-D", "-f", conf, "-N", node, NULL};
    SG_CHECK(sgc_start_daemon(cl, dir, tag, h, SGC_PRIVATE_TMP, sd));
  }
  return SG_OK;
}

/* Every node idle in sinfo (asked from h0), polled until the deadline. */
static int wait_idle(const sg_cluster_t *cl, double deadline) {
  char out[8192];
  char *argv[] = {"sinfo", "-h", "-N", "-o", "%N %t", NULL};
  for (int tries = 0;; tries++) {
    int idle = 0;
    if (sgc_run(argv, cl->ns_fd[0], out, sizeof out) == SG_OK)
      for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        idle += strstr(l, " idle") != NULL;
    if (idle == cl->d.nhosts) return SG_OK;
    if (sg_now() > deadline)
      return sg_err_set(SG_ETIMEOUT, "slurm: %d of %d nodes idle after %d sinfo polls; see the logs",
                        idle, cl->d.nhosts, tries + 1);
    struct timespec ts = {0, 100 * 1000 * 1000}; /* poll period, not a synchronization */
    nanosleep(&ts, NULL);
  }
}

int sgc_daemons_prepare(const sg_cluster_t *cl, const char *what) {
  char dir[256], path[300];
  sg_cluster_daemons_dir(cl->d.name, dir, sizeof dir);
  for (int h = 0; h < cl->d.nhosts; h++)
    if (cl->ns_fd[h] < 0) return sg_err_set(SG_EINVAL, "%s: host %d is not open", what, h);
  snprintf(path, sizeof path, "%s/tmp", dir);
  if (access(path, F_OK) == 0) return SG_OK; /* the other daemons made it */
  if (mkdir(dir, 0700) < 0) return sg_err_set(SG_EIO, "%s: %s", dir, strerror(errno));
  SG_CHECK(make_dir(dir, "tmp", NULL));
  for (int h = 0; h < cl->d.nhosts; h++) {
    char node[16];
    snprintf(node, sizeof node, "h%d", h);
    SG_CHECK(make_dir(dir, "tmp", node));
  }
  return SG_OK;
}

int sgc_write_file(const char *dir, const char *leaf, const void *p, size_t n, mode_t mode) {
  return write_file(dir, leaf, p, n, mode);
}

int sg_cluster_slurm_up(const sg_cluster_t *cl, double timeout_s) {
  char dir[256], conf[256];
  unsigned char key[1024];
  sg_cluster_daemons_dir(cl->d.name, dir, sizeof dir);
  sg_cluster_slurm_conf(cl->d.name, conf, sizeof conf);
  SG_CHECK(sgc_daemons_prepare(cl, "slurm"));
  if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key)
    return sg_err_set(SG_EIO, "getrandom: %s", strerror(errno));
  SG_CHECK(write_file(dir, "munge.key", key, sizeof key, 0400));
  SG_CHECK(write_conf(cl, dir));
  SG_CHECK(make_dir(dir, "state", NULL));
  SG_CHECK(make_dir(dir, "spool", NULL));
  for (int h = 0; h < cl->d.nhosts; h++) {
    char node[16];
    snprintf(node, sizeof node, "h%d", h);
    SG_CHECK(make_dir(dir, "spool", node));
  }
  setenv("SLURM_CONF", conf, 1); /* for sinfo, which sgc_run starts */
  SG_CHECK(start_all(cl, dir));
  return wait_idle(cl, sg_now() + timeout_s);
}

/* ---- down ---------------------------------------------------------------------- */

typedef struct daemon_rec {
  char tag[32];
  int pid;
  unsigned long long start;
  unsigned long long mntns, mntdev; /* the mount namespace made for it (inode, nsfs device), or 0 */
} daemon_rec_t;

/* The recorded daemons (all, alive or not). */
static int read_records(const char *dir, daemon_rec_t *d, int cap) {
  char path[512], line[160];
  snprintf(path, sizeof path, "%s/" DAEMONS_FILE, dir);
  FILE *f = fopen(path, "re");
  int n = 0;
  while (f && n < cap && fgets(line, sizeof line, f)) {
    d[n].mntns = d[n].mntdev = 0; /* a record without the device: its namespace is not trusted */
    if (sscanf(line, "%31s %d %llu %llu %llu", d[n].tag, &d[n].pid, &d[n].start, &d[n].mntns,
               &d[n].mntdev) >= 3 && d[n].pid > 1 && d[n].start)
      n++;
  }
  if (f) fclose(f);
  return n;
}

/* Whether a recorded daemon still runs (a zombie has ended). */
static int running(const daemon_rec_t *d) {
  int st = sg_proc_state(d->pid);
  return st && st != 'Z' && st != 'X' && sg_proc_start(d->pid) == d->start;
}

/* ---- signals through pidfds ------------------------------------------------ */

void (*sg_cluster_signal_race_hook_)(int pid);

/* A handle on process pid, opened BEFORE the caller checks who pid is: a
 * pidfd, which stays the process it was opened on, so when the check that
 * follows passes, a signal through it reaches the checked process or, if
 * that one is gone meanwhile, nobody (ESRCH), never a process that got its
 * pid since.  -1: pid is gone.  -2: no pidfd (a kernel without pidfd_open,
 * Linux < 5.3, or no descriptor left), said once in one line;
 * signal_handle then signals by pid, right after the check. */
static int pid_handle(int pid) {
  static int told;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) return fd;
  if (errno == ESRCH) return -1;
  if (!told++)
    fprintf(stderr, "sgdlab cluster: no pidfd (%s): processes are signalled by pid right after "
            "their check\n", errno == ENOSYS ? "this kernel has no pidfd_open, Linux < 5.3" :
            strerror(errno));
  return -2;
}

/* sig to the process of handle h (pid_handle; pid for the fallback) that
 * passed its check; 1 when it went. */
static int signal_handle(int h, int pid, int sig) {
  if (sg_cluster_signal_race_hook_) sg_cluster_signal_race_hook_(pid); /* tests: a pid reused now */
  if (h >= 0) return syscall(SYS_pidfd_send_signal, h, sig, NULL, 0) == 0;
  return h == -2 && kill(pid, sig) == 0;
}

static void close_handle(int h) {
  if (h >= 0) close(h);
}

/* Wait until none but `except` (-1: none) runs; how many still do. */
static int wait_gone(const daemon_rec_t *d, int n, int except, double deadline) {
  for (;;) {
    int left = 0;
    for (int i = 0; i < n; i++) left += i != except && running(&d[i]);
    if (!left || sg_now() > deadline) return left;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Whether record d's mount namespace (inode and nsfs device) still names
 * the namespace made for it: pinned on DIR/TAG.mntns (pin_ns), or its
 * daemon still runs in it.  Else the number may have been freed and given
 * to another namespace, whose processes are not the cluster's. */
static int ns_trusted(const char *dir, const daemon_rec_t *d) {
  char pin[512];
  struct stat st;
  unsigned long long dev;
  pin_path(dir, d->tag, pin, sizeof pin);
  if (!d->mntdev) return 0;
  if (lstat(pin, &st) == 0 && (unsigned long long)st.st_ino == d->mntns &&
      (unsigned long long)st.st_dev == d->mntdev)
    return 1;
  return running(d) && mnt_ns(d->pid, &dev) == d->mntns && dev == d->mntdev;
}

/* Unpin every pinned namespace of the cluster (its processes are gone). */
static void unpin_all(const char *dir) {
  enum { MAXD = 2 * SG_CLUSTER_MAX_HOSTS + 8 };
  static daemon_rec_t d[MAXD];
  int n = read_records(dir, d, MAXD);
  for (int i = 0; i < n; i++) {
    char pin[512];
    if (!d[i].mntns) continue;
    pin_path(dir, d[i].tag, pin, sizeof pin);
    umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW);
    unlink(pin);
  }
}

/* The record (alive or not) whose mount namespace process pid is in and
 * which started before pid did, or NULL: a process the cluster's daemon
 * started (every process a node's slurmd starts inherits its mount
 * namespace; one started before the daemon cannot be its). */
static const daemon_rec_t *started_by(int pid, const daemon_rec_t *d, int n,
                                      unsigned long long *start) {
  unsigned long long dev, ns = mnt_ns(pid, &dev);
  *start = ns ? sg_proc_start(pid) : 0;
  for (int i = 0; ns && i < n; i++)
    if (d[i].mntns == ns && d[i].mntdev == dev && pid != d[i].pid && *start >= d[i].start)
      return &d[i];
  return NULL;
}

/* SIGKILL to process pid when it is (still, by pid and start time) one
 * that a daemon in d started: the pidfd is opened first and the checks
 * made after, so a pid reused in between is never signalled. */
static int kill_started(int pid, const daemon_rec_t *d, int n) {
  unsigned long long start, again;
  if (!started_by(pid, d, n, &start)) return 0;
  int h = pid_handle(pid);
  if (h == -1) return 0; /* gone */
  int ok = started_by(pid, d, n, &again) && again == start && signal_handle(h, pid, SIGKILL);
  close_handle(h);
  return ok;
}

/* SIGKILL to every process the nodes' slurmds started (their step
 * daemons and the tasks under them), alive or not: a job whose srun or
 * harness was killed, or whose node's slurmd is gone, can leave step
 * daemons waiting.  A slurmstepd the cluster did not start (another
 * cluster's, the machine's own) is not in a recorded namespace. */
static void stop_stepds(const char *dir) {
  enum { MAXD = 2 * SG_CLUSTER_MAX_HOSTS + 8 };
  static daemon_rec_t all[MAXD];
  int n = read_records(dir, all, MAXD), any = 0;
  for (int i = 0; i < n; i++) {
    if (all[i].mntns && !ns_trusted(dir, &all[i])) all[i].mntns = 0; /* number may be reused */
    any |= all[i].mntns != 0;
  }
  DIR *d = any ? opendir("/proc") : NULL;
  for (struct dirent *e; d && (e = readdir(d));) {
    int pid = atoi(e->d_name);
    if (pid > 1) kill_started(pid, all, n);
  }
  if (d) closedir(d);
}

/* Whether pid descends from one of the recorded sshd listeners (ppid
 * links, at most 16 hops). */
static int under_sshd(int pid, const daemon_rec_t *d, int n) {
  char buf[512];
  for (int hop = 0; hop < 16 && pid > 1; hop++) {
    const char *s = sg_proc_stat(pid, buf, sizeof buf);
    int ppid;
    if (!s || sscanf(s, "%*c %d", &ppid) != 1) return 0;
    for (int i = 0; i < n; i++)
      if (ppid == d[i].pid && !strncmp(d[i].tag, "sshd-", 5)) return 1;
    pid = ppid;
  }
  return 0;
}

/* Handles on the processes under the recorded sshds, each opened before
 * its parentage is checked (pid_handle), at most cap; how many. */
static int snapshot_sessions(const daemon_rec_t *d, int n, int *h, int *pids, int cap) {
  int k = 0;
  DIR *dp = opendir("/proc");
  for (struct dirent *e; dp && k < cap && (e = readdir(dp));) {
    int pid = atoi(e->d_name);
    if (pid <= 1 || !under_sshd(pid, d, n)) continue;
    int fd = pid_handle(pid);
    if (fd == -1) continue; /* gone */
    if (!under_sshd(pid, d, n)) { /* its pid was reused before the pidfd */
      close_handle(fd);
      continue;
    }
    h[k] = fd, pids[k++] = pid;
  }
  if (dp) closedir(dp);
  return k;
}

/* SIGKILL to everything the cluster's sshds started (sessions and the
 * commands they run: ranks, orted), taken as one snapshot so that a
 * command whose session dies first is not lost to reparenting; repeated
 * while new ones appear (a few rounds).  Each through its pidfd. */
static void stop_sessions(const daemon_rec_t *d, int n) {
  enum { MAXK = 256 }; /* descriptors held at once, besides the daemons' */
  static int h[MAXK], pids[MAXK];
  for (int round = 0; round < 8; round++) {
    int k = snapshot_sessions(d, n, h, pids, MAXK);
    if (!k) return;
    for (int i = 0; i < k; i++) signal_handle(h[i], pids[i], SIGKILL), close_handle(h[i]);
    struct timespec ts = {0, 20 * 1000 * 1000}; /* let the killed go before looking again */
    if (k < MAXK) nanosleep(&ts, NULL);
  }
}

/* The recorded daemons that still run as recorded (same pid, same start),
 * compacted into d, each with a handle opened before that check; how many. */
static int open_daemons(const char *dir, daemon_rec_t *d, int *h, int cap) {
  int n = read_records(dir, d, cap), live = 0;
  for (int i = 0; i < n; i++) {
    int fd = pid_handle(d[i].pid);
    if (fd != -1 && sg_proc_start(d[i].pid) == d[i].start) {
      d[live] = d[i], h[live++] = fd;
      continue;
    }
    close_handle(fd);
  }
  return live;
}

/* sig, through its handle, to every daemon of d but `except` that runs. */
static void signal_all(const daemon_rec_t *d, const int *h, int n, int except, int sig) {
  for (int i = 0; i < n; i++)
    if (i != except && running(&d[i])) signal_handle(h[i], d[i].pid, sig);
}

/* SIGTERM to the node daemons and slurmctld, then munged; SIGKILL to what
 * is left after the grace.  Returns how many could not be stopped. */
static int stop_daemons(const char *dir) {
  enum { MAXD = 2 * SG_CLUSTER_MAX_HOSTS + 8 };
  static daemon_rec_t d[MAXD];
  static int h[MAXD];
  stop_stepds(dir);
  int n = open_daemons(dir, d, h, MAXD), munge = -1;
  stop_sessions(d, n);
  for (int i = 0; i < n; i++)
    if (!strcmp(d[i].tag, "munged")) munge = i;
  signal_all(d, h, n, munge, SIGTERM);
  if (wait_gone(d, n, munge, sg_now() + STOP_GRACE_S)) signal_all(d, h, n, munge, SIGKILL);
  if (munge >= 0 && running(&d[munge])) signal_handle(h[munge], d[munge].pid, SIGTERM);
  if (wait_gone(d, n, -1, sg_now() + STOP_GRACE_S)) signal_all(d, h, n, -1, SIGKILL);
  int left = wait_gone(d, n, -1, sg_now() + 5.0);
  for (int i = 0; i < n; i++) close_handle(h[i]);
  return left;
}

int sg_cluster_daemons_down(const char *name) {
  char dir[256], leaf[64];
  sg_cluster_daemons_dir(name, dir, sizeof dir);
  if (access(dir, F_OK) < 0) return SG_OK;
  int left = stop_daemons(dir);
  if (!left) unpin_all(dir);
  if (left) return sg_err_set(SG_EIO, "cluster %s: %d daemon%s would not stop; %s stays", name,
                              left, left == 1 ? "" : "s", dir);
  snprintf(leaf, sizeof leaf, "daemons-%s", name);
  int at = open(SG_CLUSTER_RUN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (at < 0) return sg_err_set(SG_EIO, "%s: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
  int rc = sg_rmtree_at(at, leaf);
  close(at);
  return rc;
}
