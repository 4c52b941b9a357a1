/* report_summary.c - summary.md: one Markdown table per experiment.
 *
 * Rows group runs by (variant, workers); numbers are medians over the
 * repeats that finished ok.  Definitions are written into the file itself
 * (and in report.h) so a reader of the table needs nothing else.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost_model.h"
#include "err.h"
#include "outfile.h"
#include "report.h"

/* Text from the database in Markdown, a table cell or prose: what
 * Markdown reads as syntax is backslash-escaped (| ends a cell, ` opens
 * code, < > raw HTML, [ ] links and images, * _ emphasis, & entities, \
 * itself) and newlines and other control characters become spaces, so a
 * row stays one line. */
static void md_text(FILE *f, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f) {
      fputc(' ', f);
      continue;
    }
    if (strchr("\\`|<>[]*_&", c)) fputc('\\', f);
    fputc(c, f);
  }
}

static int is_ok(const sg_rrun_t *r) { return !strcmp(r->status, "ok"); }

static int same_group(const sg_rset_t *s, size_t a, size_t b) {
  return !strcmp(s->runs[a].variant, s->runs[b].variant) &&
         s->runs[a].workers == s->runs[b].workers;
}

/* Median of `field` over the ok runs of group `g` (v: scratch of s->n). */
static double group_median(const sg_rset_t *s, size_t g, size_t off, double *v,
                           size_t *k) {
  *k = 0;
  for (size_t j = g; j < s->n; j++) {
    const sg_rrun_t *r = &s->runs[j];
    double x = *(const double *)((const char *)r + off);
    if (same_group(s, g, j) && is_ok(r) && !isnan(x)) v[(*k)++] = x;
  }
  return sg_rmedian(v, *k);
}

int sg_rrows(const sg_rset_t *s, sg_rrow_t **rows, size_t *n) {
  double *v = calloc(s->n ? s->n : 1, sizeof *v);
  sg_rrow_t *out = calloc(s->n ? s->n : 1, sizeof *out);
  size_t k;
  *rows = NULL;
  *n = 0;
  if (!v || !out) {
    free(v);
    free(out);
    return sg_err_set(SG_ENOMEM, "report: out of memory");
  }
  for (size_t i = 0; i < s->n; i++) {
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = same_group(s, i, j);
    if (seen) continue;
    sg_rrow_t *w = &out[(*n)++];
    w->first = i;
    for (size_t j = i; j < s->n; j++) {
      if (!same_group(s, i, j)) continue;
      w->runs++;
      if (is_ok(&s->runs[j])) w->ok++;
      else if (!strcmp(s->runs[j].status, "failed")) w->failed++;
      else w->other++;
    }
    /* time to target: median over the ok repeats that reached it */
    w->t_target = group_median(s, i, offsetof(sg_rrun_t, t_target), v, &k);
    w->reached = (int)k;
    w->final_acc = group_median(s, i, offsetof(sg_rrun_t, final_acc), v, &k);
    w->samples_per_s = group_median(s, i, offsetof(sg_rrun_t, samples_per_s), v, &k);
    w->bytes_per_step = group_median(s, i, offsetof(sg_rrun_t, bytes_per_step), v, &k);
  }
  free(v);
  *rows = out;
  return SG_OK;
}

/* The run table: one row per (variant, workers). */
static int run_table(FILE *f, const sg_rset_t *s) {
  sg_rrow_t *rows = NULL;
  size_t nrows = 0;
  char buf[64];
  SG_CHECK(sg_rrows(s, &rows, &nrows));
  fprintf(f,
          "| key | variant | workers | runs | status | time to %.3g acc (s) |"
          " final accuracy | samples/s | bytes/step, busiest rank |\n"
          "|---|---|---:|---:|---|---:|---:|---:|---:|\n",
          s->target);
  for (size_t g = 0; g < nrows; g++) {
    const sg_rrow_t *w = &rows[g];
    const sg_rrun_t *ri = &s->runs[w->first];
    fprintf(f, "| %s | ", sg_rkey_text(ri->key, buf, sizeof buf));
    md_text(f, ri->variant);
    fprintf(f, " | %d | %d | ", ri->workers, w->runs);
    if (w->ok == w->runs) fputs("ok", f);
    else if (w->failed == w->runs) fputs("failed", f);
    else {
      const char *sep = "";
      if (w->ok) { fprintf(f, "%d ok", w->ok); sep = ", "; }
      if (w->failed) { fprintf(f, "%s%d failed", sep, w->failed); sep = ", "; }
      if (w->other) {
        fprintf(f, "%s%d ", sep, w->other);
        md_text(f, w->other == w->runs ? ri->status : "other");
      }
    }
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.2f", w->t_target));
    if (w->reached && w->reached < w->ok) fprintf(f, " (%d/%d reached)", w->reached, w->ok);
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.4f", w->final_acc));
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.0f", w->samples_per_s));
    if (ri->bytes_in_mpi) fputs(" | n/a (inside MPI) |\n", f); /* never a fake 0 B */
    else fprintf(f, " | %s |\n", sg_rfmt_bytes(buf, sizeof buf, w->bytes_per_step));
  }
  free(rows);
  return SG_OK;
}

static void failed_runs(FILE *f, const sg_rset_t *s) {
  int any = 0;
  for (size_t i = 0; i < s->n; i++) {
    const sg_rrun_t *r = &s->runs[i];
    if (is_ok(r)) continue;
    if (!any) {
      fprintf(f, "\n## Runs that did not finish\n\n"
                 "| run | variant | workers | repeat | status | error |\n"
                 "|---:|---|---:|---:|---|---|\n");
      any = 1;
    }
    fprintf(f, "| %lld | ", (long long)r->id);
    md_text(f, r->variant);
    fprintf(f, " | %d | %d | ", r->workers, r->repeat);
    md_text(f, r->status);
    fputs(" | ", f);
    md_text(f, *r->error ? r->error : "(no error recorded)");
    fputs(" |\n", f);
  }
}

static int bench_table(FILE *f, sqlite3 *db, const sg_rset_t *s) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  char buf[64], ids[SG_RSET_MAX_EXP * 24];
  SG_TRY(sg_rdb_prepare(db,
                        "SELECT collective, impl, transport, np, bytes, iters,"
                        " t_median, t_min, t_max, algbw, busbw, wrong FROM bench"
                        " WHERE experiment_id IN (SELECT value FROM json_each(?1))"
                        " ORDER BY collective, bytes, impl, transport, np",
                        &st));
  sqlite3_bind_text(st, 1, sg_rset_ids_json(s, ids, sizeof ids), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!any) {
      fprintf(f, "\n## Collective benchmark\n\n"
                 "Median time over the timed iterations (after untimed warm-up;"
                 " per iteration the slowest rank), algbw = bytes / time,"
                 " busbw = algbw * 2(N-1)/N; `wrong` counts elements that"
                 " differed from the exact sum.\n\n"
                 "| collective | size | impl | transport | np | iters |"
                 " median time (us) | min..max (us) | algbw (GB/s) |"
                 " busbw (GB/s) | wrong |\n"
                 "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
      any = 1;
    }
    fputs("| ", f);
    md_text(f, sg_rdb_text(st, 0));
    fprintf(f, " | %s | ", sg_rfmt_bytes(buf, sizeof buf, sg_rdb_double(st, 4)));
    md_text(f, sg_rdb_text(st, 1));
    fputs(" | ", f);
    md_text(f, sg_rdb_text(st, 2));
    fprintf(f, " | %d | %d", sqlite3_column_int(st, 3), sqlite3_column_int(st, 5));
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.1f", sg_rdb_double(st, 6) * 1e6));
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.1f", sg_rdb_double(st, 7) * 1e6));
    fprintf(f, "..%s", sg_rfmt(buf, sizeof buf, "%.1f", sg_rdb_double(st, 8) * 1e6));
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.3f", sg_rdb_double(st, 9)));
    fprintf(f, " | %s", sg_rfmt(buf, sizeof buf, "%.3f", sg_rdb_double(st, 10)));
    fprintf(f, " | %lld |\n", (long long)sqlite3_column_int64(st, 11));
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

int sg_report_loaded_runs(sqlite3 *db, const sg_rset_t *s, int single_run, char *out,
                          size_t cap) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, n = 0;
  char ids[SG_RSET_MAX_EXP * 24];
  size_t len = 0;
  out[0] = '\0';
  SG_TRY(sg_rdb_prepare(
      db,
      "SELECT r.id FROM runs r JOIN run_info c ON c.run_id = r.id AND c.key = 'cores'"
      " WHERE ((?1 >= 0 AND r.id = ?1) OR (?1 < 0 AND r.experiment_id IN"
      "   (SELECT value FROM json_each(?2))))"
      " AND EXISTS (SELECT 1 FROM run_info l WHERE l.run_id = r.id"
      "   AND l.key IN ('load.before', 'load.after')"
      "   AND CAST(l.value AS REAL) > max(CAST(c.value AS REAL), r.processes))"
      " ORDER BY r.id",
      &st));
  sqlite3_bind_int64(st, 1, single_run && s->n ? s->runs[0].id : -1);
  sqlite3_bind_text(st, 2, sg_rset_ids_json(s, ids, sizeof ids), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len + 32 < cap)
      len += (size_t)snprintf(out + len, cap - len, "%s%lld", n ? ", " : "",
                              (long long)sqlite3_column_int64(st, 0));
    else if (len + 4 < cap && !strstr(out, "..."))
      len += (size_t)snprintf(out + len, cap - len, "...");
    n++;
  }
  rc = n;
fail:
  sqlite3_finalize(st);
  return rc;
}

void sg_report_loaded_text(char *buf, size_t cap, int n, const char *ids) {
  snprintf(buf, cap, "%d run%s (%s) started or ended with a 1-minute load average above both"
           " the host's cores and the run's own process count: other work competed for the"
           " CPUs, so their times are suspect (run_info load.before, load.after, cores;"
           " runs.processes).", n, n == 1 ? "" : "s", ids);
}

/* A warning line when some runs ran on a host busier than they make it. */
static int loaded_warning(FILE *f, sqlite3 *db, const sg_rset_t *s, int single_run) {
  char ids[512], text[1024];
  int n = sg_report_loaded_runs(db, s, single_run, ids, sizeof ids);
  if (n <= 0) return n;
  sg_report_loaded_text(text, sizeof text, n, ids);
  fputs("\n**Warning: loaded host.** ", f);
  md_text(f, text);
  fputc('\n', f);
  return SG_OK;
}

/* run_info of the report's runs: each distinct key=value once, with how
 * many runs reported it (the BLAS build, the workload's sizes, ...). */
static int info_table(FILE *f, sqlite3 *db, const sg_rset_t *s, int single_run) {
  sqlite3_stmt *st = NULL;
  int rc = SG_OK, any = 0;
  char ids[SG_RSET_MAX_EXP * 24];
  SG_TRY(sg_rdb_prepare(
      db,
      "SELECT i.key, i.value, count(DISTINCT i.run_id) FROM run_info i"
      " JOIN runs r ON r.id = i.run_id"
      " WHERE (?1 >= 0 AND r.id = ?1) OR (?1 < 0 AND r.experiment_id IN"
      "   (SELECT value FROM json_each(?2)))"
      " AND i.key NOT LIKE 'time.%' AND i.key NOT LIKE 'load.%'" /* per run: sgdlab show */
      " AND i.key != 'label'" /* the variant column says it */
      " GROUP BY i.key, i.value ORDER BY i.key, i.value LIMIT 200",
      &st));
  sqlite3_bind_int64(st, 1, single_run && s->n ? s->runs[0].id : -1);
  sqlite3_bind_text(st, 2, sg_rset_ids_json(s, ids, sizeof ids), -1, SQLITE_TRANSIENT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!any) {
      fprintf(f, "\n## Environment (run_info)\n\n| key | value | runs |\n"
                 "|---|---|---:|\n");
      any = 1;
    }
    fputs("| ", f);
    md_text(f, sg_rdb_text(st, 0));
    fputs(" | ", f);
    md_text(f, sg_rdb_text(st, 1));
    fprintf(f, " | %d |\n", sqlite3_column_int(st, 2));
  }
fail:
  sqlite3_finalize(st);
  return rc;
}

int sg_report_summary(sqlite3 *db, const char *db_path, const sg_rset_t *s,
                      int single_run, const char *dir, const sg_rfig_t *figs,
                      size_t nfigs) {
  FILE *f;
  int rc = SG_OK;
  SG_CHECK(sg_out_fopen(&f, dir, "summary.md"));
  if (single_run && s->n)
    fprintf(f, "# Run %lld of experiment ", (long long)s->runs[0].id);
  else
    fputs(s->nexp > 1 ? "# Experiments " : "# Experiment ", f);
  md_text(f, s->name);
  if (s->nexp > 1) {
    fputs(" (ids", f);
    for (size_t i = 0; i < s->nexp; i++)
      fprintf(f, "%s %lld", i ? "," : "", (long long)s->exp_ids[i]);
    fputs(")\n\nThe first started ", f);
  } else {
    fprintf(f, " (id %lld)\n\nStarted ", (long long)s->experiment_id);
  }
  md_text(f, *s->started_at ? s->started_at : "(unknown)");
  fputs(" on ", f);
  md_text(f, *s->host ? s->host : "(unknown host)");
  fputs(". Database: ", f);
  md_text(f, db_path);
  fputs(". Drawn by `sgdlab report` from the database alone.\n", f);
  if (s->n) SG_TRY(loaded_warning(f, db, s, single_run));

  if (s->n) {
    fprintf(f, "\n## Runs\n\n");
    SG_TRY(run_table(f, s));
    fprintf(f,
            "\nOne row per variant and worker count; numbers are medians over"
            " the repeats that finished ok.\n\n"
            "- **time to %.3g acc**: training wall time (evaluation excluded)"
            " at the first evaluation with test accuracy >= %.3g; \"—\" when"
            " never reached, \"(k/R reached)\" when only some repeats did.\n"
            "- **final accuracy**: test accuracy at the last evaluation.\n"
            "- **samples/s**: samples processed by all worker ranks (ranks that"
            " compute gradients; each step row is one per-worker batch,"
            " `local`'s is workers*batch) from the first evaluation period on"
            " (warm-up excluded), divided by the wall-clock span of those"
            " steps over all workers (earliest start to latest end)."
            " Evaluation pauses inside the span are included, for every"
            " engine alike; in ps ssp/async the other workers keep training"
            " while worker 0 evaluates, and their steps count too.\n"
            "- **bytes/step, busiest rank**: for each rank the mean of"
            " bytes_sent + bytes_recv over its steps; the maximum over"
            " ranks; n/a for allreduce native, whose bytes move inside"
            " MPI_Allreduce where the transport counters cannot see them.\n",
            s->target, s->target);
    failed_runs(f, s);
  } else {
    fprintf(f, "\nNo training runs in this experiment.\n");
  }
  if (!single_run) SG_TRY(bench_table(f, db, s));
  if (!single_run) SG_TRY(sg_cost_summary_md(f, db, s->exp_ids, s->nexp));

  if (nfigs) {
    fprintf(f, "\n## Figures\n\nEach figure has an SVG twin, its gnuplot"
               " script (.gp) and data (.tsv) next to it: edit and redraw with"
               " `gnuplot NAME.gp` in this directory.\n");
    for (size_t i = 0; i < nfigs; i++)
      fprintf(f, "\n### %s\n\n![%s](%s.png)\n\n%s ([SVG](%s.svg))\n",
              figs[i].name, figs[i].name, figs[i].name, figs[i].caption,
              figs[i].name);
  }
  SG_TRY(info_table(f, db, s, single_run));
fail:
  if (rc < 0) sg_out_discard(f);
  else rc = sg_out_fclose(f);
  return rc;
}
