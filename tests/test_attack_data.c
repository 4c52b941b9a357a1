/* test_attack_data.c - untrusted data against the newer readers: click
 * log files (dataset: clicks) and a results database's bucket rows.
 *
 *  - click_file_memory_checked_before_loading: a CSV click log of rows of
 *    F = 256 empty tokens is 258 bytes of text and 2,060 bytes in memory
 *    a row, so a file far below the 64 GiB file cap took all of the
 *    machine's memory in the harness's check of the experiment (300 MB of
 *    text: 2.35 GB resident), before the run's memory estimate ran.  The
 *    loader now counts the rows first and refuses, in one line, a file
 *    whose rows need more than this process may allocate; in a child
 *    whose address space may grow by 64 MiB, a 24 MiB file (~190 MiB of
 *    rows) must be that one line, not an allocation failure on the way
 *    (under ASan, which reserves the address space up front, the limit
 *    cannot be set: the case checks only that the file loads);
 *  - click_file_counts_rows_as_the_parser_does: the first pass and the
 *    parse agree on what a row is (comments, blank CRLF lines, a lone CR,
 *    `limit`), so every error stays the parser's own at its line;
 *  - trace_forged_bucket_times_stay_json: bucket rows whose times are
 *    finite but whose sums are not (a start of -1.5e302 s and an end of
 *    1.5e302 s; a step start and a hand-over of 1.5e302 s each) wrote
 *    "dur":inf and "ts":inf, so `sgdlab trace` wrote a file no JSON
 *    reader loads and its page drew nothing; such events are left out
 *    and the rest stay.
 */
#define _GNU_SOURCE
#include "test.h"

#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataset_clicks.h"
#include "err.h"
#include "fixture_schema.h"
#include "json_check.h"
#include "report.h"
#include "run_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

static const char *scratch(const char *name) {
  static char path[4][512];
  static int k;
  const char *d = ru_scratch("attack-data");
  if (!d) abort();
  k = (k + 1) % 4;
  snprintf(path[k], sizeof path[k], "%s/%s", d, name);
  return path[k];
}

/* ---- click files --------------------------------------------------------- */

static const char *big_csv; /* rows of 256 empty tokens */

static int write_big_csv(const char *path, size_t rows) {
  char row[260];
  row[0] = '0';
  memset(row + 1, ',', 256);
  row[257] = '\n';
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  for (size_t i = 0; i < rows; i++) fwrite(row, 1, 258, f);
  return fclose(f) ? -1 : 0;
}

#ifndef UNDER_ASAN /* ASan reserves more address space than any limit allows */
/* In the child: 0 when the load is refused up front with the one line. */
static int load_refused(void) {
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_clicks(&ds, big_csv, SG_CLICKS_CSV, 256, 0);
  sg_dataset_destroy(&ds);
  if (rc == SG_EFORMAT && strstr(sg_err_msg(), "97541 rows of 256 fields need") &&
      strstr(sg_err_msg(), "MiB available to this process"))
    return 0;
  fprintf(stderr, "got %d '%s'\n", rc, sg_err_msg());
  return 1;
}

/* Run fn in a child whose address space may grow by `extra` bytes; its
 * exit status, or 128 + signal. */
static int run_limited(int (*fn)(void), size_t extra) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) _exit(100);
    fclose(f);
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra;
    struct rlimit rl = {lim, lim};
    if (setrlimit(RLIMIT_AS, &rl) < 0) _exit(101);
    _exit(fn());
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
#endif

TEST(click_file_memory_checked_before_loading) {
  big_csv = scratch("big.csv");
  CHECK(write_big_csv(big_csv, 97541) == 0); /* 24 MiB of text, ~192 MiB of rows */
#ifndef UNDER_ASAN
  CHECK_EQ_INT(run_limited(load_refused, (size_t)64 << 20), 0);
#else
  fprintf(stderr, "  (ASan: no address-space limit; the file must load)\n");
#endif
  /* with the machine's memory, the same file loads: the check refuses
   * only what does not fit */
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_load_clicks(&ds, big_csv, SG_CLICKS_CSV, 256, 0));
  CHECK_EQ_INT(ds->n, 97541);
  CHECK_EQ_INT(ds->max_row_nnz, 256);
  sg_dataset_destroy(&ds);
  unlink(big_csv);
}

TEST(click_file_counts_rows_as_the_parser_does) {
  static const struct {
    const char *text, *err; /* err NULL: loads `rows` rows */
    long rows, limit;
  } cases[] = {
      {"# head\r\n\r\n1,a,b\r\n  # note\r\n0,c,d\r\n\r\n", NULL, 2, 0},
      {"1,a,b\n\n\n0,c,d\n1,e,f\n", NULL, 2, 2},
      {"  \t\n1,a,b\n\r\n", NULL, 1, 0},
      {"1,a,b\n\rx\n", ":2:1: bad label", 0, 0},
      {"1,a,b\n\r", NULL, 1, 0},
      {"1,a,b\n0,a\n", ":2:4: fewer fields than the model's", 0, 0},
      {"\n\n# only comments\n", ":4:1: no rows", 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *p = scratch("rows.csv");
    CHECK(ru_write_file(p, cases[i].text) == 0);
    sg_dataset_t *ds = NULL;
    int rc = sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 2, cases[i].limit);
    if (!cases[i].err) {
      CHECK_MSG(rc == SG_OK, "case %zu: %s", i, sg_err_msg());
      if (ds) CHECK_EQ_INT(ds->n, cases[i].rows);
    } else {
      CHECK_MSG(rc == SG_EFORMAT && strstr(sg_err_msg(), cases[i].err),
                "case %zu: got %d '%s', want '%s'", i, rc, sg_err_msg(), cases[i].err);
    }
    sg_dataset_destroy(&ds);
  }
}

/* ---- bucket rows in a trace ---------------------------------------------- */

static int sql(sqlite3 *db, const char *s) {
  char *err = NULL;
  int rc = sqlite3_exec(db, s, NULL, NULL, &err) == SQLITE_OK ? 0 : -1;
  if (rc) fprintf(stderr, "fixture SQL: %s\n", err ? err : "?");
  sqlite3_free(err);
  return rc;
}

/* One ring run of 2 ranks, 3 steps each, one bucket a step; `forge` then
 * changes some of the bucket rows. */
static int bucket_db(const char *path, const char *forge) {
  sqlite3 *db = NULL;
  int rc = sqlite3_open(path, &db) == SQLITE_OK ? 0 : -1;
  if (!rc) rc = sql(db, SCHEMA);
  if (!rc)
    rc = sql(db, "CREATE TABLE buckets(run_id INTEGER NOT NULL, rank INTEGER, step INTEGER,"
                 " bucket INTEGER, nbuckets INTEGER, offset INTEGER, floats INTEGER,"
                 " ready_s REAL, start_s REAL, end_s REAL);"
                 "INSERT INTO experiments VALUES(1, 'b', '', 't', 'h', 'v');"
                 "INSERT INTO runs VALUES(1, 1, 'allreduce', '{}', 'zmq', 'local', 2, 0, 2, 0,"
                 " 1, 'ok', NULL, 't', 't', 1.0);"
                 "INSERT INTO ranks VALUES(1, 0, 'worker', 'h', 1), (1, 1, 'worker', 'h', 2);"
                 "WITH RECURSIVE s(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM s WHERE k < 5)"
                 " INSERT INTO steps SELECT 1, k % 2, 'worker', k / 2, 0, 0.01 * (k / 2), 0.004,"
                 " 0.002, 0.001, 10, 10, 1.0, NULL FROM s;"
                 "INSERT INTO buckets SELECT 1, rank, step, 0, 1, 0, 100, 0.003, 0.004, 0.005"
                 " FROM steps;");
  if (!rc) rc = sql(db, forge);
  sqlite3_close(db);
  return rc;
}

TEST(trace_forged_bucket_times_stay_json) {
  const char *path = scratch("buckets.db");
  CHECK(bucket_db(path,
                  /* rank 0 step 1: start and end finite, their difference not */
                  "UPDATE buckets SET start_s = -1.5e302, end_s = 1.5e302"
                  " WHERE rank = 0 AND step = 1;"
                  /* rank 1 step 2: the step's start and the hand-over, each finite */
                  "UPDATE steps SET t_start = 1.5e302 WHERE rank = 1 AND step = 2;"
                  "UPDATE buckets SET ready_s = 1.5e302, start_s = 1.5e302,"
                  " end_s = 1.6e302 WHERE rank = 1 AND step = 2;") == 0);
  char *out = NULL;
  CHECK_EQ_INT(ru_call(sg_cmd_trace, NULL, &out, "trace", "1", "--db", path, NULL), 0);
  size_t at = 0;
  CHECK_MSG(out && jc_valid(out, &at), "invalid JSON at byte %zu: %.40s", at,
            out ? out + at : "");
  CHECK(out && !strstr(out, ":inf") && !strstr(out, ":-inf") && !strstr(out, ":nan"));
  /* of 6 rows' events, the slices of the two forged rows and the
   * hand-over of rank 1's go; the rest stay */
  CHECK_EQ_INT(jc_count(out, "\"name\":\"bucket\""), 4);
  CHECK_EQ_INT(jc_count(out, "\"name\":\"ready\""), 5);
  free(out);
  unlink(path);
}
