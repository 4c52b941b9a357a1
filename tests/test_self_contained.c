/* test_self_contained.c - the repository stands alone: no file in it
 * refers to notes or checkouts outside it.
 *
 * Every text file under the source tree (without .git, results/ and
 * build directories: a directory with a CMakeCache.txt) is searched for
 * the forbidden strings below.  They are stored with a '|' where they
 * are cut, and joined only at run time, so that neither this file, its
 * object code nor the test's output holds one (a hit is reported in the
 * cut form).  One case plants such a reference in
 * a scratch tree and shows the scan finds it, with file and line.
 */
#include "test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "run_util.h"

static const char *const forbidden[] = {
    "DESIGN|.md", "STYLE|.md", "../|shared", "/work/|notes", "/work/|main", "/work/|wt-", NULL,
};

/* A cut string joined: "DESIGN|.md" without its '|'. */
static const char *joined(const char *cut, char *buf, size_t cap) {
  size_t n = 0;
  for (const char *c = cut; *c && n + 1 < cap; c++)
    if (*c != '|') buf[n++] = *c;
  buf[n] = '\0';
  return buf;
}

/* The first forbidden string in `path` (a text file), with its line; 0 when
 * there is none or the file is binary (a NUL in it). */
static int scan_file(const char *path, char *hit, size_t cap) {
  char *text = ru_slurp(path, 16u << 20);
  if (!text) return 0;
  struct stat sb;
  size_t len = stat(path, &sb) == 0 ? (size_t)sb.st_size : 0;
  int found = 0;
  if (strlen(text) >= len) /* no NUL: text */
    for (int i = 0; forbidden[i] && !found; i++) {
      char want[64];
      const char *at = strstr(text, joined(forbidden[i], want, sizeof want));
      if (!at) continue;
      int line = 1;
      for (const char *p = text; p < at; p++) line += *p == '\n';
      snprintf(hit, cap, "%s:%d: refers to '%s'", path, line, forbidden[i]);
      found = 1;
    }
  free(text);
  return found;
}

static int is_build_dir(const char *dir) {
  char p[4200];
  snprintf(p, sizeof p, "%s/CMakeCache.txt", dir);
  return access(p, F_OK) == 0;
}

/* Walk `dir`; the number of files with a forbidden string, each printed,
 * the first into hit (left as it is when it already holds one). */
static int scan_tree(const char *dir, int top, char *hit, size_t cap) {
  DIR *d = opendir(dir);
  int bad = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || !strcmp(e->d_name, ".git"))
      continue;
    if (top && !strcmp(e->d_name, "results")) continue; /* a user's results, not the source */
    char p[4096], h[4400];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      if (!is_build_dir(p)) bad += scan_tree(p, 0, hit, cap);
    } else if (S_ISREG(sb.st_mode) && scan_file(p, h, sizeof h)) {
      fprintf(stderr, "  %s\n", h);
      if (!hit[0]) snprintf(hit, cap, "%s", h);
      bad++;
    }
  }
  closedir(d);
  return bad;
}

TEST(no_file_refers_outside_the_repository) {
  const char *src = getenv("SGDLAB_SOURCE_DIR");
  CHECK_MSG(src && *src, "SGDLAB_SOURCE_DIR is not set (run through ctest)");
  char hit[4400] = "";
  int bad = scan_tree(src, 1, hit, sizeof hit);
  CHECK_MSG(bad == 0, "%d file(s) refer outside the repository, first: %s", bad, hit);
}

TEST(a_planted_reference_is_found) {
  char dir[64], sub[128], file[192], hit[4400] = "";
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "selfc"));
  snprintf(sub, sizeof sub, "%s/docs", dir);
  CHECK(mkdir(sub, 0700) == 0);
  snprintf(file, sizeof file, "%s/clean.md", sub);
  CHECK_OK(ru_write_file(file, "# clean\nnothing outside\n"));
  CHECK_EQ_INT(scan_tree(dir, 1, hit, sizeof hit), 0);
  snprintf(file, sizeof file, "%s/planted.md", sub);
  char planted[128], want[64];
  snprintf(planted, sizeof planted, "# planted\nas %s says\n", joined(forbidden[0], want, sizeof want));
  CHECK_OK(ru_write_file(file, planted));
  CHECK_EQ_INT(scan_tree(dir, 1, hit, sizeof hit), 1);
  CHECK_STR_CONTAINS(hit, "planted.md:2: refers to 'DESIGN|");
  ru_rm_rf(dir);
}
