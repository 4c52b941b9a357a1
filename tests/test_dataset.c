/* Datasets: IDX (plain and gzip) with every corruption the loader must name
 * by file and offset, LIBSVM with file:line errors, seeded synthetic data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "err.h"
#include "test.h"

static char tmpdir[64];

static const char *tmp(const char *name) {
  static char buf[4][256];
  static int k;
  if (!tmpdir[0]) {
    strcpy(tmpdir, "/tmp/sgdlab-dataset.XXXXXX");
    if (!mkdtemp(tmpdir)) abort();
  }
  char *b = buf[k++ % 4];
  snprintf(b, 256, "%s/%s", tmpdir, name);
  return b;
}

static void be32(unsigned char *p, uint32_t v) {
  p[0] = v >> 24;
  p[1] = v >> 16;
  p[2] = v >> 8;
  p[3] = v;
}

/* A 5-image 2x3 IDX pair: pixel (i, j) = 10*i + j, label i % 10 (or
 * `bad_label` at row 3 when nonzero).  Returns bytes written. */
static size_t idx_images(unsigned char *buf, uint32_t magic) {
  be32(buf, magic);
  be32(buf + 4, 5);
  be32(buf + 8, 2);
  be32(buf + 12, 3);
  for (int i = 0; i < 5; i++)
    for (int j = 0; j < 6; j++) buf[16 + 6 * i + j] = (unsigned char)(10 * i + j);
  return 16 + 30;
}
static size_t idx_labels(unsigned char *buf, int n, int bad_label) {
  be32(buf, 0x801);
  be32(buf + 4, (uint32_t)n);
  for (int i = 0; i < n; i++) buf[8 + i] = (unsigned char)(i % 10);
  if (bad_label) buf[8 + 3] = (unsigned char)bad_label;
  return 8 + (size_t)n;
}

static void write_plain(const char *path, const unsigned char *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}
static void write_gz(const char *path, const unsigned char *b, size_t n) {
  gzFile f = gzopen(path, "wb");
  gzwrite(f, b, (unsigned)n);
  gzclose(f);
}

TEST(idx_plain_and_gzip_load) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  write_plain(tmp("im"), im, ni);
  write_plain(tmp("lb"), lb, nl);
  write_gz(tmp("im.gz"), im, ni);
  write_gz(tmp("lb.gz"), lb, nl);
  for (int gz = 0; gz < 2; gz++) {
    sg_dataset_t *ds = NULL;
    CHECK_OK(sg_dataset_load_idx(&ds, gz ? tmp("im.gz") : tmp("im"), gz ? tmp("lb.gz") : tmp("lb"), 0));
    CHECK_EQ_INT(ds->n, 5);
    CHECK_EQ_INT(ds->d, 6);
    CHECK_EQ_INT(ds->classes, 10);
    CHECK(!sg_dataset_sparse(ds));
    for (int i = 0; i < 5; i++) {
      CHECK_EQ_INT(ds->y[i], i);
      for (int j = 0; j < 6; j++) CHECK(ds->x[6 * i + j] == (float)(10 * i + j) / 255.0f);
    }
    sg_dataset_destroy(&ds);
    CHECK(ds == NULL);
  }
  int64_t n, d;
  CHECK_OK(sg_dataset_probe_idx(tmp("im.gz"), &n, &d));
  CHECK_EQ_INT(n, 5);
  CHECK_EQ_INT(d, 6);
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_load_idx(&ds, tmp("im"), tmp("lb"), 2)); /* limit */
  CHECK_EQ_INT(ds->n, 2);
  CHECK_EQ_INT(ds->y[1], 1);
  sg_dataset_destroy(&ds);
}

TEST(idx_truncated_plain_names_file_and_offset) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  write_plain(tmp("imt"), im, ni - 7);
  write_plain(tmp("lb"), lb, nl);
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_idx(&ds, tmp("imt"), tmp("lb"), 0);
  CHECK_EQ_INT(rc, SG_EFORMAT);
  CHECK(ds == NULL);
  CHECK_STR_CONTAINS(sg_err_msg(), tmp("imt"));
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 16: truncated: expected 30 bytes of pixels, got 23");
  /* truncated inside the header */
  write_plain(tmp("imh"), im, 10);
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("imh"), tmp("lb"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 0: truncated");
}

TEST(idx_truncated_gzip_is_format_error) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  write_gz(tmp("full.gz"), im, ni);
  write_plain(tmp("lb"), lb, nl);
  /* copy the compressed file without its last 12 bytes (trailer + data) */
  FILE *f = fopen(tmp("full.gz"), "rb");
  unsigned char buf[256];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  CHECK(n > 20);
  write_plain(tmp("cut.gz"), buf, n - 12);
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_idx(&ds, tmp("cut.gz"), tmp("lb"), 0);
  CHECK_EQ_INT(rc, SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), tmp("cut.gz"));
  CHECK_STR_CONTAINS(sg_err_msg(), "offset ");
}

TEST(idx_bad_magic_and_bad_labels) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x802), nl = idx_labels(lb, 5, 0);
  write_plain(tmp("badmagic"), im, ni);
  write_plain(tmp("lb"), lb, nl);
  sg_dataset_t *ds = NULL;
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("badmagic"), tmp("lb"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), tmp("badmagic"));
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 0: bad magic 0x00000802");

  idx_images(im, 0x803);
  write_plain(tmp("im"), im, ni);
  nl = idx_labels(lb, 5, 12);
  write_plain(tmp("lbbad"), lb, nl);
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("im"), tmp("lbbad"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), tmp("lbbad"));
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 11: label 12 out of range 0..9");

  nl = idx_labels(lb, 4, 0); /* 4 labels for 5 images */
  write_plain(tmp("lb4"), lb, nl);
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("im"), tmp("lb4"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "4 labels, but");

  unsigned char longer[80];
  memcpy(longer, im, ni);
  memset(longer + ni, 0, 3);
  write_plain(tmp("imlong"), longer, ni + 3);
  write_plain(tmp("lb"), lb, idx_labels(lb, 5, 0));
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("imlong"), tmp("lb"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 46: unexpected data");

  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("nonexistent"), tmp("lb"), 0), SG_EIO);
  CHECK_STR_CONTAINS(sg_err_msg(), "nonexistent");
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

TEST(libsvm_dense_and_sparse_rows) {
  write_text(tmp("a.svm"), "# comment line\n"
                           "1 1:0.5 3:2\n"
                           "\n"
                           "0 1:1 2:0 3:-1 4:0.25   # dense row with a zero\n"
                           "2\n");
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_load_libsvm(&ds, tmp("a.svm"), 0, 3, 0));
  CHECK(sg_dataset_sparse(ds));
  CHECK_EQ_INT(ds->n, 3);
  CHECK_EQ_INT(ds->d, 4);
  CHECK_EQ_INT(ds->y[0], 1);
  CHECK_EQ_INT(ds->y[1], 0);
  CHECK_EQ_INT(ds->y[2], 2);
  CHECK_EQ_INT(ds->rowptr[1], 2);
  CHECK_EQ_INT(ds->rowptr[2], 5); /* the explicit zero is dropped */
  CHECK_EQ_INT(ds->rowptr[3], 5);
  CHECK_EQ_INT(ds->max_row_nnz, 3);
  CHECK_EQ_INT(ds->col[1], 2);
  CHECK(ds->val[1] == 2.0f);
  CHECK_EQ_INT(ds->col[4], 3);
  CHECK(ds->val[4] == 0.25f);
  CHECK_OK(sg_dataset_densify(ds));
  CHECK(!sg_dataset_sparse(ds));
  CHECK(ds->x[0] == 0.5f && ds->x[1] == 0.0f && ds->x[2] == 2.0f);
  CHECK(ds->x[4] == 1.0f && ds->x[6] == -1.0f && ds->x[7] == 0.25f);
  sg_dataset_destroy(&ds);
  /* a fixed feature count bounds the indices */
  CHECK_OK(sg_dataset_load_libsvm(&ds, tmp("a.svm"), 10, 3, 0));
  CHECK_EQ_INT(ds->d, 10);
  sg_dataset_destroy(&ds);
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("a.svm"), 3, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":4: feature index 4 > features 3");
}

TEST(libsvm_errors_name_file_and_line) {
  sg_dataset_t *ds = NULL;
  write_text(tmp("b.svm"), "1 1:0.5\n0 2:1\n\n7 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("b.svm"), 0, 3, 0), SG_EFORMAT);
  char want[300];
  snprintf(want, sizeof want, "%s:4: label 7 out of range 0..2", tmp("b.svm"));
  CHECK_STR_CONTAINS(sg_err_msg(), want);
  write_text(tmp("c.svm"), "1 1:0.5\n0 2=1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("c.svm"), 0, 3, 0), SG_EFORMAT);
  snprintf(want, sizeof want, "%s:2: malformed token '2=1'", tmp("c.svm"));
  CHECK_STR_CONTAINS(sg_err_msg(), want);
  write_text(tmp("d.svm"), "x 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("d.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":1: bad label 'x'");
  write_text(tmp("e.svm"), "1 0:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("e.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":1: feature index 0 out of range");
  write_text(tmp("f.svm"), "1 3:abc\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("f.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":1: malformed token '3:abc'");
  CHECK(ds == NULL);
}

TEST(synthetic_dense_is_seeded) {
  sg_dataset_t *a = NULL, *b = NULL, *c = NULL, *t = NULL;
  CHECK_OK(sg_dataset_synth_dense(&a, 7, SG_SPLIT_TRAIN, 200, 33, 4));
  CHECK_OK(sg_dataset_synth_dense(&b, 7, SG_SPLIT_TRAIN, 100, 33, 4));
  CHECK_OK(sg_dataset_synth_dense(&c, 8, SG_SPLIT_TRAIN, 100, 33, 4));
  CHECK_OK(sg_dataset_synth_dense(&t, 7, SG_SPLIT_TEST, 100, 33, 4));
  /* rows do not depend on how many are generated */
  CHECK(memcmp(a->x, b->x, 100 * 33 * sizeof(float)) == 0);
  CHECK(memcmp(a->y, b->y, 100 * sizeof(int32_t)) == 0);
  CHECK(memcmp(b->x, c->x, 100 * 33 * sizeof(float)) != 0);
  CHECK(memcmp(b->x, t->x, 100 * 33 * sizeof(float)) != 0);
  int seen[4] = {0};
  for (int i = 0; i < 200; i++) {
    CHECK(a->y[i] >= 0 && a->y[i] < 4);
    seen[a->y[i]]++;
  }
  for (int k = 0; k < 4; k++) CHECK(seen[k] > 20);
  sg_dataset_destroy(&a);
  sg_dataset_destroy(&b);
  sg_dataset_destroy(&c);
  sg_dataset_destroy(&t);
}

TEST(synthetic_sparse_shape) {
  sg_dataset_t *a = NULL, *b = NULL;
  const int64_t d = 2000000;
  CHECK_OK(sg_dataset_synth_sparse(&a, 3, SG_SPLIT_TRAIN, 500, d, 10, 40));
  CHECK_OK(sg_dataset_synth_sparse(&b, 3, SG_SPLIT_TRAIN, 500, d, 10, 40));
  CHECK(sg_dataset_sparse(a));
  CHECK_EQ_INT(a->rowptr[500], 500 * 40);
  CHECK_EQ_INT(a->max_row_nnz, 40);
  uint32_t maxc = 0;
  for (int64_t k = 0; k < 500 * 40; k++) maxc = a->col[k] > maxc ? a->col[k] : maxc;
  CHECK(maxc < d);
  CHECK(maxc > d / 2); /* uniform part reaches the top half */
  CHECK(memcmp(a->col, b->col, 500 * 40 * sizeof(uint32_t)) == 0);
  CHECK_EQ_INT(sg_dataset_synth_sparse(&b, 3, SG_SPLIT_TRAIN, 5, 10, 2, 11), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "nnz");
  sg_dataset_destroy(&a);
  sg_dataset_destroy(&b);
}
