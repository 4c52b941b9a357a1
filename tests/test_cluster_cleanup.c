/* test_cluster_cleanup.c - a cluster test killed between `cluster up` and
 * `cluster down` leaves nothing once CTest's cleanup has run:
 *
 *  - a stand-in for a cluster test (a child of this one) does what the
 *    tests do, `sgdlab cluster up --owner <its pid>` (with --ssh: sshd on
 *    every host, when sshd is installed), says so through a pipe and
 *    blocks; it is SIGKILLed (as CTest kills a test at its timeout) and,
 *    still a zombie, the cleanup runs: tests/cluster_cleanup.sh, the very
 *    script CTest runs after the cluster tests.  Then no namespace
 *    sgc-NAME-*, no state file, no daemons directory, no link named
 *    sgcNAME* in the root namespace and no recorded daemon may be left.
 *    Before the cleanup everything must still be there (the kill alone
 *    removes nothing).
 *  - the cleanup keeps what is not left over: a cluster whose owner runs
 *    (this test) and a persistent one (`cluster up` without --owner); and
 *    `--owner` of a process that has ended (a zombie) is refused with one
 *    line and exit 2 before anything is made.
 *  - `--owner` of another user's process (uid 65534, not this user's) and
 *    of a thread (not a process) are refused the same way: that user could
 *    end the process, and a thread can end while its process goes on, and
 *    either would hand the cluster to the next sweep under whoever uses it.
 *
 * Root; skips otherwise.  Every cluster here is this test's own (tag + its
 * pid); a failed check removes it before the test ends.
 */
#define _GNU_SOURCE
#include "test.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster.h"
#include "proc.h"
#include "run_util.h"
#include "test_cluster_util.h"

static char g_out[65536];

typedef struct {
  int pid;
  unsigned long long start;
} rec_t;

static int cluster_ns_count(const char *name) {
  char prefix[64];
  snprintf(prefix, sizeof prefix, SG_CLUSTER_NS_PREFIX "%s-", name);
  return tc_ns_count(prefix);
}

static int exists(const char *fmt, const char *name) {
  char path[256];
  snprintf(path, sizeof path, fmt, name);
  return access(path, F_OK) == 0;
}

/* The daemons the cluster recorded (daemons.c: "TAG PID START ..."). */
static int read_daemons(const char *name, rec_t *r, int cap) {
  char path[256], line[256];
  snprintf(path, sizeof path, SG_CLUSTER_RUN_DIR "/daemons-%s/daemons", name);
  FILE *f = fopen(path, "re");
  int n = 0;
  while (f && n < cap && fgets(line, sizeof line, f))
    if (sscanf(line, "%*s %d %llu", &r[n].pid, &r[n].start) == 2) n++;
  if (f) fclose(f);
  return n;
}

/* How many of them still run (same pid and start time, not a zombie). */
static int daemons_running(const rec_t *r, int n) {
  int k = 0;
  for (int i = 0; i < n; i++) {
    int st = sg_proc_state(r[i].pid);
    k += st && st != 'Z' && st != 'X' && sg_proc_start(r[i].pid) == r[i].start;
  }
  return k;
}

/* What of cluster NAME exists, one word each, into what; how many kinds. */
static int leftovers(const char *name, const rec_t *r, int n, char *what, size_t cap) {
  char ifprefix[32];
  int kinds = 0, ns = cluster_ns_count(name), run = daemons_running(r, n);
  snprintf(ifprefix, sizeof ifprefix, SG_CLUSTER_IF_PREFIX "%s", name);
  int link = tc_has_link(-1, ifprefix);
  what[0] = '\0';
#define LEFT(cond, ...)                                                                      \
  if (cond) {                                                                              \
    size_t len = strlen(what);                                                             \
    snprintf(what + len, cap - len, __VA_ARGS__);                                          \
    kinds++;                                                                               \
  }
  LEFT(ns, " %d namespace(s) sgc-%s-*;", ns, name);
  LEFT(exists(SG_CLUSTER_RUN_DIR "/cluster-%s", name), " state " SG_CLUSTER_RUN_DIR "/cluster-%s;",
       name);
  LEFT(exists(SG_CLUSTER_RUN_DIR "/daemons-%s", name), " " SG_CLUSTER_RUN_DIR "/daemons-%s;", name);
  LEFT(link != 0, " link %s* in the root namespace (ip: %d);", ifprefix, link);
  LEFT(run, " %d daemon(s) of %d running;", run, n);
#undef LEFT
  return kinds;
}

/* CTest's cleanup after the cluster tests: tests/cluster_cleanup.sh. */
static int cleanup(void) {
  const char *src = getenv("SGDLAB_SOURCE_DIR");
  char script[4096];
  snprintf(script, sizeof script, "%s/tests/cluster_cleanup.sh", src ? src : ".");
  char *argv[] = {"sh", script, (char *)ru_sgdlab(), NULL};
  int code = tc_run(argv, -1, g_out, sizeof g_out);
  size_t len = strlen(g_out);
  fprintf(stderr, "  cleanup (%s): exit %d: %s%s", script, code, g_out,
          len && g_out[len - 1] == '\n' ? "" : "\n");
  return code;
}

static void down(const char *name) {
  char *argv[] = {"sgdlab", "cluster", "down", (char *)name, NULL};
  if (exists(SG_CLUSTER_RUN_DIR "/cluster-%s", name)) ru_run(argv, 1, NULL, g_out, sizeof g_out);
}

/* The stand-in for a cluster test: up as the tests do it, tell, block. */
static void killed_test(const char *name, int ssh, int wfd) {
  char *out = NULL;
  alarm(120); /* never outlives the test */
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "up", "--name", name, "--hosts", "2", "--link",
                        "1gbit", "--owner", tc_owner(), ssh ? "--ssh" : NULL, NULL);
  if (rc) fprintf(stderr, "  stand-in: cluster up: exit %d: %s", rc, out ? out : "");
  if (write(wfd, &rc, sizeof rc) != (ssize_t)sizeof rc) _exit(1);
  for (;;) pause();
}

TEST(a_killed_cluster_test_leaves_nothing_after_the_cleanup) {
  if (!tc_root_or_skip("a_killed_cluster_test_leaves_nothing_after_the_cleanup")) return;
  char name[16], what[1024];
  rec_t r[8];
  tc_name('k', name, sizeof name);
  int ssh = access("/usr/sbin/sshd", X_OK) == 0, p[2], rc = -1;
  if (!ssh) fprintf(stderr, "  no /usr/sbin/sshd: the cluster runs no daemons\n");
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(p[0]);
    killed_test(name, ssh, p[1]);
  }
  close(p[1]);
  int got = tc_read_full(p[0], &rc, sizeof rc, 90);
  close(p[0]);
  int n = got == 0 && rc == 0 ? read_daemons(name, r, 8) : 0;
  int kinds = leftovers(name, r, n, what, sizeof what);
  kill(pid, SIGKILL);
  siginfo_t si;
  while (waitid(P_PID, pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  } /* a zombie now: dead, not yet reaped (CTest reaps before its cleanup) */
  fprintf(stderr, "  up (owner pid %d): %s exit %d; before the kill:%s\n", (int)pid,
          got ? "no answer," : "", rc, what);
  int kinds_killed = leftovers(name, r, n, what, sizeof what);
  int code = cleanup();
  waitpid(pid, NULL, 0);
  int left = leftovers(name, r, n, what, sizeof what);
  if (left) fprintf(stderr, "  left after the cleanup:%s\n", what);
  down(name); /* whatever a failed check would leave */
  CHECK_MSG(got == 0 && rc == 0, "the stand-in's cluster up: %s %d", got ? "no answer" : "exit", rc);
  CHECK_EQ_INT(n, ssh ? 2 : 0); /* one sshd per host */
  CHECK_EQ_INT(daemons_running(r, n), 0);
  CHECK_MSG(kinds == (ssh ? 4 : 2) && kinds_killed == kinds,
            "before the cleanup: %d kinds of the cluster existed (%d after the kill)", kinds,
            kinds_killed);
  CHECK_EQ_INT(code, 0);
  CHECK_MSG(left == 0, "the cleanup left%s", what);
}

TEST(the_cleanup_keeps_live_owners_and_persistent_clusters) {
  if (!tc_root_or_skip("the_cleanup_keeps_live_owners_and_persistent_clusters")) return;
  char live[16], zomb[16], pers[16], zpid[16];
  tc_name('l', live, sizeof live);
  tc_name('z', zomb, sizeof zomb);
  tc_name('p', pers, sizeof pers);
  /* --owner of a process that has ended: refused before anything is made */
  pid_t z = fork();
  CHECK(z >= 0);
  if (z == 0) _exit(0);
  siginfo_t si;
  while (waitid(P_PID, z, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
  }
  snprintf(zpid, sizeof zpid, "%d", (int)z);
  char *upz[] = {"sgdlab", "cluster", "up", "--name", zomb, "--hosts", "1", "--link", "1gbit",
                 "--owner", zpid, NULL};
  int code = ru_run(upz, 1, NULL, g_out, sizeof g_out);
  waitpid(z, NULL, 0);
  fprintf(stderr, "  --owner %s (a zombie): exit %d: %s", zpid, code, g_out);
  down(zomb);
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(g_out, "--owner");
  CHECK_MSG(strchr(g_out, '\n') == g_out + strlen(g_out) - 1, "more than one line: %s", g_out);
  CHECK_EQ_INT(cluster_ns_count(zomb), 0);
  /* a live owner's cluster and a persistent one stay */
  char *upl[] = {"sgdlab", "cluster", "up", "--name", live, "--hosts", "1", "--link", "1gbit",
                 "--owner", (char *)tc_owner(), NULL};
  int cl = ru_run(upl, 1, NULL, g_out, sizeof g_out);
  char *upp[] = {"sgdlab", "cluster", "up", "--name", pers, "--hosts", "1", "--link", "1gbit", NULL};
  int cp = cl == 0 ? ru_run(upp, 1, NULL, g_out, sizeof g_out) : -1;
  int clean = cleanup();
  int nl = cluster_ns_count(live), np = cluster_ns_count(pers);
  char *st[] = {"sgdlab", "cluster", "status", pers, NULL};
  int persistent = ru_run(st, 1, NULL, g_out, sizeof g_out) == 0 &&
                   strstr(g_out, "owner persistent") != NULL;
  down(pers);
  down(live);
  fprintf(stderr, "  after the cleanup: live owner's %s %d namespaces, persistent %s %d\n", live,
          nl, pers, np);
  CHECK_EQ_INT(cl, 0);
  CHECK_EQ_INT(cp, 0);
  CHECK_EQ_INT(clean, 0);
  CHECK_EQ_INT(nl, 2);
  CHECK_EQ_INT(np, 2);
  CHECK(persistent);
  CHECK_EQ_INT(cluster_ns_count(live) + cluster_ns_count(pers), 0);
}

/* `cluster up --name NAME --owner PID` must be refused before anything is
 * made: exit 2, one line naming --owner and containing `want`. */
static void refused_owner(const char *name, pid_t pid, const char *want) {
  char spid[16];
  snprintf(spid, sizeof spid, "%d", (int)pid);
  char *up[] = {"sgdlab", "cluster", "up", "--name", (char *)name, "--hosts", "1", "--link",
                "1gbit", "--owner", spid, NULL};
  int code = ru_run(up, 1, NULL, g_out, sizeof g_out);
  fprintf(stderr, "  --owner %s (%s): exit %d: %s", spid, want, code, g_out);
  int ns = cluster_ns_count(name);
  down(name);
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(g_out, "--owner");
  CHECK_STR_CONTAINS(g_out, want);
  CHECK_MSG(strchr(g_out, '\n') == g_out + strlen(g_out) - 1, "more than one line: %s", g_out);
  CHECK_EQ_INT(ns, 0);
}

static int g_tid_pipe[2], g_tid_hold[2];
static void *tid_thread(void *arg) {
  (void)arg;
  pid_t tid = (pid_t)syscall(SYS_gettid);
  char c;
  if (write(g_tid_pipe[1], &tid, sizeof tid) != (ssize_t)sizeof tid) return NULL;
  while (read(g_tid_hold[0], &c, 1) < 0 && errno == EINTR) {
  } /* until the test closes the write end */
  return NULL;
}

TEST(owner_of_another_user_or_a_thread_is_refused) {
  if (!tc_root_or_skip("owner_of_another_user_or_a_thread_is_refused")) return;
  char other[16], thr[16];
  tc_name('u', other, sizeof other);
  tc_name('t', thr, sizeof thr);
  /* a process of uid 65534 that blocks until its pipe's write end closes */
  int go[2], hold[2];
  CHECK(pipe(go) == 0 && pipe(hold) == 0);
  pid_t u = fork();
  CHECK(u >= 0);
  if (u == 0) {
    char c = 0;
    close(go[0]);
    close(hold[1]);
    if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0) _exit(1);
    if (write(go[1], &c, 1) != 1) _exit(1);
    while (read(hold[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);
  }
  close(go[1]);
  close(hold[0]);
  char c;
  ssize_t r;
  while ((r = read(go[0], &c, 1)) < 0 && errno == EINTR) {
  }
  close(go[0]);
  if (r == 1) refused_owner(other, u, "uid 65534");
  close(hold[1]);
  waitpid(u, NULL, 0);
  CHECK_MSG(r == 1, "the uid 65534 child did not start");
  /* a thread of this test */
  CHECK(pipe(g_tid_pipe) == 0 && pipe(g_tid_hold) == 0);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, tid_thread, NULL) == 0);
  pid_t tid = 0;
  while ((r = read(g_tid_pipe[0], &tid, sizeof tid)) < 0 && errno == EINTR) {
  }
  if (r == (ssize_t)sizeof tid) refused_owner(thr, tid, "a thread of process");
  close(g_tid_hold[1]);
  pthread_join(th, NULL);
  close(g_tid_hold[0]);
  close(g_tid_pipe[0]);
  close(g_tid_pipe[1]);
  CHECK_MSG(r == (ssize_t)sizeof tid, "no thread id");
}
