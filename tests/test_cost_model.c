/* The alpha-beta-gamma cost model (harness/model/cost_model.h, docs/model.md):
 * every formula against values computed by hand, the directions in which
 * N, K and S move them, the least-squares fit recovering alpha and beta
 * exactly from synthetic bench rows, and `sgdlab model` on a fixture
 * database (no cluster needed). */
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cost_model.h"
#include "report.h"
#include "err.h"
#include "json_check.h"
#include "recorder.h"
#include "run_util.h"
#include "test.h"

static const sg_cost_params_t P = {1e-5, 8e-9, 1e-10, 0, 0}; /* alpha, beta, gamma; no CPU bound */
static const double K = 1e6;

static double comm(const char *engine, const char *variant, int N, int S, int tree_agg, int depth) {
  sg_cost_case_t c = {engine, variant, N, S, 0, tree_agg, depth, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  double t;
  return sg_cost_comm(&c, &P, &t) == 0 ? t : NAN; /* NAN fails every comparison */
}

static double link_bytes(const char *engine, const char *variant, int N, int S, double k) {
  sg_cost_case_t c = {engine, variant, N, S, 0, 0, 1, k, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  return sg_cost_link_bytes(&c);
}

#define REL(a, b) CHECK_NEAR((a) / (b), 1.0, 1e-12)

TEST(ring_and_rhd_match_hand_values) {
  /* ring N=4: 6 alpha + 1.5 K beta + 0.75 K gamma; the engine's step adds
   * the barrier before the sum, ceil(log2 4) = 2 alpha; the bench times
   * the sum alone */
  REL(comm("allreduce", "ring", 4, 0, 0, 0), 2e-5 + 6e-5 + 0.012 + 7.5e-5);
  REL(comm("bench-allreduce", "ring", 4, 0, 0, 0), 6e-5 + 0.012 + 7.5e-5);
  /* rhd N=4: 2 log2 4 = 4 alpha, same bytes as the ring */
  REL(comm("allreduce", "rhd", 4, 0, 0, 0), 2e-5 + 4e-5 + 0.012 + 7.5e-5);
  /* rhd N=5: p = 4 plus the fold (K in, reduced) and the unfold (K out);
   * the barrier ceil(log2 5) = 3 alpha */
  REL(comm("allreduce", "rhd", 5, 0, 0, 0),
      3e-5 + 4e-5 + 0.012 + 7.5e-5 + 2 * (1e-5 + 0.008) + 1e-4);
  REL(comm("bench-allreduce", "rhd", 5, 0, 0, 0),
      4e-5 + 0.012 + 7.5e-5 + 2 * (1e-5 + 0.008) + 1e-4);
  CHECK(comm("allreduce", "ring", 1, 0, 0, 0) == 0);
}

TEST(ps_and_mapreduce_match_hand_values) {
  /* ps N=4, S=2: each server carries N K / S = 2 MB out; the first
   * worker's push crosses during the other replies, so 1.5 MB in after;
   * a server takes 2N = 8 requests (PUSH, PULL) one at a time, the
   * replies one alpha: 9 alpha */
  REL(comm("ps", "sync", 4, 2, 0, 0), 9e-5 + 0.016 + 0.012 + 2e-4);
  /* N = 1: nothing to overlap, K out and K in; 2 requests and the reply */
  REL(comm("ps", "sync", 1, 1, 0, 0), 3e-5 + 2 * 0.008 + 1e-4);
  /* mapreduce flat/flat N=4: broadcast alpha + 4K beta; 4 DONE reports
   * taken one at a time, 4 alpha; aggregate 4 receives, 4 alpha + 3K beta
   * (the first gradient came in during the broadcast) + 4K gamma */
  REL(comm("mapreduce", "flat", 4, 0, 0, 2), 1e-5 + 0.032 + 4e-5 + 4e-5 + 0.024 + 4e-4);
  /* tree/tree depth 2, N=8: f=3; broadcast ceil(log2 9) = 4 rounds of K;
   * 8 reports; one combining round of (f-1) K taken one at a time, then
   * the driver takes ceil(8/3) = 3 K, one at a time */
  REL(comm("mapreduce", "tree", 8, 0, 1, 2),
      4 * (1e-5 + 0.008) + 8e-5 + 2 * (1e-5 + 0.008 + 1e-4) + 3 * (1e-5 + 0.008 + 1e-4));
  /* the driver's link, busier direction (docs/engines/mapreduce.md): tree/tree
   * sends 4K and receives 3K; tree/flat receives 8K */
  sg_cost_case_t c = {"mapreduce", "tree", 8, 0, 0, 1, 2, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  REL(sg_cost_link_bytes(&c), 4 * K);
  c.tree_aggregate = 0;
  REL(sg_cost_link_bytes(&c), 8 * K);
}

TEST(link_bytes_move_the_right_way) {
  /* ring: per-link bytes flat in N (between K and 2K), linear in K */
  for (int n = 2; n <= 64; n *= 2) {
    double b = link_bytes("allreduce", "ring", n, 0, K);
    CHECK(b >= K && b < 2 * K);
    REL(link_bytes("allreduce", "ring", n, 0, 2 * K), 2 * b);
  }
  /* ps server: linear in N, inversely in S */
  REL(link_bytes("ps", "sync", 8, 1, K), 2 * link_bytes("ps", "sync", 4, 1, K));
  REL(link_bytes("ps", "sync", 8, 4, K), link_bytes("ps", "sync", 8, 1, K) / 4);
  CHECK(comm("ps", "sync", 8, 1, 0, 0) > comm("ps", "sync", 4, 1, 0, 0));
  CHECK(comm("ps", "sync", 8, 2, 0, 0) < comm("ps", "sync", 8, 1, 0, 0));
  /* at N = 8 one server's link carries N/2(N-1)*N... more than a ring link */
  CHECK(link_bytes("ps", "sync", 8, 1, K) > link_bytes("allreduce", "ring", 8, 0, K));
}

TEST(unknown_engine_is_not_found) {
  sg_cost_case_t c = {"gossip", "x", 4, 1, 0, 0, 1, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  double t;
  CHECK(sg_cost_comm(&c, &P, &t) == SG_ENOTFOUND);
  CHECK_STR_CONTAINS(sg_err_msg(), "gossip");
  c.engine = "allreduce", c.variant = "butterfly";
  CHECK(sg_cost_comm(&c, &P, &t) == SG_ENOTFOUND);
}

TEST(fit_recovers_alpha_and_beta) {
  for (int N = 2; N <= 8; N += 3) {
    double x[6], t[6], f = (N - 1.0) / N;
    for (int i = 0; i < 6; i++) {
      x[i] = (double)(1 << 20) * (1 << i);
      t[i] = 2 * (N - 1) * 2.5e-5 + 2 * f * x[i] * 8.5e-9 + f * x[i] * 1e-10;
    }
    sg_cost_params_t p;
    CHECK_OK(sg_cost_fit_ring(x, t, 6, N, 1e-10, &p));
    CHECK_NEAR(p.alpha / 2.5e-5, 1.0, 1e-9);
    CHECK_NEAR(p.beta / 8.5e-9, 1.0, 1e-9);
  }
  double x[2] = {1, 1}, t[2] = {1, 2}, a, b;
  CHECK(sg_cost_fit_line(x, t, 2, &a, &b) == SG_EINVAL);
  CHECK(sg_cost_fit_line(x, t, 1, &a, &b) == SG_EINVAL);
  x[1] = 3;
  CHECK_OK(sg_cost_fit_line(x, t, 2, &a, &b));
  CHECK_NEAR(b, 0.5, 1e-15);
  CHECK_NEAR(a, 0.5, 1e-15);
}

TEST(gamma_is_measured) {
  double g = 0;
  CHECK_OK(sg_cost_measure_gamma(4u << 20, 5, &g));
  CHECK(g > 0 && g < 1e-7); /* 4 MiB summed in well under 0.4 s */
}

/* The CPU bound: every process's bytes on `cores` shared cores; the step
 * takes the larger of the links' and the CPU's time, not their sum. */
TEST(cpu_bound_is_the_larger_of_the_two) {
  sg_cost_params_t p = P;
  sg_cost_case_t c = {"allreduce", "ring", 4, 0, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  sg_cost_split_t s;
  double t;
  p.kappa = 4e-9, p.cores = 2;
  CHECK_OK(sg_cost_detail(&c, &p, &s));
  REL(s.cpu_bytes, 12 * K); /* 4 ranks send and receive 1.5 K each */
  REL(s.cpu_s, 4e-9 * 12 * K / 2);
  REL(s.link_s, 2e-5 + 6e-5 + 0.012 + 7.5e-5);
  CHECK_OK(sg_cost_comm(&c, &p, &t));
  REL(t, 0.024); /* cpu 24 ms > link 12.2 ms */
  p.kappa = 1e-9;
  CHECK_OK(sg_cost_comm(&c, &p, &t));
  REL(t, 2e-5 + 6e-5 + 0.012 + 7.5e-5); /* cpu 6 ms < link */
  /* ps N=4: workers 2K each, servers 2NK: 16 K through the CPUs */
  sg_cost_case_t q = {"ps", "sync", 4, 2, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  CHECK_OK(sg_cost_detail(&q, &p, &s));
  REL(s.cpu_bytes, 16 * K);
}

/* A slow link: the ring goes at its pace; a sync ps phase lasts as long as
 * the slower of the server's incast and the slow worker's own transfer. */
TEST(slowest_link_sets_the_pace) {
  sg_cost_case_t c = {"allreduce", "ring", 4, 0, 0, 0, 0, K, 5, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  double t;
  CHECK_OK(sg_cost_comm(&c, &P, &t));
  REL(t, 2e-5 + 6e-5 + 5 * 0.012 + 7.5e-5);
  sg_cost_case_t q = {"ps", "sync", 4, 1, 0, 0, 0, K, 5, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, 9e-5 + 2 * 5 * K * 8e-9 + 4e-4); /* 5 K beta > the server's 4 K beta */
  q.slow = 2; /* 2 K beta < 4 K and 3 K beta: the server's link decides again */
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, 9e-5 + 7 * K * 8e-9 + 4e-4);
  sg_cost_case_t as = {"ps", "async", 4, 1, 0, 0, 0, K, 5, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  CHECK_OK(sg_cost_comm(&as, &P, &t)); /* async: the median worker's link, not the slowest, */
  REL(t, 8e-5 + 4 * K * 8e-9 + 4e-4); /* pushes and pulls at once on the full-duplex link */
  q.hub = 2; /* the server on a link half as fast */
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, 9e-5 + 14 * K * 8e-9 + 4e-4);
}

/* Slices: the server link's two directions overlap, so a sync round costs
 * T (1 + 1/C) instead of 2 T (T = the phase time), plus the last slice's
 * sum; one slice is the whole-shard formula; ssp, async and sparse runs
 * are never sliced. */
TEST(sliced_ps_sync_overlaps_the_two_directions) {
  sg_cost_case_t q = {"ps", "sync", 4, 1, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  double whole, t, T = 4 * K * 8e-9;
  CHECK_OK(sg_cost_comm(&q, &P, &whole));
  REL(whole, 9e-5 + T + 0.75 * T + 4e-4);
  q.slice = K / 8; /* C = 8 slices of the 1 MB shard */
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, 2 * 1e-5 + T * (1 + 1.0 / 8) + 4e-4 / 8);
  CHECK(t < 0.7 * whole);
  q.slice = 3 * K; /* a slice larger than the shard: one slice */
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, whole);
  q.slice = K / 8;
  q.variant = "ssp";
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, whole);
  q.variant = "sync";
  q.sparse = 1;
  CHECK_OK(sg_cost_comm(&q, &P, &t));
  REL(t, whole);
  /* the busiest link carries the same bytes either way */
  q.sparse = 0;
  double b = sg_cost_link_bytes(&q);
  q.slice = 0;
  REL(b, sg_cost_link_bytes(&q));
}

TEST(kappa_fit_from_a_cpu_bound_series) {
  double x[4], t[4], k;
  for (int i = 0; i < 4; i++) x[i] = (double)(1 << 20) * (1 << i), t[i] = 3e-3 + x[i] * 48e-9;
  CHECK_OK(sg_cost_fit_kappa(x, t, 4, 4, 2, &k));
  CHECK_NEAR(k / (48e-9 * 2 / 12), 1.0, 1e-9); /* slope cores / 4(np-1) */
  CHECK(sg_cost_fit_kappa(x, t, 4, 1, 2, &k) == SG_EINVAL);
  for (int i = 0; i < 4; i++) t[i] = 1 - x[i] * 1e-9; /* falling: no CPU cost to see */
  CHECK_OK(sg_cost_fit_kappa(x, t, 4, 4, 2, &k));
  CHECK(k == 0);
}

/* ---- `sgdlab model` on a fixture database ---------------------------- */

static const char FIXTURE[] =
    "INSERT INTO experiments(id, name) VALUES(1, 'fx'), (2, 'bench-allreduce'), (3, 'bench-allreduce'),"
    " (4, 'bench-allreduce');"
    "INSERT INTO runs(id, experiment_id, engine, options_json, transport, workers, status) VALUES"
    " (1, 1, 'allreduce', '{\"algorithm\":\"ring\",\"model\":\"softmax\",\"dataset\":\"fashion-mnist\","
    "\"features\":0,\"classes\":10,\"cluster.link\":\"1gbit\",\"zmq_auth\":\"curve\"}', 'zmq', 2, 'ok'),"
    /* slice and slice_from as the harness records them, with suffixes:
     * 159 KB shards are below 1M, so the run is unsliced */
    " (2, 1, 'ps', '{\"mode\":\"sync\",\"servers\":2,\"slice\":\"128K\",\"slice_from\":\"1M\","
    "\"model\":\"mlp\",\"hidden\":\"100\","
    "\"dataset\":\"fashion-mnist\",\"features\":0,\"classes\":10,\"cluster.link\":\"1gbit\","
    "\"zmq_auth\":\"curve\"}', 'zmq', 4, 'ok'),"
    " (3, 2, 'bench-allreduce', '{\"impl\":\"ring\",\"cluster.link\":\"1gbit\",\"zmq_auth\":\"curve\"}',"
    " 'zmq', 2, 'ok'),"
    " (4, 2, 'bench-allreduce', '{\"impl\":\"ring\",\"cluster.link\":\"1gbit\",\"zmq_auth\":\"none\"}',"
    " 'zmq', 2, 'ok'),"
    /* no formula, and text that must not reach a terminal or a table raw */
    " (5, 1, 'allreduce', '{\"algorithm\":\"nc|cl\\u001b[2J\",\"cluster.link\":\"1gbit\",\"zmq_auth\":\"curve\"}',"
    " 'zmq', 2, 'ok'),"
    /* a link with no bench rows of its own: the 1gbit fit, beta x 4 */
    " (6, 1, 'allreduce', '{\"algorithm\":\"ring\",\"model\":\"softmax\",\"dataset\":\"fashion-mnist\","
    "\"features\":0,\"classes\":0,\"cluster.link\":\"1gbit,250mbit\",\"zmq_auth\":\"curve\"}', 'zmq', 2, 'ok'),"
    " (7, 3, 'bench-allreduce', '{\"impl\":\"ring\",\"cluster.link\":\"1gbit\",\"zmq_auth\":\"curve\"}',"
    " 'zmq', 4, 'ok'),"
    /* a slower link's np 4 rows, link-bound: they bound kappa only from above */
    " (8, 4, 'bench-allreduce', '{\"impl\":\"ring\",\"cluster.link\":\"100mbit\",\"zmq_auth\":\"curve\"}',"
    " 'zmq', 4, 'ok');";

/* bench rows t = 2 alpha + bytes beta (np 2), alpha 100 us, beta 8 ns/B;
 * a 64 KiB row off the line (below --fit-min) and rows of another auth
 * that must not be used. */
static int fill(sqlite3 *h) {
  char sql[512];
  if (sqlite3_exec(h, FIXTURE, NULL, NULL, NULL) != SQLITE_OK) return -1;
  /* the fit takes each row's t_min: the 8 MiB row's median, slowed 15 %
   * by a loaded moment, must not move beta */
  for (int i = 0; i < 4; i++) {
    double x = (double)(1 << 20) * (1 << i), t = 2e-4 + x * 8e-9;
    snprintf(sql, sizeof sql,
             "INSERT INTO bench(experiment_id, collective, impl, transport, np, bytes, t_min,"
             " t_median, wrong) VALUES(2, 'allreduce', 'ring', 'zmq', 2, %.0f, %.17g, %.17g, 0)",
             x, t, i == 3 ? 1.15 * t : t);
    if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
  }
  /* np 4 rows, CPU-bound: slope 48 ns/B, so kappa = 48e-9 cores / 12; and
   * 100mbit's np 4 rows at 120 ns/B (kappa 20 ns/B: the least must win) */
  for (int e = 3; e <= 4; e++)
    for (int i = 0; i < 4; i++) {
      double x = (double)(1 << 20) * (1 << i);
      snprintf(sql, sizeof sql,
               "INSERT INTO bench(experiment_id, collective, impl, transport, np, bytes, t_median,"
               " wrong) VALUES(%d, 'allreduce', 'ring', 'zmq', 4, %.0f, %.17g, 0)",
               e, x, 3e-4 + x * (e == 3 ? 48e-9 : 120e-9));
      if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
    }
  if (sqlite3_exec(h,
                   "INSERT INTO bench(experiment_id, collective, impl, transport, np, bytes, t_median,"
                   " wrong) VALUES(2, 'allreduce', 'ring', 'zmq', 2, 65536, 1.0, 0)",
                   NULL, NULL, NULL) != SQLITE_OK)
    return -1;
  /* workers: rank 0,1 of run 1 every 10 ms, compute 2 ms; run 2 every 20 ms */
  for (int run = 1; run <= 6; run++)
    for (int rank = 0; rank < 2 && run != 3 && run != 4 && run != 5; rank++)
      for (int s = 0; s < 20; s++) {
        double period = run == 6 ? 0.01 : 0.01 * run;
        snprintf(sql, sizeof sql,
                 "INSERT INTO steps(run_id, rank, role, kind, step, t_start, compute_s, comm_s,"
                 " wait_s, bytes_sent, bytes_recv)"
                 " VALUES(%d, %d, 'worker', 'worker', %d, %.17g, 0.002, 0.005, 0, 1, 1)",
                 run, rank, s, s * period + (s < 5 ? 0.5 * s : 2.5));
        if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
      }
  /* run 2's server (kind hub): 1 ms of update per step, on the step's path */
  for (int s = 0; s < 20; s++) {
    snprintf(sql, sizeof sql,
             "INSERT INTO steps(run_id, rank, role, kind, step, t_start, compute_s, comm_s,"
             " wait_s, bytes_sent, bytes_recv) VALUES(2, 4, 'server', 'hub', %d, %d, 0.001, 0, 0,"
             " 1, 1)", s, s);
    if (sqlite3_exec(h, sql, NULL, NULL, NULL) != SQLITE_OK) return -1;
  }
  return 0;
}

static int make_fixture(const char *path) {
  sg_recorder_t *db = NULL;
  if (sg_recorder_open(&db, path) < 0) return -1;
  int rc = fill(sg_recorder_sqlite(db));
  sg_recorder_close(&db);
  return rc;
}

TEST(cli_prints_expected_rows) {
  const char *dir = ru_scratch("costmodel");
  char db[512], out[8192], want[256];
  CHECK(dir != NULL);
  if (!dir) return;
  snprintf(db, sizeof db, "%s/fx.db", dir);
  CHECK_OK(make_fixture(db));
  char *argv[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "0", "--cores", "2", NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  /* the fit from the 1..8 MiB rows of auth curve only: alpha 100 us, beta 8 ns/B */
  CHECK_STR_CONTAINS(out, "alpha 100.00 us, beta 8.000 ns/B (1000 Mbit/s effective)");
  CHECK_STR_CONTAINS(out, "ring rows: np 2 exp 2 link 1gbit (alpha, beta); np 2 exp 2 link 1gbit (kappa)");
  /* run 1: softmax on Fashion-MNIST, K = 4 (784*10 + 10) = 31400 B; ring N=2:
   * link 2 alpha + K beta and the barrier's alpha = 0.5512 ms; cpu kappa 4K
   * / cores with kappa from np 2 = 8e-9 * 2 / 4 = 4 ns/B: 0.2512 ms; total
   * 2 + 0.5512; measured 10 */
  snprintf(want, sizeof want, "%5d %-22s %3d %3d %9.3f %11.2f %9.2f %9.2f %11.2f %12.2f %7.2f", 1,
           "ring", 2, 2, 0.0314, 2.0, 0.5512, 0.2512, 2.5512, 10.0, 10.0 / 2.5512);
  CHECK_STR_CONTAINS(out, want);
  /* run 2: MLP 784-100-10, K = 4 (78500 + 1010) = 318040 B; ps S=2, N=4,
   * 6 processes: kappa from the np 4 rows, 48e-9 * 2 / 12 = 8 ns/B; cpu
   * 16 K kappa / 2 = 20.35 ms > link 9 alpha (2N requests and the
   * replies) + 2K beta out + 1.5K beta in = 9.81 ms; the server's 1 ms
   * update is added: total 2 + 1 + 20.35 (the CPU binds: no compute
   * hidden) */
  double l2 = 9e-4 + 3.5 * 318040 * 8e-9, c2 = 16 * 318040 * 8e-9 / 2;
  CHECK_STR_CONTAINS(out, "np 2 exp 2 link 1gbit (alpha, beta); np 4 exp 3 link 1gbit (kappa)");
  snprintf(want, sizeof want, "%5d %-22s %3d %3d %9.3f %11.2f %9.2f %9.2f %11.2f %12.2f %7.2f", 2,
           "ps-sync-S2", 4, 6, 0.31804, 3.0, l2 * 1e3, c2 * 1e3, 3.0 + c2 * 1e3, 20.0,
           20.0 / (3.0 + c2 * 1e3));
  CHECK_STR_CONTAINS(out, want);
  /* run 6: links 1gbit and 250mbit, no bench rows of its own: the 1gbit
   * fit with beta x 4 on the slow link: 2 alpha + 4 K beta + the barrier */
  snprintf(want, sizeof want, "%5d %-22s %3d %3d %9.3f %11.2f %9.2f", 6, "ring", 2, 2, 0.0314, 2.0,
           (3e-4 + 4 * 31400 * 8e-9) * 1e3);
  CHECK_STR_CONTAINS(out, want);
  /* the run without a formula is one line, its text made safe */
  CHECK_STR_CONTAINS(out, "    5 nc?cl??2J");
  CHECK_STR_CONTAINS(out, "(no cost formula for this engine and variant)");
  CHECK(strchr(out, 0x1b) == NULL);
}

/* `sgdlab report`: the same prediction as a section of summary.md. */
TEST(report_summary_has_the_cost_section) {
  const char *dir = ru_scratch("costmodel");
  char db[512], rep[512], out[4096], path[600];
  CHECK(dir != NULL);
  if (!dir) return;
  snprintf(db, sizeof db, "%s/fx.db", dir);
  snprintf(rep, sizeof rep, "%s/rep", dir);
  CHECK_OK(make_fixture(db));
  char *argv[] = {"sgdlab", "report", "fx", "--db", db, "--out", rep, NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 0);
  snprintf(path, sizeof path, "%s/summary.md", rep);
  char *md = ru_slurp(path, 1 << 20);
  CHECK(md != NULL);
  if (!md) return;
  CHECK_STR_CONTAINS(md, "## Cost model");
  /* ring at N = 2 is the fitted line itself, whatever gamma was timed */
  CHECK_STR_CONTAINS(md, "| 1 | ring | 2 | 0.031 | 100.0 | ");
  CHECK_STR_CONTAINS(md, " | 2.0 | 2.6 | 10.0 | 3.92 |");
  CHECK_STR_CONTAINS(md, "| 2 | ps-sync-S2 | 4 | 0.318 | 100.0 | ");
  CHECK(strstr(md, "| 5 |") == NULL); /* no formula, no row */
  free(md);
}

TEST(cli_without_bench_rows_names_the_link) {
  const char *dir = ru_scratch("costmodel");
  char db[512], out[4096];
  CHECK(dir != NULL);
  if (!dir) return;
  snprintf(db, sizeof db, "%s/fx.db", dir);
  CHECK_OK(make_fixture(db));
  char *sql_argv[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "0", "--fit-min", "64M", NULL};
  CHECK_EQ_INT(ru_run(sql_argv, 1, NULL, out, sizeof out), 2); /* '64M' is not a number */
  CHECK_STR_CONTAINS(out, "--fit-min");
  char *argv[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "0", "--fit-min", "67108864", NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "no bench ring rows >= 67108864 B for link '1gbit' (or any other), zmq_auth 'curve'");
  /* given alpha and beta need no bench rows */
  char *given[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "0", "--fit-min", "67108864",
                   "--alpha", "1e-4", "--beta", "8e-9", NULL};
  CHECK_EQ_INT(ru_run(given, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "[given; no bench rows");
}

/* A run on one host (cluster.hosts 0) is not asked for a cluster bench of
 * its default link; a fit that gives no positive beta says what to do. */
TEST(cli_one_host_run_and_a_failed_fit_say_what_to_do) {
  const char *dir = ru_scratch("costmodel");
  char db[512], out[4096];
  sqlite3 *h = NULL;
  CHECK(dir != NULL);
  if (!dir) return;
  snprintf(db, sizeof db, "%s/fx.db", dir);
  CHECK_OK(make_fixture(db));
  CHECK(sqlite3_open(db, &h) == SQLITE_OK);
  CHECK(sqlite3_exec(h, "INSERT INTO experiments(id, name, config_text, started_at) VALUES"
                        " (9, 'onehost', '', 't');"
                        "INSERT INTO runs(id, experiment_id, engine, options_json, transport,"
                        " workers, status) VALUES (90, 9, 'allreduce', '{\"algorithm\":\"ring\","
                        "\"model\":\"softmax\",\"dataset\":\"fashion-mnist\",\"features\":0,"
                        "\"classes\":10,\"cluster.hosts\":0,\"cluster.link\":\"1gbit\","
                        "\"zmq_auth\":\"curve\"}', 'zmq', 2, 'ok')",
                    NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(h);
  char *argv[] = {"sgdlab", "model", "9", "--db", db, "--gamma", "0", "--fit-min", "67108864", NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "run 90 ran on one host (no cluster, so its link does not apply)");
  CHECK_STR_CONTAINS(out, "run `sgdlab bench allreduce --impl ring --transport zmq --db ");
  CHECK(!strstr(out, "link '1gbit'") && !strstr(out, "cluster.hosts=2"));
  /* summation alone (gamma) slower than the rows' slope: no positive beta */
  char *fit[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "1e-6", NULL};
  CHECK_EQ_INT(ru_run(fit, 1, NULL, out, sizeof out), 1);
  CHECK_STR_CONTAINS(out, "gives no positive beta: the ring rows of np 2 (bench experiment 2, "
                          "link 1gbit) grow no faster");
  CHECK_STR_CONTAINS(out, "or give --alpha and --beta");
}

/* --plot: the figure's data holds every run's measured and predicted
 * ms/step under its label; a path in the name is refused before anything. */
TEST(cli_plot_writes_the_figure) {
  const char *dir = ru_scratch("costmodel");
  char db[512], out[4096], path[600];
  CHECK(dir != NULL);
  if (!dir) return;
  snprintf(db, sizeof db, "%s/fx.db", dir);
  CHECK_OK(make_fixture(db));
  char *bad[] = {"sgdlab", "model", "fx", "--db", db, "--plot", "../x", NULL};
  CHECK_EQ_INT(ru_run(bad, 1, NULL, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "--plot '../x'");
  char *argv[] = {"sgdlab", "model", "fx", "--db", db, "--gamma", "0", "--cores", "2",
                  "--plot", "fig", "--plot-dir", (char *)dir, NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 0);
  snprintf(path, sizeof path, "%s/fig.tsv", dir);
  char *tsv = ru_slurp(path, 1 << 20);
  CHECK(tsv != NULL);
  if (!tsv) return;
  CHECK_STR_CONTAINS(tsv, "# ring\n2\t2.5512\t10\n");
  CHECK_STR_CONTAINS(tsv, "# ps-sync-S2\n4\t");
  CHECK(strstr(tsv, "\x1b") == NULL);
  free(tsv);
  snprintf(path, sizeof path, "%s/fig.png", dir);
  CHECK(access(path, F_OK) == 0);
  /* times 2.45..20 ms: a linear axis from 0; 0.2..50 ms (over 30x): log */
  snprintf(path, sizeof path, "%s/fig.gp", dir);
  char *gp = ru_slurp(path, 1 << 20);
  CHECK(gp != NULL && strstr(gp, "set yrange [0:*]") && !strstr(gp, "logscale y"));
  free(gp);
  sg_cost_point_t pts[2] = {{"ring", 2, 2e-4, 2.5e-4}, {"native", 4, 3e-4, 5e-2}};
  CHECK_OK(sg_cost_plot(dir, "wide", 0, pts, 2));
  snprintf(path, sizeof path, "%s/wide.gp", dir);
  gp = ru_slurp(path, 1 << 20);
  CHECK(gp != NULL && strstr(gp, "set logscale y 10") && !strstr(gp, "yrange [0:*]"));
  free(gp);
}

/* ---- tree, hier, two levels, and `sgdlab model --what-if` ----------- */

static double comm_case(sg_cost_case_t c) {
  double t;
  return sg_cost_comm(&c, &P, &t) == 0 ? t : NAN;
}

static sg_cost_case_t ar_case(const char *variant, int N, int group) {
  sg_cost_case_t c = {.engine = "allreduce", .variant = variant, .N = N, .K = K, .group = group};
  return c;
}

TEST(tree_and_hier_match_hand_values) {
  /* hier N=8, G=4: a whole ring of 4 on K inside (6 alpha + 1.5 K beta +
   * 0.75 K gamma), a ring of 2 on K/4 across (2 alpha + 0.25 K beta +
   * 0.125 K gamma); the barrier, 3 alpha */
  REL(comm_case(ar_case("hier", 8, 4)), 3e-5 + 6e-5 + 0.012 + 7.5e-5 + 2e-5 + 0.002 + 1.25e-5);
  /* G = 1 and G = N are the flat ring */
  REL(comm_case(ar_case("hier", 8, 1)), comm_case(ar_case("ring", 8, 0)));
  REL(comm_case(ar_case("hier", 8, 8)), comm_case(ar_case("ring", 8, 0)));
  /* N=5, G=2: two groups of 2 (ring of 2 on K, ring of 2 on K/2) and the
   * fifth rank folded in and out: 2 (alpha + K beta) + K gamma; the
   * barrier 3 alpha */
  REL(comm_case(ar_case("hier", 5, 2)), 3e-5 + (2e-5 + 0.008 + 5e-5) + (2e-5 + 0.004 + 2.5e-5) +
                                            2 * (1e-5 + 0.008) + 1e-4);
  /* tree N=4 in segments of K/16: 4 are posted ahead and arrive
   * together, so the pipeline moves units of M = K/4 (S = 4), D = 2, 5
   * stages each way (2 alpha and the root's 2 M gamma a stage).  In unit
   * times of M beta: rank 3's first unit reaches 1 after 1, the root
   * takes 1's and leaf 2's through its link, 2 a unit: the first at 2,
   * the last at 8; down, the root sends each unit to 1 and 2 (2 each),
   * the last by 16, and 1 forwards it to 3 alone: 17 = 4.25 K beta (the
   * old line's 5 stages of 4 M beta: 20).  The barrier, 2 alpha. */
  sg_cost_case_t t = ar_case("tree", 4, 0);
  t.segment = K / 16;
  REL(comm_case(t), 2e-5 + 5 * (2e-5 + 2 * 250000 * 1e-10) + 17 * 250000 * 8e-9);
  /* segments of K/4: all 4 in flight at once, one unit of K: 2 stages;
   * 1 + 1 up (3 to 1, then 1 and 2 to the root: max(1 + 1, 0 + 2)), 2 + 1
   * down: 5 K beta */
  t.segment = K / 4;
  REL(comm_case(t), 2e-5 + 2 * (2e-5 + 2 * K * 1e-10) + 5 * K * 8e-9);
  /* N = 2: one child, K up then K down; the barrier, one alpha */
  t.N = 2, t.segment = K;
  REL(comm_case(t), 1e-5 + 2e-5 + 2 * 0.008 + 1e-4);
  /* overlap: true has no barrier */
  t.overlap = 1;
  REL(comm_case(t), 2e-5 + 2 * 0.008 + 1e-4);
}

/* The heap's deepest level, one segment (unit times of K beta, gamma and
 * the barrier as in the line).  N = 16 = 2^4: up, 15 to 7 takes 1, 7's
 * and leaf 8's to 3 end at max(1 + 1, 0 + 2) = 2, then 2 a level: the
 * root has the sum at 6; down, 2 a level to 7 (12), 7 to its only child
 * 15 one more: 13, where 4 stages of 4 K beta (the line before) made 16.
 * N = 7 (full): 4 + 4 = 8, the 4D of every full tree.  N = 6 (5 is
 * 2's only child): the root takes 1's (at 2) and 2's (at 1) by
 * max(2 + 1, 1 + 2) = 3, down 2 + 2: 7.  N = 5 (2 a leaf): max(2 + 1, 0 +
 * 2) = 3, down 4: 7.  N = 32: a level more each way, 8 + 9 = 17.  The
 * line before made 16, 8, 8, 8 and 20. */
TEST(tree_follows_the_heaps_deepest_level) {
  const struct { int n; double units; } want[] = {{16, 13}, {7, 8}, {6, 7}, {5, 7}, {32, 17}};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    sg_cost_case_t t = ar_case("tree", want[i].n, 0);
    int D = want[i].n >= 16 ? (want[i].n >= 32 ? 5 : 4) : 2;
    double barrier = ceil(log2(want[i].n)) * 1e-5;
    t.segment = K;
    REL(comm_case(t), barrier + D * (2e-5 + 2 * K * 1e-10) + want[i].units * K * 8e-9);
  }
}

TEST(two_level_network_favours_hier) {
  /* racks of 4, uplink oversubscribed 8:1 (half a link for 4 ranks),
   * 100 us more per message between racks.  ring N=8: one flow per
   * uplink, beta x 8/4 = 2, every step crosses: 14 (alpha + 100 us); the
   * barrier's 3 rounds cross too */
  sg_cost_case_t r = ar_case("ring", 8, 0), h = ar_case("hier", 8, 4);
  r.rack = h.rack = 4, r.oversub = h.oversub = 8, r.rack_alpha = h.rack_alpha = 1e-4;
  REL(comm_case(r), 17 * 1.1e-4 + 2 * 0.875 * K * 16e-9 + 0.875 * K * 1e-10);
  /* hier with G = 4 = rack: inside as flat; across, 4 flows per uplink
   * (beta x 4 x 8 / 4 = 8), 2 steps of alpha + 100 us */
  REL(comm_case(h), 3 * 1.1e-4 + 6e-5 + 0.012 + 7.5e-5 + 2 * 1.1e-4 + 0.25 * K * 64e-9 + 1.25e-5);
  CHECK(comm_case(h) < comm_case(r));
  /* not oversubscribed and no extra latency: the flat numbers */
  r.oversub = h.oversub = 1, r.rack_alpha = h.rack_alpha = 0;
  REL(comm_case(r), comm_case(ar_case("ring", 8, 0)));
  REL(comm_case(h), comm_case(ar_case("hier", 8, 4)));
}

/* The number in `"key": value` after the n-th (0-based) occurrence of
 * `"case": "<label>"` in JSON text; NAN when absent. */
static double json_num(const char *text, const char *label, int n, const char *key) {
  char pat[64], kp[48];
  snprintf(pat, sizeof pat, "\"case\": \"%s\"", label);
  snprintf(kp, sizeof kp, "\"%s\": ", key);
  const char *p = text;
  for (int i = 0; i <= n && p; i++)
    if ((p = strstr(p, pat))) p += strlen(pat);
  const char *end = p ? strchr(p, '}') : NULL, *k = p ? strstr(p, kp) : NULL;
  return k && k < end ? strtod(k + strlen(kp), NULL) : NAN;
}

/* Gibiansky's worked numbers: 300M parameters (1.2 GB) at 1 GB/s, through
 * one root: 1.2 s for 2 GPUs, 10.8 s for 10; the ring at 6 GB/s:
 * 2(N-1)/N x 1.2 GB / 6 GB/s, 0.2 s at N = 2 rising to about 0.4 s,
 * whatever N. */
TEST(whatif_reproduces_the_worked_numbers) {
  char out[16384];
  char *root[] = {"sgdlab", "model", "--what-if", "--params", "300M", "--link", "1GB/s",
                  "--latency", "0", "--gamma", "0", "--workers", "2,10", "--engines", "root",
                  "--json", NULL};
  CHECK_EQ_INT(ru_run(root, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  size_t where = 0;
  CHECK_MSG(jc_valid(out, &where), "not JSON at byte %zu", where);
  REL(json_num(out, "root", 0, "step_s"), 1.2);
  REL(json_num(out, "root", 1, "step_s"), 10.8);
  REL(json_num(out, "root", 1, "beta_s"), 10.8); /* all of it is bandwidth */
  char *ring[] = {"sgdlab", "model", "--what-if", "--bytes", "1.2G", "--link", "6GB/s",
                  "--latency", "0", "--gamma", "0", "--workers", "2,10,40,1000", "--engines",
                  "ring", "--json", NULL};
  CHECK_EQ_INT(ru_run(ring, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  CHECK(jc_valid(out, NULL));
  const int ns[] = {2, 10, 40, 1000};
  for (int i = 0; i < 4; i++) {
    double t = json_num(out, "ring", i, "step_s");
    REL(t, 2.0 * (ns[i] - 1) / ns[i] * 1.2e9 / 6e9);
    CHECK(t <= 0.4 && t >= 0.2);
  }
  CHECK_NEAR(json_num(out, "ring", 3, "step_s"), 0.4, 1e-3);
  /* the table: each term and the step, in ms */
  char *table[] = {"sgdlab", "model", "--what-if", "--bytes", "1.2G", "--link", "6GB/s",
                   "--latency", "10us", "--gamma", "0", "--workers", "40", "--engines", "ring",
                   NULL};
  CHECK_EQ_INT(ru_run(table, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  /* latency: 2 x 39 steps and the barrier's ceil(log2 40) = 6 rounds */
  CHECK_STR_CONTAINS(out, "ring                       40       0.8400      390.0000       "
                          "0.0000     390.8400");
}

/* --slice: a sync ps shard in C slices overlaps its pushes and replies,
 * T (1 + 1/C) for the whole shard's 2T (docs/model.md); 0 is whole. */
TEST(whatif_slices_the_ps_shard) {
  char out[4096];
  char *whole[] = {"sgdlab", "model", "--what-if", "--bytes", "64Mi", "--link", "1GB/s",
                   "--latency", "0", "--gamma", "0", "--workers", "16", "--engines", "ps",
                   "--json", NULL};
  CHECK_EQ_INT(ru_run(whole, 1, NULL, out, sizeof out), 0);
  double K = 64.0 * 1048576, T = 16 * K / 1e9, Tin = 15 * K / 1e9;
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "step_s") / (T + Tin), 1.0, 1e-8); /* %.9g */
  char *sliced[] = {"sgdlab", "model", "--what-if", "--bytes", "64Mi", "--link", "1GB/s",
                    "--latency", "0", "--gamma", "0", "--workers", "16", "--engines", "ps",
                    "--slice", "128Ki", "--json", NULL};
  CHECK_EQ_INT(ru_run(sliced, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "step_s") / (T * (1 + 1.0 / 512)), 1.0, 1e-8);
}

/* A hub takes one message at a time, each after its alpha: a ps server
 * the PUSH and the PULL of every worker (2N), a mapreduce driver every
 * executor's DONE report and every gradient it receives.  With beta and
 * gamma at 0 only those latencies are left; with one alpha per phase (the
 * formulas before this term: ps 2 alpha, mapreduce flat 2 alpha) these
 * fail. */
TEST(hubs_take_their_messages_one_at_a_time) {
  const sg_cost_params_t a = {1e-6, 0, 0, 0, 0};
  double t;
  for (int n = 1; n <= 256; n *= 4) {
    sg_cost_case_t q = {"ps", "sync", n, 1, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
    CHECK_OK(sg_cost_comm(&q, &a, &t));
    REL(t, (2.0 * n + 1) * 1e-6); /* 2N requests in, the replies at once */
    q.variant = "async";
    CHECK_OK(sg_cost_comm(&q, &a, &t));
    REL(t, 2.0 * n * 1e-6);
    /* mapreduce flat: broadcast alpha, N reports, N gradients */
    sg_cost_case_t m = {"mapreduce", "flat", n, 0, 0, 0, 2, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
    CHECK_OK(sg_cost_comm(&m, &a, &t));
    REL(t, (1.0 + 2 * n) * 1e-6);
    m.engine = "bench-mapreduce"; /* the bench's rounds have no map stage */
    CHECK_OK(sg_cost_comm(&m, &a, &t));
    REL(t, (1.0 + n) * 1e-6);
  }
  /* tree/tree N=64, depth 2: f=8; 7 broadcast rounds (ceil log2 65), 64
   * reports, a leader's 7 receives, the driver's 8 */
  sg_cost_case_t m = {"mapreduce", "tree", 64, 0, 0, 1, 2, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  CHECK_OK(sg_cost_comm(&m, &a, &t));
  REL(t, (7.0 + 64 + 7 + 8) * 1e-6);
}

/* A sync ps worker computes while its server still answers and hears the
 * others: of the in phase, (N-1) K/S beta, all but its own push,
 * (N-2) K/S beta at S = 1, can hide its compute; the hub's compute never
 * hides, and an allreduce hides nothing.  Without the overlap the step is
 * compute + communication and the first and third checks fail. */
TEST(whatif_hides_a_sync_ps_workers_compute) {
  char out[4096];
  /* K = 1 MB at 1 GB/s: K beta = 1 ms; N = 8, S = 1: out 8 ms, in 7 ms,
   * the overlap 6 ms */
  char *ps2[] = {"sgdlab", "model", "--what-if", "--bytes", "1M", "--link", "1GB/s",
                 "--latency", "0", "--gamma", "0", "--workers", "8", "--engines", "ps,ring",
                 "--compute", "2ms", "--hub-compute", "1ms", "--json", NULL};
  CHECK_EQ_INT(ru_run(ps2, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  CHECK(jc_valid(out, NULL));
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "step_s"), 0.001 + 0.015, 1e-9);
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "hidden_s"), 0.002, 1e-9);
  /* the ring: compute and hub compute add to 2 (N-1)/N K beta */
  CHECK_NEAR(json_num(out, "ring", 0, "step_s"), 0.003 + 0.00175, 1e-9);
  char *ps10[] = {"sgdlab", "model", "--what-if", "--bytes", "1M", "--link", "1GB/s",
                  "--latency", "0", "--gamma", "0", "--workers", "8", "--engines", "ps",
                  "--compute", "10ms", "--json", NULL};
  CHECK_EQ_INT(ru_run(ps10, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  /* 10 ms of compute, 6 hidden: 15 + 4 */
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "step_s"), 0.019, 1e-9);
  /* replies below the eager size end together: all 8 pushes after them,
   * nothing hidden: 2 + 16 ms */
  char *eager[] = {"sgdlab", "model", "--what-if", "--bytes", "32k", "--link", "1GB/s",
                   "--latency", "0", "--gamma", "0", "--workers", "8", "--engines", "ps",
                   "--compute", "2ms", "--eager", "64Ki", "--json", NULL};
  CHECK_EQ_INT(ru_run(eager, 1, NULL, out, sizeof out), 0);
  fprintf(stderr, "%s", out);
  /* K = 32 kB < 64 KiB, K beta = 32 us: 2 ms + 8 K beta out + 8 K beta
   * in (in turn: 7 K beta in, 6 K beta of the compute hidden) */
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "step_s"), 0.002 + 16 * 32e-6, 1e-9);
  CHECK_NEAR(json_num(out, "ps-sync-S1", 0, "hidden_s"), 0, 1e-12);
  sg_cost_case_t q = {"ps", "sync", 8, 1, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  sg_cost_split_t s;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.overlap_s, 6 * K * 8e-9);
  double in_turn = s.link_s;
  q.eager = 2 * K; /* the whole shard below it: 8 K in, not 7 K, nothing hides */
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  CHECK(s.overlap_s == 0);
  REL(s.link_s, in_turn + K * 8e-9);
  q.eager = K / 2; /* above it: blocking replies in turn, then 8 K in; 7 K hide */
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.overlap_s, 7 * K * 8e-9);
  REL(s.link_s, in_turn + K * 8e-9);
  /* S = 2 (eager below the shard: replies in turn): server k answers from
   * worker k N/S on, so a worker holds both replies only N/S replies into
   * the out phase; of the in phase's 8 K/2 less its own K, 1/S hides:
   * (N/S - 1) K/S beta = 1.5 K beta, not 3 (planted: the window of S = 1
   * applied to S servers gives 3 and fails here) */
  q.S = 2;
  q.eager = K / 4;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.overlap_s, 1.5 * K * 8e-9);
  q.S = 1;
  q.eager = 0;
  q.variant = "async"; /* no barrier, nothing to wait out */
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  CHECK(s.overlap_s == 0);
}

/* sgdlab model --what-if's step of sync ps, S = 2, N = 8, 32 kB at
 * 1 GB/s, no latency, under --eager EAGER; -1 where it did not run. */
static double whatif_ps2_step(const char *eager) {
  char out[4096];
  char *argv[] = {"sgdlab", "model", "--what-if", "--bytes", "32k", "--link", "1GB/s",
                  "--latency", "0", "--gamma", "0", "--workers", "8", "--servers", "2",
                  "--engines", "ps", "--eager", (char *)eager, "--json", NULL};
  if (ru_run(argv, 1, NULL, out, sizeof out) != 0) return -1;
  fprintf(stderr, "--eager %s: %s", eager, out);
  return json_num(out, "ps-sync-S2", 0, "step_s");
}

/* Shards below the eager size whose bytes move only once received
 * (SimGrid's own thresholds: replies that end together, pushes taken one
 * at a time): the worker whose push was a server's N-th sends its PULL
 * after the release, gets its replies last and pushes last; every server
 * takes it last, all S at once, so its S shards cross its own link
 * together: the last push costs K beta, not K/S beta.  By hand, N = 8,
 * S = 2, K = 1 MB, eager 1 MB: out 4 K beta = 32 ms, in 4 K beta + K/2
 * beta = 36 ms, 17 alpha, 4 K gamma.  The formula without the tie gives
 * 64.57 ms and fails. */
TEST(ps_shards_below_eager_meet_on_the_last_workers_link) {
  sg_cost_case_t q = {"ps", "sync", 8, 2, 0, 0, 0, K, 1, 1, 1, 0, 0, 0, 0, 0, 0, NULL, 0, 0, 0};
  sg_cost_split_t s;
  q.eager = K; /* shard K/2 below it */
  q.eager_matched = 1;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.link_s, 17e-5 + 0.032 + 0.036 + 4e-4);
  CHECK(s.overlap_s == 0);
  /* bytes that move when sent (an MPI library's eager protocol): no
   * server takes them in turn, no tie, 4 K in */
  q.eager_matched = 0;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.link_s, 17e-5 + 0.032 + 0.032 + 4e-4);
  q.eager_matched = 1;
  /* S = 1: no other server to meet, 8 K in as before */
  q.S = 1;
  q.eager = 2 * K;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.link_s, 17e-5 + 0.064 + 0.064 + 8e-4);
  /* shards above it (blocking replies in turn): no tie, 4 K in */
  q.S = 2;
  q.eager = K / 4;
  CHECK_OK(sg_cost_detail(&q, &P, &s));
  REL(s.link_s, 17e-5 + 0.032 + 0.032 + 4e-4);
  /* the what-if's --eager simgrid: 64 KiB, matched.  32 kB at 1 GB/s,
   * N = 8, S = 2, no latency: 8 K/2 beta out, 8 K/2 + K/2 beta in */
  CHECK_NEAR(whatif_ps2_step("simgrid"), 17 * 16e-6, 1e-12);
  /* the same size, bytes moving when sent: 8 K/2 beta in */
  CHECK_NEAR(whatif_ps2_step("64Ki"), 16 * 16e-6, 1e-12);
}

TEST(whatif_refuses_bad_input_with_one_line) {
  static const struct {
    const char *arg, *val, *msg;
  } bad[] = {
      {"--engines", "bogus", "--engines: 'bogus' is not a case"},
      {"--engines", "gossip:x", "no cost formula for engine 'gossip' variant 'x'"},
      {"--link", "6GB/sec", "--link: '6GB/sec' is not a quantity in [0, 1e15]"},
      {"--latency", "1e308", "--latency: '1e308' is not a quantity in [0, 1e15]"},
      {"--bytes", "1e16", "--bytes: '1e16' is not a quantity in [0, 1e15]"},
      {"--latency", "nan", "--latency: 'nan' is not a quantity in [0, 1e15]"},
      {"--workers", "0", "--workers: '0' is not a whole number"},
      {"--rack", "4", "--rack R goes with --topology two-level"},
      {"--eager", "-64Ki", "--eager: '-64Ki' is not a quantity in [0, 1e15]"},
      {"--hub-compute", "2 ms", "--hub-compute: '2 ms' is not a quantity in [0, 1e15]"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char out[2048];
    char *argv[] = {"sgdlab", "model", "--what-if", "--bytes", "1M", "--link", "1gbit",
                    "--gamma", "0", (char *)bad[i].arg, (char *)bad[i].val, NULL};
    CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 2);
    CHECK_STR_CONTAINS(out, bad[i].msg);
    CHECK_MSG(jc_count(out, "\n") == 1, "%s %s: not one line: %s", bad[i].arg, bad[i].val, out);
  }
}
