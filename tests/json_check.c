/* json_check.c - strict JSON validity (json_check.h). */
#include "json_check.h"

#include <string.h>

typedef struct jp {
  const unsigned char *s, *start;
  int depth;
} jp_t;

static int value(jp_t *p);

static void ws(jp_t *p) {
  while (*p->s == ' ' || *p->s == '\t' || *p->s == '\n' || *p->s == '\r') p->s++;
}

static int utf8(jp_t *p) {
  unsigned c = *p->s;
  int n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3
        : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (!n) return 0;
  for (int i = 1; i < n; i++)
    if ((p->s[i] & 0xc0) != 0x80) return 0;
  p->s += n;
  return 1;
}

static int string(jp_t *p) {
  if (*p->s++ != '"') return 0;
  while (*p->s != '"') {
    if (*p->s < 0x20) return 0; /* control characters (and the end) */
    if (*p->s == '\\') {
      p->s++;
      if (*p->s == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!strchr("0123456789abcdefABCDEF", p->s[i]) || !p->s[i]) return 0;
        p->s += 5;
      } else if (*p->s && strchr("\"\\/bfnrt", *p->s)) {
        p->s++;
      } else {
        return 0;
      }
    } else if (!utf8(p)) {
      return 0;
    }
  }
  p->s++;
  return 1;
}

static int digits(jp_t *p) {
  const unsigned char *b = p->s;
  while (*p->s >= '0' && *p->s <= '9') p->s++;
  return p->s > b;
}

static int number(jp_t *p) {
  if (*p->s == '-') p->s++;
  if (*p->s == '0') p->s++;
  else if (!digits(p)) return 0;
  if (*p->s == '.') {
    p->s++;
    if (!digits(p)) return 0;
  }
  if (*p->s == 'e' || *p->s == 'E') {
    p->s++;
    if (*p->s == '+' || *p->s == '-') p->s++;
    if (!digits(p)) return 0;
  }
  return 1;
}

/* [ v, v ] or { "k": v, ... } */
static int container(jp_t *p, int obj) {
  char close = obj ? '}' : ']';
  if (++p->depth > 256) return 0;
  p->s++;
  ws(p);
  if (*p->s == close) {
    p->s++;
    p->depth--;
    return 1;
  }
  for (;;) {
    ws(p);
    if (obj) {
      if (!string(p)) return 0;
      ws(p);
      if (*p->s++ != ':') return 0;
    }
    if (!value(p)) return 0;
    ws(p);
    if (*p->s == ',') {
      p->s++;
      continue;
    }
    if (*p->s++ != close) return 0;
    p->depth--;
    return 1;
  }
}

static int value(jp_t *p) {
  ws(p);
  switch (*p->s) {
  case '{': return container(p, 1);
  case '[': return container(p, 0);
  case '"': return string(p);
  case 't': return !strncmp((const char *)p->s, "true", 4) ? (p->s += 4, 1) : 0;
  case 'f': return !strncmp((const char *)p->s, "false", 5) ? (p->s += 5, 1) : 0;
  case 'n': return !strncmp((const char *)p->s, "null", 4) ? (p->s += 4, 1) : 0;
  default: return number(p);
  }
}

int jc_valid(const char *text, size_t *where) {
  jp_t p = {(const unsigned char *)text, (const unsigned char *)text, 0};
  int ok = value(&p);
  if (ok) {
    ws(&p);
    ok = *p.s == '\0';
  }
  if (where) *where = (size_t)(p.s - p.start);
  return ok;
}

long jc_count(const char *hay, const char *needle) {
  long n = 0;
  size_t len = strlen(needle);
  for (const char *at = hay; (at = strstr(at, needle)); at += len) n++;
  return n;
}
