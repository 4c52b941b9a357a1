/* test_clicks.c - click logs and the embedding model as a workload.
 *
 *   - LIBSVM and CSV click files load as F keys per row (csv tokens
 *     hashed); every kind of bad line is one error at path:line:col, the
 *     column of the first byte that does not fit (a table of cases, each
 *     with the exact message);
 *   - the synthetic log's train and test splits are different rows from
 *     one ground truth, the same for the same seed;
 *   - the embedding workload's sparse step (dataset: clicks, model:
 *     embedding): the coordinates are the dense MLP prefix plus E per
 *     touched row, the sparse gradient equals the dense one bit for bit
 *     there and the dense one is exactly zero elsewhere, and the
 *     parameters are read only there (NaN elsewhere changes nothing).  A
 *     planted mistake (a coordinate left out) must make the comparison
 *     report.
 */
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_clicks.h"
#include "err.h"
#include "run_util.h"
#include "settings.h"
#include "workload.h"

static const char *put(const char *name, const char *text) {
  static char path[512];
  const char *d = ru_scratch("clicks");
  if (!d) return NULL;
  snprintf(path, sizeof path, "%s/%s", d, name);
  return ru_write_file(path, text) == 0 ? path : NULL;
}

TEST(click_files_load) {
  sg_dataset_t *ds = NULL;
  const char *p = put("a.svm", "# a comment\n1 3:1 7:0.5\n\n-1 4:1 4294967295:1  # tail\r\n0 0:2 9:1");
  CHECK_OK(sg_dataset_load_clicks(&ds, p, SG_CLICKS_LIBSVM, 2, 0));
  CHECK_EQ_INT(ds->n, 3);
  CHECK_EQ_INT(ds->max_row_nnz, 2);
  CHECK(ds->y[0] == 1 && ds->y[1] == 0 && ds->y[2] == 0);
  CHECK(ds->col[0] == 3 && ds->col[1] == 7 && ds->col[2] == 4 && ds->col[3] == 4294967295u);
  CHECK_EQ_INT(ds->d, 4294967296LL);
  CHECK(ds->rowptr[3] == 6);
  sg_dataset_destroy(&ds);
  p = put("a.csv", "1,68fd1e64,,x_y.z\n0,68fd1e64,1,-\n");
  CHECK_OK(sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 3, 0));
  CHECK_EQ_INT(ds->n, 2);
  CHECK(ds->col[0] == ds->col[3]); /* the same token, the same key */
  CHECK(ds->col[1] != ds->col[4]); /* missing and "1" differ */
  CHECK(ds->col[1] == 2166136261u); /* the empty token: FNV-1a's offset basis */
  sg_dataset_destroy(&ds);
  CHECK_OK(sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 3, 1)); /* limit */
  CHECK_EQ_INT(ds->n, 1);
  sg_dataset_destroy(&ds);
}

typedef struct {
  int fmt, F;
  const char *text, *want; /* want: the message after "path:" */
} bad_t;

static const bad_t bad_cases[] = {
    {SG_CLICKS_LIBSVM, 2, "1 3:1 4:1\n2 3:1 4:1\n", "2:1: bad label (expected 0, 1, -1 or +1, then a space) at '2 3:1 4:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1\n", "1:6: fewer key:value pairs than the model's fields"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1 4:1 5:1\n", "1:11: more key:value pairs than the model's fields at '5:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1 x:1\n", "1:7: bad key (expected an integer 0..4294967295, then ':') at 'x:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1 4294967296:1\n", "1:7: bad key (expected an integer 0..4294967295, then ':') at '4294967296:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1 -4:1\n", "1:7: bad key (expected an integer 0..4294967295, then ':') at '-4:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:nan 4:1\n", "1:5: bad value (expected a finite number) at 'nan 4:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3: 5 4:1\n", "1:5: bad value (expected a finite number) at ' 5 4:1'"},
    {SG_CLICKS_LIBSVM, 2, "1 3:1 4:1\r5\n", "1:10: stray carriage return"},
    {SG_CLICKS_CSV, 2, "1,a,b\n0,a;b,c\n", "2:4: byte not allowed in a token at ';b,c'"},
    {SG_CLICKS_CSV, 2, "1,a\n", "1:4: fewer fields than the model's"},
    {SG_CLICKS_CSV, 2, "1,a,b,c\n", "1:6: more fields than the model's at ',c'"},
    {SG_CLICKS_CSV, 2, "yes,a,b\n", "1:1: bad label (expected 0 or 1, then ',') at 'yes,a,b'"},
    {SG_CLICKS_CSV, 2, "1,a b,c\n", "1:4: byte not allowed in a token at ' b,c'"},
    {SG_CLICKS_CSV, 1, "1,\x1b[31m\n", "1:3: byte not allowed in a token at '?[31m'"},
    {SG_CLICKS_CSV, 2, "# nothing\n\n", "3:1: no rows"},
};

TEST(bad_click_lines_name_line_and_column) {
  char want[1200];
  for (size_t i = 0; i < sizeof bad_cases / sizeof *bad_cases; i++) {
    const bad_t *c = &bad_cases[i];
    const char *p = put("bad.txt", c->text);
    CHECK(p != NULL);
    sg_dataset_t *ds = NULL;
    int rc = sg_dataset_load_clicks(&ds, p, c->fmt, c->F, 0);
    snprintf(want, sizeof want, "%s:%s", p, c->want);
    CHECK_MSG(rc == SG_EFORMAT && ds == NULL, "case %zu: rc %d", i, rc);
    CHECK_MSG(!strcmp(sg_err_msg(), want), "case %zu: got '%s', want '%s'", i, sg_err_msg(),
              want);
  }
  /* a NUL, an overlong line and a token over 64 bytes */
  char *big = malloc(SG_CLICKS_MAX_LINE + 64);
  CHECK(big != NULL);
  memset(big, 'a', SG_CLICKS_MAX_LINE + 10);
  memcpy(big, "1,", 2);
  big[SG_CLICKS_MAX_LINE + 10] = '\0';
  sg_dataset_t *ds = NULL;
  const char *p = put("long.csv", big);
  CHECK_EQ_INT(sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 1, 0), SG_EFORMAT);
  CHECK_MSG(strstr(sg_err_msg(), ":1:65537: line longer than 65536 bytes"), "%s", sg_err_msg());
  big[70] = '\n', big[71] = '\0';
  p = put("tok.csv", big);
  CHECK_EQ_INT(sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 1, 0), SG_EFORMAT);
  CHECK_MSG(strstr(sg_err_msg(), ":1:3: token longer than 64 bytes"), "%s", sg_err_msg());
  free(big);
  p = put("nul.csv", "1,a\n0,b");
  FILE *f = fopen(p, "ab");
  CHECK(f && fwrite("\0\n", 1, 2, f) == 2 && fclose(f) == 0);
  CHECK_EQ_INT(sg_dataset_load_clicks(&ds, p, SG_CLICKS_CSV, 1, 0), SG_EFORMAT);
  CHECK_MSG(strstr(sg_err_msg(), ":2:4: a NUL byte"), "%s", sg_err_msg());
  CHECK(sg_dataset_load_clicks(&ds, "/dev/zero", SG_CLICKS_CSV, 1, 0) < 0 && !ds);
  CHECK_MSG(strstr(sg_err_msg(), "not a regular file"), "%s", sg_err_msg());
}

TEST(synthetic_clicks_splits) {
  sg_dataset_t *a = NULL, *b = NULL, *t = NULL;
  CHECK_OK(sg_dataset_clicks_synth(&a, 7, SG_SPLIT_TRAIN, 500, 4, 1000, 1.05));
  CHECK_OK(sg_dataset_clicks_synth(&b, 7, SG_SPLIT_TRAIN, 500, 4, 1000, 1.05));
  CHECK_OK(sg_dataset_clicks_synth(&t, 7, SG_SPLIT_TEST, 500, 4, 1000, 1.05));
  CHECK(!memcmp(a->col, b->col, 2000 * sizeof *a->col) && !memcmp(a->y, b->y, 500 * 4));
  CHECK(memcmp(a->col, t->col, 2000 * sizeof *a->col) != 0);
  CHECK(a->max_row_nnz == 4 && a->rowptr[500] == 2000 && a->classes == 2 && a->d == 1000);
  sg_dataset_destroy(&a), sg_dataset_destroy(&b), sg_dataset_destroy(&t);
}

enum { FIELDS = 4, DIM = 8, HID = 16 };

static sg_workload_t *make_wl(int worker, int workers) {
  sg_opts_t *o = sg_opts_new();
  sg_workload_t *w = NULL;
  if (!o) return NULL;
  sg_settings_defaults(sg_settings, o);
  sg_opts_set(o, "dataset", "clicks");
  sg_opts_set(o, "model", "embedding");
  sg_opts_setf(o, "fields", "%d", FIELDS);
  sg_opts_set(o, "table_rows", "4096");
  sg_opts_setf(o, "embed_dim", "%d", DIM);
  sg_opts_setf(o, "hidden", "%d", HID);
  sg_opts_set(o, "keys_per_field", "3000");
  sg_opts_set(o, "batch", "16");
  sg_opts_set(o, "train_samples", "200");
  sg_opts_set(o, "test_samples", "50");
  if (sg_workload_new(&w, o, worker, workers, SG_WL_ALL) < 0) w = NULL;
  sg_opts_destroy(&o);
  return w;
}

/* Disagreements between a sparse gradient (idx, gval, m) and the dense
 * one (n): a value that differs in any bit at idx, or a nonzero dense
 * entry that idx leaves out. */
static size_t diff_sparse_dense(const float *dense, size_t n, const uint32_t *idx,
                                const float *gval, size_t m) {
  size_t bad = 0, j = 0;
  for (size_t i = 0; i < n; i++) {
    if (j < m && idx[j] == i) bad += memcmp(&dense[i], &gval[j++], sizeof(float)) != 0;
    else bad += dense[i] != 0.0f;
  }
  return bad + (m - j);
}

TEST(embedding_sparse_step_equals_dense_step) {
  sg_workload_t *w = make_wl(1, 2);
  CHECK_MSG(w, "workload: %s", sg_err_msg());
  const size_t n = sg_workload_nparams(w), dl = (size_t)HID * FIELDS * DIM + 3 * HID + 2;
  CHECK_EQ_INT(n, dl + 4096 * DIM);
  float *p = malloc(n * 4), *dense = malloc(n * 4), *nanp = malloc(n * 4), *gval = malloc(n * 4);
  uint32_t *idx = malloc(n * 4);
  CHECK(p && dense && nanp && gval && idx);
  CHECK_OK(sg_workload_init_params(w, p));
  for (int64_t step = 0; step < sg_workload_steps_per_epoch(w) + 2; step++) {
    size_t m = 0;
    CHECK_EQ_INT(sg_workload_sparse_coords(w, step, idx, 3, &m), SG_ERANGE);
    CHECK_OK(sg_workload_sparse_coords(w, step, idx, n, &m));
    CHECK((m - dl) % DIM == 0 && m > dl && m <= dl + 16 * FIELDS * DIM);
    for (size_t j = 0; j < dl; j++) CHECK(idx[j] == j);
    for (size_t j = dl; j < m; j += DIM) /* whole rows, ascending */
      CHECK((idx[j] - dl) % DIM == 0 && idx[j + DIM - 1] == idx[j] + DIM - 1 &&
            (j == dl || idx[j] > idx[j - 1]));
    double ld = 0, ls = 0;
    CHECK_OK(sg_workload_grad(w, p, dense, step, &ld));
    for (size_t i = 0; i < n; i++) nanp[i] = NAN; /* read at idx only */
    for (size_t j = 0; j < m; j++) nanp[idx[j]] = p[idx[j]];
    CHECK_OK(sg_workload_grad_sparse(w, nanp, step, idx, m, gval, &ls));
    CHECK(ld == ls);
    CHECK_EQ_INT(diff_sparse_dense(dense, n, idx, gval, m), 0);
    /* planted: a touched row's last coordinate left out is reported */
    CHECK(diff_sparse_dense(dense, n, idx, gval, m - 1) > 0 || dense[idx[m - 1]] == 0.0f);
    for (size_t i = 0; i < n; i++) p[i] -= 0.1f * dense[i];
  }
  free(p), free(dense), free(nanp), free(gval), free(idx);
  sg_workload_destroy(&w);
}

TEST(embedding_needs_clicks_and_back) {
  sg_opts_t *o = sg_opts_new();
  sg_workload_t *w = NULL;
  sg_settings_defaults(sg_settings, o);
  sg_opts_set(o, "dataset", "clicks");
  sg_opts_set(o, "train_samples", "100");
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 1, SG_WL_ALL), SG_ECONFIG);
  CHECK(!strcmp(sg_err_msg(), "dataset: clicks needs model: embedding"));
  sg_opts_set(o, "model", "embedding");
  sg_opts_set(o, "hidden", "8,8");
  CHECK_EQ_INT(sg_workload_new(&w, o, 0, 1, SG_WL_ALL), SG_ECONFIG);
  CHECK_MSG(strstr(sg_err_msg(), "one hidden layer"), "%s", sg_err_msg());
  sg_opts_destroy(&o);
}

