/* test_mapreduce_run.c - the mapreduce engine as real processes through
 * `sgdlab run`: driver + executors over ZeroMQ (local launcher) and MPI
 * (mpirun), on real Fashion-MNIST, results in a real SQLite file.
 *
 *  - equivalence: after 100 steps the driver's final parameters
 *    (dump_params) are within a relative L2 distance of 1e-4 of `local`'s
 *    with batch N*b, for flat and tree on both transports (the planted
 *    double count that must fail this bound is in test_mapreduce_train);
 *  - faults: an executor, then the driver, killed (SIGKILL) in the middle
 *    of training: `sgdlab run` exits 1 within two deadlines, the run is
 *    `failed` with an error naming the killed rank, and none of the run's
 *    processes is left.
 */
#include "test.h"

#include <signal.h>
#include <unistd.h>

#include "err.h"
#include "run_util.h"

#define RTOL 1e-4
#define DEADLINE_S 5.0

/* local once, then each mapreduce variant against it. */
TEST(processes_match_local_on_both_transports) {
  static const char *const variants[][2] = {
      {"{engine: mapreduce, transport: zmq}", "zmq flat"},
      {"{engine: mapreduce, transport: zmq, broadcast: tree, aggregate: tree}", "zmq tree"},
      {"{engine: mapreduce, transport: mpi}", "mpi flat"},
      {"{engine: mapreduce, transport: mpi, broadcast: tree, aggregate: tree, partitions: 5}", "mpi tree P=5 (48 = 10+10+10+9+9)"},
  };
  ru_equivalence_case("mrrun", "mr-test", 3, variants, sizeof variants / sizeof *variants, RTOL);
}

/* ---- faults ------------------------------------------------------------ */

/* A long run (executor rank 2 is slowed so each step has a window where it
 * holds a task); once rank 2 has recorded 5 steps, `sig` goes to rank
 * `victim`.  SIGKILL: the harness sees the death.  SIGSTOP: a silent peer
 * nobody can see die; only the engine's deadlines can find it, and the
 * message must name it.  The run's error must name the victim (under
 * mpirun too: the harness reads it from mpirun's notice).  Every rank
 * process must be gone within two deadlines of the signal. */
static void kill_case(const char *transport, int victim, int sig, const char *name) {
  char engine[128];
  snprintf(engine, sizeof engine, "{engine: mapreduce, transport: %s}", transport);
  ru_fault_t f = {.name = name, .tag = "mrrun", .config_name = "mr-test", .engine = engine,
                  .workers = 3, .nranks = 4, .delay_rank = 2, .delay_ms = 100,
                  .watch_rank = 2, .victim = victim, .sig = sig,
                  .deadline_s = DEADLINE_S, .gone_after_signal_s = 2 * DEADLINE_S};
  ru_fault_case(&f);
}

TEST(executor_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 2, SIGKILL, "zmq executor"); }
TEST(driver_killed_fails_the_run_naming_it_zmq) { kill_case("zmq", 0, SIGKILL, "zmq driver"); }
TEST(silent_executor_is_named_by_the_driver_zmq) {
  kill_case("zmq", 2, SIGSTOP, "zmq stopped executor");
}
TEST(silent_driver_is_named_by_the_executors_zmq) {
  kill_case("zmq", 0, SIGSTOP, "zmq stopped driver");
}
/* Under mpirun, Open MPI aborts the whole job when one process dies,
 * before any rank can report; the harness names the rank from mpirun's
 * notice ("process rank 1 ... exited on signal 9"). */
TEST(executor_killed_fails_the_run_naming_it_mpi) { kill_case("mpi", 1, SIGKILL, "mpi executor"); }
