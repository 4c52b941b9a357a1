/* dataset_cache.c - one decoded copy of an IDX training set per host.
 *
 * The first rank to load a training set decodes it and writes it to a
 * cache file (header | n*d float pixels | n int32 labels); every rank then
 * maps that file PROT_READ, MAP_SHARED, so N ranks on a host share one set
 * of page-cache pages instead of N private copies.
 *
 * The file name is the hash of the source files' identity (device, inode,
 * size, mtime of images and labels) and the decoding options (row limit,
 * format version): a changed source gets a new name.  Untrusted input: the
 * directory must be a directory owned by this user with no group/other
 * access (made 0700 when missing); a cache file is mapped only if it is a
 * regular file owned by this user and writable by nobody else, and its
 * header (magic, key, sizes that match the file's size) and payload
 * checksum check out, every label in range.  Anything else is rebuilt:
 * decoded again and written to an O_EXCL temporary (0600) renamed over
 * the name, so a reader never sees a half-written file; every step after
 * the directory check works through a descriptor of the checked directory.
 * The directory's parents must not be changeable by another user: each is
 * owned by root or this user and writable by no one else unless sticky
 * (/tmp), checked component by component as the path is walked from /;
 * a symlink on the way is followed only when root or this user owns it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "err.h"
#include "trusted_path.h"

enum { CACHE_VERSION = 1 };
static const char CACHE_MAGIC[8] = {'S', 'G', 'D', 'C', 'A', 'C', 'H', '1'};

typedef struct cache_hdr {
  char magic[8];
  uint64_t key;     /* of the sources' identity and the options */
  int64_t n, d;
  int32_t classes, version;
  uint64_t payload; /* bytes after the header: n*d floats, n int32 labels */
  uint64_t sum;     /* sg_dataset_checksum_ of the payload */
  uint64_t pad;
} cache_hdr_t;

_Static_assert(sizeof(cache_hdr_t) == 64, "the cache header is 64 bytes");

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* Word-wise FNV-style hash: fast enough to check 47 MB on every map. */
uint64_t sg_dataset_checksum_(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ULL, w;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    memcpy(&w, b + i, 8);
    h = (h ^ w) * 1099511628211ULL;
    h ^= h >> 29;
  }
  return fnv(h, b + i, n - i);
}

static int source_key(const char *images, const char *labels, int64_t limit, uint64_t *key) {
  const char *paths[2] = {images, labels};
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < 2; i++) {
    struct stat st;
    if (stat(paths[i], &st) < 0) return sg_err_set(SG_EIO, "%s: %s", paths[i], strerror(errno));
    int64_t id[6] = {(int64_t)st.st_dev, (int64_t)st.st_ino, (int64_t)st.st_size,
                     (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec, limit};
    h = fnv(h, id, sizeof id);
  }
  int v = CACHE_VERSION;
  *key = fnv(h, &v, sizeof v);
  return SG_OK;
}

/* A descriptor of the checked parent of `dir`, its last component in
 * `leaf` (trusted_path.h; a relative dir from the working directory). */
static int open_parent(const char *path, char *leaf, size_t cap) {
  char dir[4096], par[4096], abs[PATH_MAX + 4096], cwd[PATH_MAX];
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') len--; /* "cache/" is "cache" */
  if (len >= sizeof dir) return sg_err_set(SG_EIO, "data cache %.64s...: path too long", path);
  memcpy(dir, path, len);
  dir[len] = '\0';
  const char *slash = strrchr(dir, '/');
  const char *name = slash ? slash + 1 : dir;
  if (!*name || strlen(name) >= cap || !strcmp(name, ".") || !strcmp(name, ".."))
    return sg_err_set(SG_EIO, "data cache %s: not a directory name", dir);
  snprintf(leaf, cap, "%s", name);
  snprintf(par, sizeof par, "%.*s", slash ? (int)(slash == dir ? 1 : slash - dir) : 1,
           slash ? dir : ".");
  if (par[0] != '/' && !getcwd(cwd, sizeof cwd))
    return sg_err_set(SG_EIO, "data cache %s: the working directory: %s", dir, strerror(errno));
  if (snprintf(abs, sizeof abs, "%s%s%s", par[0] == '/' ? "" : cwd, par[0] == '/' ? "" : "/",
               par) >= PATH_MAX)
    return sg_err_set(SG_EIO, "data cache %.64s...: path too long", path);
  return sg_trusted_dir_walk(abs, "data cache", SG_TRUSTED_NO_UID);
}

/* dir: made 0700 when missing; refused unless a directory of ours that
 * no one else can enter or write, in parents no one else can change
 * (open_parent).  Returns a descriptor of the directory that was
 * checked: every later step works relative to it. */
static int private_dir(const char *dir) {
  char leaf[256];
  int pfd = open_parent(dir, leaf, sizeof leaf);
  if (pfd < 0) return pfd;
  if (mkdirat(pfd, leaf, 0700) < 0 && errno != EEXIST) {
    close(pfd);
    return sg_err_set(SG_EIO, "data cache %s: %s", dir, strerror(errno));
  }
  int fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  close(pfd);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "data cache %s: %s", dir,
                      e == ELOOP || e == ENOTDIR ? "not a directory (a symlink?)" : strerror(e));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
    close(fd);
    return sg_err_set(SG_EIO, "data cache %s: not a private directory of uid %u (mode %04o, owner %u)",
                      dir, (unsigned)geteuid(), (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid);
  }
  return fd;
}

/* The header and payload of a mapped file; 0 or SG_EFORMAT with why. */
static int check_map(const unsigned char *m, size_t size, uint64_t key, const char *path) {
  cache_hdr_t h;
  if (size < sizeof h) return sg_err_set(SG_EFORMAT, "%s: %zu B, shorter than the header", path, size);
  memcpy(&h, m, sizeof h);
  if (memcmp(h.magic, CACHE_MAGIC, 8) || h.version != CACHE_VERSION || h.key != key)
    return sg_err_set(SG_EFORMAT, "%s: not the cache of these files (magic/version/key)", path);
  /* payload / row bytes, not n * row bytes: n <= 2^40 rows of up to
   * 2^24 + 1 words can wrap 64 bits, and a wrapped product that matches
   * the file's size would put the labels outside the mapping */
  if (h.n < 1 || h.d < 1 || h.classes < 1 || h.classes > 65536 || h.n > (int64_t)1 << 40 ||
      h.d > (int64_t)1 << 24 || h.payload != size - sizeof h ||
      h.payload % ((uint64_t)(h.d + 1) * 4) || h.payload / ((uint64_t)(h.d + 1) * 4) != (uint64_t)h.n)
    return sg_err_set(SG_EFORMAT, "%s: sizes n=%lld d=%lld payload %llu B do not match the file's %zu B",
                      path, (long long)h.n, (long long)h.d, (unsigned long long)h.payload, size);
  if (sg_dataset_checksum_(m + sizeof h, h.payload) != h.sum)
    return sg_err_set(SG_EFORMAT, "%s: payload checksum mismatch", path);
  const int32_t *y = (const int32_t *)(m + sizeof h + (size_t)h.n * (size_t)h.d * 4);
  for (int64_t i = 0; i < h.n; i++)
    if (y[i] < 0 || y[i] >= h.classes)
      return sg_err_set(SG_EFORMAT, "%s: label %d of row %lld out of range", path, y[i], (long long)i);
  return SG_OK;
}

/* Map path if it is ours and valid: SG_OK, SG_ENOTFOUND, or SG_EFORMAT /
 * SG_EIO with the reason (the caller rebuilds). */
static int map_cache(int dfd, const char *name, const char *path, uint64_t key,
                     sg_dataset_t **out) {
  int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return SG_ENOTFOUND;
  if (fd < 0) return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  struct stat st;
  int rc = SG_OK;
  void *m = MAP_FAILED;
  if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022)) {
    rc = sg_err_set(SG_EIO, "%s: not a regular file of uid %u writable by it alone", path,
                    (unsigned)geteuid());
    goto fail;
  }
  m = mmap(NULL, (size_t)st.st_size ? (size_t)st.st_size : 1, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    rc = sg_err_set(SG_EIO, "%s: mmap: %s", path, strerror(errno));
    goto fail;
  }
  SG_TRY(check_map(m, (size_t)st.st_size, key, path));
  cache_hdr_t h;
  memcpy(&h, m, sizeof h);
  sg_dataset_t *ds = sg_dataset_alloc_();
  if (!ds) {
    rc = SG_ENOMEM;
    goto fail;
  }
  ds->n = h.n;
  ds->d = h.d;
  ds->classes = h.classes;
  ds->x = (float *)((unsigned char *)m + sizeof h);
  ds->y = (int32_t *)((unsigned char *)m + sizeof h + (size_t)h.n * (size_t)h.d * 4);
  ds->map_ = m;
  ds->map_len_ = (size_t)st.st_size;
  *out = ds;
  close(fd);
  return SG_OK;
fail:
  if (m != MAP_FAILED) munmap(m, (size_t)st.st_size ? (size_t)st.st_size : 1);
  close(fd);
  return rc;
}

static int write_all(int fd, const void *p, size_t n) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

/* An O_EXCL temporary (0600) in the directory dfd; its name into tmp. */
static int open_tmp(int dfd, const char *dir, char *tmp, size_t cap) {
  static _Atomic unsigned serial; /* with the pid: unique among this host's writers */
  for (int tries = 0; tries < 100; tries++) {
    snprintf(tmp, cap, ".tmp-%d-%u", (int)getpid(), serial++);
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) {
      if (fd < 0) sg_err_set(SG_EIO, "data cache %s/%s: %s", dir, tmp, strerror(errno));
      return fd;
    }
  }
  return sg_err_set(SG_EIO, "data cache %s: no free temporary name", dir);
}

/* Write ds to an O_EXCL temporary in dfd and rename it to name. */
static int write_cache(int dfd, const char *dir, const char *name, const char *path, uint64_t key,
                       const sg_dataset_t *ds) {
  char tmp[64];
  int fd = open_tmp(dfd, dir, tmp, sizeof tmp);
  if (fd < 0) return fd;
  size_t nx = (size_t)ds->n * (size_t)ds->d * 4, ny = (size_t)ds->n * 4;
  cache_hdr_t h = {.key = key, .n = ds->n, .d = ds->d, .classes = ds->classes,
                   .version = CACHE_VERSION, .payload = nx + ny};
  memcpy(h.magic, CACHE_MAGIC, 8);
  /* the checksum runs over the payload as one buffer: x then y */
  unsigned char *buf = malloc(nx + ny);
  if (!buf) {
    close(fd);
    unlinkat(dfd, tmp, 0);
    return sg_err_set(SG_ENOMEM, "data cache: %zu B", nx + ny);
  }
  memcpy(buf, ds->x, nx);
  memcpy(buf + nx, ds->y, ny);
  h.sum = sg_dataset_checksum_(buf, nx + ny);
  int bad = write_all(fd, &h, sizeof h) < 0 || write_all(fd, buf, nx + ny) < 0;
  free(buf);
  if (close(fd) < 0) bad = 1;
  if (bad || renameat(dfd, tmp, dfd, name) < 0) {
    int e = errno;
    unlinkat(dfd, tmp, 0);
    return sg_err_set(SG_EIO, "data cache %s: %s", path, strerror(e));
  }
  return SG_OK;
}

void (*sg_dataset_cache_race_hook_)(void);

int sg_dataset_load_idx_shared(sg_dataset_t **out, const char *images, const char *labels,
                               int64_t limit, const char *dir) {
  uint64_t key = 0;
  char name[64], path[1100];
  SG_CHECK(source_key(images, labels, limit, &key));
  int dfd = private_dir(dir);
  if (dfd < 0) return dfd;
  snprintf(name, sizeof name, "idx-%016llx.sgc", (unsigned long long)key);
  snprintf(path, sizeof path, "%s/%s", dir, name); /* for messages */
  sg_dataset_t *ds = NULL;
  int rc = map_cache(dfd, name, path, key, out);
  if (rc != SG_OK) {
    if (rc != SG_ENOTFOUND)
      fprintf(stderr, "sgdlab: rebuilding the data cache: %s\n", sg_err_msg());
    sg_err_clear();
    SG_TRY(sg_dataset_load_idx(&ds, images, labels, limit));
    if (sg_dataset_cache_race_hook_) sg_dataset_cache_race_hook_();
    SG_TRY(write_cache(dfd, dir, name, path, key, ds));
    rc = map_cache(dfd, name, path, key, out);
  }
fail:
  sg_dataset_destroy(&ds);
  close(dfd);
  return rc;
}
