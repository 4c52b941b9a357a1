/* test_leftovers.c - a run whose rank is killed leaves nothing in the
 * places every user shares: no Open MPI shared-memory segment
 * (vader_segment.*) in /dev/shm and no ZeroMQ ipc socket
 * (sgdlab-PID-RANK-N) in /tmp.
 *
 * The test runs in a mount namespace of its own, with fresh tmpfs
 * mounted on /dev/shm and /tmp, so what it counts there is exactly what
 * its own runs left (other work on the machine cannot add to it, and
 * whatever the runs leave goes with the namespace).  Needs root (a
 * mount namespace); skips with a SKIP line otherwise.
 *
 * Cases, each `sgdlab run` of 3 ring-allreduce workers; once rank 0 has
 * recorded 5 steps, rank 1 or the harness is killed with SIGKILL, and
 * once every process of the run has ended (the test is their subreaper
 * and waits for them), nothing of it may be left:
 *   - transport mpi on this host, the harness killed: the ranks' vader
 *     segments live in the run's private directory, never in /dev/shm,
 *     and the next `sgdlab run` on the database (reconciliation) removes
 *     that directory with them;
 *   - transport mpi, rank 1 killed: the run fails, /dev/shm stays empty;
 *   - transport zmq across `hosts:` (mpirun starts the ranks), rank 1
 *     killed: the ranks talk tcp, so no ipc socket is bound at a /tmp
 *     fallback;
 * and the transport itself refuses an ipc socket without a directory.
 */
#define _GNU_SOURCE
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "run_util.h"
#include "transport_new.h"

/* Enter a private mount namespace with empty /dev/shm and /tmp of this
 * test's own (once per process).  1 when done, 0 when this is not
 * possible (not root). */
static int private_shared_dirs(void) {
  static int done = -1;
  if (done >= 0) return done;
  done = 0;
  if (geteuid() != 0) {
    fprintf(stderr, "SKIP: needs root (a mount namespace); running as uid %d\n", (int)geteuid());
    return 0;
  }
  /* a tree under /tmp (a checkout built there) stays visible: its top
   * directory is bound back into the fresh /tmp (counts below look only
   * at run directories and rank sockets) */
  char top[PATH_MAX] = "";
  ssize_t n = readlink("/proc/self/exe", top, sizeof top - 1);
  top[n > 0 ? n : 0] = '\0';
  char *sl = !strncmp(top, "/tmp/", 5) ? strchr(top + 5, '/') : NULL;
  if (sl) *sl = '\0';
  else top[0] = '\0';
  int keep = -1; /* opened inside the new namespace: a bind takes only its own mounts */
  char from[64];
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
      (top[0] && (keep = open(top, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) ||
      snprintf(from, sizeof from, "/proc/self/fd/%d", keep) < 0 ||
      mount("sgdlab-test-shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0 ||
      mount("sgdlab-test-tmp", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0 ||
      (top[0] && (mkdir(top, 0755) < 0 ||
                  mount(from, top, NULL, MS_BIND | MS_REC, NULL) < 0))) {
    perror("test_leftovers: private /dev/shm and /tmp");
    if (keep >= 0) close(keep);
    return 0;
  }
  if (keep >= 0) close(keep);
  prctl(PR_SET_CHILD_SUBREAPER, 1); /* a dead harness's orphans come to us */
  return done = 1;
}

static void on_alarm(int sig) { (void)sig; }

/* Wait (at most secs) until this process has no child left: 0, or -1. */
static int reap_all(unsigned secs) {
  struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: waitpid gives EINTR */
  sigaction(SIGALRM, &sa, NULL);
  alarm(secs);
  while (waitpid(-1, NULL, 0) > 0) {}
  int gone = errno == ECHILD;
  alarm(0);
  return gone ? 0 : -1;
}

/* Whether name is a run directory's: sgdlab-XXXXXX (mkdtemp). */
static int rundir_name(const char *name) {
  return strlen(name) == 13 && !strncmp(name, "sgdlab-", 7) && !strchr(name + 7, '-');
}

/* Whether name is a ZeroMQ ipc socket name of a rank: sgdlab-D-D-D. */
static int ipc_name(const char *name) {
  if (strncmp(name, "sgdlab-", 7)) return 0;
  int fields = 0;
  for (const char *p = name + 7; *p; p++) {
    if (*p == '-') {
      if (p[-1] == '-') return 0;
      continue;
    }
    if (*p < '0' || *p > '9') return 0;
    if (p[-1] == '-') fields++;
  }
  return fields == 3;
}

/* Entries of dir (non-recursive) that want() accepts (NULL: every one),
 * their names listed on stderr.  With clear, they are removed (only ever
 * in this test's private tmpfs), so the next case starts empty. */
static int count_entries(const char *dir, int (*want)(const char *), int clear) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (want && !want(e->d_name)) continue;
    fprintf(stderr, "  left in %s: %s\n", dir, e->d_name);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (clear && unlinkat(dirfd(d), e->d_name, 0) < 0) ru_rm_rf(path);
    n++;
  }
  if (d) closedir(d);
  return n;
}

/* Count and clear /dev/shm and the rank sockets in /tmp. */
static int shared_leftovers(void) {
  return count_entries("/dev/shm", NULL, 1) + count_entries("/tmp", ipc_name, 1);
}

/* Run cfg (3 workers) in scratch d, kill rank 1 (victim 1) or the
 * harness (victim -1) after rank 0's 5th step; the harness's exit code,
 * or -1. */
static int run_and_kill(const char *d, const char *extra, int victim) {
  char cfg[128], db[128];
  snprintf(cfg, sizeof cfg, "%s/kill.yaml", d);
  snprintf(db, sizeof db, "%s/kill.db", d);
  if (ru_write_train_config(cfg, "leftovers", "{engine: allreduce, algorithm: ring}", extra, "", 3,
                            100000) < 0)
    return -1;
  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  if (sg <= 0) return -1;
  int st = 0;
  if (ru_db_wait(db, "SELECT count(*) FROM steps WHERE rank = 0", 5, 60, sg, &st) != 0) {
    fprintf(stderr, "  no steps within 60 s (harness status %d)\n", st);
    kill(sg, SIGKILL);
    waitpid(sg, NULL, 0);
    return -1;
  }
  pid_t v = victim < 0 ? sg : ru_find_rank(sg, victim);
  if (v > 0) kill(v, SIGKILL);
  else kill(sg, SIGKILL);
  int code = ru_wait_exit_code(sg, 60);
  return reap_all(60) < 0 ? -1 : code;
}

TEST(mpi_harness_killed_leaves_no_shm_segment) {
  if (!private_shared_dirs()) CHECK(geteuid() != 0);
  if (geteuid() != 0) return;
  const char *d = ru_scratch("leftovers");
  CHECK(d);
  CHECK_EQ_INT(run_and_kill(d, "transport: mpi\n", -1), 128 + SIGKILL);
  CHECK_EQ_INT(shared_leftovers(), 0);
  CHECK_EQ_INT(count_entries("/tmp", rundir_name, 0), 1); /* the dead harness's */
  /* the next run on the database reclaims it, segments and all */
  char cfg[128], db[128];
  snprintf(cfg, sizeof cfg, "%s/next.yaml", d);
  snprintf(db, sizeof db, "%s/kill.db", d);
  CHECK_OK(ru_write_train_config(cfg, "next", "local", NULL, "", 1, 2));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(count_entries("/tmp", rundir_name, 0), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE error = 'harness died'"), 1);
}

TEST(mpi_rank_killed_leaves_no_shm_segment) {
  if (!private_shared_dirs()) CHECK(geteuid() != 0);
  if (geteuid() != 0) return;
  const char *d = ru_scratch("leftovers");
  CHECK(d);
  CHECK_EQ_INT(run_and_kill(d, "transport: mpi\ndeadline: 3\n", 1), 1);
  CHECK_EQ_INT(shared_leftovers(), 0);
}

TEST(zmq_rank_across_hosts_killed_leaves_no_ipc_socket) {
  if (!private_shared_dirs()) CHECK(geteuid() != 0);
  if (geteuid() != 0) return;
  const char *d = ru_scratch("leftovers");
  CHECK(d);
  CHECK_EQ_INT(run_and_kill(d, "transport: zmq\nhosts: \"localhost:3\"\ndeadline: 3\n", 1), 1);
  CHECK_EQ_INT(shared_leftovers(), 0);
}

TEST(zmq_ipc_without_a_directory_is_refused) {
  if (!private_shared_dirs()) CHECK(geteuid() != 0);
  if (geteuid() != 0) return;
  sg_comm_t *c = NULL;
  sg_zmq_cfg_t zc = {.rank = 0, .size = 2, .deadline_s = 1, .scheme = "ipc",
                     .rendezvous = "ipc:///nonexistent/rdv"};
  int rc = sg_comm_zmq_new(&c, &zc);
  CHECK_MSG(rc < 0, "an ipc comm without ipc_dir was made");
  CHECK_STR_CONTAINS(sg_err_msg(), "ipc_dir");
  CHECK_EQ_INT(shared_leftovers(), 0);
}
