/* cost_model_cmd.c - `sgdlab model`: the cost model's prediction (cost_model.h)
 * next to each run's measured step time. */
#include <math.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_method.h"
#include "err.h"
#include "cost_model.h"
#include "commands.h"
#include "report.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab model [EXPERIMENT] [--db PATH] [--alpha S] [--beta S_PER_BYTE]\n"
          "                    [--gamma S_PER_BYTE] [--k BYTES] [--warmup STEPS] [--fit-min BYTES]\n"
          "\n"
          "Predict each run's step time with the alpha-beta-gamma model (docs/model.md) and\n"
          "print it beside the measured one.  compute = the run's own median compute_s;\n"
          "communication = the engine's formula.  alpha and beta come from `bench allreduce`\n"
          "ring rows in the same database recorded with the run's cluster.link, zmq_auth and\n"
          "transport (the latest such bench experiment, its smallest np, sizes >= --fit-min);\n"
          "gamma is timed here (float sum of 16 MiB).  Options override them.\n"
          "\n"
          "  EXPERIMENT       name (latest with it) or id; default the latest experiment\n"
          "  --db PATH        results database (default " SG_DEFAULT_DB ")\n"
          "  --alpha S        seconds per message\n"
          "  --beta S         seconds per byte of a link (8e-9 is 1 Gbit/s)\n"
          "  --gamma S        seconds per byte of summation\n"
          "  --k BYTES        model bytes K (default: from the run's model and dataset)\n"
          "  --warmup STEPS   steps left out of the medians (default 5)\n"
          "  --fit-min BYTES  smallest bench size in the fit (default 1048576: above the\n"
          "                   link's token bucket, which lets smaller messages through at\n"
          "                   memory speed)\n"
          "\n"
          "Columns: measured = median step period of the workers (t_start to the next\n"
          "t_start) after the warm-up; ratio = measured / predicted total.\n");
}

typedef struct margs {
  const char *db, *sel;
  double alpha, beta, gamma, k; /* < 0: not given */
  double warmup, fit_min;
} margs_t;

#define MARGS_DEFAULT {SG_DEFAULT_DB, NULL, -1, -1, -1, -1, 5, 1 << 20}

/* The numeric options and where they go. */
static const struct {
  const char *flag;
  size_t off;
} NUM_OPTS[] = {
    {"--alpha", offsetof(margs_t, alpha)}, {"--beta", offsetof(margs_t, beta)},
    {"--gamma", offsetof(margs_t, gamma)}, {"--k", offsetof(margs_t, k)},
    {"--warmup", offsetof(margs_t, warmup)}, {"--fit-min", offsetof(margs_t, fit_min)},
};

/* A finite number in [0, 1e15]; -1 with a one-line message otherwise. */
static int parse_num(const char *flag, const char *v, double *out) {
  char *end;
  double d = v ? strtod(v, &end) : 0;
  if (!v || end == v || *end || !isfinite(d) || d < 0 || d > 1e15) {
    fprintf(stderr, "sgdlab model: %s: expected a number in [0, 1e15], got '%s'\n", flag,
            v ? v : "");
    return -1;
  }
  *out = d;
  return 0;
}

/* 0, 1 after --help, -1 after a message. */
static int parse_args(int argc, char **argv, margs_t *a) {
  *a = (margs_t)MARGS_DEFAULT;
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    size_t n = 0, nn = sizeof NUM_OPTS / sizeof NUM_OPTS[0];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) return usage(stdout), 1;
    while (n < nn && strcmp(s, NUM_OPTS[n].flag)) n++;
    if (n < nn) {
      if (parse_num(s, v, (double *)((char *)a + NUM_OPTS[n].off)) < 0) return -1;
      i++;
    } else if (!strcmp(s, "--db") && v) {
      a->db = argv[++i];
    } else if (s[0] != '-' && !a->sel) {
      a->sel = s;
    } else {
      fprintf(stderr, "sgdlab model: unknown or incomplete argument '%s' (see --help)\n", s);
      return -1;
    }
  }
  return 0;
}

static const char *safe(const char *s, char *out, size_t cap);

/* One run's row of the table, as read from the database. */
typedef struct mrun {
  long long id;
  char engine[32], variant[16], link[64], auth[16], transport[16], label[48];
  sg_cost_case_t c;
  double compute, measured;
} mrun_t;

/* Median of the first column of sql's rows (bound to run id and warm-up);
 * NAN when there is none. */
static double median_of(sqlite3 *db, const char *sql, long long run, long long warm, int diffs) {
  sqlite3_stmt *st = NULL;
  double *v = NULL, prev = NAN, m = NAN;
  size_t n = 0, cap = 0;
  int prev_rank = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return NAN;
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int64(st, 2, warm);
  while (sqlite3_step(st) == SQLITE_ROW) {
    double x = sqlite3_column_double(st, 0);
    int rank = sqlite3_column_int(st, 1);
    if (diffs) { /* step periods: successive t_start of one rank */
      double d = rank == prev_rank ? x - prev : NAN;
      prev = x, prev_rank = rank;
      if (isnan(d)) continue;
      x = d;
    }
    if (n == cap) {
      double *g = realloc(v, (cap = cap ? 2 * cap : 256) * sizeof *v);
      if (!g) break;
      v = g;
    }
    v[n++] = x;
  }
  sqlite3_finalize(st);
  if (n) {
    qsort(v, n, sizeof *v, sg_cmp_double);
    m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  }
  free(v);
  return m;
}

#define WORKER_ROWS " FROM steps WHERE run_id = ?1 AND step >= ?2 AND role IN ('worker','executor')"

static void run_medians(sqlite3 *db, mrun_t *r, long long warm) {
  r->compute = median_of(db, "SELECT compute_s, rank" WORKER_ROWS, r->id, warm, 0);
  r->measured = median_of(db, "SELECT t_start, rank" WORKER_ROWS " ORDER BY rank, step", r->id, warm, 1);
  if (r->c.sparse) /* the bytes a sparse worker really moves per step, each way */
    r->c.K = median_of(db, "SELECT (bytes_sent + bytes_recv) / 2.0, rank" WORKER_ROWS, r->id, warm, 0);
}

/* Model bytes from the run's model and dataset: 4 bytes per parameter of
 * the dense layers features -> hidden... -> classes (softmax: one layer);
 * 0 when the feature count is not in the options. */
static double model_bytes(const char *model, const char *hidden, const char *dataset,
                          long features, long classes) {
  long d = features > 0 ? features
           : (!strcmp(dataset, "fashion-mnist") || !strcmp(dataset, "mnist")) ? 784 : 0;
  double n = 0;
  long in = d;
  if (!d || classes < 1) return 0;
  if (!strcmp(model, "mlp"))
    for (const char *p = hidden; *p;) {
      char *end;
      long h = strtol(p, &end, 10);
      if (end == p) { p++; continue; }
      n += (double)in * h + h, in = h, p = end;
    }
  n += (double)in * classes + classes;
  return 4 * n;
}

static const char RUN_SQL[] =
    "SELECT id, engine, coalesce(workers, 0),"
    " coalesce(json_extract(options_json, '$.algorithm'), json_extract(options_json, '$.impl'),"
    "          json_extract(options_json, '$.mode'), json_extract(options_json, '$.broadcast'), ''),"
    " coalesce(json_extract(options_json, '$.servers'), 1),"
    " coalesce(json_extract(options_json, '$.sparse'), 0),"
    " coalesce(json_extract(options_json, '$.aggregate'), 'flat'),"
    " coalesce(json_extract(options_json, '$.depth'), 2),"
    " coalesce(json_extract(options_json, '$.\"cluster.link\"'), ''),"
    " coalesce(json_extract(options_json, '$.zmq_auth'), ''), coalesce(transport, ''),"
    " coalesce(json_extract(options_json, '$.model'), ''),"
    " coalesce(json_extract(options_json, '$.hidden'), ''),"
    " coalesce(json_extract(options_json, '$.dataset'), ''),"
    " coalesce(json_extract(options_json, '$.features'), 0),"
    " coalesce(json_extract(options_json, '$.classes'), 10)"
    " FROM runs WHERE experiment_id = ?1 AND status = 'ok'"
    " AND json_extract(options_json, '$._bench_max_bytes') IS NULL ORDER BY id";

#define TXT(i) ((const char *)sqlite3_column_text(st, i) ? (const char *)sqlite3_column_text(st, i) : "")

static void read_run(sqlite3_stmt *st, mrun_t *r, double k) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  snprintf(r->engine, sizeof r->engine, "%s", TXT(1));
  snprintf(r->variant, sizeof r->variant, "%s", TXT(3));
  snprintf(r->link, sizeof r->link, "%s", TXT(8));
  snprintf(r->auth, sizeof r->auth, "%s", TXT(9));
  snprintf(r->transport, sizeof r->transport, "%s", TXT(10));
  r->c = (sg_cost_case_t){.engine = r->engine, .variant = r->variant,
                          .N = sqlite3_column_int(st, 2), .S = sqlite3_column_int(st, 4),
                          .sparse = sqlite3_column_int(st, 5),
                          .tree_aggregate = !strcmp(TXT(6), "tree"),
                          .depth = sqlite3_column_int(st, 7)};
  r->c.K = k >= 0 ? k
                  : model_bytes(TXT(11), TXT(12), TXT(13), sqlite3_column_int(st, 14),
                                sqlite3_column_int(st, 15));
  char label[sizeof r->label];
  sg_cost_label(&r->c, label, sizeof label);
  safe(label, r->label, sizeof r->label);
}

/* The bench ring rows recorded with r's link, auth and transport: the
 * latest experiment's, its smallest np. */
static const char BENCH_SQL[] =
    "SELECT b.experiment_id, b.np, b.bytes, b.t_median FROM bench b JOIN runs r"
    " ON r.experiment_id = b.experiment_id AND coalesce(json_extract(r.options_json, '$.algorithm'),"
    " json_extract(r.options_json, '$.impl')) = b.impl"
    " WHERE b.impl = 'ring' AND b.wrong = 0 AND b.np >= 2 AND b.bytes >= ?1"
    " AND coalesce(json_extract(r.options_json, '$.\"cluster.link\"'), '') = ?2"
    " AND coalesce(json_extract(r.options_json, '$.zmq_auth'), '') = ?3 AND b.transport = ?4"
    " ORDER BY b.experiment_id DESC, b.np, b.bytes";

static int fit_for(sqlite3 *db, const mrun_t *r, long long min, double gamma, sg_cost_params_t *p,
                   char *src, size_t cap) {
  sqlite3_stmt *st = NULL;
  double x[256], t[256];
  size_t n = 0;
  long long exp = -1;
  int np = 0;
  if (sqlite3_prepare_v2(db, BENCH_SQL, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "bench rows: %s", sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, min);
  sqlite3_bind_text(st, 2, r->link, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, r->auth, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, r->transport, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW && n < 256) {
    if (exp < 0) exp = sqlite3_column_int64(st, 0), np = sqlite3_column_int(st, 1);
    if (sqlite3_column_int64(st, 0) != exp || sqlite3_column_int(st, 1) != np) break;
    x[n] = (double)sqlite3_column_int64(st, 2), t[n++] = sqlite3_column_double(st, 3);
  }
  sqlite3_finalize(st);
  char l[64], a[16], tr[16];
  safe(r->link, l, sizeof l), safe(r->auth, a, sizeof a), safe(r->transport, tr, sizeof tr);
  if (n < 2)
    return sg_err_set(SG_ENOTFOUND,
                      "no bench ring rows >= %lld B for link '%s', zmq_auth '%s', transport '%s' "
                      "(run `sgdlab bench allreduce --impl ring --transport %s --set cluster.hosts=2 "
                      "--set cluster.link=%s` on this database, or give --alpha and --beta)",
                      min, l, a, tr, tr, l[0] ? l : "RATE");
  SG_CHECK(sg_cost_fit_ring(x, t, n, np, gamma, p));
  snprintf(src, cap, "%zu ring rows of bench experiment %lld, np %d", n, exp, np);
  return SG_OK;
}

/* Database text for a terminal or a markdown table: anything but letters,
 * digits and ".-_/" becomes '?' (no control sequences, no '|'). */
static const char *safe(const char *s, char *out, size_t cap) {
  size_t i = 0;
  for (; s[i] && i + 1 < cap; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             strchr(".-_/", c);
    out[i] = ok ? c : '?';
  }
  out[i] = 0;
  return out;
}

static void print_params(const mrun_t *r, const sg_cost_params_t *p, const char *src) {
  char l[64], a[16], t[16];
  printf("# link '%s', zmq_auth '%s', transport %s: alpha %.2f us, beta %.3f ns/B "
         "(%.0f Mbit/s effective), gamma %.3f ns/B  [%s]\n",
         safe(r->link, l, sizeof l), safe(r->auth, a, sizeof a), safe(r->transport, t, sizeof t),
         p->alpha * 1e6, p->beta * 1e9,
         p->beta > 0 ? 8e-6 / p->beta : 0, p->gamma * 1e9, src);
  printf("%5s %-22s %3s %9s %11s %10s %11s %12s %7s\n", "run", "engine/variant", "N", "K(MB)",
         "compute(ms)", "comm(ms)", "total(ms)", "measured(ms)", "ratio");
}

/* Parameters for r: the options, else the fit (src says which). */
static int params_for(sqlite3 *db, const margs_t *a, const mrun_t *r, double gamma,
                      sg_cost_params_t *p, char *src, size_t cap) {
  sg_cost_params_t fit = {0, 0, gamma};
  snprintf(src, cap, "given");
  if (a->alpha < 0 || a->beta < 0)
    SG_CHECK(fit_for(db, r, (long long)a->fit_min, gamma, &fit, src, cap));
  *p = (sg_cost_params_t){a->alpha >= 0 ? a->alpha : fit.alpha, a->beta >= 0 ? a->beta : fit.beta,
                          gamma};
  return SG_OK;
}

/* r's medians, parameters and predicted communication seconds. */
static int predict(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma, sg_cost_params_t *p,
                   char *src, size_t cap, double *comm) {
  run_medians(db, r, (long long)a->warmup);
  SG_CHECK(params_for(db, a, r, gamma, p, src, cap));
  return sg_cost_comm(&r->c, p, comm);
}

static int print_run(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma, char *last,
                     size_t cap) {
  sg_cost_params_t p;
  char src[160], key[400];
  double comm;
  SG_CHECK(predict(db, a, r, gamma, &p, src, sizeof src, &comm));
  snprintf(key, sizeof key, "%s|%s|%s|%s", r->link, r->auth, r->transport, src);
  if (strcmp(key, last)) print_params(r, &p, src); /* once per link and fit */
  snprintf(last, cap, "%s", key);
  double total = (isnan(r->compute) ? 0 : r->compute) + comm;
  printf("%5lld %-22s %3d %9.3f %11.2f %10.2f %11.2f %12.2f %7.2f\n", r->id, r->label, r->c.N,
         r->c.K / 1e6, r->compute * 1e3, comm * 1e3, total * 1e3, r->measured * 1e3,
         total > 0 ? r->measured / total : NAN);
  return SG_OK;
}

static int model_runs(sqlite3 *db, const margs_t *a, int64_t exp, double gamma) {
  sqlite3_stmt *st = NULL;
  char last[400] = "";
  int rc = SG_OK, rows = 0;
  if (sqlite3_prepare_v2(db, RUN_SQL, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "runs: %s", sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, exp);
  while (rc == SG_OK && sqlite3_step(st) == SQLITE_ROW) {
    mrun_t r;
    read_run(st, &r, a->k);
    if (!strcmp(r.engine, "local") || !strncmp(r.engine, "bench-", 6)) continue;
    if (!sg_cost_known(&r.c)) { /* e.g. allreduce nccl: said, not fatal */
      printf("%5lld %-22s %3d   (no cost formula for this engine and variant)\n", r.id, r.label,
             r.c.N);
      continue;
    }
    rc = print_run(db, a, &r, gamma, last, sizeof last);
    rows++;
  }
  sqlite3_finalize(st);
  if (rc == SG_OK && !rows)
    rc = sg_err_set(SG_ENOTFOUND, "experiment %lld: no finished run of a modelled engine",
                    (long long)exp);
  return rc;
}

int sg_cmd_model(int argc, char **argv) {
  margs_t a;
  sqlite3 *db = NULL;
  int64_t exp;
  double gamma;
  int pr = parse_args(argc, argv, &a);
  if (pr) return pr > 0 ? 0 : 2;
  if (sg_rdb_open(&db, a.db) < 0 || sg_rdb_experiment(db, a.sel, &exp) < 0) {
    fprintf(stderr, "sgdlab model: %s\n", sg_err_msg());
    sqlite3_close(db);
    return 2;
  }
  if (a.gamma >= 0) gamma = a.gamma;
  else if (sg_cost_measure_gamma(16u << 20, 5, &gamma) < 0) gamma = 0;
  int rc = model_runs(db, &a, exp, gamma);
  if (rc < 0) fprintf(stderr, "sgdlab model: %s\n", sg_err_msg());
  sqlite3_close(db);
  return rc < 0 ? (rc == SG_ENOTFOUND ? 2 : 1) : 0;
}

/* ---- the section of summary.md --------------------------------------- */

static void md_row(FILE *f, const mrun_t *r, const sg_cost_params_t *p, double comm) {
  double total = (isnan(r->compute) ? 0 : r->compute) + comm;
  fprintf(f, "| %lld | %s | %d | %.3f | %.1f | %.3f | %.1f | %.1f | %.1f | %.2f |\n", r->id,
          r->label, r->c.N, r->c.K / 1e6, p->alpha * 1e6, p->beta * 1e9, r->compute * 1e3,
          total * 1e3, r->measured * 1e3, r->measured / total);
}

/* One experiment's cluster runs that have bench rows to fit; 0 rows is no
 * section.  Runs without a fit are left out (the CLI says why). */
static int md_runs(FILE *f, sqlite3 *db, int64_t exp, double *gamma, int *rows) {
  margs_t a = MARGS_DEFAULT;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, RUN_SQL, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "runs: %s", sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, exp);
  while (sqlite3_step(st) == SQLITE_ROW) {
    mrun_t r;
    sg_cost_params_t p;
    char src[160];
    double comm;
    read_run(st, &r, -1);
    if (!r.link[0] || !sg_cost_known(&r.c) || !strncmp(r.engine, "bench-", 6)) continue;
    if (isnan(*gamma) && sg_cost_measure_gamma(16u << 20, 5, gamma) < 0) *gamma = 0;
    if (predict(db, &a, &r, *gamma, &p, src, sizeof src, &comm) < 0 || !(r.c.K > 0)) continue;
    if (!(*rows)++)
      fputs("\n## Cost model\n\nPredicted step time of the runs on an emulated cluster:"
            " compute (the run's median compute_s) + the engine's alpha-beta-gamma"
            " communication with alpha and beta fitted from `bench allreduce` ring rows"
            " of the same link and auth (docs/model.md; `sgdlab model` prints the"
            " same).\n\n| run | engine/variant | N | K (MB) | alpha (us) | beta (ns/B) |"
            " compute (ms) | predicted (ms/step) | measured (ms/step) | measured / predicted |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", f);
    md_row(f, &r, &p, comm);
  }
  sqlite3_finalize(st);
  return SG_OK;
}

int sg_cost_summary_md(FILE *f, sqlite3 *db, const int64_t *exps, size_t nexp) {
  double gamma = NAN; /* timed at the first run on a cluster */
  int rows = 0;
  for (size_t i = 0; i < nexp; i++) SG_CHECK(md_runs(f, db, exps[i], &gamma, &rows));
  return SG_OK;
}
