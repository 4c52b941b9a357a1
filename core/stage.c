/* stage.c - a rank's spec and keys over its standard input (stage.h). */
#define _GNU_SOURCE
#include "stage.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "lifeline.h"

/* The whole file at path (at most max bytes) into *text (malloc'd, NUL
 * after it) and *len. */
static int slurp(const char *path, size_t max, char **text, size_t *len) {
  FILE *f = fopen(path, "re");
  if (!f) return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  char *buf = malloc(max + 1);
  size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
  int bad = ferror(f);
  fclose(f);
  if (!buf) return SG_ENOMEM;
  if (bad || n > max) {
    free(buf);
    return sg_err_set(SG_EIO, "%s: %s", path, bad ? "read error" : "too large to stage");
  }
  buf[n] = '\0';
  *text = buf;
  *len = n;
  return SG_OK;
}

int sg_stage_write_bytes(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return sg_err_set(SG_EPEER, "stage: write: %s", strerror(errno));
    p += w;
    n -= (size_t)w;
  }
  return SG_OK;
}

/* The key file's text (auth.c: a header line, then "WHO PUBLIC SECRET"
 * lines) with every secret but rank `rank`'s replaced by "-", in place:
 * a rank needs the others' public keys (to admit them, to reach them),
 * never their secrets, nor the harness's.  What is cut is zeroed. */
static void own_secret_only(char *keys, size_t *len, int rank) {
  char me[16], *out = keys, *p = keys, *end = keys + *len;
  size_t mlen = (size_t)snprintf(me, sizeof me, "%d", rank);
  for (int line = 0; p < end; line++) {
    char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t ll = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
    char *s1 = memchr(p, ' ', ll);
    char *s2 = s1 ? memchr(s1 + 1, ' ', ll - (size_t)(s1 + 1 - p)) : NULL;
    int mine = s1 && (size_t)(s1 - p) == mlen && !memcmp(p, me, mlen);
    size_t seclen = s2 ? ll - (size_t)(s2 + 1 - p) - (nl ? 1 : 0) : 0;
    if (!line || !seclen || mine) { /* the header, something else, or this rank's own */
      memmove(out, p, ll);
      out += ll;
    } else {
      size_t keep = (size_t)(s2 - p) + 1;
      memmove(out, p, keep);
      out += keep;
      *out++ = '-';
      if (nl) *out++ = '\n';
    }
    p += ll;
  }
  explicit_bzero(out, (size_t)(end - out));
  *len = (size_t)(out - keys);
}

int sg_stage_text(int rank, int size, const char *spec_path, const char *keys_path, char **out,
                  size_t *out_len) {
  char *spec = NULL, *keys = NULL, *buf = NULL;
  size_t slen = 0, klen = 0;
  int rc = SG_OK;
  SG_TRY(slurp(spec_path, SG_STAGE_SPEC_MAX, &spec, &slen));
  if (keys_path && keys_path[0]) SG_TRY(slurp(keys_path, SG_STAGE_KEYS_MAX, &keys, &klen));
  if (keys && rank >= 0) own_secret_only(keys, &klen, rank);
  if (!(buf = malloc(128 + slen + klen))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  int n = snprintf(buf, 128, "sgdlab-stage 1 %d %d %zu %zu\n", rank, size, slen, klen);
  memcpy(buf + n, spec, slen);
  if (klen) memcpy(buf + n + slen, keys, klen);
  *out = buf;
  *out_len = (size_t)n + slen + klen;
fail:
  if (keys) explicit_bzero(keys, klen);
  free(spec);
  free(keys);
  return rc;
}

int sg_stage_write(int fd, int rank, int size, const char *spec_path, const char *keys_path) {
  char *buf = NULL;
  size_t len = 0;
  SG_CHECK(sg_stage_text(rank, size, spec_path, keys_path, &buf, &len));
  int rc = sg_stage_write_bytes(fd, buf, len);
  explicit_bzero(buf, len);
  free(buf);
  return rc;
}

/* Exactly n bytes from fd; what names them in errors, at byte offset off. */
static int read_all(int fd, char *p, size_t n, const char *what, size_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return sg_err_set(SG_EPROTO, "stage (stdin): %s ends at byte %zu of %zu (offset %zu)", what,
                        got, n, off + got);
    got += (size_t)r;
  }
  return SG_OK;
}

/* The header's numbers from line (NUL-terminated, ending in '\n'). */
static int parse_head(const char *line, int *rank, int *size, size_t *slen, size_t *klen) {
  char tail;
  if (sscanf(line, "sgdlab-stage 1 %d %d %zu %zu%c", rank, size, slen, klen, &tail) != 5 ||
      tail != '\n' || *size < 1 || *rank < -1 || *rank >= *size || *slen > SG_STAGE_SPEC_MAX ||
      *klen > SG_STAGE_KEYS_MAX)
    return sg_err_set(SG_EPROTO, "stage (stdin):1: not a stage header (-1 <= rank < size, spec <= "
                      "%d and keys <= %d bytes)", SG_STAGE_SPEC_MAX, SG_STAGE_KEYS_MAX);
  return SG_OK;
}

/* The header line, byte by byte (nothing after it may be consumed). */
static int read_head(int fd, int *rank, int *size, size_t *slen, size_t *klen) {
  char line[128];
  size_t n = 0;
  for (;;) {
    if (n + 1 >= sizeof line)
      return sg_err_set(SG_EPROTO, "stage (stdin): no header line in the first %zu bytes", n);
    SG_CHECK(read_all(fd, line + n, 1, "the header", n));
    if (line[n++] == '\n') break;
  }
  line[n] = '\0';
  return parse_head(line, rank, size, slen, klen);
}

/* key=value lines, as sg_opts_load reads them. */
static int parse_spec(char *text, sg_opts_t **out) {
  int rc = SG_OK, lineno = 0;
  sg_opts_t *o = sg_opts_new();
  if (!o) return SG_ENOMEM;
  for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
    lineno++;
    char *eq = strchr(l, '=');
    if (!eq) {
      rc = sg_err_set(SG_EFORMAT, "stage (stdin): spec line %d: expected key=value", lineno);
      goto fail;
    }
    *eq = '\0';
    SG_TRY(sg_opts_set(o, l, eq + 1));
  }
  *out = o;
  return SG_OK;
fail:
  sg_opts_destroy(&o);
  return rc;
}

int sg_stage_read(int fd, sg_opts_t **spec, sg_keys_t **keys, int *rank, int *size) {
  size_t slen, klen;
  char *buf = NULL;
  int rc = SG_OK;
  *spec = NULL;
  *keys = NULL;
  SG_CHECK(read_head(fd, rank, size, &slen, &klen));
  if (!(buf = malloc(slen + klen + 1))) return SG_ENOMEM;
  SG_TRY(read_all(fd, buf, slen, "the spec", 0));
  SG_TRY(read_all(fd, buf + slen, klen, "the keys", slen));
  if (klen) SG_TRY(sg_keys_load_text(keys, buf + slen, klen, "stage (stdin) keys", *size));
  buf[slen] = '\0';
  SG_TRY(parse_spec(buf, spec));
fail:
  explicit_bzero(buf, slen + klen);
  free(buf);
  if (rc < 0) sg_keys_destroy(keys);
  return rc;
}

int sg_stage_parse(const char *bytes, size_t len, sg_opts_t **spec, sg_keys_t **keys, int *rank,
                   int *size) {
  char line[128];
  size_t slen, klen;
  *spec = NULL;
  *keys = NULL;
  const char *nl = memchr(bytes, '\n', len < sizeof line - 1 ? len : sizeof line - 1);
  if (!nl) return sg_err_set(SG_EPROTO, "stage: no header line in the first %zu bytes", len);
  size_t hlen = (size_t)(nl - bytes) + 1;
  memcpy(line, bytes, hlen);
  line[hlen] = '\0';
  SG_CHECK(parse_head(line, rank, size, &slen, &klen));
  if (len - hlen != slen + klen)
    return sg_err_set(SG_EPROTO, "stage: %zu bytes after the header, which announces %zu "
                      "(offset %zu)", len - hlen, slen + klen, hlen);
  char *text = malloc(slen + 1);
  if (!text) return SG_ENOMEM;
  memcpy(text, bytes + hlen, slen);
  text[slen] = '\0';
  int rc = SG_OK;
  if (klen) SG_TRY(sg_keys_load_text(keys, bytes + hlen + slen, klen, "stage keys", *size));
  SG_TRY(parse_spec(text, spec));
fail:
  free(text);
  if (rc < 0) sg_keys_destroy(keys);
  return rc;
}

typedef struct watch_arg {
  int fd, rank;
} watch_arg_t;

static void *watch(void *p) {
  watch_arg_t a = *(watch_arg_t *)p;
  free(p);
  char sink[256];
  for (;;) {
    ssize_t r = read(a.fd, sink, sizeof sink);
    if (r > 0 || (r < 0 && errno == EINTR)) continue;
    break;
  }
  char line[160];
  int n = snprintf(line, sizeof line, "sgdlab-rank: rank %d: its launcher's connection closed "
                   "(standard input ended); exiting\n", a.rank);
  /* write(2), not stdio: the main thread may hold stderr's lock */
  if (n > 0 && write(STDERR_FILENO, line, (size_t)n)) {
  }
  _exit(SG_LIFELINE_EXIT);
  return NULL;
}

int sg_stage_watch(int fd, int rank) {
  watch_arg_t *a = malloc(sizeof *a);
  if (!a) return SG_ENOMEM;
  *a = (watch_arg_t){fd, rank};
  pthread_t t;
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int e = pthread_create(&t, &at, watch, a);
  pthread_attr_destroy(&at);
  if (e) {
    free(a);
    return sg_err_set(SG_EIO, "stage: cannot start the stdin watch: %s", strerror(e));
  }
  return SG_OK;
}
