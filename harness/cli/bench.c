/* bench.c - `sgdlab bench allreduce` and `sgdlab bench step`.
 *
 * bench allreduce: nccl-tests-style microbenchmark of one step of gradient
 * communication.  The implementations are the engines' benchmark variants
 * (sg_engine_t.bench, core/bench_method.h): each is one run of its engine,
 * marked with internal keys so the ranks run the shared benchmark method
 * over the engine's round instead of training, launched like any training
 * run -- real processes over the real transport -- under the experiment
 * bench-allreduce.  Every run is planned as a pending row first.  Rank 0
 * streams one SG_REC_BENCH record per size into the `bench` table; after
 * each run this command prints that run's rows from the database:
 *
 *   size(B)  count(f32)  median(us)  min(us)  max(us)  algbw(GB/s)  busbw(GB/s)  #wrong
 *
 * bench step: single-process training-step throughput
 * (core/bench_step.h).
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_method.h"
#include "bench_step.h"
#include "commands.h"
#include "config.h"
#include "err.h"
#include "launch.h"
#include "recorder.h"
#include "report.h"
#include "run.h"
#include "settings.h"

/* Every engine's benchmark variants, in registry order: f(engine, variant). */
#define FOR_VARIANTS(e, v)                                                       \
  for (const sg_engine_t *const *e = sg_engines; *e; e++)                      \
    for (const sg_bench_variant_t *v = (*e)->bench ? (*e)->bench->variants : NULL; \
         v && v->name; v++)

static void ar_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab bench allreduce [--np N] [--sizes MIN:MAX | --counts C[,C..]]\n"
          "                              [--impl NAME[,NAME..]] [--servers S[,S..]]\n"
          "                              [--transport mpi|zmq] [--launcher auto|local|mpirun]\n"
          "                              [--iters I] [--warmup W] [--segment BYTES]\n"
          "                              [--set KEY=VALUE]...\n"
          "                              [--db PATH] [--name NAME] [-q] [-v]\n"
          "\n"
          "One step of gradient communication, timed per message size, for every\n"
          "implementation: the allreduce algorithms and the other architectures'\n"
          "equivalent (every worker ends with, or the driver holds, the sum of N buffers).\n"
          "Each implementation is one run of its engine's communication round (real\n"
          "processes over the real transport); per size: an exact correctness check\n"
          "outside the timing, W warm-up iterations, a barrier, I timed iterations whose\n"
          "time is the slowest rank's; median, min and max of those.\n"
          "\n"
          "  --np N          workers N (default 2); every implementation sums N buffers.\n"
          "                  A server or driver is an extra process.\n"
          "  --sizes MIN:MAX message sizes in bytes, powers of two from MIN to MAX (K/M/G\n"
          "                  suffixes are powers of two; default 4K:256M; ps needs >= 64)\n"
          "  --counts LIST   exact element counts (floats) instead of --sizes, for the\n"
          "                  implementations that take them (ring, rhd, tree, hier, native),\n"
          "                  comma-separated, 0 allowed (e.g. 0,1,3,5,1001: the uneven\n"
          "                  chunks a correctness check wants)\n"
          "  --impl LIST     comma-separated (default: those marked *, on this transport):\n");
  FOR_VARIANTS(e, v)
  fprintf(f, "                  %c %-15s %s%s%s\n", v->by_default ? '*' : ' ', v->name, v->help,
          v->transport ? "; transport " : "", v->transport ? v->transport : "");
  fprintf(f,
          "  --servers LIST  ps: server counts S, comma-separated (default 1)\n"
          "  --transport T   mpi (default) or zmq\n"
          "  --launcher L    auto (default: mpirun for mpi), local or mpirun\n"
          "  --iters I       timed iterations per size (default 0: about 0.2 s worth,\n"
          "                  5..1000; ps, which has no estimate, then uses 20)\n"
          "  --warmup W      untimed iterations per size (default 3)\n"
          "  --segment B     ring, rhd, tree, hier: pipeline segment (default: the\n"
          "                  engine's auto; `sgdlab help config` segment)\n"
          "  --set KEY=VALUE any run setting, as in `sgdlab run` (e.g. zmq_scheme=tcp,\n"
          "                  zmq_auth=none to measure what CURVE costs); repeatable\n"
          "  --plant-bug B   tests only: a round plants a known error (mapreduce-double:\n"
          "                  the driver adds executor 1 twice) that #wrong must show\n"
          "  --db PATH       results database (default " SG_DEFAULT_DB ")\n"
          "  --name NAME     the experiment's name (default bench-allreduce): letters,\n"
          "                  digits, '.', '_', '-'\n"
          "  -q, --quiet     no closing line naming the experiment\n"
          "  -v, --verbose   ranks' and mpirun's output on stderr\n"
          "  -h, --help      this text\n"
          "\n"
          "Columns: algbw = size / median time.  busbw = algbw * 2(N-1)/N, the bytes a\n"
          "ring link carries; for ps and mapreduce it is the same formula (their links\n"
          "carry more: a server's or the driver's link moves ~2*N*size/S or 2*N*size),\n"
          "so busbw reads as allreduce-equivalent bandwidth, comparable across rows.\n"
          "#wrong: elements that failed the exact check (must be 0).\n"
          "Every planned run is recorded as pending first: an interrupted bench shows\n"
          "what did not run.  Rows go to the `bench` table of the database (experiment\n"
          "'bench-allreduce'); `sgdlab report` plots time and busbw against size.\n");
}

/* A row whose max time is this many times its min ran on a busy host. */
#define SPREAD_WILD 10

/* Print the rows of impl recorded under exp_id since row id > after, and a
 * warning on stderr for rows whose min/max spread is wild. */
static int print_rows(sg_recorder_t *db, int64_t exp_id, const char *impl, const char *extra,
                      int64_t after, int64_t *last) {
  sqlite3 *h = sg_recorder_sqlite(db);
  sqlite3_stmt *st = NULL;
  SG_CHECK(sg_recorder_flush(db));
  if (sqlite3_prepare_v2(h,
                         "SELECT id, bytes, iters, t_median, t_min, t_max, algbw, busbw, wrong, "
                         "transport, np, collective FROM bench WHERE experiment_id = ? AND impl = ? "
                         "AND id > ? ORDER BY bytes",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "bench table: %s", sqlite3_errmsg(h));
  sqlite3_bind_int64(st, 1, exp_id);
  sqlite3_bind_text(st, 2, impl, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, after);
  int header = 0, wild = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!header) {
      printf("# %s %s, transport %s, np %d workers%s\n", sqlite3_column_text(st, 11), impl,
             sqlite3_column_text(st, 9), sqlite3_column_int(st, 10), extra);
      printf("%12s %11s %6s %11s %11s %11s %11s %11s %7s\n", "size(B)", "count(f32)", "iters",
             "median(us)", "min(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
      header = 1;
    }
    int64_t bytes = sqlite3_column_int64(st, 1);
    printf("%12" PRId64 " %11" PRId64 " %6d %11.1f %11.1f %11.1f %11.3f %11.3f %7" PRId64 "\n",
           bytes, bytes / 4, sqlite3_column_int(st, 2), sqlite3_column_double(st, 3) * 1e6,
           sqlite3_column_double(st, 4) * 1e6, sqlite3_column_double(st, 5) * 1e6,
           sqlite3_column_double(st, 6), sqlite3_column_double(st, 7),
           (int64_t)sqlite3_column_int64(st, 8));
    *last = sqlite3_column_int64(st, 0) > *last ? sqlite3_column_int64(st, 0) : *last;
    if (sqlite3_column_double(st, 5) > SPREAD_WILD * sqlite3_column_double(st, 4)) wild++;
  }
  fflush(stdout);
  sqlite3_finalize(st);
  if (wild)
    fprintf(stderr, "Warning: unsteady host. %d row%s of %s took more than %d x their min as"
            " max: other work competed for the CPUs, so these times are suspect.\n", wild,
            wild == 1 ? "" : "s", impl, SPREAD_WILD);
  return SG_OK;
}

/* "4K:256M" -> bytes; K/M/G are powers of two. */
static int parse_size(const char *s, int64_t *out) {
  char *end;
  long long v = strtoll(s, &end, 10);
  if (end == s || v <= 0) return -1;
  if (*end == 'K' || *end == 'k') v <<= 10, end++;
  else if (*end == 'M' || *end == 'm') v <<= 20, end++;
  else if (*end == 'G' || *end == 'g') v <<= 30, end++;
  if (*end && *end != ':') return -1;
  *out = v;
  return 0;
}

/* "0,1,1001": non-negative integers, at most SG_BENCH_MAX_COUNTS. */
static int counts_ok(const char *s) {
  int n = 0;
  for (const char *p = s;; p++) {
    size_t len = strspn(p, "0123456789");
    if (len == 0 || len > 10 || ++n > SG_BENCH_MAX_COUNTS) return 0;
    p += len;
    if (!*p) return 1;
    if (*p != ',') return 0;
  }
}

/* "1,2,4": counts 1..1024. */
static int servers_ok(const char *s) {
  for (const char *q = s;;) {
    size_t sl = strcspn(q, ",");
    char *end;
    long S = strtol(q, &end, 10);
    if (end != q + sl || S < 1 || S > 1024) return 0;
    if (!q[sl]) return 1;
    q += sl + 1;
  }
}

typedef struct ar_args {
  const char *db_path, *transport, *impl, *launcher, *sizes, *servers, *counts, *plant, *name;
  int np, quiet, verbose, nsets;
  long long iters, warmup, segment; /* segment < 0: not given */
  int64_t lo, hi;
  char *sets[64];
} ar_args_t;

/* One option of argv at *i; 0, 1 (help printed) or 2 (message printed). */
static int ar_option(ar_args_t *a, int argc, char **argv, int *i) {
  const char *o = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
#define OPT(name) (!strcmp(o, name) && v && (++*i, 1))
  if (!strcmp(o, "-h") || !strcmp(o, "--help")) return ar_usage(stdout), 1;
  if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) a->quiet = 1;
  else if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) a->verbose = 1;
  else if (OPT("--np")) a->np = atoi(v);
  else if (OPT("--sizes")) a->sizes = v;
  else if (OPT("--counts")) a->counts = v;
  else if (OPT("--impl")) a->impl = v;
  else if (OPT("--servers")) a->servers = v;
  else if (OPT("--transport")) a->transport = v;
  else if (OPT("--iters")) a->iters = atoll(v);
  else if (OPT("--warmup")) a->warmup = atoll(v);
  else if (OPT("--launcher")) a->launcher = v;
  else if (OPT("--plant-bug")) a->plant = v;
  else if (OPT("--db")) a->db_path = v;
  else if (OPT("--name")) a->name = v;
  else if (OPT("--segment")) {
    int64_t s;
    if (parse_size(v, &s) < 0)
      return fprintf(stderr, "sgdlab bench allreduce: --segment: expected bytes, got '%s'\n", v), 2;
    a->segment = s;
  } else if (OPT("--set")) {
    if (a->nsets == (int)(sizeof a->sets / sizeof a->sets[0]))
      return fprintf(stderr, "sgdlab bench allreduce: at most 64 --set options\n"), 2;
    a->sets[a->nsets++] = (char *)v;
  } else {
    fprintf(stderr, "sgdlab bench allreduce: unknown or incomplete option '%s' (see --help)\n", o);
    return 2;
  }
#undef OPT
  return 0;
}

/* An experiment name bench may write into its experiment text. */
static int name_ok(const char *n) {
  size_t l = strlen(n);
  if (l < 1 || l > 63 || n[0] == '-' || n[0] == '.') return 0;
  return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == l;
}

/* The command line into *a; 0, 1 (help printed) or 2 (message printed). */
static int ar_parse(int argc, char **argv, ar_args_t *a) {
  *a = (ar_args_t){.db_path = SG_DEFAULT_DB, .transport = "mpi", .launcher = "auto",
                   .name = "bench-allreduce", /* the experiment, not an engine */
                   .sizes = "4K:256M", .servers = "1", .np = 2, .warmup = 3, .segment = -1};
  for (int i = 1; i < argc; i++) {
    int rc = ar_option(a, argc, argv, &i);
    if (rc) return rc;
  }
  const char *colon = strchr(a->sizes, ':'), *why = NULL;
  if (parse_size(a->sizes, &a->lo) < 0 || parse_size(colon ? colon + 1 : a->sizes, &a->hi) < 0 ||
      a->hi < a->lo || a->lo < 4)
    why = "--sizes: expected MIN:MAX bytes >= 4 (e.g. 4K:256M)";
  else if (a->counts && !counts_ok(a->counts))
    why = "--counts: expected element counts >= 0, comma-separated (at most 64)";
  else if (!servers_ok(a->servers))
    why = "--servers: expected counts 1..1024, comma-separated";
  else if (a->np < 1)
    why = "--np: expected a positive count";
  else if (a->iters < 0 || a->iters > SG_BENCH_MAX_ITERS)
    why = "--iters: expected 0..1000";
  else if (a->warmup < 0 || a->warmup > 1000)
    why = "--warmup: expected 0..1000";
  else if (!name_ok(a->name))
    why = "--name: expected 1..63 letters, digits, '.', '_' or '-', not starting with '-'";
  if (why) return fprintf(stderr, "sgdlab bench allreduce: %s\n", why), 2;
  return 0;
}

/* The variant named `name` and its engine, or NULL. */
static const sg_engine_t *find_variant(const char *name, const sg_bench_variant_t **out) {
  FOR_VARIANTS(e, v)
  if (!strcmp(v->name, name)) return *out = v, *e;
  return NULL;
}

/* Append the engine entry of `name` to the YAML; 0 or -1 with why. */
static int ar_entry(const ar_args_t *a, const char *name, char *yaml, size_t cap, size_t *len,
                    char *why, size_t wcap) {
  const sg_bench_variant_t *v = NULL;
  const sg_engine_t *e = find_variant(name, &v);
  if (!e) {
    size_t n = (size_t)snprintf(why, wcap, "--impl: '%s' is not one of", name);
    FOR_VARIANTS(e2, v2)
    n += (size_t)snprintf(why + n, n < wcap ? wcap - n : 0, " %s", v2->name);
    return -1;
  }
  if ((int64_t)e->bench->min_bytes > a->lo && !a->counts)
    return snprintf(why, wcap, "--sizes: %s needs messages of at least %zu bytes", name,
                    e->bench->min_bytes), -1;
  if (a->counts && !e->bench->exact_counts)
    return snprintf(why, wcap, "--counts: %s takes sizes only (--sizes)", name), -1;
  size_t n = *len;
  n += (size_t)snprintf(yaml + n, cap - n, "  - {engine: %s, ", e->name);
  for (const char *p = v->options; *p && n + 64 < cap; p++) {
    if (p[0] == '%' && p[1] == 'S') n += (size_t)snprintf(yaml + n, cap - n, "%s", a->servers), p++;
    else if (p[0] == '%' && p[1] == 'G') {
      if (a->segment >= 0) n += (size_t)snprintf(yaml + n, cap - n, ", segment: %lld", a->segment);
      p++;
    } else yaml[n++] = *p;
  }
  n += (size_t)snprintf(yaml + n, cap - n, "}\n");
  *len = n;
  return n < cap ? 0 : (snprintf(why, wcap, "--impl: too long"), -1);
}

/* The default --impl list: the variants marked default on this transport. */
static void default_impls(const char *transport, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  FOR_VARIANTS(e, v)
  if (v->by_default && (!v->transport || !strcmp(v->transport, transport)))
    n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? "," : "", v->name);
}

/* The runs as an experiment (one engine entry per implementation, so one
 * failing implementation leaves the others' rows); 0 or exit code 2/1. */
static int ar_experiment(const ar_args_t *a, sg_experiment_t **x) {
  char impls[512], why[512], name[64];
  if (a->impl) snprintf(impls, sizeof impls, "%s", a->impl);
  else default_impls(a->transport, impls, sizeof impls);
  size_t cap = 4096 + strlen(impls) * 64 + strlen(a->servers), len;
  char *yaml = malloc(cap);
  if (!yaml) return 1;
  len = (size_t)snprintf(yaml, cap, "name: %s\nworkers: %d\ntransport: %s\n"
                         "launcher: %s\nengines:\n", a->name, a->np, a->transport, a->launcher);
  int code = 0, k = 0;
  for (const char *p = impls; *p && !code; k++) {
    size_t l = strcspn(p, ",");
    snprintf(name, sizeof name, "%.*s", (int)l, p);
    p += l + (p[l] == ',');
    if (ar_entry(a, name, yaml, cap, &len, why, sizeof why) < 0) code = 2;
  }
  if (!code && !k) snprintf(why, sizeof why, "--impl: empty list"), code = 2;
  if (!code && sg_config_parse(x, "<bench allreduce>", yaml, len, a->sets, a->nsets) < 0)
    snprintf(why, sizeof why, "%s", sg_err_msg()), code = 2;
  if (code) fprintf(stderr, "sgdlab bench allreduce: %s\n", why);
  free(yaml);
  return code;
}

/* The internal keys that make each run the benchmark (bench_method.h). */
static int ar_mark(const ar_args_t *a, sg_experiment_t *x) {
  for (size_t i = 0; i < x->nruns; i++) {
    sg_opts_t *o = x->runs[i].opts;
    SG_CHECK(sg_opts_setf(o, "_bench_min_bytes", "%lld", (long long)a->lo));
    SG_CHECK(sg_opts_setf(o, "_bench_max_bytes", "%lld", (long long)a->hi));
    SG_CHECK(sg_opts_setf(o, "_bench_iters", "%lld", a->iters));
    SG_CHECK(sg_opts_setf(o, "_bench_warmup", "%lld", a->warmup));
    if (a->counts) SG_CHECK(sg_opts_setf(o, "_bench_counts", "%s", a->counts));
    if (a->plant) SG_CHECK(sg_opts_setf(o, "_plant_bug", "%s", a->plant));
  }
  return SG_OK;
}

/* Every run recorded as pending before the first starts. */
static int ar_plan(sg_recorder_t *db, int64_t exp_id, const sg_experiment_t *x, int64_t *ids) {
  for (size_t i = 0; i < x->nruns; i++) {
    const sg_run_spec_t *r = &x->runs[i];
    char *json = sg_opts_json(r->opts);
    if (!json) return sg_err_set(SG_ENOMEM, "no memory");
    sg_run_row_t row = {.engine = r->engine->name, .options_json = json,
                        .transport = sg_opts_get(r->opts, "transport"),
                        .launcher = sg_opts_get(r->opts, "launcher"), .workers = r->workers,
                        .servers = r->servers, .processes = r->nprocs, .repeat = r->repeat,
                        .seed = r->seed};
    int rc = sg_recorder_run_plan(db, exp_id, &row, &ids[i]);
    free(json);
    SG_CHECK(rc);
  }
  return SG_OK;
}

/* The header's note on extra processes: " (+2 server processes)". */
static void extra_note(const sg_run_spec_t *r, char *out, size_t cap) {
  int extra = r->nprocs - r->workers;
  out[0] = '\0';
  if (extra > 0)
    snprintf(out, cap, " (+%d %s process%s)", extra,
             sg_engine_role(r->engine, r->opts, r->workers, 0), extra > 1 ? "es" : "");
}

/* Run every planned run, printing its rows; exit code. */
static int ar_execute(const ar_args_t *a, const sg_experiment_t *x, sg_recorder_t *db,
                      sg_run_env_t *env) {
  size_t failed = 0;
  int64_t last = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    sg_run_result_t res;
    const sg_run_spec_t *r = &x->runs[i];
    char impl[32], extra[64];
    r->engine->bench->impl(r->opts, impl, sizeof impl);
    extra_note(r, extra, sizeof extra);
    int rc = sg_run_execute(env, r, i, x->nruns, &res);
    if (rc == SG_EINTERRUPTED) return 130;
    if (rc < 0) return fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg()), 1;
    if (print_rows(db, env->exp_id, impl, extra, last, &last) < 0)
      fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    char warn[1024];
    if (sg_report_run_loaded(sg_recorder_sqlite(db), res.run_id, warn, sizeof warn) > 0)
      fprintf(stderr, "Warning: loaded host. %s\n", warn);
    if (!res.ok) {
      failed++;
      fprintf(stderr, "sgdlab bench allreduce: %s failed (run %lld): %s\n", impl,
              (long long)res.run_id, res.error);
    }
  }
  if (!a->quiet) {
    printf("busbw = algbw * 2(N-1)/N for every row (for ps and mapreduce: allreduce-equivalent "
           "bandwidth, not their busiest link's bytes)\n");
    printf("experiment '%s' (id %lld): rows in the bench table of %s\n", a->name,
           (long long)env->exp_id, a->db_path);
  }
  return failed ? 1 : 0;
}

static int bench_allreduce(int argc, char **argv) {
  ar_args_t a;
  sg_experiment_t *x = NULL;
  sg_recorder_t *db = NULL;
  sg_progress_t *prog = NULL;
  int64_t *ids = NULL;
  int code = ar_parse(argc, argv, &a);
  if (code) return code == 1 ? 0 : code;
  if ((code = ar_experiment(&a, &x))) goto out;
  char rank_bin[4096];
  sg_run_env_t env;
  int db_rc = 0; /* a database path refused (outfile.h): exit 2 */
  if (ar_mark(&a, x) < 0 || !(ids = calloc(x->nruns, sizeof *ids)) ||
      sg_launch_find_rank_bin(rank_bin, sizeof rank_bin) < 0 ||
      (db_rc = sg_recorder_open(&db, a.db_path)) < 0 ||
      sg_run_begin(db, x, 1, a.verbose, rank_bin, &prog, &env) < 0 ||
      ar_plan(db, env.exp_id, x, ids) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", ids ? sg_err_msg() : "no memory");
    code = db_rc == SG_EINVAL ? 2 : 1;
    goto out;
  }
  env.run_ids = ids;
  code = ar_execute(&a, x, db, &env);
out:
  sg_progress_destroy(&prog);
  sg_recorder_close(&db);
  sg_experiment_destroy(&x);
  free(ids);
  return code;
}

static void step_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab bench step [--set key=value]...\n"
          "\n"
          "Training-step throughput of one process: the step (gradient + optimizer\n"
          "update) on the configured workload, timed after an untimed warm-up as the\n"
          "median of several blocks of steps, next to its bound: the same step's sgemm\n"
          "calls (shapes and order of the real step) timed alone.  Step and sgemm blocks\n"
          "alternate so both see the same machine load.  Prints samples/s, the bound's\n"
          "samples/s and their ratio.  Nothing is written to the database.\n"
          "\n"
          "  --set key=value  any experiment-file key (sgdlab help config), e.g.\n"
          "                   --set model=softmax --set batch=256; defaults: model mlp,\n"
          "                   hidden 256, batch 64, dataset Fashion-MNIST; a list as\n"
          "                   run takes it: --set hidden=[2048,2048] (no sweeps)\n"
          "  -h, --help       this text\n");
}

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab bench allreduce [options]   one step of communication per message size\n"
          "       sgdlab bench step [--set k=v]...    training-step throughput vs its sgemm bound\n"
          "       (sgdlab bench allreduce --help, sgdlab bench step --help)\n");
}

/* A --set value as `run` spells it: a list setting's "[2048, 2048]" (or
 * "2048,2048") becomes "2048,2048" in out; any other "[...]" is a sweep,
 * which one measurement cannot take: -1 with why. */
static int step_value(const sg_setting_t *s, const char *v, char *out, size_t cap,
                      char *why, size_t wcap) {
  size_t n = strlen(v), len = 0;
  int listy = s->type == SG_T_INTLIST || s->type == SG_T_STRLIST;
  if (n < 2 || v[0] != '[' || v[n - 1] != ']') return snprintf(out, cap, "%s", v) < (int)cap ? 0 : -1;
  if (!listy || strchr(v + 1, '['))
    return snprintf(why, wcap, "'%s' is a sweep; bench step measures one value", v), -1;
  for (size_t i = 1; i + 1 < n && len + 1 < cap; i++)
    if (v[i] != ' ' && v[i] != '\t') out[len++] = v[i];
  out[len] = '\0';
  return len + 1 < cap ? 0 : (snprintf(why, wcap, "value too long"), -1);
}

static int bench_step_cmd(int argc, char **argv) {
  sg_opts_t *o = sg_opts_new();
  int code = 0;
  if (!o) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      step_usage(stdout);
      goto out;
    }
    const char *kv = !strcmp(a, "--set") && i + 1 < argc ? argv[++i]
                     : !strncmp(a, "--set=", 6)          ? a + 6
                                                         : NULL;
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (!eq) {
      fprintf(stderr, "sgdlab bench step: expected --set key=value, got '%s'\n", a);
      code = 2;
      goto out;
    }
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    const sg_setting_t *s = sg_setting_find(sg_settings, key);
    char why[128], val[1024];
    if (!s || step_value(s, eq + 1, val, sizeof val, why, sizeof why) < 0 ||
        sg_setting_check(s, val, why, sizeof why) < 0) {
      fprintf(stderr, "sgdlab bench step: %s: %s\n", key, s ? why : "unknown setting");
      code = 2;
      goto out;
    }
    sg_opts_set(o, key, val);
  }
  int rc = sg_bench_step(o, stdout);
  if (rc < 0) {
    fprintf(stderr, "sgdlab bench step: %s\n", sg_err_msg());
    code = rc == SG_ECONFIG ? 2 : 1; /* bad settings (device: cuda without one): 2 */
  }
out:
  sg_opts_destroy(&o);
  return code;
}

/* Whether some engine's benchmark round computes this collective. */
static int collective_known(const char *name) {
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    if ((*e)->bench && !strcmp((*e)->bench->collective, name)) return 1;
  return 0;
}

int sg_cmd_bench(int argc, char **argv) {
  if (argc >= 2 && collective_known(argv[1])) return bench_allreduce(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "step")) return bench_step_cmd(argc - 1, argv + 1);
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    bench_usage(stdout);
    printf("\n");
    ar_usage(stdout);
    printf("\n");
    step_usage(stdout);
    return 0;
  }
  fprintf(stderr, "sgdlab bench: expected 'allreduce' or 'step' (sgdlab bench --help)\n");
  return 2;
}
