/* test_gossip_run.c - the gossip engine as real processes through
 * `sgdlab run` on Fashion-MNIST.
 *
 *  - One worker: no partner ever, so gossip is `local` bit for bit on
 *    both transports.
 *  - Four workers on the quickstart workload (MLP [128], batch 64, lr 0.1,
 *    momentum 0.9), one epoch: every topology on both transports reaches
 *    ACC_MIN.  The pairing schedule fixes every exchange, so the result
 *    does not depend on timing: ring over zmq and over mpi end with the
 *    same accuracy.  Each step record of a gossiping rank carries exactly
 *    one model (4 * nparams bytes) sent.  With --plant-bug gossip-no-average the
 *    ranks still exchange but do not average (only the final mean
 *    remains): measured 0.65 against 0.81-0.83, and the same ACC_MIN
 *    check must then fail.
 *  - A dead peer: a worker killed (zmq) or stopped (mpi, zmq) mid-run
 *    fails the run within two deadlines with an error that names it; a
 *    stopped one is found by its partner's receive timing out.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "run_util.h"
#include "test.h"

#define ACC_MIN 0.75
#define DEADLINE_S 3.0
#define NPARAMS 101770 /* mlp 784-128-10 */

TEST(one_worker_is_local_on_both_transports) {
  static const char *const variants[][2] = {
      {"{engine: gossip, topology: ring, transport: zmq}", "zmq ring"},
      {"{engine: gossip, topology: random, transport: mpi}", "mpi random"},
  };
  ru_equivalence_case("gossip1", "gossip-test", 1, variants, sizeof variants / sizeof *variants,
                      0.0);
}

static int write_quick(const char *cfg, const char *engines) {
  char text[1024];
  snprintf(text, sizeof text,
           "name: gossip-quick\n"
           "workers: 4\n"
           "deadline: 30\n"
           "workload: {dataset: fashion-mnist, model: mlp, hidden: [128], batch: 64,\n"
           "           lr: 0.1, momentum: 0.9, epochs: 1, seed: 1, eval_every: 0}\n"
           "engines:\n%s",
           engines);
  return ru_write_file(cfg, text);
}

TEST(four_workers_converge_and_broken_averaging_does_not) {
  const char *d = ru_scratch("gossip4");
  CHECK(d);
  char cfg[128], db[128], bad[128], sql[256];
  snprintf(cfg, sizeof cfg, "%s/quick.yaml", d);
  snprintf(db, sizeof db, "%s/quick.db", d);
  snprintf(bad, sizeof bad, "%s/bad.db", d);
  CHECK_OK(write_quick(cfg, "  - {engine: gossip, topology: ring, transport: zmq}\n"
                            "  - {engine: gossip, topology: ring, transport: mpi}\n"
                            "  - {engine: gossip, topology: random, transport: zmq}\n"
                            "  - {engine: gossip, topology: complete, transport: mpi}\n"));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  for (int id = 1; id <= 4; id++) {
    double acc = ru_final_acc(db, id);
    fprintf(stderr, "  run %d: final test accuracy %.4f\n", id, acc);
    CHECK_MSG(acc >= ACC_MIN, "run %d: accuracy %.4f < %.2f", id, acc, ACC_MIN);
  }
  CHECK(ru_final_acc(db, 1) == ru_final_acc(db, 2));
  /* every step but the last (the final mean) moves exactly one model */
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM steps WHERE run_id = 1 AND step < 233 AND "
           "(bytes_sent != %d OR bytes_recv != %d)", 4 * NPARAMS, 4 * NPARAMS);
  CHECK_EQ_INT(ru_db_int(db, sql), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id = 1"), 4 * 234);

  /* the planted bug: the check above must catch it, on both transports */
  CHECK_OK(write_quick(cfg, "  - {engine: gossip, topology: ring, transport: zmq}\n"
                            "  - {engine: gossip, topology: ring, transport: mpi}\n"));
  int rc = ru_sgdlab_run_args(cfg, bad, "--plant-bug", "gossip-no-average");
  CHECK_EQ_INT(rc, 0);
  for (int id = 1; id <= 2; id++) {
    double acc = ru_final_acc(bad, id);
    fprintf(stderr, "  planted bug, run %d: final test accuracy %.4f\n", id, acc);
    CHECK_MSG(acc >= 0 && acc < ACC_MIN, "planted bug not caught: accuracy %.4f", acc);
  }
}

static void fault(const char *name, const char *engine, int victim, int sig) {
  ru_fault_t f = {.name = name, .tag = "gossipf", .config_name = "gossip-test",
                  .engine = engine, .workers = 3, .nranks = 3, .delay_rank = 2,
                  .delay_ms = 100, .watch_rank = 2, .victim = victim, .sig = sig,
                  .deadline_s = DEADLINE_S, .gone_each_s = 3};
  ru_fault_case(&f);
}

TEST(killed_peer_fails_the_run_naming_it_zmq) {
  fault("zmq killed gossip worker", "{engine: gossip, topology: ring, transport: zmq}", 1,
        SIGKILL);
}

TEST(stopped_peer_fails_the_run_naming_it_mpi) {
  fault("mpi stopped gossip worker", "{engine: gossip, topology: complete, transport: mpi}", 1,
        SIGSTOP);
}

/* Stopped, not killed: the harness sees no death, so the partner's own
 * receive must give up after one deadline and name the rank. */
TEST(stopped_peer_fails_the_run_naming_it_zmq) {
  fault("zmq stopped gossip worker", "{engine: gossip, topology: random, transport: zmq}", 0,
        SIGSTOP);
}
