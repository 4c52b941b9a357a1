/* test_cluster.c - the emulated cluster's life cycle: up and down leave
 * nothing behind, a failure or a signal half-way removes what was made, a
 * creator killed with SIGKILL is cleaned up by the next sweep, the CLI
 * (up, status, exec, down) works end to end, and without root it stops
 * with one line and exit 2 before creating anything.
 *
 * Needs root (skipped with the reason otherwise).  Every cluster here is
 * this test's own (names carry its pid); nothing else is looked at or
 * removed.  Namespaces are checked in /run/netns and links with `ip`.
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "run_util.h"
#include "test_cluster_util.h"

static char g_out[65536];

static int state_exists(const char *name) {
  char path[256];
  snprintf(path, sizeof path, SG_CLUSTER_RUN_DIR "/cluster-%s", name);
  return access(path, F_OK) == 0;
}

static int open_ns(const char *ns) {
  char path[256];
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  return open(path, O_RDONLY | O_CLOEXEC);
}

/* Poll (20 ms) until ns_fd holds no link besides lo, at most secs. */
static int links_gone(int ns_fd, double secs) {
  double end = sg_now() + secs;
  for (;;) {
    int n = tc_links_besides_lo(ns_fd);
    if (n == 0) return 1;
    if (sg_now() > end) return 0;
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* The namespaces of cluster NAME ("sgc-NAME-") that exist. */
static int cluster_ns_count(const char *name) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, SG_CLUSTER_NS_PREFIX "%s-", name);
  return tc_ns_count(prefix);
}

TEST(up_down_leaves_nothing) {
  if (!tc_root_or_skip("up_down_leaves_nothing")) return;
  static sg_cluster_desc_t d;
  CHECK_OK(sg_cluster_desc_parse(&d, 3, "200mbit", NULL));
  sg_cluster_t *cl = NULL;
  double t0 = sg_now();
  CHECK_OK(tc_up(&cl, &d));
  double t_up = sg_now() - t0;
  char name[16], ifname[32], peer[32], brif[32];
  snprintf(name, sizeof name, "%s", sg_cluster_name(cl));
  CHECK_EQ_INT(cluster_ns_count(name), 4);
  CHECK(state_exists(name));
  int fd0 = open_ns(sg_cluster_host_ns(cl, 0)), brfd = open_ns(sg_cluster_bridge_ns(cl));
  CHECK(fd0 >= 0 && brfd >= 0);
  for (int h = 0; h < 3; h++) { /* host end in the host, peer on the bridge, tbf on both */
    snprintf(ifname, sizeof ifname, "%s", sg_cluster_host_ifname(cl, h));
    snprintf(peer, sizeof peer, SG_CLUSTER_IF_PREFIX "%sp%d", name, h);
    CHECK_EQ_INT(tc_has_link(sg_cluster_host_ns_fd(cl, h), ifname), 1);
    CHECK_EQ_INT(tc_has_link(brfd, peer), 1);
    char *q1[] = {"tc", "qdisc", "show", "dev", ifname, NULL};
    CHECK_EQ_INT(tc_run(q1, sg_cluster_host_ns_fd(cl, h), g_out, sizeof g_out), 0);
    CHECK_STR_CONTAINS(g_out, "tbf");
    CHECK_STR_CONTAINS(g_out, "rate 200Mbit");
    char *q2[] = {"tc", "qdisc", "show", "dev", peer, NULL};
    CHECK_EQ_INT(tc_run(q2, brfd, g_out, sizeof g_out), 0);
    CHECK_STR_CONTAINS(g_out, "rate 200Mbit");
  }
  snprintf(brif, sizeof brif, SG_CLUSTER_IF_PREFIX "%s", name);
  CHECK_EQ_INT(tc_has_link(-1, brif), 0); /* the root namespace is untouched */
  close(brfd);
  t0 = sg_now();
  CHECK_OK(tc_down(&cl));
  double t_down = sg_now() - t0;
  fprintf(stderr, "cluster %s of 3 hosts: up %.3f s, down %.3f s\n", name, t_up, t_down);
  CHECK(cl == NULL);
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
  char *ls[] = {"ip", "netns", "list", NULL};
  CHECK_EQ_INT(tc_run(ls, -1, g_out, sizeof g_out), 0);
  CHECK(!strstr(g_out, name));
  /* h0's namespace is kept alive here by fd0 (as by a process still in
   * it): its link still goes, because the bridge's namespace and with it
   * every peer end is destroyed */
  CHECK_MSG(links_gone(fd0, 10), "a link is left in the namespace of h0 of %s", name);
  close(fd0);
  CHECK_EQ_INT(tc_has_link(-1, brif), 0);
}

/* cluster.queue / --queue: every tbf of the cluster (host end and bridge
 * end of each link) waits packets at most queue_ms; the default is
 * SG_CLUSTER_TBF_LATENCY_MS.  tc prints the latency back ("lat 200ms"),
 * so a queue that was not passed on fails.  The CLI refuses 0 and 1001 in
 * one line with exit 2, before it creates anything. */
TEST(queue_sets_every_links_latency) {
  if (!tc_root_or_skip("queue_sets_every_links_latency")) return;
  static const int queue[2] = {0, 200};
  for (int k = 0; k < 2; k++) {
    static sg_cluster_desc_t d;
    CHECK_OK(sg_cluster_desc_parse(&d, 2, "100mbit", NULL));
    d.queue_ms = queue[k];
    sg_cluster_t *cl = NULL;
    CHECK_OK(tc_up(&cl, &d));
    if (!cl) return;
    char want[32], ifname[32], peer[32];
    snprintf(want, sizeof want, "lat %dms", queue[k] ? queue[k] : SG_CLUSTER_TBF_LATENCY_MS);
    int brfd = open_ns(sg_cluster_bridge_ns(cl));
    CHECK(brfd >= 0);
    for (int h = 0; h < 2; h++) {
      snprintf(ifname, sizeof ifname, "%s", sg_cluster_host_ifname(cl, h));
      snprintf(peer, sizeof peer, SG_CLUSTER_IF_PREFIX "%sp%d", sg_cluster_name(cl), h);
      char *q1[] = {"tc", "qdisc", "show", "dev", ifname, NULL};
      CHECK_EQ_INT(tc_run(q1, sg_cluster_host_ns_fd(cl, h), g_out, sizeof g_out), 0);
      CHECK_STR_CONTAINS(g_out, want);
      char *q2[] = {"tc", "qdisc", "show", "dev", peer, NULL};
      CHECK_EQ_INT(tc_run(q2, brfd, g_out, sizeof g_out), 0);
      CHECK_STR_CONTAINS(g_out, want);
    }
    close(brfd);
    CHECK_OK(tc_down(&cl));
  }
  static const char *const bad[] = {"0", "1001", "20ms"};
  for (int k = 0; k < 3; k++) {
    char name[16];
    tc_name('q', name, sizeof name);
    char *up[] = {"sgdlab", "cluster", "up", "--hosts", "1", "--link", "1gbit", "--queue",
                  (char *)bad[k], "--name", name, NULL};
    CHECK_EQ_INT(ru_run(up, 1, NULL, g_out, sizeof g_out), 2);
    CHECK_STR_CONTAINS(g_out, "--queue");
    CHECK_EQ_INT(cluster_ns_count(name), 0);
  }
}

/* A real failure half-way: `nft` (needed for host 2's loss, the last
 * step of the last host) is /bin/false here.  By then the bridge and
 * three hosts exist; all must go. */
TEST(error_mid_setup_removes_what_it_made) {
  if (!tc_root_or_skip("error_mid_setup_removes_what_it_made")) return;
  char name[16], fake[512], path[4096];
  tc_name('e', name, sizeof name);
  const char *dir = ru_scratch("cluster-err");
  CHECK(dir);
  snprintf(fake, sizeof fake, "%s/nft", dir);
  CHECK(symlink("/bin/false", fake) == 0);
  const char *old = getenv("PATH");
  snprintf(path, sizeof path, "%s", old ? old : "/usr/bin:/bin");
  char newpath[4600];
  snprintf(newpath, sizeof newpath, "%s:%s", dir, path);
  setenv("PATH", newpath, 1);
  char *up[] = {"sgdlab", "cluster", "up", "--hosts", "3", "--link", "1gbit", "--loss", "0,0,0.1",
                "--name", name, NULL};
  int code = ru_run(up, 1, NULL, g_out, sizeof g_out);
  setenv("PATH", path, 1);
  fprintf(stderr, "up with a failing nft: exit %d: %s", code, g_out);
  CHECK_EQ_INT(code, 1);
  CHECK_STR_CONTAINS(g_out, "host 2: `nft");
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
}

/* The child: create a cluster, say its name, wait to be killed. */
static void owner_child(int wfd) {
  static sg_cluster_desc_t d;
  sg_cluster_t *cl;
  alarm(60);
  if (sg_cluster_desc_parse(&d, 3, "100mbit", NULL) < 0 || sg_cluster_up(&cl, &d) < 0) {
    fprintf(stderr, "owner child: %s\n", sg_err_msg());
    _exit(1);
  }
  char name[16] = {0};
  snprintf(name, sizeof name, "%s", sg_cluster_name(cl));
  if (write(wfd, name, sizeof name) != (ssize_t)sizeof name) _exit(1);
  pause();
  _exit(0);
}

TEST(kill9_owner_then_sweep) {
  if (!tc_root_or_skip("kill9_owner_then_sweep")) return;
  static sg_cluster_desc_t d;
  sg_cluster_t *mine = NULL; /* a live owner's cluster: the sweep must keep it */
  CHECK_OK(sg_cluster_desc_parse(&d, 2, "1gbit", NULL));
  CHECK_OK(tc_up(&mine, &d));
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    owner_child(p[1]);
  }
  close(p[1]);
  char name[16];
  int got = tc_read_full(p[0], name, sizeof name, 30);
  close(p[0]);
  if (got < 0) kill(pid, SIGKILL);
  int before = got < 0 ? -1 : cluster_ns_count(name);
  kill(pid, SIGKILL);
  tc_wait(pid, 10);
  CHECK_MSG(got == 0 && before == 4, "child's cluster: read %d, %d namespaces", got, before);
  CHECK_EQ_INT(cluster_ns_count(name), 4); /* the kill alone removes nothing */
  CHECK(state_exists(name));
  int removed = -1;
  CHECK_OK(sg_cluster_sweep(&removed));
  fprintf(stderr, "sweep after kill -9 of the owner of %s: %d namespaces removed\n", name, removed);
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
  CHECK(removed >= 4);
  CHECK_EQ_INT(cluster_ns_count(sg_cluster_name(mine)), 3);
  CHECK(state_exists(sg_cluster_name(mine)));
  CHECK_OK(tc_down(&mine));
}

/* `sgdlab cluster up` of 40 hosts gets `sig` once its third host's
 * namespace exists; it must exit 1 saying so, with nothing left. */
static void signal_case(int sig, char tag) {
  char name[16], errpath[256], ns2[64];
  tc_name(tag, name, sizeof name);
  snprintf(ns2, sizeof ns2, SG_CLUSTER_NS_PREFIX "%s-h2", name);
  const char *dir = ru_scratch("cluster-sig");
  CHECK(dir);
  snprintf(errpath, sizeof errpath, "%s/err", dir);
  char *argv[] = {"sgdlab", "cluster", "up", "--hosts", "40", "--link", "1gbit",
                  "--name", name, "--owner", (char *)tc_owner(), NULL};
  pid_t pid = ru_start(argv, errpath, 1, NULL);
  CHECK(pid > 0);
  double end = sg_now() + 20;
  int st = 0, exited = 0;
  while (!tc_ns_exists(ns2) && sg_now() < end && !(exited = ru_wait_exit(pid, 0.02, &st))) {
  }
  int seen = tc_ns_exists(ns2);
  if (!exited) kill(pid, sig);
  int code = exited ? ru_exit_code(st) : tc_wait(pid, 30);
  char *err = ru_slurp(errpath, 4096);
  fprintf(stderr, "signal %d at host 2 of 40: exit %d: %s", sig, code, err ? err : "");
  CHECK_MSG(seen, "host 2 of %s never appeared", name);
  CHECK_EQ_INT(code, 1);
  CHECK_STR_CONTAINS(err, "interrupted");
  free(err);
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
}

TEST(signal_mid_setup_removes_everything) {
  if (!tc_root_or_skip("signal_mid_setup_removes_everything")) return;
  signal_case(SIGTERM, 't');
  if (test_failed_now_) return;
  signal_case(SIGINT, 'i');
  if (test_failed_now_) return;
  signal_case(SIGHUP, 'u');
}

/* Inode of a namespace file (what /proc/self/ns/net shows as net:[N]). */
static unsigned long ns_inode(const char *ns) {
  char path[256];
  struct stat st;
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

TEST(cli_up_status_exec_down) {
  if (!tc_root_or_skip("cli_up_status_exec_down")) return;
  char name[16], host[32], want[64], ns1[64], owner[64];
  tc_name('c', name, sizeof name);
  char *up[] = {"sgdlab", "cluster", "up", "--hosts", "2", "--link", "100mbit,1gbit",
                "--name", name, "--owner", (char *)tc_owner(), NULL};
  CHECK_EQ_INT(ru_run(up, 1, NULL, g_out, sizeof g_out), 0);
  fprintf(stderr, "%s", g_out);
  CHECK_STR_CONTAINS(g_out, "198.1");
  CHECK_EQ_INT(cluster_ns_count(name), 3);
  char *status[] = {"sgdlab", "cluster", "status", name, NULL};
  CHECK_EQ_INT(ru_run(status, 1, NULL, g_out, sizeof g_out), 0);
  fprintf(stderr, "%s", g_out);
  snprintf(owner, sizeof owner, "owner pid %d,", (int)getpid()); /* alive: no "(gone)" */
  CHECK_STR_CONTAINS(g_out, owner);
  CHECK_STR_CONTAINS(g_out, "100Mbit   100Mbit"); /* configured, then as tc reports it */
  CHECK_STR_CONTAINS(g_out, "1Gbit     1Gbit");
  snprintf(ns1, sizeof ns1, SG_CLUSTER_NS_PREFIX "%s-h1", name);
  snprintf(want, sizeof want, "net:[%lu]", ns_inode(ns1));
  snprintf(host, sizeof host, "%s/h1", name);
  char *ex[] = {"sgdlab", "cluster", "exec", host, "--", "readlink", "/proc/self/ns/net", NULL};
  CHECK_EQ_INT(ru_run(ex, 1, NULL, g_out, sizeof g_out), 0);
  CHECK_STR_CONTAINS(g_out, want);
  sg_cluster_t *cl;
  CHECK_OK(sg_cluster_open(&cl, name)); /* by address, as mpirun's rsh agent would */
  snprintf(host, sizeof host, "%s", sg_cluster_host_addr(cl, 1));
  sg_cluster_close(&cl);
  char *ex2[] = {"sgdlab", "cluster", "exec", host, "readlink", "/proc/self/ns/net", NULL};
  CHECK_EQ_INT(ru_run(ex2, 1, NULL, g_out, sizeof g_out), 0);
  CHECK_STR_CONTAINS(g_out, want);
  char *ex3[] = {"sgdlab", "cluster", "exec", host, "--", "/nonexistent/prog", NULL};
  CHECK_EQ_INT(ru_run(ex3, 1, NULL, g_out, sizeof g_out), 127);
  char *down[] = {"sgdlab", "cluster", "down", name, NULL};
  CHECK_EQ_INT(ru_run(down, 1, NULL, g_out, sizeof g_out), 0);
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
  CHECK_EQ_INT(ru_run(down, 1, NULL, g_out, sizeof g_out), 1);
  CHECK_STR_CONTAINS(g_out, "no cluster");
}

/* `sgdlab cluster up` through `wrapper` (setpriv options); must print one
 * line naming the missing privilege, exit 2 and create nothing. */
static void unprivileged_case(char *const *wrapper, int nwrap, char tag) {
  char name[16];
  char *argv[24];
  int a = 0;
  tc_name(tag, name, sizeof name);
  for (int i = 0; i < nwrap; i++) argv[a++] = wrapper[i];
  char *rest[] = {(char *)ru_sgdlab(), "cluster", "up", "--hosts", "2", "--link", "1gbit",
                  "--name", name, NULL};
  for (int i = 0; rest[i]; i++) argv[a++] = rest[i];
  argv[a] = NULL;
  int code = tc_run(argv, -1, g_out, sizeof g_out);
  fprintf(stderr, "%s ...: exit %d: %s", wrapper[1], code, g_out);
  if ((code == 126 || code == 127 || code == 1) && strstr(g_out, "ermission denied")) {
    fprintf(stderr, "SKIP this case: %s cannot reach the binary\n", wrapper[1]);
    return;
  }
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(g_out, "needs root");
  CHECK_STR_CONTAINS(g_out, "CAP_NET_ADMIN");
  CHECK_MSG(strchr(g_out, '\n') == g_out + strlen(g_out) - 1, "more than one line: %s", g_out);
  CHECK_EQ_INT(cluster_ns_count(name), 0);
  CHECK(!state_exists(name));
}

TEST(not_root_one_line_exit_2) {
  if (!tc_root_or_skip("not_root_one_line_exit_2")) return;
  char *nobody[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"};
  unprivileged_case(nobody, 5, 'n');
  if (test_failed_now_) return;
  /* root, but without CAP_NET_ADMIN (bounding set): the check is on the
   * capability, not on the uid */
  char *nocap[] = {"setpriv", "--bounding-set=-net_admin", "--inh-caps=-all"};
  unprivileged_case(nocap, 3, 'k');
}
