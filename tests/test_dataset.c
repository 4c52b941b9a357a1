/* Datasets: IDX (plain and gzip) with every corruption the loader must name
 * by file and offset, LIBSVM with file:line errors, seeded synthetic data. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  return remove(path);
}

__attribute__((destructor)) static void rm_tmpdir(void) {
  if (tmpdir[0]) nftw(tmpdir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
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
  /* cut inside the 8-byte trailer only: every pixel arrives, but the CRC
   * that checks them does not */
  write_plain(tmp("notrailer.gz"), buf, n - 5);
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("notrailer.gz"), tmp("lb"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "notrailer.gz: offset 46: corrupt data (unexpected end of file)");
  CHECK(ds == NULL);
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

/* Under ASan the address space is reserved up front, so a limit on it
 * cannot be used; the checks on the error then carry the test alone. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* Run fn in a child whose address space may grow by at most `extra` bytes
 * (an allocation sized from a 1 GB header fails there) and that is killed
 * after 10 s.  fn returns 0 when its expectations hold.  Returns the
 * child's exit status, or 128+signal. */
static int run_limited(int (*fn)(void), size_t extra) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
#ifndef UNDER_ASAN
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld", &pages) != 1) _exit(100);
    fclose(f);
    rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra;
    struct rlimit rl = {lim, lim};
    if (setrlimit(RLIMIT_AS, &rl) < 0) _exit(101);
#endif
    _exit(fn());
  }
  int st;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* In a run_limited child: 0 when `rc` and the message are as expected. */
static int expect_err(int rc, int want, const char *needle) {
  if (rc == want && strstr(sg_err_msg(), needle)) return 0;
  fprintf(stderr, "got %d '%s', expected %d '...%s...'\n", rc, sg_err_msg(), want, needle);
  return 1;
}

/* An image header: n images of rows x cols. */
static void idx_header(unsigned char *h, uint32_t n, uint32_t rows, uint32_t cols) {
  be32(h, 0x803);
  be32(h + 4, n);
  be32(h + 8, rows);
  be32(h + 12, cols);
}

/* 60 images of 4096x4096 (1 GB of pixels) declared by a 116-byte file,
 * plain and gzip: refused from the header, before any allocation. */
static int huge_header_small_file(void) {
  unsigned char b[116] = {0};
  unsigned char lb[16];
  idx_header(b, 60, 4096, 4096);
  write_plain(tmp("huge"), b, sizeof b);
  write_gz(tmp("huge.gz"), b, sizeof b);
  write_plain(tmp("lb"), lb, idx_labels(lb, 5, 0));
  sg_dataset_t *ds = NULL;
  int64_t n, d;
  if (expect_err(sg_dataset_load_idx(&ds, tmp("huge"), tmp("lb"), 0), SG_EFORMAT,
                 "huge: offset 16: truncated: expected 1006632960 bytes of pixels, got 100") ||
      expect_err(sg_dataset_probe_idx(tmp("huge"), &n, &d), SG_EFORMAT,
                 "offset 16: truncated: expected 1006632960 bytes"))
    return 1;
  if (expect_err(sg_dataset_load_idx(&ds, tmp("huge.gz"), tmp("lb"), 0), SG_EFORMAT,
                 "huge.gz: offset 4: the header declares 1006632960 bytes of pixels, more than a") ||
      expect_err(sg_dataset_probe_idx(tmp("huge.gz"), &n, &d), SG_EFORMAT, "gzip file can hold"))
    return 1;
  return ds == NULL ? 0 : 1;
}

TEST(idx_huge_header_in_small_file_is_refused) {
  CHECK_EQ_INT(run_limited(huge_header_small_file, (size_t)256 << 20), 0);
}

/* A gzip file big enough for its header's claim (1 MB of incompressible
 * data could be 1 GB decompressed) but holding only 1 MB: the loader
 * allocates as data arrives and fails at the end of it, never from the
 * header alone. */
static int gzip_short_body(void) {
  size_t len = 16 + ((size_t)1 << 20);
  unsigned char *b = malloc(len), lb[16];
  if (!b) return 2;
  idx_header(b, 60, 4096, 4096);
  uint64_t s = 42;
  for (size_t i = 16; i < len; i++) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    b[i] = (unsigned char)(s >> 56);
  }
  write_gz(tmp("short.gz"), b, len);
  free(b);
  write_plain(tmp("lb"), lb, idx_labels(lb, 5, 0));
  sg_dataset_t *ds = NULL;
  return expect_err(sg_dataset_load_idx(&ds, tmp("short.gz"), tmp("lb"), 0), SG_EFORMAT,
                    "short.gz: offset 16: truncated: expected 1006632960 bytes of pixels, "
                    "got 1048576");
}

TEST(idx_gzip_body_is_allocated_as_it_arrives) {
  CHECK_EQ_INT(run_limited(gzip_short_body, (size_t)256 << 20), 0);
}

TEST(idx_implausible_dims_and_counts) {
  unsigned char h[16];
  int64_t n, d;
  idx_header(h, 5, 0xffffffffu, 0xffffffffu); /* rows*cols overflowed int64 */
  write_plain(tmp("dims"), h, sizeof h);
  CHECK_EQ_INT(sg_dataset_probe_idx(tmp("dims"), &n, &d), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 8: implausible image size 4294967295x4294967295");
  idx_header(h, 0, 28, 28);
  write_plain(tmp("zero"), h, sizeof h);
  CHECK_EQ_INT(sg_dataset_probe_idx(tmp("zero"), &n, &d), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "offset 4: no images");
  /* labels: a count that does not match the file */
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  write_plain(tmp("im"), im, ni);
  write_plain(tmp("lbshort"), lb, nl - 2);
  sg_dataset_t *ds = NULL;
  CHECK_EQ_INT(sg_dataset_load_idx(&ds, tmp("im"), tmp("lbshort"), 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "lbshort: offset 8: truncated: expected 5 bytes of labels, got 3");
}

/* The trailer's ISIZE describes only the last member; the loader does not
 * rely on it, so a file of two gzip members loads. */
TEST(idx_multi_member_gzip_loads) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  write_gz(tmp("m1.gz"), im, 20);
  write_gz(tmp("m2.gz"), im + 20, ni - 20);
  unsigned char buf[512];
  size_t at = 0;
  for (int k = 0; k < 2; k++) {
    FILE *f = fopen(tmp(k ? "m2.gz" : "m1.gz"), "rb");
    at += fread(buf + at, 1, sizeof buf - at, f);
    fclose(f);
  }
  write_plain(tmp("multi.gz"), buf, at);
  write_plain(tmp("lb"), lb, nl);
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_load_idx(&ds, tmp("multi.gz"), tmp("lb"), 0));
  CHECK_EQ_INT(ds->n, 5);
  CHECK(ds->x[29] == 45.0f / 255.0f);
  sg_dataset_destroy(&ds);
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

/* Data files must be regular files, checked before a byte is read: a FIFO
 * (whose open would wait for a writer forever) and /dev/zero (read
 * without end) are one error each, at once. */
static int load_fifo_libsvm(void) {
  sg_dataset_t *ds = NULL;
  return expect_err(sg_dataset_load_libsvm(&ds, tmp("fifo.svm"), 0, 3, 0), SG_EIO,
                    "fifo.svm: not a regular file (a FIFO)");
}

static int load_fifo_idx(void) {
  sg_dataset_t *ds = NULL;
  int64_t n, d;
  if (expect_err(sg_dataset_probe_idx(tmp("fifo.svm"), &n, &d), SG_EIO, "(a FIFO)")) return 1;
  return expect_err(sg_dataset_load_idx(&ds, tmp("ok-im"), tmp("fifo.svm"), 0), SG_EIO,
                    "fifo.svm: not a regular file (a FIFO)");
}

static int load_dev_zero(void) {
  sg_dataset_t *ds = NULL;
  return expect_err(sg_dataset_load_libsvm(&ds, "/dev/zero", 0, 3, 0), SG_EIO,
                    "/dev/zero: not a regular file (a character device)");
}

TEST(data_files_must_be_regular_files) {
  unsigned char im[64];
  write_plain(tmp("ok-im"), im, idx_images(im, 0x803));
  unlink(tmp("fifo.svm"));
  CHECK(mkfifo(tmp("fifo.svm"), 0600) == 0);
  /* in a child with a 10 s alarm: a hang is a failed check, not a stuck test */
  CHECK_EQ_INT(run_limited(load_fifo_libsvm, (size_t)1 << 28), 0);
  CHECK_EQ_INT(run_limited(load_fifo_idx, (size_t)1 << 28), 0);
  CHECK_EQ_INT(run_limited(load_dev_zero, (size_t)1 << 28), 0);
}

/* A line longer than SG_LIBSVM_MAX_LINE is one file:line error, read no
 * further than the cap (in a child whose address space allows the cap
 * and a little, not the whole line); a NUL byte is an error at its line. */
static int load_long_line(void) {
  sg_dataset_t *ds = NULL;
  char want[64];
  snprintf(want, sizeof want, "long.svm:2: line longer than %zu bytes", SG_LIBSVM_MAX_LINE);
  return expect_err(sg_dataset_load_libsvm(&ds, tmp("long.svm"), 0, 3, 0), SG_EFORMAT, want);
}

TEST(libsvm_line_cap_and_nul_bytes) {
  FILE *f = fopen(tmp("long.svm"), "w");
  CHECK(f != NULL);
  fputs("1 1:1\n0", f);
  for (size_t n = 0; n < SG_LIBSVM_MAX_LINE / 4 + 16; n++) fputs(" 1:1", f);
  fputs("\n", f);
  CHECK(fclose(f) == 0);
  CHECK_EQ_INT(run_limited(load_long_line, 3 * SG_LIBSVM_MAX_LINE), 0);
  sg_dataset_t *ds = NULL;
  static const char nul[] = "1 1:1\n0 2:1\n1 1\0:1\n";
  write_plain(tmp("nul.svm"), (const unsigned char *)nul, sizeof nul - 1);
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("nul.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "nul.svm:3: a NUL byte");
  CHECK(ds == NULL);
}

/* A terminal escape in a data file reaches a message escaped (\x1b), so
 * printing the message cannot drive the terminal. */
TEST(libsvm_errors_escape_control_characters) {
  sg_dataset_t *ds = NULL;
  write_text(tmp("esc.svm"), "\x1b]2;pwned\x07\x1b[31m 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("esc.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":1: bad label '\\x1b]2;pwned\\x07\\x1b[31m'");
  for (const char *c = sg_err_msg(); *c; c++) CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
  write_text(tmp("esc2.svm"), "1 1:1\n0 3:\xc2\x9b" "2J\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("esc2.svm"), 0, 3, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":2: malformed token '3:\\xc2\\x9b2J'");
}

/* LIBSVM files as people write them: -1/+1 and 1-based labels, classes
 * left to the file; the test file follows the training file's rule. */
TEST(libsvm_labels_pm1_and_one_based_are_mapped) {
  sg_dataset_t *ds = NULL;
  sg_libsvm_labels_t lab = {SG_LABELS_DECIDE, 0};
  write_text(tmp("pm.svm"), "-1 1:1\n+1 2:1\n1 1:2\n");
  CHECK_OK(sg_dataset_load_libsvm_labels(&ds, tmp("pm.svm"), 0, &lab, 0));
  CHECK_EQ_INT(lab.rule, SG_LABELS_PM1);
  CHECK_EQ_INT(lab.classes, 2);
  CHECK(ds->y[0] == 0 && ds->y[1] == 1 && ds->y[2] == 1);
  sg_dataset_destroy(&ds);
  /* a test file under the -1/+1 rule may not hold a 0 */
  write_text(tmp("pm0.svm"), "1 1:1\n0 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm_labels(&ds, tmp("pm0.svm"), 0, &lab, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "pm0.svm:2: label 0 out of range -1/+1 (labels: -1/+1");
  /* 1..3 with no 0: three classes, 0-based */
  lab = (sg_libsvm_labels_t){SG_LABELS_DECIDE, 0};
  write_text(tmp("one.svm"), "3 1:1\n1 2:1\n2 1:1\n");
  CHECK_OK(sg_dataset_load_libsvm_labels(&ds, tmp("one.svm"), 0, &lab, 0));
  CHECK_EQ_INT(lab.rule, SG_LABELS_ONE_BASED);
  CHECK_EQ_INT(lab.classes, 3);
  CHECK(ds->y[0] == 2 && ds->y[1] == 0 && ds->y[2] == 1);
  sg_dataset_destroy(&ds);
  /* its test file: a 0 is out of range, and so is 4 (3 classes) */
  write_text(tmp("one0.svm"), "1 1:1\n4 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm_labels(&ds, tmp("one0.svm"), 0, &lab, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "one0.svm:2: label 4 out of range 1..3");
  /* 0-based stays as is; classes inferred from the largest label */
  lab = (sg_libsvm_labels_t){SG_LABELS_DECIDE, 0};
  write_text(tmp("zero.svm"), "0 1:1\n4 1:1\n");
  CHECK_OK(sg_dataset_load_libsvm_labels(&ds, tmp("zero.svm"), 0, &lab, 0));
  CHECK_EQ_INT(lab.rule, SG_LABELS_AS_IS);
  CHECK_EQ_INT(lab.classes, 5);
  CHECK(ds->y[1] == 4);
  sg_dataset_destroy(&ds);
  /* one label only: nothing to infer */
  lab = (sg_libsvm_labels_t){SG_LABELS_DECIDE, 0};
  write_text(tmp("same.svm"), "0 1:1\n0 1:1\n");
  CHECK_EQ_INT(sg_dataset_load_libsvm_labels(&ds, tmp("same.svm"), 0, &lab, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), "every label is 0: classes cannot be inferred");
  CHECK(ds == NULL);
}

TEST(libsvm_holdout_is_seeded_and_disjoint) {
  FILE *f = fopen(tmp("h.svm"), "w");
  for (int i = 0; i < 100; i++) fprintf(f, "%d 1:%d\n", i % 2, i + 1); /* value = row + 1 */
  fclose(f);
  sg_dataset_t *a = NULL, *at = NULL, *b = NULL, *bt = NULL, *c = NULL, *ct = NULL;
  CHECK_OK(sg_dataset_load_libsvm(&a, tmp("h.svm"), 0, 2, 0));
  CHECK_OK(sg_dataset_load_libsvm(&b, tmp("h.svm"), 0, 2, 0));
  CHECK_OK(sg_dataset_load_libsvm(&c, tmp("h.svm"), 0, 2, 0));
  CHECK_OK(sg_dataset_holdout(&a, &at, 0.2, 7));
  CHECK_OK(sg_dataset_holdout(&b, &bt, 0.2, 7));
  CHECK_OK(sg_dataset_holdout(&c, &ct, 0.2, 8));
  CHECK_EQ_INT(at->n, 20);
  CHECK_EQ_INT(a->n, 80);
  int seen[101] = {0}, same = 1, differs = 0;
  for (int64_t i = 0; i < a->n; i++) seen[(int)a->val[i]]++;
  for (int64_t i = 0; i < at->n; i++) {
    seen[(int)at->val[i]]++;
    same &= at->val[i] == bt->val[i];
    differs |= at->val[i] != ct->val[i];
    CHECK_EQ_INT(at->y[i], ((int)at->val[i] - 1) % 2); /* labels travel with their rows */
    if (i) CHECK(at->val[i] > at->val[i - 1]);       /* file order kept */
  }
  for (int v = 1; v <= 100; v++) CHECK_MSG(seen[v] == 1, "row %d seen %d times", v, seen[v]);
  CHECK(same);    /* same seed, same rows */
  CHECK(differs); /* another seed, other rows */
  sg_dataset_destroy(&a);
  sg_dataset_destroy(&at);
  sg_dataset_destroy(&b);
  sg_dataset_destroy(&bt);
  sg_dataset_destroy(&c);
  sg_dataset_destroy(&ct);
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

/* Indices up to SG_LIBSVM_MAX_INDEX load in memory that follows the
 * nonzeros, not the index; one above is refused with file:line. */
static int libsvm_large_index(void) {
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_libsvm(&ds, tmp("big.svm"), 0, 2, 0);
  if (rc != SG_OK || ds->d != SG_LIBSVM_MAX_INDEX || ds->rowptr[2] != 3 ||
      ds->col[2] != SG_LIBSVM_MAX_INDEX - 1) {
    fprintf(stderr, "rc %d (%s)\n", rc, sg_err_msg());
    return 1;
  }
  sg_dataset_destroy(&ds);
  return 0;
}

TEST(libsvm_index_bounded_by_documented_maximum) {
  char text[128];
  snprintf(text, sizeof text, "1 1:1 7:2\n0 %lld:0.5\n", SG_LIBSVM_MAX_INDEX);
  write_text(tmp("big.svm"), text);
  CHECK_EQ_INT(run_limited(libsvm_large_index, (size_t)64 << 20), 0);
  snprintf(text, sizeof text, "1 1:1\n0 %lld:0.5\n", SG_LIBSVM_MAX_INDEX + 1);
  write_text(tmp("over.svm"), text);
  sg_dataset_t *ds = NULL;
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("over.svm"), 0, 2, 0), SG_EFORMAT);
  char want[300];
  snprintf(want, sizeof want, "%s:2: feature index 1000000001 out of range 1..1000000000",
           tmp("over.svm"));
  CHECK_STR_CONTAINS(sg_err_msg(), want);
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("big.svm"), SG_LIBSVM_MAX_INDEX + 1, 2, 0),
               SG_ERANGE);
  CHECK_STR_CONTAINS(sg_err_msg(), "features 1000000001 above the maximum 1000000000");
  /* a long malformed token is quoted short, on one line */
  char longtok[200];
  memset(longtok, 'z', sizeof longtok);
  memcpy(longtok, "1 ", 2);
  longtok[sizeof longtok - 2] = '\n';
  longtok[sizeof longtok - 1] = '\0';
  write_text(tmp("long.svm"), longtok);
  CHECK_EQ_INT(sg_dataset_load_libsvm(&ds, tmp("long.svm"), 0, 2, 0), SG_EFORMAT);
  CHECK_STR_CONTAINS(sg_err_msg(), ":1: malformed token 'zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'");
  CHECK(ds == NULL);
}

/* ---- the per-host shared cache (dataset_cache.c) ------------------------ */

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

/* The one cache file in dir (the name is a hash), into path. */
static int cache_file(const char *dir, char *path, size_t len) {
  DIR *d = opendir(dir);
  struct dirent *e;
  int found = 0;
  while (d && (e = readdir(d)))
    if (!strncmp(e->d_name, "idx-", 4)) snprintf(path, len, "%s/%s", dir, e->d_name), found++;
  if (d) closedir(d);
  return found == 1 ? 0 : -1;
}

static int same_as_decoded(const sg_dataset_t *a, const sg_dataset_t *b) {
  return a->n == b->n && a->d == b->d && a->classes == b->classes &&
         !memcmp(a->x, b->x, (size_t)(a->n * a->d) * 4) && !memcmp(a->y, b->y, (size_t)a->n * 4);
}

static void corrupt_byte(const char *path, long off) {
  int fd = open(path, O_RDWR);
  unsigned char c;
  if (fd < 0 || pread(fd, &c, 1, off) != 1) abort();
  c ^= 0x5a;
  if (pwrite(fd, &c, 1, off) != 1) abort();
  close(fd);
}

TEST(shared_cache_maps_what_the_decoder_gives_and_rebuilds_a_tampered_file) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  char imp[256], lbp[256], dir[256], path[512];
  snprintf(imp, sizeof imp, "%s", tmp("cim"));
  snprintf(lbp, sizeof lbp, "%s", tmp("clb"));
  snprintf(dir, sizeof dir, "%s", tmp("cache"));
  write_plain(imp, im, ni);
  write_plain(lbp, lb, nl);
  sg_dataset_t *ref = NULL, *ds = NULL;
  CHECK_OK(sg_dataset_load_idx(&ref, imp, lbp, 0));
  /* built on the first load, mapped on the second: both equal the decoded rows */
  for (int pass = 0; pass < 2; pass++) {
    CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
    CHECK(ds->map_ != NULL);
    CHECK(same_as_decoded(ds, ref));
    sg_dataset_destroy(&ds);
  }
  struct stat st;
  CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700);
  CHECK_OK(cache_file(dir, path, sizeof path));
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* a pixel flipped in the file: the checksum refuses it, it is rebuilt */
  corrupt_byte(path, 64 + 4 * 7);
  CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
  CHECK(same_as_decoded(ds, ref));
  sg_dataset_destroy(&ds);
  /* a header that claims more rows than the file holds: refused, rebuilt */
  corrupt_byte(path, 16);
  CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
  CHECK(same_as_decoded(ds, ref));
  sg_dataset_destroy(&ds);
  /* writable by others (anyone could have changed it): not trusted, rebuilt */
  corrupt_byte(path, 64 + 4 * 3);
  CHECK(chmod(path, 0666) == 0);
  CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
  CHECK(same_as_decoded(ds, ref));
  sg_dataset_destroy(&ds);
  CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
  /* owned by another user (root only can plant that): refused, replaced */
  if (geteuid() == 0) {
    corrupt_byte(path, 64 + 4 * 9);
    CHECK(chown(path, 65534, 65534) == 0);
    CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
    CHECK(same_as_decoded(ds, ref));
    sg_dataset_destroy(&ds);
    CHECK(stat(path, &st) == 0 && st.st_uid == 0);
  }
  /* a cache directory others may enter is refused, naming it */
  CHECK(chmod(dir, 0755) == 0);
  CHECK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir) == SG_EIO);
  CHECK_STR_CONTAINS(sg_err_msg(), "not a private directory");
  CHECK(chmod(dir, 0700) == 0);
  /* the mapping is of a read-only descriptor: it cannot even be made
   * writable, so no rank can change the others' data */
  CHECK_OK(sg_dataset_load_idx_shared(&ds, imp, lbp, 0, dir));
  CHECK(mprotect(ds->map_, ds->map_len_, PROT_READ | PROT_WRITE) != 0);
  sg_dataset_destroy(&ds);
  sg_dataset_destroy(&ref);
}

/* A cache header whose sizes wrap 64 bits: n = 2^40 rows of d = 2^22 - 1
 * floats make n*(d+1)*4 = 2^64, i.e. 0, so "payload 0 B" in a 64-B file
 * matched, and the label check then read n*d*4 bytes past the mapping
 * (a wild pointer 4 TiB before it: SIGSEGV instead of a rebuild). */
static char wrap_im[256], wrap_lb[256], wrap_dir[256];

static int load_wrapped_cache(void) {
  sg_dataset_t *ds = NULL, *ref = NULL;
  int rc = sg_dataset_load_idx_shared(&ds, wrap_im, wrap_lb, 0, wrap_dir);
  int ok = rc == SG_OK && ds->map_ != NULL && sg_dataset_load_idx(&ref, wrap_im, wrap_lb, 0) == 0 &&
           same_as_decoded(ds, ref);
  if (!ok) fprintf(stderr, "load: %d %s\n", rc, sg_err_msg());
  sg_dataset_destroy(&ds);
  sg_dataset_destroy(&ref);
  return ok ? 0 : 1;
}

TEST(shared_cache_header_whose_sizes_wrap_is_rebuilt_not_followed) {
  unsigned char im[64], lb[16], hdr[64];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  char path[512];
  snprintf(wrap_im, sizeof wrap_im, "%s", tmp("wim"));
  snprintf(wrap_lb, sizeof wrap_lb, "%s", tmp("wlb"));
  snprintf(wrap_dir, sizeof wrap_dir, "%s", tmp("wcache"));
  write_plain(wrap_im, im, ni);
  write_plain(wrap_lb, lb, nl);
  sg_dataset_t *ds = NULL;
  CHECK_OK(sg_dataset_load_idx_shared(&ds, wrap_im, wrap_lb, 0, wrap_dir));
  sg_dataset_destroy(&ds);
  CHECK_OK(cache_file(wrap_dir, path, sizeof path));
  /* keep magic, key, classes, version; lie about n, d, payload, sum */
  int fd = open(path, O_RDWR);
  CHECK(fd >= 0 && pread(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr);
  int64_t n = (int64_t)1 << 40, d = ((int64_t)1 << 22) - 1;
  uint64_t payload = 0, sum = sg_dataset_checksum_("", 0);
  memcpy(hdr + 16, &n, 8);
  memcpy(hdr + 24, &d, 8);
  memcpy(hdr + 40, &payload, 8);
  memcpy(hdr + 48, &sum, 8);
  CHECK(pwrite(fd, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr && ftruncate(fd, 64) == 0);
  close(fd);
  /* in a child, so a crash is a failed check and not a dead test binary */
  CHECK_EQ_INT(run_limited(load_wrapped_cache, (size_t)1 << 30), 0);
}

/* The cache directory swapped for a symlink after its check.  The cache
 * sits in a directory another user can write (data_cache: or
 * XDG_CACHE_HOME under /tmp): that user tries to rename our checked,
 * private cache directory away and put a symlink to a directory of ours
 * in its place, while we decode (the attacker runs from the loader's
 * test hook, after the check and before the write, so the moment is
 * exact; data files are regular files only, so a FIFO can no longer hold
 * the loader there).  As root the other user is nobody and the shared
 * directory is sticky like /tmp (a non-sticky one is refused before
 * anything: shared_cache_parents_another_user_could_change_are_refused),
 * so the rename itself fails; as any other user the "attacker" is that
 * same user and the swap happens.  Either way the cache file must land
 * in the directory that was checked, never behind the symlink. */
static char race_im[256], race_lb[256], race_dir[256], race_moved[256], race_target[256];
static int race_attacker = -1; /* the attacker's exit code */

static void race_swap(void) {
  fflush(NULL);
  pid_t a = fork();
  if (a == 0) {
    alarm(10);
    if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0)) _exit(90);
    int swapped = rename(race_dir, race_moved) == 0 && symlink(race_target, race_dir) == 0;
    _exit(swapped ? 0 : 91);
  }
  int st = 0;
  if (a > 0 && waitpid(a, &st, 0) == a && WIFEXITED(st)) race_attacker = WEXITSTATUS(st);
}

/* 0: loaded; else 1 + the attacker's exit code (so the parent sees both). */
static int load_race_victim(void) {
  sg_dataset_t *ds = NULL;
  sg_dataset_cache_race_hook_ = race_swap;
  int rc = sg_dataset_load_idx_shared(&ds, race_im, race_lb, 0, race_dir);
  if (rc < 0) fprintf(stderr, "victim: %s\n", sg_err_msg());
  sg_dataset_destroy(&ds);
  fprintf(stderr, "attacker exit %d\n", race_attacker);
  return rc < 0 ? 1 : race_attacker == 0 ? 0 : race_attacker == 91 ? 2 : 3;
}

static int entries_named(const char *dir, const char *prefix) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  if (d) closedir(d);
  return n;
}

TEST(shared_cache_directory_swapped_for_a_symlink_after_its_check) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  char shared[160];
  int root = geteuid() == 0;
  snprintf(shared, sizeof shared, "%.150s", tmp("shared"));
  snprintf(race_moved, sizeof race_moved, "%s/moved", shared);
  snprintf(race_target, sizeof race_target, "%s", tmp("mine"));
  snprintf(race_im, sizeof race_im, "%s", tmp("rim"));
  snprintf(race_lb, sizeof race_lb, "%s", tmp("rlb"));
  snprintf(race_dir, sizeof race_dir, "%s/cache", shared);
  write_plain(race_im, im, ni);
  write_plain(race_lb, lb, nl);
  CHECK(mkdir(shared, 0755) == 0 && mkdir(race_target, 0700) == 0);
  /* as root: the other user is nobody; the shared directory is /tmp-like */
  if (root) CHECK(chmod(tmpdir, 0711) == 0 && chmod(shared, 01777) == 0);
  int victim = run_limited(load_race_victim, (size_t)1 << 30);
  /* root: the sticky bit stops nobody's rename (91); otherwise it swaps */
  CHECK_MSG(victim == (root ? 2 : 0), "victim/attacker code %d", victim);
  const char *checked = root ? race_dir : race_moved;
  fprintf(stderr, "  cache files: %d behind the symlink, %d in the checked directory\n",
          entries_named(race_target, "idx-") + entries_named(race_target, ".tmp"),
          entries_named(checked, "idx-"));
  CHECK_EQ_INT(entries_named(race_target, "idx-") + entries_named(race_target, ".tmp"), 0);
  CHECK_EQ_INT(entries_named(checked, "idx-"), 1);
  if (root) CHECK(chmod(tmpdir, 0700) == 0);
}

/* A parent of the cache directory that another user could change (owned
 * by someone else, or writable by others without the sticky bit) is
 * refused with one line naming it, before anything is written; a sticky
 * one, like /tmp, is fine.  Root only (it needs a second owner). */
static char par_dir[256];

static int load_into(const char *base, const char *cache);

static int load_under_par(void) {
  char cd[300];
  snprintf(cd, sizeof cd, "%s/sub/cache", par_dir);
  return load_into(par_dir, cd);
}

TEST(shared_cache_parents_another_user_could_change_are_refused) {
  if (geteuid() != 0) {
    fprintf(stderr, "  skipped: needs root for a second owner\n");
    return;
  }
  struct { uid_t owner; mode_t mode; const char *says; } cases[] = {
      {65534, 0755, "is owned by uid 65534"},
      {0, 0777, "is writable by others (mode 0777, not sticky)"},
      {0, 01777, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char sub[300];
    snprintf(par_dir, sizeof par_dir, "%s", tmp(i == 0 ? "par0" : i == 1 ? "par1" : "par2"));
    snprintf(sub, sizeof sub, "%s/sub", par_dir);
    CHECK(mkdir(par_dir, 0755) == 0 && mkdir(sub, 0755) == 0);
    CHECK(chown(sub, cases[i].owner, cases[i].owner) == 0 && chmod(sub, cases[i].mode) == 0);
    int rc = load_under_par();
    if (!cases[i].says) {
      CHECK_MSG(rc == SG_OK, "sticky parent refused: %s", sg_err_msg());
      continue;
    }
    CHECK(rc == SG_EIO);
    CHECK_MSG(strstr(sg_err_msg(), sub) && strstr(sg_err_msg(), cases[i].says), "%s", sg_err_msg());
    char cd[320];
    snprintf(cd, sizeof cd, "%s/cache", sub);
    CHECK_MSG(access(cd, F_OK) != 0, "%s made under a refused parent", cd);
  }
}

/* A symlink on the way to the cache directory is a parent too: its owner
 * can repoint it, so one owned by another user (nobody, in a sticky
 * directory as /tmp) is refused with one line naming it, and nothing is
 * made where it points; ours is followed, as are relative paths with
 * "..".  Root only (it needs a second owner). */
static int load_into(const char *base, const char *cache) {
  unsigned char im[64], lb[16];
  size_t ni = idx_images(im, 0x803), nl = idx_labels(lb, 5, 0);
  char ip[300], lp[300];
  snprintf(ip, sizeof ip, "%s/im", base);
  snprintf(lp, sizeof lp, "%s/lb", base);
  write_plain(ip, im, ni);
  write_plain(lp, lb, nl);
  sg_dataset_t *ds = NULL;
  int rc = sg_dataset_load_idx_shared(&ds, ip, lp, 0, cache);
  sg_dataset_destroy(&ds);
  return rc;
}

TEST(shared_cache_through_another_users_symlink_is_refused) {
  if (geteuid() != 0) {
    fprintf(stderr, "  skipped: needs root for a second owner\n");
    return;
  }
  const char *base = tmp("links");
  char sub[300], sticky[300], theirs[320], mine[320], cd[340], cwd[512];
  snprintf(sub, sizeof sub, "%s/sub", base);
  snprintf(sticky, sizeof sticky, "%s/sticky", base);
  snprintf(theirs, sizeof theirs, "%s/theirs", sticky);
  snprintf(mine, sizeof mine, "%s/mine", sticky);
  CHECK(mkdir(base, 0755) == 0 && mkdir(sub, 0700) == 0 && mkdir(sticky, 0755) == 0);
  CHECK(chmod(sticky, 01777) == 0 && symlink(sub, theirs) == 0 && symlink("../sub", mine) == 0);
  CHECK(lchown(theirs, 65534, 65534) == 0);
  snprintf(cd, sizeof cd, "%s/cache", theirs);
  int rc = load_into(base, cd);
  fprintf(stderr, "  %s: %s\n", cd, rc ? sg_err_msg() : "accepted");
  CHECK_EQ_INT(rc, SG_EIO);
  CHECK(strstr(sg_err_msg(), theirs) && strstr(sg_err_msg(), "symlink owned by uid 65534"));
  snprintf(cd, sizeof cd, "%s/cache", sub);
  CHECK_MSG(access(cd, F_OK) != 0, "%s made through nobody's symlink", cd);
  snprintf(cd, sizeof cd, "%s/cache", mine); /* ours, relative: followed */
  CHECK_MSG(load_into(base, cd) == SG_OK, "%s", sg_err_msg());
  snprintf(cd, sizeof cd, "%s/cache", sub);
  CHECK(access(cd, F_OK) == 0);
  CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir(sticky) == 0);
  rc = load_into(base, "../sub/./cache2/"); /* relative, "..", ".", trailing slash */
  CHECK(chdir(cwd) == 0);
  CHECK_MSG(rc == SG_OK, "%s", sg_err_msg());
  snprintf(cd, sizeof cd, "%s/cache2", sub);
  CHECK(access(cd, F_OK) == 0);
}
