/* test_teardown.c - nothing outside the user can make sgdlab delete or
 * refuse through what a run or a cluster leaves on disk (harness/run/rundir.h,
 * harness/base/safedir.h),
 * with the attacker as user nobody (uid 65534) in a forked child:
 *
 *  - the remover (sg_rmtree_*): a symlink in the tree is unlinked, never
 *    followed; a directory that is not the user's, or that others may
 *    enter, is refused and left; the SHA-256 of the ownership proof
 *    gives the FIPS 180-4 answers;
 *  - the race on the remover: nobody swaps a subdirectory of a tree being
 *    removed for a symlink to a root-only directory, over and over, while
 *    root removes the tree: every file of the root-only directory stays;
 *  - the race on a cluster's teardown: nobody plants the per-host
 *    directories an older sgdlab used (/tmp/sgdlab-orted-NAME-hI) full of
 *    files and swaps their subdirectory for a symlink to a root-only
 *    directory while root runs `sgdlab cluster down NAME`, and while a
 *    `sgdlab run` (zmq ranks) trains on and removes a cluster of its own
 *    (its random name is public in /run/netns; the test hands it over):
 *    every file survives;
 *  - an mpirun run on a cluster whose per-host directories nobody planted
 *    the moment its namespaces appeared (inotify on /run/netns) ends ok;
 *    an agent that refuses a host makes the run's error one line naming
 *    the host and why;
 *  - a harness killed mid-run under mpirun on a cluster: the next run
 *    marks it failed and removes its directory with the hosts' daemon
 *    directories in it; nothing is left under /tmp for the cluster;
 *  - a database with a forged 'running' row naming a live run directory:
 *    `sgdlab list` and `sgdlab show` change neither the directory nor
 *    the database file (same bytes, same mtime), and a writing `sgdlab
 *    run` into it leaves both the directory and the row.
 *
 * Root is needed for all but the first two (they skip with the reason);
 * the cluster cases need network namespaces and remove every one they
 * make.  Every wait is bounded.
 */
#define _GNU_SOURCE /* setresuid, pipe2 */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "rundir.h"
#include "safedir.h"
#include "run_util.h"
#include "test_cluster_util.h"

#define NOBODY 65534
#define NFILES 10000 /* as many as the red team's probe: a walk long enough to be caught */
#define RUN_NFILES 5000 /* planted while a run is going: fewer, so it is in time */
#define ATTACK_S 30.0 /* the attacker's own bound */

/* ---- helpers ------------------------------------------------------------------ */

static int make_files(const char *dir, int n) {
  char p[4200];
  for (int i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/f%d", dir, i);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) < 0) return -1;
  }
  return 0;
}

static int count_files(const char *dir, int n) {
  char p[4200];
  int k = 0;
  for (int i = 0; i < n; i++) {
    snprintf(p, sizeof p, "%s/f%d", dir, i);
    k += access(p, F_OK) == 0;
  }
  return k;
}

static int exists(const char *p) {
  struct stat sb;
  return lstat(p, &sb) == 0;
}

/* In a forked child: become nobody for good. */
static void become_nobody(void) {
  alarm((unsigned)ATTACK_S + 120); /* staging and the run come before ATTACK_S starts */
  if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
      setresuid(NOBODY, NOBODY, NOBODY) < 0)
    _exit(90);
}

/* Whether fd (the stop pipe's read end) says stop: readable or closed. */
static int told_to_stop(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return poll(&p, 1, 0) != 0;
}

/* An attacker that, as nobody, swaps dirs[i]/d (a directory) for a
 * symlink to victim until told to stop (or ATTACK_S).  Blindly, round
 * after round: rename d away, symlink victim as d, unlink it, rename the
 * directory back.  And aimed: the moment a file in d is deleted (inotify:
 * a removal is walking d), rename d away and leave the symlink to victim
 * in its place, so that a remover going by path continues in victim.  It
 * writes one byte on `ready` after its first round and, at the end, the
 * rounds made and the aimed swaps (swap_result_t) on `result`. */
typedef struct swapper {
  pid_t pid;
  int stop_w, result_r;
} swapper_t;

typedef struct swap_result {
  long rounds, aimed;
} swap_result_t;

/* Aimed swaps for the deletions inotify reported (wd[i]: dirs[i]/d). */
static void swap_aimed(int in, const int *wd, int *done, char dirs[][256], int ndirs,
                       const char *victim, swap_result_t *r) {
  char buf[4096] __attribute__((aligned(8))), d[320], x[320];
  ssize_t n;
  while ((n = read(in, buf, sizeof buf)) > 0)
    for (ssize_t at = 0; at < n;) {
      struct inotify_event *e = (struct inotify_event *)(buf + at);
      for (int i = 0; i < ndirs; i++)
        if (e->wd == wd[i] && !done[i]) {
          snprintf(d, sizeof d, "%s/d", dirs[i]);
          snprintf(x, sizeof x, "%s/x", dirs[i]);
          done[i] = rename(d, x) == 0 && symlink(victim, d) == 0;
          r->aimed += done[i];
        }
      at += (ssize_t)sizeof *e + e->len;
    }
}

static void swap_loop(char dirs[][256], int ndirs, const char *victim, int stop, int ready,
                      int result) {
  swap_result_t r = {0, 0};
  double t0 = sg_now();
  char d[320], x[320];
  int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC), wd[8], done[8] = {0};
  for (int i = 0; i < ndirs && i < 8; i++) {
    snprintf(d, sizeof d, "%s/d", dirs[i]);
    if (in < 0 || (wd[i] = inotify_add_watch(in, d, IN_DELETE)) < 0) _exit(98);
  }
  while (!told_to_stop(stop) && sg_now() - t0 < ATTACK_S) {
    swap_aimed(in, wd, done, dirs, ndirs, victim, &r);
    for (int i = 0; i < ndirs; i++) {
      snprintf(d, sizeof d, "%s/d", dirs[i]);
      snprintf(x, sizeof x, "%s/x", dirs[i]);
      if (!done[i] && rename(d, x) == 0) {
        if (symlink(victim, d) == 0) unlink(d);
        rename(x, d);
      }
    }
    if (r.rounds++ == 0 && write(ready, "r", 1) != 1) _exit(91);
  }
  if (write(result, &r, sizeof r) != (ssize_t)sizeof r) _exit(92);
  _exit(0);
}

static int swapper_start(swapper_t *s, char dirs[][256], int ndirs, const char *victim) {
  int stop[2], ready[2], result[2];
  if (pipe2(stop, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0 || pipe2(result, O_CLOEXEC) < 0)
    return -1;
  fflush(NULL);
  s->pid = fork();
  if (s->pid == 0) {
    become_nobody();
    close(stop[1]), close(ready[0]), close(result[0]);
    swap_loop(dirs, ndirs, victim, stop[0], ready[1], result[1]);
  }
  close(stop[0]), close(ready[1]), close(result[1]);
  s->stop_w = stop[1];
  s->result_r = result[0];
  char c;
  int ok = s->pid > 0 && tc_read_full(ready[0], &c, 1, 20.0) == 0;
  close(ready[0]);
  return ok ? 0 : -1;
}

/* Stop it; what it did (rounds -1: unknown). */
static swap_result_t swapper_stop(swapper_t *s) {
  swap_result_t r = {-1, -1};
  close(s->stop_w);
  if (tc_read_full(s->result_r, &r, sizeof r, 10.0) < 0) r.rounds = r.aimed = -1;
  close(s->result_r);
  tc_wait(s->pid, 10.0);
  return r;
}

/* A root-only directory (0700) with NFILES files f0..: the victim. */
static int make_victim(char *dir, size_t cap) {
  if (ru_mkdtemp(dir, cap, "victim") < 0) return -1;
  return make_files(dir, NFILES);
}

/* ---- the remover ---------------------------------------------------------------- */

TEST(sha256_gives_the_fips_answers) {
  char h[SG_RUNDIR_PROOF_LEN + 1];
  sg_sha256_hex("abc", 3, h);
  CHECK_MSG(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s", h);
  sg_sha256_hex("", 0, h);
  CHECK_MSG(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "%s", h);
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 bytes */
  sg_sha256_hex(two, strlen(two), h);
  CHECK_MSG(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "%s", h);
}

/* A tree with files, nested directories, a FIFO and symlinks pointing
 * out of it (to a directory and to a file): all of it goes, nothing the
 * links point at. */
TEST(the_remover_unlinks_a_symlink_and_never_follows_it) {
  char top[128], out[128], p[256];
  CHECK_OK(ru_mkdtemp(top, sizeof top, "rmt"));
  CHECK_OK(ru_mkdtemp(out, sizeof out, "rmt-out"));
  CHECK_OK(make_files(out, 10));
  snprintf(p, sizeof p, "%s/a", top);
  CHECK(mkdir(p, 0700) == 0);
  snprintf(p, sizeof p, "%s/a/b", top);
  CHECK(mkdir(p, 0700) == 0);
  CHECK_OK(make_files(p, 5));
  snprintf(p, sizeof p, "%s/a/b/link-dir", top);
  CHECK(symlink(out, p) == 0);
  snprintf(p, sizeof p, "%s/link-file", top);
  char target[256];
  snprintf(target, sizeof target, "%s/f3", out);
  CHECK(symlink(target, p) == 0);
  snprintf(p, sizeof p, "%s/fifo", top);
  CHECK(mkfifo(p, 0600) == 0);
  CHECK_OK(sg_rmtree_at(AT_FDCWD, top));
  CHECK_MSG(!exists(top), "%s is still there", top);
  CHECK_EQ_INT(count_files(out, 10), 10);
  /* a symlink as the top is refused, its target left */
  CHECK(symlink(out, top) == 0);
  CHECK(sg_rmtree_at(AT_FDCWD, top) < 0);
  CHECK_STR_CONTAINS(sg_err_msg(), "symlink");
  CHECK_EQ_INT(count_files(out, 10), 10);
  unlink(top);
  ru_rm_rf(out);
}

/* Not the user's, or open to others: refused and left. */
TEST(the_remover_refuses_a_directory_not_the_users) {
  if (!tc_root_or_skip("the_remover_refuses_a_directory_not_the_users")) return;
  char top[128], p[256];
  CHECK_OK(ru_mkdtemp(top, sizeof top, "rmo"));
  CHECK_OK(make_files(top, 3));
  CHECK(chown(top, NOBODY, NOBODY) == 0);
  CHECK(sg_rmtree_at(AT_FDCWD, top) < 0);
  fprintf(stderr, "  refused: %s\n", sg_err_msg());
  CHECK_STR_CONTAINS(sg_err_msg(), "not a private directory");
  CHECK_EQ_INT(count_files(top, 3), 3);
  CHECK(chown(top, 0, 0) == 0 && chmod(top, 0755) == 0); /* ours, but others may enter */
  CHECK(sg_rmtree_at(AT_FDCWD, top) < 0);
  CHECK_EQ_INT(count_files(top, 3), 3);
  CHECK(chmod(top, 0700) == 0);
  /* a subdirectory of another user's inside ours: left with its files */
  snprintf(p, sizeof p, "%s/theirs", top);
  CHECK(mkdir(p, 0700) == 0);
  CHECK_OK(make_files(p, 4));
  CHECK(chown(p, NOBODY, NOBODY) == 0);
  CHECK(sg_rmtree_at(AT_FDCWD, top) < 0);
  CHECK_STR_CONTAINS(sg_err_msg(), "theirs");
  CHECK_EQ_INT(count_files(p, 4), 4);
  CHECK_EQ_INT(count_files(top, 3), 0); /* the rest went */
  ru_rm_rf(top);
}

/* The race on the remover itself: root removes T (0711) whose w (0777)
 * holds a root directory d of NFILES files; nobody swaps d for a symlink
 * to the victim and back, again and again, from before the removal
 * starts until it returned. */
TEST(the_remover_survives_an_attacker_swapping_a_symlink) {
  if (!tc_root_or_skip("the_remover_survives_an_attacker_swapping_a_symlink")) return;
  char top[128], victim[128], w[1][256], d[320];
  CHECK_OK(make_victim(victim, sizeof victim));
  CHECK_OK(ru_mkdtemp(top, sizeof top, "rmrace"));
  CHECK(chmod(top, 0711) == 0);
  snprintf(w[0], sizeof w[0], "%s/w", top);
  CHECK(mkdir(w[0], 0777) == 0 && chmod(w[0], 0777) == 0);
  snprintf(d, sizeof d, "%s/d", w[0]);
  CHECK(mkdir(d, 0755) == 0);
  CHECK_OK(make_files(d, NFILES));
  swapper_t s;
  CHECK_OK(swapper_start(&s, w, 1, victim));
  int fd = open(top, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  CHECK(fd >= 0);
  int rc = sg_rmtree_fd(fd);
  close(fd);
  swap_result_t r = swapper_stop(&s);
  int left = count_files(victim, NFILES);
  fprintf(stderr, "  %ld swap rounds, %ld aimed at a deletion; remover: %s; victim files left %d "
          "of %d\n", r.rounds, r.aimed, rc == SG_OK ? "ok" : sg_err_msg(), left, NFILES);
  ru_rm_rf(top);
  ru_rm_rf(victim);
  CHECK(r.rounds > 0);
  CHECK_MSG(r.aimed == 1, "the attacker did not swap d while it was being emptied");
  CHECK_EQ_INT(left, NFILES);
}

/* ---- a cluster's teardown ------------------------------------------------------------ */

/* As nobody: dirs[0..hosts-1] (the per-host directories an older sgdlab
 * used for a cluster), each with d/ of NFILES files.  0 or -1. */
static int plant_old_host_dirs(int hosts, char dirs[][256]) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    become_nobody();
    umask(022);
    for (int h = 0; h < hosts; h++) {
      char d[600];
      snprintf(d, sizeof d, "%s/d", dirs[h]);
      if (mkdir(dirs[h], 0755) < 0 || mkdir(d, 0755) < 0 || make_files(d, NFILES) < 0) _exit(1);
    }
    _exit(0);
  }
  return p > 0 && tc_wait(p, 60.0) == 0 ? 0 : -1;
}

TEST(cluster_down_deletes_nothing_through_another_users_link) {
  if (!tc_root_or_skip("cluster_down_deletes_nothing_through_another_users_link")) return;
  char name[16], victim[128], dirs[2][256];
  char *out = NULL;
  tc_name('t', name, sizeof name);
  for (int h = 0; h < 2; h++) snprintf(dirs[h], sizeof dirs[h], "/tmp/sgdlab-orted-%s-h%d", name, h);
  CHECK_OK(make_victim(victim, sizeof victim));
  int code = ru_sgdlab_in(NULL, &out, "cluster", "up", "--name", name, "--hosts", "2", "--link",
                          "1gbit", "--owner", tc_owner(), NULL);
  CHECK_MSG(code == 0, "cluster up: %s", out ? out : "");
  free(out), out = NULL;
  CHECK_OK(plant_old_host_dirs(2, dirs));
  swapper_t s;
  CHECK_OK(swapper_start(&s, dirs, 2, victim));
  code = ru_sgdlab_in(NULL, &out, "cluster", "down", name, NULL);
  swap_result_t r = swapper_stop(&s);
  int left = count_files(victim, NFILES);
  fprintf(stderr, "  cluster down exit %d; %ld swap rounds, %ld aimed at a deletion; victim files "
          "left %d of %d\n", code, r.rounds, r.aimed, left, NFILES);
  for (int h = 0; h < 2; h++) ru_rm_rf(dirs[h]);
  ru_rm_rf(victim);
  CHECK_MSG(code == 0, "cluster down: %s", out ? out : "");
  free(out);
  CHECK(r.rounds > 0);
  CHECK_EQ_INT(left, NFILES);
  char ns[64];
  snprintf(ns, sizeof ns, "sgc-%s-", name);
  CHECK_EQ_INT(tc_ns_count(ns), 0);
}

/* As nobody: stage the trees first, /tmp/sgdlab-stage-PID/hI/d with
 * RUN_NFILES files each (hosts 0 and 1), and say so (one byte on ready);
 * then read the cluster's name from `told` (public: /run/netns lists it;
 * the test hands it over, as other users' clusters come and go there
 * too), rename the staged trees to the per-host directories an older
 * sgdlab used for it, /tmp/sgdlab-orted-NAME-hI, and swap_loop them
 * against victim. */
static void run_attacker(const char *victim, int told, int stop, int ready, int result) {
  char name[16] = "", dirs[2][256], stage[2][256], d[600];
  umask(022);
  snprintf(d, sizeof d, "/tmp/sgdlab-stage-%d", (int)getpid());
  if (mkdir(d, 0755) < 0) _exit(97);
  for (int h = 0; h < 2; h++) {
    snprintf(stage[h], sizeof stage[h], "/tmp/sgdlab-stage-%d/h%d", (int)getpid(), h);
    snprintf(d, sizeof d, "%s/d", stage[h]);
    if (mkdir(stage[h], 0755) < 0 || mkdir(d, 0755) < 0 || make_files(d, RUN_NFILES) < 0) _exit(97);
  }
  if (write(ready, "s", 1) != 1) _exit(91);
  if (tc_read_full(told, name, sizeof name, ATTACK_S) < 0) _exit(96);
  name[sizeof name - 1] = '\0';
  for (int h = 0; h < 2; h++) {
    snprintf(dirs[h], sizeof dirs[h], "/tmp/sgdlab-orted-%s-h%d", name, h);
    if (rename(stage[h], dirs[h]) < 0) _exit(97);
  }
  swap_loop(dirs, 2, victim, stop, ready, result);
}

typedef struct run_attack {
  int code, swapping, left; /* sgdlab's exit; the attacker swapped before it ended */
} run_attack_t;

/* The run's side: once the run's cluster has a name, hand it to the
 * attacker (tell); then wait for the run.  sgdlab's exit code or -1. */
static int run_and_tell(const char *cfg, const char *db, int tell, char *name, size_t cap) {
  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  int st = 0;
  if (sg < 0) return -1;
  if (ru_db_wait(db, "SELECT count(*) FROM run_info WHERE key = 'cluster.name'", 1, 60, sg,
                 &st) == 0) {
    char buf[16] = "";
    ru_db_text_into(db, "SELECT value FROM run_info WHERE key = 'cluster.name'", name, cap);
    snprintf(buf, sizeof buf, "%s", name);
    if (write(tell, buf, sizeof buf) != (ssize_t)sizeof buf) name[0] = '\0';
  }
  return ru_wait_exit_code(sg, 120);
}

/* One `sgdlab run` of cfg into db with run_attacker against victim. */
static run_attack_t run_attacked(const char *cfg, const char *db, const char *victim) {
  run_attack_t a = {-1, 0, -1};
  int stop[2], ready[2], result[2], told[2];
  if (pipe2(stop, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0 || pipe2(result, O_CLOEXEC) < 0 ||
      pipe2(told, O_CLOEXEC) < 0)
    return a;
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    become_nobody();
    close(stop[1]), close(ready[0]), close(result[0]), close(told[1]);
    run_attacker(victim, told[0], stop[0], ready[1], result[1]);
  }
  close(stop[0]), close(ready[1]), close(result[1]), close(told[0]);
  char staged, stage[64], name[32] = "";
  snprintf(stage, sizeof stage, "/tmp/sgdlab-stage-%d", (int)p);
  if (tc_read_full(ready[0], &staged, 1, 120.0) == 0)
    a.code = run_and_tell(cfg, db, told[1], name, sizeof name);
  struct pollfd pr = {.fd = ready[0], .events = POLLIN};
  a.swapping = poll(&pr, 1, 0) == 1 && (pr.revents & POLLIN); /* before the run ended */
  close(stop[1]), close(told[1]);
  swap_result_t r = {-1, -1};
  if (tc_read_full(result[0], &r, sizeof r, 10.0) < 0) r.rounds = r.aimed = -1;
  close(ready[0]), close(result[0]);
  int attacker = tc_wait(p, 10.0);
  char *st = ru_db_text(db, "SELECT status FROM runs ORDER BY id DESC");
  a.left = count_files(victim, RUN_NFILES);
  fprintf(stderr, "  sgdlab run exit %d (run %s, cluster %s); attacker swapping before the end: "
          "%s, %ld swap rounds, %ld aimed at a deletion; victim files left %d of %d (attacker "
          "exit %d)\n", a.code, st ? st : "?", name, a.swapping ? "yes" : "no", r.rounds, r.aimed,
          a.left, RUN_NFILES, attacker);
  for (int h = 0; name[0] && h < 2; h++) {
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/sgdlab-orted-%s-h%d", name, h);
    ru_rm_rf(dir);
  }
  ru_rm_rf(stage);
  free(st);
  return a;
}

/* The same attack on a run's own cluster (zmq ranks, which never used
 * those directories): nobody plants and swaps while the run trains and
 * removes its cluster. */
TEST(a_cluster_run_deletes_nothing_through_another_users_link) {
  if (!tc_root_or_skip("a_cluster_run_deletes_nothing_through_another_users_link")) return;
  const char *d = ru_scratch("tdzmq");
  CHECK(d);
  char cfg[128], db[128], victim[128];
  snprintf(cfg, sizeof cfg, "%s/z.yaml", d);
  snprintf(db, sizeof db, "%s/z.db", d);
  CHECK_OK(make_victim(victim, sizeof victim));
  CHECK_OK(ru_write_train_config(cfg, "swapped", "{engine: allreduce, algorithm: ring}",
                                 "cluster: {hosts: 2, link: 1gbit}\n", "", 2, 300));
  run_attack_t a = run_attacked(cfg, db, victim);
  ru_rm_rf(victim);
  CHECK_MSG(a.swapping, "the attacker was not swapping before the run ended: the case tested "
            "nothing");
  CHECK_EQ_INT(a.code, 0);
  CHECK_EQ_INT(a.left, RUN_NFILES);
}

/* ---- mpirun on a cluster ---------------------------------------------------------------- */

#define MPI_CLUSTER "cluster: {hosts: 3, link: 1gbit}\ntransport: mpi\n"

/* As nobody, until told to stop (or ATTACK_S): for every host namespace
 * sgc-NAME-hI that appears in /run/netns (inotify), make the directory an
 * older sgdlab-nsexec insisted on making itself, /tmp/sgdlab-orted-NAME-hI
 * (nobody's, 0700).  Writes how many it made (an int) on `result`; their
 * names, one a line, into `list` (a file nobody may write to). */
static void planter(int stop, int result, int list) {
  int in = inotify_init1(IN_CLOEXEC), made = 0;
  if (in < 0 || inotify_add_watch(in, "/run/netns", IN_CREATE | IN_MOVED_TO) < 0) _exit(93);
  char buf[4096] __attribute__((aligned(8)));
  double t0 = sg_now();
  while (!told_to_stop(stop) && sg_now() - t0 < ATTACK_S) {
    struct pollfd p[2] = {{.fd = in, .events = POLLIN}, {.fd = stop, .events = POLLIN}};
    if (poll(p, 2, 1000) <= 0 || !(p[0].revents & POLLIN)) continue;
    ssize_t n = read(in, buf, sizeof buf);
    for (ssize_t at = 0; at < n;) {
      struct inotify_event *e = (struct inotify_event *)(buf + at);
      char name[16], dir[128];
      int h;
      if (e->len && sscanf(e->name, "sgc-%15[a-z0-9]-h%d", name, &h) == 2) {
        snprintf(dir, sizeof dir, "/tmp/sgdlab-orted-%s-h%d\n", name, h);
        if (write(list, dir, strlen(dir)) < 0) _exit(94);
        dir[strlen(dir) - 1] = '\0';
        made += mkdir(dir, 0700) == 0;
      }
      at += (ssize_t)sizeof *e + e->len;
    }
  }
  if (write(result, &made, sizeof made) != (ssize_t)sizeof made) _exit(95);
  _exit(0);
}

TEST(an_mpirun_cluster_run_ignores_directories_another_user_planted) {
  if (!tc_root_or_skip("an_mpirun_cluster_run_ignores_directories_another_user_planted")) return;
  const char *d = ru_scratch("tdm1");
  CHECK(d);
  char cfg[128], db[128], listf[128];
  snprintf(cfg, sizeof cfg, "%s/m.yaml", d);
  snprintf(db, sizeof db, "%s/m.db", d);
  snprintf(listf, sizeof listf, "%s/planted", d);
  int list = open(listf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int stop[2], result[2];
  CHECK(list >= 0 && pipe2(stop, O_CLOEXEC) == 0 && pipe2(result, O_CLOEXEC) == 0);
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    become_nobody();
    close(stop[1]), close(result[0]);
    planter(stop[0], result[1], list);
  }
  close(stop[0]), close(result[1]), close(list);
  CHECK_OK(ru_write_train_config(cfg, "planted", "{engine: allreduce, algorithm: ring}",
                                 MPI_CLUSTER, "", 3, 20));
  int code = ru_sgdlab_run(cfg, db);
  close(stop[1]);
  int made = -1;
  if (tc_read_full(result[0], &made, sizeof made, 10.0) < 0) made = -1;
  close(result[0]);
  tc_wait(p, 10.0);
  char *err = ru_db_text(db, "SELECT status || ': ' || coalesce(error, '') FROM runs");
  fprintf(stderr, "  nobody planted %d host directories; sgdlab run exit %d; run %s\n", made, code,
          err ? err : "(none)");
  CHECK_MSG(made >= 1, "the attacker planted nothing (%d): the case tested nothing", made);
  CHECK_EQ_INT(code, 0);
  CHECK_MSG(err && !strcmp(err, "ok: "), "run: %s", err ? err : "(none)");
  free(err);
  char *names = ru_slurp(listf, 4096);
  for (char *save = NULL, *l = names ? strtok_r(names, "\n", &save) : NULL; l;
       l = strtok_r(NULL, "\n", &save))
    ru_rm_rf(l);
  free(names);
}

/* Copy file src to dst (mode 0755). */
static int copy_exe(const char *src, const char *dst) {
  int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;
  char buf[65536];
  ssize_t n;
  if (in >= 0 && (out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755)) >= 0) {
    while ((n = read(in, buf, sizeof buf)) > 0)
      if (write(out, buf, (size_t)n) != n) break;
    rc = n == 0 ? 0 : -1;
  }
  if (in >= 0) close(in);
  if (out >= 0 && close(out) < 0) rc = -1;
  return rc;
}

/* An agent that refuses a host (here: the real sgdlab-nsexec, handed a
 * run directory that is not private) makes the run's error one line that
 * names the host and why, instead of "ended without reporting". */
TEST(the_agents_refusal_is_the_runs_error) {
  if (!tc_root_or_skip("the_agents_refusal_is_the_runs_error")) return;
  const char *d = ru_scratch("tdref");
  CHECK(d);
  char bin[128], src[4096], dst[192], cfg[128], db[128], script[8192];
  snprintf(bin, sizeof bin, "%s/bin", d);
  CHECK(mkdir(bin, 0700) == 0);
  snprintf(src, sizeof src, "%s", ru_sgdlab());
  char *slash = strrchr(src, '/');
  CHECK(slash);
  static const char *const progs[] = {"sgdlab", "sgdlab-rank"};
  for (int i = 0; i < 2; i++) {
    snprintf(slash + 1, sizeof src - (size_t)(slash + 1 - src), "%s", progs[i]);
    snprintf(dst, sizeof dst, "%s/%s", bin, progs[i]);
    CHECK_OK(copy_exe(src, dst));
  }
  snprintf(slash + 1, sizeof src - (size_t)(slash + 1 - src), "sgdlab-nsexec");
  snprintf(script, sizeof script, "#!/bin/sh\nSGDLAB_RUNDIR=/tmp exec '%s' \"$@\"\n", src);
  snprintf(dst, sizeof dst, "%s/sgdlab-nsexec", bin);
  CHECK_OK(ru_write_file(dst, script));
  CHECK(chmod(dst, 0755) == 0);
  snprintf(cfg, sizeof cfg, "%s/r.yaml", d);
  snprintf(db, sizeof db, "%s/r.db", d);
  CHECK_OK(ru_write_train_config(cfg, "refused", "{engine: allreduce, algorithm: ring}",
                                 MPI_CLUSTER "deadline: 10\n", "", 3, 20));
  snprintf(dst, sizeof dst, "%s/sgdlab", bin);
  char *argv[] = {dst, "run", cfg, "--db", db, NULL}, out[8192];
  pid_t p = fork();
  if (p == 0) {
    int fd = open("/dev/null", O_WRONLY);
    dup2(fd, 1), dup2(fd, 2);
    execv(dst, argv);
    _exit(127);
  }
  CHECK_EQ_INT(ru_wait_exit_code(p, 120), 1);
  ru_db_text_into(db, "SELECT status || ': ' || coalesce(error, '') FROM runs", out, sizeof out);
  fprintf(stderr, "  run %s\n", out);
  CHECK_STR_CONTAINS(out, "failed: mpirun could not start its daemon on a cluster host: host 198.18.");
  CHECK_STR_CONTAINS(out, "TMPDIR: /tmp: not a private directory");
  CHECK_MSG(!strchr(out, '\n'), "more than one line: %s", out);
}

/* Whether anything named /tmp/sgdlab-orted-NAME-* exists. */
static int old_host_dirs(const char *name) {
  char prefix[64];
  int n = 0;
  snprintf(prefix, sizeof prefix, "sgdlab-orted-%s-", name);
  DIR *d = opendir("/tmp");
  struct dirent *e;
  while (d && (e = readdir(d))) n += !strncmp(e->d_name, prefix, strlen(prefix));
  if (d) closedir(d);
  return n;
}

/* A harness killed mid-run under mpirun on a cluster: its hosts' daemon
 * directories were in its run directory, and the next run into the
 * database removes all of it; nothing of the cluster is under /tmp. */
TEST(a_killed_mpirun_harness_leaves_no_host_directory) {
  if (!tc_root_or_skip("a_killed_mpirun_harness_leaves_no_host_directory")) return;
  const char *d = ru_scratch("tdl3");
  CHECK(d);
  char cfg[128], small[128], db[128], name[32], tmp[128], hdir[160];
  snprintf(cfg, sizeof cfg, "%s/k.yaml", d);
  snprintf(small, sizeof small, "%s/small.yaml", d);
  snprintf(db, sizeof db, "%s/k.db", d);
  CHECK_OK(ru_write_train_config(cfg, "killed", "{engine: ps, mode: sync}",
                                 MPI_CLUSTER "deadline: 5\n", "", 2, 1000000));
  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  int st = 0;
  int going = sg > 0 &&
              ru_db_wait(db, "SELECT count(*) FROM steps WHERE rank = 1", 5, 60, sg, &st) == 0 &&
              ru_db_wait(db, "SELECT count(*) FROM run_info WHERE key = 'cluster.name'", 1, 10, sg,
                         &st) == 0;
  if (!going && sg > 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(going, "the run did not get going");
  ru_db_text_into(db, "SELECT value FROM run_info WHERE key = 'cluster.name'", name, sizeof name);
  ru_db_text_into(db, "SELECT tmp_dir FROM runs WHERE id = 1", tmp, sizeof tmp);
  snprintf(hdir, sizeof hdir, "%s/h1", tmp);
  int inside = exists(hdir), outside = old_host_dirs(name);
  CHECK_EQ_INT(kill(sg, SIGKILL), 0);
  CHECK_EQ_INT(ru_wait_exit_code(sg, 10), 128 + SIGKILL);
  fprintf(stderr, "  while running: %s %s; %d /tmp/sgdlab-orted-%s-*\n", hdir,
          inside ? "exists" : "missing", outside, name);
  CHECK_OK(ru_write_train_config(small, "after", "local", NULL, "", 1, 1));
  CHECK_EQ_INT(ru_sgdlab_run(small, db), 0);
  char *err = ru_db_text(db, "SELECT status || ': ' || coalesce(error, '') FROM runs WHERE id = 1");
  int left = old_host_dirs(name);
  fprintf(stderr, "  after the next run: run 1 %s; %s %s; %d /tmp/sgdlab-orted-%s-*\n",
          err ? err : "?", tmp, exists(tmp) ? "left" : "removed", left, name);
  CHECK_MSG(err && !strcmp(err, "failed: harness died"), "run 1: %s", err ? err : "(none)");
  free(err);
  CHECK_MSG(!exists(tmp), "%s is still there", tmp);
  CHECK_EQ_INT(left, 0);
  CHECK_MSG(inside, "host 1's daemon directory %s was not in the run directory", hdir);
}

/* ---- a forged database ------------------------------------------------------------------ */

/* SHA-256 of a file's bytes into out, and its mtime; 0 or -1. */
static int file_state(const char *path, char *out, struct timespec *mtime) {
  char *text = ru_slurp(path, 16 << 20);
  struct stat sb;
  if (!text || stat(path, &sb) < 0) return free(text), -1;
  sg_sha256_hex(text, (size_t)sb.st_size, out); /* ru_slurp keeps every byte */
  *mtime = sb.st_mtim;
  free(text);
  return 0;
}

/* A database someone sent: a 'running' row of this host, a dead harness,
 * naming a live run directory of ours (with a proof copied from nowhere).
 * list and show leave the database file's bytes and mtime and the
 * directory's files as they were; a run into it (which reconciles) leaves
 * the row and the directory too. */
TEST(a_forged_running_row_deletes_and_writes_nothing) {
  const char *d = ru_scratch("tdl5");
  CHECK(d);
  char db[128], live[128], small[128], sql[1024], host[256] = "?", h0[65], h1[65];
  snprintf(db, sizeof db, "%s/forged.db", d);
  snprintf(small, sizeof small, "%s/small.yaml", d);
  gethostname(host, sizeof host - 1);
  snprintf(live, sizeof live, "/tmp/sgdlab-XXXXXX");
  CHECK(mkdtemp(live));
  CHECK_OK(make_files(live, 100));
  /* the file a real sgdlab writes, then the forged row */
  CHECK_OK(ru_write_train_config(small, "small", "local", NULL, "", 1, 1));
  CHECK_EQ_INT(ru_sgdlab_run(small, db), 0);
  /* the first reader stores the report views in the file (views.c); a
   * database someone sends has them already */
  char *first[] = {NULL, "list", "--db", db, NULL}, out[8192];
  CHECK_EQ_INT(ru_run(first, 1, NULL, out, sizeof out), 0);
  pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, NULL, 0);
  snprintf(sql, sizeof sql, "UPDATE runs SET status = 'running', error = NULL, harness_pid = %d,"
           " harness_host = '%s', harness_start = '1@forged', tmp_dir = '%s' WHERE id = 1;"
           "INSERT OR REPLACE INTO run_info(run_id, key, value) VALUES(1, 'tmp_dir.proof', "
           "'%064d');", (int)gone, host, live, 0);
  char *argv[] = {"sqlite3", db, sql, NULL};
  CHECK_EQ_INT(tc_run(argv, -1, out, sizeof out), 0);
  struct timespec m0, m1;
  CHECK_OK(file_state(db, h0, &m0));
  char *list[] = {NULL, "list", "--db", db, NULL}, *show[] = {NULL, "show", "1", "--db", db, NULL};
  int lc = ru_run(list, 1, NULL, out, sizeof out);
  int sc = ru_run(show, 1, NULL, out, sizeof out);
  CHECK_OK(file_state(db, h1, &m1));
  int same = !strcmp(h0, h1) && m0.tv_sec == m1.tv_sec && m0.tv_nsec == m1.tv_nsec;
  int left = count_files(live, 100);
  fprintf(stderr, "  list exit %d, show exit %d: database %s; live directory files left %d of 100\n",
          lc, sc, same ? "unchanged (bytes and mtime)" : "CHANGED", left);
  CHECK_EQ_INT(lc, 0);
  CHECK_EQ_INT(sc, 0);
  CHECK_MSG(same, "list/show wrote the database");
  CHECK_EQ_INT(left, 100);
  /* a writing command reconciles: the forged row proves nothing */
  CHECK_EQ_INT(ru_sgdlab_run(small, db), 0);
  left = count_files(live, 100);
  char *st = ru_db_text(db, "SELECT status FROM runs WHERE id = 1");
  fprintf(stderr, "  after a run into it: row 1 %s; live directory files left %d of 100\n",
          st ? st : "?", left);
  CHECK_MSG(st && !strcmp(st, "running"), "row 1: %s", st ? st : "(none)");
  free(st);
  CHECK_EQ_INT(left, 100);
  ru_rm_rf(live);
}
