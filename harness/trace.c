/* trace.c - `sgdlab trace RUN`: a run's step records as a Chrome /
 * Perfetto trace (the JSON trace-event format).
 *
 * The run is one process (pid = run id) named after its variant; each rank
 * is one thread track (tid = rank) named "rank R ROLE", ranks in order.
 * Every step row gives up to three complete events ("ph":"X"): compute,
 * comm and wait, each with its recorded duration, laid end to end from the
 * row's t_start (seconds since the run's start, in microseconds here).  A
 * row records how long each phase took, not where in the step it fell, so
 * the order compute -> comm -> wait within a step is nominal; phases of
 * zero or unknown duration get no event.  The run's settings go into
 * metadata events and "otherData".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "err.h"
#include "escape.h"
#include "report.h"

static const char usage[] =
    "usage: sgdlab trace RUN [--db PATH] [--out FILE]\n"
    "\n"
    "Write run RUN's step records as a trace (Chrome trace-event JSON): one\n"
    "track per rank, a compute, comm and wait slice per step.  Open it in\n"
    "https://ui.perfetto.dev or chrome://tracing.\n"
    "\n"
    "  --db PATH    results database (default " SG_DEFAULT_DB ")\n"
    "  --out FILE   write the trace to FILE (default: standard output)\n";

/* "key": as JSON, and a number or null. */
static void jkey(FILE *f, const char *k) {
  sg_json_str(f, k);
  fputc(':', f);
}

static void jnum(FILE *f, double v) {
  char b[40];
  if (isnan(v) || isinf(v)) fputs("null", f);
  else fputs(sg_fmt_real(b, sizeof b, v), f);
}

/* A metadata event: {"ph":"M","pid":P[,"tid":T],"name":NAME,"args":{KEY:VAL}}. */
static void meta(FILE *f, int64_t pid, long tid, const char *name, const char *key,
                 const char *sval, long ival) {
  fprintf(f, ",\n{\"ph\":\"M\",\"pid\":%lld,", (long long)pid);
  if (tid >= 0) fprintf(f, "\"tid\":%ld,", tid);
  fprintf(f, "\"name\":\"%s\",\"args\":{\"%s\":", name, key);
  if (sval) sg_json_str(f, sval);
  else fprintf(f, "%ld", ival);
  fputs("}}", f);
}

static int run_meta(FILE *f, sqlite3 *db, const sg_rset_t *s, const sg_rrun_t *r) {
  char title[512], lab[256];
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  fputs("{\"displayTimeUnit\":\"ms\",\"otherData\":{", f);
  fprintf(f, "\"run_id\":%lld,\"experiment_id\":%lld,", (long long)r->id,
          (long long)r->experiment_id);
  jkey(f, "experiment");
  sg_json_str(f, s->name);
  fputs(",\"variant\":", f);
  sg_json_str(f, sg_rrun_label(s, r, lab, sizeof lab));
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT engine, transport, launcher, workers, servers, status,"
                        " error, started_at, wall_s, options_json FROM runs WHERE id = ?1",
                        &st));
  sqlite3_bind_int64(st, 1, r->id);
  if (sqlite3_step(st) == SQLITE_ROW)
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      fputc(',', f);
      jkey(f, sqlite3_column_name(st, c));
      int t = sqlite3_column_type(st, c);
      if (t == SQLITE_NULL) fputs("null", f);
      else if (t == SQLITE_INTEGER || t == SQLITE_FLOAT) jnum(f, sqlite3_column_double(st, c));
      else sg_json_str(f, sg_rdb_text(st, c));
    }
  fputs("},\n\"traceEvents\":[\n", f);
  snprintf(title, sizeof title, "run %lld: %s (experiment %s)", (long long)r->id, lab,
           s->name);
  fprintf(f, "{\"ph\":\"M\",\"pid\":%lld,\"name\":\"process_name\",\"args\":{\"name\":",
          (long long)r->id);
  sg_json_str(f, title);
  fputs("}}", f);
  snprintf(title, sizeof title, "engine %s, workers %d, servers %d, transport %s, %s",
           r->engine, r->workers, r->servers, r->transport, r->status);
  meta(f, r->id, -1, "process_labels", "labels", title, 0);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* One track per rank: the ranks table and every rank with step rows. */
static int rank_tracks(FILE *f, sqlite3 *db, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  char name[160];
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT rank, max(role) FROM (SELECT rank, role FROM ranks"
                        " WHERE run_id = ?1 UNION ALL SELECT DISTINCT rank, role"
                        " FROM steps WHERE run_id = ?1) WHERE rank IS NOT NULL"
                        " GROUP BY rank ORDER BY rank",
                        &st));
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    long rank = (long)sqlite3_column_int64(st, 0);
    const char *role = sg_rdb_text(st, 1);
    snprintf(name, sizeof name, "rank %ld %s", rank, *role ? role : "(no role)");
    meta(f, run_id, rank, "thread_name", "name", name, 0);
    meta(f, run_id, rank, "thread_sort_index", "sort_index", NULL, rank);
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Complete events of every step row; *n gets their count. */
static int step_events(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  static const char *const phase[3] = {"compute", "comm", "wait"};
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT rank, step, epoch, t_start, compute_s, comm_s, wait_s,"
                        " bytes_sent, bytes_recv, loss, staleness FROM steps"
                        " WHERE run_id = ?1 AND t_start IS NOT NULL"
                        " ORDER BY rank, step, t_start",
                        &st));
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    double t = sqlite3_column_double(st, 3) * 1e6;
    for (int k = 0; k < 3; k++) {
      double d = sg_rdb_double(st, 4 + k) * 1e6;
      if (!(d > 0) || isinf(d)) continue; /* NULL, zero, negative: no slice */
      fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"step\",\"name\":\"%s\",\"pid\":%lld,"
                 "\"tid\":%lld,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"step\":%lld",
              phase[k], (long long)run_id, (long long)sqlite3_column_int64(st, 0), t, d,
              (long long)sqlite3_column_int64(st, 1));
      if (k == 0) {
        fprintf(f, ",\"epoch\":%lld,\"loss\":", (long long)sqlite3_column_int64(st, 2));
        jnum(f, sg_rdb_double(st, 9));
        fputs(",\"staleness\":", f);
        jnum(f, sg_rdb_double(st, 10));
      } else if (k == 1) {
        fprintf(f, ",\"bytes_sent\":%lld,\"bytes_recv\":%lld",
                (long long)sqlite3_column_int64(st, 7), (long long)sqlite3_column_int64(st, 8));
      }
      fputs("}}", f);
      (*n)++;
      t += d;
    }
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

static int write_trace(FILE *f, sqlite3 *db, int64_t run_id, long long *n) {
  sg_rset_t *s = NULL;
  const sg_rrun_t *r = NULL;
  int64_t exp_id;
  int rc = SG_OK;
  /* the whole experiment, so the variant label has its context */
  SG_TRY(sg_rdb_run_experiment(db, run_id, &exp_id));
  SG_TRY(sg_rset_load(db, exp_id, -1, 0.85, &s));
  for (size_t i = 0; i < s->n; i++)
    if (s->runs[i].id == run_id) r = &s->runs[i];
  if (!r) {
    rc = sg_err_set(SG_ENOTFOUND, "no run with id %lld in the database", (long long)run_id);
    goto fail;
  }
  SG_TRY(run_meta(f, db, s, r));
  SG_TRY(rank_tracks(f, db, run_id));
  SG_TRY(step_events(f, db, run_id, n));
  fputs("\n]}\n", f);
fail:
  sg_rset_destroy(&s);
  return rc;
}

int sg_cmd_trace(int argc, char **argv) {
  const char *db_path = SG_DEFAULT_DB, *out = NULL, *pos = NULL;
  sqlite3 *db = NULL;
  FILE *f = NULL;
  long long n = 0, id;
  int rc = SG_OK;
  char *end;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 0;
    } else if (!strcmp(a, "--db") || !strcmp(a, "--out")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "sgdlab trace: %s needs a value\n%s", a, usage);
        return 2;
      }
      *(!strcmp(a, "--db") ? &db_path : &out) = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "sgdlab trace: unknown option '%s'\n%s", a, usage);
      return 2;
    } else if (!pos) {
      pos = a;
    } else {
      fprintf(stderr, "sgdlab trace: unexpected argument '%s'\n%s", a, usage);
      return 2;
    }
  }
  if (!pos) {
    fprintf(stderr, "sgdlab trace: which run? give its id (see `sgdlab list`)\n%s", usage);
    return 2;
  }
  id = strtoll(pos, &end, 10);
  if (end == pos || *end || id < 0) {
    fprintf(stderr, "sgdlab trace: '%s' is not a run id (see `sgdlab list`)\n", pos);
    return 2;
  }
  sg_err_clear();
  SG_TRY(sg_rdb_open(&db, db_path));
  if (out && !(f = fopen(out, "w"))) {
    rc = sg_err_set(SG_EIO, "cannot write %s: %s", out, strerror(errno));
    goto fail;
  }
  SG_TRY(write_trace(f ? f : stdout, db, id, &n));
  if (fflush(f ? f : stdout) != 0 || ferror(f ? f : stdout)) {
    rc = sg_err_set(SG_EIO, "cannot write %s", out ? out : "standard output");
    goto fail;
  }
  if (out) fprintf(stderr, "trace: %s: %lld slices of run %lld\n", out, n, id);
fail:
  if (f && fclose(f) != 0 && rc == SG_OK) rc = sg_err_set(SG_EIO, "cannot write %s", out);
  sqlite3_close(db);
  if (rc < 0) {
    fprintf(stderr, "sgdlab trace: %s\n", *sg_err_msg() ? sg_err_msg() : sg_strerror(rc));
    return 1;
  }
  return 0;
}
