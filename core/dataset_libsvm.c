/* dataset_libsvm.c - LIBSVM text files, loaded as CSR.
 *
 *   <label> <index>:<value> <index>:<value> ...   # comment
 *
 * Indices are 1-based (stored 0-based); a row may list every feature
 * (dense) or only its nonzeros (sparse).  Labels are integers
 * 0..classes-1.  Any malformed token is SG_EFORMAT naming file:line.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "err.h"

typedef struct {
  int64_t *rowptr;
  uint32_t *col;
  float *val;
  int32_t *y;
  size_t rows, nnz;
  size_t pcap, ycap, ccap, vcap; /* capacities of rowptr, y, col, val */
} csr_builder_t;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return SG_OK;
  size_t c = *cap ? *cap : 1024;
  while (c < need) c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q) return SG_ENOMEM;
  *p = q;
  *cap = c;
  return SG_OK;
}

static int add_row(csr_builder_t *b, int32_t label) {
  SG_CHECK(grow((void **)&b->y, &b->ycap, b->rows + 1, sizeof *b->y));
  SG_CHECK(grow((void **)&b->rowptr, &b->pcap, b->rows + 2, sizeof *b->rowptr));
  b->y[b->rows] = label;
  b->rows++;
  b->rowptr[b->rows] = (int64_t)b->nnz;
  return SG_OK;
}

int sg_dataset_load_libsvm(sg_dataset_t **out, const char *path,
                           int64_t features, int classes, int64_t limit) {
  int rc = SG_OK;
  FILE *f = fopen(path, "r");
  char *line = NULL;
  size_t linecap = 0;
  long lineno = 0;
  int64_t maxidx = 0, maxrow = 0;
  csr_builder_t b = {0};
  sg_dataset_t *ds = NULL;
  if (!f) return sg_err_set(SG_EIO, "%s: cannot open", path);
  SG_TRY(grow((void **)&b.rowptr, &b.pcap, 2, sizeof *b.rowptr));
  b.rowptr[0] = 0;

  while (getline(&line, &linecap, f) >= 0) {
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) continue;
    if (limit > 0 && (int64_t)b.rows >= limit) break;

    char *end;
    errno = 0;
    double lv = strtod(p, &end);
    if (end == p || errno || (*end && !isspace((unsigned char)*end)) ||
        lv != floor(lv)) {
      int len = (int)strcspn(p, " \t\r\n");
      rc = sg_err_set(SG_EFORMAT, "%s:%ld: bad label '%.*s' (expected an integer 0..%d)",
                      path, lineno, len, p, classes - 1);
      goto fail;
    }
    if (lv < 0 || lv >= classes) {
      rc = sg_err_set(SG_EFORMAT, "%s:%ld: label %.0f out of range 0..%d", path,
                      lineno, lv, classes - 1);
      goto fail;
    }
    p = end;
    size_t row_start = b.nnz;
    for (;;) {
      while (isspace((unsigned char)*p)) p++;
      if (!*p) break;
      char *tok = p;
      errno = 0;
      long long idx = strtoll(p, &end, 10);
      if (end == p || *end != ':' || errno) goto bad_token;
      p = end + 1;
      errno = 0;
      float v = strtof(p, &end);
      if (end == p || errno == EINVAL || (*end && !isspace((unsigned char)*end)) ||
          !isfinite(v))
        goto bad_token;
      p = end;
      if (idx < 1 || idx > 4294967295LL) {
        rc = sg_err_set(SG_EFORMAT, "%s:%ld: feature index %lld out of range (indices are 1-based)",
                        path, lineno, idx);
        goto fail;
      }
      if (features > 0 && idx > features) {
        rc = sg_err_set(SG_EFORMAT, "%s:%ld: feature index %lld > features %lld",
                        path, lineno, idx, (long long)features);
        goto fail;
      }
      if (idx > maxidx) maxidx = idx;
      if (v == 0.0f) continue; /* dense rows list zeros; CSR keeps nonzeros */
      SG_TRY(grow((void **)&b.col, &b.ccap, b.nnz + 1, sizeof *b.col));
      SG_TRY(grow((void **)&b.val, &b.vcap, b.nnz + 1, sizeof *b.val));
      b.col[b.nnz] = (uint32_t)(idx - 1);
      b.val[b.nnz] = v;
      b.nnz++;
      continue;
    bad_token:;
      int len = (int)strcspn(tok, " \t\r\n");
      rc = sg_err_set(SG_EFORMAT, "%s:%ld: malformed token '%.*s' (expected index:value)",
                      path, lineno, len, tok);
      goto fail;
    }
    if ((int64_t)(b.nnz - row_start) > maxrow) maxrow = (int64_t)(b.nnz - row_start);
    SG_TRY(add_row(&b, (int32_t)lv));
  }
  if (ferror(f)) {
    rc = sg_err_set(SG_EIO, "%s:%ld: read error", path, lineno);
    goto fail;
  }
  if (b.rows == 0) {
    rc = sg_err_set(SG_EFORMAT, "%s: no rows", path);
    goto fail;
  }
  ds = sg_dataset_alloc_();
  if (!ds) {
    rc = SG_ENOMEM;
    goto fail;
  }
  ds->n = (int64_t)b.rows;
  ds->d = features > 0 ? features : maxidx;
  ds->classes = classes;
  ds->rowptr = b.rowptr;
  ds->col = b.col ? b.col : malloc(sizeof *b.col);
  ds->val = b.val ? b.val : malloc(sizeof *b.val);
  ds->y = b.y;
  ds->max_row_nnz = maxrow;
  b = (csr_builder_t){0};
  if (!ds->col || !ds->val) {
    rc = SG_ENOMEM;
    goto fail;
  }
  *out = ds;
  ds = NULL;
fail:
  fclose(f);
  free(line);
  free(b.rowptr);
  free(b.col);
  free(b.val);
  free(b.y);
  sg_dataset_destroy(&ds);
  return rc;
}
