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
          "usage: sgdlab bench allreduce [--np N] [--sizes MIN:MAX | --counts C[,C..]]\n"
          "                              [--impl ring,rhd,native,ps,mapreduce] [--servers S[,S..]]\n"
          "                              [--transport mpi|zmq] [--launcher auto|local|mpirun]\n"
          "                              [--iters I] [--warmup W] [--segment BYTES]\n"
          "                              [--set KEY=VALUE]...\n"
          "                              [--db PATH] [-q] [-v]\n"
          "\n"
          "One step of gradient communication, timed per message size, for every\n"
          "implementation: the allreduce algorithms and the other architectures'\n"
          "equivalent (every worker ends with, or the driver holds, the sum of N buffers).\n"
          "Each implementation is one run of an internal engine (real processes over the\n"
          "real transport); per size: an exact correctness check outside the timing,\n"
          "W warm-up iterations, a barrier, I timed iterations whose time is the slowest\n"
          "rank's; median, min and max of those.\n"
          "\n"
          "  --np N          workers N (default 2); every implementation sums N buffers.\n"
          "                  ps adds S server processes, mapreduce adds 1 driver process.\n"
          "  --sizes MIN:MAX message sizes in bytes, powers of two from MIN to MAX (K/M/G\n"
          "                  suffixes are powers of two; default 4K:256M; ps needs >= 64)\n"
          "  --counts LIST   ring, rhd, native: exact element counts (floats) instead of\n"
          "                  --sizes, comma-separated, 0 allowed (e.g. 0,1,3,5,1001:\n"
          "                  the uneven chunks a correctness check wants)\n"
          "  --impl LIST     comma-separated (default ring,rhd,native for mpi, ring,rhd for zmq):\n"
          "                    ring       ring reduce-scatter + allgather, pipelined\n"
          "                    rhd        recursive halving/doubling (Rabenseifner)\n"
          "                    native     MPI_Allreduce (transport mpi only)\n"
          "                    ps         parameter server: workers push K bytes sliced\n"
          "                               into S shards, servers sum and send back\n"
          "                               (recorded as ps-S<S>, one run per --servers value)\n"
          "                    mapreduce  driver broadcasts K bytes to N executors and\n"
          "                               reduces N gradients of K bytes back, flat\n"
          "                               (= mapreduce-flat); mapreduce-tree: binomial\n"
          "                               broadcast and treeAggregate of depth 2\n"
          "  --servers LIST  ps: server counts S, comma-separated (default 1)\n"
          "  --transport T   mpi (default) or zmq\n"
          "  --launcher L    auto (default: mpirun for mpi), local or mpirun\n"
          "  --iters I       timed iterations per size (default 0: about 0.2 s worth,\n"
          "                  5..1000; ps, which has no estimate, then uses 20)\n"
          "  --warmup W      untimed iterations per size (default 3)\n"
          "  --segment B     ring pipeline segment in bytes (default 1M)\n"
          "  --set KEY=VALUE any run setting, as in `sgdlab run` (e.g. zmq_scheme=tcp,\n"
          "                  zmq_auth=none to measure what CURVE costs); repeatable\n"
          "  --db PATH       results database (default " SG_DEFAULT_DB ")\n"
          "  -q, --quiet     no closing line naming the experiment\n"
          "  -v, --verbose   ranks' and mpirun's output on stderr\n"
          "  -h, --help      this text\n"
          "\n"
          "Columns: algbw = size / median time.  busbw = algbw * 2(N-1)/N, the bytes a\n"
          "ring link carries; for ps and mapreduce it is the same formula (their links\n"
          "carry more: a server's or the driver's link moves ~2*N*size/S or 2*N*size),\n"
          "so busbw reads as allreduce-equivalent bandwidth, comparable across rows.\n"
          "#wrong: elements that failed the exact check (must be 0).\n"
          "Rows go to the `bench` table of the database (experiment 'bench-allreduce');\n"
          "`sgdlab report` plots time and busbw against size for every implementation.\n");
}

/* Print the rows of impl recorded under exp_id since row id > after. */
static int print_rows(sg_recorder_t *db, int64_t exp_id, const char *impl, const char *extra,
                      int64_t after, int64_t *last) {
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
      printf("# allreduce %s, transport %s, np %d workers%s\n", impl, sqlite3_column_text(st, 9),
             sqlite3_column_int(st, 10), extra);
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

/* "0,1,1001": non-negative integers, at most 64 (bench_engine.c). */
static int counts_ok(const char *s) {
  int n = 0;
  for (const char *p = s;; p++) {
    size_t len = strspn(p, "0123456789");
    if (len == 0 || len > 10 || ++n > 64) return 0;
    p += len;
    if (!*p) return 1;
    if (*p != ',') return 0;
  }
}

/* One implementation's run: its engine entry and the impl name its rows
 * carry. */
typedef struct ar_impl {
  char entry[256]; /* "engine: bench-ps, servers: 2" (no braces) */
  char recorded[32];
  char extra[64]; /* what the table header adds after "np N workers" */
} ar_impl_t;

/* Expand --impl and --servers into runs; 0, or -1 with a message in why. */
static int ar_impls(const char *impl, const char *servers, int64_t lo, ar_impl_t **out,
                    size_t *n, char *why, size_t cap) {
  size_t max = 1;
  for (const char *p = impl; *p; p++) max += *p == ',';
  size_t ns = 1;
  for (const char *p = servers; *p; p++) ns += *p == ',';
  ar_impl_t *v = calloc(max * ns, sizeof *v);
  size_t k = 0;
  if (!v) return snprintf(why, cap, "no memory"), -1;
  char name[32];
  for (const char *p = impl; *p;) {
    size_t len = strcspn(p, ",");
    snprintf(name, sizeof name, "%.*s", (int)len, p);
    p += len + (p[len] == ',');
    if (!strcmp(name, "ring") || !strcmp(name, "rhd") || !strcmp(name, "native")) {
      snprintf(v[k].entry, sizeof v[k].entry, "engine: bench-allreduce, impl: %s", name);
      snprintf(v[k].recorded, sizeof v[k].recorded, "%s", name);
      k++;
    } else if (!strcmp(name, "ps")) {
      if (lo < 64) {
        snprintf(why, cap, "--sizes: ps needs messages of at least 64 bytes");
        goto bad;
      }
      for (const char *q = servers; *q;) {
        size_t sl = strcspn(q, ",");
        char *end;
        long S = strtol(q, &end, 10);
        if (end != q + sl || S < 1 || S > 1024) {
          snprintf(why, cap, "--servers: expected counts 1..1024, comma-separated, got '%s'", servers);
          goto bad;
        }
        q += sl + (q[sl] == ',');
        snprintf(v[k].entry, sizeof v[k].entry, "engine: bench-ps, servers: %ld", S);
        snprintf(v[k].recorded, sizeof v[k].recorded, "ps-S%ld", S);
        snprintf(v[k].extra, sizeof v[k].extra, " (+%ld server process%s)", S, S > 1 ? "es" : "");
        k++;
      }
    } else if (!strcmp(name, "mapreduce") || !strcmp(name, "mapreduce-flat") ||
               !strcmp(name, "mapreduce-tree")) {
      const char *t = strcmp(name, "mapreduce-tree") ? "flat" : "tree";
      snprintf(v[k].entry, sizeof v[k].entry, "engine: bench-mapreduce, broadcast: %s, aggregate: %s",
               t, t);
      snprintf(v[k].recorded, sizeof v[k].recorded, "mapreduce-%s", t);
      snprintf(v[k].extra, sizeof v[k].extra, " (+1 driver process)");
      k++;
    } else {
      snprintf(why, cap, "--impl: '%s' is not one of ring, rhd, native, ps, mapreduce, mapreduce-flat, mapreduce-tree",
               name);
      goto bad;
    }
  }
  if (!k) {
    snprintf(why, cap, "--impl: empty list");
    goto bad;
  }
  *out = v;
  *n = k;
  return 0;
bad:
  free(v);
  return -1;
}

static int bench_allreduce(int argc, char **argv) {
  const char *db_path = SG_DEFAULT_DB, *transport = "mpi", *impl = NULL, *launcher = "auto";
  const char *sizes = "4K:256M", *servers = "1", *counts = NULL;
  int np = 2, quiet = 0, verbose = 0, code = 0;
  long long iters = 0, warmup = 3, segment = 1 << 20;
  sg_experiment_t *x = NULL;
  sg_recorder_t *db = NULL;
  sg_progress_t *prog = NULL;
  char *yaml = NULL;
  ar_impl_t *runs = NULL;
  size_t nimpl = 0;
  char *sets[64];
  int nsets = 0;
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
    } else if (OPT("--counts")) {
      if (!counts_ok(v)) {
        fprintf(stderr, "sgdlab bench allreduce: --counts: expected element counts >= 0, "
                        "comma-separated (at most 64), got '%s'\n", v);
        return 2;
      }
      counts = v;
    } else if (OPT("--impl")) {
      impl = v;
    } else if (OPT("--servers")) {
      servers = v;
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
    } else if (OPT("--set")) {
      if (nsets == (int)(sizeof sets / sizeof sets[0])) {
        fprintf(stderr, "sgdlab bench allreduce: at most 64 --set options\n");
        return 2;
      }
      sets[nsets++] = (char *)v;
    } else if (OPT("--db")) {
      db_path = v;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = 1;
    } else {
      fprintf(stderr, "sgdlab bench allreduce: unknown or incomplete option '%s' (see --help)\n", a);
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
  char why[256];
  if (ar_impls(impl, servers, lo, &runs, &nimpl, why, sizeof why) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", why);
    return 2;
  }

  /* The run(s), as an experiment file: one engine entry per impl, so one
   * failing implementation leaves the others' rows. */
  size_t cap = 1024 + nimpl * (512 + (counts ? strlen(counts) : 0));
  if (!(yaml = malloc(cap))) {
    code = 1;
    goto out;
  }
  size_t len = (size_t)snprintf(yaml, cap,
                                "name: bench-allreduce\nworkers: %d\ntransport: %s\nlauncher: %s\n"
                                "engines:\n",
                                np, transport, launcher);
  for (size_t k = 0; k < nimpl; k++) {
    int ps = !strncmp(runs[k].recorded, "ps-", 3), ar = !runs[k].extra[0];
    len += (size_t)snprintf(yaml + len, cap - len,
                            "  - {%s, min_bytes: %lld, max_bytes: %lld, iters: %lld, warmup: %lld",
                            runs[k].entry, (long long)lo, (long long)hi,
                            ps && iters == 0 ? 20 : iters, warmup);
    if (counts && !ar) {
      fprintf(stderr, "sgdlab bench allreduce: --counts: only for ring, rhd and native, not %s\n",
              runs[k].recorded);
      code = 2;
      goto out;
    }
    if (counts) len += (size_t)snprintf(yaml + len, cap - len, ", counts: [%s]", counts);
    len += (size_t)(ar ? snprintf(yaml + len, cap - len, ", segment: %lld}\n", segment)
                       : snprintf(yaml + len, cap - len, "}\n"));
  }
  if (sg_config_parse(&x, "<bench allreduce>", yaml, len, sets, nsets) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    code = 2;
    goto out;
  }
  if (x->nruns != nimpl) {
    fprintf(stderr, "sgdlab bench allreduce: %zu runs for %zu implementations\n", x->nruns, nimpl);
    code = 1;
    goto out;
  }
  char rank_bin[4096];
  sg_run_env_t env;
  if (sg_launch_find_rank_bin(rank_bin, sizeof rank_bin) < 0 || sg_recorder_open(&db, db_path) < 0 ||
      sg_run_begin(db, x, 1, verbose, rank_bin, &prog, &env) < 0) {
    fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    code = 1;
    goto out;
  }
  const int64_t exp_id = env.exp_id;
  size_t failed = 0;
  int64_t last = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    sg_run_result_t res;
    const char *this_impl = runs[i].recorded;
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
    if (print_rows(db, exp_id, this_impl, runs[i].extra, last, &last) < 0)
      fprintf(stderr, "sgdlab bench allreduce: %s\n", sg_err_msg());
    if (!res.ok) {
      failed++;
      fprintf(stderr, "sgdlab bench allreduce: %s failed (run %lld): %s\n", this_impl,
              (long long)res.run_id, res.error);
    }
  }
  if (!quiet) {
    printf("busbw = algbw * 2(N-1)/N for every row (for ps and mapreduce: allreduce-equivalent "
           "bandwidth, not their busiest link's bytes)\n");
    printf("experiment 'bench-allreduce' (id %lld): rows in the bench table of %s\n",
           (long long)exp_id, db_path);
  }
  code = failed ? 1 : 0;
out:
  sg_progress_destroy(&prog);
  sg_recorder_close(&db);
  sg_experiment_destroy(&x);
  free(yaml);
  free(runs);
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
          "                   hidden 256, batch 64, dataset Fashion-MNIST\n"
          "  -h, --help       this text\n");
}

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab bench allreduce [options]   one step of communication per message size\n"
          "       sgdlab bench step [--set k=v]...    training-step throughput vs its sgemm bound\n"
          "       (sgdlab bench allreduce --help, sgdlab bench step --help)\n");
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
