/* cluster.h - an emulated cluster in one box: network namespaces joined by
 * rate-limited links.
 *
 * A cluster NAME of N hosts is
 *
 *   namespace sgc-NAME-h0 .. sgc-NAME-h<N-1>   one per host, loopback up,
 *                                              interface sgcNAMEe<i> with
 *                                              address 198.18.S.<i+1>/24
 *   namespace sgc-NAME-br                      the bridge sgcNAMEbr and the
 *                                              peer ends sgcNAMEp<i>
 *
 * with a tc tbf rate limit on both ends of every veth (so both directions
 * of a host's link are limited) and, optionally, an nftables rule in the
 * host's namespace that drops a fraction of the packets it sends and of
 * those it receives on that link.  The machine's own (root) namespace and
 * its interfaces are never touched.  S is a /24 of 198.18.0.0/15 (RFC 2544
 * benchmarking range) unique among this machine's clusters, so an address
 * names one host of one cluster.
 *
 * State lives in /run/sgdlab (root, 0700): a lock and one file per
 * cluster with its description and its owner (pid and start time of the
 * process that created it, or "persistent" once sg_cluster_persist() made
 * it outlive its creator).  The state is written before anything is
 * created and removed after everything is gone, so sg_cluster_sweep()
 * can remove every sgc- namespace whose cluster has no state or whose
 * owner is gone (kill -9).  Everything sg_cluster_up() creates is removed
 * again when it fails or is stopped half-way.
 *
 * Running a process on a host (what `sgdlab run` placement needs): fork,
 * then in the child sg_cluster_enter(cl, host) (setns into the host's
 * network namespace; the namespace fds are opened by up/open and are
 * close-on-exec), then exec.  `sgdlab cluster exec HOST -- CMD` does the
 * same from the command line, and accepts a host's address as HOST, so it
 * can serve as mpirun's rsh agent.
 *
 * Everything needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN):
 * sg_cluster_check_privilege() says so in one line before anything is
 * created.  Commands run are iproute2's `ip` and `tc` and `nft`, by
 * fork/exec with argument vectors (never a shell).
 */
#ifndef SG_CLUSTER_H
#define SG_CLUSTER_H

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#define SG_CLUSTER_MAX_HOSTS 250
#define SG_CLUSTER_NAME_MAX 8 /* [a-z0-9], so interface names fit 15 chars */
#define SG_CLUSTER_NS_PREFIX "sgc-"
#define SG_CLUSTER_IF_PREFIX "sgc"
#define SG_CLUSTER_RUN_DIR "/run/sgdlab"

/* Rate range accepted for a link (bits/s). */
#define SG_CLUSTER_RATE_MIN 1000000ULL        /* 1 mbit */
#define SG_CLUSTER_RATE_MAX 100000000000ULL   /* 100 gbit */

typedef struct sg_cluster_desc {
  int nhosts;
  uint64_t rate_bps[SG_CLUSTER_MAX_HOSTS]; /* per host link, bits/s */
  double loss[SG_CLUSTER_MAX_HOSTS];       /* per host, fraction in [0, 1) */
  char name[SG_CLUSTER_NAME_MAX + 1];      /* "" = a random name */
  /* Two levels (rack > 0): hosts h0 .. are grouped `rack` at a time under
   * rack bridges sgcNAMEr<k>, each joined to the core bridge sgcNAMEbr by
   * a veth sgcNAMEu<k> (rack side) -- sgcNAMEc<k> (core side) with a tbf
   * of uplink_bps on both ends (0: unshaped).  rack 0: one bridge. */
  int rack;
  uint64_t uplink_bps;
  /* How long a packet may wait in each link's tbf queue, ms (the queue
   * holds rate x queue_ms + the bucket): SG_CLUSTER_QUEUE_MS_MIN ..
   * _MAX; 0 = SG_CLUSTER_TBF_LATENCY_MS. */
  int queue_ms;
  /* setup gives up (and removes what it made) as soon as this is set;
   * NULL = never */
  volatile sig_atomic_t *stop;
} sg_cluster_desc_t;

typedef struct sg_cluster sg_cluster_t;

/* Per-direction figures of one host link as tc reports them. */
typedef struct sg_cluster_link {
  char tc_rate[32];      /* "1Gbit" as tc prints it, "" when no tbf */
  uint64_t host_tx;      /* bytes the host sent (tbf on its end) */
  uint64_t bridge_tx;    /* bytes sent towards the host (tbf on the peer end) */
  uint64_t host_drops, bridge_drops;
} sg_cluster_link_t;

/* ---- description ---------------------------------------------------------- */

/* "1gbit", "200mbit", "1.5gbit", "10gbit" (units bit, kbit, mbit, gbit,
 * tbit; factors of 1000) into bits/s within the accepted range.  Errors
 * name `what` ("--link") and the text. */
int sg_cluster_parse_rate(const char *s, const char *what, uint64_t *bps);
/* "0.01" or "1%" into a fraction in [0, 1); errors name `what`. */
int sg_cluster_parse_loss(const char *s, const char *what, double *f);
/* A rate as tc would print it: "200Mbit", "1Gbit", "1.5Gbit". */
void sg_cluster_format_rate(uint64_t bps, char *out, size_t cap);
/* nhosts, then "RATE" for every host or "RATE,RATE,..." one per host,
 * and loss (NULL = none) "F" or "F,F,...", each F a fraction (0.01) or a
 * percentage (1%).  Fills d (name "", stop NULL). */
int sg_cluster_desc_parse(sg_cluster_desc_t *d, int nhosts, const char *links, const char *loss);
/* A name is 1..8 of [a-z0-9]. */
int sg_cluster_name_check(const char *name);

/* ---- lifecycle ------------------------------------------------------------ */

/* Both capabilities present (effective), else SG_EUNSUPPORTED with one
 * line saying what is missing. */
int sg_cluster_check_privilege(void);

/* Run argv[0] (PATH, then /usr/sbin, /sbin) in this network namespace:
 * stdin /dev/null, stdout and stderr into out (cap bytes), bounded to
 * 15 s.  0 when it exited 0, else an error naming the command and its
 * first output line. */
int sg_cluster_run(char *const *argv, char *out, size_t cap);
/* Create the cluster (after a sweep of leftovers).  The caller owns it
 * until sg_cluster_down(); on failure nothing is left behind. */
int sg_cluster_up(sg_cluster_t **out, const sg_cluster_desc_t *d);
/* Hand the cluster over to nobody: it outlives this process (sweeps leave
 * it alone) until `sgdlab cluster down`. */
int sg_cluster_persist(sg_cluster_t *cl);
/* Hand the cluster over to process owner (its pid and start time are
 * recorded): it lives while owner runs, and once owner has ended (a
 * zombie counts as ended) the next sweep removes it with its daemons.
 * SG_ENOTFOUND when owner is not running. */
int sg_cluster_hand_over(sg_cluster_t *cl, pid_t owner);
/* SG_OK when process owner runs (not a zombie), else SG_ENOTFOUND with
 * one line ("--owner PID: no such process"). */
int sg_cluster_owner_check(pid_t owner);
/* An existing cluster from its state (for status, exec, down). */
int sg_cluster_open(sg_cluster_t **out, const char *name);
/* Remove everything of the cluster (namespaces, hence links, qdiscs and
 * rules; then its state) and free it.  Errors are reported once
 * everything that could be removed was. */
int sg_cluster_down(sg_cluster_t **cl);
/* Free without removing anything. */
void sg_cluster_close(sg_cluster_t **cl);
/* Remove every sgc- namespace whose cluster has no state or a dead owner,
 * and such states.  *removed (may be NULL) gets the number of namespaces
 * removed. */
int sg_cluster_sweep(int *removed);
/* Names of the clusters with state here, sorted; *names is malloc'd
 * (free it and each entry). */
int sg_cluster_list(char ***names, int *n);

/* ---- hosts ------------------------------------------------------------------ */

const char *sg_cluster_name(const sg_cluster_t *cl);
int sg_cluster_nhosts(const sg_cluster_t *cl);
const sg_cluster_desc_t *sg_cluster_desc(const sg_cluster_t *cl);
/* "198.18.S.0/24" */
const char *sg_cluster_subnet(const sg_cluster_t *cl);
/* "persistent", "pid 1234", "pid 1234 (gone)" */
void sg_cluster_owner(const sg_cluster_t *cl, char *out, size_t cap);
const char *sg_cluster_host_addr(const sg_cluster_t *cl, int host); /* "198.18.S.i+1" */
const char *sg_cluster_host_ns(const sg_cluster_t *cl, int host);   /* "sgc-NAME-hI" */
const char *sg_cluster_host_ifname(const sg_cluster_t *cl, int host); /* "sgcNAMEeI" */
const char *sg_cluster_bridge_ns(const sg_cluster_t *cl);
/* The host's network namespace (an fd of /run/netns/..., close-on-exec,
 * owned by cl), -1 for a bad host. */
int sg_cluster_host_ns_fd(const sg_cluster_t *cl, int host);
/* In a forked child, before exec: move this process into the host's
 * network namespace. */
int sg_cluster_enter(const sg_cluster_t *cl, int host);
/* Which host of which cluster has address addr: 0 with *name (cap bytes)
 * and *host set, SG_ENOTFOUND when none. */
int sg_cluster_find_addr(const char *addr, char *name, size_t cap, int *host);
/* tc's view of host `host`'s link (both ends). */
/* Racks of a two-level cluster (0 when flat). */
int sg_cluster_nracks(const sg_cluster_t *cl);
/* Bytes rack k's uplink carried: out of the rack (tbf of its rack-side
 * end) and into it (core-side end). */
int sg_cluster_uplink_stats(const sg_cluster_t *cl, int k, uint64_t *out_tx, uint64_t *in_tx);
int sg_cluster_link_stats(const sg_cluster_t *cl, int host, sg_cluster_link_t *out);

/* tbf parameters used for a link of `bps` bits/s (see docs/cluster.md,
 * "Rates and tbf parameters"): the rate's bucket, the peak rate and the
 * peak rate's bucket, and the most segments one GSO packet may carry on
 * the link's devices (the peak bucket's whole frames). */
uint64_t sg_cluster_tbf_burst(uint64_t bps);    /* bytes */
uint64_t sg_cluster_tbf_peakrate(uint64_t bps); /* bits/s */
uint64_t sg_cluster_tbf_mtu(uint64_t bps);      /* bytes */
unsigned sg_cluster_gso_max_segs(uint64_t bps);
#define SG_CLUSTER_TBF_LATENCY_MS 20
#define SG_CLUSTER_QUEUE_MS_MIN 1
#define SG_CLUSTER_QUEUE_MS_MAX 1000
#define SG_CLUSTER_FRAME 1514 /* one full Ethernet frame (MTU 1500) as tc counts it */

/* ---- Slurm on the cluster (daemons.c) -------------------------------------- */

/* Start munged, slurmctld (on h0) and one slurmd per host (each in its
 * host's network namespace and a UTS namespace named hI), configured in
 * /run/sgdlab/daemons-NAME (0700: slurm.conf, a fresh munge key, spool,
 * state, logs, and the pid and start time of every daemon started), and
 * wait (up to timeout_s) until sinfo shows every node idle.  On failure
 * the caller removes the cluster (sg_cluster_down stops what started). */
int sg_cluster_slurm_up(const sg_cluster_t *cl, double timeout_s);
/* Stop the daemons recorded for cluster `name` (each only when its pid
 * still has the recorded start time: never by name), then remove the
 * directory through descriptors (safedir.h).  No directory: SG_OK. */
int sg_cluster_daemons_down(const char *name);
/* Tests only: called with the pid between a process's identity check and
 * its signal in sg_cluster_daemons_down (every signal there goes through a
 * pidfd opened before the check, so a pid reused at that moment is not
 * hit; the hook is where a test reuses it). */
extern void (*sg_cluster_signal_race_hook_)(int pid);
/* "/run/sgdlab/daemons-NAME" and ".../slurm.conf"; whether it exists. */
void sg_cluster_daemons_dir(const char *name, char *out, size_t cap);
void sg_cluster_slurm_conf(const char *name, char *out, size_t cap);
int sg_cluster_has_slurm(const char *name);

/* ---- ssh hosts on the cluster (sshd.c) -------------------------------------- */

/* One sshd per host (its network namespace and a UTS namespace named hI),
 * listening on the host's address only, port 22; a host key and a user
 * key made for the cluster (ed25519, 0600), public-key login as root from
 * the cluster's subnet only, commands only (no tty, forwarding or client
 * environment); TMPDIR of a session = the host's own tmp/hI.  Writes
 * authorized_keys, known_hosts, ssh_config (for `ssh -F`) and hostfile
 * (one address per host) into /run/sgdlab/daemons-NAME, and waits (up to
 * timeout_s) until `ssh -F ssh_config ADDR true` from h0 succeeds on every
 * host.  On failure the caller removes the cluster.  The sshds and every
 * session they started are stopped by sg_cluster_daemons_down. */
int sg_cluster_ssh_up(const sg_cluster_t *cl, double timeout_s);
/* ".../daemons-NAME/ssh_config" and ".../hostfile"; whether it exists. */
void sg_cluster_ssh_config(const char *name, char *out, size_t cap);
void sg_cluster_ssh_hostfile(const char *name, char *out, size_t cap);
int sg_cluster_has_ssh(const char *name);

/* `sgdlab cluster ...` (cluster_cmd.c); argv[0] is "cluster". */
int sg_cmd_cluster(int argc, char **argv);

#endif
