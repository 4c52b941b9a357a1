/* fuzz_util.c - files in memory for the targets that read paths. */
#define _GNU_SOURCE /* memfd_create */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "fuzz.h"

enum { SLOTS = 4 };

_Noreturn void fuzz_fail_(const char *file, int line, const char *what) {
  fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", file, line, what);
  abort();
}

static void die(const char *what) {
  perror(what);
  abort();
}

/* data, gzip-compressed (level 1: the targets want the stream, not the ratio). */
static unsigned char *gzip_of(const void *data, size_t size, size_t *out) {
  z_stream zs = {0};
  if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) die("deflateInit2");
  size_t cap = deflateBound(&zs, (uLong)size) + 32;
  unsigned char *buf = malloc(cap);
  if (!buf) die("malloc");
  zs.next_in = (Bytef *)data;
  zs.avail_in = (uInt)size;
  zs.next_out = buf;
  zs.avail_out = (uInt)cap;
  if (deflate(&zs, Z_FINISH) != Z_STREAM_END) die("deflate");
  *out = zs.total_out;
  deflateEnd(&zs);
  return buf;
}

const char *fuzz_file(int slot, const void *data, size_t size, int gz) {
  static int fds[SLOTS] = {-1, -1, -1, -1};
  static char paths[SLOTS][64];
  if (slot < 0 || slot >= SLOTS) abort();
  if (fds[slot] < 0) {
    /* a memfd reopened through /proc: a real path for fopen/gzopen */
    if ((fds[slot] = memfd_create("sgdlab-fuzz", MFD_CLOEXEC)) < 0) die("memfd_create");
    snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
  }
  size_t n = size;
  unsigned char *z = gz ? gzip_of(data, size, &n) : NULL;
  const unsigned char *p = z ? z : data;
  if (ftruncate(fds[slot], 0) < 0) die("ftruncate");
  for (size_t at = 0; at < n;) {
    ssize_t w = pwrite(fds[slot], p + at, n - at, (off_t)at);
    if (w <= 0) die("pwrite");
    at += (size_t)w;
  }
  free(z);
  return paths[slot];
}
