/* outfile.c - outputs only into the user's own directories and files
 * (see outfile.h for the rules). */
#define _GNU_SOURCE /* O_NOFOLLOW, O_DIRECTORY, fdopendir */
#include "outfile.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

enum { MAX_DIRS = 32, MAX_FILES = 32, MAX_HOPS = 40 };

typedef struct out_dir {
  char *given, *real;
  int fd;
} out_dir_t;

typedef struct out_file {
  FILE *f;
  const out_dir_t *dir;
  char tmp[NAME_MAX + 1], name[NAME_MAX + 1];
} out_file_t;

static out_dir_t g_dirs[MAX_DIRS]; /* given == NULL: a free slot */
static out_file_t g_files[MAX_FILES];

/* A walk from "/" to the output directory. */
typedef struct walk {
  const char *what, *given;
  int fd;                   /* the directory reached so far */
  char real[PATH_MAX];      /* its path: real components only */
  char rest[2 * PATH_MAX];  /* what is left to walk */
  int hops;                 /* symbolic links followed */
} walk_t;

static int refuse(const walk_t *w, const char *why) {
  return sg_err_set(SG_EINVAL, "%s: %s; sgdlab writes only into directories of its own user "
                    "that no one else can write", w->what, why);
}

static const char *shown(const walk_t *w) { return w->real[0] ? w->real : "/"; }

/* A directory on the way: root's or ours; sticky when others may write. */
static int check_on_way(const walk_t *w, const struct stat *sb) {
  char why[PATH_MAX + 96];
  if (sb->st_uid != 0 && sb->st_uid != geteuid()) {
    snprintf(why, sizeof why, "%s is owned by uid %u", shown(w), (unsigned)sb->st_uid);
    return refuse(w, why);
  }
  if ((sb->st_mode & 022) && !(sb->st_mode & S_ISVTX)) {
    snprintf(why, sizeof why, "%s is writable by others (mode %o) and not sticky", shown(w),
             (unsigned)(sb->st_mode & 07777));
    return refuse(w, why);
  }
  return SG_OK;
}

/* The output directory itself: ours, writable by nobody else. */
static int check_final(const walk_t *w, const struct stat *sb) {
  char why[PATH_MAX + 96];
  if (sb->st_uid != geteuid()) {
    snprintf(why, sizeof why, "%s is owned by uid %u, not by you (uid %u)", shown(w),
             (unsigned)sb->st_uid, (unsigned)geteuid());
    return refuse(w, why);
  }
  if (sb->st_mode & 022) {
    snprintf(why, sizeof why, "%s is writable by its group or others (mode %o)", shown(w),
             (unsigned)(sb->st_mode & 07777));
    return refuse(w, why);
  }
  return SG_OK;
}

/* The next component of w->rest into comp (empty when none is left);
 * -1 when it is longer than a file name can be. */
static int next_comp(walk_t *w, char *comp, size_t cap) {
  char *s = w->rest;
  while (*s == '/') s++;
  size_t n = strcspn(s, "/");
  if (n >= cap) return -1;
  snprintf(comp, cap, "%.*s", (int)n, s);
  memmove(w->rest, s + n, strlen(s + n) + 1);
  return 0;
}

static int last_comp(const walk_t *w) { return w->rest[strspn(w->rest, "/")] == '\0'; }

/* comp is a symbolic link: follow it when root or we own it and it is
 * not the output directory itself. */
static int follow(walk_t *w, const char *comp, const struct stat *lsb) {
  char target[PATH_MAX], rest[3 * PATH_MAX], why[PATH_MAX + 96];
  if (last_comp(w)) {
    snprintf(why, sizeof why, "%s/%s is a symbolic link", w->real, comp);
    return refuse(w, why);
  }
  if (lsb->st_uid != 0 && lsb->st_uid != geteuid()) {
    snprintf(why, sizeof why, "%s/%s is a symbolic link owned by uid %u", w->real, comp,
             (unsigned)lsb->st_uid);
    return refuse(w, why);
  }
  if (++w->hops > MAX_HOPS) return refuse(w, "too many symbolic links");
  ssize_t n = readlinkat(w->fd, comp, target, sizeof target - 1);
  if (n <= 0)
    return sg_err_set(SG_EIO, "%s: cannot read the link %s/%s: %s", w->what, w->real,
                      comp, strerror(errno));
  target[n] = '\0';
  snprintf(rest, sizeof rest, "%s/%s", target, w->rest);
  if (strlen(rest) >= sizeof w->rest) return refuse(w, "the path is too long");
  memcpy(w->rest, rest, strlen(rest) + 1);
  if (target[0] == '/') {
    int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) return sg_err_set(SG_EIO, "cannot open /: %s", strerror(errno));
    close(w->fd);
    w->fd = root;
    w->real[0] = '\0';
  }
  return SG_OK;
}

/* Into directory comp of w->fd (created when missing and create is set);
 * w->real follows. */
static int step(walk_t *w, const char *comp, int create) {
  struct stat sb;
  char why[PATH_MAX + 96];
  if (fstatat(w->fd, comp, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT)
      return sg_err_set(SG_EIO, "%s: %s/%s: %s", w->what, w->real, comp,
                        strerror(errno));
    if (!create)
      return sg_err_set(SG_ENOTFOUND, "%s: %s/%s does not exist", w->what, w->real,
                        comp);
    if (mkdirat(w->fd, comp, 0755) != 0 && errno != EEXIST)
      return sg_err_set(SG_EIO, "%s: cannot create %s/%s: %s", w->what, w->real,
                        comp, strerror(errno));
    return step(w, comp, 0);
  }
  if (S_ISLNK(sb.st_mode)) return follow(w, comp, &sb);
  if (!S_ISDIR(sb.st_mode)) {
    snprintf(why, sizeof why, "%s/%s is not a directory", w->real, comp);
    return refuse(w, why);
  }
  /* O_PATH: directories on the way need only be searchable */
  int fd = openat(w->fd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &sb) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open %s/%s: %s", w->what, w->real, comp,
                      strerror(e));
  }
  close(w->fd);
  w->fd = fd;
  if (!strcmp(comp, "..")) {
    char *slash = strrchr(w->real, '/');
    if (slash) *slash = '\0';
  } else {
    size_t len = strlen(w->real);
    snprintf(w->real + len, sizeof w->real - len, "/%s", comp);
  }
  return last_comp(w) ? check_final(w, &sb) : check_on_way(w, &sb);
}

/* Walk w->rest from "/" to its end. */
static int walk(walk_t *w, int create) {
  char comp[NAME_MAX + 1];
  struct stat sb;
  w->fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (w->fd < 0 || fstat(w->fd, &sb) != 0)
    return sg_err_set(SG_EIO, "cannot open /: %s", strerror(errno));
  w->real[0] = '\0';
  SG_CHECK(last_comp(w) ? check_final(w, &sb) : check_on_way(w, &sb));
  while (!last_comp(w)) {
    if (next_comp(w, comp, sizeof comp) < 0) return refuse(w, "a name in the path is too long");
    if (!strcmp(comp, ".")) {
      if (last_comp(w)) { /* "dir/." is dir: check it as the output directory */
        if (fstat(w->fd, &sb) != 0) return sg_err_set(SG_EIO, "fstat: %s", strerror(errno));
        SG_CHECK(check_final(w, &sb));
      }
      continue;
    }
    SG_CHECK(step(w, comp, create));
  }
  return SG_OK;
}

static const out_dir_t *find_dir(const char *dir) {
  for (size_t i = 0; i < MAX_DIRS; i++)
    if (g_dirs[i].given && !strcmp(g_dirs[i].given, dir)) return &g_dirs[i];
  return NULL;
}

static out_dir_t *free_dir(void) {
  for (size_t i = 0; i < MAX_DIRS; i++)
    if (!g_dirs[i].given) return &g_dirs[i];
  return NULL;
}

void sg_out_dir_close(const char *dir) {
  out_dir_t *d = (out_dir_t *)find_dir(dir);
  if (!d) return;
  for (size_t i = 0; i < MAX_FILES; i++)
    if (g_files[i].f && g_files[i].dir == d) return; /* still in use */
  close(d->fd);
  free(d->given);
  free(d->real);
  *d = (out_dir_t){.fd = -1};
}

int sg_out_dir_open(const char *dir, int create, const char *what) {
  const out_dir_t *have = find_dir(dir);
  if (have) return have->fd;
  walk_t *w = calloc(1, sizeof *w);
  if (!w) return sg_err_set(SG_ENOMEM, "out of memory");
  *w = (walk_t){.what = what, .given = dir, .fd = -1};
  int rc = SG_OK;
  if (!dir[0]) {
    rc = sg_err_set(SG_EINVAL, "%s: an empty path", what);
    goto out;
  }
  if (dir[0] != '/' && !getcwd(w->rest, PATH_MAX)) {
    rc = sg_err_set(SG_EIO, "%s: cannot tell the current directory: %s", what,
                    strerror(errno));
    goto out;
  }
  size_t len = strlen(w->rest);
  snprintf(w->rest + len, sizeof w->rest - len, "/%s", dir);
  if ((rc = walk(w, create)) < 0) goto out;
  int rd = openat(w->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* to list it */
  if (rd < 0) {
    rc = sg_err_set(SG_EIO, "%s: cannot open %s: %s", what, w->real, strerror(errno));
    goto out;
  }
  close(w->fd);
  w->fd = rd;
  out_dir_t *d = free_dir();
  if (!d) {
    rc = sg_err_set(SG_EINTERNAL, "%s: too many output directories", what);
    goto out;
  }
  if (!(d->given = strdup(dir)) || !(d->real = strdup(w->real[0] ? w->real : "/"))) {
    free(d->given);
    d->given = NULL;
    rc = sg_err_set(SG_ENOMEM, "out of memory");
    goto out;
  }
  d->fd = w->fd;
  w->fd = -1;
  rc = d->fd;
out:
  if (w->fd >= 0) close(w->fd);
  free(w);
  return rc;
}

const char *sg_out_dir_real(const char *dir) {
  const out_dir_t *d = find_dir(dir);
  return d ? d->real : NULL;
}

int sg_out_dir_fd(const char *dir) {
  const out_dir_t *d = find_dir(dir);
  return d ? d->fd : -1;
}

/* name's entry in d: absent, or a regular file of ours with one link. */
static int check_in(const out_dir_t *d, const char *name) {
  struct stat sb;
  const char *why = NULL;
  if (fstatat(d->fd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return SG_OK;
    return sg_err_set(SG_EIO, "%s/%s: %s", d->given, name, strerror(errno));
  }
  if (S_ISLNK(sb.st_mode)) why = "is a symbolic link";
  else if (!S_ISREG(sb.st_mode)) why = "is not a regular file";
  else if (sb.st_uid != geteuid()) why = "is not yours";
  else if (sb.st_nlink != 1) why = "has more than one hard link";
  if (!why) return SG_OK;
  return sg_err_set(SG_EINVAL, "%s/%s %s (owner uid %u); sgdlab replaces only regular files of "
                    "its own user", d->given, name, why, (unsigned)sb.st_uid);
}

/* d for dir: opened already, or opened now without creating it. */
static int dir_for(const char *dir, const out_dir_t **d) {
  char what[PATH_MAX + 32];
  snprintf(what, sizeof what, "output directory %s", dir);
  int rc = (*d = find_dir(dir)) ? SG_OK : sg_out_dir_open(dir, 0, what);
  if (rc < 0) return rc;
  *d = find_dir(dir);
  return SG_OK;
}

int sg_out_check_entry(const char *dir, const char *name) {
  const out_dir_t *d;
  SG_CHECK(dir_for(dir, &d));
  return check_in(d, name);
}

int sg_out_check_entries(const char *dir, int (*want)(const char *name)) {
  const out_dir_t *d;
  SG_CHECK(dir_for(dir, &d));
  int fd = dup(d->fd), rc = SG_OK;
  DIR *dh = fd >= 0 ? fdopendir(fd) : NULL;
  if (!dh) {
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "cannot list %s: %s", dir, strerror(errno));
  }
  rewinddir(dh);
  for (struct dirent *e; rc == SG_OK && (e = readdir(dh));) {
    struct stat sb;
    if (!want(e->d_name) || fstatat(d->fd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (sb.st_uid != geteuid())
      rc = sg_err_set(SG_EINVAL, "%s/%s is not yours (owner uid %u); sgdlab replaces only "
                      "regular files of its own user", d->given, e->d_name, (unsigned)sb.st_uid);
  }
  closedir(dh);
  return rc;
}

/* path into its directory (dir, "." for a bare name) and its name. */
static int split(const char *path, char *dir, size_t dcap, char *name, size_t ncap) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
    return sg_err_set(SG_EINVAL, "output %s: names a directory, not a file", path);
  if (strlen(base) >= ncap) return sg_err_set(SG_EINVAL, "output %s: the name is too long", path);
  snprintf(name, ncap, "%s", base);
  if (!slash) snprintf(dir, dcap, ".");
  else if (slash == path) snprintf(dir, dcap, "/");
  else snprintf(dir, dcap, "%.*s", (int)(slash - path), path);
  return SG_OK;
}

int sg_out_check_path(const char *path) {
  char dir[PATH_MAX], name[NAME_MAX + 1];
  SG_CHECK(split(path, dir, sizeof dir, name, sizeof name));
  char what[PATH_MAX + 32];
  snprintf(what, sizeof what, "output %s", path);
  int fd = sg_out_dir_open(dir, 0, what);
  if (fd < 0) return fd;
  return sg_out_check_entry(dir, name);
}

/* A free slot of g_files, or NULL. */
static out_file_t *file_slot(void) {
  for (size_t i = 0; i < MAX_FILES; i++)
    if (!g_files[i].f) return &g_files[i];
  return NULL;
}

/* Create a new file with an unpredictable name next to name in d. */
static int open_tmp(const out_dir_t *d, out_file_t *o, const char *name) {
  for (int tries = 0; tries < 64; tries++) {
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -1;
    snprintf(o->tmp, sizeof o->tmp, ".%.200s.%02x%02x%02x%02x%02x%02x%02x%02x.tmp", name, r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7]);
    int fd = openat(d->fd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

int sg_out_fopen(FILE **f, const char *dir, const char *name) {
  const out_dir_t *d;
  out_file_t *o = file_slot();
  *f = NULL;
  SG_CHECK(dir_for(dir, &d));
  if (!o) return sg_err_set(SG_EINTERNAL, "too many output files open");
  if (strlen(name) > NAME_MAX || strchr(name, '/'))
    return sg_err_set(SG_EINVAL, "%s/%s: not a file name", dir, name);
  SG_CHECK(check_in(d, name));
  snprintf(o->name, sizeof o->name, "%s", name);
  int fd = open_tmp(d, o, name);
  if (fd < 0) return sg_err_set(SG_EIO, "cannot write %s/%s: %s", dir, name, strerror(errno));
  if (!(o->f = fdopen(fd, "w"))) {
    close(fd);
    unlinkat(d->fd, o->tmp, 0);
    return sg_err_set(SG_ENOMEM, "cannot write %s/%s: out of memory", dir, name);
  }
  o->dir = d;
  *f = o->f;
  return SG_OK;
}

int sg_out_fopen_path(FILE **f, const char *path) {
  char dir[PATH_MAX], name[NAME_MAX + 1];
  *f = NULL;
  SG_CHECK(split(path, dir, sizeof dir, name, sizeof name));
  return sg_out_fopen(f, dir, name);
}

static out_file_t *file_of(FILE *f) {
  for (size_t i = 0; f && i < MAX_FILES; i++)
    if (g_files[i].f == f) return &g_files[i];
  return NULL;
}

int sg_out_fclose(FILE *f) {
  out_file_t *o = file_of(f);
  if (!o) return sg_err_set(SG_EINTERNAL, "sg_out_fclose: not an output file");
  int bad = ferror(f), rc = SG_OK;
  if (fflush(f) != 0) bad = 1;
  if (fclose(f) != 0) bad = 1;
  o->f = NULL;
  if (bad) rc = sg_err_set(SG_EIO, "cannot write %s/%s: %s", o->dir->given, o->name, strerror(errno));
  else if ((rc = check_in(o->dir, o->name)) == SG_OK &&
           renameat(o->dir->fd, o->tmp, o->dir->fd, o->name) != 0)
    rc = sg_err_set(SG_EIO, "cannot write %s/%s: %s", o->dir->given, o->name, strerror(errno));
  if (rc < 0) unlinkat(o->dir->fd, o->tmp, 0);
  return rc;
}

void sg_out_discard(FILE *f) {
  out_file_t *o = file_of(f);
  if (!o) return;
  fclose(f);
  o->f = NULL;
  unlinkat(o->dir->fd, o->tmp, 0);
}

int sg_out_unlink(const char *dir, const char *name) {
  const out_dir_t *d;
  SG_CHECK(dir_for(dir, &d));
  SG_CHECK(check_in(d, name));
  if (unlinkat(d->fd, name, 0) != 0 && errno != ENOENT)
    return sg_err_set(SG_EIO, "cannot remove %s/%s: %s", dir, name, strerror(errno));
  return SG_OK;
}
