/* test_harness_death.c - the harness and the processes it starts, as real
 * processes through `sgdlab run` on Fashion-MNIST:
 *
 *  - the harness signals only what it started: a forged HELLO record, sent
 *    over the run's real record socket from this test, names an unrelated
 *    process (one running, one stopped) as ranks 1 and 0, and a forged
 *    failing DONE fails the run; the harness's kill paths for leftover and
 *    stopped ranks must leave both processes alive;
 */
#include "test.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"
#include "records.h"
#include "run.h"
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
  int st = sg_run_proc_state(p);
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
  int32_t st = 1;
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
  char st[2] = {(char)sg_run_proc_state(stopped), 0};
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
