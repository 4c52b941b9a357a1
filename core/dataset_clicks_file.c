/* dataset_clicks_file.c - click logs from LIBSVM or CSV text (see
 * dataset_clicks.h for the two formats).
 *
 * The file is untrusted: it must be a regular file (sg_data_open), its
 * size is checked before a byte is read (SG_LIBSVM_MAX_BYTES), a line is
 * held up to SG_CLICKS_MAX_LINE bytes and never read past that, and
 * every byte of a row is checked against the format; the first one that
 * does not fit is the error, at its line and column.  Memory follows the
 * rows (F keys each), never a value read from the file: a first pass
 * counts the lines that hold a row, the memory they need (8 F + 12 bytes
 * a row: keys, values, offsets, label) is checked against what the
 * machine has available before anything is allocated, and the second
 * pass fills arrays of exactly that size.  A CSV row of F empty tokens
 * is F + 2 bytes of text and 8 F + 12 in memory, so without the check a
 * file far below SG_LIBSVM_MAX_BYTES could take all of the machine's
 * memory in the harness's check of the experiment, before its memory
 * estimate ever ran.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "dataset_clicks.h"
#include "err.h"

typedef struct {
  const char *path;
  long line;
  int format, F;
  uint32_t *col;
  int32_t *y;
  size_t rows, cap;
  uint32_t maxkey;
} clk_t;

int sg_clicks_format(const char *name) {
  if (!strcmp(name, "libsvm")) return SG_CLICKS_LIBSVM;
  if (!strcmp(name, "csv")) return SG_CLICKS_CSV;
  return -1;
}

/* "path:line:col: what 'the next few bytes'" */
static int bad(const clk_t *c, const char *line, const char *at, const char *what) {
  int n = 0;
  while (n < 24 && at[n] && at[n] != '\n' && at[n] != '\r') n++;
  char shown[100];
  int k = 0;
  for (int i = 0; i < n; i++) /* printable ASCII only, the rest as '?' */
    shown[k++] = at[i] >= 0x20 && at[i] < 0x7f && at[i] != '\'' ? at[i] : '?';
  shown[k] = '\0';
  return sg_err_set(SG_EFORMAT, "%s:%ld:%ld: %s%s%s%s", c->path, c->line, (long)(at - line) + 1,
                    what, n ? " at '" : "", shown, n ? "'" : "");
}

/* Room for one more row: the first pass counted them, so a row beyond
 * that count means the file changed between the passes. */
static int clk_grow(clk_t *c) {
  if (c->rows < c->cap) return SG_OK;
  return sg_err_set(SG_EFORMAT, "%s:%ld:1: more rows than the file held when its rows were "
                    "counted (%zu): it changed while read", c->path, c->line, c->cap);
}

/* A decimal integer in [lo, hi] at *pp, no sign but an optional leading
 * '-' or '+' when lo < 0; *pp moves past it.  -1: none there. */
static int dec(const char **pp, int64_t lo, int64_t hi, int64_t *out) {
  const char *p = *pp;
  int neg = 0;
  if (lo < 0 && (*p == '-' || *p == '+')) neg = *p++ == '-';
  if (*p < '0' || *p > '9') return -1;
  int64_t v = 0;
  for (; *p >= '0' && *p <= '9'; p++) {
    v = v * 10 + (*p - '0');
    if (v > hi + 1) return -1; /* beyond any accepted value: stop before overflow */
  }
  v = neg ? -v : v;
  if (v < lo || v > hi) return -1;
  *pp = p;
  *out = v;
  return 0;
}

static int is_end(char ch) { return ch == '\0' || ch == '\n' || ch == '\r' || ch == '#'; }

/* The rest of a row after its fields: spaces, then the end (or a comment). */
static int row_end(const clk_t *c, const char *line, const char *p, int spaces) {
  while (spaces && (*p == ' ' || *p == '\t')) p++;
  if (*p == '\r' && p[1] != '\n' && p[1] != '\0') return bad(c, line, p, "stray carriage return");
  if (!is_end(*p)) return bad(c, line, p, c->format == SG_CLICKS_CSV
                                                ? "more fields than the model's"
                                                : "more key:value pairs than the model's fields");
  return SG_OK;
}

/* "label key:value ..." with exactly F pairs into keys. */
static int row_libsvm(clk_t *c, const char *line, const char *p, uint32_t *keys, int32_t *y) {
  int64_t v;
  const char *at = p;
  if (dec(&p, -1, 1, &v) < 0 || (*p != ' ' && *p != '\t'))
    return bad(c, line, at, "bad label (expected 0, 1, -1 or +1, then a space)");
  *y = v > 0;
  for (int f = 0; f < c->F; f++) {
    while (*p == ' ' || *p == '\t') p++;
    if (is_end(*p)) return bad(c, line, p, "fewer key:value pairs than the model's fields");
    at = p;
    if (dec(&p, 0, UINT32_MAX, &v) < 0 || *p != ':')
      return bad(c, line, at, "bad key (expected an integer 0..4294967295, then ':')");
    keys[f] = (uint32_t)v;
    const char *vs = ++p;
    char *end;
    errno = 0;
    double x = strtod(vs, &end);
    if (end == vs || *vs == ' ' || *vs == '\t' || *vs == '\n' || *vs == '\r' || !isfinite(x) ||
        (*end != ' ' && *end != '\t' && !is_end(*end)))
      return bad(c, line, vs, "bad value (expected a finite number)");
    p = end;
  }
  return row_end(c, line, p, 1);
}

/* A CSV token's key: FNV-1a of its bytes, 32 bits. */
static int tok_ok(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == ':' || ch == '-';
}

/* "label,tok,...,tok" with exactly F tokens into keys. */
static int row_csv(clk_t *c, const char *line, const char *p, uint32_t *keys, int32_t *y) {
  int64_t v;
  const char *at = p;
  if (dec(&p, 0, 1, &v) < 0 || *p != ',')
    return bad(c, line, at, "bad label (expected 0 or 1, then ',')");
  *y = (int32_t)v;
  for (int f = 0; f < c->F; f++) {
    if (*p != ',') return bad(c, line, p, "fewer fields than the model's");
    at = ++p;
    uint32_t h = 2166136261u;
    for (; tok_ok(*p); p++) h = (h ^ (uint8_t)*p) * 16777619u;
    if (p - at > 64) return bad(c, line, at, "token longer than 64 bytes");
    if (*p != ',' && !is_end(*p)) return bad(c, line, p, "byte not allowed in a token");
    keys[f] = h;
  }
  return row_end(c, line, p, 0);
}

/* One line (NUL-terminated): a row, or nothing (blank, comment). */
static int clk_line(clk_t *c, const char *line) {
  const char *p = line;
  while (*p == ' ' || *p == '\t') p++;
  if (is_end(*p) && (*p != '\r' || p[1] == '\n' || !p[1])) return SG_OK;
  SG_CHECK(clk_grow(c));
  uint32_t *keys = c->col + c->rows * (size_t)c->F;
  int32_t *y = c->y + c->rows;
  SG_CHECK(c->format == SG_CLICKS_CSV ? row_csv(c, line, p, keys, y)
                                      : row_libsvm(c, line, p, keys, y));
  for (int f = 0; f < c->F; f++)
    if (keys[f] > c->maxkey) c->maxkey = keys[f];
  c->rows++;
  return SG_OK;
}

/* Lines of f into c (at most `limit` rows when > 0). */
static int clk_read(clk_t *c, FILE *f, int64_t limit) {
  char *line = malloc(SG_CLICKS_MAX_LINE + 1);
  if (!line) return SG_ENOMEM;
  int rc = SG_OK, ch = 0;
  uint64_t total = 0;
  while (rc == SG_OK && ch != EOF && (limit <= 0 || (int64_t)c->rows < limit)) {
    size_t len = 0;
    c->line++;
    while ((ch = getc_unlocked(f)) != EOF) {
      if (ch == 0) {
        line[len] = '\0';
        rc = bad(c, line, line + len, "a NUL byte (not a text file)");
        break;
      }
      if (len == SG_CLICKS_MAX_LINE) {
        line[len] = '\0';
        rc = sg_err_set(SG_EFORMAT, "%s:%ld:%zu: line longer than %zu bytes", c->path, c->line,
                        len + 1, SG_CLICKS_MAX_LINE);
        break;
      }
      line[len++] = (char)ch;
      if (ch == '\n') break;
    }
    line[len] = '\0';
    if (rc == SG_OK && (total += len) > SG_LIBSVM_MAX_BYTES)
      rc = sg_err_set(SG_EFORMAT, "%s:%ld:1: more than %" PRIu64 " bytes", c->path, c->line,
                      SG_LIBSVM_MAX_BYTES);
    if (rc == SG_OK && len) rc = clk_line(c, line);
  }
  if (rc == SG_OK && ferror(f)) rc = sg_err_set(SG_EIO, "%s:%ld: read error", c->path, c->line);
  free(line);
  return rc;
}

/* Lines of f that hold a row (their first byte after blanks is not the
 * end of the line or a comment), at most `limit` when > 0; f rewound. */
static int clk_count(const clk_t *c, FILE *f, int64_t limit, size_t *rows) {
  int ch, start = 1;
  *rows = 0;
  while ((ch = getc_unlocked(f)) != EOF && (limit <= 0 || (int64_t)*rows < limit)) {
    if (ch == '\n') start = 1;
    else if (start && ch != ' ' && ch != '\t') {
      start = 0;
      if (ch == '\r') { /* CRLF ends a blank line; a lone CR is a row's (bad) byte */
        int next = getc_unlocked(f);
        if (next == '\n' || next == EOF) start = 1;
        else *rows += 1;
        if (next != EOF) ungetc(next, f);
      } else {
        *rows += ch != '#';
      }
    }
  }
  if (ferror(f) || fseeko(f, 0, SEEK_SET) != 0)
    return sg_err_set(SG_EIO, "%s: read error", c->path);
  return SG_OK;
}

/* The counted rows' arrays, once their bytes are known to fit in the
 * memory this process may have (sg_data_mem_available). */
static int clk_alloc(clk_t *c, FILE *f, int64_t limit) {
  size_t rows;
  SG_CHECK(clk_count(c, f, limit, &rows));
  double need = (double)rows * (8.0 * c->F + 12.0), have = sg_data_mem_available();
  if (have > 0 && need > have)
    return sg_err_set(SG_EFORMAT, "%s: %zu rows of %d fields need %.1f MiB in memory, more "
                      "than the %.1f MiB available to this process", c->path, rows, c->F,
                      need / 1048576.0, have / 1048576.0);
  c->cap = rows ? rows : 1;
  c->col = malloc(c->cap * (size_t)c->F * sizeof *c->col);
  c->y = malloc(c->cap * sizeof *c->y);
  if (!c->col || !c->y) return sg_err_set(SG_ENOMEM, "%s: %zu rows", c->path, c->cap);
  return SG_OK;
}

/* The rows read, as a CSR dataset. */
static int clk_dataset(clk_t *c, sg_dataset_t **out) {
  sg_dataset_t *ds = sg_dataset_alloc_();
  if (!ds) return SG_ENOMEM;
  size_t cells = c->rows * (size_t)c->F;
  ds->n = (int64_t)c->rows;
  ds->d = (int64_t)c->maxkey + 1;
  ds->classes = 2;
  ds->max_row_nnz = c->F;
  ds->col = c->col, ds->y = c->y;
  c->col = NULL, c->y = NULL;
  ds->rowptr = malloc((c->rows + 1) * sizeof *ds->rowptr);
  ds->val = malloc(cells * sizeof *ds->val);
  if (!ds->rowptr || !ds->val) {
    sg_dataset_destroy(&ds);
    return sg_err_set(SG_ENOMEM, "%s: %zu rows", c->path, c->rows);
  }
  for (size_t i = 0; i <= c->rows; i++) ds->rowptr[i] = (int64_t)(i * (size_t)c->F);
  for (size_t j = 0; j < cells; j++) ds->val[j] = 1.0f;
  *out = ds;
  return SG_OK;
}

int sg_dataset_load_clicks(sg_dataset_t **out, const char *path, int format, int F,
                           int64_t limit) {
  if (F < 1 || F > 256 || (format != SG_CLICKS_LIBSVM && format != SG_CLICKS_CSV))
    return sg_err_set(SG_EINVAL, "%s: %d fields, format %d", path, F, format);
  uint64_t size = 0;
  int fd = sg_data_open(path, &size);
  if (fd < 0) return fd;
  if (size > SG_LIBSVM_MAX_BYTES) {
    close(fd);
    return sg_err_set(SG_EFORMAT, "%s: %" PRIu64 " bytes, more than %" PRIu64, path, size,
                      SG_LIBSVM_MAX_BYTES);
  }
  FILE *f = fdopen(fd, "r");
  if (!f) {
    close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(errno));
  }
  clk_t c = {.path = path, .format = format, .F = F};
  int rc = clk_alloc(&c, f, limit);
  if (rc == SG_OK) rc = clk_read(&c, f, limit);
  fclose(f);
  if (rc == SG_OK && c.rows == 0)
    rc = sg_err_set(SG_EFORMAT, "%s:%ld:1: no rows", path, c.line > 0 ? c.line : 1);
  if (rc == SG_OK) rc = clk_dataset(&c, out);
  free(c.col);
  free(c.y);
  return rc;
}
