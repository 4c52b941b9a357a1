/* report.h - reading the results database: runs, their variants and the
 * numbers every report shows.  Used by `sgdlab report` (report.c,
 * report_summary.c) and `sgdlab list` / `sgdlab show` (show.c).
 *
 * Everything here is SQL over the results database's tables (the
 * recorder creates them); nothing is re-run.  A run's "variant" is its
 * engine plus the options that distinguish it ("ps ssp(2)", "allreduce
 * ring/mpi", "mapreduce tree"), plus any other setting that was swept
 * within the experiment ("ps sync lr=0.1").  Workers are kept apart
 * (column `workers`); labels that need them say "ps sync, N=4".
 *
 * Definitions (also written into summary.md):
 *   time to target   wall_s of the first eval whose test_acc >= target
 *   final accuracy   test_acc of the last eval (largest step)
 *   samples/s        worker step rows from the first eval period on
 *                    (steps >= the step of the first eval after training;
 *                    every step when that is the last one) times the
 *                    per-worker batch (local: workers*batch), over the
 *                    wall-clock span of those rows: latest step end
 *                    (t_start + compute + comm + wait) minus earliest
 *                    t_start over the worker ranks (ranks with a loss,
 *                    not the mapreduce driver).  Evaluation pauses inside
 *                    the span are included, for every engine alike.
 *   bytes/step       busiest rank: max over ranks of the mean of
 *                    bytes_sent + bytes_recv over that rank's step rows
 *   compute/comm/wait  mean seconds per step over the worker ranks (roles
 *                    other than server and driver; all ranks if none)
 */
#ifndef SG_REPORT_H
#define SG_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <sqlite3.h>

typedef struct sg_rrun {
  int64_t id, experiment_id;
  char engine[32];
  char base[256];    /* engine + its distinguishing options: "ps ssp(2)" */
  char variant[320]; /* base + swept settings: "ps sync lr=0.1" */
  char series[320];  /* its name in figures over workers: the variant, or,
                      * when its servers S divide its workers N, rendered
                      * again with servers=N/(N/S): "ps sync servers=N/8" */
  int stale;         /* the engine table says its gradients are stale
                      * (sg_engine_t.stale over its recorded options) */
  int decided;       /* named when its experiment was expanded (_variant):
                      * base is the whole name, no settings appended */
  char transport[16], launcher[16];
  int workers, servers, processes, repeat;
  int64_t seed;
  char status[16]; /* running | ok | failed */
  char error[512];
  char started_at[40];
  double wall_s; /* NaN when NULL */
  /* from evals */
  int nevals;
  int64_t last_step;
  double final_acc;     /* NaN: no evals */
  double t_target;      /* NaN: target never reached */
  int64_t warm_step;    /* step of the first eval after training, 0 none */
  double samples_per_s; /* NaN: no worker step rows */
  int64_t rank_batch;   /* samples per worker step row (local: N*b) */
  /* from steps */
  int64_t step_rows;
  double bytes_per_step; /* busiest rank; NaN: no steps */
  int bytes_in_mpi; /* allreduce native: MPI_Allreduce moves the bytes, the
                       transport counters see none (bytes_per_step is not
                       the traffic) */
  double compute_s, comm_s, wait_s; /* per step, worker ranks; NaN: none */
  int has_staleness;
  int key; /* index of its label among the set's distinct labels, in order
              of first appearance (sg_rkey_text: A, B, ..., Z, AA, ...) */
} sg_rrun_t;

#define SG_RSET_MAX_EXP 16 /* experiments in one report */

typedef struct sg_rset {
  int64_t experiment_id; /* the first experiment's */
  int64_t exp_ids[SG_RSET_MAX_EXP]; /* every experiment of the set */
  size_t nexp;
  char name[128]; /* several experiments: "A + B" */
  char started_at[40];
  char host[128];
  double target;
  sg_rrun_t *runs;
  size_t n;
  int workers_vary; /* some variant ran with more than one worker count */
} sg_rset_t;

/* ---- report_data.c ---------------------------------------------------- */

/* Open `path` read-only.  A missing file or a file without the sgdlab
 * tables is SG_ENOTFOUND / SG_EFORMAT with a message naming the path.
 * Caller owns *db (sqlite3_close). */
int sg_rdb_open(sqlite3 **db, const char *path);

/* Resolve an experiment selector: NULL = the latest experiment; digits =
 * an id; otherwise the latest experiment with that name.  SG_ENOTFOUND
 * (message names the selector) when there is none. */
int sg_rdb_experiment(sqlite3 *db, const char *sel, int64_t *id);

/* Load the runs of experiment `exp_id`, or only run `run_id` when
 * run_id >= 0 (exp_id is then taken from the run; SG_ENOTFOUND names the
 * run when it does not exist).  `target` is the accuracy for time to
 * target.  Caller owns *out; free with sg_rset_destroy(). */
int sg_rset_load(sqlite3 *db, int64_t exp_id, int64_t run_id, double target,
                 sg_rset_t **out);
/* Run run_id with the whole experiment around it (so its label has its
 * context): *out the set, *run its entry.  SG_ENOTFOUND naming the id
 * when there is no such run. */
int sg_rset_load_run(sqlite3 *db, int64_t run_id, sg_rset_t **out, const sg_rrun_t **run);
void sg_rset_destroy(sg_rset_t **s);

/* Append the runs of *add to `into` (which takes *add and nulls it).  From
 * two experiments on, every variant starts with its experiment's name
 * ("quickstart: ps sync", or "quickstart#3: ps sync" when two experiments
 * share a name) so runs of different experiments never share a label.
 * SG_EINVAL past SG_RSET_MAX_EXP experiments.  join: no prefix, so that
 * runs of one variant in several experiments share its label (a sweep
 * over N continued in another experiment file: one line per variant;
 * runs of one variant and N in two of them count as its repeats). */
int sg_rset_merge(sg_rset_t *into, sg_rset_t **add, int join);

/* The set's experiment ids as a JSON array "[1,2]" for SQL
 * `experiment_id IN (SELECT value FROM json_each(?))`.  Returns buf. */
const char *sg_rset_ids_json(const sg_rset_t *s, char *buf, size_t len);

/* The experiment id of run `run_id` into *exp_id; SG_ENOTFOUND ("no run
 * with id N in the database") when there is no such run. */
int sg_rdb_run_experiment(sqlite3 *db, int64_t run_id, int64_t *exp_id);

/* "ps sync" or "ps sync, N=4" (workers appended when they vary). Returns
 * buf. */
const char *sg_rrun_label(const sg_rset_t *s, const sg_rrun_t *r, char *buf,
                          size_t len);

/* The short key of label number k: "A".."Z", "AA".."ZZ", ... Returns
 * buf.  Figures name variants by key (and a shortened label); the
 * summary tables give each key its full label. */
const char *sg_rkey_text(int k, char *buf, size_t len);

/* printf(fmt, v) into buf, or "—" when v is NaN.  Returns buf. */
const char *sg_rfmt(char *buf, size_t len, const char *fmt, double v);
/* "1.5 KiB", "12.0 MiB", ... or "—" when NaN.  Returns buf. */
const char *sg_rfmt_bytes(char *buf, size_t len, double bytes);

/* Median of v[0..n) (sorts v in place); NaN when n == 0. */
double sg_rmedian(double *v, size_t n);

/* A figure drawn by the report: DIR/name.png, DIR/name.svg. */
typedef struct sg_rfig {
  char name[32];
  char caption[640]; /* what is plotted and how (smoothing, definitions) */
} sg_rfig_t;

/* ---- report_summary.c ------------------------------------------------- */

/* One row of the summary table: runs with the same (variant, workers);
 * numbers are medians over the repeats that finished ok (NaN: none). */
typedef struct sg_rrow {
  size_t first; /* index of the group's first run in the set */
  int runs, ok, failed, other, reached;
  double t_target, final_acc, samples_per_s, bytes_per_step;
} sg_rrow_t;

/* The summary rows of `s`, in order of first appearance.  Caller frees
 * *rows. */
int sg_rrows(const sg_rset_t *s, sg_rrow_t **rows, size_t *n);

/* Write DIR/summary.md for `s`: the run table, failed runs, the bench
 * table (experiment reports only, read from db), figure links and the
 * run_info of the runs.  `single_run`: the report is of one run. */
int sg_report_summary(sqlite3 *db, const char *db_path, const sg_rset_t *s,
                      int single_run, const char *dir, const sg_rfig_t *figs,
                      size_t nfigs);

/* The report's runs whose 1-minute load average, before or after the run,
 * exceeded both the host's cores and the run's own process count
 * (run_info load.*, cores; runs.processes): a run of 4 processes on 2
 * cores makes a load of 4 by itself.  Their ids, ", "
 * between, into out (cap bytes, shortened with "..."); the count, or a
 * negative SG_E* code. */
int sg_report_loaded_runs(sqlite3 *db, const sg_rset_t *s, int single_run, char *out,
                          size_t cap);

/* The loaded-host warning after its heading, one wording for summary.md
 * and index.html (plain text: the caller escapes it): "N runs (IDS)
 * started or ended with ...". */
void sg_report_loaded_text(char *buf, size_t cap, int n, const char *ids);

/* Whether run run_id is one sg_report_loaded_runs would name: 1 with
 * the warning's text (sg_report_loaded_text) in buf, 0, or a negative
 * SG_E* code.  `sgdlab bench` prints it under its table. */
int sg_report_run_loaded(sqlite3 *db, int64_t run_id, char *buf, size_t cap);

/* Prepare `sql` or set an error naming the statement. */
int sg_rdb_prepare(sqlite3 *db, const char *sql, sqlite3_stmt **st);
/* Column as text, "" for NULL. */
const char *sg_rdb_text(sqlite3_stmt *st, int col);
/* Column as double, NaN for NULL. */
double sg_rdb_double(sqlite3_stmt *st, int col);

/* ---- report_html.c ---------------------------------------------------- */

/* Write DIR/index.html: one self-contained page (inline SVG figures, no
 * external resources, a Content-Security-Policy that lets only its own
 * sorting script run) with the summary and run tables, the figures, the
 * environment (run_info), the experiment files and the options that
 * differ between runs.  Every database string is HTML-escaped. */
int sg_report_html(sqlite3 *db, const char *db_path, const sg_rset_t *s,
                   int single_run, const char *dir, const sg_rfig_t *figs,
                   size_t nfigs);

/* ---- report_files.c --------------------------------------------------- */

/* The files one report wrote into its directory.  The list is kept in
 * DIR/SG_REPORT_MANIFEST; the next report into DIR removes the files the
 * old list names that it did not write itself, and only those with a
 * report file name (*.png *.svg *.gp *.tsv, summary.md, index.html). */
#define SG_REPORT_MANIFEST "report-files.txt"

typedef struct sg_rfiles {
  char **names;
  size_t n, cap;
} sg_rfiles_t;

/* Record `name` (a plain file name in the directory) as written. */
int sg_rfiles_add(sg_rfiles_t *w, const char *name);
/* 1 when `name` is a name a report writes (extension or fixed name). */
int sg_rfiles_is_report_name(const char *name);
/* Remove from `dir` what the previous manifest lists and `w` does not
 * (regular files with report names only), then write the new manifest.
 * *removed (may be NULL) gets the count. */
int sg_rfiles_commit(const sg_rfiles_t *w, const char *dir, int *removed);
void sg_rfiles_free(sg_rfiles_t *w);

/* ---- the cost model over the database (cost_model_cmd.c, cost_model_plot.c) */

/* The "Cost model" section of summary.md for the experiments' runs on a
 * cluster that have matching bench rows; nothing when none has. */
int sg_cost_summary_md(FILE *f, sqlite3 *db, const int64_t *exps, size_t nexp);

/* One run in a figure of `sgdlab model --plot`. */
typedef struct sg_cost_point {
  char label[48]; /* engine/variant, already safe text */
  double x;       /* workers, or the slowest link in Mbit/s */
  double predicted, measured; /* seconds per step */
} sg_cost_point_t;

/* DIR/NAME.png (.svg, .gp, .tsv): measured ms/step as points and
 * predicted as lines, one colour per label, against x (workers, or rate
 * when x_is_rate); SG_EIO when gnuplot fails. */
int sg_cost_plot(const char *dir, const char *name, int x_is_rate, const sg_cost_point_t *pts,
                 size_t n);

/* ---- the commands over the database (argv[0] is the command's name;
 * exit code: 0 ok, 1 failure, 2 usage) */
/* claims_html.c: the "Claims" section of index.html, from the claims
 * table `sgdlab claims` records, for the experiments in ids_json. */
int sg_report_claims_html(sqlite3 *db, FILE *f, const char *ids_json);

int sg_cmd_report(int argc, char **argv);  /* report.c */
int sg_cmd_list(int argc, char **argv);    /* show.c */
int sg_cmd_show(int argc, char **argv);    /* show.c */
int sg_cmd_trace(int argc, char **argv);   /* trace.c */
int sg_cmd_export(int argc, char **argv);  /* export.c */
int sg_cmd_model(int argc, char **argv);   /* cost_model_cmd.c */
/* `sgdlab model --what-if` (cost_model_whatif.c): no database, no run. */
int sg_cmd_model_whatif(int argc, char **argv);

#endif
