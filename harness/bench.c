/* bench.c - `sgdlab bench allreduce` and `sgdlab bench step`.
 *
 * bench allreduce: nccl-tests-style allreduce microbenchmark.  Each
 * implementation is one run of the internal engine `bench-allreduce`
 * (allreduce/bench_engine.c: method, correctness check and timing are
 * there), launched like any training run -- real processes over the real
 * transport -- under the experiment "bench-allreduce".  Rank 0 streams one
 * SG_REC_BENCH record per size into the `bench` table; after each run this
 * command prints that run's rows from the database:
 *
 *   size  count  median(us)  min(us)  max(us)  algbw  busbw(GB/s)  #wrong
 *
 * bench step: single-process training-step throughput
 * (core/bench_step.h).
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_step.h"
#include "commands.h"
#include "config.h"
#include "err.h"
#include "launch.h"
#include "recorder.h"
#include "run.h"
#include "settings.h"

static void ar_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab bench allreduce [--np N] [--sizes MIN:MAX] [--impl ring,rhd,native]\n"
          "                              [--transport mpi|zmq] [--iters I] [--warmup W]\n"
          "                              [--segment BYTES] [--launcher auto|local|mpirun]\n"
          "                              [--db PATH] [-q] [-v]\n"
          "  --np N          processes (default 2)\n"
          "  --sizes MIN:MAX message sizes in bytes, powers of two from MIN (K/M/G\n"
          "                  suffixes; default 4K:256M)\n"
          "  --impl LIST     implementations (default ring,rhd,native for mpi, ring,rhd for zmq)\n"
          "  --transport T   mpi (default) or zmq\n"
          "  --iters I       timed iterations per size (default 0: ~0.2 s worth, 5..1000)\n"
          "  --warmup W      untimed iterations per size (default 3)\n"
          "  --segment B     ring pipeline segment in bytes (default 1M)\n"
          "Rows go to the `bench` table of the database (experiment 'bench-allreduce').\n");
}

/* Print the rows of impl recorded under exp_id since row id > after. */
static int print_rows(sg_recorder_t *db, int64_t exp_id, const char *impl, int64_t after,
                      int64_t *last) {
  sqlite3 *h = sg_recorder_sqlite(db);
  sqlite3_stmt *st = NULL;
  SG_CHECK(sg_recorder_flush(db));
  if (sqlite3_prepare_v2(h,
                         "SELECT id, bytes, iters, t_median, t_min, t_max, algbw, busbw, wrong, "
                         "transport, np FROM bench WHERE experiment_id = ? AND impl = ? AND id > ? "
                         "ORDER BY bytes",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "bench table: %s", sqlite3_errmsg(h));
  sqlite3_bind_int64(st, 1, exp_id);
  sqlite3_bind_text(st, 2, impl, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, after);
  int header = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!header) {
      printf("# allreduce %s, transport %s, np %d\n", impl, sqlite3_column_text(st, 9),
             sqlite3_column_int(st, 10));
      printf("%12s %11s %6s %11s %11s %11s %9s %9s %7s\n", "size(B)", "count", "iters",
             "median(us)", "min(us)", "max(us)", "algbw", "busbw", "#wrong");
      header = 1;
    }
    int64_t bytes = sqlite3_column_int64(st, 1);
    printf("%12" PRId64 " %11" PRId64 " %6d %11.1f %11.1f %11.1f %9.3f %9.3f %7" PRId64 "\n",
           bytes, bytes / 4, sqlite3_column_int(st, 2), sqlite3_column_double(st, 3) * 1e6,
           sqlite3_column_double(st, 4) * 1e6, sqlite3_column_double(st, 5) * 1e6,
           sqlite3_column_double(st, 6), sqlite3_column_double(st, 7),
           (int64_t)sqlite3_column_int64(st, 8));
    *last = sqlite3_column_int64(st, 0) > *last ? sqlite3_column_int64(st, 0) : *last;
  }
  fflush(stdout);
  sqlite3_finalize(st);
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

static int bench_allreduce(int argc, char **argv) {
  const char *db_path = SG_DEFAULT_DB, *transport = "mpi", *impl = NULL, *launcher = "auto";
  const char *sizes = "4K:256M";
  int np = 2, quiet = 0, verbose = 0, code = 0;
  long long iters = 0, warmup = 3, segment = 1 << 20;
  sg_experiment_t *x = NULL;
  sg_recorder_t *db = NULL;
  sg_progress_t *prog = NULL;
  char *yaml = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && (i++, 1))
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      ar_usage(stdout);
      return 0;
    } else if (OPT("--np")) {
      np = atoi(v);
    } else if (OPT("--sizes")) {
      sizes = v;
    } else if (OPT("--impl")) {
      impl = v;
    } else if (OPT("--transport")) {
      transport = v;
    } else if (OPT("--iters")) {
      iters = atoll(v);
    } else if (OPT("--warmup")) {
      warmup = atoll(v);
    } else if (OPT("--segment")) {
      int64_t s;
      if (parse_size(v, &s) < 0) {
        fprintf(stderr, "sgdlab bench allreduce: --segment: expected bytes, got '%s'\n", v);
        return 2;
      }
      segment = s;
    } else if (OPT("--launcher")) {
      launcher = v;
    } else if (OPT("--db")) {
      db_path = v;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = 1;
    } else {
      fprintf(stderr, "sgdlab bench allreduce: unknown or incomplete option '%s'\n", a);
      ar_usage(stderr);
      return 2;
    }
#undef OPT
  }
  int64_t lo, hi;
  const char *colon = strchr(sizes, ':');
  if (parse_size(sizes, &lo) < 0 || parse_size(colon ? colon + 1 : sizes, &hi) < 0 || hi < lo ||
      lo < 4) {
    fprintf(stderr, "sgdlab bench allreduce: --sizes: expected MIN:MAX bytes >= 4 (e.g. 4K:256M), got '%s'\n",
            sizes);
    return 2;
  }
  if (np < 1) {
    fprintf(stderr, "sgdlab bench allreduce: --np: expected a positive count\n");
    return 2;
  }
  if (!impl) impl = strcmp(transport, "mpi") == 0 ? "ring,rhd,native" : "ring,rhd";

  /* The run(s), as an experiment file: one engine entry per impl, so one
   * failing implementation leaves the others' rows. */
  size_t cap = 1024 + strlen(impl) * 256;
  if (!(yaml = malloc(cap))) return 1;
  size_t len = (size_t)snprintf(yaml, cap,
                                "name: bench-allreduce\nworkers: %d\ntransport: %s\nlauncher: %s\n"
                                "engines:\n",
                                np, transport, launcher);
  char name[32];
  for (const char *p = impl; *p;) {
    size_t n = strcspn(p, ",");
    snprintf(name, sizeof name, "%.*s", (int)n, p);
    len += (size_t)snprintf(yaml + len, cap - len,
                            "  - {engine: bench-allreduce, impl: %s, min_bytes: %lld, max_bytes: %lld,"
                            " iters: %lld, warmup: %lld, segment: %lld}\n",
                            name, (long long)lo, (long long)hi, iters, warmup, segment);
    p += n + (p[n] == ',');
  }
  if (sg_config_parse(&x, "<bench allreduce>", yaml, len, NULL, 0) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    code = 2;
    goto out;
  }
  char rank_bin[4096];
  int64_t exp_id;
  if (sg_launch_find_rank_bin(rank_bin, sizeof rank_bin) < 0 || sg_recorder_open(&db, db_path) < 0 ||
      sg_recorder_experiment(db, x->name, x->config_text, &exp_id) < 0 ||
      sg_progress_new(&prog, 1, x->nruns) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    code = 1;
    goto out;
  }
  sg_run_install_signals();
  sg_run_env_t env = {.db = db, .exp_id = exp_id, .progress = prog, .verbose = verbose,
                      .rank_bin = rank_bin};
  size_t failed = 0;
  int64_t last = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    sg_run_result_t res;
    const char *this_impl = sg_opts_str_or(x->runs[i].opts, "impl", "?");
    int rc = sg_run_execute(&env, &x->runs[i], i, x->nruns, &res);
    if (rc == SG_EINTERRUPTED) {
      code = 130;
      goto out;
    }
    if (rc < 0) {
      fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
      code = 1;
      goto out;
    }
    if (print_rows(db, exp_id, this_impl, last, &last) < 0)
      fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    if (!res.ok) {
      failed++;
      fprintf(stderr, "sgdlab bench allreduce: %s failed (run %lld): %s\n", this_impl,
              (long long)res.run_id, res.error);
    }
  }
  if (!quiet)
    printf("experiment 'bench-allreduce' (id %lld): rows in the bench table of %s\n",
           (long long)exp_id, db_path);
  code = failed ? 1 : 0;
out:
  sg_progress_destroy(&prog);
  sg_recorder_close(&db);
  sg_experiment_destroy(&x);
  free(yaml);
  return code;
}

static int bench_step_cmd(int argc, char **argv) {
  sg_opts_t *o = sg_opts_new();
  int code = 0;
  if (!o) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      printf("usage: sgdlab bench step [--set key=value]...\n"
             "  training-step throughput (grad + apply) next to its sgemm bound\n");
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
    char why[128];
    if (!s || sg_setting_check(s, eq + 1, why, sizeof why) < 0) {
      fprintf(stderr, "sgdlab bench step: %s: %s\n", key, s ? why : "unknown setting");
      code = 2;
      goto out;
    }
    sg_opts_set(o, key, eq + 1);
  }
  if (sg_bench_step(o, stdout) < 0) {
    fprintf(stderr, "sgdlab bench step: %s\n", sg_err_msg());
    code = 1;
  }
out:
  sg_opts_destroy(&o);
  return code;
}

int sg_cmd_bench(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "allreduce")) return bench_allreduce(argc - 1, argv + 1);
  if (argc >= 2 && !strcmp(argv[1], "step")) return bench_step_cmd(argc - 1, argv + 1);
  fprintf(stderr, "usage: sgdlab bench allreduce [options] | sgdlab bench step [--set k=v]...\n"
                  "       (sgdlab bench allreduce --help)\n");
  return 2;
}
