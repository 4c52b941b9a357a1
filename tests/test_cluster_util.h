/* test_cluster_util.h - what the emulated-cluster tests share: root
 * checks, running commands (optionally inside a namespace) with their
 * output, looking for namespaces and links, and processes placed on a
 * cluster host.  Independent of harness/cluster/cluster.c where it checks it
 * (namespaces and links are looked at with `ip` and /run/netns). */
#ifndef SG_TEST_CLUSTER_UTIL_H
#define SG_TEST_CLUSTER_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cluster.h"

/* sg_cluster_up / sg_cluster_down that also remember the cluster, so a
 * test that stops at a failed CHECK leaves nothing behind: whatever is
 * still up when the test binary exits is removed then. */
int tc_up(sg_cluster_t **cl, const sg_cluster_desc_t *d);
int tc_down(sg_cluster_t **cl);

/* 1 when the test can run; else prints why it is skipped (not root). */
int tc_root_or_skip(const char *test);

/* Run argv (argv[0] looked up on PATH) in network namespace ns_fd (-1:
 * ours), stdout and stderr into out (cap bytes); at most 30 s.  The exit
 * code, 128 + signal, or -1 when it could not run or was killed. */
int tc_run(char *const *argv, int ns_fd, char *out, size_t cap);

/* Whether /run/netns/NAME exists. */
int tc_ns_exists(const char *ns);
/* How many namespaces in /run/netns start with prefix. */
int tc_ns_count(const char *prefix);
/* Whether `ip -o link` in ns_fd (-1: the root namespace) lists a link
 * whose name contains needle; -1 when ip failed. */
int tc_has_link(int ns_fd, const char *needle);
/* Number of links in ns_fd besides lo; -1 when ip failed. */
int tc_links_besides_lo(int ns_fd);

/* A unique cluster name "<tag><hex pid>" (at most 8 characters). */
void tc_name(char tag, char *out, size_t cap);
/* This process's pid as text, for `sgdlab cluster up --owner`: a cluster
 * the test makes through the command line belongs to the test process, so
 * when the test is killed (CTest's timeout, SIGKILL) the next sweep -- the
 * cluster_sweep cleanup test (tests/cluster.cmake) or any later `cluster
 * up` -- removes it and its daemons. */
const char *tc_owner(void);

/* Fork a child that enters host `host` of cl, arms alarm(60) and calls
 * fn(arg, wfd) with the write end of a pipe, then exits 0 (fn's return
 * value != 0: exit 1).  Returns the pid (or -1) and the read end in *rfd. */
pid_t tc_spawn_on(const sg_cluster_t *cl, int host, int (*fn)(void *arg, int wfd), void *arg,
                  int *rfd);
/* Read exactly n bytes from fd within secs; 0 or -1. */
int tc_read_full(int fd, void *buf, size_t n, double secs);
/* Wait for our child pid at most secs (then SIGKILL); its exit code or -1. */
int tc_wait(pid_t pid, double secs);

/* What tc counted sent by each host of cluster `name` (the tbf on the
 * host's end of its link) into tx[0..nhosts-1]; 0 or -1. */
int tc_link_tx(const char *name, int nhosts, uint64_t *tx);
/* Each host with exactly one rank of the newest run in db (ranks.host =
 * 'hI': the host's UTS name): the bytes its link carried since `before`
 * over the bytes the rank recorded sending, one line each (what names the
 * run); a host with several ranks is left out (what they send each other
 * stays on it, and the step rows do not say to whom a rank sent).  Returns
 * how many were within [lo, hi] (-1 when the counters cannot be read), and
 * the number compared in *single. */
int tc_links_vs_ranks(const char *db, const char *name, int nhosts, const uint64_t *before,
                      const char *what, double lo, double hi, int *single);
/* From submit (sg_wall() before salloc, sbatch, ssh or the harness was
 * started) to the newest run's start in db (its harness claiming the row:
 * started_at, epoch seconds to the ms) and to its first step (step starts
 * count from the run's t0, taken just after), printed with `what`. */
void tc_submit_to_first_step(const char *db, double submit, const char *what);

#endif
