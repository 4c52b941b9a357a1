/* Every engine runs with a single worker, over both transports: the
 * degenerate case (an allreduce of one rank, a server with one client, a
 * driver with one executor) must be a no-op exchange, not a crash, and
 * every engine must then train exactly like `local`. */
#include <stdio.h>

#include "run_util.h"
#include "test.h"

TEST(every_engine_with_one_worker) {
  const char *dir = ru_scratch("one");
  CHECK(dir != NULL);
  char cfg[512], db[512];
  snprintf(cfg, sizeof cfg, "%s/one.yaml", dir);
  snprintf(db, sizeof db, "%s/one.db", dir);
  CHECK(ru_write_file(cfg,
                      "name: one\n"
                      "workers: 1\n"
                      "deadline: 20\n"
                      "workload: {max_steps: 20, hidden: [16], batch: 32, eval_every: 20}\n"
                      "engines:\n"
                      "  - local\n"
                      "  - {engine: allreduce, algorithm: ring, transport: zmq}\n"
                      "  - {engine: allreduce, algorithm: rhd, transport: zmq}\n"
                      "  - {engine: allreduce, algorithm: ring, transport: mpi}\n"
                      "  - {engine: allreduce, algorithm: native, transport: mpi}\n"
                      "  - {engine: ps, mode: sync}\n"
                      "  - {engine: mapreduce}\n") == 0);
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 7);
  /* one worker, same seed, same batch: every engine's final accuracy is
   * local's (synchronous engines with N = 1 are local). */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(DISTINCT e.test_acc) FROM evals e "
                             "WHERE e.step = 20"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM evals WHERE step = 20"), 7);
}
