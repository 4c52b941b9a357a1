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
 * Exit status: the command's; 2 refused; 127 the shell cannot be run.
 */
#include <errno.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"

static int refuse(const char *what) {
  fprintf(stderr, "sgdlab-nsexec: %s\n", what);
  return 2;
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
  if (sg_cluster_check_privilege() < 0) return refuse(sg_err_msg());
  int host = host_of_addr(name, argv[1]);
  if (host < 0) return refuse(sg_err_msg());
  sg_cluster_t *cl = NULL;
  if (sg_cluster_open(&cl, name) < 0) return refuse(sg_err_msg());
  int rc = sg_cluster_enter(cl, host);
  sg_cluster_close(&cl);
  if (rc < 0) return refuse(sg_err_msg());
  /* Every emulated host has the machine's name and /tmp, so the daemons
   * mpirun starts on them would share one session directory and race on
   * it; each host gets a temporary directory of its own. */
  char tmp[128];
  struct stat sb;
  snprintf(tmp, sizeof tmp, "/tmp/sgdlab-orted-%s-h%d", name, host);
  if (mkdir(tmp, 0700) < 0 && errno != EEXIST) return refuse("cannot make the host's TMPDIR");
  if (lstat(tmp, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != 0 || (sb.st_mode & 077))
    return refuse("the host's TMPDIR is not a private directory of root");
  setenv("TMPDIR", tmp, 1);
  char *cmd = join_words(argc, argv, 2);
  if (!cmd) return refuse("no memory");
  execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
  fprintf(stderr, "sgdlab-nsexec: cannot run /bin/sh: %s\n", strerror(errno));
  free(cmd);
  return 127;
}
