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
#include "db_path.h"
#include "report.h"
#include <strings.h>
#include <unistd.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab model [EXPERIMENT] [--db PATH] [--alpha S] [--beta S_PER_BYTE]\n"
          "                    [--gamma S_PER_BYTE] [--kappa S_PER_BYTE] [--cores C] [--k BYTES]\n"
          "                    [--warmup STEPS] [--fit-min BYTES] [--fit-max BYTES]\n"
          "                    [--plot NAME [--plot-dir DIR] [--x workers|rate]]\n"
          "       sgdlab model --what-if --link RATE --bytes B [...]   (no run: --what-if --help)\n"
          "\n"
          "Predict each run's step time with the alpha-beta-gamma model (docs/model.md) and\n"
          "print it beside the measured one.  compute = the run's own median compute_s\n"
          "(workers) + the servers' or driver's; communication = the larger of the links'\n"
          "time (the engine's formula) and the CPU's (kappa x bytes every process sends and\n"
          "receives / cores).  alpha and beta come from `bench allreduce` ring rows in the\n"
          "same database with the run's zmq_auth and transport and its cluster.link (else\n"
          "another link's, beta scaled by the rates), the smallest np; kappa from the rows\n"
          "whose np is nearest the run's process count; gamma is timed here (float sum of\n"
          "16 MiB).  Options override them.\n"
          "\n"
          "  EXPERIMENT       name (latest with it) or id; default the latest experiment\n"
          "  --db PATH        results database (default " SG_DEFAULT_DB ")\n"
          "  --alpha S        seconds per message\n"
          "  --beta S         seconds per byte of a link (8e-9 is 1 Gbit/s)\n"
          "  --gamma S        seconds per byte of summation\n"
          "  --kappa S        CPU seconds per byte sent or received by a process (0: off)\n"
          "  --cores C        cores the run's processes share (default: this machine's)\n"
          "  --k BYTES        model bytes K (default: from the run's model and dataset)\n"
          "  --warmup STEPS   steps left out of the medians (default 5)\n"
          "  --fit-min BYTES  smallest bench size in the fit (default 1048576: above the\n"
          "                   link's token bucket, which lets smaller messages through at\n"
          "                   memory speed)\n"
          "  --fit-max BYTES  largest bench size in the fit (default: any)\n"
          "  --plot NAME      also draw DIR/NAME.png (and .svg, .gp, .tsv): measured (points)\n"
          "                   and predicted (lines) ms/step per engine/variant against\n"
          "                   --x: workers (default) or rate (the run's slowest link, Mbit/s)\n"
          "\n"
          "Columns: measured = median step period of the workers (t_start to the next\n"
          "t_start) after the warm-up; ratio = measured / predicted total.\n");
}

typedef struct margs {
  const char *db, *sel;
  double alpha, beta, gamma, k; /* < 0: not given */
  double warmup, fit_min;
  double kappa, cores, fit_max; /* < 0: not given */
  const char *plot, *plot_dir, *x;
} margs_t;

#define MARGS_DEFAULT {SG_DEFAULT_DB, NULL, -1, -1, -1, -1, 5, 1 << 20, -1, -1, -1, NULL, ".", "workers"}

/* The numeric options and where they go. */
static const struct {
  const char *flag;
  size_t off;
} NUM_OPTS[] = {
    {"--alpha", offsetof(margs_t, alpha)}, {"--beta", offsetof(margs_t, beta)},
    {"--gamma", offsetof(margs_t, gamma)}, {"--k", offsetof(margs_t, k)},
    {"--warmup", offsetof(margs_t, warmup)}, {"--fit-min", offsetof(margs_t, fit_min)},
    {"--kappa", offsetof(margs_t, kappa)},   {"--cores", offsetof(margs_t, cores)},
    {"--fit-max", offsetof(margs_t, fit_max)},
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
    } else if (!strcmp(s, "--plot") && v) {
      a->plot = argv[++i];
    } else if (!strcmp(s, "--plot-dir") && v) {
      a->plot_dir = argv[++i];
    } else if (!strcmp(s, "--x") && v && (!strcmp(v, "workers") || !strcmp(v, "rate"))) {
      a->x = argv[++i];
    } else if (s[0] != '-' && !a->sel) {
      a->sel = s;
    } else {
      fprintf(stderr, "sgdlab model: unknown or incomplete argument '%s' (see --help)\n", s);
      return -1;
    }
  }
  if (a->plot && (!a->plot[0] || strchr(a->plot, '/') || a->plot[0] == '.')) {
    fprintf(stderr, "sgdlab model: --plot '%s': a file name without '/' (see --plot-dir)\n",
            a->plot);
    return -1;
  }
  return 0;
}

static const char *safe(const char *s, char *out, size_t cap);

/* One run's row of the table, as read from the database. */
typedef struct mrun {
  long long id, exp;
  char engine[32], variant[16], link[64], auth[16], transport[16], label[48];
  char name[320]; /* the run's variant as the harness named it (_label) */
  sg_cost_case_t c;
  double compute, measured, hub_compute; /* hub: ps servers', driver's compute_s */
  int procs;                             /* ranks of the run: N (+ S, + 1 driver) */
  int hosts;                             /* cluster.hosts: 0 = one host; -1 = not recorded */
  double rate_min, rate_hub, rate_med;   /* bit/s: slowest link, hub's, median worker's; 0: none */
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

#define WORKER_ROWS \
  " FROM steps WHERE run_id = ?1 AND step >= ?2 AND coalesce(kind, 'worker') <> 'hub'"

static void run_medians(sqlite3 *db, mrun_t *r, long long warm) {
  r->compute = median_of(db, "SELECT compute_s, rank" WORKER_ROWS, r->id, warm, 0);
  r->measured = median_of(db, "SELECT t_start, rank" WORKER_ROWS " ORDER BY rank, step", r->id, warm, 1);
  /* a sync server applies the update between the N-th push and the pulls,
   * a driver between aggregate and the next broadcast: on the step's path */
  r->hub_compute = median_of(db, "SELECT compute_s, rank FROM steps WHERE run_id = ?1 AND"
                             " step >= ?2 AND kind = 'hub'", r->id, warm, 0);
  if (r->c.sparse) /* the bytes a sparse worker really moves per step, each way */
    r->c.K = median_of(db, "SELECT (bytes_sent + bytes_recv) / 2.0, rank" WORKER_ROWS, r->id, warm, 0);
}

/* Model bytes from the run's model and dataset: 4 bytes per parameter of
 * the dense layers features -> hidden... -> classes (softmax: one layer;
 * cnn: its two convolutions, then 120 -> 84 -> classes);
 * 0 when the feature count is not in the options. */
static double model_bytes(const char *model, const char *hidden, const char *dataset,
                          long features, long classes) {
  long d = features > 0 ? features
           : (!strcmp(dataset, "fashion-mnist") || !strcmp(dataset, "mnist")) ? 784 : 0;
  double n = 0;
  long in = d;
  if (classes < 1 && (!strcmp(dataset, "fashion-mnist") || !strcmp(dataset, "mnist")))
    classes = 10; /* 0: the dataset's own count */
  if (!d || classes < 1) return 0;
  if (!strcmp(model, "cnn")) { /* core/model_cnn.h: convs 156 + 2416, dense p*p*16-120-84 */
    long side = lround(sqrt((double)d)), p = ((side - 4) / 2 - 4) / 2;
    n = 156 + 2416 + (double)(p * p * 16 + 1) * 120 + 121 * 84;
    in = 84;
  }
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

/* The run's columns the model reads itself; the engine reads its own
 * options (sg_cost_read). */
static const char RUN_SQL[] =
    "SELECT id, engine, coalesce(workers, 0),"
    " coalesce(json_extract(options_json, '$.\"cluster.link\"'), ''),"
    " coalesce(json_extract(options_json, '$.zmq_auth'), ''), coalesce(transport, ''),"
    " coalesce(json_extract(options_json, '$.model'), ''),"
    " coalesce(json_extract(options_json, '$.hidden'), ''),"
    " coalesce(json_extract(options_json, '$.dataset'), ''),"
    " coalesce(json_extract(options_json, '$.features'), 0),"
    " coalesce(json_extract(options_json, '$.classes'), 10), experiment_id,"
    " coalesce(json_extract(options_json, '$.\"cluster.hosts\"'), -1),"
    " coalesce(json_extract(options_json, '$._label'), engine)"
    " FROM runs WHERE experiment_id = ?1 AND status = 'ok'"
    " AND json_extract(options_json, '$._bench_max_bytes') IS NULL ORDER BY id";

#define TXT(i) ((const char *)sqlite3_column_text(st, i) ? (const char *)sqlite3_column_text(st, i) : "")

/* The slowest rate among the first `procs` hosts of a link list ("1gbit" or
 * "1gbit,1gbit,200mbit": placement spread gives every rank a host of its
 * own, hubs first) and among the first `hubs` (0: the same); 0 when the
 * list does not parse. */

/* bit/s of a rate as `cluster.link` writes it ("200mbit", "1.5gbit"); the
 * cluster validated it before the run, so here a bad one is just 0. */
static double parse_rate(const char *s) {
  static const struct {
    const char *unit;
    double mul;
  } units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
  char *end;
  double v = strtod(s, &end);
  for (size_t i = 0; end != s && v > 0 && i < sizeof units / sizeof units[0]; i++)
    if (!strcasecmp(end, units[i].unit)) return v * units[i].mul;
  return 0;
}

static void link_rates(const char *links, int procs, int hubs, double *min, double *hub,
                       double *med) {
  char buf[512];
  double bps, w[64];
  int i = 0, nw = 0;
  *min = *hub = *med = 0;
  snprintf(buf, sizeof buf, "%s", links);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t && i < procs;
       t = strtok_r(NULL, ",", &save), i++) {
    if (!((bps = parse_rate(t)) > 0)) return (void)(*min = *hub = *med = 0);
    if (!*min || bps < *min) *min = bps;
    if (i < hubs && (!*hub || bps < *hub)) *hub = bps;
    if (i >= hubs && nw < 64) w[nw++] = bps;
  }
  if (!hubs) *hub = *min;
  if (nw == 1 && procs > 1 + hubs) /* one rate for every host */
    while (nw < procs - hubs && nw < 64) w[nw] = w[0], nw++;
  if (nw) {
    qsort(w, (size_t)nw, sizeof w[0], sg_cmp_double);
    *med = w[nw / 2];
  }
}

/* The run's options as its engine reads them (runs.options_json); NULL
 * when out of memory. */
static sg_opts_t *run_opts(sqlite3 *db, long long id) {
  sqlite3_stmt *st = NULL;
  sg_opts_t *o = sg_opts_new();
  if (o && sqlite3_prepare_v2(db, "SELECT j.key, j.value FROM runs r, json_each(r.options_json) j"
                              " WHERE r.id = ?1 AND j.type NOT IN ('null', 'object', 'array')",
                              -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, id);
    while (sqlite3_step(st) == SQLITE_ROW)
      if (sg_opts_set(o, TXT(0), TXT(1)) < 0) break;
  }
  sqlite3_finalize(st);
  return o;
}

/* The run's processes and how many of them are hubs, from the engine
 * table (its layout and role kinds); N and none when the engine cannot
 * say. */
static void run_ranks(const sg_engine_t *eng, const sg_opts_t *o, int N, int *procs, int *hubs) {
  int n = N;
  *hubs = 0;
  if (eng && o && eng->layout && eng->layout(o, N, &n) < 0) n = N;
  for (int i = 0; eng && o && i < n; i++)
    *hubs += sg_engine_role_kind(eng, o, N, i) == SG_ROLE_HUB;
  *procs = n;
}

static void read_run(sqlite3 *db, sqlite3_stmt *st, mrun_t *r, double k) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  r->exp = sqlite3_column_int64(st, 11);
  snprintf(r->engine, sizeof r->engine, "%s", TXT(1));
  sg_printable(r->name, sizeof r->name, TXT(13)); /* printed on terminals */
  snprintf(r->link, sizeof r->link, "%s", TXT(3));
  snprintf(r->auth, sizeof r->auth, "%s", TXT(4));
  snprintf(r->transport, sizeof r->transport, "%s", TXT(5));
  r->hosts = sqlite3_column_int(st, 12);
  r->c = (sg_cost_case_t){.engine = r->engine, .N = sqlite3_column_int(st, 2),
                          .transport = r->transport};
  r->c.K = k >= 0 ? k
                  : model_bytes(TXT(6), TXT(7), TXT(8), sqlite3_column_int(st, 9),
                                sqlite3_column_int(st, 10));
  const sg_engine_t *eng = sg_engine_find(r->engine);
  sg_opts_t *o = run_opts(db, r->id);
  int hubs;
  sg_cost_read(eng, o, &r->c);
  snprintf(r->variant, sizeof r->variant, "%s", r->c.variant);
  r->c.variant = r->variant;
  run_ranks(eng, o, r->c.N, &r->procs, &hubs);
  sg_opts_destroy(&o);
  sg_err_clear();
  link_rates(r->link, r->procs, hubs, &r->rate_min, &r->rate_hub, &r->rate_med);
  char label[sizeof r->label];
  sg_cost_label(&r->c, label, sizeof label);
  safe(label, r->label, sizeof r->label);
}

/* The bench ring rows with r's auth and transport, r's link first (else
 * the latest other link's): per np, the rows of the latest bench
 * experiment recorded before r's experiment (else the first after it), so
 * that a machine whose load drifts is measured as the run found it.  Each
 * row's fastest iteration (t_min; the median where a row has none): on a
 * rate-limited link noise only adds time, and one size whose median a
 * loaded moment slowed (408 against 357 ms at 4 MiB, 100 Mbit/s) made
 * a three-size fit's beta 18 % too large. */
static const char BENCH_SQL[] =
    "SELECT b.experiment_id, b.np, b.bytes, coalesce(b.t_min, b.t_median),"
    " coalesce(json_extract(r.options_json, '$.\"cluster.link\"'), '') AS link"
    " FROM bench b JOIN runs r"
    " ON r.experiment_id = b.experiment_id AND coalesce(json_extract(r.options_json, '$.algorithm'),"
    " json_extract(r.options_json, '$.impl')) = b.impl"
    " WHERE b.impl = 'ring' AND b.wrong = 0 AND b.np >= 2 AND b.bytes >= ?1 AND b.bytes <= ?5"
    " AND coalesce(json_extract(r.options_json, '$.zmq_auth'), '') = ?3 AND b.transport = ?4"
    " AND link <> ''"
    " ORDER BY link = ?2 DESC, b.experiment_id < ?6 DESC,"
    " abs(b.experiment_id - ?6), b.np, b.bytes";

#define FIT_MAX_GROUPS 16
#define FIT_MAX_ROWS 64
/* Bench rows by link and np: per pair, the first (latest) experiment's. */
typedef struct fitrows {
  char link[64]; /* the first link: the run's own when it has rows */
  int ngroups, np[FIT_MAX_GROUPS];
  char glink[FIT_MAX_GROUPS][64];
  long long exp[FIT_MAX_GROUPS];
  size_t n[FIT_MAX_GROUPS];
  double x[FIT_MAX_GROUPS][FIT_MAX_ROWS], t[FIT_MAX_GROUPS][FIT_MAX_ROWS];
} fitrows_t;

static void fit_add(fitrows_t *f, const char *link, long long exp, int np, double x, double t) {
  int g = 0;
  while (g < f->ngroups && (f->np[g] != np || strcmp(f->glink[g], link))) g++;
  if (g == f->ngroups) {
    if (g == FIT_MAX_GROUPS) return;
    f->np[g] = np, f->exp[g] = exp, f->n[g] = 0, f->ngroups++;
    snprintf(f->glink[g], sizeof f->glink[g], "%s", link);
  }
  if (f->exp[g] != exp || f->n[g] == FIT_MAX_ROWS) return;
  f->x[g][f->n[g]] = x, f->t[g][f->n[g]++] = t;
}

static double rate_of(const char *link) {
  double r = 0, hub, med;
  link_rates(link, 1, 0, &r, &hub, &med);
  return r;
}

/* No rows of the run's own rate: the link whose rate is nearest (by
 * ratio), so that beta is scaled as little as possible. */
static void nearest_link(fitrows_t *f, const char *base) {
  double want = rate_of(base), best = INFINITY;
  if (!(want > 0)) return;
  for (int g = 0; g < f->ngroups; g++) {
    double r = rate_of(f->glink[g]), d = r > 0 ? fabs(log(r / want)) : INFINITY;
    if (d < best) best = d, snprintf(f->link, sizeof f->link, "%s", f->glink[g]);
  }
}

static int fit_rows(sqlite3 *db, const mrun_t *r, const margs_t *a, fitrows_t *f) {
  sqlite3_stmt *st = NULL;
  memset(f, 0, sizeof *f);
  if (sqlite3_prepare_v2(db, BENCH_SQL, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "bench rows: %s", sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, (long long)a->fit_min);
  /* a list of rates fits with its first (the hub's, most hosts') rows */
  char base[64];
  snprintf(base, sizeof base, "%.*s", (int)strcspn(r->link, ","), r->link);
  sqlite3_bind_text(st, 2, base, -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st, 3, r->auth, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, r->transport, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 5, a->fit_max >= 0 ? (long long)a->fit_max : INT64_MAX);
  sqlite3_bind_int64(st, 6, r->exp);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *l = (const char *)sqlite3_column_text(st, 4);
    if (!f->link[0]) snprintf(f->link, sizeof f->link, "%s", l ? l : "");
    fit_add(f, l ? l : "", sqlite3_column_int64(st, 0), sqlite3_column_int(st, 1),
            (double)sqlite3_column_int64(st, 2), sqlite3_column_double(st, 3));
  }
  sqlite3_finalize(st);
  if (strcmp(f->link, base)) nearest_link(f, base);
  return SG_OK;
}

/* The first link's group of the smallest np: the one the links bound
 * most; -1 when there is none. */
static int smallest_np(const fitrows_t *f) {
  int best = -1;
  for (int g = 0; g < f->ngroups; g++)
    if (!strcmp(f->glink[g], f->link) && (best < 0 || f->np[g] < f->np[best])) best = g;
  return best;
}

/* The np of any link nearest `procs` (the larger on a tie). */
static int nearest_np(const fitrows_t *f, int procs) {
  int best = f->np[0];
  for (int g = 1; g < f->ngroups; g++) {
    int d = abs(f->np[g] - procs), db = abs(best - procs);
    if (d < db || (d == db && f->np[g] > best)) best = f->np[g];
  }
  return best;
}

/* kappa at np: whatever binds a series, its slope is at least the CPU's,
 * so each link's series gives an upper bound and the least is the
 * tightest (a link-bound 100 Mbit/s series says little, a CPU-bound
 * 1 Gbit/s one says what the CPU costs).  *g: the group it came from. */
static int fit_kappa_at(const fitrows_t *f, int np, double cores, double *kappa, int *g) {
  *g = -1;
  for (int i = 0; i < f->ngroups; i++) {
    double k;
    if (f->np[i] != np || f->n[i] < 2) continue;
    SG_CHECK(sg_cost_fit_kappa(f->x[i], f->t[i], f->n[i], np, cores, &k));
    if (*g < 0 || k < *kappa) *kappa = k, *g = i;
  }
  if (*g < 0) *kappa = 0;
  return SG_OK;
}

static int fit_for(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma, double cores,
                   sg_cost_params_t *p, char *src, size_t cap) {
  fitrows_t *f = malloc(sizeof *f);
  int rc = SG_OK;
  if (!f) return sg_err_set(SG_ENOMEM, "fit: out of memory");
  SG_TRY(fit_rows(db, r, a, f));
  char l[64], au[16], tr[16];
  safe(r->link, l, sizeof l), safe(r->auth, au, sizeof au), safe(r->transport, tr, sizeof tr);
  int g0 = smallest_np(f), g = -1;
  if ((g0 < 0 || f->n[g0] < 2) && r->hosts == 0) { /* cluster.link is only a default here */
    char d[256];
    rc = sg_err_set(SG_ENOTFOUND,
                    "run %lld ran on one host (no cluster, so its link does not apply) and the "
                    "database has no bench ring rows >= %.0f B for transport '%s', zmq_auth '%s' "
                    "to fit alpha and beta: run `sgdlab bench allreduce --impl ring --transport "
                    "%s --db %s`, then sgdlab model again; or give --alpha and --beta "
                    "(docs/model.md)", r->id, a->fit_min, tr, au, tr, safe(a->db, d, sizeof d));
    goto fail;
  }
  if (g0 < 0 || f->n[g0] < 2) {
    rc = sg_err_set(SG_ENOTFOUND,
                    "no bench ring rows >= %.0f B%s for link '%s' (or any other), zmq_auth '%s', "
                    "transport '%s' (run `sgdlab bench allreduce --impl ring --transport %s --set "
                    "cluster.hosts=2 --set cluster.link=%s` on this database, or give "
                    "--alpha and --beta)", a->fit_min, a->fit_max >= 0 ? " (and <= --fit-max)" : "",
                    l, au, tr, tr, l[0] ? l : "RATE");
    goto fail;
  }
  if ((rc = sg_cost_fit_ring(f->x[g0], f->t[g0], f->n[g0], f->np[g0], gamma, p)) == SG_ERANGE) {
    char fl[64], m[256];
    snprintf(m, sizeof m, "%s", sg_err_msg());
    rc = sg_err_set(SG_ERANGE, "%s: the ring rows of np %d (bench experiment %lld, link %s) grow "
                    "no faster with the size than summation alone, as a bench on a loaded host "
                    "or below the link's token bucket does: rerun the bench on an idle host, "
                    "fit larger sizes only (--fit-min), or give --alpha and --beta", m, f->np[g0],
                    f->exp[g0], safe(f->link, fl, sizeof fl));
  }
  SG_TRY(rc);
  p->cores = cores;
  SG_TRY(fit_kappa_at(f, nearest_np(f, r->procs), cores, &p->kappa, &g));
  /* another link's fit: beta scales with the rate (the wire's share) */
  double fit_rate = 0, hub = 0, med = 0;
  link_rates(f->link, 1, 0, &fit_rate, &hub, &med);
  r->c.slow = fit_rate > 0 && r->rate_min > 0 ? fit_rate / r->rate_min : 1;
  r->c.hub = fit_rate > 0 && r->rate_hub > 0 ? fit_rate / r->rate_hub : 1;
  r->c.own = fit_rate > 0 && r->rate_med > 0 ? fit_rate / r->rate_med : 1;
  char fl[64], kl[64];
  snprintf(src, cap, "ring rows: np %d exp %lld link %s (alpha, beta); np %d exp %lld link %s (kappa)",
           f->np[g0], f->exp[g0], safe(f->link, fl, sizeof fl), g >= 0 ? f->np[g] : 0,
           g >= 0 ? f->exp[g] : 0, g >= 0 ? safe(f->glink[g], kl, sizeof kl) : "-");
fail:
  free(f);
  return rc;
}

/* Database text for a terminal or a markdown table: anything but letters,
 * digits and ".,-_/" becomes '?' (no control sequences, no '|'). */
static const char *safe(const char *s, char *out, size_t cap) {
  size_t i = 0;
  for (; s[i] && i + 1 < cap; i++) {
    char c = s[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
             strchr(".,-_/", c);
    out[i] = ok ? c : '?';
  }
  out[i] = 0;
  return out;
}

static void print_params(const mrun_t *r, const sg_cost_params_t *p, const char *src) {
  char l[64], a[16], t[16];
  printf("# link '%s', zmq_auth '%s', transport %s: alpha %.2f us, beta %.3f ns/B "
         "(%.0f Mbit/s effective), gamma %.3f ns/B, kappa %.3f ns/B on %.0f cores  [%s]\n",
         safe(r->link, l, sizeof l), safe(r->auth, a, sizeof a), safe(r->transport, t, sizeof t),
         p->alpha * 1e6, p->beta * 1e9, p->beta > 0 ? 8e-6 / p->beta : 0, p->gamma * 1e9,
         p->kappa * 1e9, p->cores, src);
  printf("%5s %-22s %3s %3s %9s %11s %9s %9s %11s %12s %7s  %s\n", "run", "engine/variant", "N",
         "P", "K(MB)", "compute(ms)", "link(ms)", "cpu(ms)", "total(ms)", "measured(ms)",
         "ratio", "run's variant");
}

/* Parameters for r: the options, else the fit (src says which). */
static int params_for(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma,
                      sg_cost_params_t *p, char *src, size_t cap) {
  double cores = a->cores > 0 ? a->cores : (double)sysconf(_SC_NPROCESSORS_ONLN);
  sg_cost_params_t fit = {0, 0, gamma, 0, cores};
  snprintf(src, cap, "given");
  if (a->alpha < 0 || a->beta < 0)
    SG_CHECK(fit_for(db, a, r, gamma, cores, &fit, src, cap));
  else if (a->kappa < 0 && fit_for(db, a, r, gamma, cores, &fit, src, cap) < 0)
    snprintf(src, cap, "given; no bench rows, so no CPU bound");
  if (a->beta >= 0) r->c.slow = r->c.hub = r->c.own = 1; /* a given beta is every link's */
  *p = (sg_cost_params_t){a->alpha >= 0 ? a->alpha : fit.alpha, a->beta >= 0 ? a->beta : fit.beta,
                          gamma, a->kappa >= 0 ? a->kappa : fit.kappa, cores};
  return SG_OK;
}

/* One run's prediction. */
typedef struct pred {
  sg_cost_params_t p;
  sg_cost_split_t split;
  double comm, total;
  char src[200];
} pred_t;

/* r's medians, parameters and predicted step: compute of the workers, the
 * communication, and the hub's update on the step's path; of the workers'
 * compute, what the links' time hides (a sync ps worker computing while
 * its server serves the others, overlap_s) is not added when the links
 * bind (when the CPU does, the cores are busy anyway). */
static int predict(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma, pred_t *q) {
  run_medians(db, r, (long long)a->warmup);
  SG_CHECK(params_for(db, a, r, gamma, &q->p, q->src, sizeof q->src));
  SG_CHECK(sg_cost_detail(&r->c, &q->p, &q->split));
  int links = q->split.link_s >= q->split.cpu_s;
  q->comm = links ? q->split.link_s : q->split.cpu_s;
  double w = isnan(r->compute) ? 0 : r->compute, hide = links ? q->split.overlap_s : 0;
  q->total = (w > hide ? w - hide : 0) + q->comm + (isnan(r->hub_compute) ? 0 : r->hub_compute);
  return SG_OK;
}

static int print_run(sqlite3 *db, const margs_t *a, mrun_t *r, double gamma, char *last,
                     size_t cap, sg_cost_point_t *pt) {
  pred_t q;
  char key[400];
  SG_CHECK(predict(db, a, r, gamma, &q));
  snprintf(key, sizeof key, "%s|%s|%s|%s", r->link, r->auth, r->transport, q.src);
  if (strcmp(key, last)) print_params(r, &q.p, q.src); /* once per link and fit */
  snprintf(last, cap, "%s", key);
  printf("%5lld %-22s %3d %3d %9.3f %11.2f %9.2f %9.2f %11.2f %12.2f %7.2f  %s\n", r->id, r->label,
         r->c.N, r->procs, r->c.K / 1e6,
         ((isnan(r->compute) ? 0 : r->compute) + (isnan(r->hub_compute) ? 0 : r->hub_compute)) *
             1e3,
         q.split.link_s * 1e3, q.split.cpu_s * 1e3, q.total * 1e3, r->measured * 1e3,
         q.total > 0 ? r->measured / q.total : NAN, r->name);
  snprintf(pt->label, sizeof pt->label, "%s", r->label);
  pt->x = !strcmp(a->x, "rate") ? r->rate_min / 1e6 : r->c.N;
  pt->predicted = q.total, pt->measured = r->measured;
  return SG_OK;
}

static int model_runs(sqlite3 *db, const margs_t *a, int64_t exp, double gamma) {
  sqlite3_stmt *st = NULL;
  char last[400] = "";
  int rc = SG_OK;
  size_t rows = 0, cap = 0;
  sg_cost_point_t *pts = NULL;
  if (sqlite3_prepare_v2(db, RUN_SQL, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "runs: %s", sqlite3_errmsg(db));
  sqlite3_bind_int64(st, 1, exp);
  while (rc == SG_OK && sqlite3_step(st) == SQLITE_ROW) {
    mrun_t r;
    read_run(db, st, &r, a->k);
    const sg_engine_t *eng = sg_engine_find(r.engine);
    if ((eng && eng->baseline) || !strncmp(r.engine, "bench-", 6)) continue;
    if (!sg_cost_known(&r.c)) { /* e.g. allreduce nccl: said, not fatal */
      printf("%5lld %-22s %3d   (no cost formula for this engine and variant)\n", r.id, r.label,
             r.c.N);
      continue;
    }
    if (rows == cap) {
      sg_cost_point_t *g = realloc(pts, (cap = cap ? 2 * cap : 32) * sizeof *pts);
      if (!g) { rc = sg_err_set(SG_ENOMEM, "model: out of memory"); break; }
      pts = g;
    }
    rc = print_run(db, a, &r, gamma, last, sizeof last, &pts[rows]);
    rows++;
  }
  sqlite3_finalize(st);
  if (rc == SG_OK && !rows)
    rc = sg_err_set(SG_ENOTFOUND, "experiment %lld: no finished run of a modelled engine",
                    (long long)exp);
  if (rc == SG_OK && a->plot)
    rc = sg_cost_plot(a->plot_dir, a->plot, !strcmp(a->x, "rate"), pts, rows);
  free(pts);
  return rc;
}

int sg_cmd_model(int argc, char **argv) {
  margs_t a;
  sqlite3 *db = NULL;
  int64_t exp;
  double gamma;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--what-if")) return sg_cmd_model_whatif(argc, argv);
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

static void md_row(FILE *f, const mrun_t *r, const sg_cost_params_t *p, double total) {
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
    pred_t q;
    read_run(db, st, &r, -1);
    if (!r.link[0] || !sg_cost_known(&r.c) || !strncmp(r.engine, "bench-", 6)) continue;
    if (isnan(*gamma) && sg_cost_measure_gamma(16u << 20, 5, gamma) < 0) *gamma = 0;
    if (predict(db, &a, &r, *gamma, &q) < 0 || !(r.c.K > 0)) continue;
    if (!(*rows)++)
      fputs("\n## Cost model\n\nPredicted step time of the runs on an emulated cluster:"
            " compute (the run's median compute_s) + the engine's alpha-beta-gamma"
            " communication with alpha and beta fitted from `bench allreduce` ring rows"
            " of the same link and auth (docs/model.md; `sgdlab model` prints the"
            " same).\n\n| run | engine/variant | N | K (MB) | alpha (us) | beta (ns/B) |"
            " compute (ms) | predicted (ms/step) | measured (ms/step) | measured / predicted |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", f);
    md_row(f, &r, &q.p, q.total);
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
