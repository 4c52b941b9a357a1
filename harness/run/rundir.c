/* rundir.c - the run's private directory and the proof that a directory
 * is this machine's own run's (rundir.h). */
#define _GNU_SOURCE /* fdopendir, openat, O_NOFOLLOW, O_DIRECTORY */
#include "rundir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "reconcile.h"
#include "safedir.h"

enum { OWNER_CAP = 512 }; /* an owner file is far smaller */

static const char OWNER_FILE[] = "owner";

/* ---- SHA-256 (FIPS 180-4) --------------------------------------------------- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha256_block(uint32_t h[8], const unsigned char *p) {
  uint32_t w[64], v[8];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(v, h, sizeof v);
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = v[7] + (ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25)) +
                  ((v[4] & v[5]) ^ (~v[4] & v[6])) + K256[i] + w[i];
    uint32_t t2 = (ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22)) +
                  ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
    memmove(v + 1, v, 7 * sizeof *v);
    v[4] += t1;
    v[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++) h[i] += v[i];
}

void sg_sha256_hex(const void *data, size_t n, char out[SG_RUNDIR_PROOF_LEN + 1]) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const unsigned char *p = data;
  unsigned char last[128] = {0};
  size_t full = n / 64 * 64, rest = n - full;
  for (size_t i = 0; i < full; i += 64) sha256_block(h, p + i);
  memcpy(last, p + full, rest);
  last[rest] = 0x80;
  size_t len = rest < 56 ? 64 : 128;
  uint64_t bits = (uint64_t)n * 8;
  for (int i = 0; i < 8; i++) last[len - 1 - i] = (unsigned char)(bits >> (8 * i));
  for (size_t i = 0; i < len; i += 64) sha256_block(h, last + i);
  for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", h[i]);
}

/* ---- the run's directory ----------------------------------------------------- */

/* The owner file's text: a fresh secret and this process as harness. */
static int owner_text(char *out, size_t cap) {
  unsigned char secret[32];
  char hex[65], ident[128];
  if (getrandom(secret, sizeof secret, 0) != (ssize_t)sizeof secret)
    return sg_err_set(SG_EIO, "run directory: no random bytes: %s", strerror(errno));
  for (size_t i = 0; i < sizeof secret; i++) snprintf(hex + 2 * i, 3, "%02x", secret[i]);
  if (sg_proc_identity((int)getpid(), ident, sizeof ident) < 0)
    return sg_err_set(SG_EIO, "run directory: cannot read this process's identity");
  snprintf(out, cap, "sgdlab run directory\nsecret %s\nharness %d %s\n", hex, (int)getpid(), ident);
  return SG_OK;
}

static int write_owner(sg_rundir_t *rd) {
  char text[OWNER_CAP];
  SG_CHECK(owner_text(text, sizeof text));
  int fd = openat(rd->fd, OWNER_FILE, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  size_t len = strlen(text);
  if (fd < 0) return sg_err_set(SG_EIO, "%s/%s: %s", rd->path, OWNER_FILE, strerror(errno));
  int ok = write(fd, text, len) == (ssize_t)len;
  if (close(fd) < 0 || !ok)
    return sg_err_set(SG_EIO, "%s/%s: write failed", rd->path, OWNER_FILE);
  sg_sha256_hex(text, len, rd->proof);
  return SG_OK;
}

int sg_rundir_create(sg_rundir_t *rd) {
  memset(rd, 0, sizeof *rd);
  rd->fd = -1;
  snprintf(rd->path, sizeof rd->path, "/tmp/sgdlab-XXXXXX");
  if (!mkdtemp(rd->path)) {
    rd->path[0] = '\0';
    return sg_err_set(SG_EIO, "cannot create a run directory under /tmp: %s", strerror(errno));
  }
  int fd = sg_dir_open_private(AT_FDCWD, rd->path);
  if (fd < 0) {
    rmdir(rd->path); /* mkdtemp's own, empty */
    rd->path[0] = '\0';
    return fd;
  }
  rd->fd = fd;
  int rc = write_owner(rd);
  if (rc < 0) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", sg_err_msg());
    sg_rundir_remove(rd);
    return sg_err_set(rc, "%s", msg);
  }
  return SG_OK;
}

/* The directory holding path's last component, opened; *base points
 * into path. */
static int open_parent(const char *path, const char **base) {
  const char *slash = strrchr(path, '/');
  char parent[64];
  if (!slash || slash == path || (size_t)(slash - path) >= sizeof parent)
    return sg_err_set(SG_EINVAL, "%s: not a run directory's path", path);
  snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
  *base = slash + 1;
  int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  return fd >= 0 ? fd : sg_err_set(SG_EIO, "%s: %s", parent, strerror(errno));
}

int sg_rundir_remove(sg_rundir_t *rd) {
  if (rd->fd < 0) return SG_OK;
  int rc = sg_rmtree_fd(rd->fd);
  const char *base;
  int pfd = open_parent(rd->path, &base);
  struct stat a, b;
  /* the name still is the directory emptied (in sticky /tmp no one else
   * can rename ours; checked all the same) */
  if (rc == SG_OK && pfd >= 0 && fstat(rd->fd, &a) == 0 &&
      fstatat(pfd, base, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_dev == b.st_dev &&
      a.st_ino == b.st_ino && unlinkat(pfd, base, AT_REMOVEDIR) < 0)
    rc = sg_err_set(SG_EIO, "%s: %s", rd->path, strerror(errno));
  if (pfd >= 0) close(pfd);
  else if (rc == SG_OK) rc = pfd;
  close(rd->fd);
  rd->fd = -1;
  return rc;
}

/* Read dfd's owner file into buf (NUL-terminated): a regular file of the
 * user, one link, not larger than cap - 1.  0, or -1. */
static int read_owner(int dfd, char *buf, size_t cap) {
  int fd = openat(dfd, OWNER_FILE, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat sb;
  ssize_t n = -1;
  if (fd < 0) return -1;
  if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() && sb.st_nlink == 1 &&
      sb.st_size > 0 && (size_t)sb.st_size < cap)
    n = read(fd, buf, cap - 1);
  close(fd);
  if (n != (ssize_t)sb.st_size || n <= 0) return -1;
  buf[n] = '\0';
  return 0;
}

/* Whether the harness named in an owner file's text is gone. */
static int owner_harness_gone(const char *text) {
  const char *h = strstr(text, "\nharness ");
  char ident[128], now[128];
  int pid;
  if (!h || sscanf(h, "\nharness %d %127s", &pid, ident) != 2 || pid <= 0) return 0;
  return sg_proc_identity(pid, now, sizeof now) < 0 || strcmp(now, ident) != 0;
}

int sg_rundir_reclaim(const char *dir, const char *proof, int *removed) {
  char text[OWNER_CAP], got[SG_RUNDIR_PROOF_LEN + 1];
  if (removed) *removed = 0;
  if (!sg_run_dir_pattern(dir) || !proof || strlen(proof) != SG_RUNDIR_PROOF_LEN) return 0;
  const char *base;
  int pfd = open_parent(dir, &base);
  if (pfd < 0) return sg_err_clear(), 0;
  int fd = sg_dir_open_private(pfd, base), proven = 0;
  if (fd < 0) {
    close(pfd);
    return sg_err_clear(), 0;
  }
  if (read_owner(fd, text, sizeof text) == 0) {
    sg_sha256_hex(text, strlen(text), got);
    proven = !strcmp(got, proof) && owner_harness_gone(text);
  }
  if (proven && removed && sg_rmtree_fd(fd) == SG_OK) *removed = unlinkat(pfd, base, AT_REMOVEDIR) == 0;
  sg_err_clear();
  close(fd);
  close(pfd);
  return proven;
}
