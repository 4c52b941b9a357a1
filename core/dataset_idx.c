/* dataset_idx.c - IDX files (MNIST, Fashion-MNIST), gzip or plain.
 *
 * Format (big-endian): magic 0x00000803, n, rows, cols, then n*rows*cols
 * pixel bytes (images); magic 0x00000801, n, then n label bytes (labels).
 * zlib's gzread reads plain files transparently.  Offsets in messages are
 * byte offsets in the uncompressed stream.
 *
 * The sizes in a header are claims: before anything is allocated from
 * them they are checked against what the file can hold (check_room), and
 * a gzip body is allocated as it arrives (read_body), so a small file that
 * declares huge images is refused without a huge allocation.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "err.h"

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u
#define IDX_MAX_SIDE 4096u
#define IDX_MAX_PIXELS ((uint64_t)1 << 40)
/* deflate's best case is a 258-byte match coded in 2 bits: S bytes of
 * gzip (any number of members) decompress to at most 1032*S bytes */
#define GZ_MAX_RATIO 1032u
/* the first allocation for a gzip body; doubled as the data arrives */
#define GZ_FIRST_CHUNK ((size_t)1 << 20)

typedef struct {
  gzFile gz;
  const char *path;
  int plain;     /* not gzip: the body is exactly the rest of the file */
  uint64_t size; /* bytes on disk (sg_data_open: a regular file) */
} idx_file_t;

static int idx_open(idx_file_t *f, const char *path) {
  memset(f, 0, sizeof *f);
  f->path = path;
  int fd = sg_data_open(path, &f->size); /* regular files only */
  if (fd < 0) return fd;
  if (!(f->gz = gzdopen(fd, "rb"))) {
    int e = errno;
    close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  gzbuffer(f->gz, 1 << 20);
  f->plain = gzdirect(f->gz); /* peeks at the first bytes */
  return SG_OK;
}

static void idx_close(idx_file_t *f) {
  if (f->gz) gzclose(f->gz);
  f->gz = NULL;
}

static int corrupt(idx_file_t *f, size_t off) {
  int zerr;
  const char *m = gzerror(f->gz, &zerr), *c;
  /* zlib prefixes its name for the file, "<fd:3>: "; ours comes first */
  if (m && !strncmp(m, "<fd:", 4) && (c = strstr(m, ": "))) m = c + 2;
  return sg_err_set(SG_EFORMAT, "%s: offset %zu: corrupt data (%s)", f->path, off,
                    m && *m ? m : "read error");
}

/* Read up to `len` bytes at uncompressed offset `off`; *got says how many
 * arrived.  A zlib error is SG_EFORMAT at the offset where it happened. */
static int read_some(idx_file_t *f, void *buf, size_t len, size_t off, size_t *got) {
  unsigned char *p = buf;
  *got = 0;
  while (*got < len) {
    size_t chunk = len - *got > (1u << 30) ? (1u << 30) : len - *got;
    int r = gzread(f->gz, p + *got, (unsigned)chunk);
    if (r < 0) return corrupt(f, off + *got);
    if (r == 0) break;
    *got += (size_t)r;
  }
  return SG_OK;
}

/* After a short read: "path: offset off: truncated: expected len bytes of
 * what, got k", or the zlib error a gzip stream cut short reports only now. */
static int truncated(idx_file_t *f, size_t off, size_t len, size_t got, const char *what) {
  int zerr;
  gzerror(f->gz, &zerr);
  if (zerr != Z_OK && zerr != Z_BUF_ERROR) return corrupt(f, off + got);
  return sg_err_set(SG_EFORMAT, "%s: offset %zu: truncated: expected %zu bytes of %s, got %zu",
                    f->path, off, len, what, got);
}

static int read_exact(idx_file_t *f, void *buf, size_t len, size_t off, const char *what) {
  size_t got;
  SG_CHECK(read_some(f, buf, len, off, &got));
  return got < len ? truncated(f, off, len, got, what) : SG_OK;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* The header: dims[0] = n, dims[1..] = the rest. */
static int read_header(idx_file_t *f, uint32_t magic, uint32_t *dims, int ndims) {
  unsigned char h[16];
  SG_CHECK(read_exact(f, h, 4 * (size_t)(ndims + 1), 0, "header"));
  uint32_t m = be32(h);
  if (m != magic)
    return sg_err_set(SG_EFORMAT,
                      "%s: offset 0: bad magic 0x%08x, expected 0x%08x (IDX %s)",
                      f->path, m, magic, magic == IDX_IMAGES ? "images" : "labels");
  for (int i = 0; i < ndims; i++) dims[i] = be32(h + 4 * (i + 1));
  return SG_OK;
}

/* Image header sizes (n, rows, cols) that no IDX image file has. */
static int check_dims(const char *path, const uint32_t *dims) {
  if (dims[1] == 0 || dims[2] == 0 || dims[1] > IDX_MAX_SIDE || dims[2] > IDX_MAX_SIDE)
    return sg_err_set(SG_EFORMAT, "%s: offset 8: implausible image size %ux%u", path,
                      dims[1], dims[2]);
  if (dims[0] == 0) return sg_err_set(SG_EFORMAT, "%s: offset 4: no images", path);
  if ((uint64_t)dims[0] * dims[1] * dims[2] > IDX_MAX_PIXELS)
    return sg_err_set(SG_EFORMAT, "%s: offset 4: implausible image count %u", path, dims[0]);
  return SG_OK;
}

/* Refuse a header whose `body` bytes (after `hdr` header bytes) cannot be
 * in the file, before anything is allocated from it.
 *   plain: the body is exactly the rest of the file.
 *   gzip: the decompressed size is not known in advance.  The trailer's
 *     ISIZE is not used: it is the LAST member's length mod 2^32 (wrong
 *     for concatenated members and for bodies of 4 GiB or more) and a
 *     crafted file states any value.  What holds for every deflate stream
 *     is the GZ_MAX_RATIO bound; it is loose (a 1 MB file may hold 1 GB),
 *     so read_body also allocates only as the data arrives.
 * Only regular files are opened (sg_data_open), so the size is known. */
static int check_room(const idx_file_t *f, size_t hdr, uint64_t body, const char *what) {
  uint64_t have = f->size > hdr ? f->size - hdr : 0;
  if (f->plain && body > have)
    return sg_err_set(SG_EFORMAT,
                      "%s: offset %zu: truncated: expected %llu bytes of %s, got %llu "
                      "(the file is %llu bytes)",
                      f->path, hdr, (unsigned long long)body, what, (unsigned long long)have,
                      (unsigned long long)f->size);
  if (f->plain && body < have)
    return sg_err_set(SG_EFORMAT, "%s: offset %llu: unexpected data after the end (%llu bytes)",
                      f->path, (unsigned long long)(hdr + body),
                      (unsigned long long)(have - body));
  if (!f->plain && f->size <= UINT64_MAX / GZ_MAX_RATIO && hdr + body > f->size * GZ_MAX_RATIO)
    return sg_err_set(SG_EFORMAT,
                      "%s: offset 4: the header declares %llu bytes of %s, more than a "
                      "%llu-byte gzip file can hold (at most %llu)",
                      f->path, (unsigned long long)body, what, (unsigned long long)f->size,
                      (unsigned long long)(f->size * GZ_MAX_RATIO));
  return SG_OK;
}

/* The `len`-byte body at offset `off`.  A plain regular file was checked
 * exactly by check_room and is read in one allocation; otherwise the
 * buffer doubles as data arrives, so memory follows the bytes the stream
 * really holds, never the header alone. */
static int read_body(idx_file_t *f, size_t off, size_t len, const char *what,
                     unsigned char **out) {
  int rc = SG_OK;
  size_t cap = f->plain || len < GZ_FIRST_CHUNK ? len : GZ_FIRST_CHUNK;
  size_t got = 0, k;
  unsigned char *buf = malloc(cap + 1), *nb;
  if (!buf) goto nomem;
  for (;;) {
    SG_TRY(read_some(f, buf + got, cap - got, off + got, &k));
    got += k;
    if (got < cap) {
      rc = truncated(f, off, len, got, what);
      goto fail;
    }
    if (got == len) break;
    cap = cap > len / 2 ? len : 2 * cap;
    if (!(nb = realloc(buf, cap + 1))) goto nomem;
    buf = nb;
  }
  *out = buf;
  return SG_OK;
nomem:
  rc = sg_err_set(SG_ENOMEM, "%s: %zu bytes of %s", f->path, cap, what);
fail:
  free(buf);
  return rc;
}

/* The end of the data, and for gzip of the stream: a stream cut after its
 * last data byte ends without the trailer whose CRC checks the data, and
 * zlib says so only here (Z_BUF_ERROR, "unexpected end of file"). */
static int expect_end(idx_file_t *f, size_t off) {
  unsigned char b;
  int zerr, r = gzread(f->gz, &b, 1);
  if (r > 0)
    return sg_err_set(SG_EFORMAT, "%s: offset %zu: unexpected data after the end", f->path, off);
  gzerror(f->gz, &zerr);
  if (r < 0 || zerr != Z_OK) return corrupt(f, off);
  return SG_OK;
}

/* Open an image file and check its header: dims = n, rows, cols. */
static int open_images(idx_file_t *f, const char *path, uint32_t *dims) {
  SG_CHECK(idx_open(f, path));
  SG_CHECK(read_header(f, IDX_IMAGES, dims, 3));
  SG_CHECK(check_dims(path, dims));
  return check_room(f, 16, (uint64_t)dims[0] * dims[1] * dims[2], "pixels");
}

int sg_idx_find(char *out, size_t cap, const char *dir, const char *base, const char *dataset,
                int dir_given) {
  static const char four[] = "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, "
                             "t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz";
  snprintf(out, cap, "%s/%s.gz", dir, base);
  if (access(out, R_OK) == 0) return SG_OK;
  snprintf(out, cap, "%s/%s", dir, base);
  if (access(out, R_OK) == 0) return SG_OK;
  if (!strcmp(dataset, "fashion-mnist") && !dir_given)
    return sg_err_set(SG_ENOTFOUND, "%s: no %s[.gz]: install Fashion-MNIST with "
                      "'apt-get install dataset-fashion-mnist', or set data_dir to a directory "
                      "holding its four IDX files (%s)", dir, base, four);
  if (!strcmp(dataset, "mnist"))
    return sg_err_set(SG_ENOTFOUND, "%s: no %s[.gz]: MNIST has no Debian package; put its four "
                      "IDX files (%s, from the MNIST distribution, gzip or plain) in %s%s, or "
                      "use dataset: fashion-mnist (packaged: apt-get install "
                      "dataset-fashion-mnist)", dir, base, four, dir,
                      dir_given ? "" : " (or in a directory named by data_dir)");
  return sg_err_set(SG_ENOTFOUND, "%s: no %s[.gz]: data_dir must hold the four IDX files (%s)",
                    dir, base, four);
}

/* The header only; for gzip the pixels are bounded (check_room) but not
 * read, so a short gzip body shows when a rank loads the file. */
int sg_dataset_probe_idx(const char *images, int64_t *n, int64_t *d) {
  idx_file_t f;
  uint32_t dims[3];
  int rc = open_images(&f, images, dims);
  idx_close(&f);
  if (rc < 0) return rc;
  *n = dims[0];
  *d = (int64_t)dims[1] * dims[2];
  return SG_OK;
}

/* The labels of `n` images: checked, then read like the pixels. */
static int read_labels(idx_file_t *f, const char *path, const char *images, size_t n,
                       unsigned char **lab) {
  uint32_t dl[1] = {0};
  SG_CHECK(idx_open(f, path));
  SG_CHECK(read_header(f, IDX_LABELS, dl, 1));
  if (dl[0] != n)
    return sg_err_set(SG_EFORMAT, "%s: offset 4: %u labels, but %s has %zu images", path, dl[0],
                      images, n);
  SG_CHECK(check_room(f, 8, n, "labels"));
  SG_CHECK(read_body(f, 8, n, "labels", lab));
  SG_CHECK(expect_end(f, 8 + n));
  for (size_t i = 0; i < n; i++)
    if ((*lab)[i] >= 10)
      return sg_err_set(SG_EFORMAT, "%s: offset %zu: label %u out of range 0..9", path, 8 + i,
                        (*lab)[i]);
  return SG_OK;
}

/* The first `keep` rows as floats in [0, 1]. */
static int to_dataset(sg_dataset_t **out, const char *images, const unsigned char *pix,
                      const unsigned char *lab, size_t keep, size_t d) {
  sg_dataset_t *ds = sg_dataset_alloc_();
  if (!ds) return SG_ENOMEM;
  ds->n = (int64_t)keep;
  ds->d = (int64_t)d;
  ds->classes = 10;
  ds->x = malloc(keep * d * sizeof(float) + 1);
  ds->y = malloc(keep * sizeof(int32_t) + 1);
  if (!ds->x || !ds->y) {
    sg_dataset_destroy(&ds);
    return sg_err_set(SG_ENOMEM, "%s: %zu floats", images, keep * d);
  }
  for (size_t i = 0; i < keep * d; i++) ds->x[i] = (float)pix[i] / 255.0f;
  for (size_t i = 0; i < keep; i++) ds->y[i] = lab[i];
  *out = ds;
  return SG_OK;
}

int sg_dataset_load_idx(sg_dataset_t **out, const char *images,
                        const char *labels, int64_t limit) {
  int rc = SG_OK;
  idx_file_t fi = {0}, fl = {0};
  unsigned char *pix = NULL, *lab = NULL;
  uint32_t di[3] = {0};

  SG_TRY(open_images(&fi, images, di));
  size_t n = di[0], d = (size_t)di[1] * di[2];
  SG_TRY(read_body(&fi, 16, n * d, "pixels", &pix));
  SG_TRY(expect_end(&fi, 16 + n * d));
  SG_TRY(read_labels(&fl, labels, images, n, &lab));
  size_t keep = (limit > 0 && (size_t)limit < n) ? (size_t)limit : n;
  SG_TRY(to_dataset(out, images, pix, lab, keep, d));
fail:
  idx_close(&fi);
  idx_close(&fl);
  free(pix);
  free(lab);
  return rc;
}
