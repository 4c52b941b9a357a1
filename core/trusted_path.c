/* trusted_path.c - see trusted_path.h. */
#include "trusted_path.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

static int trusted_uid(uid_t uid, uid_t also) {
  return uid == 0 || uid == geteuid() || (also != SG_TRUSTED_NO_UID && uid == also);
}

/* Directory `fd` (named `path` in messages) may lead to what we open:
 * owned by root, by us or by `also`, and writable by no one else unless
 * sticky (/tmp), where others cannot rename or remove what is ours. */
static int safe_parent(int fd, const char *path, const char *what, uid_t also) {
  struct stat st;
  if (fstat(fd, &st) < 0) return sg_err_set(SG_EIO, "%s: %s: %s", what, path, strerror(errno));
  if (!trusted_uid(st.st_uid, also))
    return sg_err_set(SG_EIO, "%s: %s is owned by uid %u, not by root or uid %u", what, path,
                      (unsigned)st.st_uid, (unsigned)geteuid());
  if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
    return sg_err_set(SG_EIO, "%s: %s is writable by others (mode %04o, not sticky)", what, path,
                      (unsigned)(st.st_mode & 07777));
  return SG_OK;
}

/* Component buf[c..e) of a walk (cut at e, keep the byte there) is the
 * symlink st: followed only when root, we or `also` own it, its target
 * put in its place in buf.  1: the target is absolute (the walk starts at
 * / again), 0: relative (the walk goes on where it is), < 0: refused. */
static int splice_link(int fd, const struct stat *st, char *buf, size_t c, size_t e, char keep,
                       int *links, const char *what, uid_t also) {
  char link[PATH_MAX], next[PATH_MAX];
  if (!trusted_uid(st->st_uid, also))
    return sg_err_set(SG_EIO, "%s: %s is a symlink owned by uid %u, not by root or uid %u", what,
                      buf, (unsigned)st->st_uid, (unsigned)geteuid());
  ssize_t n = readlinkat(fd, buf + c, link, sizeof link - 1);
  if (n <= 0 || ++*links > 40)
    return sg_err_set(SG_EIO, "%s: %s: %s", what, buf, n <= 0 ? strerror(errno) : "too many symlinks");
  link[n] = '\0';
  buf[e] = keep;
  int absolute = link[0] == '/';
  if (snprintf(next, sizeof next, "%.*s%s%s", absolute ? 0 : (int)c, buf, link, buf + e) >=
      (int)sizeof next)
    return sg_err_set(SG_EIO, "%s %s: path too long", what, buf);
  memcpy(buf, next, strlen(next) + 1);
  return absolute;
}

/* Nothing is resolved ahead of the walk, so there is nothing to swap
 * between a check and its use. */
int sg_trusted_dir_walk(const char *abs, const char *what, uid_t also) {
  char buf[PATH_MAX];
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC), links = 0, rc = SG_OK;
  size_t at = 0; /* buf[0..at) is the part walked */
  if (strlen(abs) >= sizeof buf) {
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "%s %.64s...: path too long", what, abs);
  }
  memcpy(buf, abs, strlen(abs) + 1);
  if (fd < 0) return sg_err_set(SG_EIO, "%s /: %s", what, strerror(errno));
  if ((rc = safe_parent(fd, "/", what, also)) < 0) goto fail;
  while (buf[at]) {
    size_t c = at + strspn(buf + at, "/"), e = c + strcspn(buf + c, "/");
    char keep = buf[e];
    buf[e] = '\0';
    if (!buf[c] || !strcmp(buf + c, ".")) {
      buf[e] = keep, at = e;
      continue;
    }
    int nfd = openat(fd, buf + c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR) &&
        fstatat(fd, buf + c, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
      if ((rc = splice_link(fd, &st, buf, c, e, keep, &links, what, also)) < 0) goto fail;
      if (rc == 1) { /* an absolute target: from / again */
        close(fd);
        if ((fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) break;
        at = 0;
      }
      continue;
    }
    rc = nfd < 0 ? sg_err_set(SG_EIO, "%s: %s: %s", what, buf, strerror(errno))
                 : safe_parent(nfd, buf, what, also);
    close(fd);
    fd = nfd;
    buf[e] = keep, at = e;
    if (rc < 0) goto fail;
  }
  if (fd < 0) return sg_err_set(SG_EIO, "%s /: %s", what, strerror(errno));
  return fd;
fail:
  if (fd >= 0) close(fd);
  return rc;
}
