/* test_clocks.c - ranks whose clocks are off, and the harness's
 * correction (clock_sync.h).
 *
 * A 4-rank allreduce run (zmq, then mpi) runs once with every clock right
 * and once with the test-only SGDLAB_TEST_CLOCK_SKEW_US shifting rank 1's
 * clock by +50 ms and rank 2's by -30 ms.  Checks, all by construction
 * (the harness read its time between the ping's send and its answer):
 *
 *  - the measured offsets (start and end) are minus the injected shifts
 *    within their own uncertainty; without a shift, zero within it;
 *  - samples/s (run_summary), the trace's slices (`sgdlab trace`) and the
 *    time breakdown (run_summary's phase means) of the shifted run equal
 *    those of the same run with its times put right by the known shifts
 *    (a copy of the database where t_start = t_start_raw - shift) within
 *    the measured uncertainty: what an unshifted clock would have given;
 *  - the same comparison fails for the uncorrected times (a copy where
 *    t_start = t_start_raw): the check catches a missing correction.
 *
 * The run without shifts is compared only by its offsets: its samples/s
 * is another run's on a shared machine, printed beside the others.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_util.h"
#include "test.h"

#define SKEW_ENV "1:50000,2:-30000"
static const double SKEW[4] = {0.0, 0.050, -0.030, 0.0};
#define EPS 2e-6 /* doubles of ~1.8e9 s printed to ns: below a microsecond */

static double db_real(const char *db, const char *sql) {
  char v[64];
  ru_db_text_into(db, sql, v, sizeof v);
  return v[0] ? strtod(v, NULL) : NAN;
}

static int write_cfg(const char *path, const char *transport) {
  char text[512];
  snprintf(text, sizeof text,
           "name: clocks\n"
           "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
           "           lr: 0.1, momentum: 0.9, max_steps: 300, eval_every: 100, seed: 3}\n"
           "workers: 4\n"
           "transport: %s\n"
           "deadline: 60\n"
           "engines:\n"
           "  - allreduce\n", transport);
  return ru_write_file(path, text);
}

/* Run `run`'s measured offsets are -shift within their uncertainty, at
 * the start and at the end; the largest uncertainty into *umax. */
static int offsets_match(const char *db, int run, const double *shift, double *umax) {
  static const char *const cols[2][2] = {{"clock_offset_s", "clock_unc_s"},
                                         {"clock_end_offset_s", "clock_end_unc_s"}};
  int ok = 1;
  *umax = 0;
  for (int r = 0; r < 4; r++)
    for (int e = 0; e < 2; e++) {
      char q[200];
      snprintf(q, sizeof q, "SELECT %s FROM ranks WHERE run_id=%d AND rank=%d", cols[e][0], run, r);
      double off = db_real(db, q);
      snprintf(q, sizeof q, "SELECT %s FROM ranks WHERE run_id=%d AND rank=%d", cols[e][1], run, r);
      double unc = db_real(db, q);
      fprintf(stderr, "run %d rank %d %s: injected %+.3f ms, measured %+.4f ms +- %.1f us\n", run,
              r, e ? "end" : "start", shift[r] * 1e3, -off * 1e3, unc * 1e6);
      if (!(fabs(off + shift[r]) <= unc + EPS)) ok = 0;
      if (unc > *umax) *umax = unc;
    }
  return ok;
}

/* A copy of db at copy whose run `run` has t_start = t_start_raw -
 * shift[rank] (shift NULL: = t_start_raw, no correction at all). */
static int copy_with(const char *db, const char *copy, int run, const double *shift) {
  sqlite3 *h = NULL;
  char sql[512];
  int ok = sqlite3_open(db, &h) == SQLITE_OK;
  snprintf(sql, sizeof sql, "VACUUM INTO '%s'", copy);
  ok = ok && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(h);
  h = NULL;
  ok = ok && sqlite3_open(copy, &h) == SQLITE_OK;
  snprintf(sql, sizeof sql,
           "UPDATE steps SET t_start = t_start_raw - CASE rank WHEN 0 THEN %.9f WHEN 1 THEN %.9f"
           " WHEN 2 THEN %.9f ELSE %.9f END WHERE run_id=%d",
           shift ? shift[0] : 0, shift ? shift[1] : 0, shift ? shift[2] : 0,
           shift ? shift[3] : 0, run);
  ok = ok && sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK;
  sqlite3_close(h);
  return ok ? 0 : -1;
}

/* The trace of `run` in db (sgdlab trace --out) into a malloc'd string. */
static char *trace_of(const char *dir, const char *db, int run, const char *name) {
  char out[512], id[16], *msg = NULL;
  snprintf(out, sizeof out, "%s/%s.json", dir, name);
  snprintf(id, sizeof id, "%d", run);
  int rc = ru_sgdlab_in(dir, &msg, "trace", id, "--db", db, "--out", out, (char *)NULL);
  free(msg);
  return rc == 0 ? ru_slurp(out, 64u << 20) : NULL;
}

/* The largest difference between the slices' starts ("ts", us) of two
 * traces of one run, slice by slice; -1 when they differ in count. */
static double trace_distance(const char *a, const char *b) {
  double d = 0;
  const char *p = a, *q = b;
  for (;;) {
    p = strstr(p, "\"ph\":\"X\"");
    q = strstr(q, "\"ph\":\"X\"");
    if (!p || !q) return p || q ? -1 : d;
    const char *tp = strstr(p, "\"ts\":"), *tq = strstr(q, "\"ts\":");
    if (!tp || !tq) return -1;
    double x = fabs(strtod(tp + 5, NULL) - strtod(tq + 5, NULL)) * 1e-6;
    d = x > d ? x : d;
    p = tp;
    q = tq;
  }
}

/* What a run's results are made of, from db. */
typedef struct seen {
  double sps, span, phase[3];
  char *trace;
} seen_t;

static void seen_read(seen_t *s, const char *dir, const char *db, int run, const char *name) {
  static const char *const ph[3] = {"compute_s", "comm_s", "wait_s"};
  char q[200];
  snprintf(q, sizeof q, "SELECT samples_per_s FROM run_summary WHERE run_id=%d", run);
  s->sps = db_real(db, q);
  snprintf(q, sizeof q, "SELECT t_last - t_first FROM run_summary_throughput WHERE run_id=%d", run);
  s->span = db_real(db, q);
  for (int i = 0; i < 3; i++) {
    snprintf(q, sizeof q, "SELECT %s FROM run_summary WHERE run_id=%d", ph[i], run);
    s->phase[i] = db_real(db, q);
  }
  s->trace = trace_of(dir, db, run, name);
}

/* b is a within u (the measured uncertainty): samples/s within what a
 * span off by 2u at most allows, every trace slice within u, the phase
 * means equal.  1 = the same, 0 = not (says why). */
static int same_within(const seen_t *a, const seen_t *b, double u, const char *what) {
  double tol = a->sps * (2 * u + EPS) / (a->span - 2 * u - EPS);
  double dt = a->trace && b->trace ? trace_distance(a->trace, b->trace) : -1;
  int same = fabs(a->sps - b->sps) <= tol && dt >= 0 && dt <= u + EPS;
  for (int i = 0; i < 3; i++) same = same && a->phase[i] == b->phase[i];
  fprintf(stderr, "%s: samples/s %.3f vs %.3f (|diff| %.4f, allowed %.4f); trace slices off by"
          " at most %.1f us (allowed %.1f); phases %s\n", what, a->sps, b->sps,
          fabs(a->sps - b->sps), tol, dt * 1e6, (u + EPS) * 1e6,
          a->phase[0] == b->phase[0] && a->phase[1] == b->phase[1] && a->phase[2] == b->phase[2]
              ? "equal" : "differ");
  return same;
}

static void clocks_case(const char *transport) {
  const char *dir = ru_scratch("clocks");
  CHECK(dir);
  char cfg[512], db[512], ideal[512], raw[512];
  snprintf(cfg, sizeof cfg, "%s/c.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(ideal, sizeof ideal, "%s/ideal.db", dir);
  snprintf(raw, sizeof raw, "%s/raw.db", dir);
  CHECK_EQ_INT(write_cfg(cfg, transport), 0);
  unsetenv("SGDLAB_TEST_CLOCK_SKEW_US");
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0); /* run 1: clocks right */
  setenv("SGDLAB_TEST_CLOCK_SKEW_US", SKEW_ENV, 1);
  int rc = ru_sgdlab_run(cfg, db); /* run 2: ranks 1 and 2 off */
  unsetenv("SGDLAB_TEST_CLOCK_SKEW_US");
  CHECK_EQ_INT(rc, 0);
  double u1, u;
  static const double none[4] = {0};
  CHECK(offsets_match(db, 1, none, &u1));
  CHECK(offsets_match(db, 2, SKEW, &u));
  CHECK(u > 0 && u < 0.01);
  /* the offsets are real: without a shift, run 2's would not match */
  CHECK(!offsets_match(db, 2, none, &u1));
  CHECK_EQ_INT(copy_with(db, ideal, 2, SKEW), 0);
  CHECK_EQ_INT(copy_with(db, raw, 2, NULL), 0);
  seen_t got, want, bare, plain;
  seen_read(&got, dir, db, 2, "got");
  seen_read(&want, dir, ideal, 2, "ideal");
  seen_read(&bare, dir, raw, 2, "raw");
  seen_read(&plain, dir, db, 1, "plain");
  CHECK(got.trace && want.trace && bare.trace);
  /* the span must dwarf the uncertainty for the samples/s comparison to
   * mean anything (a fast, quiet machine runs these steps in ~0.1 s) */
  CHECK_MSG(got.span > 20 * u, "span %.4f s against uncertainty %.6f s", got.span, u);
  fprintf(stderr, "%s: samples/s without skew (run 1) %.1f; with skew, corrected %.1f,"
          " uncorrected %.1f; span %.4f s\n", transport, plain.sps, got.sps, bare.sps, got.span);
  CHECK(same_within(&want, &got, u, "corrected vs clocks put right"));
  CHECK(!same_within(&want, &bare, u, "uncorrected vs clocks put right"));
  free(got.trace);
  free(want.trace);
  free(bare.trace);
  free(plain.trace);
}

TEST(zmq_offsets_measured_and_removed) { clocks_case("zmq"); }
TEST(mpi_offsets_measured_and_removed) { clocks_case("mpi"); }

/* The skew setting is checked before anything launches: one line naming
 * the entry, exit 2. */
TEST(bad_skew_setting_is_refused_before_launch) {
  const char *dir = ru_scratch("clocks-bad");
  CHECK(dir);
  char cfg[512], db[512];
  snprintf(cfg, sizeof cfg, "%s/c.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK_EQ_INT(write_cfg(cfg, "zmq"), 0);
  setenv("SGDLAB_TEST_CLOCK_SKEW_US", "1:50000,2:3e5", 1);
  char *out = NULL;
  int rc = ru_sgdlab_in(dir, &out, "run", cfg, "--db", db, (char *)NULL);
  unsetenv("SGDLAB_TEST_CLOCK_SKEW_US");
  CHECK_EQ_INT(rc, 2);
  CHECK(out && strstr(out, "SGDLAB_TEST_CLOCK_SKEW_US: entry 2 (offset 8)"));
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs"), -1);
  free(out);
}
