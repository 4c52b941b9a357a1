/* launch.c - local fork/exec, ssh and mpirun launchers (see launch.h). */
#define _GNU_SOURCE /* syscall */
#include "launch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "proc.h"
#include "stage.h"

enum { KIN_MAX = 256,    /* mpirun descendants remembered */
       ANCESTRY_HOPS = 16 /* how far up /proc ppid links are followed */ };

struct sg_launch {
  int n;          /* processes started */
  pid_t *pid;     /* [n]; 0 once reaped */
  int mpirun;     /* one process: mpirun */
  pid_t pgid;
  int err_fd;     /* read end of mpirun's stderr pipe, or -1 */
  /* mpirun's descendants (its ranks), each with a pidfd opened while it
   * was verified to descend from mpirun: it can be signalled safely after
   * mpirun is gone and the rank was reparented (sg_launch_signal) */
  int nkin;
  pid_t kin_pid[KIN_MAX];
  int kin_fd[KIN_MAX];
  /* mpirun on a cluster: the strings its command line points at */
  char hostfile[4096], agent[4096], subnet[64];
  char tmpdir_env[4200]; /* smpirun: "TMPDIR=..." */
  char shmdir[4096];     /* mpirun on this host: Open MPI's shared-memory segments */
  char rsh_agent[4200];  /* mpirun over ssh with a configuration: "ssh -F PATH" */
  int *stage_fd;         /* launcher ssh: each rank's ssh stdin (write end), or -1 */
};

/* Environment variables passed through mpirun -x when set here. */
static const char *const PASS_ENV[] = {
    "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
    "SGDLAB_BIN_DIR", "PATH", "LD_LIBRARY_PATH", NULL};

int sg_launch_find_rank_bin(char *out, size_t cap) {
  return sg_launch_find_bin("sgdlab-rank", out, cap);
}

int sg_launch_find_bin(const char *name, char *out, size_t cap) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      snprintf(out, cap, "%s/%s", self, name);
      if (access(out, X_OK) == 0) return SG_OK;
    }
  }
  const char *bin = getenv("SGDLAB_BIN_DIR");
  if (bin && *bin) {
    snprintf(out, cap, "%s/harness/%s", bin, name);
    if (access(out, X_OK) == 0) return SG_OK;
  }
  return sg_err_set(SG_ENOTFOUND,
                    "%s not found next to this program (%s) nor in "
                    "$SGDLAB_BIN_DIR/harness (%s)",
                    name, n > 0 ? self : "?", bin ? bin : "unset");
}

int sg_launch_on_path(const char *prog) {
  const char *path = getenv("PATH");
  if (!path) return 0;
  char buf[4096];
  for (const char *p = path; *p;) {
    const char *c = strchr(p, ':');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, prog);
    if (access(buf, X_OK) == 0) return 1;
    p += len + (c ? 1 : 0);
  }
  return 0;
}

static void print_cmd(char *const *argv) {
  fprintf(stderr, "sgdlab:");
  for (int i = 0; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
  fputc('\n', stderr);
}

/* fork; the child joins process group pgid (0 = lead a new one), takes
 * err_fd (>= 0) as its stderr, and execs.  The child dies with the
 * harness (PR_SET_PDEATHSIG survives exec): a harness killed with
 * SIGKILL, or whose terminal closed, leaves no rank (nor mpirun) behind.
 * The harness may already have died between fork and prctl: then the
 * child was reparented, getppid() is no longer `parent`, and it exits.
 * With a cluster, the child enters host `host`'s network namespace first
 * (its namespace fds are close-on-exec: the rank inherits none). */
typedef struct spawn_at {
  const sg_cluster_t *cluster; /* NULL: stay in this namespace */
  int host;
  /* the simulator (smpirun): no transparent huge pages, inherited across
   * exec -- the first touch of each simulated rank's stack otherwise
   * zeroes a 2 MiB page (256 ranks: 835 MB of huge pages) */
  int no_thp;
  int in_fd; /* > 0: the child's standard input (launcher ssh's stage pipe) */
} spawn_at_t;

static int spawn(char *const *argv, const char *rank, const char *size, pid_t pgid, int err_fd,
                 spawn_at_t at, pid_t *out) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return sg_err_set(SG_EIO, "fork: %s", strerror(errno));
  if (pid == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) _exit(127);
    setpgid(0, pgid);
    if (err_fd >= 0) {
      dup2(err_fd, STDERR_FILENO);
      close(err_fd);
    }
    if (at.in_fd > 0) dup2(at.in_fd, STDIN_FILENO); /* the copy is not close-on-exec */
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (at.no_thp) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    if (rank) setenv("SGDLAB_RANK", rank, 1);
    if (size) setenv("SGDLAB_SIZE", size, 1);
    if (at.cluster && sg_cluster_enter(at.cluster, at.host) < 0) {
      fprintf(stderr, "sgdlab: rank %s: %s\n", rank ? rank : "?", sg_err_msg());
      _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "sgdlab: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  setpgid(pid, pgid ? pgid : pid); /* both sides, so no race with kill */
  *out = pid;
  return SG_OK;
}

/* The TCP BTL between the hosts: a 1 MiB message goes eagerly, larger
 * ones without put, and a progress thread answers the peer
 * (docs/wire.md has the numbers).  Each fixes one way in which a message
 * waits for its receiver:
 *  - past the eager limit (64 KiB by default) a message waits for the
 *    receiver's answer to its rendezvous, which crosses the opposite
 *    direction behind the peer's own data.  With every ring segment
 *    (1 MiB by default) a rendezvous, a 1 Gbit/s link carried 51-96 % of
 *    its rate, by how the two directions' messages lined up.  An eager
 *    limit that holds a default segment and ob1's header sends it at
 *    once, as zmq does.
 *  - put (on by default): a larger message is fetched by its receiver,
 *    whose PUT requests wait behind the peer's bulk fragments (a put
 *    fragment is by default the whole rest of the message).  Send-only,
 *    the sender streams btl_tcp_max_send_size fragments after one ACK,
 *    and control messages slip in between them.
 *  - a rank's main thread polls: with more runnable threads than cores an
 *    ACK waits for the peer's next timeslice.  The progress thread sleeps
 *    in epoll, is woken by the arriving data and answers itself. */
#define SG_CLUSTER_BTL_TCP_EAGER SG_CLUSTER_EAGER_STR(SG_CLUSTER_EAGER_BYTES)
#define SG_CLUSTER_BTL_TCP_FLAGS "send,inplace,need-ack,need-csum"

/* mpirun across the hosts of an emulated cluster: rank r on host
 * host_of[r] (the sequential mapper reads one host per rank from the
 * hostfile), daemons started on the other hosts through sgdlab-nsexec
 * (next to sgdlab-rank) instead of ssh, and every byte between ranks over
 * TCP on the cluster's subnet: no shared memory (vader) and no other PML
 * (UCX would bring its own shared-memory transports), so what two hosts
 * exchange crosses their links; the TCP BTL tuned as above.  The daemons
 * stay attached (no --daemonize): as mpirun's descendants, their ranks
 * can be signalled. */
static int cluster_args(sg_launch_t *l, const sg_launch_cfg_t *cfg, char **argv, int *a) {
  const char *slash = strrchr(cfg->spec, '/');
  snprintf(l->hostfile, sizeof l->hostfile, "%.*smpirun-hosts", slash ? (int)(slash - cfg->spec) + 1 : 0,
           cfg->spec);
  FILE *f = fopen(l->hostfile, "w");
  if (!f) return sg_err_set(SG_EIO, "launcher mpirun: %s: %s", l->hostfile, strerror(errno));
  /* mpirun runs on rank 0's host and calls that node by this machine's
   * name (it sees the address as its own), so its lines must too */
  char self[256] = "localhost";
  gethostname(self, sizeof self - 1);
  for (int r = 0; r < cfg->nprocs; r++)
    fprintf(f, "%s\n", cfg->host_of[r] == cfg->host_of[0]
                           ? self : sg_cluster_host_addr(cfg->cluster, cfg->host_of[r]));
  if (fclose(f) != 0) return sg_err_set(SG_EIO, "launcher mpirun: %s: write failed", l->hostfile);
  slash = strrchr(cfg->rank_bin, '/');
  snprintf(l->agent, sizeof l->agent, "%.*ssgdlab-nsexec", slash ? (int)(slash - cfg->rank_bin) + 1 : 0,
           cfg->rank_bin);
  if (access(l->agent, X_OK) < 0)
    return sg_err_set(SG_ENOTFOUND, "launcher mpirun: %s (the rsh agent that enters a cluster "
                      "host) not found next to sgdlab-rank", l->agent);
  snprintf(l->subnet, sizeof l->subnet, "%s", sg_cluster_subnet(cfg->cluster));
  char *const args[] = {"--hostfile", l->hostfile, "--mca", "rmaps", "seq",
                        "--mca", "plm_rsh_agent", l->agent, "--mca", "plm_rsh_no_tree_spawn", "1",
                        "--mca", "routed", "direct", /* every daemon talks to mpirun itself */
                        "--leave-session-attached",
                        "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                        "--mca", "btl_tcp_if_include", l->subnet,
                        "--mca", "oob_tcp_if_include", l->subnet,
                        "--mca", "btl_tcp_flags", SG_CLUSTER_BTL_TCP_FLAGS,
                        "--mca", "btl_tcp_eager_limit", SG_CLUSTER_BTL_TCP_EAGER,
                        "--mca", "btl_tcp_progress_thread", "1", NULL};
  for (int i = 0; args[i]; i++) argv[(*a)++] = args[i];
  setenv("SGDLAB_CLUSTER", sg_cluster_name(cfg->cluster), 1); /* for the agent, via mpirun */
  /* the run's private directory, where the agent makes each host's
   * temporary directory (rundir.h) */
  char dir[sizeof l->hostfile];
  slash = strrchr(cfg->spec, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cfg->spec) : 1, slash ? cfg->spec : ".");
  setenv("SGDLAB_RUNDIR", dir, 1);
  return SG_OK;
}

/* mpirun's command line for cfg, into argv (80 slots, NULL-terminated);
 * np is the caller's buffer for --np's value */
static int mpirun_argv(sg_launch_t *l, const sg_launch_cfg_t *cfg, char **argv, char *np,
                       size_t np_size) {
  int rc = SG_OK;
  int a = 0;
  snprintf(np, np_size, "%d", cfg->nprocs);
  argv[a++] = "mpirun";
  argv[a++] = "--np";
  argv[a++] = np;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int remote = cfg->hosts && *cfg->hosts;
  if (!remote && (cfg->cluster || (cores > 0 && cfg->nprocs > cores)))
    argv[a++] = "--oversubscribe";
  if (remote) {
    argv[a++] = "-H";
    argv[a++] = (char *)cfg->hosts;
  }
  if (remote && cfg->ssh_config && cfg->ssh_config[0]) { /* a path of [A-Za-z0-9/._+-] */
    snprintf(l->rsh_agent, sizeof l->rsh_agent, "ssh -F %s", cfg->ssh_config);
    argv[a++] = "--mca";
    argv[a++] = "plm_rsh_agent";
    argv[a++] = l->rsh_agent;
  }
  if (cfg->cluster) {
    SG_TRY(cluster_args(l, cfg, argv, &a));
  } else { /* an earlier run's, in this harness */
    unsetenv("SGDLAB_CLUSTER");
    unsetenv("SGDLAB_RUNDIR");
  }
  if (!cfg->cluster && !remote) { /* shared-memory segments in the run's directory (the spec's), */
    const char *sl = strrchr(cfg->spec, '/'); /* not /dev/shm: what killed ranks leave goes with it */
    snprintf(l->shmdir, sizeof l->shmdir, "%.*s", sl ? (int)(sl - cfg->spec) : 1, sl ? cfg->spec : ".");
    char *const shm[] = {"--mca", "btl_vader_backing_directory", l->shmdir,
                         /* one host: shared memory only, so ranks open no tcp listener */
                         "--mca", "btl", "self,vader", NULL};
    for (int i = 0; shm[i]; i++) argv[a++] = shm[i];
  }
  if (geteuid() == 0) argv[a++] = "--allow-run-as-root";
  argv[a++] = "--bind-to";
  argv[a++] = "none";
  for (int i = 0; PASS_ENV[i]; i++)
    if (getenv(PASS_ENV[i])) {
      argv[a++] = "-x";
      argv[a++] = (char *)PASS_ENV[i];
    }
  argv[a++] = "-x";
  argv[a++] = "SGDLAB_SIZE";
  argv[a++] = (char *)cfg->rank_bin;
  argv[a++] = (char *)cfg->spec;
  argv[a] = NULL;
fail:
  return rc;
}

/* smpirun's command line (a simulated run): `env TMPDIR=DIR smpirun
 * ARGS... sgdlab-rank-smpi SPEC` (smpirun's own -tmpdir is broken in
 * SimGrid 3.32; its temporary files go to the run's directory). */
static int smpirun_argv(sg_launch_t *l, const sg_launch_cfg_t *cfg, char **argv, size_t cap) {
  size_t a = 0;
  snprintf(l->tmpdir_env, sizeof l->tmpdir_env, "TMPDIR=%s", cfg->sim_tmpdir);
  argv[a++] = "env";
  argv[a++] = l->tmpdir_env;
  argv[a++] = "smpirun";
  for (size_t i = 0; cfg->sim_argv[i]; i++) {
    if (a + 3 >= cap) return sg_err_set(SG_EINVAL, "smpirun: too many arguments");
    argv[a++] = (char *)cfg->sim_argv[i];
  }
  argv[a++] = (char *)cfg->rank_bin;
  argv[a++] = (char *)cfg->spec;
  argv[a] = NULL;
  return SG_OK;
}

/* srun's stdin (write end fd, kept open as stage_fd[0]): the stages of
 * every task, which srun broadcasts (--input=all); the tasks take their
 * rank from SLURM_PROCID and end when it closes. */
static int stage_all(sg_launch_t *l, const sg_launch_cfg_t *cfg, int fd) {
  if (!(l->stage_fd = malloc(sizeof *l->stage_fd))) return close(fd), SG_ENOMEM;
  l->stage_fd[0] = fd;
  const char *slash = strrchr(cfg->spec, '/');
  char keys[4200];
  snprintf(keys, sizeof keys, "%.*skeys", slash ? (int)(slash - cfg->spec) + 1 : 0, cfg->spec);
  int rc = sg_slurm_stage_write(fd, cfg->nprocs, cfg->spec, access(keys, F_OK) == 0 ? keys : NULL);
  if (rc == SG_EPEER) rc = SG_OK, sg_err_clear(); /* srun exited: it says why */
  return rc;
}

/* One mpirun (or smpirun) that starts all the ranks; l->pid[0] is its */
static int start_mpirun(sg_launch_t *l, const sg_launch_cfg_t *cfg, const char *sizes) {
  int rc = SG_OK;
  int slurm = !strcmp(cfg->launcher, "slurm") && !cfg->sim_argv;
  const char *prog = cfg->sim_argv ? "smpirun" : slurm ? "srun" : "mpirun";
  if (!sg_launch_on_path(prog))
    return sg_err_set(SG_ENOTFOUND, "launcher %s: %s is not on PATH (install %s)", prog, prog,
                      cfg->sim_argv ? "libsimgrid-dev" : slurm ? "slurm-client" : "openmpi-bin");
  char *argv[80];
  char np[16], sbufs[4][32];
  if (cfg->sim_argv) SG_TRY(smpirun_argv(l, cfg, argv, sizeof argv / sizeof argv[0]));
  else if (slurm) SG_TRY(sg_slurm_argv(cfg, cfg->mpi, sbufs, argv, sizeof argv / sizeof argv[0]));
  else SG_TRY(mpirun_argv(l, cfg, argv, np, sizeof np));
  if (!slurm && !cfg->sim_argv && !cfg->cluster && cfg->hosts && cfg->hosts[0]) {
    char dir[4096]; /* the ranks read the spec in the run's directory */
    const char *slash = strrchr(cfg->spec, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - cfg->spec) : 1, slash ? cfg->spec : ".");
    SG_TRY(sg_ssh_probe_rundir(cfg, dir));
  }
  if (cfg->verbose) print_cmd(argv);
  if (!(l->pid = calloc(1, sizeof *l->pid))) return SG_ENOMEM;
  setenv("SGDLAB_SIZE", sizes, 1); /* for -x; the harness never reads it */
  /* mpirun's stderr: Open MPI's banners (and its ranks' stderr) go to the
   * harness, which names the failed rank from them and keeps the
   * terminal clean (run/mpirun.c) */
  int p[2];
  if (pipe(p) < 0) return sg_err_set(SG_EIO, "launcher mpirun: pipe: %s", strerror(errno));
  l->err_fd = p[0];
  fcntl(p[0], F_SETFD, FD_CLOEXEC); /* the harness is single-threaded: no race */
  fcntl(p[0], F_SETFL, fcntl(p[0], F_GETFL) | O_NONBLOCK);
  /* on a cluster mpirun itself runs on rank 0's host: its daemons on
   * the other hosts reach its out-of-band channel over the links */
  spawn_at_t at = {cfg->cluster, cfg->cluster ? cfg->host_of[0] : 0, cfg->sim_argv != NULL, 0};
  int in[2] = {-1, -1}; /* srun --input=all: every rank's stage to every task */
  int staged = slurm;   /* zmq and MPI ranks alike: nothing read from the node's disk */
  if (staged && pipe2(in, O_CLOEXEC) < 0)
    return close(p[1]), sg_err_set(SG_EIO, "launcher slurm: pipe: %s", strerror(errno));
  at.in_fd = in[0];
  rc = spawn(argv, NULL, NULL, 0, p[1], at, &l->pid[0]);
  close(p[1]);
  if (in[0] >= 0) close(in[0]);
  if (rc < 0 && in[1] >= 0) close(in[1]);
  SG_TRY(rc);
  l->n = 1;
  l->mpirun = 1;
  l->pgid = l->pid[0];
  if (staged) SG_TRY(stage_all(l, cfg, in[1]));
fail:
  return rc;
}

/* One process per rank, all in rank 0's process group */
static int start_local(sg_launch_t *l, const sg_launch_cfg_t *cfg, const char *sizes) {
  int rc = SG_OK;
  if (!(l->pid = calloc((size_t)cfg->nprocs, sizeof *l->pid))) return SG_ENOMEM;
  char *argv[] = {(char *)cfg->rank_bin, (char *)cfg->spec, NULL};
  if (cfg->verbose) print_cmd(argv);
  for (int r = 0; r < cfg->nprocs; r++) {
    char rank[16];
    snprintf(rank, sizeof rank, "%d", r);
    spawn_at_t at = {cfg->cluster, cfg->cluster ? cfg->host_of[r] : 0, 0, 0};
    SG_TRY(spawn(argv, rank, sizes, l->pgid, -1, at, &l->pid[r]));
    l->n = r + 1;
    if (r == 0) l->pgid = l->pid[0];
  }
fail:
  return rc;
}

/* One ssh per rank (launch_ssh.c), all in rank 0's process group; each
 * one's stdin a pipe that gets the rank's stage and stays open (its write
 * end close-on-exec, so no other child holds it). */
static int start_ssh(sg_launch_t *l, const sg_launch_cfg_t *cfg) {
  int rc = SG_OK;
  if (!sg_launch_on_path("ssh"))
    return sg_err_set(SG_ENOTFOUND, "launcher ssh: ssh is not on PATH (install openssh-client)");
  if (!(l->pid = calloc((size_t)cfg->nprocs, sizeof *l->pid)) ||
      !(l->stage_fd = malloc((size_t)cfg->nprocs * sizeof *l->stage_fd)))
    return SG_ENOMEM;
  for (int r = 0; r < cfg->nprocs; r++) l->stage_fd[r] = -1;
  const char *slash = strrchr(cfg->spec, '/');
  char keys[4200], host[256], cmd[4300], rank[16], *argv[24];
  snprintf(keys, sizeof keys, "%.*skeys", slash ? (int)(slash - cfg->spec) + 1 : 0, cfg->spec);
  int have_keys = access(keys, F_OK) == 0;
  for (int r = 0; r < cfg->nprocs; r++) {
    int p[2];
    SG_TRY(sg_hosts_of_rank(cfg->hosts, r, host, sizeof host));
    SG_TRY(sg_ssh_rank_cmd(cfg->rank_bin, cmd, sizeof cmd));
    SG_TRY(sg_ssh_argv(cfg, host, cmd, argv, sizeof argv / sizeof *argv));
    if (cfg->verbose) print_cmd(argv);
    if (pipe2(p, O_CLOEXEC) < 0) return sg_err_set(SG_EIO, "launcher ssh: pipe: %s", strerror(errno));
    snprintf(rank, sizeof rank, "%d", r);
    spawn_at_t at = {NULL, 0, 0, p[0]};
    rc = spawn(argv, rank, NULL, l->pgid, -1, at, &l->pid[r]);
    close(p[0]);
    if (rc < 0) close(p[1]);
    SG_TRY(rc);
    l->stage_fd[r] = p[1];
    l->n = r + 1;
    if (r == 0) l->pgid = l->pid[0];
    /* a write to an ssh that already exited (SG_EPEER) is not an error
     * here: its exit names the rank */
    rc = sg_stage_write(p[1], r, cfg->nprocs, cfg->spec, have_keys ? keys : NULL);
    if (rc == SG_EPEER) rc = SG_OK, sg_err_clear();
    SG_TRY(rc);
  }
fail:
  return rc;
}

int sg_launch_start(sg_launch_t **out, const sg_launch_cfg_t *cfg) {
  int rc = SG_OK;
  sg_launch_t *l = calloc(1, sizeof *l);
  if (!l) return SG_ENOMEM;
  l->err_fd = -1;
  char sizes[16];
  snprintf(sizes, sizeof sizes, "%d", cfg->nprocs);
  if (!strcmp(cfg->launcher, "mpirun") || !strcmp(cfg->launcher, "slurm") || cfg->sim_argv)
    SG_TRY(start_mpirun(l, cfg, sizes));
  else if (!strcmp(cfg->launcher, "ssh")) SG_TRY(start_ssh(l, cfg));
  else SG_TRY(start_local(l, cfg, sizes));
  *out = l;
  return SG_OK;
fail:
  sg_launch_destroy(&l);
  return rc;
}

int sg_launch_poll(sg_launch_t *l, sg_exit_t *ex) {
  for (int i = 0; i < l->n; i++) {
    if (!l->pid[i]) continue;
    int st;
    pid_t p = waitpid(l->pid[i], &st, WNOHANG);
    if (p == l->pid[i] || (p < 0 && errno == ECHILD)) {
      ex->rank = l->mpirun ? -1 : i;
      ex->pid = l->pid[i];
      ex->status = p < 0 ? 0 : st;
      l->pid[i] = 0;
      return 1;
    }
  }
  return 0;
}

int sg_launch_alive(const sg_launch_t *l) {
  int n = 0;
  for (int i = 0; i < l->n; i++) n += l->pid[i] != 0;
  return n;
}

pid_t sg_launch_pid(const sg_launch_t *l, int rank) {
  if (l->mpirun) return l->pid[0];
  return rank >= 0 && rank < l->n ? l->pid[rank] : 0;
}

int sg_launch_stderr_fd(const sg_launch_t *l) { return l ? l->err_fd : -1; }

/* Whether pid descends from ancestor, following at most ANCESTRY_HOPS
 * ppid links in /proc (a rank under mpirun is its child or grandchild). */
static int descends_from(pid_t pid, pid_t ancestor) {
  char buf[512];
  for (int hop = 0; hop < ANCESTRY_HOPS && pid > 1; hop++) {
    const char *s = sg_proc_stat(pid, buf, sizeof buf);
    int ppid;
    if (!s || sscanf(s, "%*c %d", &ppid) != 1) return 0;
    if (ppid == ancestor) return 1;
    pid = ppid;
  }
  return 0;
}

static int own_child(const sg_launch_t *l, pid_t pid) {
  for (int i = 0; i < l->n; i++)
    if (l->pid[i] == pid) return 1; /* unreaped: its pid cannot have been reused */
  return 0;
}

static int kin_index(const sg_launch_t *l, pid_t pid) {
  for (int i = 0; i < l->nkin; i++)
    if (l->kin_pid[i] == pid) return i;
  return -1;
}

/* Remember pid when it descends from our (unreaped) mpirun; its index, or
 * -1.  The pidfd is opened first and the ancestry checked after: when the
 * check passes, the pidfd's process was alive then and is this one. */
static int kin_add(sg_launch_t *l, pid_t pid) {
  int i = kin_index(l, pid);
  if (i >= 0) return i;
  if (!l->mpirun || !l->pid[0] || l->nkin == KIN_MAX || pid <= 1) return -1;
  int fd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0 && errno != ENOSYS) return -1; /* gone */
  if (!descends_from(pid, l->pid[0])) {
    if (fd >= 0) close(fd);
    return -1;
  }
  if (fd >= 0) fcntl(fd, F_SETFD, FD_CLOEXEC);
  l->kin_pid[l->nkin] = pid;
  l->kin_fd[l->nkin] = fd; /* -1: no pidfd_open (kernel < 5.3) */
  return l->nkin++;
}

static int kin_signal(sg_launch_t *l, int i, int sig) {
  if (l->kin_fd[i] >= 0) return syscall(SYS_pidfd_send_signal, l->kin_fd[i], sig, NULL, 0) == 0;
  /* without pidfds: only while mpirun is unreaped and still an ancestor */
  return l->pid[0] && descends_from(l->kin_pid[i], l->pid[0]) && kill(l->kin_pid[i], sig) == 0;
}

/* Every process under our mpirun now (its ranks), before it is stopped. */
static void kin_snapshot(sg_launch_t *l) {
  if (!l->mpirun || !l->pid[0]) return;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d))) {
    pid_t pid = (pid_t)atoi(e->d_name);
    if (pid > 1 && pid != l->pid[0]) kin_add(l, pid);
  }
  if (d) closedir(d);
}

int sg_launch_owns(sg_launch_t *l, pid_t pid) {
  return l && pid > 0 && (own_child(l, pid) || kin_add(l, pid) >= 0);
}

int sg_launch_signal(sg_launch_t *l, pid_t pid, int sig) {
  if (!l || pid <= 0) return 0;
  if (own_child(l, pid)) return kill(pid, sig) == 0;
  int i = kin_add(l, pid);
  return i >= 0 && kin_signal(l, i, sig);
}

/* The process group holds our children (local: every rank; mpirun:
 * mpirun), so its id cannot be reused while one of them is unreaped. */
static void signal_all(sg_launch_t *l, int sig) {
  if (l->pgid > 0 && sg_launch_alive(l)) kill(-l->pgid, sig);
  for (int i = 0; i < l->n; i++)
    if (l->pid[i]) kill(l->pid[i], sig); /* in case one left the group */
}

static void reap_until(sg_launch_t *l, double until) {
  sg_exit_t ex;
  while (sg_launch_alive(l) && sg_now() < until) {
    while (sg_launch_poll(l, &ex)) {
    }
    if (sg_launch_alive(l)) {
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
}

void sg_launch_stop(sg_launch_t *l, double grace_s) {
  if (!l) return;
  kin_snapshot(l); /* mpirun's ranks: they may outlive it */
  if (sg_launch_alive(l)) {
    for (int i = 0; i < l->n; i++)
      if (l->pid[i] && sg_proc_stopped(l->pid[i])) kill(l->pid[i], SIGKILL);
    for (int i = 0; i < l->nkin; i++)
      if (sg_proc_stopped(l->kin_pid[i])) kin_signal(l, i, SIGKILL);
    signal_all(l, SIGTERM);
    reap_until(l, sg_now() + grace_s);
  }
  if (sg_launch_alive(l)) {
    signal_all(l, SIGKILL);
    reap_until(l, sg_now() + 5.0);
  }
  for (int i = 0; i < l->nkin; i++) kin_signal(l, i, SIGKILL); /* left by mpirun */
}

void sg_launch_destroy(sg_launch_t **pl) {
  if (!pl || !*pl) return;
  sg_launch_stop(*pl, 2.0);
  if ((*pl)->err_fd >= 0) close((*pl)->err_fd);
  for (int i = 0; (*pl)->stage_fd && i < (*pl)->n; i++)
    if ((*pl)->stage_fd[i] >= 0) close((*pl)->stage_fd[i]);
  free((*pl)->stage_fd);
  for (int i = 0; i < (*pl)->nkin; i++)
    if ((*pl)->kin_fd[i] >= 0) close((*pl)->kin_fd[i]);
  free((*pl)->pid);
  free(*pl);
  *pl = NULL;
}

/* ---- Open MPI's account of how the job ended --------------------------- */

void sg_mpirun_notice_init(sg_mpirun_notice_t *n) {
  memset(n, 0, sizeof *n);
  n->rank = -1;
  n->exit_code = -1;
  n->pending_rank = -1;
}

/* srun's account of a task: "srun: error: h2: task 2: Killed" or
 * "...: task 2: Exited with exit code 3" (a range "task 1-3" names no one
 * task and is skipped).  1 when line is one. */
static int srun_notice_line(sg_mpirun_notice_t *n, const char *line) {
  const char *p = strstr(line, "srun: error: ");
  char what[96];
  int rank, code;
  if (!p || !(p = strstr(p, ": task ")) || sscanf(p, ": task %d: %95[^\n]", &rank, what) != 2)
    return 0;
  if (sscanf(what, "Exited with exit code %d", &code) == 1) {
    n->rank = rank, n->exit_code = code;
    return 1;
  }
  char *core = strstr(what, " (core dumped)");
  if (core) *core = '\0';
  for (int sig = 1; sig < 32; sig++)
    if (!strcmp(what, strsignal(sig))) {
      n->rank = rank, n->signal = sig;
      return 1;
    }
  return 0;
}

int sg_mpirun_notice_line(sg_mpirun_notice_t *n, const char *line) {
  if (n->rank >= 0) return 0; /* the first process to end the job wins */
  int rank, pid, sig, a, b, code;
  const char *p;
  if (srun_notice_line(n, line)) return 1;
  if ((p = strstr(line, "noticed that process rank ")) &&
      sscanf(p, "noticed that process rank %d with PID %d on node %*s exited on signal %d", &rank,
             &pid, &sig) == 3) {
    n->rank = rank, n->pid = pid, n->signal = sig;
    return 1;
  }
  if ((p = strstr(line, "has exited due to process rank ")) &&
      sscanf(p, "has exited due to process rank %d with PID %d", &rank, &pid) == 2) {
    n->rank = rank, n->pid = pid, n->improper = 1;
    return 1;
  }
  if ((p = strstr(line, "Process name: [[")) &&
      sscanf(p, "Process name: [[%d,%d],%d]", &a, &b, &rank) == 3) {
    n->pending_rank = rank;
    return 0;
  }
  if (n->pending_rank >= 0 && (p = strstr(line, "Exit code:")) &&
      sscanf(p, "Exit code: %d", &code) == 1) {
    n->rank = n->pending_rank, n->exit_code = code;
    return 1;
  }
  return 0;
}
