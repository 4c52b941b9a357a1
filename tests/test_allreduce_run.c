/* test_allreduce_run.c - the allreduce engine as real processes.
 *
 *  - exactness as processes: `sgdlab bench allreduce` (mpirun + MPI for
 *    ring, rhd and native; forked ranks + ZeroMQ ipc for ring and rhd),
 *    N = 3, sizes 4 B .. 1 MiB: counts 1 (< N), 2 (N-1), 4 (N+1), ..
 *    2^18, and the odd counts 7 and 1M+3; every row of the `bench` table must say 0 wrong elements (the
 *    check itself is the integer-valued one of bench_engine.c);
 *  - the same with SG_ALLREDUCE_PLANT_BUG=1 in the ranks' environment: the
 *    ring rows MUST report wrong elements (the check can fail);
 *  - equivalence: `sgdlab run` trains allreduce ring/rhd (zmq), ring/rhd/
 *    native (mpi) with N = 4 workers of batch b = 16 for 100 steps, and
 *    `local` with batch 4b; the final parameters (dump_params) must agree
 *    within a relative L2 distance of 1e-4.  Why that bound: the engines
 *    perform the same updates, differing only in float summation order
 *    (a worker's BLAS sums 16 samples, `local` 64; the allreduce adds four
 *    partial sums in ring or tree order), ~1e-7 relative per step, which
 *    100 steps of momentum SGD amplify to ~1e-6; a wrong reduction (a
 *    missing or doubled worker) moves the parameters by ~1e-2.
 */
#include "test.h"

#include <unistd.h>

#include "run_util.h"

#define RTOL 1e-4

static int bench(const char *db, const char *transport, const char *impl, const char *sizes) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "'%s' bench allreduce --np 3 --transport %s --impl %s --sizes %s --iters 1 "
           "--warmup 0 --db '%s' >&2",
           ru_sgdlab(), transport, impl, sizes, db);
  return ru_sh(cmd);
}

TEST(exact_as_processes) {
  const char *dir = ru_scratch("arrun");
  CHECK(dir);
  char db[128];
  snprintf(db, sizeof db, "%s/exact.db", dir);
  CHECK_EQ_INT(bench(db, "mpi", "ring,rhd,native", "4:1M"), 0);
  CHECK_EQ_INT(bench(db, "zmq", "ring,rhd", "4:1M"), 0);
  /* odd counts: 7 and 1M+3 floats */
  CHECK_EQ_INT(bench(db, "mpi", "ring,rhd,native", "28:28"), 0);
  CHECK_EQ_INT(bench(db, "zmq", "ring,rhd", "28:28"), 0);
  CHECK_EQ_INT(bench(db, "mpi", "ring,rhd,native", "4194316:4194316"), 0);
  CHECK_EQ_INT(bench(db, "zmq", "ring,rhd", "4194316:4194316"), 0);
  /* 19 sizes (2^2 .. 2^20 bytes) + 2 odd ones, x 5 (impl, transport) pairs */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench"), 21 * 5);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE np = 3"), 21 * 5);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE bytes = 4 * 1048579"), 5);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE wrong != 0"), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE NOT (busbw > 0)"), 0);
}

TEST(planted_bug_caught_as_processes) {
  const char *dir = ru_scratch("arrun");
  CHECK(dir);
  char db[128];
  snprintf(db, sizeof db, "%s/plant.db", dir);
  setenv("SG_ALLREDUCE_PLANT_BUG", "1", 1);
  int mpi = bench(db, "mpi", "ring", "64:64K");
  int zmq = bench(db, "zmq", "ring", "64:64K");
  unsetenv("SG_ALLREDUCE_PLANT_BUG");
  CHECK_EQ_INT(mpi, 0); /* the runs complete; the check reports */
  CHECK_EQ_INT(zmq, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE transport = 'mpi'"), 11);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE transport = 'zmq'"), 11);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE wrong = 0"), 0);
}

TEST(training_matches_local) {
  const char *dir = ru_scratch("arrun");
  CHECK(dir);
  static const struct {
    const char *name, *entry;
  } runs[] = {
      {"local", "engine: local"},
      {"ring-zmq", "engine: allreduce, algorithm: ring, transport: zmq"},
      {"rhd-zmq", "engine: allreduce, algorithm: rhd, transport: zmq"},
      {"ring-mpi", "engine: allreduce, algorithm: ring, segment: 4K, transport: mpi"},
      {"rhd-mpi", "engine: allreduce, algorithm: rhd, transport: mpi"},
      {"native-mpi", "engine: allreduce, algorithm: native, transport: mpi"},
  };
  const int nruns = (int)(sizeof runs / sizeof *runs);
  char cfg[128], db[128], cmd[1024];
  snprintf(cfg, sizeof cfg, "%s/equiv.yaml", dir);
  snprintf(db, sizeof db, "%s/equiv.db", dir);
  FILE *f = fopen(cfg, "w");
  CHECK(f);
  fprintf(f,
          "name: allreduce-equivalence\n"
          "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
          "           lr: 0.1, momentum: 0.9, max_steps: 100, eval_every: 1000000, seed: 5}\n"
          "workers: 4\n"
          "engines:\n");
  for (int i = 0; i < nruns; i++)
    fprintf(f, "  - {%s, dump_params: '%s/%s.f32'}\n", runs[i].entry, dir, runs[i].name);
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' -q >&2", ru_sgdlab(), cfg, db);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), nruns);
  /* Every allreduce rank reported 100 steps with bytes moved. */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                             "WHERE r.engine = 'allreduce'"),
               (nruns - 1) * 4 * 100);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                             "WHERE r.engine = 'allreduce' AND r.transport = 'zmq' "
                             "AND s.bytes_sent = 0"),
               0);
  char a[160], b[160];
  snprintf(b, sizeof b, "%s/local.f32", dir);
  for (int i = 1; i < nruns; i++) {
    snprintf(a, sizeof a, "%s/%s.f32", dir, runs[i].name);
    long n;
    double d = ru_rel_distance(a, b, &n);
    fprintf(stderr, "%s vs local: relative L2 distance %.3g over %ld parameters\n",
            runs[i].name, d, n);
    CHECK_MSG(d >= 0 && d <= RTOL, "%s: distance %g (tolerance %g)", runs[i].name, d, RTOL);
  }
}
