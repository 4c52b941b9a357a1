#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* keys[i] with its hash hash[i]: a lookup compares hashes and only a
 * match's string, so a run's ~60 settings cost one pass of integer
 * compares (a 100,000-run sweep looks keys up tens of millions of times). */
struct sg_opts {
  size_t n, cap;
  char **keys;
  char **vals;
  uint32_t *hash;
};

static uint32_t key_hash(const char *k) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (; *k; k++) h = (h ^ (unsigned char)*k) * 16777619u;
  return h;
}

sg_opts_t *sg_opts_new(void) { return calloc(1, sizeof(sg_opts_t)); }

void sg_opts_destroy(sg_opts_t **po) {
  if (!po || !*po) return;
  sg_opts_t *o = *po;
  for (size_t i = 0; i < o->n; i++) {
    free(o->keys[i]);
    free(o->vals[i]);
  }
  free(o->keys);
  free(o->vals);
  free(o->hash);
  free(o);
  *po = NULL;
}

static int reserve(sg_opts_t *o, size_t need) {
  if (need <= o->cap) return SG_OK;
  size_t cap = o->cap ? 2 * o->cap : 32;
  while (cap < need) cap *= 2;
  char **k = realloc(o->keys, cap * sizeof *k);
  if (!k) return SG_ENOMEM;
  o->keys = k;
  char **vv = realloc(o->vals, cap * sizeof *vv);
  if (!vv) return SG_ENOMEM;
  o->vals = vv;
  uint32_t *h = realloc(o->hash, cap * sizeof *h);
  if (!h) return SG_ENOMEM;
  o->hash = h;
  o->cap = cap;
  return SG_OK;
}

/* The keys of o are distinct: copied as they are, none looked up. */
sg_opts_t *sg_opts_dup(const sg_opts_t *o) {
  sg_opts_t *d = sg_opts_new();
  if (!d || reserve(d, o->n) < 0) goto nomem;
  for (size_t i = 0; i < o->n; i++) {
    char *k = strdup(o->keys[i]), *v = strdup(o->vals[i]);
    if (!k || !v) {
      free(k);
      free(v);
      goto nomem;
    }
    d->keys[d->n] = k;
    d->vals[d->n] = v;
    d->hash[d->n++] = o->hash[i];
  }
  return d;
nomem:
  sg_opts_destroy(&d);
  return NULL;
}

static long find_h(const sg_opts_t *o, const char *key, uint32_t h) {
  for (size_t i = 0; i < o->n; i++)
    if (o->hash[i] == h && strcmp(o->keys[i], key) == 0) return (long)i;
  return -1;
}

/* The late-read count (opts.h): process-wide, as the rule is per rank. */
static int g_frozen;
static long g_late;
static char g_late_first[64];

void sg_opts_freeze(int on) { __atomic_store_n(&g_frozen, on, __ATOMIC_RELAXED); }

long sg_opts_late_reads(const char **first_key) {
  long n = __atomic_load_n(&g_late, __ATOMIC_RELAXED);
  if (first_key) *first_key = n ? g_late_first : NULL;
  return n;
}

static long find(const sg_opts_t *o, const char *key) {
  if (__atomic_load_n(&g_frozen, __ATOMIC_RELAXED) &&
      __atomic_fetch_add(&g_late, 1, __ATOMIC_RELAXED) == 0)
    snprintf(g_late_first, sizeof g_late_first, "%s", key);
  return find_h(o, key, key_hash(key));
}

int sg_opts_set(sg_opts_t *o, const char *key, const char *value) {
  uint32_t h = key_hash(key);
  long i = find_h(o, key, h);
  char *v = strdup(value ? value : "");
  if (!v) return SG_ENOMEM;
  if (i >= 0) {
    free(o->vals[i]);
    o->vals[i] = v;
    return SG_OK;
  }
  if (reserve(o, o->n + 1) < 0) goto nomem;
  o->keys[o->n] = strdup(key);
  if (!o->keys[o->n]) goto nomem;
  o->hash[o->n] = h;
  o->vals[o->n++] = v;
  return SG_OK;
nomem:
  free(v);
  return SG_ENOMEM;
}

int sg_opts_setf(sg_opts_t *o, const char *key, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return sg_opts_set(o, key, buf);
}

const char *sg_opts_get(const sg_opts_t *o, const char *key) {
  long i = find(o, key);
  return i >= 0 ? o->vals[i] : NULL;
}

int sg_opts_has(const sg_opts_t *o, const char *key) { return find(o, key) >= 0; }
size_t sg_opts_count(const sg_opts_t *o) { return o->n; }
const char *sg_opts_key(const sg_opts_t *o, size_t i) { return i < o->n ? o->keys[i] : NULL; }
const char *sg_opts_value(const sg_opts_t *o, size_t i) { return i < o->n ? o->vals[i] : NULL; }

static int missing(const char *key) {
  return sg_err_set(SG_ECONFIG, "%s: missing setting", key);
}

static int parse_int(const char *key, const char *s, int64_t *out) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || end == s) goto bad;
  /* allow K/M/G suffixes (powers of two) for sizes; a shift that would
   * overflow is an error, not a wrapped value */
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) {
    if (v > (LLONG_MAX >> shift) || v < (LLONG_MIN >> shift)) goto bad;
    v *= 1LL << shift;
    end++;
  }
  while (isspace((unsigned char)*end)) end++;
  if (*end) goto bad;
  *out = v;
  return SG_OK;
bad:
  return sg_err_set(SG_ECONFIG, "%s: expected an integer, got '%s'", key, s);
}

int sg_parse_int(const char *key, const char *s, int64_t *out) { return parse_int(key, s, out); }

int sg_opts_int(const sg_opts_t *o, const char *key, int64_t *out) {
  const char *s = sg_opts_get(o, key);
  if (!s) return missing(key);
  return parse_int(key, s, out);
}

int sg_opts_double(const sg_opts_t *o, const char *key, double *out) {
  const char *s = sg_opts_get(o, key);
  if (!s) return missing(key);
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  /* nan and inf pass every range check by comparison; no setting means them */
  if ((errno && fabs(v) > 1) || end == s || !isfinite(v)) goto bad;
  while (isspace((unsigned char)*end)) end++;
  if (*end) goto bad;
  *out = v;
  return SG_OK;
bad:
  return sg_err_set(SG_ECONFIG, "%s: expected a finite number, got '%s'", key, s);
}

int sg_opts_bool(const sg_opts_t *o, const char *key, int *out) {
  const char *s = sg_opts_get(o, key);
  if (!s) return missing(key);
  if (!strcmp(s, "true") || !strcmp(s, "1") || !strcmp(s, "yes") || !strcmp(s, "on")) {
    *out = 1;
    return SG_OK;
  }
  if (!strcmp(s, "false") || !strcmp(s, "0") || !strcmp(s, "no") || !strcmp(s, "off")) {
    *out = 0;
    return SG_OK;
  }
  return sg_err_set(SG_ECONFIG, "%s: expected true or false, got '%s'", key, s);
}

int sg_opts_str(const sg_opts_t *o, const char *key, const char **out) {
  const char *s = sg_opts_get(o, key);
  if (!s) return missing(key);
  *out = s;
  return SG_OK;
}

int sg_opts_intlist(const sg_opts_t *o, const char *key, int64_t *out,
                    size_t cap, size_t *n) {
  const char *s = sg_opts_get(o, key);
  if (!s) return missing(key);
  *n = 0;
  char buf[64];
  while (*s) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (len == 0 || len >= sizeof buf)
      return sg_err_set(SG_ECONFIG, "%s: bad list element in '%s'", key, sg_opts_get(o, key));
    memcpy(buf, s, len);
    buf[len] = '\0';
    if (*n >= cap) return sg_err_set(SG_ECONFIG, "%s: more than %zu elements", key, cap);
    SG_CHECK(parse_int(key, buf, &out[(*n)++]));
    s += len + (comma ? 1 : 0);
  }
  return SG_OK;
}

int sg_opts_int_or(const sg_opts_t *o, const char *key, int64_t def, int64_t *out) {
  if (!sg_opts_has(o, key)) {
    *out = def;
    return SG_OK;
  }
  return sg_opts_int(o, key, out);
}

int sg_opts_double_or(const sg_opts_t *o, const char *key, double def, double *out) {
  if (!sg_opts_has(o, key)) {
    *out = def;
    return SG_OK;
  }
  return sg_opts_double(o, key, out);
}

const char *sg_opts_str_or(const sg_opts_t *o, const char *key, const char *def) {
  const char *s = sg_opts_get(o, key);
  return s ? s : def;
}

/* One line per key, so a newline in a value, or '=' or a newline in a
 * key, would let the reader see another key: refused. */
int sg_opts_save(const sg_opts_t *o, const char *path) {
  for (size_t i = 0; i < o->n; i++)
    if (!o->keys[i][0] || strpbrk(o->keys[i], "=\n") || strchr(o->vals[i], '\n'))
      return sg_err_set(SG_EINVAL, "%s: key '%.40s' or its value cannot be one line", path,
                        o->keys[i]);
  FILE *f = fopen(path, "w");
  if (!f) return sg_err_set(SG_EIO, "%s: cannot write", path);
  for (size_t i = 0; i < o->n; i++) fprintf(f, "%s=%s\n", o->keys[i], o->vals[i]);
  if (fclose(f) != 0) return sg_err_set(SG_EIO, "%s: write failed", path);
  return SG_OK;
}

/* Lines of any length: a fixed buffer would cut a long value and read its
 * tail as a line of its own, a key the writer never set. */
int sg_opts_load(sg_opts_t **out, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return sg_err_set(SG_EIO, "%s: cannot open", path);
  sg_opts_t *o = sg_opts_new();
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int rc = SG_OK, lineno = 0;
  if (!o) {
    rc = SG_ENOMEM;
    goto fail;
  }
  while ((len = getline(&line, &cap, f)) >= 0) {
    lineno++;
    if (len && line[len - 1] == '\n') line[--len] = '\0';
    if (!len) continue;
    char *eq = strchr(line, '=');
    if (!eq) {
      rc = sg_err_set(SG_EFORMAT, "%s:%d: expected key=value", path, lineno);
      goto fail;
    }
    *eq = '\0';
    SG_TRY(sg_opts_set(o, line, eq + 1));
  }
  free(line);
  fclose(f);
  *out = o;
  return SG_OK;
fail:
  free(line);
  fclose(f);
  sg_opts_destroy(&o);
  return rc;
}

/* A JSON number exactly (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?);
 * anything strtod also takes ("0x10", ".5", "1.", "+1", "inf", "007")
 * would make the object invalid, so it is written as a string. */
static const char *digits(const char *s) {
  if (*s < '0' || *s > '9') return NULL;
  while (*s >= '0' && *s <= '9') s++;
  return s;
}

static int is_number(const char *s) {
  if (*s == '-') s++;
  if (*s == '0' && s[1] >= '0' && s[1] <= '9') return 0;
  if (!(s = digits(s))) return 0;
  if (*s == '.' && !(s = digits(s + 1))) return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (!(s = digits(s))) return 0;
  }
  return *s == '\0';
}

/* A JSON string body: quote and backslash escaped, control bytes as
 * \u00XX (JSON forbids them raw: one tab in an experiment name made the
 * whole database unreadable to list, show and report).  At most 6 bytes
 * out per byte in. */
static char *json_escape(char *p, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      *p++ = '\\';
      *p++ = (char)c;
    } else if (c < 0x20 || c == 0x7f) {
      p += sprintf(p, "\\u%04x", c);
    } else {
      *p++ = (char)c;
    }
  }
  return p;
}

char *sg_opts_json(const sg_opts_t *o) {
  size_t cap = 64;
  for (size_t i = 0; i < o->n; i++) cap += 6 * (strlen(o->keys[i]) + strlen(o->vals[i])) + 8;
  char *out = malloc(cap), *p = out;
  if (!out) return NULL;
  *p++ = '{';
  for (size_t i = 0; i < o->n; i++) {
    if (i) *p++ = ',';
    *p++ = '"';
    p = json_escape(p, o->keys[i]);
    *p++ = '"';
    *p++ = ':';
    const char *v = o->vals[i];
    if (is_number(v) || !strcmp(v, "true") || !strcmp(v, "false")) {
      p += sprintf(p, "%s", v);
    } else {
      *p++ = '"';
      p = json_escape(p, v);
      *p++ = '"';
    }
  }
  *p++ = '}';
  *p = '\0';
  return out;
}
