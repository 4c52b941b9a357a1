/* test_harness_death.c - the harness and the processes it starts, as real
 * processes through `sgdlab run` on Fashion-MNIST:
 *
 *  - the harness signals only what it started: a forged HELLO record, sent
 *    over the run's real record socket from this test, names an unrelated
 *    process (one running, one stopped) as ranks 1 and 0, and a forged
 *    failing DONE fails the run; the harness's kill paths for leftover and
 *    stopped ranks must leave both processes alive;
 *  - a harness killed with SIGKILL mid-run, local launcher and mpirun: no
 *    rank process (nor mpirun) of the run is left within 5 s (ranks and
 *    mpirun die by PR_SET_PDEATHSIG, ranks under mpirun also by their
 *    lifeline); `sgdlab list` changes nothing, and the next `sgdlab run`
 *    into the database marks the run failed "harness died" and removes
 *    its directory;
 *  - the lifeline alone: a rank process whose harness (a process holding
 *    the records PULL socket) is killed exits within 5 s with status
 *    SG_LIFELINE_EXIT and says why; one that finishes normally exits 0;
 *  - SIGHUP (terminal closed) ends the run as SIGTERM does: exit 129
 *    (128 + SIGHUP), the run "interrupted", no rank left.
 */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "lifeline.h"
#include "records.h"
#include "run.h"
#include "proc.h"
#include "recorder.h"
#include "run_util.h"

#define DEADLINE_S 5.0

static const char LONG_RING[] =
    "name: death\nworkers: 2\ntransport: zmq\ndeadline: 5\n"
    "workload: {hidden: [16], batch: 16, epochs: 100, eval_every: 100000}\n"
    "engines: [{engine: allreduce, algorithm: ring}]\n";

/* Start `sgdlab run` on the config text in dir and wait (bounded) until
 * the run's nprocs ranks have said hello and rank 0 has recorded 5
 * steps; pids[] gets the ranks' pids.  0, or -1 (the harness is then
 * killed and reaped). */
static int start_run(const char *dir, const char *text, int nprocs, char *db, size_t dbcap,
                     pid_t *harness, int *pids) {
  char cfg[128], errpath[128], sql[256];
  snprintf(cfg, sizeof cfg, "%s/run.yaml", dir);
  snprintf(db, dbcap, "%s/r.db", dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", dir);
  if (ru_write_file(cfg, text) < 0) return -1;
  char *argv[] = {NULL, "run", cfg, "--db", (char *)db, NULL};
  *harness = ru_start(argv, errpath, 0, NULL);
  if (*harness < 0) return -1;
  snprintf(sql, sizeof sql,
           "SELECT (SELECT count(*) FROM ranks WHERE run_id=1 AND pid > 0) = %d AND "
           "(SELECT count(*) FROM steps WHERE run_id=1 AND rank=0) >= 5",
           nprocs);
  if (ru_db_wait(db, sql, 1, 60, *harness, NULL) < 0) {
    kill(*harness, SIGKILL);
    waitpid(*harness, NULL, 0);
    return -1;
  }
  for (int r = 0; r < nprocs; r++) {
    snprintf(sql, sizeof sql, "SELECT pid FROM ranks WHERE run_id=1 AND rank=%d", r);
    pids[r] = (int)ru_db_int(db, sql);
  }
  return 0;
}

/* A process that only waits to be killed (our child). */
static pid_t bystander(void) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    for (;;) pause();
  }
  return p;
}

/* Whether our child p is still alive (not exited, not a zombie). */
static int alive(pid_t p) {
  int st = sg_proc_state(p);
  return waitpid(p, NULL, WNOHANG) == 0 && st && st != 'Z' && st != 'X';
}

/* The run's record endpoint, from rank pid's command line
 * ("sgdlab-rank /tmp/sgdlab-XXXXXX/spec"): ipc://<that dir>/rec. */
static int record_endpoint(int pid, char *out, size_t cap) {
  char path[64], cmd[1024];
  snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
  if (f) fclose(f);
  cmd[n] = '\0';
  const char *spec = cmd + strlen(cmd) + 1; /* argv[1] */
  const char *slash = spec < cmd + n ? strrchr(spec, '/') : NULL;
  if (!slash) return -1;
  snprintf(out, cap, "ipc://%.*s/rec", (int)(slash - spec), spec);
  return 0;
}

static int send_record(void *push, uint32_t type, int rank, const void *p, size_t len) {
  unsigned char buf[512];
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = type, .rank = rank, .len = (uint32_t)len};
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, p, len);
  return zmq_send(push, buf, sizeof h + len, 0) == (int)(sizeof h + len) ? 0 : -1;
}

static int send_hello(void *push, int rank, int pid) {
  sg_rec_hello_t x = {.pid = pid};
  snprintf(x.role, sizeof x.role, "worker");
  gethostname(x.host, sizeof x.host - 1);
  return send_record(push, SG_REC_HELLO, rank, &x, sizeof x);
}

/* The forged records: HELLO rank 1 = `running`, HELLO rank 0 = `stopped`,
 * then a failing DONE from rank 0. */
static int forge(const char *endpoint, int running, int stopped) {
  void *ctx = zmq_ctx_new(), *push = ctx ? zmq_socket(ctx, ZMQ_PUSH) : NULL;
  int rc = -1, linger = 2000;
  if (!push) goto out;
  zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_connect(push, endpoint) < 0) goto out;
  unsigned char done[64] = {0};
  sg_rec_done_t st = {.status = 1, .blamed = 1, .reason = SG_BLAME_PEER_TIMEOUT};
  memcpy(done, &st, sizeof st);
  snprintf((char *)done + sizeof st, sizeof done - sizeof st, "forged failure");
  rc = send_hello(push, 1, running) || send_hello(push, 0, stopped) ||
       send_record(push, SG_REC_DONE, 0, done, sizeof st + strlen("forged failure") + 1);
out:
  if (push) zmq_close(push);
  if (ctx) zmq_ctx_term(ctx);
  return rc ? -1 : 0;
}

TEST(forged_hello_never_gets_an_unrelated_process_killed) {
  char dir[64], db[128], ep[300], err[1024];
  int pids[2];
  pid_t h;
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "death"));
  CHECK_MSG(start_run(dir, LONG_RING, 2, db, sizeof db, &h, pids) == 0,
            "the run did not get going within 60 s");
  pid_t running = bystander(), stopped = bystander();
  CHECK(running > 0 && stopped > 0);
  kill(stopped, SIGSTOP);
  int ok = record_endpoint(pids[0], ep, sizeof ep) == 0 && forge(ep, running, stopped) == 0;
  int code = ru_wait_exit_code(h, 20.0);
  int running_alive = alive(running), stopped_alive = alive(stopped);
  char st[2] = {(char)sg_proc_state(stopped), 0};
  kill(running, SIGKILL), kill(stopped, SIGKILL);
  waitpid(running, NULL, 0), waitpid(stopped, NULL, 0);
  CHECK_MSG(ok, "could not send the forged records to %s", ep);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  fprintf(stderr, "  sgdlab exited %d; run %s\n  bystanders: running one %s, stopped one %s\n",
          code, err, running_alive ? "alive" : "KILLED", stopped_alive ? "alive" : "KILLED");
  /* the forged records did reach the harness: they failed the run */
  CHECK_EQ_INT(code, 1);
  CHECK_STR_CONTAINS(err, "forged failure");
  CHECK_MSG(running_alive, "the harness killed the unrelated process %d named in a forged HELLO",
            (int)running);
  CHECK_MSG(stopped_alive && st[0] == 'T', "the harness killed the unrelated stopped process %d "
            "named in a forged HELLO (state %s)", (int)stopped, st);
  for (int r = 0; r < 2; r++)
    CHECK_MSG(ru_wait_gone(pids[r], 5.0, 1), "rank %d (pid %d) still there", r, pids[r]);
  ru_rm_rf(dir);
}

/* ---- the harness dies --------------------------------------------------- */

static const char LONG_RING_MPI[] =
    "name: death\nworkers: 3\ntransport: mpi\ndeadline: 5\n"
    "workload: {hidden: [16], batch: 16, epochs: 100, eval_every: 100000}\n"
    "engines: [{engine: allreduce, algorithm: ring}]\n";

static int dir_exists(const char *d) {
  struct stat sb;
  return d[0] && lstat(d, &sb) == 0;
}

static void harness_killed_case(const char *text, int nprocs, int mpirun) {
  char dir[64], db[128], tmp[128], out[4096], err[256];
  int pids[8];
  pid_t h;
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "death"));
  CHECK_MSG(start_run(dir, text, nprocs, db, sizeof db, &h, pids) == 0,
            "the run did not get going within 60 s");
  ru_db_text_into(db, "SELECT tmp_dir FROM runs WHERE id=1", tmp, sizeof tmp);
  int mp = mpirun ? (int)ru_child_named(h, "mpirun") : 0;
  CHECK_MSG(!mpirun || mp > 0, "no mpirun under the harness (pid %d)", (int)h);
  CHECK_MSG(dir_exists(tmp), "the run's temp dir '%s' is not there", tmp);
  double t = sg_now();
  CHECK(kill(h, SIGKILL) == 0);
  waitpid(h, NULL, 0);
  /* reparented to init, they may stay zombies a moment: dead either way */
  for (int r = 0; r < nprocs; r++)
    CHECK_MSG(ru_wait_gone(pids[r], 5.0, 0), "rank %d (pid %d) still running %.1f s after the "
              "harness was killed", r, pids[r], sg_now() - t);
  if (mp) CHECK_MSG(ru_wait_gone(mp, 5.0, 0), "mpirun (pid %d) still running", mp);
  fprintf(stderr, "  every rank%s gone %.2f s after the harness's SIGKILL\n",
          mp ? " and mpirun" : "", sg_now() - t);
  ru_db_text_into(db, "SELECT status || ': ' || coalesce(error, '') FROM runs WHERE id=1", err,
                  sizeof err);
  CHECK_MSG(!strcmp(err, "running: "), "before reconciliation the run reads '%s'", err);
  /* list only reads: the row and the directory stay as they are */
  char *argv[] = {NULL, "list", "--db", db, NULL};
  int code = ru_run(argv, 1, NULL, out, sizeof out);
  CHECK_EQ_INT(code, 0);
  ru_db_text_into(db, "SELECT status FROM runs WHERE id=1", err, sizeof err);
  CHECK_MSG(!strcmp(err, "running"), "list changed the run to '%s'", err);
  CHECK_MSG(dir_exists(tmp), "list removed the run's directory %s", tmp);
  /* the next open to write (sgdlab run, bench) reconciles: failed, directory gone */
  sg_recorder_t *rec = NULL;
  CHECK_OK(sg_recorder_open(&rec, db));
  sg_recorder_close(&rec);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  CHECK_MSG(!strcmp(err, "failed: harness died"), "%s", err);
  CHECK_MSG(!dir_exists(tmp), "the dead run's temp dir %s is still there", tmp);
  ru_rm_rf(dir);
}

TEST(harness_killed_leaves_no_rank_and_the_run_is_marked_local) {
  harness_killed_case(LONG_RING, 2, 0);
}

TEST(harness_killed_leaves_no_rank_and_the_run_is_marked_mpirun) {
  harness_killed_case(LONG_RING_MPI, 3, 1);
}

/* A stand-in harness: binds the records PULL socket at ep, then reports
 * the first record on `ready` and waits to be killed. */
static pid_t fake_harness(const char *ep, int ready) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    void *ctx = zmq_ctx_new(), *pull = zmq_socket(ctx, ZMQ_PULL);
    char buf[256];
    if (zmq_bind(pull, ep) < 0) _exit(2);
    if (zmq_recv(pull, buf, sizeof buf, 0) < 0 || write(ready, "h", 1) != 1) _exit(3);
    for (;;) zmq_recv(pull, buf, sizeof buf, 0);
  }
  return p;
}

/* A stand-in rank: opens the records stream to ep (its stderr into
 * errpath) and sends a step record every 10 ms, `steps` of them (0: for
 * up to 30 s), then closes it and exits 0. */
static pid_t fake_rank(const char *ep, const char *errpath, int steps) {
  fflush(NULL);
  pid_t p = fork();
  if (p == 0) {
    int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e < 0) _exit(4);
    dup2(e, 2);
    sg_records_t *rec = NULL;
    if (sg_records_open(&rec, ep, 1, "worker", sg_wall(), NULL) < 0) _exit(5);
    double until = sg_now() + 30;
    for (int i = 0; (steps ? i < steps : sg_now() < until); i++) {
      sg_step_rec_t s = {.step = i, .staleness = -1};
      sg_records_step(rec, &s);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
    sg_records_close(&rec);
    _exit(0);
  }
  return p;
}

TEST(lifeline_ends_a_rank_whose_harness_vanished) {
  char dir[64], ep[128], errpath[128];
  int fds[2];
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "death"));
  snprintf(ep, sizeof ep, "ipc://%s/rec", dir);
  snprintf(errpath, sizeof errpath, "%s/rank.err", dir);
  for (int finish = 1; finish >= 0; finish--) {
    CHECK(pipe(fds) == 0);
    pid_t h = fake_harness(ep, fds[1]), r = fake_rank(ep, errpath, finish ? 20 : 0);
    char c;
    struct pollfd pf = {.fd = fds[0], .events = POLLIN};
    int up = poll(&pf, 1, 10000) == 1 && read(fds[0], &c, 1) == 1;
    close(fds[0]), close(fds[1]);
    int st = 0;
    if (finish) { /* a rank that finishes while its harness lives: no false alarm */
      int ended = up && ru_wait_exit(r, 10.0, &st);
      kill(h, SIGKILL), waitpid(h, NULL, 0);
      if (!ended) kill(r, SIGKILL), waitpid(r, NULL, 0);
      char *text = ru_slurp(errpath, 4096);
      CHECK_MSG(ended && WIFEXITED(st) && WEXITSTATUS(st) == 0, "finishing rank: status %d", st);
      CHECK_MSG(text && !strstr(text, "harness is gone"), "false alarm: %s", text ? text : "");
      free(text);
      continue;
    }
    double t = sg_now();
    kill(h, SIGKILL);
    waitpid(h, NULL, 0);
    int ended = up && ru_wait_exit(r, 5.0, &st);
    double took = sg_now() - t;
    if (!ended) kill(r, SIGKILL), waitpid(r, NULL, 0);
    char *text = ru_slurp(errpath, 4096);
    fprintf(stderr, "  rank exited %.2f s after its harness was killed: %s", took, text ? text : "");
    CHECK_MSG(up, "the stand-in harness got no record");
    CHECK_MSG(ended, "the rank still runs 5 s after its harness was killed");
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == SG_LIFELINE_EXIT, "rank status %d", st);
    CHECK_STR_CONTAINS(text, "sgdlab-rank: rank 1: the harness is gone (records connection closed: ");
    CHECK_STR_CONTAINS(text, ep);
    free(text);
  }
  ru_rm_rf(dir);
}

TEST(sighup_stops_the_run_like_sigterm) {
  char dir[64], db[128], err[256];
  int pids[2];
  pid_t h;
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "death"));
  CHECK_MSG(start_run(dir, LONG_RING, 2, db, sizeof db, &h, pids) == 0,
            "the run did not get going within 60 s");
  CHECK(kill(h, SIGHUP) == 0);
  int code = ru_wait_exit_code(h, 10.0);
  CHECK_EQ_INT(code, 129);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  CHECK_MSG(!strcmp(err, "interrupted: interrupted"), "%s", err);
  for (int r = 0; r < 2; r++)
    CHECK_MSG(ru_wait_gone(pids[r], 1.0, 1), "rank %d (pid %d) still there", r, pids[r]);
  ru_rm_rf(dir);
}
