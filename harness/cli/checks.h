/* checks.h - checks over a results database, declared as data: what
 * `sgdlab claims` (configs/claims/NAME.claim) and `sgdlab lab check`
 * (configs/labs/lab1.check, lab2.check, ...) read.  One file is YAML:
 *
 *   says: a ring allreduce moves 2K(N-1)/N bytes each way per rank
 *   experiment: ring-bytes.yaml       # claims: the experiment file to run
 *   bench: [allreduce, --np, 4, ...]   # or: a `sgdlab bench` command line
 *   name: lab1-ring-vs-ps              # labs: the experiment to grade
 *   root: true                         # needs the emulated cluster
 *   rounds: 3                          # claims: the experiment 3 times in turn
 *   quiet_load: 1                      # claims: timing failures above this
 *                                      #   load per core are INCONCLUSIVE
 *   checks:
 *     - what: ring bytes = 4K(N-1)/N   # the line printed for this check
 *       measure: bytes                 # a metric (below)
 *       where: {engine: allreduce}     # which runs (or bench rows)
 *       expect: 4*K*(N-1)/N            # every matching run: value = expr
 *       tol: 0                         #   relative; 0 = exactly
 *       bound: upper                   #   or: value <= expr (1 + tol)
 *     - measure: step_ms               # or a ratio of two medians
 *       ratio: [{engine: ps, workers: 8}, {engine: ps, workers: 2}]
 *       band: [2.5, 6]                 #   lo <= A / B <= hi
 *     - count: {engine: ps}            # or: at least `min` ok runs
 *       min: 3
 *     - same: momentum                 # or: one value of a key across
 *       where: {engine: ps}            #   the matching runs
 *       experiment: lab1-cluster       # labs: another experiment to grade
 *     - measure: bytes                 # or: a prediction handed in
 *       where: {engine: ps, workers: 8}
 *       predicted: ps_bytes_n8         #   (predictions.yaml) within tol
 *       tol: 0.02
 *     - predicted: ring_messages       # or: a prediction of a number the
 *       expect: "6"                    #   lab fixes (no measure, no run)
 *
 * Metrics (per ok run, from the run_summary view and the steps table):
 * bytes (busiest rank, sent + received per step), worker_bytes (busiest
 * worker rank), step_ms (worker compute + comm + wait), comm_ms, wait_ms,
 * comm_share (comm over the step), samples_per_s, final_acc, max_staleness,
 * params, wall_s (the harness's wall time of the run), steps (step rows
 * recorded), blame_rank (the rank a failed run blames: run_info
 * blame.rank_number; without it, an older database, blame.rank's text); of bench rows:
 * bench_us (median time per call), wrong (rows whose check failed).
 * Expressions: numbers, + - * / ( ), and K (model bytes, 4 per
 * parameter), P (parameters), N (workers), S (servers) of the run.
 * `where` keys: engine, workers, servers, repeat, transport, variant
 * (the run's name), any option of the run (mode, algorithm, delay_ms,
 * cluster.link, ...), info.KEY (a run_info value, as text: info.blame.reason),
 * status (without it only ok runs count; status: failed selects the failed
 * ones); for bench rows impl, np, bytes, transport and
 * min_bytes / max_bytes.
 */
#ifndef SG_CHECKS_H
#define SG_CHECKS_H

#include <sqlite3.h>
#include <stdint.h>

enum { CK_MAX_WHERE = 8, CK_MAX_CHECKS = 24, CK_MAX_ARGS = 24, CK_MAX_PRED = 32, CK_MAX_ROUNDS = 9 };

/* A claim's timing checks are judged only on a host whose other work
 * leaves its cores free enough: runnable processes besides the claim's,
 * per core, at most this (claims.c; a claim file's quiet_load). */
#define CK_QUIET_LOAD 1.0

typedef struct ck_kv {
  char key[40];
  char val[128];
} ck_kv_t;

typedef struct ck_where {
  ck_kv_t kv[CK_MAX_WHERE];
  int n;
} ck_where_t;

typedef enum { CK_EXPECT, CK_RATIO, CK_COUNT, CK_SAME, CK_PREDICTED } ck_kind_t;

typedef struct ck_check {
  ck_kind_t kind;
  char what[256];
  char measure[32];
  ck_where_t where, other; /* other: a ratio's denominator */
  char expr[160];          /* CK_EXPECT */
  char key[64];            /* CK_SAME: the option; CK_PREDICTED: the prediction */
  double tol, lo, hi;      /* CK_EXPECT/CK_PREDICTED: tol; CK_RATIO: band */
  int min;                 /* CK_COUNT */
  int upper;               /* CK_EXPECT: value <= expr (1 + tol), a bound */
  int points;              /* labs: what the check is worth (default 1) */
  char exp[128];           /* labs: another experiment than the file's name */
  int line;                /* where it is in its file */
} ck_check_t;

typedef struct ck_file {
  char path[512];
  char says[512];
  char experiment[256]; /* claims: file name next to the claim file */
  char name[128];       /* labs: the experiment name to grade */
  char *bench[CK_MAX_ARGS];
  int nbench;
  int root;
  int rounds;        /* claims: the experiment run this many times, in turn */
  double quiet_load; /* claims: timing failures above it are inconclusive */
  ck_check_t checks[CK_MAX_CHECKS];
  int nchecks;
} ck_file_t;

/* Predictions a student hands in: a YAML mapping name -> number. */
typedef struct ck_preds {
  char name[CK_MAX_PRED][64];
  double val[CK_MAX_PRED];
  int n;
  char path[512];
} ck_preds_t;

/* Parse `path`.  Bad input: SG_ECONFIG, one line "path:line:col: key:
 * what is wrong".  Free with ck_file_free. */
int ck_file_load(ck_file_t *f, const char *path);
void ck_file_free(ck_file_t *f);
int ck_preds_load(ck_preds_t *p, const char *path);

/* Evaluate check c over experiment exp_id: *pass 1/0, `got` the measured
 * numbers and `want` the expected shape (one line each, for printing).
 * preds may be NULL (a CK_PREDICTED check then fails: nothing handed in).
 * A database error is a negative SG_E* code. */
int ck_eval(sqlite3 *db, int64_t exp_id, const ck_check_t *c, const ck_preds_t *preds,
            int *pass, char *got, size_t gotlen, char *want, size_t wantlen);

/* The same over the rounds exps[0..n) of one experiment file (a claim's
 * `rounds`): expect, count and same look at the runs of all of them; a
 * ratio is the median over the rounds of each round's ratio of medians
 * (A and B of one round ran minutes apart at most, so a load that comes
 * and goes between rounds moves both). */
int ck_eval_rounds(sqlite3 *db, const int64_t *exps, int n, const ck_check_t *c,
                   const ck_preds_t *preds, int *pass, char *got, size_t gotlen, char *want,
                   size_t wantlen);

/* 1 when measure m is a time (or a rate): a loaded host moves it. */
int ck_is_timing(const char *m);

/* Evaluate expression e with K, P, N, S.  SG_EINVAL on a bad one. */
int ck_expr(const char *e, double K, double N, double S, double *out);

/* The latest experiment named `name` (0 = none). */
int64_t ck_latest_experiment(sqlite3 *db, const char *name);

#endif
