/* test_report.c - `sgdlab report`, `list` and `show` over fixture databases.
 *
 * The fixture is a real SQLite file with the results schema (the same
 * CREATE statements as harness/run/recorder.c) and synthetic rows whose summary
 * numbers are worked out by hand below.  Commands run in forked children
 * so their output and exit codes are checked as a user would see them;
 * gnuplot is the real one.
 */
#define _GNU_SOURCE /* nftw */
#include <ftw.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "report.h"
#include "err.h"
#include "run_util.h"
#include "test.h"

#include "fixture_schema.h"

static char tmpdir[256];

static int execf(sqlite3 *db, const char *fmt, ...) {
  char sql[2048];
  va_list ap;
  char *err = NULL;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "fixture SQL failed: %s: %s\n", err, sql);
    sqlite3_free(err);
    return -1;
  }
  return 0;
}

static int add_run(sqlite3 *db, int id, int exp, const char *engine,
                   const char *opts, const char *transport, int workers,
                   int servers, int repeat, const char *status, const char *error) {
  return execf(db,
               "INSERT INTO runs VALUES(%d, %d, '%s', '{%s, \"batch\": 64, \"lr\": 0.05,"
               " \"seed\": %d}', '%s', 'local', %d, %d, %d, %d, %d, '%s', %s%s%s,"
               " '2024-01-01T00:00:00Z', '2024-01-01T00:00:09Z', 9.5)",
               id, exp, engine, opts, 1 + repeat, transport, workers, servers,
               workers + servers, repeat, 1 + repeat, status, error ? "'" : "",
               error ? error : "NULL", error ? "'" : "");
}

static int add_eval(sqlite3 *db, int run, int step, double wall, int samples,
                    double acc) {
  return execf(db, "INSERT INTO evals VALUES(%d, %d, 0, %.17g, %d, %.17g, %.17g, %.17g)",
               run, step, wall, samples, 2.0 - acc, 2.1 - acc, acc);
}

/* 30 steps of one rank, step s starting at t0 + s * dt and lasting
 * 0.004 + 0.002 + 0.001 = 0.007 s (workers; a server or driver waits
 * 0.003 and has no loss): bytes alternate between
 * sent_even and sent_odd (recv constant); staleness = step % 3 when stale,
 * else NULL. */
static int add_steps(sqlite3 *db, int run, int rank, const char *role, int sent_even,
                     int sent_odd, int recv, int stale, double t0, double dt) {
  int server = !strcmp(role, "server") || !strcmp(role, "driver");
  for (int s = 0; s < 30; s++) {
    char loss[32], st[16];
    snprintf(loss, sizeof loss, server ? "NULL" : "%.6f", 2.0 / (1 + 0.1 * s) + 0.01 * rank);
    snprintf(st, sizeof st, stale ? "%d" : "NULL", s % 3);
    if (execf(db,
              "INSERT INTO steps VALUES(%d, %d, '%s', %d, 0, %.17g, 0.004, 0.002, %s,"
              " %d, %d, %s, %s)",
              run, rank, role, s, t0 + dt * s, server ? "0.003" : "0.001",
              s % 2 ? sent_odd : sent_even, recv, loss, st))
      return -1;
  }
  return 0;
}

/* Experiment 1 "fixture": every figure's data.  Hand-computed rows
 * (samples/s: worker step rows from the first eval after training on,
 * times batch 64 (local: workers * 64), over earliest start to latest end
 * (t_start + 0.007) of those rows; server rows do not count):
 *   local, N=1, run 1: target 0.85 reached at the 3rd eval (acc == target):
 *     1.00 s; final 0.8500; window from step 10 (the step-0 eval is not
 *     after training): 20 rows * 64 / (0.297 - 0.10) = 6497.5 -> "6497"
 *     (all 30 steps would be 6465); 0 B.
 *   ps sync, N=2, runs 2 and 3: t_target 2.0 and 4.5 -> median 3.25;
 *     final 0.88, 0.90 -> 0.8900; samples/s: run 2 (dt 0.01) 40 * 64 /
 *     0.197 = 12994.9, run 3 (dt 0.015) 2560 / (0.442 - 0.15) = 8767.1 ->
 *     median 10881.0 -> "10881" (with the server's rows: 16322); busiest
 *     rank = server: 4000 and 5000 B per step -> 4500 B = "4.39 KiB".
 *   ps ssp(2), N=2, run 4: one eval: 1.00 s, 0.9000; worker 1 steps every
 *     0.01 s from 0, worker 2 every 0.02 s from 0.005: 40 rows * 64 over
 *     0.10 .. 0.592 = 2560 / 0.492 = 5203.3 -> "5203" (worker 1 alone over
 *     its own span: 6497).
 *   allreduce ring, N=2, run 5: never reaches 0.85 -> "—"; 0.7000;
 *     dt 0.02: 2560 / (0.587 - 0.2) = 6615.0 -> "6615"; rank 0 alternates
 *     1000/3000 sent + 500 recv (mean 2500), rank 1 2400 + 500 = 2900 ->
 *     max of means 2900 B = "2.83 KiB" (the max of maxima would be 3500 B
 *     = 3.42 KiB).
 *   allreduce ring, N=4, run 6: 1.00 s; 0.8700; 80 * 64 / 0.197 =
 *     25989.8 -> "25990", efficiency 25989.8 * 2 / (4 * 6615.0) = 1.9645;
 *     3000 B = 2.93 KiB.
 *   mapreduce aggregate=tree, N=2, run 7: failed, no evals.
 * Experiment 2 "never": one local run, N=2 (batch 128 per step row), that
 * never reaches 0.85: 20 * 128 / 0.197 = 12994.9 -> "12995". */
/* Experiment 1's runs 1-7 (make_fixture). */
static int fixture_runs(sqlite3 *db) {
  /* run 1: local */
  if (add_run(db, 1, 1, "local", "\"model\": \"mlp\"", "zmq", 1, 0, 0, "ok", NULL) ||
      add_eval(db, 1, 0, 0.0, 0, 0.1) || add_eval(db, 1, 10, 0.6, 640, 0.6) ||
      add_eval(db, 1, 20, 1.0, 1280, 0.85) ||
      add_steps(db, 1, 0, "worker", 0, 0, 0, 0, 0, 0.01))
    return -1;
  /* runs 2, 3: ps sync, two repeats */
  for (int r = 2; r <= 3; r++) {
    double k = r == 2 ? 1.0 : 1.5, dt = 0.01 * k;
    if (add_run(db, r, 1, "ps", "\"mode\": \"sync\", \"staleness\": 2, \"servers\": 1",
                "zmq", 2, 1, r - 2, "ok", NULL) ||
        add_eval(db, r, 10, 1.0 * k, 1280, r == 2 ? 0.70 : 0.80) ||
        add_eval(db, r, 20, 2.0 * k, 2560, r == 2 ? 0.86 : 0.84) ||
        add_eval(db, r, 30, 3.0 * k, 3840, r == 2 ? 0.88 : 0.90) ||
        add_steps(db, r, 0, "server", 2000, 2000, r == 2 ? 2000 : 3000, 0, 0, dt) ||
        add_steps(db, r, 1, "worker", 1000, 1000, 1000, 0, 0, dt) ||
        add_steps(db, r, 2, "worker", 1000, 1000, 1000, 0, 0, dt))
      return -1;
  }
  /* run 4: ps ssp(2) */
  if (add_run(db, 4, 1, "ps", "\"mode\": \"ssp\", \"staleness\": 2, \"servers\": 1",
              "zmq", 2, 1, 0, "ok", NULL) ||
      add_eval(db, 4, 10, 1.0, 1280, 0.9) ||
      add_steps(db, 4, 0, "server", 2000, 2000, 2000, 0, 0, 0.01) ||
      add_steps(db, 4, 1, "worker", 1000, 1000, 1000, 1, 0, 0.01) ||
      add_steps(db, 4, 2, "worker", 1000, 1000, 1000, 1, 0.005, 0.02))
    return -1;
  /* runs 5, 6: allreduce ring with 2 and 4 workers */
  if (add_run(db, 5, 1, "allreduce", "\"algorithm\": \"ring\"", "zmq", 2, 0, 0, "ok", NULL) ||
      add_eval(db, 5, 10, 2.0, 1280, 0.5) || add_eval(db, 5, 20, 4.0, 2560, 0.7) ||
      add_steps(db, 5, 0, "worker", 1000, 3000, 500, 0, 0, 0.02) ||
      add_steps(db, 5, 1, "worker", 2400, 2400, 500, 0, 0, 0.02))
    return -1;
  if (add_run(db, 6, 1, "allreduce", "\"algorithm\": \"ring\"", "zmq", 4, 0, 0, "ok", NULL) ||
      add_eval(db, 6, 10, 1.0, 2560, 0.86) || add_eval(db, 6, 20, 2.0, 5120, 0.87))
    return -1;
  for (int rank = 0; rank < 4; rank++)
    if (add_steps(db, 6, rank, "worker", 1500, 1500, 1500, 0, 0, 0.01)) return -1;
  /* a server's step 0 holds the start barrier: 2 s of waiting that the
   * server_time figure leaves out */
  if (execf(db, "UPDATE steps SET wait_s = 2.0 WHERE role = 'server' AND step = 0"))
    return -1;
  /* run 7: mapreduce, failed */
  if (add_run(db, 7, 1, "mapreduce", "\"aggregate\": \"tree\"", "zmq", 2, 0, 0,
              "failed", "rank 2 (executor) on node1: deadline exceeded"))
    return -1;
  return 0;
}

/* Run 2's ranks and run_info, the bench rows, experiments 2 and 3. */
static int fixture_rest(sqlite3 *db) {
  /* ranks and run_info of run 2 */
  if (execf(db, "INSERT INTO ranks VALUES(2, 0, 'server', 'hostA', 100),"
                " (2, 1, 'worker', 'hostA', 101), (2, 2, 'worker', 'hostB', 102)") ||
      execf(db, "INSERT INTO run_info VALUES(2, 'blas', 'OpenBLAS 0.3.21 Haswell'),"
                " (3, 'blas', 'OpenBLAS 0.3.21 Haswell')"))
    return -1;
  /* allreduce bench: ring/zmq and native/mpi, 4 KiB .. 1 MiB */
  for (int b = 4096, i = 0; b <= 1 << 20; b *= 4, i++) {
    double t = 12e-6 * (1 + i * i);
    if (execf(db, "INSERT INTO bench(experiment_id, collective, impl, transport, np,"
                  " bytes, iters, t_min, t_median, t_max, algbw, busbw, wrong)"
                  " VALUES(1, 'allreduce', 'ring', 'zmq', 4, %d, 20, %g, %g, %g, %g, %g, 0),"
                  " (1, 'allreduce', 'native', 'mpi', 4, %d, 20, %g, %g, %g, %g, %g, 0)",
              b, 0.9 * t, t, 1.3 * t, b / t / 1e9, 1.5 * b / t / 1e9, b, 0.5 * t,
              0.6 * t, 0.8 * t, b / t / 0.6e9, 1.5 * b / t / 0.6e9))
      return -1;
  }
  /* experiment 2: never reaches the target */
  if (add_run(db, 8, 2, "local", "\"model\": \"mlp\"", "zmq", 2, 0, 0, "ok", NULL) ||
      add_eval(db, 8, 10, 1.0, 1280, 0.5) || add_eval(db, 8, 20, 2.0, 2560, 0.6) ||
      add_steps(db, 8, 0, "worker", 0, 0, 0, 0, 0, 0.01))
    return -1;
  /* experiment 3: a mapreduce run, its driver (rank 0) and executors */
  if (execf(db, "INSERT INTO experiments VALUES(3, 'mr', 'name: mr',"
                " '2024-01-03T00:00:00Z', 'testhost', '0.1.0')") ||
      add_run(db, 9, 3, "mapreduce", "\"broadcast\": \"flat\", \"aggregate\": \"flat\"",
              "zmq", 2, 0, 0, "ok", NULL) ||
      add_eval(db, 9, 10, 1.0, 1280, 0.5) ||
      add_steps(db, 9, 0, "driver", 2000, 2000, 2000, 0, 0, 0.01) ||
      add_steps(db, 9, 1, "executor", 1000, 1000, 1000, 0, 0, 0.01) ||
      add_steps(db, 9, 2, "executor", 1000, 1000, 1000, 0, 0, 0.01))
    return -1;
  return 0;
}

static int make_fixture(const char *path) {
  sqlite3 *db = NULL;
  int rc = -1;
  unlink(path);
  if (sqlite3_open(path, &db) != SQLITE_OK) goto done;
  if (execf(db, "%s", SCHEMA) || execf(db, "BEGIN")) goto done;
  if (execf(db, "INSERT INTO experiments VALUES(1, 'fixture', 'name: fixture',"
                " '2024-01-01T00:00:00Z', 'testhost', '0.1.0'),"
                " (2, 'never', 'name: never', '2024-01-02T00:00:00Z', 'testhost', '0.1.0')"))
    goto done;
  if (fixture_runs(db) || fixture_rest(db)) goto done;
  if (execf(db, "COMMIT")) goto done;
  rc = 0;
done:
  sqlite3_close(db);
  return rc;
}

/* A CLI command in a forked child (run_util.h: ru_call). */
#define run_cmd ru_call

static char *read_file(const char *path) {
  FILE *f = fopen(path, "r");
  char *buf = calloc(1, 1 << 17);
  if (!f || !buf) {
    if (f) fclose(f);
    free(buf);
    return NULL;
  }
  size_t n = fread(buf, 1, (1 << 17) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* 1 when path is a nonempty PNG file (8-byte signature). */
static int is_png(const char *path) {
  static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  unsigned char head[8];
  FILE *f = fopen(path, "rb");
  int ok = f && fread(head, 1, 8, f) == 8 && !memcmp(head, magic, 8);
  if (f) fclose(f);
  return ok;
}

/* 1 when path is an SVG file of nonzero size. */
static int is_svg(const char *path) {
  char *s = read_file(path);
  int ok = s && strstr(s, "<svg") && strstr(s, "</svg>");
  free(s);
  return ok;
}

static int exists(const char *dir, const char *name) {
  char p[1200];
  struct stat sb;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return stat(p, &sb) == 0;
}

static char db_path[300];

/* Remove the scratch directory at exit; SGDLAB_KEEP_TMP=1 keeps it to look
 * at the figures. */
static void cleanup(void) { ru_rm_rf(tmpdir); }

static void setup(void) {
  if (!*tmpdir) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sgreport-XXXXXX");
    if (!mkdtemp(tmpdir)) abort();
    atexit(cleanup);
    snprintf(db_path, sizeof db_path, "%s/fixture.db", tmpdir);
    if (make_fixture(db_path)) abort();
  }
}

TEST(png_check_can_fail) {
  char p[512];
  setup();
  snprintf(p, sizeof p, "%s/not.png", tmpdir);
  FILE *f = fopen(p, "w");
  CHECK(f);
  fputs("<svg></svg>\n", f);
  fclose(f);
  CHECK(!is_png(p));
  CHECK(is_svg(p));
  CHECK(!is_svg(db_path));
}

TEST(report_experiment) {
  char *out = NULL, dir[512], p[600];
  setup();
  snprintf(dir, sizeof dir, "%s/rep1", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path,
                   "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  CHECK_STR_CONTAINS(out, "summary.md");
  free(out);
  static const char *const figs[] = {
      "acc_vs_time", "acc_vs_step", "test_loss_vs_time", "loss_vs_step",
      "throughput", "efficiency", "time_breakdown", "staleness",
      "allreduce_time", "allreduce_busbw", "bytes_vs_workers", "server_time", NULL};
  for (const char *const *f = figs; *f; f++) {
    struct stat sb;
    snprintf(p, sizeof p, "%s/%s.png", dir, *f);
    CHECK_MSG(stat(p, &sb) == 0 && sb.st_size > 1000 && is_png(p), "%s", p);
    snprintf(p, sizeof p, "%s/%s.svg", dir, *f);
    CHECK_MSG(stat(p, &sb) == 0 && sb.st_size > 0 && is_svg(p), "%s", p);
    snprintf(p, sizeof p, "%s.gp", *f);
    CHECK_MSG(exists(dir, p), "%s/%s", dir, p);
  }
  CHECK(exists(dir, "evals.tsv") && exists(dir, "bench.tsv") && exists(dir, "loss.tsv"));

  snprintf(p, sizeof p, "%s/summary.md", dir);
  char *md = read_file(p);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "# Experiment fixture (id 1)");
  CHECK_STR_CONTAINS(md, "| local | 1 | 1 | ok | 1.00 | 0.8500 | 6497 | 0 B |");
  CHECK_STR_CONTAINS(md, "| ps sync | 2 | 2 | ok | 3.25 | 0.8900 | 10881 | 4.39 KiB |");
  CHECK_STR_CONTAINS(md, "| ps ssp(2) | 2 | 1 | ok | 1.00 | 0.9000 | 5203 | 3.91 KiB |");
  CHECK_STR_CONTAINS(md, "| allreduce ring | 2 | 1 | ok | — | 0.7000 | 6615 | 2.83 KiB |");
  CHECK_STR_CONTAINS(md, "| allreduce ring | 4 | 1 | ok | 1.00 | 0.8700 | 25990 | 2.93 KiB |");
  CHECK_STR_CONTAINS(md, "| mapreduce aggregate=tree | 2 | 1 | failed | — | — | — | — |");
  CHECK_STR_CONTAINS(md, "| 7 | mapreduce aggregate=tree | 2 | 0 | failed | rank 2 (executor) on node1: deadline exceeded |");
  CHECK_STR_CONTAINS(md, "| allreduce | 4.00 KiB | native | mpi | 4 | 20 | 7.2 | 6.0..9.6 |");
  CHECK_STR_CONTAINS(md, "| allreduce | 1.00 MiB | ring | zmq | 4 | 20 | 204.0 |");
  CHECK_STR_CONTAINS(md, "| blas | OpenBLAS 0.3.21 Haswell | 2 |");
  CHECK_STR_CONTAINS(md, "![acc_vs_time](acc_vs_time.png)");
  CHECK_STR_CONTAINS(md, "(staleness.svg)");
  CHECK_STR_CONTAINS(md, "**samples/s**");
  free(md);

  /* efficiency relative to the smallest N (2 for allreduce):
   * 25989.8 * 2 / (4 * 6614.99) */
  snprintf(p, sizeof p, "%s/scaling.tsv", dir);
  char *sc = read_file(p);
  CHECK(sc);
  CHECK_STR_CONTAINS(sc, "# allreduce ring\n# workers\tsamples_per_s\tefficiency\t"
                         "min\tmax\teff_min\teff_max\n"
                         "2\t6614.99\t1\t6614.99\t6614.99\t1\t1\n"
                         "4\t25989.8\t1.96447\t25989.8\t25989.8\t1.96447\t1.96447\n");
  /* ps sync's two repeats: median 10881.0 between 8767.1 and 12994.9 */
  CHECK_STR_CONTAINS(sc, "\n2\t10881\t1\t8767.12\t12994.9\t0.805726\t1.19427\n");
  free(sc);
  /* local is one process: throughput yes, scaling efficiency no */
  snprintf(p, sizeof p, "%s/efficiency.gp", dir);
  char *gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "title 'allreduce ring' noenhanced");
  CHECK(!strstr(gp, "title 'local'"));
  free(gp);
  snprintf(p, sizeof p, "%s/throughput.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "title 'local' noenhanced");
  /* a band only where a worker count has repeats: ps sync (block 1) */
  CHECK_STR_CONTAINS(gp, "'scaling.tsv' index 1 using 1:4:5 with filledcurves");
  CHECK(!strstr(gp, "index 0 using 1:4:5") && !strstr(gp, "index 3 using 1:4:5"));
  free(gp);
}

/* Bytes per step vs N: the busiest rank's mean bytes per step per run,
 * median/min/max over repeats (ps sync: the server, 4000 and 5000 B);
 * local (one process) and the failed mapreduce run have no block. */
TEST(report_bytes_vs_workers) {
  char *out = NULL, dir[512], p[600];
  setup();
  snprintf(dir, sizeof dir, "%s/rep-bytes", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path,
                   "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/bytes_vs_workers.tsv", dir);
  char *t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# ps sync\n# workers\tbytes_median\tbytes_min\tbytes_max\n"
                        "2\t4500\t4000\t5000\n");
  CHECK_STR_CONTAINS(t, "# ps ssp(2)\n# workers\tbytes_median\tbytes_min\tbytes_max\n"
                        "2\t4000\t4000\t4000\n");
  /* max over ranks of each rank's mean (2900), not the max of maxima (3500) */
  CHECK_STR_CONTAINS(t, "# allreduce ring\n# workers\tbytes_median\tbytes_min\t"
                        "bytes_max\n2\t2900\t2900\t2900\n4\t3000\t3000\t3000\n");
  CHECK(!strstr(t, "# local") && !strstr(t, "mapreduce"));
  free(t);
  snprintf(p, sizeof p, "%s/bytes_vs_workers.gp", dir);
  char *gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "title 'allreduce ring' noenhanced");
  CHECK_STR_CONTAINS(gp, "with filledcurves");
  /* binary units like the tables (MiB), one decimal so that ticks 0.5 MiB
   * apart do not print the same text */
  CHECK_STR_CONTAINS(gp, "set format y '%.1b %BB'");
  CHECK_STR_CONTAINS(gp, "set ytics 2**ceil(");
  free(gp);
  snprintf(p, sizeof p, "%s/bytes_vs_workers.png", dir);
  CHECK(is_png(p));
  /* one worker count: no figure */
  snprintf(dir, sizeof dir, "%s/rep-bytes-never", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "never", "--db", db_path, "--out", dir,
               NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  CHECK(!exists(dir, "bytes_vs_workers.png") && !exists(dir, "bytes_vs_workers.tsv"));
}

/* Server/driver time: only rows with role server or driver (the fixture's
 * servers record 4/2/3 ms, its workers 4/2/1 ms: a worker row in the mean
 * would move the waiting column) from step 1 on (step 0's 2 s start
 * barrier would make it 69.6 ms), one bar per label, mean over repeats;
 * runs without a server (local, allreduce) have no bar. */
TEST(report_server_time) {
  char *out = NULL, dir[512], p[600];
  setup();
  snprintf(dir, sizeof dir, "%s/rep-server", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path,
                   "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/server_time.tsv", dir);
  char *t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# bar\tcompute_s\tcomm_s\twait_s\tvariant\n"
                        "0\t0.004\t0.002\t0.003\tps sync, N=2\n"
                        "1\t0.004\t0.002\t0.003\tps ssp(2), N=2\n");
  CHECK(!strstr(t, "allreduce") && !strstr(t, "local") && !strstr(t, "\n2\t"));
  free(t);
  snprintf(p, sizeof p, "%s/server_time.gp", dir);
  char *gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "using ($2*500):1:($2*500):(0.32) with boxxyerror");
  CHECK_STR_CONTAINS(gp, "title 'waiting for workers' noenhanced");
  free(gp);
  snprintf(p, sizeof p, "%s/server_time.png", dir);
  CHECK(is_png(p));
  /* the same rows over time: one block per variant with server rows */
  snprintf(p, sizeof p, "%s/server_timeline.tsv", dir);
  t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# ps sync, N=2\n# t_s\tbusy_ms\tcomm_ms\twait_ms\n");
  CHECK_STR_CONTAINS(t, "# ps ssp(2), N=2\n");
  CHECK(!strstr(t, "allreduce") && !strstr(t, "local"));
  free(t);
  snprintf(p, sizeof p, "%s/server_timeline.png", dir);
  CHECK(is_png(p));
  /* the mapreduce driver's rows (wait 3 ms), not its executors' (1 ms) */
  snprintf(dir, sizeof dir, "%s/rep-driver", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "mr", "--db", db_path, "--out", dir,
               NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/server_time.tsv", dir);
  t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "variant\n0\t0.004\t0.002\t0.003\tmapreduce");
  free(t);
  snprintf(dir, sizeof dir, "%s/rep-server", tmpdir);
  /* time_breakdown: milliseconds, horizontal bars stacked left to right,
   * each labelled upright on the left with its key and label */
  snprintf(p, sizeof p, "%s/time_breakdown.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "using (($2+$3/2)*1000):1:($3*500):(0.32) with boxxyerror");
  CHECK_STR_CONTAINS(gp, "'A  local, N=1' 0, 'B  ps sync, N=2' 1");
  CHECK(!strstr(gp, "rotate"));
  CHECK_STR_CONTAINS(gp, "set xlabel 'ms per step (worker mean)");
  free(gp);
}

TEST(report_target_never_reached) {
  char *out = NULL, dir[512], p[600];
  setup();
  snprintf(dir, sizeof dir, "%s/rep2", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "2", "--db", db_path,
                   "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/summary.md", dir);
  char *md = read_file(p);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "# Experiment never (id 2)");
  CHECK_STR_CONTAINS(md, "| local | 2 | 1 | ok | — | 0.6000 | 12995 | 0 B |");
  CHECK(!strstr(md, "Collective benchmark"));
  free(md);
  /* only figures with data */
  CHECK(exists(dir, "acc_vs_time.png"));
  CHECK(!exists(dir, "throughput.png"));
  CHECK(!exists(dir, "staleness.png"));
  CHECK(!exists(dir, "allreduce_time.png"));
  /* no server or driver rows (one local run): no figure over time */
  CHECK(!exists(dir, "server_timeline.gp") && !exists(dir, "server_timeline.tsv"));

  /* a higher target: nobody in experiment 1 reaches 0.95 */
  snprintf(dir, sizeof dir, "%s/rep3", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path,
               "--out", dir, "--target", "0.95", NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/summary.md", dir);
  md = read_file(p);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "| ps sync | 2 | 2 | ok | — | 0.8900 |");
  /* partial: 0.89 reached by one of two ps sync repeats (run 3) */
  free(md);
  snprintf(dir, sizeof dir, "%s/rep4", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path,
               "--out", dir, "--target", "0.89", NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/summary.md", dir);
  md = read_file(p);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "| ps sync | 2 | 2 | ok | 4.50 (1/2 reached) | 0.8900 |");
  free(md);
}

TEST(report_one_run_default_dir) {
  char *out = NULL, dir[512], p[600];
  setup();
  int rc = run_cmd(sg_cmd_report, tmpdir, &out, "report", "--run", "4", "--db",
                   db_path, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(dir, sizeof dir, "%s/results/fixture/run-4", tmpdir);
  snprintf(p, sizeof p, "%s/summary.md", dir);
  char *md = read_file(p);
  CHECK_MSG(md, "%s", p);
  CHECK_STR_CONTAINS(md, "# Run 4 of experiment fixture (id 1)");
  CHECK_STR_CONTAINS(md, "| ps ssp(2) | 2 | 1 | ok | 1.00 | 0.9000 | 5203 | 3.91 KiB |");
  CHECK(!strstr(md, "| ps sync"));
  free(md);
  snprintf(p, sizeof p, "%s/staleness.png", dir);
  CHECK(is_png(p));
  CHECK(!exists(dir, "allreduce_time.png"));
}

/* `sgdlab bench` warns under its table from one run's recorded load: a
 * load above the cores and the run's processes is named, a light one not. */
TEST(run_loaded_names_one_run) {
  setup();
  sqlite3 *db = NULL;
  char text[1024] = "";
  CHECK(sqlite3_open(db_path, &db) == SQLITE_OK);
  CHECK_OK(execf(db, "BEGIN"));
  CHECK_OK(execf(db, "INSERT INTO run_info VALUES(3, 'cores', '2'), (3, 'load.after', '99.5'),"
                     " (2, 'cores', '2'), (2, 'load.after', '0.5')"));
  CHECK_EQ_INT(sg_report_run_loaded(db, 3, text, sizeof text), 1);
  CHECK_STR_CONTAINS(text, "1 run (3) started or ended with a 1-minute load average above");
  CHECK_EQ_INT(sg_report_run_loaded(db, 2, text, sizeof text), 0);
  CHECK_EQ_INT(sg_report_run_loaded(db, 999, text, sizeof text), 0);
  CHECK_OK(execf(db, "ROLLBACK"));
  sqlite3_close(db);
}

TEST(report_errors) {
  char *out = NULL, missing[512];
  setup();
  snprintf(missing, sizeof missing, "%s/nope.db", tmpdir);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "--db", missing, NULL), 1);
  CHECK_STR_CONTAINS(out, "cannot open database");
  CHECK_STR_CONTAINS(out, "nope.db");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "nosuch", "--db", db_path, NULL), 1);
  CHECK_STR_CONTAINS(out, "no experiment named 'nosuch'");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "--run", "999", "--db", db_path, NULL), 1);
  CHECK_STR_CONTAINS(out, "no run with id 999");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "--bogus", NULL), 2);
  CHECK_STR_CONTAINS(out, "unknown option '--bogus'");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "--target", "x", NULL), 2);
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "--help", NULL), 0);
  CHECK_STR_CONTAINS(out, "usage: sgdlab report");
  free(out);
  /* no gnuplot: a clear error, before anything is written */
  setenv("SGDLAB_GNUPLOT", "/nonexistent/gnuplot", 1);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "--db", db_path, "--out",
                   "/nonexistent-dir/x", NULL);
  unsetenv("SGDLAB_GNUPLOT");
  CHECK_EQ_INT(rc, 1);
  CHECK_STR_CONTAINS(out, "gnuplot not found");
  free(out);
  /* gnuplot that fails: its exit status is checked */
  setenv("SGDLAB_GNUPLOT", "/bin/false", 1);
  char dir[512];
  snprintf(dir, sizeof dir, "%s/rep-false", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "--db", db_path, "--out", dir, NULL);
  unsetenv("SGDLAB_GNUPLOT");
  CHECK_EQ_INT(rc, 1);
  CHECK_STR_CONTAINS(out, "gnuplot failed");
  free(out);
}

TEST(list_and_show) {
  char *out = NULL;
  setup();
  CHECK_EQ_INT(run_cmd(sg_cmd_list, NULL, &out, "list", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "experiment 1  fixture");
  CHECK_STR_CONTAINS(out, "experiment 2  never");
  CHECK_STR_CONTAINS(out, "ps ssp(2)");
  CHECK_STR_CONTAINS(out, "allreduce ring");
  CHECK_STR_CONTAINS(out, "deadline exceeded");
  CHECK_STR_CONTAINS(out, "0.9000");
  CHECK_STR_CONTAINS(out, "bench: 10 rows, 2 implementations");
  free(out);

  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", "2", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "run 2 of experiment 1 (fixture)");
  CHECK_STR_CONTAINS(out, "variant          ps sync");
  CHECK_STR_CONTAINS(out, "finished_at      2024-01-01T00:00:09Z");
  CHECK_STR_CONTAINS(out, " staleness=2");
  CHECK_STR_CONTAINS(out, "hostB");
  CHECK_STR_CONTAINS(out, "OpenBLAS 0.3.21 Haswell");
  CHECK_STR_CONTAINS(out, "0.86");
  CHECK_STR_CONTAINS(out, "bytes_per_step   3.91 KiB");
  free(out);

  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", "7", "--db", db_path, NULL), 0);
  CHECK_STR_CONTAINS(out, "FAILED: rank 2 (executor) on node1: deadline exceeded");
  CHECK_STR_CONTAINS(out, "no evaluations recorded");
  free(out);

  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", "999", "--db", db_path, NULL), 1);
  CHECK_STR_CONTAINS(out, "no run with id 999");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", NULL), 2);
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", "abc", "--db", db_path, NULL), 2);
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_list, NULL, &out, "list", "--db", "/nonexistent.db", NULL), 1);
  CHECK_STR_CONTAINS(out, "cannot open database /nonexistent.db");
  free(out);
  CHECK_EQ_INT(run_cmd(sg_cmd_show, NULL, &out, "show", "--help", NULL), 0);
  CHECK_STR_CONTAINS(out, "usage: sgdlab show RUN");
  free(out);
}

/* Figures over workers of a simulated sweep (experiment "simscale" in a
 * database of its own): time per step, final accuracy and mean staleness
 * per series.  Worker step rows last 4 + 2 + 1 = 7 ms (add_steps), scaled
 * per run: ps sync [sim] N=8 7 ms, N=16 14 ms; ps sync servers=2 (N=16)
 * and servers=4 (N=32), one entry per N, are one series "servers=N/8",
 * rendered from their structured variants (_variant, whose `note` carries
 * a quote that reaches the script quoted), never from their labels ("ps
 * sync S2 ...", which spell no servers=); allreduce
 * ring N=8 0.3 ms, N=16 0.6 ms (step 0 of ps sync N=8 waits 1 s, left out):
 * medians span 0.3 .. 14 ms, more than 20x,
 * so the y axis is logarithmic; ps async N=8, 16: staleness step % 3
 * (mean 1), final accuracy 0.8 and 0.7. */
static int make_sim_fixture(const char *path) {
  sqlite3 *db = NULL;
  int rc = -1;
#define SIM_VARIANT(S)                                                                     \
  "\"servers\": \"" S "\", \"_label\": \"ps sync S" S " it''s [sim]\", \"_variant\": "      \
  "\"{\\\"engine\\\": \\\"ps\\\", \\\"servers\\\": \\\"" S "\\\", \\\"note\\\": \\\"it''s\\\"}\""
  static const struct {
    const char *opts;
    int workers, servers, stale;
    double scale, acc;
  } r[] = {{"\"_label\": \"ps sync [sim]\"", 8, 1, 0, 1, 0.9},
           {"\"_label\": \"ps sync [sim]\"", 16, 1, 0, 2, 0.9},
           {SIM_VARIANT("2"), 16, 2, 0, 1, 0.9},
           {SIM_VARIANT("4"), 32, 4, 0, 1, 0.9},
           {"\"_label\": \"allreduce ring [sim]\"", 8, 0, 0, 3 / 70.0, 0.9},
           {"\"_label\": \"allreduce ring [sim]\"", 16, 0, 0, 6 / 70.0, 0.9},
           {"\"_label\": \"ps async [sim]\"", 8, 1, 1, 1, 0.8},
           {"\"_label\": \"ps async [sim]\"", 16, 1, 1, 1, 0.7}};
  unlink(path);
  if (sqlite3_open(path, &db) != SQLITE_OK) goto done;
  if (execf(db, "%s", SCHEMA) || execf(db, "BEGIN") ||
      execf(db, "INSERT INTO experiments VALUES(1, 'simscale', 'name: simscale',"
                " '2024-01-04T00:00:00Z', 'testhost', '0.1.0')"))
    goto done;
  for (int i = 0; i < (int)(sizeof r / sizeof r[0]); i++) {
    if (add_run(db, i + 1, 1, r[i].servers ? "ps" : "allreduce", r[i].opts, "mpi",
                r[i].workers, r[i].servers, 0, "ok", NULL) ||
        execf(db, "UPDATE runs SET launcher = 'smpirun' WHERE id = %d", i + 1) ||
        add_eval(db, i + 1, 29, 1.0, 1920, r[i].acc) ||
        add_steps(db, i + 1, 1, "worker", 100, 100, 100, r[i].stale, 0, 0.01) ||
        execf(db, "UPDATE steps SET compute_s = compute_s * %.17g, comm_s = comm_s * %.17g,"
                  " wait_s = wait_s * %.17g WHERE run_id = %d",
              r[i].scale, r[i].scale, r[i].scale, i + 1))
      goto done;
  }
  /* experiment 2 "modeled": evaluations without loss or accuracy (modeled
   * compute records none) */
  if (execf(db, "INSERT INTO experiments VALUES(2, 'modeled', 'name: modeled',"
                " '2024-01-05T00:00:00Z', 'testhost', '0.1.0')"))
    goto done;
  for (int i = 0; i < 2; i++)
    if (add_run(db, 20 + i, 2, "allreduce", "\"_label\": \"allreduce rhd [sim]\"", "mpi",
                2 << i, 0, 0, "ok", NULL) ||
        execf(db, "INSERT INTO evals VALUES(%d, 29, 0, 0.5, 1920, NULL, NULL, NULL)", 20 + i) ||
        add_steps(db, 20 + i, 1, "worker", 100, 100, 100, 0, 0, 0.01))
      goto done;
  /* experiment 3 "simscale-big": the ring's sweep continued at N = 32,
   * 1.2 ms (report --join) */
  if (execf(db, "INSERT INTO experiments VALUES(3, 'simscale-big', 'name: simscale-big',"
                " '2024-01-06T00:00:00Z', 'testhost', '0.1.0')") ||
      add_run(db, 30, 3, "allreduce", "\"_label\": \"allreduce ring [sim]\"", "mpi", 32, 0, 0,
              "ok", NULL) ||
      execf(db, "UPDATE runs SET launcher = 'smpirun' WHERE id = 30") ||
      add_steps(db, 30, 1, "worker", 100, 100, 100, 0, 0, 0.01) ||
      execf(db, "UPDATE steps SET compute_s = compute_s * %.17g, comm_s = comm_s * %.17g,"
                " wait_s = wait_s * %.17g WHERE run_id = 30", 12 / 70.0, 12 / 70.0, 12 / 70.0))
    goto done;
  /* step 0 holds the start-up skew: left out of the time per step */
  if (execf(db, "UPDATE steps SET wait_s = 1.0 WHERE run_id = 1 AND step = 0") ||
      execf(db, "COMMIT"))
    goto done;
  rc = 0;
done:
  sqlite3_close(db);
  return rc;
}

/* Whether the staleness histogram draws a variant comes from the engine
 * table (ps_stale: mode ssp or async), never from the label's text: every
 * step of both runs records staleness 0, the async run's label ("lane B")
 * says nothing of asynchrony and the sync run's ("async ssp look-alike")
 * spells both words.  Drawn: the async run only. */
static int make_stale_fixture(const char *path) {
  sqlite3 *db = NULL;
  int rc = -1;
  unlink(path);
  if (sqlite3_open(path, &db) != SQLITE_OK) goto done;
  if (execf(db, "%s", SCHEMA) || execf(db, "BEGIN") ||
      execf(db, "INSERT INTO experiments VALUES(1, 'stalelabels', 'name: stalelabels',"
                " '2024-01-06T00:00:00Z', 'testhost', '0.1.0')") ||
      add_run(db, 1, 1, "ps", "\"mode\": \"async\", \"_label\": \"lane B\"", "zmq", 2, 1, 0,
              "ok", NULL) ||
      add_run(db, 2, 1, "ps", "\"mode\": \"sync\", \"_label\": \"async ssp look-alike\"",
              "zmq", 2, 1, 0, "ok", NULL))
    goto done;
  for (int r = 1; r <= 2; r++)
    if (add_eval(db, r, 29, 1.0, 1920, 0.8) ||
        add_steps(db, r, 0, "server", 100, 100, 100, 0, 0, 0.01) ||
        add_steps(db, r, 1, "worker", 100, 100, 100, 1, 0, 0.01) ||
        add_steps(db, r, 2, "worker", 100, 100, 100, 1, 0, 0.01))
      goto done;
  if (execf(db, "UPDATE steps SET staleness = 0 WHERE staleness IS NOT NULL") ||
      execf(db, "COMMIT"))
    goto done;
  rc = 0;
done:
  sqlite3_close(db);
  return rc;
}

TEST(report_staleness_from_engine_table) {
  char *out = NULL, dir[512], p[600], stale_db[320];
  setup();
  snprintf(stale_db, sizeof stale_db, "%s/stale.db", tmpdir);
  CHECK(make_stale_fixture(stale_db) == 0);
  snprintf(dir, sizeof dir, "%s/rep-stale", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "stalelabels", "--db", stale_db,
                   "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/staleness.tsv", dir);
  char *t = read_file(p);
  CHECK_MSG(t, "%s: no staleness figure for the async run", p);
  CHECK_STR_CONTAINS(t, "lane B");
  CHECK_STR_CONTAINS(t, "0\t1\t1\n"); /* every step at staleness 0 */
  CHECK_MSG(!strstr(t, "look-alike"), "the sync run is drawn: %s", t);
  free(t);
}

TEST(report_vs_workers) {
  char *out = NULL, dir[512], p[600], sim_db[320];
  setup();
  snprintf(sim_db, sizeof sim_db, "%s/sim.db", tmpdir);
  CHECK(make_sim_fixture(sim_db) == 0);
  snprintf(dir, sizeof dir, "%s/rep-vsn", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "simscale", "--db", sim_db, "--out",
                   dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/step_time.tsv", dir);
  char *t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# ps sync [sim]\n# workers\tmedian\tmin\tmax\n8\t7\t7\t7\n"
                        "16\t14\t14\t14\n");
  CHECK_STR_CONTAINS(t, "# ps sync servers=N/8 note=\"it's\" [sim]\n# workers\tmedian\tmin\tmax\n"
                        "16\t7\t7\t7\n32\t7\t7\t7\n");
  CHECK_STR_CONTAINS(t, "# allreduce ring [sim]\n# workers\tmedian\tmin\tmax\n"
                        "8\t0.3\t0.3\t0.3\n16\t0.6\t0.6\t0.6\n");
  CHECK(!strstr(t, "servers=2") && !strstr(t, "servers=4") && !strstr(t, "S2") && !strstr(t, "S4"));
  free(t);
  snprintf(p, sizeof p, "%s/step_time.gp", dir);
  char *gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "'Time per step vs workers [sim]'");
  CHECK_STR_CONTAINS(gp, "title 'ps sync servers=N/8 note=\"it''s\" [sim]' noenhanced");
  CHECK_STR_CONTAINS(gp, "set logscale x 2");
  CHECK_STR_CONTAINS(gp, "set logscale y 10");
  free(gp);
  snprintf(p, sizeof p, "%s/time_breakdown.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "'Where a step''s time goes (worker ranks) [sim]'");
  free(gp);
  snprintf(p, sizeof p, "%s/step_time.png", dir);
  CHECK(is_png(p));
  snprintf(p, sizeof p, "%s/staleness_vs_workers.tsv", dir);
  t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# ps async [sim]\n# workers\tmedian\tmin\tmax\n8\t1\t1\t1\n"
                        "16\t1\t1\t1\n");
  CHECK(!strstr(t, "# ps sync"));
  free(t);
  snprintf(p, sizeof p, "%s/acc_vs_workers.tsv", dir);
  t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# ps async [sim]\n# workers\tmedian\tmin\tmax\n8\t0.8\t0.8\t0.8\n"
                        "16\t0.7\t0.7\t0.7\n");
  free(t);
  snprintf(p, sizeof p, "%s/acc_vs_workers.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK(!strstr(gp, "logscale y")); /* accuracy: linear axis */
  free(gp);
  /* modeled compute: no accuracy or loss to draw, time per step still */
  snprintf(dir, sizeof dir, "%s/rep-vsn-modeled", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "modeled", "--db", sim_db, "--out", dir,
               NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  CHECK(!exists(dir, "acc_vs_time.png") && !exists(dir, "test_loss_vs_time.gp"));
  snprintf(p, sizeof p, "%s/step_time.png", dir);
  CHECK(is_png(p));
  /* the emulated fixture: the same figure, no [sim] in its title */
  snprintf(dir, sizeof dir, "%s/rep-vsn-emu", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "fixture", "--db", db_path, "--out", dir,
               NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  snprintf(p, sizeof p, "%s/step_time.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK_STR_CONTAINS(gp, "'Time per step vs workers'");
  CHECK(!strstr(gp, "[sim]") && !strstr(gp, "logscale y"));
  free(gp);
  snprintf(p, sizeof p, "%s/time_breakdown.gp", dir);
  gp = read_file(p);
  CHECK(gp);
  CHECK(!strstr(gp, "[sim]"));
  free(gp);
  snprintf(p, sizeof p, "%s/step_time.tsv", dir);
  t = read_file(p);
  CHECK(t);
  CHECK_STR_CONTAINS(t, "# allreduce ring\n# workers\tmedian\tmin\tmax\n2\t7\t7\t7\n4\t7\t7\t7\n");
  free(t);
}

/* The report of dir holds `want` in its file `name` (said on stderr
 * when it does not). */
static int report_has(const char *dir, const char *name, const char *want) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  char *t = read_file(p);
  int ok = t && strstr(t, want);
  if (!ok) fprintf(stderr, "%s: no '%s' in:\n%s\n", p, want, t ? t : "(unreadable)");
  free(t);
  return ok;
}

/* --join: the ring's sweep continued in another experiment (simscale-big,
 * N = 32) is one line to N = 32; without it, two lines, each named by its
 * experiment; --join with one experiment is a usage error. */
TEST(report_join) {
  char *out = NULL, dir[512], sim_db[320];
  setup();
  snprintf(sim_db, sizeof sim_db, "%s/sim.db", tmpdir);
  CHECK(make_sim_fixture(sim_db) == 0);
  snprintf(dir, sizeof dir, "%s/rep-vsn-join", tmpdir);
  int rc = run_cmd(sg_cmd_report, NULL, &out, "report", "simscale", "simscale-big", "--join",
                   "--db", sim_db, "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  CHECK(report_has(dir, "step_time.tsv", "# allreduce ring [sim]\n# workers\tmedian\tmin\tmax\n"
                   "8\t0.3\t0.3\t0.3\n16\t0.6\t0.6\t0.6\n32\t1.2\t1.2\t1.2\n"));
  CHECK(report_has(dir, "step_time.tsv", "# ps sync [sim]\n"));
  snprintf(dir, sizeof dir, "%s/rep-vsn-apart", tmpdir);
  rc = run_cmd(sg_cmd_report, NULL, &out, "report", "simscale", "simscale-big", "--db", sim_db,
               "--out", dir, NULL);
  CHECK_MSG(rc == 0, "exit %d: %s", rc, out ? out : "");
  free(out);
  CHECK(report_has(dir, "step_time.tsv", "# simscale: allreduce ring [sim]\n# workers\tmedian"
                   "\tmin\tmax\n8\t0.3\t0.3\t0.3\n16\t0.6\t0.6\t0.6\n\n"));
  CHECK(report_has(dir, "step_time.tsv", "# simscale-big: allreduce ring [sim]\n"));
  CHECK_EQ_INT(run_cmd(sg_cmd_report, NULL, &out, "report", "simscale", "--join", "--db", sim_db,
                       "--out", dir, NULL), 2);
  CHECK_STR_CONTAINS(out, "--join needs two or more experiments");
  free(out);
}
