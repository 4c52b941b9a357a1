/* dataset_libsvm.c - LIBSVM text files, loaded as CSR.
 *
 *   <label> <index>:<value> <index>:<value> ...   # comment
 *
 * Indices are 1-based (stored 0-based); a row may list every feature
 * (dense) or only its nonzeros (sparse).  Labels are integers
 * 0..classes-1.  Any malformed token is SG_EFORMAT naming file:line.
 * Indices are legitimately large in sparse data, so they are bounded by
 * SG_LIBSVM_MAX_INDEX, not by the file; every allocation here grows with
 * the rows and nonzeros read, none with an index.
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

/* Where a message points: the file, the line, what the caller asked. */
typedef struct {
  const char *path;
  long lineno;
  int64_t features;
  int classes;
} where_t;

/* The first word of p, at most 40 characters, for a message. */
static int word_len(const char *p) {
  size_t n = strcspn(p, " \t\r\n");
  return n > 40 ? 40 : (int)n;
}

/* The label at the start of *pp; *pp moves past it. */
static int parse_label(const where_t *w, char **pp, int32_t *label) {
  char *p = *pp, *end;
  errno = 0;
  double lv = strtod(p, &end);
  if (end == p || errno || (*end && !isspace((unsigned char)*end)) || lv != floor(lv))
    return sg_err_set(SG_EFORMAT, "%s:%ld: bad label '%.*s' (expected an integer 0..%d)",
                      w->path, w->lineno, word_len(p), p, w->classes - 1);
  if (lv < 0 || lv >= w->classes)
    return sg_err_set(SG_EFORMAT, "%s:%ld: label %.0f out of range 0..%d", w->path, w->lineno,
                      lv, w->classes - 1);
  *label = (int32_t)lv;
  *pp = end;
  return SG_OK;
}

/* One "index:value" token at *pp (1-based index, finite value). */
static int parse_pair(const where_t *w, char **pp, int64_t *idx, float *v) {
  char *p = *pp, *end;
  errno = 0;
  long long i = strtoll(p, &end, 10);
  if (end == p || *end != ':' || errno) goto bad;
  char *vs = end + 1;
  errno = 0;
  *v = strtof(vs, &end);
  if (end == vs || errno == EINVAL || (*end && !isspace((unsigned char)*end)) || !isfinite(*v))
    goto bad;
  if (i < 1 || i > SG_LIBSVM_MAX_INDEX)
    return sg_err_set(SG_EFORMAT, "%s:%ld: feature index %lld out of range 1..%lld", w->path,
                      w->lineno, i, SG_LIBSVM_MAX_INDEX);
  if (w->features > 0 && i > w->features)
    return sg_err_set(SG_EFORMAT, "%s:%ld: feature index %lld > features %lld", w->path,
                      w->lineno, i, (long long)w->features);
  *idx = i;
  *pp = end;
  return SG_OK;
bad:
  return sg_err_set(SG_EFORMAT, "%s:%ld: malformed token '%.*s' (expected index:value)", w->path,
                    w->lineno, word_len(p), p);
}

/* The tokens after a row's label; nonzeros go to b. */
static int parse_pairs(const where_t *w, char *p, csr_builder_t *b, int64_t *maxidx) {
  for (;;) {
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return SG_OK;
    int64_t idx = 0;
    float v = 0;
    SG_CHECK(parse_pair(w, &p, &idx, &v));
    if (idx > *maxidx) *maxidx = idx;
    if (v == 0.0f) continue; /* dense rows list zeros; CSR keeps nonzeros */
    SG_CHECK(grow((void **)&b->col, &b->ccap, b->nnz + 1, sizeof *b->col));
    SG_CHECK(grow((void **)&b->val, &b->vcap, b->nnz + 1, sizeof *b->val));
    b->col[b->nnz] = (uint32_t)(idx - 1);
    b->val[b->nnz] = v;
    b->nnz++;
  }
}

/* Every row of f (at most `limit` when > 0) into b. */
static int parse_file(where_t *w, FILE *f, int64_t limit, csr_builder_t *b, int64_t *maxidx,
                      int64_t *maxrow) {
  int rc = SG_OK;
  char *line = NULL;
  size_t linecap = 0;
  while (getline(&line, &linecap, f) >= 0) {
    w->lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    char *p = line;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) continue;
    if (limit > 0 && (int64_t)b->rows >= limit) break;
    int32_t label = 0;
    size_t row_start = b->nnz;
    SG_TRY(parse_label(w, &p, &label));
    SG_TRY(parse_pairs(w, p, b, maxidx));
    if ((int64_t)(b->nnz - row_start) > *maxrow) *maxrow = (int64_t)(b->nnz - row_start);
    SG_TRY(add_row(b, label));
  }
  if (ferror(f)) rc = sg_err_set(SG_EIO, "%s:%ld: read error", w->path, w->lineno);
fail:
  free(line);
  return rc;
}

int sg_dataset_load_libsvm(sg_dataset_t **out, const char *path,
                           int64_t features, int classes, int64_t limit) {
  int rc = SG_OK;
  FILE *f;
  where_t w = {path, 0, features, classes};
  int64_t maxidx = 0, maxrow = 0;
  csr_builder_t b = {0};
  sg_dataset_t *ds = NULL;
  if (features > SG_LIBSVM_MAX_INDEX)
    return sg_err_set(SG_ERANGE, "%s: features %lld above the maximum %lld", path,
                      (long long)features, SG_LIBSVM_MAX_INDEX);
  if (!(f = fopen(path, "r"))) return sg_err_set(SG_EIO, "%s: cannot open", path);
  SG_TRY(grow((void **)&b.rowptr, &b.pcap, 2, sizeof *b.rowptr));
  b.rowptr[0] = 0;
  SG_TRY(parse_file(&w, f, limit, &b, &maxidx, &maxrow));
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
  free(b.rowptr);
  free(b.col);
  free(b.val);
  free(b.y);
  sg_dataset_destroy(&ds);
  return rc;
}
