/* test_allreduce_run.c - the allreduce engine as real processes.
 *
 *  - exactness as processes, the whole matrix: `sgdlab bench allreduce
 *    --counts` (the check itself is the integer-valued one of
 *    core/bench_method.h: small integers in floats, so every summation
 *    order gives the same bits) over workers N = 1, 2, 3, 4, 5, 8, per
 *    transport -- mpirun + MPI running ring, rhd and native, forked ranks
 *    + ZeroMQ ipc running ring and rhd -- with the element counts 0 .. 9
 *    (so 0, 1, N-1, N and N+1 for every N: empty, fewer elements than
 *    ranks, uneven chunks), the odd 1001 and 1M+3.  30 launches, 360
 *    rows; every expected row must exist and say 0 wrong elements (a run
 *    that writes nothing cannot pass);
 *  - the planted bug: `sgdlab bench allreduce --counts` with
 *    SG_ALLREDUCE_PLANT_BUG=1 in the ranks' environment, ring, N = 4 over
 *    mpi and N = 5 over zmq: every row of count >= 2 MUST report wrong
 *    elements (the check can fail; counts 0 and 1 have no chunk the bug
 *    can misplace);
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

/* The matrix: workers, implementations per transport, element counts. */
static const int NS[] = {1, 2, 3, 4, 5, 8};
#define NN ((int)(sizeof NS / sizeof *NS))
#define COUNTS "0,1,2,3,4,5,6,7,8,9,1001,1048579"
#define NCOUNTS 12
static const struct {
  const char *transport, *impls[3];
  int nimpl;
} TRANSPORTS[] = {
    {"mpi", {"ring", "rhd", "native"}, 3},
    {"zmq", {"ring", "rhd", NULL}, 2},
};

TEST(exact_as_processes) {
  const char *dir = ru_scratch("arrun");
  CHECK(dir);
  char db[128], sql[512], cmd[1024];
  snprintf(db, sizeof db, "%s/exact.db", dir);
  /* iters 1, warmup 0: only the check matters here, not the timing. */
  for (int i = 0; i < NN; i++)
    for (int t = 0; t < 2; t++) {
      int len = snprintf(cmd, sizeof cmd, "'%s' bench allreduce -q --np %d --transport %s --impl ",
                         ru_sgdlab(), NS[i], TRANSPORTS[t].transport);
      for (int k = 0; k < TRANSPORTS[t].nimpl; k++)
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, "%s%s", k ? "," : "",
                        TRANSPORTS[t].impls[k]);
      snprintf(cmd + len, sizeof cmd - (size_t)len,
               " --counts " COUNTS " --iters 1 --warmup 0 --db '%s' >&2", db);
      CHECK_EQ_INT(ru_sh(cmd), 0);
    }
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 5 * NN);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE launcher = 'mpirun'"), 3 * NN);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE launcher = 'local'"), 2 * NN);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench"), NN * (3 + 2) * NCOUNTS);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE wrong != 0"), 0);
  /* Every (N, transport, impl) has each required count exactly once,
   * checked with 0 wrong: 0, 1, N-1, N+1, 1001, 1M+3. */
  for (int i = 0; i < NN; i++) {
    int n = NS[i];
    long long want[] = {0, 1, n - 1, n + 1, 1001, 1048579};
    for (int t = 0; t < 2; t++)
      for (int k = 0; k < TRANSPORTS[t].nimpl; k++)
        for (int c = 0; c < 6; c++) {
          snprintf(sql, sizeof sql,
                   "SELECT count(*) FROM bench WHERE np = %d AND transport = '%s' AND impl = '%s' "
                   "AND bytes = 4 * %lld AND wrong = 0 AND iters = 1",
                   n, TRANSPORTS[t].transport, TRANSPORTS[t].impls[k], want[c]);
          CHECK_MSG(ru_db_int(db, sql) == 1, "N = %d, %s over %s, count %lld: no exact row", n,
                    TRANSPORTS[t].impls[k], TRANSPORTS[t].transport, want[c]);
        }
  }
  /* Timed rows with data between ranks have a bandwidth. */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE bytes > 0 AND np > 1 "
                             "AND NOT (busbw > 0)"),
               0);
}

/* `sgdlab bench allreduce --counts` of ring with the planted bug. */
static int bench_planted(const char *db, const char *transport, int n, const char *counts) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "SG_ALLREDUCE_PLANT_BUG=1 '%s' bench allreduce --np %d --transport %s --impl ring "
           "--counts %s --iters 1 --warmup 0 --db '%s' >&2",
           ru_sgdlab(), n, transport, counts, db);
  return ru_sh(cmd);
}

TEST(planted_bug_caught_as_processes) {
  const char *dir = ru_scratch("arrun");
  CHECK(dir);
  char db[128];
  snprintf(db, sizeof db, "%s/plant.db", dir);
  /* 0, 1, N-1, N+1, 1001, 1M+3 for N = 4 (mpi) and N = 5 (zmq) */
  CHECK_EQ_INT(bench_planted(db, "mpi", 4, "0,1,3,5,1001,1048579"), 0); /* runs complete */
  CHECK_EQ_INT(bench_planted(db, "zmq", 5, "0,1,4,6,1001,1048579"), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE transport = 'mpi' AND np = 4"), 6);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE transport = 'zmq' AND np = 5"), 6);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM bench WHERE bytes >= 8 AND wrong > 0"), 8);
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
