/* checks_eval.c - evaluating a check over a results database (checks.h). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "err.h"

/* ---- expressions: + - * / ( ) numbers K P N S --------------------------- */

typedef struct ex {
  const char *s;
  double K, N, S;
  int bad;
} ex_t;

static double ex_sum(ex_t *x);

static void ex_ws(ex_t *x) {
  while (isspace((unsigned char)*x->s)) x->s++;
}

static double ex_atom(ex_t *x) {
  ex_ws(x);
  char c = *x->s;
  if (c == '(') {
    x->s++;
    double v = ex_sum(x);
    ex_ws(x);
    if (*x->s != ')') x->bad = 1;
    else x->s++;
    return v;
  }
  if (c == '-') return x->s++, -ex_atom(x);
  if (c == 'K' || c == 'P' || c == 'N' || c == 'S') {
    x->s++;
    return c == 'K' ? x->K : c == 'P' ? x->K / 4 : c == 'N' ? x->N : x->S;
  }
  char *end = NULL;
  double v = strtod(x->s, &end);
  if (end == x->s) x->bad = 1;
  else x->s = end;
  return v;
}

static double ex_prod(ex_t *x) {
  double v = ex_atom(x);
  for (;;) {
    ex_ws(x);
    if (*x->s == '*') x->s++, v *= ex_atom(x);
    else if (*x->s == '/') x->s++, v /= ex_atom(x);
    else return v;
  }
}

static double ex_sum(ex_t *x) {
  double v = ex_prod(x);
  for (;;) {
    ex_ws(x);
    if (*x->s == '+') x->s++, v += ex_prod(x);
    else if (*x->s == '-') x->s++, v -= ex_prod(x);
    else return v;
  }
}

int ck_expr(const char *e, double K, double N, double S, double *out) {
  ex_t x = {.s = e, .K = K, .N = N, .S = S};
  *out = ex_sum(&x);
  ex_ws(&x);
  if (x.bad || *x.s)
    return sg_err_set(SG_EINVAL, "'%s': an expression of numbers, K, P, N, S, + - * / ( )"
                                 " (stopped at '%s')", e, x.s);
  return SG_OK;
}

/* ---- selecting rows ------------------------------------------------------ */

static const char *run_metric(const char *m) {
  static const struct { const char *name, *sql; } M[] = {
      {"bytes", "rs.bytes_per_step"},
      {"worker_bytes", "(SELECT max(b) FROM (SELECT avg(s.bytes_sent + s.bytes_recv) AS b"
                       " FROM steps s WHERE s.run_id = rs.run_id AND coalesce(s.role, '')"
                       " NOT IN ('server', 'driver') GROUP BY s.rank))"},
      {"step_ms", "1000.0 * (rs.compute_s + rs.comm_s + rs.wait_s)"},
      {"comm_ms", "1000.0 * rs.comm_s"},
      {"wait_ms", "1000.0 * rs.wait_s"},
      {"comm_share", "rs.comm_s / (rs.compute_s + rs.comm_s + rs.wait_s)"},
      {"samples_per_s", "rs.samples_per_s"},
      {"final_acc", "rs.final_acc"},
      {"max_staleness", "(SELECT max(s.staleness) FROM steps s WHERE s.run_id = rs.run_id)"},
      {"params", "NULL"}, /* from run_info workload, below */
      {"wall_s", "rs.wall_s"},
      {"steps", "(SELECT count(*) FROM steps s WHERE s.run_id = rs.run_id)"},
      /* blame.rank_number, the rank as data; a database older than it has
       * only blame.rank, "rank 2 (worker, host, pid 7)", read as text */
      {"blame_rank", "coalesce((SELECT CAST(i.value AS INTEGER) FROM run_info i WHERE"
                     " i.run_id = rs.run_id AND i.key = 'blame.rank_number' AND"
                     " i.value GLOB '[0-9]*' AND NOT i.value GLOB '*[^0-9]*'),"
                     " (SELECT CAST(substr(i.value, 6) AS INTEGER) FROM run_info i WHERE"
                     " i.run_id = rs.run_id AND i.key = 'blame.rank' AND i.value GLOB 'rank [0-9]*'"
                     " AND NOT EXISTS (SELECT 1 FROM run_info j WHERE j.run_id = rs.run_id AND"
                     " j.key = 'blame.rank_number')))"},
  };
  for (size_t i = 0; i < sizeof M / sizeof M[0]; i++)
    if (!strcmp(M[i].name, m)) return M[i].sql;
  return NULL;
}

static int is_bench(const char *m) { return !strcmp(m, "bench_us") || !strcmp(m, "wrong"); }

/* WHERE terms for w, appended to sql; values bound from ?2 on. */
static void where_sql(char *sql, size_t cap, const ck_where_t *w, int bench) {
  static const char *const RUNCOL[] = {"engine", "workers", "servers", "repeat", "transport",
                                       "variant", "status", NULL};
  static const char *const BENCHCOL[] = {"impl", "np", "bytes", "transport", "collective", NULL};
  for (int i = 0; i < w->n; i++) {
    size_t len = strlen(sql);
    const char *k = w->kv[i].key, *col = NULL;
    for (const char *const *c = bench ? BENCHCOL : RUNCOL; *c; c++)
      if (!strcmp(*c, k)) col = *c;
    if (bench && !strcmp(k, "min_bytes")) snprintf(sql + len, cap - len, " AND bytes >= ?%d", i + 2);
    else if (bench && !strcmp(k, "max_bytes")) snprintf(sql + len, cap - len, " AND bytes <= ?%d", i + 2);
    else if (col) snprintf(sql + len, cap - len, " AND %s%s = ?%d", bench ? "" : "rs.", col, i + 2);
    else if (bench) snprintf(sql + len, cap - len, " AND 0"); /* no such column */
    else if (!strncmp(k, "info.", 5)) /* a run_info value, as text (keys: checks_file.c) */
      snprintf(sql + len, cap - len,
               " AND (SELECT i.value FROM run_info i WHERE i.run_id = rs.run_id AND"
               " i.key = '%s') = ?%d", k + 5, i + 2);
    else
      snprintf(sql + len, cap - len,
               " AND json_extract(rs.options_json, '$.\"' || '%s' || '\"') = ?%d", k, i + 2);
  }
}

/* The runs a selection looks at: the ok ones, unless it names a status
 * (status: failed selects the failed runs, with their blame). */
static const char *status_sql(const ck_where_t *w) {
  for (int i = 0; i < w->n; i++)
    if (!strcmp(w->kv[i].key, "status")) return "1";
  return "rs.status = 'ok'";
}

/* A value as the database holds it: a number when it reads as one. */
static void bind_value(sqlite3_stmt *st, int i, const ck_kv_t *kv) {
  const char *v = kv->val;
  char *end = NULL;
  if (!strncmp(kv->key, "info.", 5)) { /* run_info holds text */
    sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    return;
  }
  double d = strtod(v, &end);
  if (*v && end && !*end) sqlite3_bind_double(st, i, d);
  else sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}

/* The experiments a check looks at: one, or a claim's rounds. */
typedef struct exps {
  const int64_t *id;
  int n;
} exps_t;

/* "experiment_id IN (3, 4, 5)" (integers, formatted: no text of the
 * database's reaches the SQL). */
static void exps_sql(char *sql, size_t cap, const char *col, exps_t e) {
  size_t len = strlen(sql);
  len += (size_t)snprintf(sql + len, cap - len, "%s IN (", col);
  for (int i = 0; i < e.n && len < cap; i++)
    len += (size_t)snprintf(sql + len, cap - len, "%s%lld", i ? ", " : "", (long long)e.id[i]);
  if (len < cap) snprintf(sql + len, cap - len, ")");
}

/* Rows of measure m over the ok runs (or bench rows) matching w: per row
 * the value and the run's K, N, S.  *n rows (up to cap). */
typedef struct row {
  double v, K, N, S;
  char var[96];
} row_t;

static int select_rows(sqlite3 *db, exps_t exp, const char *m, const ck_where_t *w, row_t *out,
                       int cap, int *n) {
  char sql[4096];
  sqlite3_stmt *st = NULL;
  int bench = is_bench(m);
  if (bench)
    snprintf(sql, sizeof sql, "SELECT %s, bytes, np, 0, impl || ' ' || bytes || ' B' FROM bench"
             " WHERE ", !strcmp(m, "wrong") ? "wrong" : "1e6 * t_median");
  else
    snprintf(sql, sizeof sql,
             "SELECT %s, (SELECT i.value FROM run_info i WHERE i.run_id = rs.run_id AND"
             " i.key = 'workload'), rs.workers, rs.servers, rs.variant || ' N=' || rs.workers"
             " FROM run_summary rs WHERE %s AND ",
             run_metric(m), status_sql(w));
  exps_sql(sql, sizeof sql, bench ? "experiment_id" : "rs.experiment_id", exp);
  where_sql(sql, sizeof sql, w, bench);
  strncat(sql, bench ? " ORDER BY impl, bytes" : " ORDER BY rs.workers, rs.run_id",
          sizeof sql - strlen(sql) - 1);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "checks: %s", sqlite3_errmsg(db));
  for (int i = 0; i < w->n; i++) bind_value(st, i + 2, &w->kv[i]);
  *n = 0;
  while (sqlite3_step(st) == SQLITE_ROW && *n < cap) {
    row_t *r = &out[*n];
    const char *wl = (const char *)sqlite3_column_text(st, 1), *p = wl ? strchr(wl, '(') : NULL;
    double params = p ? strtod(p + 1, NULL) : NAN;
    r->K = bench ? sqlite3_column_double(st, 1) : 4 * params;
    r->N = sqlite3_column_double(st, 2);
    r->S = sqlite3_column_double(st, 3);
    r->v = !strcmp(m, "params") ? params
           : sqlite3_column_type(st, 0) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 0);
    snprintf(r->var, sizeof r->var, "%s", (const char *)sqlite3_column_text(st, 4));
    (*n)++;
  }
  sqlite3_finalize(st);
  return SG_OK;
}

static int dbl_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { ROWS = 256 };

/* The median of the rows' values that are numbers (n <= ROWS). */
static double median(row_t *r, int n) {
  double v[ROWS];
  int k = 0;
  for (int i = 0; i < n && k < ROWS; i++)
    if (!isnan(r[i].v)) v[k++] = r[i].v;
  if (!k) return NAN;
  qsort(v, (size_t)k, sizeof v[0], dbl_cmp);
  return k % 2 ? v[k / 2] : (v[k / 2 - 1] + v[k / 2]) / 2;
}

static void where_text(const ck_where_t *w, char *buf, size_t cap) {
  buf[0] = 0;
  for (int i = 0; i < w->n; i++) {
    size_t len = strlen(buf);
    snprintf(buf + len, cap - len, "%s%s=%s", i ? " " : "", w->kv[i].key, w->kv[i].val);
  }
  if (!w->n) snprintf(buf, cap, "all");
}

/* "109904" for exact integers, else 4 significant digits. */
static void num(char *buf, size_t cap, double v) {
  if (fabs(v) < 1e15 && v == floor(v)) snprintf(buf, cap, "%.0f", v);
  else snprintf(buf, cap, "%.4g", v);
}

/* ---- the kinds of check ------------------------------------------------- */

static int eval_expect(sqlite3 *db, exps_t exp, const ck_check_t *c, int *pass, char *got,
                       size_t gl, char *want, size_t wl) {
  row_t *r = calloc(ROWS, sizeof *r);
  int n = 0, rc = SG_OK, bad = 0;
  if (!r) return sg_err_set(SG_ENOMEM, "out of memory");
  SG_TRY(select_rows(db, exp, c->measure, &c->where, r, ROWS, &n));
  *pass = n > 0;
  got[0] = 0;
  for (int i = 0; i < n; i++) {
    double e = NAN;
    char a[32], b[32];
    SG_TRY(ck_expr(c->expr, r[i].K, r[i].N, r[i].S, &e));
    /* an infinite expectation (a workload of "inf" parameters in the
     * file) would admit any value: neither side may be other than finite */
    int ok = isfinite(r[i].v) && isfinite(e) &&
             (c->upper ? r[i].v <= e * (1 + c->tol) : fabs(r[i].v - e) <= c->tol * fabs(e));
    *pass &= ok;
    bad += !ok;
    if (ok && i >= 4) continue; /* the first rows and every wrong one */
    num(a, sizeof a, r[i].v);
    num(b, sizeof b, e);
    size_t len = strlen(got);
    snprintf(got + len, gl - len, "%s%s %s%s%s", len ? ", " : "", r[i].var, a, ok ? "" : " != ",
             ok ? "" : b);
  }
  if (n > 4) snprintf(got + strlen(got), gl - strlen(got), " (%d rows, %d wrong)", n, bad);
  if (!n) snprintf(got, gl, "no ok run matches");
  if (c->upper) snprintf(want, wl, "%s <= %s", c->measure, c->expr);
  else snprintf(want, wl, "%s = %s %s", c->measure, c->expr, c->tol == 0 ? "exactly" : "");
  if (c->tol > 0)
    snprintf(want + strlen(want), wl - strlen(want), "%s%g %%", c->upper ? " + " : "within ",
             100 * c->tol);
fail:
  free(r);
  return rc;
}

/* One round's ratio: the medians of A's and B's rows in experiment e. */
static int round_ratio(sqlite3 *db, exps_t e, const ck_check_t *c, row_t *r, double *a,
                       double *b, int *na, int *nb) {
  SG_CHECK(select_rows(db, e, c->measure, &c->where, r, ROWS, na));
  *a = median(r, *na);
  SG_CHECK(select_rows(db, e, c->measure, &c->other, r, ROWS, nb));
  *b = median(r, *nb);
  return SG_OK;
}

static int eval_ratio(sqlite3 *db, exps_t exp, const ck_check_t *c, int *pass, char *got,
                      size_t gl, char *want, size_t wl) {
  row_t *r = calloc(ROWS, sizeof *r), qs[CK_MAX_ROUNDS];
  int na = 0, nb = 0, rc = SG_OK, nq = 0;
  double a = NAN, b = NAN, q = NAN;
  char wa[256], wb[256], list[160] = "";
  if (!r) return sg_err_set(SG_ENOMEM, "out of memory");
  if (exp.n <= 1) {
    SG_TRY(round_ratio(db, exp, c, r, &a, &b, &na, &nb));
    q = a / b;
  } else { /* the median of the rounds' ratios */
    for (int k = 0; k < exp.n && k < CK_MAX_ROUNDS; k++) {
      int ka = 0, kb = 0;
      double x = NAN, y = NAN;
      SG_TRY(round_ratio(db, (exps_t){&exp.id[k], 1}, c, r, &x, &y, &ka, &kb));
      qs[nq++].v = x / y;
      na += ka, nb += kb;
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.3g", k ? ", " : "", x / y);
    }
    q = median(qs, nq);
  }
  *pass = na && nb && isfinite(q) && q >= c->lo && q <= c->hi;
  where_text(&c->where, wa, sizeof wa);
  where_text(&c->other, wb, sizeof wb);
  if (exp.n <= 1)
    snprintf(got, gl, "%s [%s] %.4g / [%s] %.4g = %.3g (medians of %d and %d)", c->measure, wa,
             a, wb, b, q, na, nb);
  else
    snprintf(got, gl, "%s [%s] / [%s] = %.3g (median of %d rounds: %s; %d and %d rows)",
             c->measure, wa, wb, q, nq, list, na, nb);
  snprintf(want, wl, "ratio in [%g, %g]", c->lo, c->hi);
fail:
  free(r);
  return rc;
}

static int eval_predicted(sqlite3 *db, exps_t exp, const ck_check_t *c, const ck_preds_t *p,
                          int *pass, char *got, size_t gl, char *want, size_t wl) {
  row_t *r = calloc(ROWS, sizeof *r);
  int n = 0, rc = SG_OK, k = -1;
  if (!r) return sg_err_set(SG_ENOMEM, "out of memory");
  for (int i = 0; p && i < p->n; i++)
    if (!strcmp(p->name[i], c->key)) k = i;
  double m = NAN;
  if (c->expr[0]) { /* a number the lab fixes */
    SG_TRY(ck_expr(c->expr, 0, 0, 0, &m));
    n = 1;
    snprintf(want, wl, "prediction %s within %g %% of %s", c->key, 100 * c->tol, c->expr);
  } else {
    SG_TRY(select_rows(db, exp, c->measure, &c->where, r, ROWS, &n));
    m = median(r, n);
    snprintf(want, wl, "prediction %s within %g %% of the measured %s", c->key, 100 * c->tol,
             c->measure);
  }
  *pass = 0;
  if (k < 0) snprintf(got, gl, "no prediction '%s' handed in", c->key);
  else if (!n || !isfinite(m)) snprintf(got, gl, "no ok run to compare with%s",
                                       n && !isnan(m) ? " (its value is infinite)" : "");
  else {
    *pass = fabs(p->val[k] - m) <= c->tol * fabs(m);
    snprintf(got, gl, "predicted %.6g, %s %.6g (off by %.1f %%)", p->val[k],
             c->expr[0] ? "answer" : "measured", m,
             m ? 100 * fabs(p->val[k] - m) / fabs(m) : 0.0);
  }
fail:
  free(r);
  return rc;
}

static int eval_count(sqlite3 *db, exps_t exp, const ck_check_t *c, int *pass, char *got,
                      size_t gl, char *want, size_t wl) {
  row_t *r = calloc(ROWS, sizeof *r);
  int n = 0, rc = SG_OK;
  char w[256];
  if (!r) return sg_err_set(SG_ENOMEM, "out of memory");
  SG_TRY(select_rows(db, exp, c->measure[0] ? c->measure : "bytes", &c->where, r, ROWS, &n));
  *pass = n >= c->min;
  where_text(&c->where, w, sizeof w);
  snprintf(got, gl, "%d %s%s%s with %s", n, strcmp(status_sql(&c->where), "1") ? "ok " : "",
           is_bench(c->measure) ? "row" : "run", n == 1 ? "" : "s", w);
  snprintf(want, wl, "at least %d", c->min);
fail:
  free(r);
  return rc;
}

static int eval_same(sqlite3 *db, exps_t exp, const ck_check_t *c, int *pass, char *got,
                     size_t gl, char *want, size_t wl) {
  char sql[2048];
  sqlite3_stmt *st = NULL;
  snprintf(sql, sizeof sql,
           "SELECT count(DISTINCT coalesce(json_extract(rs.options_json, '$.\"%s\"'), '-')),"
           " group_concat(DISTINCT coalesce(json_extract(rs.options_json, '$.\"%s\"'), '-')),"
           " count(*) FROM run_summary rs WHERE %s AND ",
           c->key, c->key, status_sql(&c->where));
  exps_sql(sql, sizeof sql, "rs.experiment_id", exp);
  where_sql(sql, sizeof sql, &c->where, 0);
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "checks: %s", sqlite3_errmsg(db));
  for (int i = 0; i < c->where.n; i++) bind_value(st, i + 2, &c->where.kv[i]);
  int d = 0, n = 0;
  const char *vals = "";
  if (sqlite3_step(st) == SQLITE_ROW) {
    d = sqlite3_column_int(st, 0);
    vals = sqlite3_column_text(st, 1) ? (const char *)sqlite3_column_text(st, 1) : "";
    n = sqlite3_column_int(st, 2);
  }
  *pass = n > 0 && d == 1;
  snprintf(got, gl, "%s over %d run%s: %s", c->key, n, n == 1 ? "" : "s", n ? vals : "none");
  snprintf(want, wl, "one value of %s", c->key);
  sqlite3_finalize(st);
  return SG_OK;
}

/* The measured text holds the database's strings (run names, option
 * values: a student's database is anyone's text), printed on a terminal
 * and stored: every byte outside printable ASCII becomes '?', so no
 * escape sequence gets through. */
static void printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) *s = '?';
}

int ck_eval_rounds(sqlite3 *db, const int64_t *exps, int n, const ck_check_t *c,
                   const ck_preds_t *preds, int *pass, char *got, size_t gotlen, char *want,
                   size_t wantlen) {
  exps_t e = {exps, n};
  int rc = SG_EINTERNAL;
  *pass = 0;
  got[0] = want[0] = 0;
  switch (c->kind) {
  case CK_EXPECT: rc = eval_expect(db, e, c, pass, got, gotlen, want, wantlen); break;
  case CK_RATIO: rc = eval_ratio(db, e, c, pass, got, gotlen, want, wantlen); break;
  case CK_PREDICTED: rc = eval_predicted(db, e, c, preds, pass, got, gotlen, want, wantlen); break;
  case CK_COUNT: rc = eval_count(db, e, c, pass, got, gotlen, want, wantlen); break;
  case CK_SAME: rc = eval_same(db, e, c, pass, got, gotlen, want, wantlen); break;
  }
  printable(got);
  printable(want);
  return rc;
}

int ck_eval(sqlite3 *db, int64_t exp_id, const ck_check_t *c, const ck_preds_t *preds,
            int *pass, char *got, size_t gotlen, char *want, size_t wantlen) {
  return ck_eval_rounds(db, &exp_id, 1, c, preds, pass, got, gotlen, want, wantlen);
}

int ck_is_timing(const char *m) {
  static const char *const T[] = {"step_ms", "comm_ms", "wait_ms", "comm_share", "samples_per_s",
                                  "wall_s", "bench_us", NULL};
  for (const char *const *t = T; *t; t++)
    if (!strcmp(*t, m)) return 1;
  return 0;
}

int64_t ck_latest_experiment(sqlite3 *db, const char *name) {
  sqlite3_stmt *st = NULL;
  int64_t id = 0;
  if (sqlite3_prepare_v2(db, "SELECT max(id) FROM experiments WHERE name = ?1", -1, &st, NULL) !=
      SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return id;
}
