/* test_simulate_run.c - the engines' own rank code under SimGrid SMPI
 * (sgdlab-rank-smpi, `simulate:`; docs/simulate.md), real smpirun runs.
 *
 *  - equivalence: allreduce ring/rhd/native, ps, mapreduce and gossip over
 *    transport mpi, each simulated with N = 4 workers of batch 16 for 30
 *    steps (executed compute), against `local` with batch 64 (gossip,
 *    which averages with neighbours only, against the same gossip run by
 *    mpirun): final parameters within a relative L2 distance of 1e-4, the
 *    bound and reasoning of test_allreduce_run (summation order only; a
 *    missing or doubled worker moves them by ~1e-2).  Every simulated run
 *    is recorded as one: launcher smpirun, run_info simulate = smpi, its
 *    label ending in [sim], every rank's 30 steps;
 *  - simulated time: a ring and an rhd allreduce with modeled compute on
 *    a flat 1 Mbit/s platform: each step's comm_s within 5 % of the
 *    alpha-beta formula 2 (N - 1) (alpha + M / (N B)), alpha = two links'
 *    latency; and the steps' end, on the ranks' clocks, lies far beyond
 *    the run's wall time (the clocks are the simulation's: a real
 *    1 Mbit/s transfer of these steps would take as long as simulated);
 *  - ps (S = 1 and 2) with modeled compute, its messages' headers never
 *    folded across ranks, runs to the end with every step recorded, and
 *    two servers take under 0.6 of one server's time per step where the
 *    servers' links bind (2 N M / (S B): half); its payloads are folded:
 *    a run whose unfolded message buffers exceed a memory cgroup's limit
 *    ends ok in it; a sliced server's per-slice state (N x slices
 *    entries, 64 KiB or more at N = 17 in 64-B slices) is not folded: the
 *    run ends ok (it crashed by SIGSEGV when it was); nor are a sliced
 *    worker's request pointers (2 x slices, 64 KiB or more from 4,096
 *    slices) or rhd's (one per segment): the runs end ok; sparse ps,
 *    which cannot run modeled, is refused before launch (exit 2, nothing
 *    recorded); libsvm data, modeled,
 *    records no loss or accuracy (nothing is computed);
 *  - simulate.eager reaches SMPI: sync ps with shards below 64 KiB, once
 *    with eager: simgrid (SimGrid's thresholds: a message moves once a
 *    receive matches it, so both servers pull the same worker's push at
 *    once and share its link) and once with the default (the emulated
 *    cluster's eager limit: the pushes move when sent): communication per
 *    step within 10 % of 2 N K / (S B) by default, at least 1.15 times
 *    longer with simgrid, and run_info records each value;
 *  - sliced ps with SimGrid's thresholds: communication per step within
 *    10 % of T (1 + 1/C), T = N K / (S B), for S = 1 and 2, and S = 2 at
 *    most 0.6 of S = 1 (each server keeps a receive posted per worker);
 *  - the step-calibration cache reuses only a measurement taken at a load
 *    within its cores (planted lines of load 9 on 2 cores and without a
 *    load are measured again, one of load 0.5 reused), executed compute
 *    any (the speed is only its unit);
 *  - the calibration cache is used only as the user's own: a file others
 *    or its group may write, of another user, a symlink, of two links,
 *    with a line that is not one, or in a directory its group may write is
 *    passed over (the step measured) and left as it was;
 *  - the rows of one sweep share the first row's step calibration;
 *  - a slow host is not a hang: a simulation throttled to 10 % of a core
 *    (a CPU cgroup) with a watchdog bound below its wall-clock silences
 *    ends ok (its silence is counted in the simulator's CPU time; in wall
 *    time the run failed); skipped without a writable cpu controller;
 *  - the topologies SMPI builds: two-level, fat-tree and torus platforms
 *    run to the end;
 *  - refusals, one line with file:line:col and exit 2 before launch:
 *    transport zmq with simulate:, a torus that is not the hosts,
 *    a simulate.eager that is neither bytes nor simgrid.
 * Skipped (exit 77, a SKIP line) only when this build has no
 * sgdlab-rank-smpi (SimGrid's smpicc was not found at configure time).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "run_util.h"
#include "simulate.h"
#include "test.h"

#define RTOL 1e-4

/* The step calibration of this process's runs (docs/simulate.md, "What
 * `sgdlab run` does"): a cache of this test's own (XDG_CACHE_HOME in a
 * scratch directory) holding one line per workload the cases below run,
 * taken at load 0 on this machine's cores, so that no run measures the
 * step again.  Under load every modeled run measured it (a cached line
 * taken at a load above the cores is not reused): about 20 s of a 25 s
 * case at a load of 7.  The step times are this machine's measurements
 * (bench step's method, one BLAS thread); what the cases check does not
 * depend on them (communication times, records, ends ok).  The lines are
 * the harness's own: each workload below is parsed as an experiment file
 * is (sg_config_parse), and its key made and its line written by the
 * harness's cache functions (simulate.h), so the key and the format
 * cannot drift from what `sgdlab run` reads.  The cache itself is tested
 * by the calibration_* cases, each with a cache of its own.  A workload
 * missing here only costs time: the run measures, and its run_info says
 * so (simulate.calibration). */
static char sim_cache_dir[64];
static void sim_cache_cleanup(void) { ru_rm_rf(sim_cache_dir); }
static void sim_calibration_cache(void) {
  static int done;
  static const struct {
    const char *workload;
    double step_s, speed;
  } lines[] = {
      {"{dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16}", 0.000179, 1.58e10},
      {"{dataset: fashion-mnist, model: mlp, hidden: [128], batch: 16}", 0.000111, 7.51e10},
      {"{dataset: fashion-mnist, model: mlp, hidden: [256], batch: 16}", 0.000229, 7.29e10},
      {"{dataset: synthetic, features: 784, model: softmax, batch: 16}", 0.000125, 7.04e9},
      {"{dataset: synthetic, features: 784, model: mlp, hidden: [100], batch: 16}", 0.000110,
       5.75e10},
      {"{dataset: synthetic, features: 784, model: mlp, hidden: [200], batch: 16}", 0.000179,
       7.37e10},
      {"{dataset: synthetic, features: 784, model: mlp, hidden: [8192], batch: 16}", 0.00952,
       5.20e10},
      {"{dataset: clicks, model: embedding, hidden: [16], batch: 16}", 0.000157, 1e10},
      {"{dataset: libsvm, model: softmax, batch: 16}", 0.000125, 7.04e9},
  };
  if (done++) return;
  /* not ru_scratch's directory: the next case's replaces that one */
  if (ru_mkdtemp(sim_cache_dir, sizeof sim_cache_dir, "simcache") < 0) return;
  atexit(sim_cache_cleanup);
  char cache[300], path[4200], key[1024], text[256];
  snprintf(cache, sizeof cache, "%s/cache", sim_cache_dir);
  if (mkdir(cache, 0700) != 0) return;
  setenv("XDG_CACHE_HOME", cache, 1);
  sg_sim_cache_path(path, sizeof path);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) {
    sg_experiment_t *x = NULL;
    snprintf(text, sizeof text, "workload: %s\nengines: [local]\n", lines[i].workload);
    if (sg_config_parse(&x, "calibration.yaml", text, strlen(text), NULL, 0) < 0 || x->nruns < 1) {
      fprintf(stderr, "calibration line %zu not written: %s\n", i, sg_err_msg());
      sg_experiment_destroy(&x);
      continue;
    }
    sg_sim_cache_key(x->runs[0].opts, key, sizeof key);
    sg_sim_cache_put(path, key, lines[i].step_s, lines[i].speed, 0, cores > 0 ? (int)cores : 1);
    sg_experiment_destroy(&x);
  }
}

static void skip_without_simgrid(void) {
  char p[1024];
  const char *bin = getenv("SGDLAB_BIN_DIR");
  snprintf(p, sizeof p, "%s/harness/sgdlab-rank-smpi", bin ? bin : ".");
  if (access(p, X_OK) == 0) {
    sim_calibration_cache();
    return;
  }
  printf("SKIP: no %s (SimGrid's smpicc not found when configured; libsimgrid-dev)\n", p);
  exit(77);
}

static const char WORKLOAD[] =
    "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
    "           lr: 0.1, momentum: 0.9, max_steps: 30, eval_every: 1000000, seed: 5}\n"
    "workers: 4\n";

/* Write `text` as the experiment file of a fresh scratch directory
 * (tag) and run sgdlab on it; its database's path into db.  sgdlab's exit
 * code, or -1 when the file could not be written. */
static int sim_experiment(const char *tag, const char *text, char *db, size_t cap) {
  const char *dir = ru_scratch(tag);
  char cfg[256];
  if (!dir) return -1;
  snprintf(cfg, sizeof cfg, "%s/%s.yaml", dir, tag);
  snprintf(db, cap, "%s/%s.db", dir, tag);
  if (ru_write_file(cfg, text) != 0) return -1;
  return ru_sgdlab_run(cfg, db);
}

TEST(engines_simulated_match_local) {
  skip_without_simgrid();
  const char *dir = ru_scratch("simrun");
  CHECK(dir);
  static const struct {
    const char *name, *entry, *ref;
  } runs[] = {
      {"local", "engine: local", NULL},
      {"ring", "engine: allreduce, algorithm: ring, transport: mpi, simulate: {}", "local"},
      {"rhd", "engine: allreduce, algorithm: rhd, transport: mpi, simulate: {}", "local"},
      {"native", "engine: allreduce, algorithm: native, transport: mpi, simulate: {}", "local"},
      {"ps", "engine: ps, transport: mpi, simulate: {}", "local"},
      {"mapreduce", "engine: mapreduce, transport: mpi, simulate: {}", "local"},
      {"gossip-mpirun", "engine: gossip, transport: mpi", NULL},
      {"gossip", "engine: gossip, transport: mpi, simulate: {}", "gossip-mpirun"},
  };
  const int n = (int)(sizeof runs / sizeof *runs);
  char cfg[256], db[256], a[320], b[320];
  snprintf(cfg, sizeof cfg, "%s/equiv.yaml", dir);
  snprintf(db, sizeof db, "%s/equiv.db", dir);
  FILE *f = fopen(cfg, "w");
  CHECK(f);
  fprintf(f, "name: simulate-equivalence\n%sengines:\n", WORKLOAD);
  for (int i = 0; i < n; i++)
    fprintf(f, "  - {%s, dump_params: '%s/%s.f32'}\n", runs[i].entry, dir, runs[i].name);
  fclose(f);
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), n);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE launcher = 'smpirun'"), 6);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate' "
                             "AND value = 'smpi'"), 6);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'label' "
                             "AND value LIKE '% [sim]'"), 6);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps s JOIN runs r ON r.id = s.run_id "
                             "WHERE r.launcher = 'smpirun' AND r.engine = 'allreduce'"), 3 * 4 * 30);
  for (int i = 0; i < n; i++) {
    if (!runs[i].ref) continue;
    snprintf(a, sizeof a, "%s/%s.f32", dir, runs[i].name);
    snprintf(b, sizeof b, "%s/%s.f32", dir, runs[i].ref);
    long cnt;
    double d = ru_rel_distance(a, b, &cnt);
    fprintf(stderr, "%s [sim] vs %s: relative L2 distance %.3g over %ld parameters\n",
            runs[i].name, runs[i].ref, d, cnt);
    CHECK_MSG(d >= 0 && d <= RTOL, "%s: distance %g (tolerance %g)", runs[i].name, d, RTOL);
  }
}

TEST(simulated_time_follows_alpha_beta) {
  skip_without_simgrid();
  char db[256], sql[512];
  CHECK_EQ_INT(sim_experiment("simab",
                              "name: simulate-alpha-beta\n"
                              "workload: {dataset: fashion-mnist, model: mlp, hidden: [256], batch: 16,\n"
                              "           max_steps: 4, eval_every: 1000000}\n"
                              "workers: 4\n"
                              "simulate: {link: 1mbit, latency: 10us, compute: modeled}\n"
                              "engines:\n"
                              "  - {engine: allreduce, algorithm: ring, transport: mpi}\n"
                              "  - {engine: allreduce, algorithm: rhd, transport: mpi}\n",
                              db, sizeof db),
               0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 2);
  /* M = 203530 float32 parameters of mlp 784-256-10, N = 4, B = 1 Mbit/s */
  const double N = 4, M = 203530 * 4.0, B = 1e6 / 8, alpha = 2 * 10e-6;
  const double want = 2 * (N - 1) * (alpha + M / (N * B));
  for (int id = 1; id <= 2; id++) {
    snprintf(sql, sizeof sql, "SELECT 1e6 * AVG(comm_s) FROM steps WHERE run_id = %d", id);
    double got = (double)ru_db_int(db, sql) / 1e6;
    fprintf(stderr, "run %d: comm %.4f s per step, alpha-beta %.4f s (%+.2f %%)\n", id, got, want,
            100 * (got / want - 1));
    CHECK_MSG(fabs(got / want - 1) <= 0.05, "run %d: %.4f s vs %.4f s", id, got, want);
    /* the steps' end on the ranks' clocks against the run's wall time */
    snprintf(sql, sizeof sql, "SELECT 1000 * MAX(t_start + compute_s + comm_s + wait_s) "
             "FROM steps WHERE run_id = %d", id);
    double end = (double)ru_db_int(db, sql) / 1000;
    snprintf(sql, sizeof sql, "SELECT 1000 * wall_s FROM runs WHERE id = %d", id);
    double wall = (double)ru_db_int(db, sql) / 1000;
    fprintf(stderr, "run %d: last step ends at %.2f s simulated, the run took %.2f s\n", id, end,
            wall);
    CHECK_MSG(end >= 4 * 0.95 * want && end > 2 * wall, "run %d: steps end at %.2f s, wall %.2f s",
              id, end, wall);
  }
}

TEST(topologies_smpi_builds_run) {
  skip_without_simgrid();
  char text[2048], db[256];
  snprintf(text, sizeof text, "name: simulate-topologies\n%s"
           "engines:\n"
           "  - {engine: allreduce, algorithm: rhd, transport: mpi,\n"
           "     simulate: {topology: two-level, racks: 2, oversubscription: 2, compute: modeled}}\n"
           "  - {engine: allreduce, algorithm: rhd, transport: mpi,\n"
           "     simulate: {topology: fat-tree, fat_tree: '2;2,2;1,2;1,2', compute: modeled}}\n"
           "  - {engine: allreduce, algorithm: rhd, transport: mpi,\n"
           "     simulate: {topology: torus, torus: '2,2', compute: modeled}}\n", WORKLOAD);
  CHECK_EQ_INT(sim_experiment("simtopo", text, db, sizeof db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 3);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.topology'"), 3);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), 3 * 4 * 30);
}

/* ps with modeled compute: SMPI folds every allocation of 64 KiB or more
 * across the simulated ranks; the ps messages' headers (a push of mlp
 * 784-256-10 is 814 KB) must not be among them, or a server parses
 * another rank's bytes (the run failed with "bad magic 0" when the whole
 * buffers were folded, and fails so with the headers folded too; only the
 * payloads are, ps_modeled_folds_payloads).  S = 1 and 2, sync. */
TEST(ps_modeled_runs) {
  skip_without_simgrid();
  char db[256], err[512] = "";
  /* and every rank frees its folded buffers with sg_fold_free (the rank
   * program's check, rank_main.c rank_train): the ps buffers freed with
   * free() left 2 and 4 registered on a worker (S = 1, 2) and 6 on a
   * server (its parameters, scratch and N = 4 slots) */
  setenv("SGDLAB_TEST_FOLD_RELEASED", "1", 1);
  int rc = sim_experiment("simpsmod",
                              "name: simulate-ps-modeled\n"
                              "workload: {dataset: fashion-mnist, model: mlp, hidden: [256], batch: 16,\n"
                              "           max_steps: 5, eval_every: 1000000}\n"
                              "workers: 4\n"
                              "simulate: {link: 100mbit, latency: 10us, compute: modeled}\n"
                              "engines:\n"
                              "  - {engine: ps, servers: 1, transport: mpi}\n"
                              "  - {engine: ps, servers: 2, transport: mpi}\n",
                              db, sizeof db);
  unsetenv("SGDLAB_TEST_FOLD_RELEASED");
  ru_db_text_into(db, "SELECT coalesce(max(error), '') FROM runs", err, sizeof err);
  CHECK_MSG(rc == 0, "exit %d, error '%s'", rc, err);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 2);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.compute' "
                             "AND value = 'modeled'"), 2);
  /* every process records its 5 steps: 4 workers and S servers */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), (5 + 6) * 5);
  /* A clock read costs no simulated time (smpi/wtime:0): a worker's
   * compute_s, two reads around the charged step, is the step the harness
   * measured (simulate.step_s) to 2 ns, plus 1e-6 of it for SimGrid's
   * rounding of the charged step (0.16 ns of 0.363 ms measured).  With
   * SimGrid's default 10 ns sleep in each read it came out 7.8 to 10.8 ns
   * longer (ps S = 16, N = 128), and every read was an event that solved
   * the network's sharing again. */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps s JOIN run_info i ON i.run_id = s.run_id "
                             "AND i.key = 'simulate.step_s' WHERE s.role = 'worker' "
                             "AND abs(s.compute_s - CAST(i.value AS REAL)) "
                             "< 2e-9 + 1e-6 * CAST(i.value AS REAL)"),
               4 * 5 * 2);
  /* The servers' links bind here (each carries N pushes in and N replies
   * out, 2 N M / S per step against 2 M on a worker's link), so two
   * servers take half the time of one: 2 N M / (S B) = 521 ms and 260 ms.
   * The period: the workers' mean time from step 1's start to step 4's
   * (simulated, deterministic).  When every server took the same worker
   * first, S = 2 shared that worker's link and took as long as S = 1. */
  double per[2];
  for (int id = 1; id <= 2; id++) {
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT 1e6 * AVG(b.t_start - a.t_start) / 3 FROM steps a "
             "JOIN steps b ON b.run_id = a.run_id AND b.rank = a.rank AND b.step = 4 "
             "WHERE a.run_id = %d AND a.step = 1 AND a.role = 'worker'", id);
    per[id - 1] = (double)ru_db_int(db, sql) / 1e6;
  }
  fprintf(stderr, "ps modeled: %.4f s per step with S = 1, %.4f s with S = 2 (%.2fx)\n", per[0],
          per[1], per[1] / per[0]);
  CHECK_MSG(per[0] > 0.4 && per[1] < 0.6 * per[0], "S = 1: %.4f s, S = 2: %.4f s per step", per[0],
            per[1]);
}

/* Deferred sends (core/transport_mpi.c): under compute: modeled SMPI
 * detaches only empty messages, and the transport sends each other one
 * from a staged copy and completes its request only once SMPI has copied
 * the message to its receiver.  ps sync, S = 2, N = 16 (every message of
 * a step in flight together; a server sends its replies from one buffer
 * it rewrites for each worker): the run ends ok with every rank's steps.
 * Planted (defer-early-wait): a send's request completed at its wait,
 * before its receive may have matched it; SimGrid 3.32 then frees the
 * request that the receive still reads, and the run fails. */
TEST(ps_modeled_sends_deferred) {
  skip_without_simgrid();
  char db[256], cfg[256], planted[256];
  CHECK_EQ_INT(sim_experiment("simdefer",
                              "name: simulate-ps-deferred\n"
                              "workload: {dataset: fashion-mnist, model: mlp, hidden: [256],\n"
                              "           batch: 16, max_steps: 4, eval_every: 1000000}\n"
                              "workers: 16\n"
                              "simulate: {compute: modeled}\n"
                              "engines:\n"
                              "  - {engine: ps, servers: 2, transport: mpi}\n",
                              db, sizeof db),
               0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), (16 + 2) * 4);
  /* sim_experiment's files: DIR/simdefer.yaml beside DIR/simdefer.db */
  size_t stem = strlen(db) - strlen(".db");
  snprintf(cfg, sizeof cfg, "%.*s.yaml", (int)stem, db);
  snprintf(planted, sizeof planted, "%.*s-planted.db", (int)stem, db);
  int rc = ru_sgdlab_run_args(cfg, planted, "--plant-bug", "defer-early-wait");
  int ok = ru_db_int(planted, "SELECT count(*) FROM runs WHERE status = 'ok'");
  fprintf(stderr, "planted defer-early-wait: sgdlab run exit %d, %d run(s) ok\n", rc, ok);
  CHECK_MSG(rc != 0 && ok == 0, "the planted run ended ok (exit %d)", rc);
}

/* A simulated run of `yaml` (compute: modeled) ends ok with `steps`
 * step records (every rank's). */
static void modeled_run_ends_ok(const char *tag, const char *yaml, int steps) {
  char db[256];
  CHECK_EQ_INT(sim_experiment(tag, yaml, db, sizeof db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), steps);
}

/* compute: modeled folds every malloc and calloc of 64 KiB or more, and
 * all of them share one block of memory: a sliced ps server's state of
 * N x slices 8-byte entries (each slice's reply request and push arrival
 * time) must not be folded, or the arrival times overwrite the requests
 * and the server's MPI_Wait reads a double as a request (SIGSEGV; ps S = 1
 * at 64 MB crashed so from N = 32 on: 32 x 486 x 8 B).  Sync ps, softmax
 * (7,850 parameters) in slices of 64 B (491 slices), N = 17: 17 x 491 x 8
 * = 66,776 B, over the 65,536 (N = 16 is under it and ran either way).
 * The run ends ok with every step of every rank. */
TEST(ps_modeled_slice_state_unfolded) {
  skip_without_simgrid();
  modeled_run_ends_ok("simpsstate",
                      "name: simulate-ps-slice-state\n"
                      "workers: 17\n"
                      "workload: {dataset: synthetic, features: 784, train_samples: 1024,\n"
                      "           test_samples: 64, model: softmax, batch: 16,\n"
                      "           max_steps: 2, eval_every: 1000000}\n"
                      "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
                      "engines: [{engine: ps, servers: 1, transport: mpi, slice: 64,\n"
                      "           slice_from: 0}]\n",
                      18 * 2);
}

/* simulate.eager: SMPI moves a message below it as soon as it is sent.
 * Sync ps, N = 4, S = 2, mlp 784-32-10 (25,450 parameters: shards of
 * 50,900 bytes, under 64 KiB), 100 Mbit/s.  With SimGrid's thresholds the
 * servers, each waiting in a receive, take the pushes of one worker at a
 * time, and both the same worker's first (its two pushes are sent at the
 * same moment): the two flows share that worker's link.  By default every
 * push moves at once and each server's link carries its N pushes and N
 * replies: 2 N K / (S B) = 32.6 ms per step.  Simulated times: the same on
 * every machine (the modeled compute is the same for every worker and is
 * not part of comm_s + wait_s). */
TEST(eager_setting_reaches_smpi) {
  skip_without_simgrid();
  char db[256];
  CHECK_EQ_INT(sim_experiment("simeager",
                              "name: simulate-eager\n"
                              "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
                              "           max_steps: 6, eval_every: 1000000}\n"
                              "workers: 4\n"
                              "simulate: {link: 100mbit, latency: 10us, compute: modeled}\n"
                              "engines:\n"
                              "  - {engine: ps, servers: 2, transport: mpi, simulate: {eager: simgrid}}\n"
                              "  - {engine: ps, servers: 2, transport: mpi}\n",
                              db, sizeof db),
               0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 2);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.eager' AND "
                             "((run_id = 1 AND value = 'simgrid') OR (run_id = 2 AND value = '1114112'))"), 2);
  double comm[2];
  for (int id = 1; id <= 2; id++) {
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT 1e6 * AVG(comm_s + wait_s) FROM steps WHERE run_id = %d "
             "AND role = 'worker' AND step >= 1", id);
    comm[id - 1] = (double)ru_db_int(db, sql) / 1e6;
  }
  const double N = 4, S = 2, K = 25450 * 4.0, B = 100e6 / 8, want = 2 * N * K / (S * B);
  fprintf(stderr, "ps S = 2, 51 KB shards: %.4f s per step with eager simgrid, %.4f s by default "
          "(%.2fx; 2 N K / (S B) = %.4f s)\n", comm[0], comm[1], comm[0] / comm[1], want);
  CHECK_MSG(fabs(comm[1] / want - 1) <= 0.10, "default eager: %.4f s, not within 10 %% of %.4f s",
            comm[1], want);
  CHECK_MSG(comm[0] >= 1.15 * comm[1], "eager simgrid: %.4f s, default: %.4f s: the setting did not "
            "change the simulation", comm[0], comm[1]);
}

/* Sliced ps under SimGrid's thresholds (eager: simgrid: a push's bytes
 * move only once a receive matches it).  Sync, N = 4, mlp 784-128-10
 * (101,770 parameters, K = 407,080 B), 16 KiB slices (slice_from 0: S = 1
 * is 25 slices, S = 2 two shards of 13), 1 Gbit/s, 1 us.  A server keeps a
 * receive posted per worker, so its link carries the N workers' pushes at
 * once and the replies of slice c go out while slice c + 1 comes in:
 * communication per step T (1 + 1/C), T = N K / (S B) (docs/model.md,
 * "Slices"; the 64-B headers and latencies are under 2 % here), and
 * S = 2 about half of S = 1.  With one probe-then-receive at a time both
 * servers took the same worker's slice at once and shared its link: S = 2
 * took as long as S = 1.  Simulated times: the same on every machine. */
TEST(sliced_ps_servers_halve_the_step) {
  skip_without_simgrid();
  char db[256];
  CHECK_EQ_INT(sim_experiment("simslice",
                              "name: simulate-sliced-ps\n"
                              "workload: {dataset: fashion-mnist, model: mlp, hidden: [128], batch: 16,\n"
                              "           max_steps: 4, eval_every: 1000000}\n"
                              "workers: 4\n"
                              "simulate: {link: 1gbit, latency: 1us, compute: modeled, eager: simgrid}\n"
                              "engines:\n"
                              "  - {engine: ps, servers: 1, transport: mpi, slice: 16K, slice_from: 0}\n"
                              "  - {engine: ps, servers: 2, transport: mpi, slice: 16K, slice_from: 0}\n",
                              db, sizeof db),
               0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 2);
  const double N = 4, K = 101770 * 4.0, B = 1e9 / 8, C[2] = {25, 13};
  double comm[2], want[2];
  for (int id = 1; id <= 2; id++) {
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT 1e6 * AVG(comm_s + wait_s) FROM steps WHERE run_id = %d "
             "AND role = 'worker' AND step >= 1", id);
    comm[id - 1] = (double)ru_db_int(db, sql) / 1e6;
    want[id - 1] = N * K / (id * B) * (1 + 1 / C[id - 1]);
  }
  fprintf(stderr, "sliced ps: %.4f s per step with S = 1 (T (1 + 1/C) = %.4f), %.4f s with S = 2 "
          "(%.4f): %.2f of S = 1\n", comm[0], want[0], comm[1], want[1], comm[1] / comm[0]);
  for (int i = 0; i < 2; i++)
    CHECK_MSG(fabs(comm[i] / want[i] - 1) <= 0.10, "S = %d: %.4f s per step, not within 10 %% of "
              "T (1 + 1/C) = %.4f s", i + 1, comm[i], want[i]);
  CHECK_MSG(comm[1] <= 0.6 * comm[0], "S = 2: %.4f s per step, S = 1: %.4f s: two servers do not "
            "halve the step", comm[1], comm[0]);
}

/* The calibration cases' workload: a softmax of 16 features, whose
 * measurement (bench step's blocks) takes about 1.9 s of CPU where the
 * default synthetic MLP's took 8.5 s (load 12); these cases measure the
 * step 14 times.  What they check (measured or cached, the values, the
 * file left as it was) does not depend on the workload. */
#define CAL_WORKLOAD "dataset: synthetic, model: softmax, features: 16, train_samples: 256, " \
  "test_samples: 64, batch: 8, max_steps: 2, eval_every: 1000000"

/* One run (compute: `compute`) with the calibration cache in cache/ of
 * dir; 1 when its run_info says calibration `how` and, unless NULL, `key`
 * = `value` (simulate.step_s modeled, simulate.host_speed executed). */
static int cal_run(const char *dir, const char *db, const char *compute, const char *how,
                   const char *value) {
  char cfg[256], sql[256], text[512];
  snprintf(cfg, sizeof cfg, "%s/cal.yaml", dir);
  snprintf(text, sizeof text, "name: simulate-calibration\n"
           "workload: {" CAL_WORKLOAD "}\n"
           "workers: 2\nsimulate: {compute: %s}\n"
           "engines: [{engine: allreduce, algorithm: ring, transport: mpi}]\n", compute);
  if (ru_write_file(cfg, text) || ru_sgdlab_run(cfg, db) != 0) return 0;
  snprintf(sql, sizeof sql, "SELECT count(*) FROM run_info WHERE key = 'simulate.calibration' "
           "AND value = '%s'", how);
  if (ru_db_int(db, sql) != 1) return 0;
  if (!value) return 1;
  snprintf(sql, sizeof sql, "SELECT count(*) FROM run_info WHERE key = 'simulate.%s' "
           "AND value = '%s'", strcmp(compute, "modeled") ? "host_speed" : "step_s", value);
  return ru_db_int(db, sql) == 1;
}

/* Replace the cache with one line of the key it holds: step 0.25 s, taken
 * at `load` on 2 cores (load "": an older line, without load and cores). */
static int cal_plant(const char *path, const char *load) {
  char *text = ru_slurp(path, 1 << 16), line[2048];
  char *tab = text ? strchr(text, '\t') : NULL;
  if (!tab) return free(text), -1;
  *tab = '\0';
  if (load[0]) snprintf(line, sizeof line, "%s\t0.25\t1e9\t%s\t2\n", text, load);
  else snprintf(line, sizeof line, "%s\t0.25\t1e9\n", text);
  free(text);
  return ru_write_file(path, line);
}

/* The step-calibration cache keeps the load average and cores of each
 * measurement and reuses only one taken at a load within its cores: a
 * planted line of load 9 on 2 cores and an older line without load are
 * measured again (step_s not the planted 0.25), one of load 0.5 is reused.
 * Executed compute reuses the line of load 9 (its host speed, 1e9): there
 * the speed is only the unit of the simulated compute. */
TEST(calibration_cache_skips_loaded_entries) {
  skip_without_simgrid();
  const char *dir = ru_scratch("simcal");
  CHECK(dir);
  char cache[300], path[400], db[300], *old = getenv("XDG_CACHE_HOME");
  char keep[4096];
  snprintf(keep, sizeof keep, "%s", old ? old : "");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(path, sizeof path, "%s/sgdlab/simulate-calibration", cache);
  CHECK_EQ_INT(mkdir(cache, 0700), 0);
  setenv("XDG_CACHE_HOME", cache, 1);
  static const struct {
    const char *load, *how, *step;
    const char *compute;
  } cases[] = {{"9", "measured", NULL, "modeled"}, {"", "measured", NULL, "modeled"},
               {"0.5", "cached", "0.25", "modeled"}, {"9", "cached", "1e+09", "executed"}};
  snprintf(db, sizeof db, "%s/cal0.db", dir);
  CHECK_MSG(cal_run(dir, db, "modeled", "measured", NULL), "first run: not measured");
  for (int i = 0; i < 4; i++) {
    CHECK_EQ_INT(cal_plant(path, cases[i].load), 0);
    snprintf(db, sizeof db, "%s/cal%d.db", dir, i + 1);
    CHECK_MSG(cal_run(dir, db, cases[i].compute, cases[i].how, cases[i].step),
              "%s, load '%s': not %s", cases[i].compute, cases[i].load, cases[i].how);
    if (!cases[i].step)
      CHECK_MSG(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.step_s' "
                              "AND value = '0.25'") == 0,
                "load '%s': the planted step time was reused", cases[i].load);
  }
  if (keep[0]) setenv("XDG_CACHE_HOME", keep, 1);
  else unsetenv("XDG_CACHE_HOME");
}

/* The calibration cache is the user's own or it is not used: with a line
 * that would be reused (step 0.25 s at load 0.5) planted, a cache file
 * writable by others or by its group, not this user's, a symbolic link
 * (to a file elsewhere), a file of two links, a file with a line that is
 * not a calibration line, and a cache directory its group may write are
 * each passed over: the step is measured (not the planted 0.25) and the
 * file (or the link's target) is left as it was, nothing appended.  The
 * same line in a plain file of the user's is reused: the plant works. */
static int cal_refused(const char *dir, const char *path, const char *what, int i) {
  char db[300], *before = ru_slurp(path, 1 << 16), *after = NULL;
  snprintf(db, sizeof db, "%s/refused%d.db", dir, i);
  int ok = before && cal_run(dir, db, "modeled", "measured", NULL) &&
           ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.step_s' "
                         "AND value = '0.25'") == 0;
  after = ru_slurp(path, 1 << 16);
  ok = ok && after && !strcmp(before, after);
  if (!ok) fprintf(stderr, "calibration cache %s: used, or written\n", what);
  free(before);
  free(after);
  return ok;
}

TEST(calibration_cache_refuses_planted_files) {
  skip_without_simgrid();
  const char *dir = ru_scratch("simcalplant");
  CHECK(dir);
  char cache[300], sub[340], path[400], other[400], db[300], keep[4096];
  const char *old = getenv("XDG_CACHE_HOME");
  snprintf(keep, sizeof keep, "%s", old ? old : "");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(sub, sizeof sub, "%s/sgdlab", cache);
  snprintf(path, sizeof path, "%s/simulate-calibration", sub);
  snprintf(other, sizeof other, "%s/elsewhere", dir);
  CHECK_EQ_INT(mkdir(cache, 0700), 0);
  setenv("XDG_CACHE_HOME", cache, 1);
  snprintf(db, sizeof db, "%s/first.db", dir);
  CHECK_MSG(cal_run(dir, db, "modeled", "measured", NULL), "first run: not measured");
  CHECK_EQ_INT(cal_plant(path, "0.5"), 0);
  CHECK_EQ_INT(chmod(path, 0666), 0);
  CHECK(cal_refused(dir, path, "mode 0666", 1));
  CHECK_EQ_INT(chmod(path, 0620), 0);
  CHECK(cal_refused(dir, path, "mode 0620", 2));
  CHECK_EQ_INT(chmod(path, 0600), 0);
  CHECK_EQ_INT(chown(path, 65534, 65534), 0);
  CHECK(cal_refused(dir, path, "of uid 65534", 3));
  CHECK_EQ_INT(chown(path, getuid(), getgid()), 0);
  CHECK_EQ_INT(rename(path, other), 0);
  CHECK_EQ_INT(symlink(other, path), 0);
  CHECK(cal_refused(dir, path, "a symbolic link", 4));
  CHECK_EQ_INT(unlink(path), 0);
  CHECK_EQ_INT(link(other, path), 0);
  CHECK(cal_refused(dir, path, "of two links", 5));
  CHECK_EQ_INT(unlink(other), 0);
  char *text = ru_slurp(path, 1 << 16), more[70000];
  CHECK(text);
  snprintf(more, sizeof more, "%snot a calibration line\n", text ? text : "");
  free(text);
  CHECK_EQ_INT(ru_write_file(path, more), 0);
  CHECK(cal_refused(dir, path, "with a line that is not one", 6));
  CHECK_EQ_INT(cal_plant(path, "0.5"), 0);
  CHECK_EQ_INT(chmod(sub, 0770), 0);
  CHECK(cal_refused(dir, path, "in a directory of mode 0770", 7));
  CHECK_EQ_INT(chmod(sub, 0700), 0);
  snprintf(db, sizeof db, "%s/plain.db", dir);
  CHECK_MSG(cal_run(dir, db, "modeled", "cached", "0.25"), "the plain planted line: not reused");
  if (keep[0]) setenv("XDG_CACHE_HOME", keep, 1);
  else unsetenv("XDG_CACHE_HOME");
}

/* Within one `sgdlab run` the rows of a sweep share one step calibration:
 * with the cache's only line planted at a load above its cores, the first
 * of two modeled rows measures and the second takes that measurement
 * (calibration cached, the same step_s), whatever the load meanwhile. */
TEST(calibration_shared_by_a_sweep) {
  skip_without_simgrid();
  const char *dir = ru_scratch("simcalsweep");
  CHECK(dir);
  char cache[300], path[400], db[300], cfg[300], keep[4096], *old = getenv("XDG_CACHE_HOME");
  snprintf(keep, sizeof keep, "%s", old ? old : "");
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(path, sizeof path, "%s/sgdlab/simulate-calibration", cache);
  snprintf(db, sizeof db, "%s/cal0.db", dir);
  CHECK_EQ_INT(mkdir(cache, 0700), 0);
  setenv("XDG_CACHE_HOME", cache, 1);
  CHECK_MSG(cal_run(dir, db, "modeled", "measured", NULL), "first run: not measured");
  CHECK_EQ_INT(cal_plant(path, "9"), 0);
  snprintf(cfg, sizeof cfg, "%s/sweep.yaml", dir);
  snprintf(db, sizeof db, "%s/sweep.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, "name: simulate-calibration-sweep\n"
               "workload: {" CAL_WORKLOAD "}\n"
               "workers: 2\nsimulate: {compute: modeled}\n"
               "engines: [{engine: allreduce, algorithm: ring, transport: mpi},\n"
               "          {engine: allreduce, algorithm: rhd, transport: mpi}]\n"), 0);
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.calibration' "
                             "AND value = 'measured' AND run_id = 1"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.calibration' "
                             "AND value = 'cached' AND run_id = 2"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(DISTINCT value) FROM run_info "
                             "WHERE key = 'simulate.step_s'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'simulate.step_s' "
                             "AND value = '0.25'"), 0);
  if (keep[0]) setenv("XDG_CACHE_HOME", keep, 1);
  else unsetenv("XDG_CACHE_HOME");
}

/* A CPU cgroup of this test with `pct` % of one core (cgroup v2's
 * cpu.max, else v1's cpu.cfs_quota_us) into dir, its process list into
 * procs; 0, or -1 when this machine has no writable cpu controller. */
static int throttle_group(const char *tag, int pct, char *dir, size_t cap, char *procs,
                          size_t pcap) {
  static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/cpu"};
  char f[512], v[64];
  for (int i = 0; i < 2; i++) {
    snprintf(dir, cap, "%s/%s-%d", roots[i], tag, (int)getpid());
    if (mkdir(dir, 0755) != 0) continue;
    snprintf(f, sizeof f, "%s/%s", dir, i ? "cpu.cfs_quota_us" : "cpu.max");
    snprintf(v, sizeof v, i ? "%d" : "%d 100000", pct * 1000);
    snprintf(procs, pcap, "%s/cgroup.procs", dir);
    if (access(f, W_OK) == 0 && ru_write_file(f, v) == 0) return 0;
    rmdir(dir);
  }
  return -1;
}

/* `sgdlab run -q CFG --db DB` in the cgroup whose cgroup.procs is PROCS
 * (the shell writes its pid there, then becomes sgdlab); its status. */
static int run_in_group(const char *procs, const char *cfg, const char *db) {
  char cmd[1400];
  const char *bin = getenv("SGDLAB_BIN_DIR");
  snprintf(cmd, sizeof cmd, "sh -c 'echo $$ > \"$1\" && exec \"$2\"/harness/sgdlab run -q "
           "\"$3\" --db \"$4\"' sh '%s' '%s' '%s' '%s'", procs, bin ? bin : ".", cfg, db);
  return ru_sh(cmd);
}

/* A slow host is not a hang: the silence watchdog counts a simulation's
 * silence in the simulator's CPU time.  The run (4 simulated ranks,
 * executed compute of an MLP 784-512-10 at batch 256, about 40 ms of CPU
 * per rank and step, deadline 0.1 s: 0.15 s of silence allowed) runs in a
 * cgroup of 10 % of a core, so the simulator takes about 10 x the wall time
 * of its CPU time between two records: counted in wall time (as before)
 * the watchdog failed it ("no rank reported for"); counted in CPU time it
 * ends ok.  The run's wall time per record shows the wall-clock silences
 * exceeded the bound (the mean gap above it means at least one gap was). */
TEST(slow_simulation_is_not_silence) {
  skip_without_simgrid();
  char grp[300], procs[320], cfg[300], db[300], sql[200];
  if (throttle_group("sgdlab-simslow", 10, grp, sizeof grp, procs, sizeof procs) != 0) {
    printf("SKIP: no writable cpu cgroup controller to slow the simulator\n");
    exit(77);
  }
  const char *dir = ru_scratch("simslow");
  CHECK(dir);
  snprintf(cfg, sizeof cfg, "%s/slow.yaml", dir);
  snprintf(db, sizeof db, "%s/slow.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, "name: simulate-slow-host\ndeadline: 0.1\nworkers: 4\n"
               "workload: {dataset: synthetic, features: 784, train_samples: 4096,\n"
               "           test_samples: 256, model: mlp, hidden: [512], batch: 256,\n"
               "           max_steps: 4, eval_every: 1000000}\n"
               "simulate: {compute: executed, host_speed: 1e10}\n"
               "engines: [{engine: allreduce, algorithm: ring, transport: mpi}]\n"), 0);
  int rc = run_in_group(procs, cfg, db);
  rmdir(grp);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), 4 * 4);
  snprintf(sql, sizeof sql, "SELECT CAST(1000 * wall_s / (4 * (4 + 2)) AS INTEGER) FROM runs");
  long gap_ms = ru_db_int(db, sql);
  fprintf(stderr, "throttled simulation: %ld ms of wall time per record (bound 150 ms)\n", gap_ms);
  CHECK_MSG(gap_ms > 150, "the run was not slowed past the bound (%ld ms per record)", gap_ms);
}

/* sgdlab run on this experiment text: exit 2 and one line with `want`. */
static void refused(const char *name, const char *text, const char *want) {
  const char *dir = ru_scratch("simrefuse");
  CHECK(dir);
  char cfg[256], db[256], out[4096];
  snprintf(cfg, sizeof cfg, "%s/%s.yaml", dir, name);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, text), 0);
  char *argv[] = {"sgdlab", "run", cfg, "--db", db, NULL};
  int rc = ru_run(argv, 1, NULL, out, sizeof out);
  fprintf(stderr, "%s: exit %d: %s", name, rc, out);
  CHECK_EQ_INT(rc, 2);
  CHECK_MSG(strstr(out, want), "%s: no '%s' in: %s", name, want, out);
  CHECK_MSG(strstr(out, ".yaml:"), "%s: no file:line:col in: %s", name, out);
  CHECK_MSG(!strchr(out, '\n') || !strchr(out, '\n')[1], "%s: more than one line: %s", name, out);
  CHECK_MSG(access(db, F_OK) != 0 || ru_db_int(db, "SELECT count(*) FROM runs") <= 0,
            "%s: a run was started", name);
}

TEST(refusals_before_launch) {
  skip_without_simgrid();
  refused("zmq", "name: z\nworkers: 2\nsimulate: {link: 1gbit}\n"
                 "engines: [{engine: allreduce, transport: zmq}]\n",
          "use transport: mpi");
  refused("torus", "name: t\nworkers: 4\n"
                   "engines: [{engine: allreduce, transport: mpi,\n"
                   "           simulate: {topology: torus, torus: '2,4'}}]\n",
          "simulate.torus");
  refused("eager", "name: e\nworkers: 2\n"
                   "engines: [{engine: ps, transport: mpi, simulate: {eager: 64KB}}]\n",
          "simulate.eager");
  /* N beyond what memory allows: 1024 ranks computing for real need about
   * 24 GiB (simulate.c's estimate), more than most machines have free */
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  double avail_gib = -1;
  unsigned long long kb;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) avail_gib = (double)kb / (1 << 20);
  if (f) fclose(f);
  if (avail_gib > 0 && avail_gib < 24)
    refused("memory", "name: m\nworkers: 1024\n"
                      "workload: {dataset: synthetic, batch: 8, max_steps: 2}\n"
                      "simulate: {compute: executed}\n"
                      "engines: [{engine: allreduce, algorithm: rhd, transport: mpi}]\n",
            "simulating 1024 processes needs");
  else
    fprintf(stderr, "memory refusal not checked: %.1f GiB available\n", avail_gib);
  /* a big model at a modest N: each executing rank holds its parameters,
   * gradient and momentum (64 x 281 MiB x 3, over 50 GiB), which the
   * fixed per-rank amount alone (about 2 GiB here) would admit */
  if (avail_gib > 0 && avail_gib < 48)
    refused("model", "name: b\nworkers: 64\n"
                     "workload: {dataset: fashion-mnist, model: mlp, hidden: [8192, 8192],\n"
                     "           momentum: 0.9, batch: 8, max_steps: 2}\n"
                     "simulate: {compute: executed}\n"
                     "engines: [{engine: allreduce, algorithm: rhd, transport: mpi}]\n",
            "simulating 64 processes needs");
  /* compute: modeled, message buffers that cannot fold (topk pushes are
   * parsed pairs): ps at 127 MB with 128 workers and topk: 1 keeps every
   * message buffer whole and fills it, its server's 130 (pairs: 2P each
   * but its parameters) and each worker's push (2P) and reply, and each
   * worker's selected pairs (2P): 899P, about 106 GiB; counting only the
   * simulator's fixed amount per rank (0.5 GiB) it was admitted.  (At the
   * default topk 0.01 a push fills 1/100 of its buffer: about 17 GiB.) */
  if (avail_gib > 0 && avail_gib < 40)
    refused("unfolded", "name: u\nworkers: 128\n"
                        "workload: {dataset: fashion-mnist, model: mlp, hidden: [40000], batch: 1,\n"
                        "           max_steps: 2}\n"
                        "simulate: {compute: modeled}\n"
                        "engines: [{engine: ps, compress: topk, topk: 1, transport: mpi}]\n",
            "simulating 129 processes needs");
  /* the same with dense pushes folds them, two maps per 128 KiB slice:
   * the server's 128 slots and each worker's push and reply, 486 slices
   * each, ~383,000 maps in all, beyond vm.max_map_count (65530 by default) */
  f = fopen("/proc/sys/vm/max_map_count", "r");
  double maps = 0;
  if (f && fscanf(f, "%lf", &maps) != 1) maps = 0;
  if (f) fclose(f);
  if (maps > 0 && maps < 370000)
    refused("maps", "name: p\nworkers: 128\n"
                    "workload: {dataset: fashion-mnist, model: mlp, hidden: [20000], batch: 1,\n"
                    "           max_steps: 2}\n"
                    "simulate: {compute: modeled}\n"
                    "engines: [{engine: ps, transport: mpi}]\n",
            "vm.max_map_count");
  else
    fprintf(stderr, "maps refusal not checked: vm.max_map_count %.0f\n", maps);
}

/* A memory cgroup of this test limited to `mib` MiB (cgroup v2's
 * memory.max, else v1's memory.limit_in_bytes; this machine has no swap
 * to spill into, and v2's memory.swap.max is set to 0 where it exists):
 * its directory, process list and peak-usage file; 0, or -1 without a
 * writable memory controller. */
static int memory_group(const char *tag, int mib, char *dir, size_t cap, char *procs, size_t pcap,
                        char *peak, size_t kcap) {
  static const char *const roots[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/memory"};
  static const char *const limit[] = {"memory.max", "memory.limit_in_bytes"};
  static const char *const high[] = {"memory.peak", "memory.max_usage_in_bytes"};
  char f[512], v[64];
  for (int i = 0; i < 2; i++) {
    snprintf(dir, cap, "%s/%s-%d", roots[i], tag, (int)getpid());
    if (mkdir(dir, 0755) != 0) continue;
    snprintf(f, sizeof f, "%s/%s", dir, limit[i]);
    snprintf(v, sizeof v, "%lld", (long long)mib << 20);
    snprintf(procs, pcap, "%s/cgroup.procs", dir);
    snprintf(peak, kcap, "%s/%s", dir, high[i]);
    if (access(f, W_OK) == 0 && ru_write_file(f, v) == 0 && access(peak, R_OK) == 0) {
      snprintf(f, sizeof f, "%s/memory.swap.max", dir);
      if (i == 0 && access(f, W_OK) == 0) ru_write_file(f, "0");
      return 0;
    }
    rmdir(dir);
  }
  return -1;
}

/* compute: modeled folds the payload of every ps message across the
 * simulated ranks and keeps each header the rank's own (core/msgbuf.h).
 * Sync ps, N = 4, S = 1, MLP 784-8192-10 (6.5 M parameters: 25.7 MB a
 * message buffer, cut into 128 KiB slices), in a memory cgroup of
 * FOLD_LIMIT_MIB: unfolded, the message buffers alone (the server's
 * parameters, scratch and 4 slots, each worker's push and reply: 14 x
 * 25.7 MB = 360 MB) do not fit there and the simulator is killed; folded
 * they take a page or two per slice (the headers), and the run ends with
 * every step of every rank.  Headers folded too, a server parses another
 * rank's bytes and rejects the push ("bad magic"), and the workers wait
 * for replies that never come: ps_modeled_runs catches that (and this
 * test, as its run does not end ok).  Skipped without a writable memory
 * controller. */
#define FOLD_LIMIT_MIB 300
TEST(ps_modeled_folds_payloads) {
  skip_without_simgrid();
  char grp[300], procs[320], peak[340], cfg[300], db[300];
  if (memory_group("sgdlab-simfold", FOLD_LIMIT_MIB, grp, sizeof grp, procs, sizeof procs, peak,
                   sizeof peak) != 0) {
    printf("SKIP: no writable memory cgroup controller to bound the simulator\n");
    exit(77);
  }
  const char *dir = ru_scratch("simfold");
  CHECK(dir);
  snprintf(cfg, sizeof cfg, "%s/fold.yaml", dir);
  snprintf(db, sizeof db, "%s/fold.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, "name: simulate-ps-folded\nworkers: 4\n"
               "workload: {dataset: synthetic, features: 784, train_samples: 1024,\n"
               "           test_samples: 64, model: mlp, hidden: [8192], batch: 16,\n"
               "           max_steps: 3, eval_every: 1000000}\n"
               "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
               "engines: [{engine: ps, servers: 1, transport: mpi}]\n"), 0);
  int rc = run_in_group(procs, cfg, db);
  char *top = ru_slurp(peak, 64);
  fprintf(stderr, "ps modeled, 14 message buffers of 25.7 MB: exit %d, peak %.1f MiB of the "
          "cgroup (limit %d MiB)\n", rc, top ? atof(top) / (1 << 20) : -1.0, FOLD_LIMIT_MIB);
  free(top);
  rmdir(grp);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), 5 * 3);
}

/* compute: modeled folds every malloc and calloc of 64 KiB or more into
 * one block that all simulated ranks and all such allocations share: a
 * ps worker's request pointers (two per slice: its push and the reply
 * it receives) must not be folded, or the other ranks' requests and
 * folded payloads overwrite them and MPI_Wait reads a request that is
 * not the worker's.  Sync ps, S = 2, N = 2, mlp 784-100-10 (79,510
 * parameters) in slices of 64 B: 4,970 slices, 2 x 4,970 x 8 = 79,520 B
 * of worker requests (over 65,536), while each server's per-slice state
 * (N x 2,485 x 8 = 39,760 B) stays under the threshold either way.  The
 * run ends ok with every step of every rank. */
TEST(ps_modeled_worker_requests_unfolded) {
  skip_without_simgrid();
  modeled_run_ends_ok("simpsreq",
                      "name: simulate-ps-worker-requests\n"
                      "workers: 2\n"
                      "workload: {dataset: synthetic, features: 784, train_samples: 1024,\n"
                      "           test_samples: 64, model: mlp, hidden: [100], batch: 16,\n"
                      "           max_steps: 2, eval_every: 1000000}\n"
                      "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
                      "engines: [{engine: ps, servers: 2, transport: mpi, slice: 64,\n"
                      "           slice_from: 0}]\n",
                      4 * 2);
}

/* The same for the allreduce engine's request array: rhd keeps one
 * request per segment of the vector, and in 64-B segments mlp 784-200-10
 * (159,010 parameters) needs 9,942 of them (79,536 B, over 65,536).  N = 2,
 * modeled compute: the run ends ok (with the old calloc the simulation
 * died by SIGSEGV). */
TEST(rhd_modeled_requests_unfolded) {
  skip_without_simgrid();
  modeled_run_ends_ok("simrhdreq",
                      "name: simulate-rhd-requests\n"
                      "workers: 2\n"
                      "workload: {dataset: synthetic, features: 784, train_samples: 1024,\n"
                      "           test_samples: 64, model: mlp, hidden: [200], batch: 16,\n"
                      "           max_steps: 2, eval_every: 1000000}\n"
                      "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
                      "engines: [{engine: allreduce, algorithm: rhd, transport: mpi,\n"
                      "           segment: 64}]\n",
                      2 * 2);
}

/* Under compute: modeled only sg_fold_alloc's memory is folded
 * (core/msgbuf.h): an ordinary allocation of any size stays the rank's
 * own.  The rank program's memory check (SGDLAB_TEST_SIM_PRIVATE, in
 * rank_main.c): every rank writes its number into a malloc of 256 KiB and
 * into an sg_fold_alloc block of as much, and reads both back after a
 * barrier; the run fails unless the first holds every rank's own number
 * and the second another's (it is shared).  With the simulator told to
 * fold every allocation of 64 KiB or more (smpi/auto-shared-malloc-thresh,
 * how folding was once done) the malloc'd block is shared too, and the
 * run fails with "memory check: rank R read S".  The check records that
 * it ran, on every rank, and passed (run_info test.sim_private_checked):
 * a check that was skipped (the variable not read, the size not taken)
 * would pass the run and leave no row.  Allreduce ring, N = 4, softmax,
 * one step. */
TEST(modeled_memory_private_by_construction) {
  skip_without_simgrid();
  char db[256], err[512] = "", checked[256] = "";
  setenv("SGDLAB_TEST_SIM_PRIVATE", "262144", 1);
  int rc = sim_experiment("simprivate",
                          "name: simulate-private-memory\n"
                          "workers: 4\n"
                          "workload: {dataset: synthetic, features: 64, train_samples: 256,\n"
                          "           test_samples: 32, model: softmax, batch: 8,\n"
                          "           max_steps: 1, eval_every: 1000000}\n"
                          "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
                          "engines: [{engine: allreduce, transport: mpi}]\n",
                          db, sizeof db);
  unsetenv("SGDLAB_TEST_SIM_PRIVATE");
  ru_db_text_into(db, "SELECT coalesce(error, '') FROM runs", err, sizeof err);
  ru_db_text_into(db, "SELECT coalesce(max(value), '') FROM run_info "
                  "WHERE key = 'test.sim_private_checked'", checked, sizeof checked);
  fprintf(stderr, "memory check run: exit %d, error '%s', checked '%s'\n", rc, err, checked);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), 4);
  CHECK_MSG(!strcmp(checked, "4 of 4 ranks, 262144 bytes: own memory private, sg_fold_alloc "
                            "shared"), "test.sim_private_checked '%s'", checked);
}

/* compute: modeled with dataset: libsvm: the files are read for their
 * shape only (features, classes, samples), as every other dataset is
 * not read at all; no step computes and nothing is evaluated, so the
 * run records no loss and no accuracy (NULL), like the other datasets
 * (the parameters are folded there: a number computed from them would
 * be made up).  Allreduce ring, N = 2, softmax on a 20-feature, two-class
 * file, 4 steps, an evaluation every 2. */
TEST(libsvm_modeled_records_no_loss) {
  skip_without_simgrid();
  const char *dir = ru_scratch("simsvm");
  CHECK(dir);
  char tr[256], te[256], yaml[1024], cfg[256], db[256], line[256];
  snprintf(tr, sizeof tr, "%s/train.svm", dir);
  snprintf(te, sizeof te, "%s/test.svm", dir);
  for (int f = 0; f < 2; f++) {
    FILE *out = fopen(f ? te : tr, "w");
    CHECK(out);
    for (int i = 0; i < (f ? 64 : 256); i++) {
      int n = snprintf(line, sizeof line, "%d", i % 2);
      for (int j = 1 + i % 3; j <= 20; j += 3)
        n += snprintf(line + n, sizeof line - (size_t)n, " %d:%d", j, (i + j) % 5 + 1);
      fprintf(out, "%s\n", line);
    }
    CHECK_EQ_INT(fclose(out), 0);
  }
  snprintf(yaml, sizeof yaml,
           "name: simulate-libsvm-modeled\n"
           "workers: 2\n"
           "workload: {dataset: libsvm, train_file: %s, test_file: %s,\n"
           "           model: softmax, batch: 16, max_steps: 4, eval_every: 2}\n"
           "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
           "engines: [{engine: allreduce, transport: mpi}]\n", tr, te);
  snprintf(cfg, sizeof cfg, "%s/svm.yaml", dir);
  snprintf(db, sizeof db, "%s/svm.db", dir);
  CHECK_EQ_INT(ru_write_file(cfg, yaml), 0);
  int rc = ru_sgdlab_run(cfg, db);
  long long evals = ru_db_int(db, "SELECT count(*) FROM evals");
  long long acc = ru_db_int(db, "SELECT count(*) FROM evals WHERE test_acc IS NOT NULL OR "
                            "test_loss IS NOT NULL OR train_loss IS NOT NULL");
  long long loss = ru_db_int(db, "SELECT count(*) FROM steps WHERE loss IS NOT NULL");
  char first[160] = "";
  ru_db_text_into(db, "SELECT coalesce(test_acc, 'NULL') || ' ' || coalesce(test_loss, 'NULL') "
                  "FROM evals ORDER BY step LIMIT 1", first, sizeof first);
  fprintf(stderr, "libsvm modeled: exit %d, %lld evals (%lld with a number; first: %s), "
          "%lld steps with a loss\n", rc, evals, acc, first, loss);
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps"), 2 * 4);
  CHECK(evals >= 2);
  CHECK_EQ_INT(acc, 0);
  CHECK_EQ_INT(loss, 0);
}

/* Sparse ps under compute: modeled: the data is not loaded, so a worker
 * cannot say which coordinates a step needs; the run used to launch and
 * fail at its first step ("training set"); it is refused before launch
 * (exit 2, no run recorded; the line itself: test_admit). */
TEST(sparse_ps_modeled_is_refused_before_launch) {
  skip_without_simgrid();
  char db[256];
  int rc = sim_experiment("simsparse",
                          "name: simulate-ps-sparse-modeled\n"
                          "workers: 2\n"
                          "workload: {dataset: clicks, model: embedding, fields: 4,\n"
                          "           table_rows: 4096, embed_dim: 8, hidden: [16],\n"
                          "           keys_per_field: 3000, batch: 16, train_samples: 4000,\n"
                          "           test_samples: 500, max_steps: 3, eval_every: 1000000}\n"
                          "simulate: {link: 10gbit, latency: 1us, compute: modeled}\n"
                          "engines: [{engine: ps, mode: sync, sparse: true, servers: 1,\n"
                          "           transport: mpi}]\n",
                          db, sizeof db);
  long long runs = ru_db_int(db, "SELECT count(*) FROM runs");
  fprintf(stderr, "sparse ps, modeled: exit %d, %lld runs recorded\n", rc, runs);
  CHECK_EQ_INT(rc, 2);
  CHECK(runs <= 0);
}
