/* dataset_idx.c - IDX files (MNIST, Fashion-MNIST), gzip or plain.
 *
 * Format (big-endian): magic 0x00000803, n, rows, cols, then n*rows*cols
 * pixel bytes (images); magic 0x00000801, n, then n label bytes (labels).
 * zlib's gzread reads plain files transparently.  Offsets in messages are
 * byte offsets in the uncompressed stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "dataset.h"
#include "err.h"

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

/* Read exactly `len` bytes at uncompressed offset `off`; a short read is
 * SG_EFORMAT "path: offset off: truncated: expected len bytes of what, got k". */
static int read_exact(gzFile f, const char *path, void *buf, size_t len,
                      size_t off, const char *what) {
  size_t got = 0;
  unsigned char *p = buf;
  while (got < len) {
    size_t chunk = len - got > (1u << 30) ? (1u << 30) : len - got;
    int r = gzread(f, p + got, (unsigned)chunk);
    if (r < 0) {
      int zerr;
      const char *m = gzerror(f, &zerr);
      return sg_err_set(SG_EFORMAT, "%s: offset %zu: corrupt data (%s)", path,
                        off + got, m ? m : "read error");
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  if (got < len) {
    /* a gzip stream cut short reports its error only now */
    int zerr;
    const char *m = gzerror(f, &zerr);
    if (zerr != Z_OK && zerr != Z_BUF_ERROR)
      return sg_err_set(SG_EFORMAT, "%s: offset %zu: corrupt data (%s)", path,
                        off + got, m ? m : "read error");
    return sg_err_set(SG_EFORMAT,
                      "%s: offset %zu: truncated: expected %zu bytes of %s, got %zu",
                      path, off, len, what, got);
  }
  return SG_OK;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static int open_gz(gzFile *f, const char *path) {
  *f = gzopen(path, "rb");
  if (!*f) return sg_err_set(SG_EIO, "%s: cannot open", path);
  gzbuffer(*f, 1 << 20);
  return SG_OK;
}

/* The header: dims[0] = n, dims[1..] = the rest. */
static int read_header(gzFile f, const char *path, uint32_t magic,
                       uint32_t *dims, int ndims) {
  unsigned char h[16];
  SG_CHECK(read_exact(f, path, h, 4 * (size_t)(ndims + 1), 0, "header"));
  uint32_t m = be32(h);
  if (m != magic)
    return sg_err_set(SG_EFORMAT,
                      "%s: offset 0: bad magic 0x%08x, expected 0x%08x (IDX %s)",
                      path, m, magic, magic == IDX_IMAGES ? "images" : "labels");
  for (int i = 0; i < ndims; i++) dims[i] = be32(h + 4 * (i + 1));
  return SG_OK;
}

static int expect_end(gzFile f, const char *path, size_t off) {
  unsigned char b;
  int r = gzread(f, &b, 1);
  if (r > 0)
    return sg_err_set(SG_EFORMAT, "%s: offset %zu: unexpected data after the end",
                      path, off);
  if (r < 0) {
    int zerr;
    const char *m = gzerror(f, &zerr);
    return sg_err_set(SG_EFORMAT, "%s: offset %zu: corrupt data (%s)", path, off,
                      m ? m : "read error");
  }
  return SG_OK;
}

int sg_dataset_probe_idx(const char *images, int64_t *n, int64_t *d) {
  gzFile f;
  uint32_t dims[3];
  SG_CHECK(open_gz(&f, images));
  int rc = read_header(f, images, IDX_IMAGES, dims, 3);
  gzclose(f);
  if (rc < 0) return rc;
  *n = dims[0];
  *d = (int64_t)dims[1] * dims[2];
  return SG_OK;
}

int sg_dataset_load_idx(sg_dataset_t **out, const char *images,
                        const char *labels, int64_t limit) {
  int rc = SG_OK;
  gzFile fi = NULL, fl = NULL;
  unsigned char *pix = NULL, *lab = NULL;
  sg_dataset_t *ds = NULL;
  uint32_t di[3] = {0}, dl[1] = {0};

  SG_TRY(open_gz(&fi, images));
  SG_TRY(read_header(fi, images, IDX_IMAGES, di, 3));
  if (di[1] == 0 || di[2] == 0 || di[1] > 4096 || di[2] > 4096) {
    rc = sg_err_set(SG_EFORMAT, "%s: offset 8: implausible image size %ux%u",
                    images, di[1], di[2]);
    goto fail;
  }
  size_t n = di[0], d = (size_t)di[1] * di[2];
  if (n > ((size_t)1 << 40) / d) {
    rc = sg_err_set(SG_EFORMAT, "%s: offset 4: implausible image count %zu",
                    images, n);
    goto fail;
  }
  pix = malloc(n * d + 1);
  if (!pix) {
    rc = sg_err_set(SG_ENOMEM, "%s: %zu bytes of pixels", images, n * d);
    goto fail;
  }
  SG_TRY(read_exact(fi, images, pix, n * d, 16, "pixels"));
  SG_TRY(expect_end(fi, images, 16 + n * d));

  SG_TRY(open_gz(&fl, labels));
  SG_TRY(read_header(fl, labels, IDX_LABELS, dl, 1));
  if (dl[0] != di[0]) {
    rc = sg_err_set(SG_EFORMAT, "%s: offset 4: %u labels, but %s has %u images",
                    labels, dl[0], images, di[0]);
    goto fail;
  }
  lab = malloc(n + 1);
  if (!lab) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(read_exact(fl, labels, lab, n, 8, "labels"));
  SG_TRY(expect_end(fl, labels, 8 + n));
  for (size_t i = 0; i < n; i++)
    if (lab[i] >= 10) {
      rc = sg_err_set(SG_EFORMAT, "%s: offset %zu: label %u out of range 0..9",
                      labels, 8 + i, lab[i]);
      goto fail;
    }

  size_t keep = (limit > 0 && (size_t)limit < n) ? (size_t)limit : n;
  ds = sg_dataset_alloc_();
  if (!ds) {
    rc = SG_ENOMEM;
    goto fail;
  }
  ds->n = (int64_t)keep;
  ds->d = (int64_t)d;
  ds->classes = 10;
  ds->x = malloc(keep * d * sizeof(float) + 1);
  ds->y = malloc(keep * sizeof(int32_t) + 1);
  if (!ds->x || !ds->y) {
    rc = sg_err_set(SG_ENOMEM, "%s: %zu floats", images, keep * d);
    goto fail;
  }
  for (size_t i = 0; i < keep * d; i++) ds->x[i] = (float)pix[i] / 255.0f;
  for (size_t i = 0; i < keep; i++) ds->y[i] = lab[i];
  *out = ds;
  ds = NULL;
fail:
  if (fi) gzclose(fi);
  if (fl) gzclose(fl);
  free(pix);
  free(lab);
  sg_dataset_destroy(&ds);
  return rc;
}
