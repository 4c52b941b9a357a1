/* report_files.c - a report directory holds only what its last report
 * drew.
 *
 * Each report lists the files it wrote in DIR/report-files.txt.  The next
 * report into DIR removes the files of the old list that it did not write
 * itself, so a figure an earlier report drew (say, staleness.png of an
 * async experiment) does not linger beside a report that has no such
 * figure.  A file is removed only when the old list names it, its name is
 * a report name (*.png *.svg *.gp *.tsv, summary.md, index.html), it is a
 * plain file name (no '/', no leading '.') and it is a regular file (not
 * a link): a user's own files in DIR are never touched, whatever the list
 * says.
 */
#define _GNU_SOURCE /* O_NOFOLLOW */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "outfile.h"
#include "report.h"

int sg_rfiles_is_report_name(const char *name) {
  static const char *const exts[] = {".png", ".svg", ".gp", ".tsv", NULL};
  size_t len = strlen(name);
  if (!len || name[0] == '.' || strchr(name, '/')) return 0;
  if (!strcmp(name, "summary.md") || !strcmp(name, "index.html")) return 1;
  for (const char *const *e = exts; *e; e++) {
    size_t el = strlen(*e);
    if (len > el && !strcmp(name + len - el, *e)) return 1;
  }
  return 0;
}

static int listed(const sg_rfiles_t *w, const char *name) {
  for (size_t i = 0; i < w->n; i++)
    if (!strcmp(w->names[i], name)) return 1;
  return 0;
}

int sg_rfiles_add(sg_rfiles_t *w, const char *name) {
  if (listed(w, name)) return SG_OK;
  if (w->n == w->cap) {
    size_t nc = w->cap ? 2 * w->cap : 32;
    void *p = realloc(w->names, nc * sizeof *w->names);
    if (!p) return sg_err_set(SG_ENOMEM, "report: out of memory");
    w->names = p;
    w->cap = nc;
  }
  if (!(w->names[w->n] = strdup(name)))
    return sg_err_set(SG_ENOMEM, "report: out of memory");
  w->n++;
  return SG_OK;
}

void sg_rfiles_free(sg_rfiles_t *w) {
  for (size_t i = 0; i < w->n; i++) free(w->names[i]);
  free(w->names);
  memset(w, 0, sizeof *w);
}

/* Remove the old manifest's files that `w` does not hold (dir: opened
 * with sg_out_dir_open; every name relative to its descriptor). */
static int prune(const sg_rfiles_t *w, const char *dir, int *removed) {
  char line[512];
  int dfd = sg_out_dir_fd(dir);
  int fd = dfd < 0 ? -1 : openat(dfd, SG_REPORT_MANIFEST, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "r");
  if (!f) {
    int e = errno;
    if (fd >= 0) close(fd);
    return e == ENOENT ? SG_OK
                       : sg_err_set(SG_EIO, "cannot read %s/%s: %s", dir, SG_REPORT_MANIFEST,
                                    strerror(e));
  }
  while (fgets(line, sizeof line, f)) {
    struct stat sb;
    line[strcspn(line, "\r\n")] = '\0';
    if (!sg_rfiles_is_report_name(line) || listed(w, line)) continue;
    if (fstatat(dfd, line, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (unlinkat(dfd, line, 0) != 0 && errno != ENOENT) {
      int e = errno;
      fclose(f);
      return sg_err_set(SG_EIO, "cannot remove %s/%s (left by an earlier report): %s", dir,
                        line, strerror(e));
    }
    (*removed)++;
  }
  fclose(f);
  return SG_OK;
}

int sg_rfiles_commit(const sg_rfiles_t *w, const char *dir, int *removed) {
  int n = 0;
  FILE *f;
  SG_CHECK(prune(w, dir, &n));
  if (removed) *removed = n;
  /* write-then-rename: an interrupted report never leaves half a list */
  SG_CHECK(sg_out_fopen(&f, dir, SG_REPORT_MANIFEST));
  for (size_t i = 0; i < w->n; i++) fprintf(f, "%s\n", w->names[i]);
  return sg_out_fclose(f);
}
