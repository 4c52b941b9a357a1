/* show.c - `sgdlab list` and `sgdlab show RUN`: the database as text.
 *
 * list: every experiment (or those whose name contains a filter) with a
 * compact table of its runs; --json: the same as one JSON document.
 * show: everything recorded about one run: its row, options, ranks,
 * run_info, evaluations and a per-rank summary of its steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_path.h"
#include "err.h"
#include "escape.h"
#include "report.h"

static const char list_usage[] =
    "usage: sgdlab list [NAME-FILTER] [--json] [--db PATH]\n"
    "\n"
    "List the experiments in the results database with their runs: id,\n"
    "variant, workers, status, wall time and final test accuracy.\n"
    "\n"
    "  NAME-FILTER only experiments whose name contains this text\n"
    "  --json      one JSON array of experiments, each with its runs\n"
    "  --db PATH   results database (default " SG_DEFAULT_DB ")\n";

static const char show_usage[] =
    "usage: sgdlab show RUN [--db PATH]\n"
    "\n"
    "Show everything recorded about run RUN (an id from `sgdlab list`): its\n"
    "settings, options, ranks, run info, evaluations and per-rank step\n"
    "summary, and its error if it failed.\n"
    "\n"
    "  --db PATH   results database (default " SG_DEFAULT_DB ")\n";

/* Parse [POSITIONAL] [--db PATH] [--json] [--help]; want_pos: 0 none, 1
 * required, 2 optional; json NULL: no --json.  0 ok, 1 help shown, 2
 * usage. */
static int parse_args(int argc, char **argv, const char *cmd,
                      const char *usage, const char **db, const char **pos,
                      int want_pos, int *json) {
  *db = SG_DEFAULT_DB;
  *pos = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return 1;
    } else if (json && !strcmp(a, "--json")) {
      *json = 1;
    } else if (!strcmp(a, "--db")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "sgdlab %s: --db needs a value\n%s", cmd, usage);
        return 2;
      }
      *db = argv[++i];
    } else if (!strncmp(a, "--db=", 5)) {
      *db = a + 5;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "sgdlab %s: unknown option '%s'\n%s", cmd, a, usage);
      return 2;
    } else if (want_pos && !*pos) {
      *pos = a;
    } else {
      fprintf(stderr, "sgdlab %s: unexpected argument '%s'\n%s", cmd, a, usage);
      return 2;
    }
  }
  if (want_pos == 1 && !*pos) {
    fprintf(stderr, "sgdlab %s: which run? give its id\n%s", cmd, usage);
    return 2;
  }
  return 0;
}

static int fail_msg(const char *cmd, int rc) {
  fprintf(stderr, "sgdlab %s: %s\n", cmd,
          *sg_err_msg() ? sg_err_msg() : sg_strerror(rc));
  return 1;
}

/* ---- database text on a terminal ---------------------------------------- */

/* Length of the well-formed UTF-8 sequence at s that is not a C1 control
 * (U+0080..U+009F), or 0. */
static size_t utf8_printable(const unsigned char *s) {
  size_t n = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
  if (s[0] >= 0xf5) n = 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if (n == 2 && s[0] == 0xc2 && s[1] < 0xa0) return 0;
  return n;
}

/* Database text as it may reach a terminal: the database holds text from
 * experiment files, rank processes and mpirun, and a control byte there
 * (ESC, a C1 CSI, a carriage return) would drive the reader's terminal
 * (retitle it, rewrite what the screen shows).  Control bytes and
 * malformed UTF-8 are written as \xHH; with `lines`, newlines stay
 * (mpirun's multi-line messages).  One piece of output from *p into out[8];
 * returns its length and advances *p. */
static size_t tty_piece(const unsigned char **p, char *out, int lines) {
  const unsigned char *s = *p;
  size_t n = *s >= 0x80 ? utf8_printable(s)
             : (*s >= 0x20 && *s != 0x7f) || (lines && *s == '\n');
  if (n) {
    memcpy(out, s, n);
    *p += n;
    return n;
  }
  *p += 1;
  return (size_t)snprintf(out, 8, "\\x%02x", *s);
}

/* tty text of s into out (truncated to fit cap); returns out. */
static const char *tty(char *out, size_t cap, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t len = 0, n;
  char piece[8];
  while (*p && len + (n = tty_piece(&p, piece, 0)) < cap) {
    memcpy(out + len, piece, n);
    len += n;
  }
  out[len] = '\0';
  return out;
}

/* tty text of s to stdout, newlines kept, whatever its length. */
static void put_tty(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  char piece[8];
  while (*p) fwrite(piece, 1, tty_piece(&p, piece, 1), stdout);
}

/* ---- list -------------------------------------------------------------- */

static int list_experiment(sqlite3 *db, int64_t id) {
  sg_rset_t *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  char num[32], acc[32];
  SG_TRY(sg_rset_load(db, id, -1, 0.85, &s));
  char t1[512], t2[512], t3[512];
  printf("experiment %lld  %s  started %s on %s  (%zu run%s)\n", (long long)id,
         tty(t1, sizeof t1, s->name), *s->started_at ? tty(t2, sizeof t2, s->started_at) : "?",
         *s->host ? tty(t3, sizeof t3, s->host) : "?", s->n, s->n == 1 ? "" : "s");
  if (s->n) {
    printf("  %6s  %-32s %7s  %-8s %9s  %9s\n", "run", "variant", "workers",
           "status", "wall_s", "final acc");
    for (size_t i = 0; i < s->n; i++) {
      const sg_rrun_t *r = &s->runs[i];
      printf("  %6lld  %-32s %7d  %-8s %9s  %9s", (long long)r->id, tty(t1, sizeof t1, r->variant),
             r->workers, tty(t2, sizeof t2, r->status), sg_rfmt(num, sizeof num, "%.2f", r->wall_s),
             sg_rfmt(acc, sizeof acc, "%.4f", r->final_acc));
      if (*r->error) printf("  %s", tty(t3, 61, r->error));
      putchar('\n');
    }
  }
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT count(*), count(DISTINCT impl) FROM bench"
                        " WHERE experiment_id = ?1",
                        &st));
  sqlite3_bind_int64(st, 1, id);
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) > 0)
    printf("  bench: %d rows, %d implementation%s\n", sqlite3_column_int(st, 0),
           sqlite3_column_int(st, 1), sqlite3_column_int(st, 1) == 1 ? "" : "s");
fail:
  sqlite3_finalize(st);
  sg_rset_destroy(&s);
  return rc;
}

/* A number or null. */
static void json_num(double v, const char *fmt) {
  if (isnan(v) || isinf(v)) fputs("null", stdout);
  else printf(fmt, v);
}

/* One experiment as a JSON object (list --json). */
static int list_experiment_json(sqlite3 *db, int64_t id, int first) {
  sg_rset_t *s = NULL;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rset_load(db, id, -1, 0.85, &s));
  printf("%s{\"id\":%lld,\"name\":", first ? "\n" : ",\n", (long long)id);
  sg_json_str(stdout, s->name);
  fputs(",\"started_at\":", stdout);
  sg_json_str(stdout, s->started_at);
  fputs(",\"host\":", stdout);
  sg_json_str(stdout, s->host);
  fputs(",\"runs\":[", stdout);
  for (size_t i = 0; i < s->n; i++) {
    const sg_rrun_t *r = &s->runs[i];
    printf("%s\n  {\"id\":%lld,\"engine\":", i ? "," : "", (long long)r->id);
    sg_json_str(stdout, r->engine);
    fputs(",\"variant\":", stdout);
    sg_json_str(stdout, r->variant);
    printf(",\"workers\":%d,\"repeat\":%d,\"status\":", r->workers, r->repeat);
    sg_json_str(stdout, r->status);
    fputs(",\"wall_s\":", stdout);
    json_num(r->wall_s, "%.17g");
    fputs(",\"final_acc\":", stdout);
    json_num(r->final_acc, "%.17g");
    fputs(",\"samples_per_s\":", stdout);
    json_num(r->samples_per_s, "%.17g");
    fputs(",\"error\":", stdout);
    if (*r->error) sg_json_str(stdout, r->error);
    else fputs("null", stdout);
    fputs("}", stdout);
  }
  SG_TRY(sg_rdb_prepare(db, "SELECT count(*) FROM bench WHERE experiment_id = ?1", &st));
  sqlite3_bind_int64(st, 1, id);
  printf("],\"bench_rows\":%d}",
         sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0);
fail:
  sqlite3_finalize(st);
  sg_rset_destroy(&s);
  return rc;
}

int sg_cmd_list(int argc, char **argv) {
  const char *db_path, *filter;
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, n = 0, json = 0;
  int a = parse_args(argc, argv, "list", list_usage, &db_path, &filter, 2, &json);
  if (a) return a == 1 ? 0 : 2;
  sg_err_clear();
  SG_TRY(sg_rdb_open(&db, db_path));
  /* instr, not LIKE: the filter is plain text, % and _ included */
  SG_TRY(sg_rdb_prepare(db, "SELECT id FROM experiments WHERE ?1 IS NULL"
                            " OR instr(name, ?1) > 0 ORDER BY id", &st));
  if (filter) sqlite3_bind_text(st, 1, filter, -1, SQLITE_STATIC);
  if (json) putchar('[');
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!json && n) putchar('\n');
    if (json) SG_TRY(list_experiment_json(db, sqlite3_column_int64(st, 0), !n));
    else SG_TRY(list_experiment(db, sqlite3_column_int64(st, 0)));
    n++;
  }
  if (json) fputs("\n]\n", stdout);
  else if (!n && filter) printf("%s: no experiment name contains '%s'\n", db_path, filter);
  else if (!n) printf("%s: no experiments yet\n", db_path);
fail:
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rc < 0 ? fail_msg("list", rc) : 0;
}

/* ---- show -------------------------------------------------------------- */

/* Print the rows of `sql` (bound to run_id) as an aligned table with the
 * column names as header; `indent` before each line.  Empty: `none`. */
static int print_query(sqlite3 *db, const char *title, const char *sql,
                       int64_t run_id, const char *none) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, rows = 0, ncol;
  char text[512];
  SG_TRY(sg_rdb_prepare(db, sql, &st));
  sqlite3_bind_int64(st, 1, run_id);
  ncol = sqlite3_column_count(st);
  printf("\n%s:\n", title);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!rows++) {
      printf(" ");
      for (int c = 0; c < ncol; c++) printf(" %12s", sqlite3_column_name(st, c));
      putchar('\n');
    }
    printf(" ");
    for (int c = 0; c < ncol; c++) {
      switch (sqlite3_column_type(st, c)) {
      case SQLITE_NULL: printf(" %12s", "-"); break;
      case SQLITE_INTEGER:
        printf(" %12lld", (long long)sqlite3_column_int64(st, c));
        break;
      case SQLITE_FLOAT: printf(" %12.6g", sqlite3_column_double(st, c)); break;
      default: printf(" %12s", tty(text, sizeof text, sg_rdb_text(st, c))); break;
      }
    }
    putchar('\n');
  }
  if (!rows) printf("  (%s)\n", none);
fail:
  sqlite3_finalize(st);
  return rc;
}

/* Every column of the runs row, by name, so new columns show up here too
 * (options_json is shown as its own section). */
static int show_run_row(sqlite3 *db, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  char buf[64], t1[1024];
  SG_CHECK(sg_rdb_prepare(db, "SELECT * FROM runs WHERE id = ?1", &st));
  sqlite3_bind_int64(st, 1, run_id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    for (int c = 0; c < sqlite3_column_count(st); c++) {
      const char *name = sqlite3_column_name(st, c);
      if (!strcmp(name, "options_json")) continue; /* printed below */
      printf("  %-16s ", tty(t1, sizeof t1, name));
      int type = sqlite3_column_type(st, c);
      if (type == SQLITE_FLOAT) /* seconds and the like: ms are enough, not 17 digits */
        fputs(sg_rfmt(buf, sizeof buf, "%.3f", sqlite3_column_double(st, c)), stdout);
      else put_tty(type == SQLITE_NULL ? "-" : sg_rdb_text(st, c));
      putchar('\n');
    }
  }
  sqlite3_finalize(st);
  return SG_OK;
}

/* A "title:" section of key/value rows from `sql` (?1 = the run id);
 * `none` when there are none. */
static int show_pairs(sqlite3 *db, const char *title, const char *sql, int64_t run_id,
                      const char *none) {
  sqlite3_stmt *st = NULL;
  char t1[1024];
  int n = 0;
  SG_CHECK(sg_rdb_prepare(db, sql, &st));
  sqlite3_bind_int64(st, 1, run_id);
  printf("\n%s:\n", title);
  while (sqlite3_step(st) == SQLITE_ROW) {
    printf("  %-16s ", tty(t1, sizeof t1, sg_rdb_text(st, 0)));
    put_tty(sg_rdb_text(st, 1));
    putchar('\n');
    n++;
  }
  if (!n) printf("  (%s)\n", none);
  sqlite3_finalize(st);
  return SG_OK;
}

/* The run's header: experiment, variant, the runs row, the summary. */
/* Whether run_id's ranks ran on an emulated cluster (ranks.cluster_host;
 * a database older than that column has none). */
static int has_cluster_ranks(sqlite3 *db, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  int yes = 0;
  if (sqlite3_prepare_v2(db, "SELECT count(*) FROM ranks WHERE run_id = ?1 AND"
                             " cluster_host IS NOT NULL", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    yes = sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) > 0;
  }
  sqlite3_finalize(st);
  return yes;
}

/* "placement  emulated cluster NAME: h0 rank 0 server, h1 rank 1 worker, ..." */
static void show_placement(sqlite3 *db, int64_t run_id) {
  sqlite3_stmt *st = NULL;
  char t[256];
  int n = 0;
  if (!has_cluster_ranks(db, run_id) ||
      sqlite3_prepare_v2(db, "SELECT (SELECT value FROM run_info WHERE run_id = ?1 AND"
                             " key = 'cluster.name'), rank, role, cluster_host FROM ranks"
                             " WHERE run_id = ?1 ORDER BY rank", -1, &st, NULL) != SQLITE_OK) {
    sqlite3_finalize(st);
    return;
  }
  sqlite3_bind_int64(st, 1, run_id);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!n++)
      printf("  %-16s emulated cluster %s:", "placement", tty(t, sizeof t, sg_rdb_text(st, 0)));
    printf("%s %s", n > 1 ? "," : "", tty(t, sizeof t, sg_rdb_text(st, 3)));
    printf(" rank %d %s", sqlite3_column_int(st, 1), tty(t, sizeof t, sg_rdb_text(st, 2)));
  }
  if (n) putchar('\n');
  sqlite3_finalize(st);
}

static int show_run_head(sqlite3 *db, const sg_rset_t *s, const sg_rrun_t *r) {
  char buf[64], t1[1024];
  printf("run %lld of experiment %lld (%s)\n", (long long)r->id,
         (long long)r->experiment_id, tty(t1, sizeof t1, s->name));
  printf("  %-16s %s\n", "variant", tty(t1, sizeof t1, r->variant));
  SG_CHECK(show_run_row(db, r->id));
  show_placement(db, r->id);
  printf("  %-16s %s\n", "final_acc", sg_rfmt(buf, sizeof buf, "%.4f", r->final_acc));
  printf("  %-16s %s\n", "samples_per_s",
         sg_rfmt(buf, sizeof buf, "%.1f", r->samples_per_s));
  printf("  %-16s %s\n", "bytes_per_step",
         sg_rfmt_bytes(buf, sizeof buf, r->bytes_per_step));
  if (!strcmp(r->status, "failed"))
    printf("  FAILED: %s\n", *r->error ? tty(t1, sizeof t1, r->error) : "(no error recorded)");
  return SG_OK;
}

static int show_run(sqlite3 *db, int64_t run_id) {
  sg_rset_t *s = NULL;
  const sg_rrun_t *r = NULL;
  int rc = SG_OK;
  SG_TRY(sg_rset_load_run(db, run_id, &s, &r));
  SG_TRY(show_run_head(db, s, r));
  SG_TRY(show_pairs(db, "options",
                    "SELECT j.key, CASE j.type WHEN 'true' THEN 'true'"
                    " WHEN 'false' THEN 'false' ELSE j.value END"
                    " FROM runs r, json_each(r.options_json) j"
                    " WHERE r.id = ?1 AND json_valid(r.options_json)",
                    run_id, "none recorded"));
  /* a cluster run's ranks: the emulated host and address each ran on
   * (every rank's `host` is this machine's name there) */
  SG_TRY(print_query(db, "ranks",
                     has_cluster_ranks(db, run_id)
                         ? "SELECT rank, role, cluster_host AS host, address, pid FROM ranks"
                           " WHERE run_id = ?1 ORDER BY rank"
                         : "SELECT rank, role, host, pid FROM ranks WHERE run_id = ?1"
                           " ORDER BY rank",
                     run_id, "no ranks recorded"));
  SG_TRY(show_pairs(db, "info", "SELECT key, value FROM run_info WHERE run_id = ?1 ORDER BY key",
                    run_id, "no run info recorded"));
  SG_TRY(print_query(db, "evals",
                     "SELECT step, epoch, wall_s, samples, train_loss, test_loss,"
                     " test_acc FROM evals WHERE run_id = ?1 ORDER BY step",
                     run_id, "no evaluations recorded"));
  SG_TRY(print_query(
      db, "steps per rank (means per step)",
      "SELECT rank, role, count(*) AS steps, avg(compute_s) AS compute_s,"
      " avg(comm_s) AS comm_s, avg(wait_s) AS wait_s,"
      " avg(bytes_sent) AS bytes_sent, avg(bytes_recv) AS bytes_recv,"
      " avg(loss) AS loss, max(staleness) AS max_stale"
      " FROM steps WHERE run_id = ?1 GROUP BY rank, role ORDER BY rank",
      run_id, "no steps recorded"));
fail:
  sg_rset_destroy(&s);
  return rc;
}

int sg_cmd_show(int argc, char **argv) {
  const char *db_path, *pos;
  sqlite3 *db = NULL;
  int rc = SG_OK;
  char *end;
  long long id;
  int a = parse_args(argc, argv, "show", show_usage, &db_path, &pos, 1, NULL);
  if (a) return a == 1 ? 0 : 2;
  id = strtoll(pos, &end, 10);
  if (end == pos || *end || id < 0) {
    fprintf(stderr, "sgdlab show: '%s' is not a run id (see `sgdlab list`)\n", pos);
    return 2;
  }
  sg_err_clear();
  SG_TRY(sg_rdb_open(&db, db_path));
  SG_TRY(show_run(db, id));
fail:
  sqlite3_close(db);
  return rc < 0 ? fail_msg("show", rc) : 0;
}
