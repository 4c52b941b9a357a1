/* cluster_impl.h - what cluster.c (topology) and cluster_state.c (state
 * files, lock, sweep) share.  Not for other users: see cluster.h. */
#ifndef SG_CLUSTER_IMPL_H
#define SG_CLUSTER_IMPL_H

#include <stddef.h>
#include <sys/types.h>

#include "cluster.h"

struct sg_cluster {
  sg_cluster_desc_t d;
  int subnet;                      /* 0..511: 198.18.0.0/15 in /24s */
  int persistent;                  /* owned by nobody */
  pid_t owner;                     /* else: the creating process ... */
  unsigned long long owner_start;  /* ... and its start time (/proc stat 22) */
  int created;                     /* made by this process (up), not opened */
  int made_bridge;                 /* up: which namespaces it made */
  unsigned char made_host[SG_CLUSTER_MAX_HOSTS];
  int ns_fd[SG_CLUSTER_MAX_HOSTS]; /* -1 when not open */
  /* sized for any int so the compiler sees no truncation; with names of
   * at most 8 characters and hosts < 250, interface names are <= 15 */
  char subnet_str[32];
  char addr[SG_CLUSTER_MAX_HOSTS][24];
  char ns[SG_CLUSTER_MAX_HOSTS][32];
  char ifname[SG_CLUSTER_MAX_HOSTS][24];
  char peer[SG_CLUSTER_MAX_HOSTS][24];
  char br_ns[32], br_if[24];
};

/* Fill names and addresses from d.name, d.nhosts and subnet; ns fds -1. */
void sgc_fill_names(sg_cluster_t *cl);

/* ---- cluster_state.c -------------------------------------------------------- */

/* The lock on /run/sgdlab (created 0700 when missing): an fd to pass to
 * sgc_unlock, or a negative SG_E* code. */
int sgc_lock(void);
void sgc_unlock(int fd);
/* /run/sgdlab/cluster-NAME into out. */
void sgc_state_path(const char *name, char *out, size_t cap);
/* Write cl's state (atomically: temp file, rename). */
int sgc_state_write(const sg_cluster_t *cl);
/* Read the state of `name` into a fresh cluster (names filled, nothing
 * opened).  SG_ENOTFOUND when there is none. */
int sgc_state_read(const char *name, sg_cluster_t **out);
int sgc_state_remove(const char *name);
/* Whether a state says its owner is alive (or it is persistent). */
int sgc_owner_alive(const sg_cluster_t *cl);
/* The start time of process pid when it runs (a zombie has ended), else
 * 0; state and start time from one read of /proc/PID/stat. */
unsigned long long sgc_running_start(pid_t pid);
/* Lowest subnet no state uses (lock held); SG_ERANGE when all are. */
int sgc_free_subnet(int *subnet);

/* ---- cluster.c -------------------------------------------------------------- */

/* Run argv[0] (looked up on PATH, then /usr/sbin, /sbin) with argv, in
 * network namespace ns_fd (-1 = this one), stdin /dev/null, stdout and
 * stderr into out (cap bytes, may be NULL); bounded to 15 s.  0 when it
 * exited 0, else SG_EIO naming the command and its first output line. */
int sgc_run(char *const *argv, int ns_fd, char *out, size_t cap);
/* prog on PATH, then in /usr/sbin, /sbin: its path into out. */
int sgc_find_prog(const char *prog, char *out, size_t cap);
/* `ip netns del NAME` when /run/netns/NAME exists. */
int sgc_ns_delete(const char *ns);

/* ---- daemons.c ---------------------------------------------------------------- */

/* The daemons' directory (0700) with tmp/hI per host, made by whichever
 * daemons come first (Slurm, ssh); `what` names them in errors. */
int sgc_daemons_prepare(const sg_cluster_t *cl, const char *what);
/* A new file DIR/LEAF (O_EXCL, no links followed) with n bytes. */
int sgc_write_file(const char *dir, const char *leaf, const void *p, size_t n, mode_t mode);
/* Start argv[0] (PATH, /usr/sbin, /sbin) as a daemon on host h (its
 * network namespace and a UTS namespace named hI; -1: this namespace),
 * output into DIR/TAG.out, and record "TAG PID START [MNTNS]" in
 * DIR/daemons before returning.  argv[0] is replaced by the full path.
 * flags SGC_PRIVATE_TMP: the daemon also gets a mount namespace whose
 * /tmp is a tmpfs of its own (a node's /tmp, not shared with the others),
 * whose inode is recorded as MNTNS: every process the daemon starts is in
 * it, which is how `down` tells them (slurmd's step daemons) from others. */
#define SGC_PRIVATE_TMP 1
int sgc_start_daemon(const sg_cluster_t *cl, const char *dir, const char *tag, int h, int flags,
                     char **argv);

#endif
