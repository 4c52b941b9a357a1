/* lab.c - `sgdlab lab check N --db FILE`: grade a student's database.
 *
 * The rubric of lab N is labN.check in configs/labs/ (checks.h): the
 * experiment the lab's sheet has the student run, and checks that do not
 * depend on timing (the right runs present with the right settings, exact
 * byte counts, bounds that hold by construction, the student's
 * predictions within the sheet's band).  Predictions are a YAML mapping
 * name -> number handed in next to the database (--predictions FILE).
 * One line per check with its points, then the score.  The database is
 * opened read-only; grading reads what the student recorded and does not
 * prove it was not edited (an instructor who must know reruns the lab).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "commands.h"
#include "err.h"
#include "report.h"
#include "views.h"

typedef struct lab_args {
  const char *db, *dir, *preds;
  int lab;
} lab_args_t;

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab lab check N [--db PATH] [--predictions FILE] [--dir DIR]\n"
          "\n"
          "Grade a student's results database for lab N (DIR/labN.check, default\n"
          "configs/labs): the runs the lab asks for, present with the right settings;\n"
          "exact byte counts; bounds that hold whatever the timing; the predictions\n"
          "handed in (a YAML file name: number, the names the lab's sheet gives)\n"
          "within the sheet's band.  One line per check with its points, then the\n"
          "score.  Nothing is run; the database is opened read-only.\n"
          "\n"
          "  --db PATH          the student's database (default results/sgdlab.db)\n"
          "  --predictions F    the student's predictions (YAML); without it the\n"
          "                     prediction checks score 0\n"
          "  --dir DIR          where the rubrics are (default configs/labs)\n"
          "\n"
          "exit status: 0 full marks, 1 points lost, 2 usage or a bad file.\n");
}

static int parse_args(int argc, char **argv, lab_args_t *a) {
  *a = (lab_args_t){.db = SG_DEFAULT_DB, .dir = "configs/labs"};
  int i = 1;
  if (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return usage(stdout), 1;
  if (argc < 3 || strcmp(argv[1], "check")) {
    fprintf(stderr, "sgdlab lab: expected `lab check N` (sgdlab lab --help)\n");
    return 2;
  }
  char *end = NULL;
  long n = strtol(argv[2], &end, 10);
  if (end == argv[2] || *end || n < 1 || n > 99) {
    fprintf(stderr, "sgdlab lab check: '%s': a lab number 1..99\n", argv[2]);
    return 2;
  }
  a->lab = (int)n;
  for (i = 3; i < argc; i++) {
    const char *s = argv[i];
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) return usage(stdout), 1;
    if (i + 1 < argc && !strcmp(s, "--db")) a->db = argv[++i];
    else if (i + 1 < argc && !strcmp(s, "--dir")) a->dir = argv[++i];
    else if (i + 1 < argc && !strcmp(s, "--predictions")) a->preds = argv[++i];
    else {
      fprintf(stderr, "sgdlab lab check: unknown option or missing value '%s'\n", s);
      return 2;
    }
  }
  return 0;
}

/* The graded runs' rows, copied into TEMP tables steps and evals, which
 * hide the file's tables for this connection (the temp schema is searched
 * first; a file before schema version 5 has TEMP views of those names,
 * views.c, which the copy reads and then replaces).  runs.experiment_id
 * and steps(run_id) are indexed, so the copy reads only the graded runs'
 * rows. */
static const char GRADE_ROWS[] =
    "CREATE TEMP TABLE grade_steps AS SELECT * FROM steps WHERE run_id IN"
    " (SELECT id FROM main.runs WHERE experiment_id IN (%s));"
    "DROP VIEW IF EXISTS temp.steps;"
    "CREATE TEMP TABLE steps AS SELECT * FROM grade_steps;"
    "DROP TABLE temp.grade_steps;"
    "CREATE INDEX temp.grade_steps_run ON steps(run_id, step);"
    "CREATE TEMP TABLE evals AS SELECT * FROM main.evals WHERE run_id IN"
    " (SELECT id FROM main.runs WHERE experiment_id IN (%s));"
    "CREATE INDEX temp.grade_evals_run ON evals(run_id, step);";

/* The run_summary rows of those runs, from sgdlab's TEMP views over the
 * copies, kept in a TEMP table of that name (the view for this
 * connection dropped): a rubric asks it a few dozen times. */
static const char GRADE_SUMMARY[] =
    "CREATE TEMP TABLE grade_summary AS SELECT * FROM temp.run_summary"
    " WHERE experiment_id IN (%s);"
    "DROP VIEW temp.run_summary;"
    "CREATE TEMP TABLE run_summary AS SELECT * FROM grade_summary;"
    "DROP TABLE temp.grade_summary;";

static const char GRADE_UNDO[] =
    "DROP TABLE IF EXISTS temp.grade_steps; DROP TABLE IF EXISTS temp.steps;"
    "DROP TABLE IF EXISTS temp.evals; DROP TABLE IF EXISTS temp.grade_summary;"
    "DROP TABLE IF EXISTS temp.run_summary;";

/* Grading reads only the graded experiments' rows, so its time follows
 * them, not the database's size: the views sum the steps of every run in
 * the file (a file of 2 M step rows took minutes).  Nothing is written to
 * the student's file.  Where the copies cannot be made, the checks read
 * the file's tables and sgdlab's views as they would without them. */
static void cache_summary(sqlite3 *db, const ck_file_t *f) {
  char ids[1024], sql[4096];
  size_t len = (size_t)snprintf(ids, sizeof ids, "%lld",
                                (long long)ck_latest_experiment(db, f->name));
  for (int i = 0; i < f->nchecks && len < sizeof ids - 24; i++)
    if (f->checks[i].exp[0])
      len += (size_t)snprintf(ids + len, sizeof ids - len, ", %lld",
                              (long long)ck_latest_experiment(db, f->checks[i].exp));
  snprintf(sql, sizeof sql, GRADE_ROWS, ids, ids);
  int ok = sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK && sg_views_install(db, 1) == SG_OK;
  snprintf(sql, sizeof sql, GRADE_SUMMARY, ids);
  if (ok && sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK) return;
  sqlite3_exec(db, GRADE_UNDO, NULL, NULL, NULL);
  sg_err_clear();
  if (sg_views_ready(db) < 0) sg_err_clear(); /* the legacy TEMP views again, where dropped */
}

/* One check: its line, *got and *max points. */
static int grade_one(sqlite3 *db, const ck_file_t *f, const ck_check_t *c, const ck_preds_t *p,
                     int *got, int *max) {
  const char *name = c->exp[0] ? c->exp : f->name;
  int64_t exp = ck_latest_experiment(db, name);
  char m[2048], w[512];
  int pass = 0;
  if (!exp) {
    snprintf(m, sizeof m, "no experiment named %s in the database", name);
    snprintf(w, sizeof w, "the lab's runs");
  } else {
    SG_CHECK(ck_eval(db, exp, c, p, &pass, m, sizeof m, w, sizeof w));
  }
  *max += c->points;
  *got += pass ? c->points : 0;
  printf("[%s] %d/%d  %s: %s (expected %s)\n", pass ? " ok " : "FAIL", pass ? c->points : 0,
         c->points, c->what, m, w);
  return SG_OK;
}

int sg_cmd_lab(int argc, char **argv) {
  lab_args_t a;
  ck_file_t *f = calloc(1, sizeof *f);
  ck_preds_t *p = calloc(1, sizeof *p);
  sqlite3 *db = NULL;
  char path[1024];
  int rc = 1, got = 0, max = 0;
  if (!f || !p) goto out;
  if ((rc = parse_args(argc, argv, &a))) {
    rc = rc == 1 ? 0 : rc; /* --help */
    goto out;
  }
  snprintf(path, sizeof path, "%s/lab%d.check", a.dir, a.lab);
  if (ck_file_load(f, path) < 0 || (a.preds && ck_preds_load(p, a.preds) < 0) ||
      sg_rdb_open(&db, a.db) < 0) {
    fprintf(stderr, "%s\n", sg_err_msg());
    rc = 2;
    goto out;
  }
  cache_summary(db, f);
  printf("lab %d: %s\ndatabase %s, predictions %s\n", a.lab, f->says, a.db,
         a.preds ? a.preds : "(none handed in)");
  for (int i = 0; i < f->nchecks; i++)
    if (grade_one(db, f, &f->checks[i], a.preds ? p : NULL, &got, &max) < 0) {
      fprintf(stderr, "%s\n", sg_err_msg());
      rc = 2;
      goto out;
    }
  printf("score: %d/%d\n", got, max);
  rc = got < max;
out:
  if (f) ck_file_free(f);
  sqlite3_close(db);
  free(f);
  free(p);
  return rc;
}
