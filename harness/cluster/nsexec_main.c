/* nsexec_main.c - sgdlab-nsexec: mpirun's rsh agent on an emulated cluster.
 *
 *   SGDLAB_CLUSTER=NAME sgdlab-nsexec ADDRESS COMMAND-WORDS...
 *
 * Open MPI starts its daemon on a remote host as `AGENT HOST WORDS...`, the
 * way it would run ssh: the words form one command line for the remote
 * login shell.  This agent stands in for ssh between the hosts of ONE
 * cluster: ADDRESS must be the address of a host of the cluster named by
 * SGDLAB_CLUSTER (the run's, which the harness sets for its mpirun), as
 * the cluster's state in /run/sgdlab records it; anything else (another
 * cluster's host, an address of no cluster, a name) is refused with one
 * line and exit 2.  Then it enters that host's network namespace (setns)
 * and runs the words with /bin/sh -c, as sshd would; the words come from
 * mpirun, which the user started, never from the network.
 *
 * The daemons mpirun starts this way get TMPDIR = RUNDIR/hN (N: the
 * host's index), made 0700 in the run's private directory that the
 * harness names in SGDLAB_RUNDIR, which must be a directory of this user
 * that no one else may enter (run/rundir.h): every emulated host has the
 * machine's name and /tmp, so the daemons would otherwise share one
 * session directory and race on it; and nothing of theirs is made where
 * another user could name it first.
 *
 * Every refusal is one line on stderr, "sgdlab-nsexec: host ADDRESS ...:
 * why", which the harness makes the run's error (run/mpirun.c).
 *
 * Exit status: the command's; 2 refused; 127 the shell cannot be run.
 */
#define _GNU_SOURCE /* mkdirat, AT_FDCWD */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"
#include "safedir.h"

static int refuse(const char *what) {
  fprintf(stderr, "sgdlab-nsexec: %s\n", what);
  return 2;
}

/* A refusal about one host: "sgdlab-nsexec: host ADDRESS: why". */
static int refuse_host(const char *addr, const char *what) {
  fprintf(stderr, "sgdlab-nsexec: host %.64s: %s\n", addr, what);
  return 2;
}

/* Host `host`'s temporary directory, RUNDIR/hN (above), made if need be
 * and checked through descriptors; its path into out.  0, or -1 with the
 * message set. */
static int host_tmpdir(int host, char *out, size_t cap) {
  const char *run = getenv("SGDLAB_RUNDIR");
  char name[16];
  if (!run || run[0] != '/' || strlen(run) + sizeof name + 1 > cap)
    return sg_err_set(SG_EINVAL, "SGDLAB_RUNDIR does not name the run's directory (the harness "
                      "sets it for mpirun)");
  int fd = sg_dir_open_private(AT_FDCWD, run), hfd = -1;
  if (fd < 0) return -1;
  snprintf(name, sizeof name, "h%d", host);
  if (mkdirat(fd, name, 0700) < 0 && errno != EEXIST)
    sg_err_set(SG_EIO, "%s/%s: %s", run, name, strerror(errno));
  else if ((hfd = sg_dir_open_private(fd, name)) >= 0)
    close(hfd);
  close(fd);
  if (hfd < 0) return -1;
  snprintf(out, cap, "%s/%s", run, name);
  return 0;
}

/* The host index of `addr` in cluster `want`, or -1 (message set). */
static int host_of_addr(const char *want, const char *addr) {
  char name[64];
  int host;
  if (sg_cluster_find_addr(addr, name, sizeof name, &host) < 0) return -1;
  if (strcmp(name, want)) {
    sg_err_set(SG_EINVAL, "host %s belongs to cluster %s, not to this run's cluster %s", addr,
               name, want);
    return -1;
  }
  return host;
}

/* argv[from..] joined with single spaces (what ssh sends), malloc'd. */
static char *join_words(int argc, char **argv, int from) {
  size_t len = 1;
  for (int i = from; i < argc; i++) len += strlen(argv[i]) + 1;
  char *s = malloc(len), *p = s;
  if (!s) return NULL;
  for (int i = from; i < argc; i++) p += sprintf(p, "%s%s", i > from ? " " : "", argv[i]);
  *p = '\0';
  return s;
}

int main(int argc, char **argv) {
  const char *name = getenv("SGDLAB_CLUSTER");
  if (argc < 3) return refuse("usage: SGDLAB_CLUSTER=NAME sgdlab-nsexec ADDRESS COMMAND...");
  if (!name || sg_cluster_name_check(name) < 0)
    return refuse("SGDLAB_CLUSTER does not name a cluster (the harness sets it for mpirun)");
  if (sg_cluster_check_privilege() < 0) return refuse_host(argv[1], sg_err_msg());
  int host = host_of_addr(name, argv[1]);
  if (host < 0) return refuse_host(argv[1], sg_err_msg());
  sg_cluster_t *cl = NULL;
  if (sg_cluster_open(&cl, name) < 0) return refuse_host(argv[1], sg_err_msg());
  int rc = sg_cluster_enter(cl, host);
  sg_cluster_close(&cl);
  if (rc < 0) return refuse_host(argv[1], sg_err_msg());
  char tmp[256], why[512];
  if (host_tmpdir(host, tmp, sizeof tmp) < 0) {
    snprintf(why, sizeof why, "cluster %s host %d's TMPDIR: %s", name, host, sg_err_msg());
    return refuse_host(argv[1], why);
  }
  setenv("TMPDIR", tmp, 1);
  char *cmd = join_words(argc, argv, 2);
  if (!cmd) return refuse("no memory");
  execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
  fprintf(stderr, "sgdlab-nsexec: cannot run /bin/sh: %s\n", strerror(errno));
  free(cmd);
  return 127;
}
