/* dataset_libsvm.c - LIBSVM text files, loaded as CSR.
 *
 *   <label> <index>:<value> <index>:<value> ...   # comment
 *
 * Indices are 1-based (stored 0-based); a row may list every feature
 * (dense) or only its nonzeros (sparse).  Labels are integers, mapped to
 * 0..classes-1 by a rule (dataset.h: as is, -1/+1, or 1-based) decided
 * from the training file.  Any malformed token is SG_EFORMAT naming
 * file:line.
 * The file must be a regular file (sg_data_open); lines are read with a
 * cap (SG_LIBSVM_MAX_LINE), never whole whatever their length, and the
 * file's bytes with another (SG_LIBSVM_MAX_BYTES); a NUL byte is an
 * error (not a text file).
 * Indices are legitimately large in sparse data, so they are bounded by
 * SG_LIBSVM_MAX_INDEX, not by the file; every allocation here grows with
 * the rows and nonzeros read, none with an index.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  int32_t lo, hi;        /* smallest and largest label read */
  long lo_line, hi_line; /* where each was first seen */
  long odd_line;         /* first label other than -1/+1 (0: none) */
  int32_t odd;
} where_t;

/* Raw labels beyond this are a typo, not a class (classes <= 100000). */
#define RAW_LABEL_MAX 1000000

/* The first word of p, at most 40 characters, for a message. */
static int word_len(const char *p) {
  size_t n = strcspn(p, " \t\r\n");
  return n > 40 ? 40 : (int)n;
}

/* Which labels the file holds, for the label rule. */
static void note_label(where_t *w, int32_t label) {
  if (!w->lo_line || label < w->lo) {
    w->lo = label;
    w->lo_line = w->lineno;
  }
  if (!w->hi_line || label > w->hi) {
    w->hi = label;
    w->hi_line = w->lineno;
  }
  if (!w->odd_line && label != -1 && label != 1) {
    w->odd = label;
    w->odd_line = w->lineno;
  }
}

/* The label at the start of *pp; *pp moves past it. */
static int parse_label(const where_t *w, char **pp, int32_t *label) {
  char *p = *pp, *end;
  errno = 0;
  double lv = strtod(p, &end);
  if (end == p || errno || (*end && !isspace((unsigned char)*end)) || lv != floor(lv))
    return sg_err_set(SG_EFORMAT, "%s:%ld: bad label '%.*s' (expected an integer)", w->path,
                      w->lineno, word_len(p), p);
  if (lv < -1 || lv > RAW_LABEL_MAX)
    return sg_err_set(SG_EFORMAT, "%s:%ld: label %.0f out of range -1..%d", w->path, w->lineno,
                      lv, RAW_LABEL_MAX);
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

/* The next line of f into *line (NUL-terminated, newline kept): 1, or 0
 * at the end of the file.  At most SG_LIBSVM_MAX_LINE bytes are held: a
 * longer line is an error at its number without reading the rest of it;
 * a NUL byte is an error; *total counts the bytes against
 * SG_LIBSVM_MAX_BYTES. */
static int read_line(const where_t *w, FILE *f, char **line, size_t *cap, uint64_t *total) {
  size_t len = 0;
  int c = EOF;
  while ((c = getc_unlocked(f)) != EOF) {
    if (len == *cap) { /* *cap bytes and the terminator */
      if (*cap >= SG_LIBSVM_MAX_LINE)
        return sg_err_set(SG_EFORMAT, "%s:%ld: line longer than %zu bytes (the LIBSVM line cap)",
                          w->path, w->lineno + 1, SG_LIBSVM_MAX_LINE);
      size_t nc = *cap ? 2 * *cap : 4096;
      if (nc > SG_LIBSVM_MAX_LINE) nc = SG_LIBSVM_MAX_LINE;
      char *nl = realloc(*line, nc + 1);
      if (!nl) return sg_err_set(SG_ENOMEM, "%s:%ld: %zu bytes", w->path, w->lineno + 1, nc);
      *line = nl;
      *cap = nc;
    }
    if (c == 0)
      return sg_err_set(SG_EFORMAT, "%s:%ld: a NUL byte (not a LIBSVM text file)", w->path,
                        w->lineno + 1);
    (*line)[len++] = (char)c;
    if (c == '\n') break;
  }
  if (len == 0) return 0;
  (*line)[len] = '\0';
  if ((*total += len) > SG_LIBSVM_MAX_BYTES)
    return sg_err_set(SG_EFORMAT, "%s:%ld: more than %" PRIu64 " bytes (the LIBSVM file cap)",
                      w->path, w->lineno + 1, SG_LIBSVM_MAX_BYTES);
  return 1;
}

/* Every row of f (at most `limit` when > 0) into b. */
static int parse_file(where_t *w, FILE *f, int64_t limit, csr_builder_t *b, int64_t *maxidx,
                      int64_t *maxrow) {
  int rc = SG_OK, got;
  char *line = NULL;
  size_t linecap = 0;
  uint64_t total = 0;
  while ((got = read_line(w, f, &line, &linecap, &total)) > 0) {
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
    note_label(w, label);
    SG_TRY(parse_pairs(w, p, b, maxidx));
    if ((int64_t)(b->nnz - row_start) > *maxrow) *maxrow = (int64_t)(b->nnz - row_start);
    SG_TRY(add_row(b, label));
  }
  if (got < 0) rc = got;
  else if (ferror(f)) rc = sg_err_set(SG_EIO, "%s:%ld: read error", w->path, w->lineno);
fail:
  free(line);
  return rc;
}

/* The rule the training file's labels ask for (dataset.h). */
static int decide_rule(const where_t *w) {
  if (!w->odd_line && w->lo == -1) return SG_LABELS_PM1;
  if (w->lo == 1) return SG_LABELS_ONE_BASED;
  return SG_LABELS_AS_IS;
}

/* "label L out of range R (labels: RULE)" at line `at`. */
static int label_error(const where_t *w, const sg_libsvm_labels_t *lab, long at, int32_t label) {
  char want[64];
  int off = lab->rule == SG_LABELS_ONE_BASED;
  if (lab->rule == SG_LABELS_PM1) snprintf(want, sizeof want, "-1/+1");
  else if (lab->classes > 0) snprintf(want, sizeof want, "%d..%d", off, lab->classes - 1 + off);
  else snprintf(want, sizeof want, "%d..", off);
  return sg_err_set(SG_EFORMAT, "%s:%ld: label %d out of range %s (labels: %s)", w->path, at,
                    label, want, sg_libsvm_rule_name(lab->rule));
}

/* Map ds->y by lab->rule and check it against lab->classes (0: infer). */
static int map_labels(const where_t *w, sg_dataset_t *ds, sg_libsvm_labels_t *lab) {
  if (lab->rule == SG_LABELS_DECIDE) lab->rule = decide_rule(w);
  int pm1 = lab->rule == SG_LABELS_PM1, off = lab->rule == SG_LABELS_ONE_BASED;
  if (pm1 && w->odd_line) return label_error(w, lab, w->odd_line, w->odd);
  if (!pm1 && w->lo - off < 0) return label_error(w, lab, w->lo_line, w->lo);
  int32_t hi = pm1 ? (w->hi + 1) / 2 : w->hi - off;
  if (lab->classes > 0 && hi >= lab->classes) return label_error(w, lab, w->hi_line, w->hi);
  if (lab->classes == 0 && hi < 1)
    return sg_err_set(SG_EFORMAT, "%s: every label is %d: classes cannot be inferred (set "
                      "classes)", w->path, w->lo);
  if (lab->classes == 0) lab->classes = hi + 1;
  for (int64_t i = 0; i < ds->n; i++) ds->y[i] = pm1 ? (ds->y[i] + 1) / 2 : ds->y[i] - off;
  ds->classes = lab->classes;
  return SG_OK;
}

const char *sg_libsvm_rule_name(int rule) {
  switch (rule) {
  case SG_LABELS_AS_IS: return "0..C-1 as is";
  case SG_LABELS_PM1: return "-1/+1 mapped to 0/1";
  case SG_LABELS_ONE_BASED: return "1..C mapped to 0..C-1";
  }
  return "decided from the file";
}

int sg_dataset_load_libsvm(sg_dataset_t **out, const char *path,
                           int64_t features, int classes, int64_t limit) {
  sg_libsvm_labels_t lab = {SG_LABELS_AS_IS, classes};
  return sg_dataset_load_libsvm_labels(out, path, features, &lab, limit);
}

int sg_dataset_load_libsvm_labels(sg_dataset_t **out, const char *path, int64_t features,
                                  sg_libsvm_labels_t *lab, int64_t limit) {
  int rc = SG_OK;
  FILE *f;
  where_t w = {.path = path, .features = features};
  int64_t maxidx = 0, maxrow = 0;
  csr_builder_t b = {0};
  sg_dataset_t *ds = NULL;
  if (features > SG_LIBSVM_MAX_INDEX)
    return sg_err_set(SG_ERANGE, "%s: features %lld above the maximum %lld", path,
                      (long long)features, SG_LIBSVM_MAX_INDEX);
  uint64_t size = 0;
  int fd = sg_data_open(path, &size); /* regular files only: no FIFO, no /dev/zero */
  if (fd < 0) return fd;
  if (size > SG_LIBSVM_MAX_BYTES) {
    close(fd);
    return sg_err_set(SG_EFORMAT, "%s: %" PRIu64 " bytes, more than %" PRIu64
                      " (the LIBSVM file cap)", path, size, SG_LIBSVM_MAX_BYTES);
  }
  if (!(f = fdopen(fd, "r"))) {
    close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
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
  SG_TRY(map_labels(&w, ds, lab));
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
