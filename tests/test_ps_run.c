/* test_ps_run.c - the ps engine as real processes through `sgdlab run`:
 * servers and workers over ZeroMQ (local launcher) and MPI (mpirun), on
 * real Fashion-MNIST, records in a real SQLite file.
 *
 *  - equivalence: ps sync with S in {1, 2}, N = 4: worker 0's final
 *    parameters (dump_params) within relative L2 distance 1e-4 of local's
 *    with batch 4b after 100 steps, on both transports (the planted bug
 *    that must fail this bound is in test_ps_train);
 *  - the ssp bound from the step records: worker w starts step t only
 *    after every other worker v has pushed step t-s-1, i.e. after
 *    t_start(v, t-s-1) + compute_s(v, t-s-1) (the push leaves right after
 *    the compute); checked for s = 0 and 2 with one slowed worker, and
 *    shown to fail for async on the same records;
 *  - async records a staleness distribution;
 *  - faults: a worker, then a server, killed (SIGKILL) or stopped
 *    (SIGSTOP) under sync, and a worker stopped under async: sgdlab exits 1
 *    within two deadlines, the run is failed naming the rank (a stopped one
 *    first, "is stopped (state T)"); a sync worker that says DONE after
 *    one step (planted) is named by a sliced server over mpi, its
 *    message intact through the server's clean-up;
 *  - compress: topk 0.01 converges on the quickstart workload (MLP
 *    784-128-10, batch 64, lr 0.1, momentum 0.9), ps sync, 3 workers, 300
 *    steps: the workers send < 5% of compress: none's bytes and reach a
 *    test accuracy >= 0.7 (chance 0.1) within TOPK_ACC_GAP of none's; a
 *    wrong index or a lost residual keeps it far below (the conservation
 *    itself is test_ps_compress's);
 *  - compress with sparse: true is refused before anything launches: exit
 *    2, one line naming the file, line and key.
 */
#include "test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "run_util.h"

#define RTOL 1e-4
#define DEADLINE_S 4.0
#define TOPK_ACC_GAP 0.1

/* A long sync run (worker rank 3 is slowed, so every step has a window
 * where the others wait for it); once rank 3 has recorded 5 steps, `sig`
 * goes to rank `victim`.  SIGKILL: the harness sees the death.  SIGSTOP: a
 * silent peer nobody can see die; only the engine's deadlines can find
 * it, and the message must name it (under mpirun too: the harness reads
 * it from mpirun's notice).  mpirun may return while its killed ranks
 * are still being torn down: each gets a bounded 3 s. */
static void kill_case_with(const char *transport, int victim, int sig, const char *name,
                           const char *more) {
  char engine[160];
  snprintf(engine, sizeof engine, "{engine: ps, mode: sync, servers: 2, transport: %s%s}",
           transport, more);
  ru_fault_t f = {.name = name, .tag = "psrun", .config_name = "ps-test", .engine = engine,
                  .workers = 3, .nranks = 5, .delay_rank = 3, .delay_ms = 100,
                  .watch_rank = 3, .victim = victim, .sig = sig,
                  .deadline_s = DEADLINE_S, .gone_each_s = 3};
  ru_fault_case(&f);
}

static void kill_case(const char *transport, int victim, int sig, const char *name) {
  kill_case_with(transport, victim, sig, name, "");
}

/* Slices of 16 KiB from the first byte: the small test model in several
 * slices per shard, so the sliced schedule runs as real processes. */
#define SLICED ", slice: 16K, slice_from: 0"

TEST(sync_processes_match_local_on_both_transports) {
  static const char *const variants[][2] = {
      {"{engine: ps, mode: sync, servers: 1, transport: zmq}", "zmq S=1"},
      {"{engine: ps, mode: sync, servers: 2, transport: zmq}", "zmq S=2"},
      {"{engine: ps, mode: sync, servers: 1, transport: mpi}", "mpi S=1"},
      {"{engine: ps, mode: sync, servers: 2, transport: mpi}", "mpi S=2"},
      {"{engine: ps, mode: sync, servers: 2, transport: zmq" SLICED "}", "zmq S=2 sliced"},
      {"{engine: ps, mode: sync, servers: 1, transport: mpi" SLICED "}", "mpi S=1 sliced"},
  };
  ru_equivalence_case("psrun", "ps-test", 4, variants, sizeof variants / sizeof *variants, RTOL);
}

/* Pairs (w at step t, v at step t-lag) where w started before v's push
 * of step t-lag left: a worker ran more than lag-1 clocks ahead. */
static long violations(const char *db, int lag) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM steps a JOIN steps b ON a.run_id = b.run_id "
           "AND a.role = 'worker' AND b.role = 'worker' AND a.rank <> b.rank "
           "AND b.step = a.step - %d "
           "WHERE a.run_id = (SELECT MAX(id) FROM runs) "
           "AND a.t_start < b.t_start + b.compute_s - 1e-6",
           lag);
  char *v = ru_db_text(db, sql);
  long n = v ? atol(v) : -1;
  free(v);
  return n;
}

static int straggler_run(const char *d, const char *engine, char *db, size_t dblen) {
  char cfg[128];
  snprintf(cfg, sizeof cfg, "%s/bound.yaml", d);
  snprintf(db, dblen, "%s/bound.db", d);
  /* worker rank 2 (of ranks 1..4) is 10 ms slower per step */
  if (ru_write_train_config(cfg, "ps-test", engine, "delay_rank: 2\ndelay_ms: 10\n", "", 4, 60))
    return -1;
  return ru_sgdlab_run(cfg, db);
}

TEST(ssp_bound_holds_in_the_step_records) {
  const char *d = ru_scratch("psrun");
  CHECK(d);
  char db[128];
  for (int s = 0; s <= 2; s += 2) {
    char engine[128];
    snprintf(engine, sizeof engine, "{engine: ps, mode: ssp, staleness: %d}", s);
    CHECK_EQ_INT(straggler_run(d, engine, db, sizeof db), 0);
    long bad = violations(db, s + 1);
    fprintf(stderr, "  ssp(%d): %ld starts more than %d clocks ahead\n", s, bad, s);
    CHECK_EQ_INT(bad, 0);
    if (s > 0) {
      /* and the slack is used: some worker was s clocks ahead */
      long used = violations(db, s);
      CHECK_MSG(used > 0, "ssp(%d): no worker ever ran %d clocks ahead", s, s);
    }
  }
  /* The same check on async records finds workers far ahead. */
  CHECK_EQ_INT(straggler_run(d, "{engine: ps, mode: async}", db, sizeof db), 0);
  long bad = violations(db, 3);
  fprintf(stderr, "  async: %ld starts more than 2 clocks ahead\n", bad);
  CHECK_MSG(bad > 0, "the bound check cannot fail: async stayed within 2 clocks");
  /* async records a staleness distribution */
  char *v = ru_db_text(db, "SELECT COUNT(DISTINCT staleness) FROM steps WHERE role = 'worker' "
                        "AND staleness > 0 AND run_id = (SELECT MAX(id) FROM runs)");
  int kinds = v ? atoi(v) : 0;
  free(v);
  CHECK_MSG(kinds >= 2, "async staleness took %d distinct positive values", kinds);
}

TEST(worker_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 4, SIGKILL, "zmq worker"); }
TEST(server_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 1, SIGKILL, "zmq server"); }
/* A stopped process is silent but alive: only the engine's deadlines find
 * it, and the server (which knows who did not push) must name it. */
TEST(stopped_worker_is_named_by_the_server_zmq) { kill_case("zmq", 4, SIGSTOP, "zmq stopped worker"); }
TEST(stopped_worker_is_named_by_a_sliced_server_zmq) {
  kill_case_with("zmq", 4, SIGSTOP, "zmq stopped worker, sliced", SLICED);
}
TEST(killed_worker_is_named_by_a_sliced_server_mpi) {
  kill_case_with("mpi", 4, SIGKILL, "mpi worker, sliced", SLICED);
}
TEST(stopped_server_is_named_by_the_workers_zmq) { kill_case("zmq", 1, SIGSTOP, "zmq stopped server"); }
TEST(worker_killed_fails_the_run_naming_it_mpi) { kill_case("mpi", 4, SIGKILL, "mpi worker"); }

/* A sync worker that says DONE after one step of 100 (planted:
 * ps-done-early, the last worker, rank 4): the step after can never be
 * complete.  Sliced over mpi, the server keeps a receive posted per
 * worker (the others' receives for their next slices stay posted while
 * they wait for replies), so its wait ends after a deadline and it must
 * fail naming the worker that said DONE early.  Its message must reach
 * the harness: the server's clean-up waits on its replies and receives
 * still in flight, which set and cleared errors of their own; before
 * sg_err_save the run failed as "rank 1 (server, ...): peer failed", the
 * server's text cleared.  Bound: a deadline (4 s) after the others'
 * pushes, plus the start and the teardown: 22 s. */
TEST(sliced_mpi_server_names_a_worker_that_said_done_early) {
  char dir[64], cfg[128], db[128], err[1024];
  ru_mkdtemp(dir, sizeof dir, "psearly");
  snprintf(cfg, sizeof cfg, "%s/early.yaml", dir);
  snprintf(db, sizeof db, "%s/early.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, "name: ps-early\nworkers: 3\nlauncher: mpirun\ndeadline: 4\n"
                                  "workload: {hidden: [16], batch: 16, max_steps: 100, "
                                  "eval_every: 1000000}\n"
                                  "engines: [{engine: ps, mode: sync, servers: 2, transport: mpi, "
                                  "slice: 4K, slice_from: 0}]\n"), 0);
  double t = sg_now();
  int code = ru_sgdlab_run_args(cfg, db, "--plant-bug", "ps-done-early");
  double took = sg_now() - t;
  ru_db_text_into(db, "SELECT status || ': ' || coalesce(error, '') FROM runs WHERE id=1", err,
                  sizeof err);
  fprintf(stderr, "  exit %d after %.1f s: %s\n", code, took, err);
  CHECK_EQ_INT(code, 1);
  CHECK_MSG(!strncmp(err, "failed: ", 8), "%s", err);
  CHECK_STR_CONTAINS(err, "worker rank 4");
  CHECK_STR_CONTAINS(err, "DONE");
  CHECK_MSG(!strstr(err, "no rank reported"), "the watchdog, not the server, ended it: %s", err);
  CHECK_MSG(took < 22, "took %.1f s", took);
  ru_rm_rf(dir);
}

/* async, as processes: a worker stopped (SIGSTOP) mid-run.  The server
 * declares it dead one deadline after its last message and goes on, but
 * a stopped process never ends: the harness fails the run once it has
 * been stopped 1.5 deadlines, naming it first.  Bound: the harness sees
 * state T at its next scan (<= 0.25 s + a 0.1 s poll after the signal),
 * fails the run 1.5 d = 6 s later and tears down (SIGKILL of the stopped
 * rank, SIGTERM of the others: well under 1 s): about 6.5 s, asserted
 * <= 2 d = 8 s by ru_fault_case.  async ends when the servers have applied
 * the sync step count's samples: with 1000 epochs that target (300000
 * updates) is out of reach, so the run trains the whole time and only
 * that check can end it (at one epoch the two fast workers reach it in
 * under a second, before the test has found the processes). */
TEST(stopped_async_worker_fails_the_run_within_two_deadlines_zmq) {
  ru_fault_t f = {.name = "zmq stopped async worker", .tag = "psrun", .config_name = "ps-test",
                  .engine = "{engine: ps, mode: async, servers: 1, transport: zmq, epochs: 1000}",
                  .workers = 3, .nranks = 4, .delay_rank = 3, .delay_ms = 100,
                  .watch_rank = 3, .victim = 2, .sig = SIGSTOP,
                  .deadline_s = DEADLINE_S, .gone_each_s = 3};
  ru_fault_case(&f);
}

/* async, as processes: a worker killed (SIGKILL) mid-run.  The engine
 * declares that worker rank tolerable to lose (tolerates_exit), the
 * servers stop counting it after one deadline, and the run ends ok with
 * the death recorded (ps.dead_worker naming the rank).  The target
 * (100000 steps) is out of reach and the time budget, 8 s from the start
 * barrier, outlasts the 4 s deadline, so the death is found while the
 * others still train, and the servers end the run by the budget. */
TEST(async_worker_killed_the_run_goes_on_zmq) {
  const char *d = ru_scratch("psrun");
  CHECK(d);
  char cfg[128], db[128];
  snprintf(cfg, sizeof cfg, "%s/async-kill.yaml", d);
  snprintf(db, sizeof db, "%s/async-kill.db", d);
  /* 1000 epochs: the target is out of reach, the budget ends the run */
  FILE *f = fopen(cfg, "w");
  CHECK(f);
  fprintf(f,
          "name: ps-test\n"
          "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16, lr: 0.1,\n"
          "           momentum: 0.9, epochs: 1000, eval_every: 1000000, seed: 3}\n"
          "workers: 3\ndeadline: %g\ndelay_rank: 3\ndelay_ms: 20\n"
          "engines:\n  - {engine: ps, mode: async, servers: 1, transport: zmq, time_budget: 8}\n",
          DEADLINE_S);
  CHECK(fclose(f) == 0);
  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  CHECK(sg > 0);
  int st = 0, w = ru_db_wait(db, "SELECT COUNT(*) FROM steps WHERE rank = 2", 5, 60, sg, &st);
  if (w == -1) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(w == 0, "training did not start within 60 s (sgdlab %s)",
            w == -2 ? "exited" : "still running");
  pid_t v = ru_find_rank(sg, 2);
  if (v <= 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(v > 0, "worker rank 2 not found");
  CHECK_EQ_INT(kill(v, SIGKILL), 0);
  int exited = ru_wait_exit(sg, 60, &st);
  if (!exited) {
    kill(sg, SIGKILL);
    waitpid(sg, &st, 0);
  }
  CHECK_MSG(exited, "sgdlab still running 60 s after the kill");
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d, expected 0", st);
  char *status = ru_db_text(db, "SELECT status FROM runs ORDER BY id DESC LIMIT 1");
  char *dead = ru_db_text(db, "SELECT value FROM run_info WHERE key = 'ps.dead_worker'");
  char *stop = ru_db_text(db, "SELECT value FROM run_info WHERE key = 'ps.stop'");
  fprintf(stderr, "  run %s; dead: %s; stop: %s\n", status ? status : "?", dead ? dead : "-",
          stop ? stop : "-");
  int ok = status && !strcmp(status, "ok");
  int named = dead && strstr(dead, "worker rank 2");
  int budget = stop && strstr(stop, "time budget spent");
  free(status);
  free(dead);
  free(stop);
  CHECK_MSG(ok, "run not ok");
  CHECK_MSG(named, "no ps.dead_worker naming worker rank 2");
  CHECK_MSG(budget, "the servers did not stop the run by its time budget");
}

TEST(topk_push_converges_on_the_quickstart_workload) {
  double acc[2], bytes[2];
  /* the workers' pushes (rank 0 is the server, whose replies stay float32) */
  CHECK_EQ_INT(ru_none_vs_topk("pstopk", "{engine: ps, mode: sync, compress: none}",
                               "{engine: ps, mode: sync, compress: topk, topk: 0.01}", 1, acc,
                               bytes),
               0);
  fprintf(stderr, "  accuracy none %.4f topk %.4f, worker bytes topk/none %.4f\n", acc[0],
          acc[1], bytes[1] / bytes[0]);
  CHECK_MSG(bytes[0] > 0 && bytes[1] > 0 && bytes[1] / bytes[0] < 0.05,
            "topk sent %.3f of none's bytes", bytes[1] / bytes[0]);
  CHECK_MSG(acc[1] >= 0.7 && acc[1] >= acc[0] - TOPK_ACC_GAP,
            "topk accuracy %.4f against none's %.4f", acc[1], acc[0]);
}

TEST(compress_with_sparse_is_refused_before_launch) {
  const char *dir = ru_scratch("pscompbad");
  CHECK(dir);
  char cfg[128], db[128], *out = NULL;
  snprintf(cfg, sizeof cfg, "%s/bad.yaml", dir);
  snprintf(db, sizeof db, "%s/bad.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, "name: ps-bad\n"
                                  "workload: {dataset: fashion-mnist, model: mlp, max_steps: 5}\n"
                                  "workers: 2\n"
                                  "engines:\n"
                                  "  - {engine: ps, sparse: true, compress: fp16}\n"), 0);
  int rc = ru_sgdlab_in(dir, &out, "run", cfg, "--db", db, NULL);
  fprintf(stderr, "  exit %d: %s", rc, out ? out : "(nothing)\n");
  CHECK_EQ_INT(rc, 2);
  CHECK_STR_CONTAINS(out, "bad.yaml:5:");
  CHECK_STR_CONTAINS(out, "compress: fp16");
  CHECK_STR_CONTAINS(out, "sparse: true");
  CHECK_MSG(access(db, F_OK) != 0, "a database was made for a refused experiment");
  free(out);
}
