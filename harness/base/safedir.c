/* safedir.c - private directories opened and removed through descriptors
 * (safedir.h). */
#define _GNU_SOURCE /* fdopendir, openat, O_NOFOLLOW, O_DIRECTORY */
#include "safedir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

enum {
  RM_MAX_DEPTH = 64, /* deeper trees are refused (each level holds a descriptor) */
  RM_PASSES = 4,     /* readdir passes over one directory while entries remain */
};

int sg_dir_open_private(int at, const char *name) {
  int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    struct stat ls;
    int link = (e == ELOOP || e == ENOTDIR) && fstatat(at, name, &ls, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISLNK(ls.st_mode);
    return sg_err_set(e == ENOENT ? SG_ENOTFOUND : SG_EINVAL, "%s: %s", name,
                      link ? "a symlink, not a directory" : strerror(e));
  }
  struct stat sb;
  if (fstat(fd, &sb) < 0 || !S_ISDIR(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077)) {
    int uid = (int)sb.st_uid;
    unsigned mode = (unsigned)(sb.st_mode & 07777);
    close(fd);
    return sg_err_set(SG_EINVAL, "%s: not a private directory of uid %d (owner %d, mode %04o)",
                      name, (int)geteuid(), uid, mode);
  }
  return fd;
}

static int rm_entries(int dfd, dev_t dev, int depth);

/* Remove subdirectory `name` of dfd: opened without following a link
 * (a link or file put there since it was looked at is unlinked itself),
 * refused unless the user's and on dev; emptied, then removed. */
static int rm_subdir(int dfd, const char *name, dev_t dev, int depth) {
  if (depth > RM_MAX_DEPTH)
    return sg_err_set(SG_ERANGE, "%s: more than %d levels deep: not removed", name, RM_MAX_DEPTH);
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return SG_OK;
    if ((errno == ELOOP || errno == ENOTDIR) && (unlinkat(dfd, name, 0) == 0 || errno == ENOENT))
      return SG_OK;
    return sg_err_set(SG_EIO, "%s: %s", name, strerror(errno));
  }
  struct stat sb;
  int rc = SG_OK;
  if (fstat(fd, &sb) < 0 || sb.st_uid != geteuid() || sb.st_dev != dev)
    rc = sg_err_set(SG_EINVAL, "%s: not the user's directory on this file system: not removed",
                    name);
  else rc = rm_entries(fd, dev, depth);
  close(fd);
  /* gone or replaced by something else since (ENOTDIR): the next pass
   * looks at whatever the name is now */
  if (rc == SG_OK && unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && errno != ENOTDIR)
    rc = sg_err_set(SG_EIO, "%s: %s", name, strerror(errno));
  return rc;
}

/* One readdir pass over dfd: unlink what is not a directory, recurse
 * into what is.  *left: entries seen. */
static int rm_pass(int dfd, DIR *d, dev_t dev, int depth, int *left) {
  int rc = SG_OK;
  struct dirent *e;
  *left = 0;
  rewinddir(d);
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    struct stat es;
    int r = SG_OK;
    ++*left;
    if (fstatat(dfd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno != ENOENT) r = sg_err_set(SG_EIO, "%s: %s", e->d_name, strerror(errno));
    } else if (S_ISDIR(es.st_mode)) {
      r = rm_subdir(dfd, e->d_name, dev, depth + 1);
    } else if (unlinkat(dfd, e->d_name, 0) < 0 && errno != ENOENT) {
      /* a directory put there since fstatat: the next pass sees it */
      if (errno != EISDIR) r = sg_err_set(SG_EIO, "%s: %s", e->d_name, strerror(errno));
    }
    if (r < 0 && rc == SG_OK) rc = r;
  }
  return rc;
}

static int rm_entries(int dfd, dev_t dev, int depth) {
  int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0), rc = SG_OK, left = 0;
  DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
  if (!d) {
    if (dup_fd >= 0) close(dup_fd);
    return sg_err_set(SG_EIO, "reading a directory to remove it: %s", strerror(errno));
  }
  for (int pass = 0; pass < RM_PASSES; pass++) {
    rc = rm_pass(dfd, d, dev, depth, &left);
    if (rc < 0 || !left) break;
  }
  closedir(d);
  if (rc == SG_OK && left)
    rc = sg_err_set(SG_EIO, "a directory still had entries after %d passes (being written?)",
                    RM_PASSES);
  return rc;
}

int sg_rmtree_fd(int dfd) {
  struct stat sb;
  if (fstat(dfd, &sb) < 0 || !S_ISDIR(sb.st_mode))
    return sg_err_set(SG_EINVAL, "removing a tree: not a directory");
  return rm_entries(dfd, sb.st_dev, 0);
}

int sg_rmtree_at(int at, const char *name) {
  int fd = sg_dir_open_private(at, name);
  if (fd == SG_ENOTFOUND) return sg_err_clear(), SG_OK;
  if (fd < 0) return fd;
  int rc = sg_rmtree_fd(fd);
  close(fd);
  if (rc == SG_OK && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
    rc = sg_err_set(SG_EIO, "%s: %s", name, strerror(errno));
  return rc;
}
