/* launch.h - starting a run's rank processes.
 *
 * Two launchers:
 *
 *  local   fork/exec `sgdlab-rank SPEC` once per rank, every rank in one
 *          process group (led by rank 0) so the whole run can be signalled
 *          at once; each child gets SGDLAB_RANK and SGDLAB_SIZE.
 *  mpirun  fork/exec `mpirun --np N [--oversubscribe] [-H hosts]
 *          [--allow-run-as-root] --bind-to none -x VAR... sgdlab-rank SPEC`
 *          in its own process group, its stderr into a pipe the harness
 *          reads (sg_launch_stderr_fd); ranks learn their rank from
 *          OMPI_COMM_WORLD_RANK.  --oversubscribe is added when N exceeds
 *          this host's cores (and no -H list says where ranks go).
 *
 * On an emulated cluster (cfg.cluster) each local rank's child moves into
 * its host's network namespace (sg_cluster_enter: setns, no shell) between
 * fork and exec; mpirun moves into rank 0's host and reaches the others
 * through a hostfile (one host per rank) and the rsh agent sgdlab-nsexec,
 * with MPI's TCP BTL on the cluster's subnet only.
 *
 * Processes are reaped with sg_launch_poll() (never blocking), so the
 * harness keeps serving records and rendezvous while ranks run.
 *
 *  ssh     (transport zmq, hosts) one `ssh [-F CONFIG] -T -e none -a -x -o
 *          BatchMode=yes -- HOST exec 'sgdlab-rank' --stdin` per rank, all
 *          in rank 0's process group like local ranks, rank r on the r-th
 *          slot of hosts (host:N has N slots; wrapping around); the rank's
 *          number, size, spec and keys are written to its ssh's standard
 *          input (core/stage.h), which stays open: when the harness goes
 *          (or closes it), the remote rank's input ends and it exits.
 *
 *  slurm   inside a Slurm allocation (SLURM_JOB_ID): fork/exec one `srun
 *          --ntasks N --nodes min(N, nodes) --distribution=cyclic
 *          --overcommit --kill-on-bad-exit=1 --mpi=pmix|none sgdlab-rank
 *          SPEC` step, handled as mpirun is (own process group, stderr
 *          piped); ranks learn their rank from SLURM_PROCID.  Every
 *          rank (zmq and MPI) runs `sgdlab-rank --stdin` under `srun
 *          --input=all`: one stage (rank -1, core/stage.h) written to
 *          srun's stdin reaches every task, so no node needs the run's
 *          directory (a node's /tmp is its own).
 *
 * Every process started here (each local rank, mpirun) gets
 * PR_SET_PDEATHSIG SIGKILL before exec: it dies with the harness, however
 * the harness ends (SIGKILL, closed terminal).  Ranks under mpirun are not
 * our children; they end themselves when their records connection to the
 * harness closes (core/lifeline.c).
 *
 * The harness signals only processes it started: its own children (local
 * ranks, mpirun) and mpirun's descendants (ppid links in /proc, checked
 * at the time, remembered with a pidfd so that they can still be reached
 * once mpirun has exited and they were reparented).  A pid a rank
 * reported about itself (HELLO) is only ever signalled through
 * sg_launch_signal(), which refuses any other process.
 */
#ifndef SG_LAUNCH_H
#define SG_LAUNCH_H

#include <sys/types.h>

/* Open MPI's TCP eager limit on an emulated cluster (launch.c,
 * cluster_args, says why): every message up to it is sent without waiting
 * for its receiver.  A simulation's default simulate.eager is the same
 * (simulate.h), so that simulated runs move messages as the emulated ones
 * do; core/settings.c spells it out as the key's default. */
#define SG_CLUSTER_EAGER_BYTES 1114112 /* 1 MiB + 64 KiB */
#define SG_CLUSTER_EAGER_STR_(x) #x
#define SG_CLUSTER_EAGER_STR(x) SG_CLUSTER_EAGER_STR_(x)

typedef struct sg_launch sg_launch_t;
struct sg_cluster;

typedef struct sg_launch_cfg {
  const char *launcher; /* "local", "mpirun" or "slurm" (not an engine: the launcher) */
  int mpi;              /* transport mpi (slurm: srun --mpi=pmix) */
  const char *rank_bin; /* path of sgdlab-rank */
  const char *spec;     /* spec file every rank reads */
  int nprocs;
  const char *hosts;    /* mpirun -H list, launcher ssh's hosts; NULL or "" = this host */
  /* an ssh client configuration (ssh -F; mpirun's plm_rsh_agent "ssh -F
   * PATH"); NULL or "" = ssh's own */
  const char *ssh_config;
  int verbose;          /* print the command lines to stderr */
  /* an emulated cluster (cluster.h): rank r runs on host host_of[r]; NULL
   * = none */
  const struct sg_cluster *cluster;
  const int *host_of;
  /* a simulated run (simulate.h): smpirun's arguments before the program
   * (-np, -platform, -hostfile, --cfg=...), NULL-terminated, and the
   * directory for its temporary files; rank_bin is sgdlab-rank-smpi.
   * NULL = not simulated.  smpirun is then handled as mpirun is. */
  const char *const *sim_argv;
  const char *sim_tmpdir;
} sg_launch_cfg_t;

typedef struct sg_exit {
  int rank;   /* -1 for the mpirun process */
  pid_t pid;
  int status; /* as from waitpid() */
} sg_exit_t;

/* Start the processes.  Caller owns the result; sg_launch_destroy() kills
 * and reaps whatever still runs. */
int sg_launch_start(sg_launch_t **out, const sg_launch_cfg_t *cfg);
/* One process that has exited since the last call: returns 1 and fills
 * *ex; 0 when none has; never blocks. */
int sg_launch_poll(sg_launch_t *l, sg_exit_t *ex);
/* Processes started and not yet reaped. */
int sg_launch_alive(const sg_launch_t *l);
/* SIGTERM to the process group, then SIGKILL after grace_s seconds if
 * anything is left; reaps everything (bounded by grace_s + 5 s).  A
 * stopped process (SIGSTOP: a silent peer) gets SIGKILL at once, since a
 * pending SIGTERM would never act on it. */
void sg_launch_stop(sg_launch_t *l, double grace_s);
void sg_launch_destroy(sg_launch_t **l);

/* Whether pid is a process this launch started: an unreaped child, or a
 * descendant of its mpirun (checked now, or remembered from when it was). */
int sg_launch_owns(sg_launch_t *l, pid_t pid);
/* Send sig to pid when sg_launch_owns(l, pid); 1 when sent, 0 when
 * refused (not ours) or the process is gone. */
int sg_launch_signal(sg_launch_t *l, pid_t pid, int sig);

/* The pid of rank `rank`'s process (local launcher), or of mpirun. */
pid_t sg_launch_pid(const sg_launch_t *l, int rank);

/* mpirun's stderr (which also carries its ranks' stderr): the read end of
 * a non-blocking pipe, or -1 (local launcher).  Owned by the launch. */
int sg_launch_stderr_fd(const sg_launch_t *l);

/* What Open MPI 4.1 said about the first process that ended the job.
 * Fed line by line from mpirun's stderr; the forms understood are
 *   "mpirun noticed that process rank 2 with PID 12345 on node vm exited
 *    on signal 9 (Killed)."                       (PID is sometimes 0)
 *   "  Process name: [[20388,1],2]" then "  Exit code:    3"
 *   "mpirun has exited due to process rank 1 with PID 0 on node vm
 *    exiting improperly."                         (no MPI_Finalize) */
typedef struct sg_mpirun_notice {
  int rank;      /* -1 until a notice is complete */
  int pid;       /* as mpirun printed it; 0 when it did not know */
  int signal;    /* > 0: killed by this signal */
  int exit_code; /* >= 0: exited with this status; -1 otherwise */
  int improper;  /* exited without finalizing MPI */
  int pending_rank; /* a "Process name" line waiting for its "Exit code" */
} sg_mpirun_notice_t;

void sg_mpirun_notice_init(sg_mpirun_notice_t *n);
/* Parse one line (without its newline) of mpirun's, or srun's ("srun:
 * error: NODE: task R: Killed"), stderr; returns 1 when this line
 * completed the notice (the first one is kept; later ones are ignored). */
int sg_mpirun_notice_line(sg_mpirun_notice_t *n, const char *line);

/* launch_slurm.c: the addresses of the allocation's nodes
 * (SLURM_JOB_NODELIST through `scontrol show hostnames`, each node's
 * NodeAddr), comma-separated, and their number. */
int sg_slurm_node_addrs(char *out, size_t cap, int *nnodes);
/* Before anything launches, for an experiment with launcher slurm: a
 * munged socket the user named (SGDLAB_MUNGE_SOCKET) that others could
 * replace (stage.h, sg_stage_munge_socket_check) is refused, SG_EINVAL. */
int sg_slurm_admit_socket(void);
/* srun's command line for cfg into argv (cap slots, NULL-terminated);
 * bufs holds its option strings. */
int sg_slurm_argv(const sg_launch_cfg_t *cfg, int mpi, char bufs[4][32], char **argv, size_t cap);
/* srun's standard input (--input=all: every task reads it all): one munge
 * credential line per rank, line k rank k's stage (stage.h), made
 * restricted to this uid and gid.  SG_EPEER when srun is gone.  With
 * SG_SLURM_PLAIN_STAGE_ENV=1 (tests only) one plain stage for every task,
 * and sg_slurm_argv starts the ranks with --stdin instead of --stdin-munge
 * and skips its munge check. */
#define SG_SLURM_PLAIN_STAGE_ENV "SGDLAB_TEST_PLAIN_STAGE"
int sg_slurm_stage_write(int fd, int size, const char *spec_path, const char *keys_path);
/* `sgdlab run --sbatch PATH`: a batch script at path (mode 0755) whose
 * #SBATCH lines ask for nprocs tasks on nprocs nodes and whose one command
 * is this sgdlab (absolute path) running config with db and the --set
 * values, every word single-quoted. */
typedef struct sg_slurm_batch {
  const char *path, *config, *db;
  int nprocs, nsets;
  char *const *sets;
} sg_slurm_batch_t;
int sg_slurm_write_batch(const sg_slurm_batch_t *b);

/* launch_ssh.c: host lists.  hosts is "HOST[:SLOTS],..." (HOST of
 * letters, digits, '.', '-', '_'): checked, with its slot total; the host
 * of rank r (slots filled in order, then around again); a hostfile
 * ("HOST [slots=N] [max_slots=M]" lines, '#' comments, as Open MPI reads
 * it) as such a list; an ssh configuration path (absolute, readable, no
 * character that mpirun's agent string would split or a shell would
 * read).  Errors are one line naming the file and line. */
int sg_hosts_check(const char *hosts, int *nslots);
int sg_hosts_of_rank(const char *hosts, int rank, char *out, size_t cap);
int sg_hosts_from_file(const char *path, char *out, size_t cap);
int sg_ssh_config_check(const char *path);
/* ssh's command line running the remote command cmd on host (above)
 * into argv (cap slots); the remote command that starts a staged rank. */
int sg_ssh_argv(const sg_launch_cfg_t *cfg, const char *host, const char *cmd, char **argv,
                size_t cap);
int sg_ssh_rank_cmd(const char *rank_bin, char *cmd, size_t cap);
/* mpirun over ssh: whether every host of cfg->hosts that is not this
 * machine sees the run's directory dir (ssh cats a random word the
 * harness wrote there, all hosts at once, 30 s at most).  SG_OK, or
 * SG_ECONFIG naming the first host that does not. */
int sg_ssh_probe_rundir(const sg_launch_cfg_t *cfg, const char *dir);

/* Path of sgdlab-rank: next to the running executable, else
 * $SGDLAB_BIN_DIR/harness/sgdlab-rank.  SG_ENOTFOUND names both places. */
int sg_launch_find_rank_bin(char *out, size_t cap);
/* The same for any program of the build (e.g. "sgdlab-rank-smpi"). */
int sg_launch_find_bin(const char *name, char *out, size_t cap);
/* Whether prog is an executable on PATH. */
int sg_launch_on_path(const char *prog);

#endif
