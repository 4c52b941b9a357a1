/* command.c - `sgdlab run`: its arguments, the runs' rows planned up
 * front (or found again by --resume), and the loop over the runs. */
#include "run_impl.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "clock_sync.h"
#include "db_path.h"
#include "err.h"

/* ---- sgdlab run -------------------------------------------------------- */

static void run_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab run CONFIG [options]\n"
          "\n"
          "Expand the experiment file CONFIG into runs (sweeps x repeats), launch\n"
          "each run's processes, and record timings and convergence into SQLite.\n"
          "\n"
          "options:\n"
          "  --set KEY=VALUE  override a key for every run (value in YAML syntax, so\n"
          "                   --set workers=[2,4] sweeps); KEY may be workload.KEY or\n"
          "                   engines.I.KEY (entry I, 0-based); repeatable\n"
          "  --db PATH        results database (default %s)\n"
          "  -H HOSTS         mpirun host list host:slots,... (same as --set hosts=...)\n"
          "  --sbatch PATH    write a Slurm batch script to PATH that runs this command\n"
          "                   (one task per rank, one rank per node); run nothing\n"
          "  -n, --dry-run    validate and list the resolved runs; launch nothing\n"
          "                   (with --resume: the runs --resume would run)\n"
          "  --resume         run only the runs of the latest experiment of this name\n"
          "                   and file text (same --set options) in --db that are not\n"
          "                   ok: pending (never started), interrupted or failed; a run\n"
          "                   another sgdlab is running, or claims first, is skipped\n"
          "  --force          run even when a run's memory estimate exceeds what this\n"
          "                   host has available (hard process limits still refuse)\n"
          "  -q, --quiet      print nothing but errors (one line per failed run)\n"
          "  -v, --verbose    also print each launch command line, mpirun's own\n"
          "                   output, and the deaths an engine tolerates\n"
          "  --plant-bug B    tests only: an engine plants a known error so a test can\n"
          "                   show its check catches it (ring-skip: the ring drops a\n"
          "                   chunk; gossip-no-average: exchange without averaging)\n"
          "  -h, --help       this help\n"
          "Long options take their value as --opt VALUE or --opt=VALUE.  The number of\n"
          "worker processes is the experiment key workers: --set workers=4 (not mpirun's\n"
          "-np 4; -n is --dry-run).\n"
          "\n"
          "On a terminal a status line shows the run (i/n, engine and variant),\n"
          "epoch, step/total, last test accuracy and elapsed time; every run ends\n"
          "with one line: ok or failed, final accuracy, wall time, and the reason\n"
          "it failed (the rank, its role, host and pid).  Under mpirun, Open MPI's\n"
          "messages of a failed run are kept in the database (sgdlab show RUN).\n"
          "\n"
          "exit status: 0 every run ok, 1 a run failed (or the harness could not\n"
          "go on), 2 configuration or usage error (nothing launched), 128 + the\n"
          "signal when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).\n",
          SG_DEFAULT_DB);
}

typedef struct runkey {
  char *json;
  size_t i;
} runkey_t;

static int runkey_cmp(const void *a, const void *b) {
  const runkey_t *x = a, *y = b;
  int c = strcmp(x->json, y->json);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Runs with the same settings (repeat index included: `repeat` is the way
 * to run a point again) measure the same thing twice, which a sweep or a
 * --set over entries that differ in one key easily does by mistake.  They
 * still run (nothing is wrong with them), with one warning line each. */
static void warn_duplicates(const sg_experiment_t *x) {
  runkey_t *k = calloc(x->nruns ? x->nruns : 1, sizeof *k);
  if (!k) return;
  for (size_t i = 0; i < x->nruns; i++) k[i] = (runkey_t){sg_opts_json(x->runs[i].opts), i};
  for (size_t i = 0; i < x->nruns; i++)
    if (!k[i].json) goto out;
  qsort(k, x->nruns, sizeof *k, runkey_cmp);
  for (size_t i = 1, first = 0; i < x->nruns; i++) {
    if (strcmp(k[i].json, k[first].json)) {
      first = i;
      continue;
    }
    fprintf(stderr, "sgdlab run: warning: run %zu (%s) has the same settings as run %zu (%s); "
            "it measures the same thing again (use repeat: to rerun a point)\n", k[i].i + 1,
            x->runs[k[i].i].label, k[first].i + 1, x->runs[k[first].i].label);
  }
out:
  for (size_t i = 0; i < x->nruns; i++) free(k[i].json);
  free(k);
}

/* The row of a run as planned (json: its options as JSON, caller's). */
static sg_run_row_t run_row(const sg_run_spec_t *run, const char *json) {
  return (sg_run_row_t){.engine = run->engine->name, .options_json = json,
                        .transport = sg_opts_get(run->opts, "transport"),
                        .launcher = sg_opts_get(run->opts, "launcher"), .workers = run->workers,
                        .servers = run->servers, .processes = run->nprocs,
                        .repeat = run->repeat, .seed = run->seed};
}

/* ids[i]: run i's row; a row of `have` with its options when one is there
 * (-1 when that row is ok: nothing to do), else a new pending row. */
static int plan_rows(sg_recorder_t *db, int64_t exp_id, const sg_experiment_t *x,
                     sg_run_state_t *have, size_t nhave, int64_t *ids, size_t *todo) {
  *todo = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    char *json = sg_opts_json(x->runs[i].opts);
    if (!json) return SG_ENOMEM;
    size_t j = 0;
    while (j < nhave && (!have[j].options_json || strcmp(have[j].options_json, json))) j++;
    int rc = SG_OK;
    if (j < nhave) { /* each row answers for one run: identical runs take one each */
      /* ok: done; running: another harness runs it (reconciliation, at
       * open, has failed the rows of dead harnesses of this host) */
      int done = !strcmp(have[j].status, "ok") || !strcmp(have[j].status, "running");
      ids[i] = done ? -1 : have[j].id;
      free(have[j].options_json);
      have[j].options_json = NULL;
    } else {
      sg_run_row_t row = run_row(&x->runs[i], json);
      rc = sg_recorder_run_plan(db, exp_id, &row, &ids[i]);
    }
    free(json);
    SG_CHECK(rc);
    if (ids[i] > 0) (*todo)++;
  }
  return SG_OK;
}

/* --resume: the latest experiment of this name and text, its runs that
 * are not ok (pending, interrupted, failed). */
static int resume_rows(sg_recorder_t *db, const sg_experiment_t *x, int64_t *exp_id, int64_t *ids,
                       size_t *todo) {
  sg_run_state_t *have = NULL;
  size_t nhave = 0;
  SG_CHECK(sg_recorder_find_experiment(db, x->name, x->config_text, exp_id));
  SG_CHECK(sg_recorder_run_states(db, *exp_id, &have, &nhave));
  int rc = plan_rows(db, *exp_id, x, have, nhave, ids, todo);
  sg_recorder_rows_free(&have, nhave);
  return rc;
}

/* `sgdlab run`'s arguments. */
typedef struct run_args {
  const char *config, *db_path;
  int quiet, verbose, dry, force, resume, nsets;
  char **sets;     /* --set values (the -H one included) */
  char *hosts_set; /* "hosts=..." from -H */
  const char *plant; /* --plant-bug: tests only */
  const char *sbatch; /* --sbatch PATH: write a batch script, run nothing */
  const char *habit, *habit_n; /* an mpirun process count: "-np", "4" */
} run_args_t;

/* mpirun's and other launchers' process-count options: the option's
 * name (its value, when written --opt=value, into *val), or NULL. */
static const char *count_option(const char *o, const char **val) {
  static const char *const names[] = {"-np", "--np", "-N", "--workers", "-workers", "-w", NULL};
  for (int i = 0; names[i]; i++) {
    size_t n = strlen(names[i]);
    if (strncmp(o, names[i], n)) continue;
    if (o[n] == '\0') return names[i];
    if (o[n] == '=') return *val = o + n + 1, names[i];
  }
  return NULL;
}

/* A whole non-negative number ("4"), not a file of that name. */
static int looks_like_count(const char *s) {
  if (!*s || strspn(s, "0123456789") != strlen(s)) return 0;
  return access(s, F_OK) != 0;
}

/* What to type instead of an mpirun habit; exit code 2. */
static int habit_error(const run_args_t *a) {
  const char *cfg = a->config ? a->config : "CONFIG", *n = a->habit_n ? a->habit_n : "N";
  if (!strcmp(a->habit, "-n"))
    fprintf(stderr, "sgdlab run: -n is --dry-run (list the runs, launch nothing), not a process "
            "count; for %s workers type: sgdlab run %s --set workers=%s\n", n, cfg, n);
  else
    fprintf(stderr, "sgdlab run: %s is not an option of sgdlab run; the number of workers is "
            "the experiment key workers: type: sgdlab run %s --set workers=%s\n", a->habit, cfg,
            n);
  return 2;
}

/* --opt=value: the value of long option `name` in arg o, or NULL. */
static const char *eq_value(const char *o, const char *name) {
  size_t n = strlen(name);
  return !strncmp(o, name, n) && o[n] == '=' ? o + n + 1 : NULL;
}

/* Parse argv into *a: 0, or the exit code (-1: --help shown, exit 0).
 * Every long option that takes a value takes it as --opt=value too. */
static int parse_args(int argc, char **argv, run_args_t *a) {
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = NULL;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
      run_usage(stdout);
      return -1;
    } else if ((v = count_option(o, &a->habit_n))) {
      a->habit = v;
      if (!strchr(o, '=') && i + 1 < argc && looks_like_count(argv[i + 1])) a->habit_n = argv[++i];
    } else if (!strcmp(o, "--set") && i + 1 < argc) a->sets[a->nsets++] = argv[++i];
    else if ((v = eq_value(o, "--set"))) a->sets[a->nsets++] = (char *)v;
    else if (!strcmp(o, "--db") && i + 1 < argc) a->db_path = argv[++i];
    else if ((v = eq_value(o, "--db"))) a->db_path = v;
    else if ((v = eq_value(o, "--plant-bug"))) a->plant = v;
    else if ((v = eq_value(o, "--sbatch"))) a->sbatch = v;
    else if (!strcmp(o, "--sbatch") && i + 1 < argc) a->sbatch = argv[++i];
    else if (!strcmp(o, "-H") && i + 1 < argc) {
      free(a->hosts_set);
      if (!(a->hosts_set = malloc(strlen(argv[i + 1]) + 8))) return 1;
      sprintf(a->hosts_set, "hosts=%s", argv[++i]);
    } else if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) a->quiet = 1;
    else if (!strcmp(o, "-v") || !strcmp(o, "--verbose")) a->verbose = 1;
    else if (!strcmp(o, "-n") || !strcmp(o, "--dry-run")) {
      a->dry = 1;
      if (!strcmp(o, "-n") && i + 1 < argc && looks_like_count(argv[i + 1]))
        a->habit = o, a->habit_n = argv[++i]; /* mpirun's -n 4 */
    }
    else if (!strcmp(o, "--force")) a->force = 1;
    else if (!strcmp(o, "--resume")) a->resume = 1;
    else if (!strcmp(o, "--plant-bug") && i + 1 < argc) a->plant = argv[++i];
    else if (o[0] == '-' && o[1]) {
      fprintf(stderr, "sgdlab run: unknown or incomplete option '%s' (sgdlab run --help)\n", o);
      return 2;
    } else if (!a->config) a->config = o;
    else {
      fprintf(stderr, "sgdlab run: one experiment file at a time ('%s' and '%s')\n", a->config, o);
      return 2;
    }
  }
  if (a->habit) return habit_error(a);
  if (!a->config) {
    fprintf(stderr, "sgdlab run: missing CONFIG, the experiment file to run (e.g. sgdlab run "
            "configs/local-softmax.yaml)\n\n");
    run_usage(stderr);
    return 2;
  }
  if (a->hosts_set) a->sets[a->nsets++] = a->hosts_set;
  return 0;
}

/* --dry-run: the resolved runs, one line each (-v: their settings). */
static void list_runs(const sg_experiment_t *x, int verbose) {
  for (size_t i = 0; i < x->nruns; i++) {
    const sg_run_spec_t *r = &x->runs[i];
    char where[256], ranks[2048];
    sg_run_placement(r, where, sizeof where);
    printf("[%zu/%zu] %s  processes=%d repeat=%d%s\n", i + 1, x->nruns, r->label, r->nprocs,
           r->repeat, where);
    if (verbose && sg_run_placement_ranks(r, ranks, sizeof ranks))
      printf("  placement: %s\n", ranks);
    if (verbose) {
      char *j = sg_opts_json(r->opts);
      printf("  %s\n", j ? j : "?");
      free(j);
    }
  }
}

/* The status of run x->runs[i] among the recorded rows (the row each
 * such run would take, as plan_rows matches them), or "pending" when
 * --resume would add it. */
static const char *resume_status(const sg_experiment_t *x, size_t i, sg_run_state_t *have,
                                 size_t nhave) {
  char *json = sg_opts_json(x->runs[i].opts);
  const char *st = "pending";
  for (size_t j = 0; json && j < nhave; j++)
    if (have[j].options_json && !strcmp(have[j].options_json, json)) {
      st = have[j].status;
      free(have[j].options_json); /* each row answers for one run */
      have[j].options_json = NULL;
      break;
    }
  free(json);
  return st;
}

/* --resume -n: the runs --resume would run, with their status now; the
 * database is read, nothing is written or launched. */
static int list_resume(const run_args_t *a, const sg_experiment_t *x) {
  sg_recorder_t *db = NULL;
  sg_run_state_t *have = NULL;
  size_t nhave = 0, todo = 0;
  int64_t exp_id = 0;
  const char **st = calloc(x->nruns ? x->nruns : 1, sizeof *st);
  int code = 0;
  char shown[1024]; /* the name as a terminal shows it: control bytes escaped */
  if (!st) return 1;
  if (access(a->db_path, F_OK) != 0) {
    fprintf(stderr, "sgdlab run: --resume: no database %s\n", a->db_path);
    code = 2;
  } else if (sg_recorder_open(&db, a->db_path) < 0 ||
             sg_recorder_find_experiment(db, x->name, x->config_text, &exp_id) < 0 ||
             sg_recorder_run_states(db, exp_id, &have, &nhave) < 0) {
    fprintf(stderr, "sgdlab run: --resume: %s\n", sg_err_msg());
    code = 2;
  }
  for (size_t i = 0; !code && i < x->nruns; i++)
    todo += strcmp(st[i] = resume_status(x, i, have, nhave), "ok") != 0;
  if (!code)
    printf("resuming experiment '%s' (id %lld): %zu of %zu runs to do\n",
           sg_printable(shown, sizeof shown, x->name), (long long)exp_id, todo, x->nruns);
  for (size_t i = 0; !code && i < x->nruns; i++)
    if (strcmp(st[i], "ok"))
      printf("[%zu/%zu] %s  processes=%d repeat=%d (%s)\n", i + 1, x->nruns, x->runs[i].label,
             x->runs[i].nprocs, x->runs[i].repeat, st[i]);
  sg_recorder_rows_free(&have, nhave);
  sg_recorder_close(&db);
  free(st);
  return code;
}

/* The experiment's rows: --resume finds them, else every run is recorded
 * up front as pending (an interrupted sweep shows, and --resume finds,
 * the runs it never started).  Fills *env and ids; returns the exit code
 * to give up with, or 0. */
static int open_rows(const run_args_t *a, sg_recorder_t *db, const sg_experiment_t *x,
                     const char *rank_bin, sg_progress_t **prog, sg_run_env_t *env, int64_t *ids,
                     size_t *todo) {
  if (!a->resume) {
    if (sg_run_begin(db, x, a->quiet, a->verbose, rank_bin, prog, env) < 0 ||
        plan_rows(db, env->exp_id, x, NULL, 0, ids, todo) < 0) {
      fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
      return 1;
    }
    return 0;
  }
  int64_t exp_id = 0;
  char shown[1024];
  if (resume_rows(db, x, &exp_id, ids, todo) < 0) {
    fprintf(stderr, "sgdlab run: --resume: %s\n", sg_err_msg());
    return 2;
  }
  if (sg_progress_new(prog, a->quiet, x->nruns) < 0) return 1;
  sg_run_install_signals();
  *env = (sg_run_env_t){.db = db, .exp_id = exp_id, .progress = *prog, .verbose = a->verbose,
                        .rank_bin = rank_bin};
  if (!a->quiet)
    printf("resuming experiment '%s' (id %lld): %zu of %zu runs to do\n",
           sg_printable(shown, sizeof shown, x->name), (long long)exp_id, *todo, x->nruns);
  return 0;
}

/* Execute every run still to do; returns the exit code.  A run another
 * harness claimed first (two --resume of one experiment) is skipped. */
static int run_all(const run_args_t *a, const sg_experiment_t *x, const sg_run_env_t *env,
                   size_t todo) {
  size_t failed = 0, skipped = 0;
  char shown[1024];
  for (size_t i = 0; i < x->nruns; i++) {
    if (env->run_ids[i] < 0) continue; /* --resume: ok already */
    sg_run_result_t res;
    int rc = sg_run_execute(env, &x->runs[i], i, x->nruns, &res);
    if (rc == SG_EINTERRUPTED) {
      int sig = sg_run_signal();
      fprintf(stderr, "sgdlab run: interrupted (%s); run %lld marked interrupted, the runs not "
              "started stay pending (sgdlab run %s --resume runs them)\n",
              sig > 0 ? strsignal(sig) : "signal", (long long)res.run_id, a->config);
      return 128 + (sig > 0 ? sig : SIGINT);
    }
    if (rc < 0) {
      fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
      return 1;
    }
    if (res.skipped) {
      skipped++;
      if (!a->quiet)
        printf("run %lld: another sgdlab claimed it first; skipped\n", (long long)res.run_id);
      continue;
    }
    if (!res.ok) {
      failed++;
      if (a->quiet) fprintf(stderr, "sgdlab run: run %lld failed: %s\n", (long long)res.run_id, res.error);
    }
  }
  if (!a->quiet)
    printf("experiment '%s' (id %lld): %zu run%s, %zu failed; results in %s\n",
           sg_printable(shown, sizeof shown, x->name), (long long)env->exp_id, todo - skipped,
           todo - skipped == 1 ? "" : "s", failed, a->db_path);
  return failed ? 1 : 0;
}

/* launcher slurm: the munged socket the user named (launch.h). */
static int slurm_admit(const sg_experiment_t *x) {
  for (size_t i = 0; i < x->nruns; i++)
    if (!strcmp(sg_opts_str_or(x->runs[i].opts, "launcher", ""), "slurm"))
      return sg_slurm_admit_socket();
  return SG_OK;
}

/* Load, check and admit the experiment (bad input: exit 2, nothing launched). */
static int load_experiment(const run_args_t *a, sg_experiment_t **x) {
  if (sg_config_load(x, a->config, a->sets, a->nsets) < 0 ||
      sg_admit_experiment(*x, a->force, a->dry ? stdout : NULL) < 0 ||
      sg_run_cluster_admit(*x, a->config) < 0 || slurm_admit(*x) < 0 ||
      sg_clock_skew_parse(getenv("SGDLAB_TEST_CLOCK_SKEW_US") ? getenv("SGDLAB_TEST_CLOCK_SKEW_US")
                          : "", 0, &(double){0}) < 0) { /* test only: clock_sync.h */
    fprintf(stderr, "%s\n", sg_err_msg());
    return 2;
  }
  warn_duplicates(*x);
  /* tests only: every rank reads it as the spec key _plant_bug */
  for (size_t i = 0; a->plant && i < (*x)->nruns; i++)
    if (sg_opts_setf((*x)->runs[i].opts, "_plant_bug", "%s", a->plant) < 0) return 1;
  return 0;
}

/* Whether paths a and b name one existing file. */
static int same_file(const char *a, const char *b) {
  struct stat x, y;
  return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* --sbatch: the batch script for the experiment's largest run; never in
 * place of the experiment file or the results database (exit 2). */
static int write_sbatch(const run_args_t *a, const sg_experiment_t *x) {
  if (same_file(a->sbatch, a->config) || same_file(a->sbatch, a->db_path)) {
    fprintf(stderr, "sgdlab run: --sbatch %s is the %s; give the batch script a file of its own\n",
            a->sbatch, same_file(a->sbatch, a->config) ? "experiment file" : "results database");
    return 2;
  }
  int nprocs = 1;
  for (size_t i = 0; i < x->nruns; i++)
    if (x->runs[i].nprocs > nprocs) nprocs = x->runs[i].nprocs;
  sg_slurm_batch_t b = {.path = a->sbatch, .config = a->config, .db = a->db_path,
                        .nprocs = nprocs, .nsets = a->nsets, .sets = a->sets};
  if (sg_slurm_write_batch(&b) < 0) {
    fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
    return 1;
  }
  if (!a->quiet)
    printf("wrote %s (%d tasks on %d nodes); submit it with: sbatch %s\n", a->sbatch, nprocs,
           nprocs, a->sbatch);
  return 0;
}

int sg_cmd_run(int argc, char **argv) {
  run_args_t a = {.db_path = SG_DEFAULT_DB, .sets = calloc((size_t)argc + 1, sizeof(char *))};
  int64_t *ids = NULL;
  size_t todo = 0;
  sg_experiment_t *x = NULL;
  sg_recorder_t *db = NULL;
  sg_progress_t *prog = NULL;
  sg_run_env_t env;
  char rank_bin[4096];
  if (!a.sets) return 1;
  int code = parse_args(argc, argv, &a);
  if (code) {
    code = code < 0 ? 0 : code;
    goto out;
  }
  if ((code = load_experiment(&a, &x))) goto out;
  if (a.sbatch) {
    code = write_sbatch(&a, x);
    goto out;
  }
  if (a.dry) {
    if (a.resume) code = list_resume(&a, x);
    else list_runs(x, a.verbose);
    goto out;
  }
  if (sg_launch_find_rank_bin(rank_bin, sizeof rank_bin) < 0 || sg_recorder_open(&db, a.db_path) < 0) {
    fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
    code = 2;
    goto out;
  }
  sg_run_cluster_sweep_leftovers(a.quiet); /* clusters of a harness that was killed */
  if (!(ids = calloc(x->nruns ? x->nruns : 1, sizeof *ids))) {
    code = 1;
    goto out;
  }
  if ((code = open_rows(&a, db, x, rank_bin, &prog, &env, ids, &todo))) goto out;
  env.run_ids = ids;
  code = run_all(&a, x, &env, todo);
out:
  sg_progress_destroy(&prog);
  sg_recorder_close(&db);
  sg_experiment_destroy(&x);
  free(ids);
  free(a.hosts_set);
  free(a.sets);
  return code;
}
