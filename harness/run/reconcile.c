/* reconcile.c - runs whose harness died (see reconcile.h). */
#define _GNU_SOURCE /* fdopendir, openat, O_NOFOLLOW */
#include "reconcile.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "proc.h"

enum { RECONCILE_MAX = 256 }; /* runs looked at per open (the rest: next time) */

int sg_proc_identity(int pid, char *out, size_t cap) {
  char buf[1024], boot[64] = "?";
  const char *s = sg_proc_stat(pid, buf, sizeof buf), *start;
  if (!s || s[0] == 'Z' || s[0] == 'X') return -1;
  if (!(start = sg_proc_field(s, 22)) || !isdigit((unsigned char)*start)) return -1;
  unsigned long long ticks = strtoull(start, NULL, 10);
  FILE *f;
  if ((f = fopen("/proc/sys/kernel/random/boot_id", "r"))) {
    if (!fgets(boot, sizeof boot, f)) snprintf(boot, sizeof boot, "?");
    boot[strcspn(boot, "\n")] = '\0';
    fclose(f);
  }
  snprintf(out, cap, "%llu@%s", ticks, boot);
  return 0;
}

int sg_run_dir_pattern(const char *dir) {
  static const char prefix[] = "/tmp/sgdlab-";
  size_t pl = sizeof prefix - 1;
  if (!dir || strncmp(dir, prefix, pl) || strlen(dir) != pl + 6) return 0;
  for (size_t i = pl; i < pl + 6; i++)
    if (!isalnum((unsigned char)dir[i])) return 0;
  return 1;
}

/* Remove a dead run's temp dir: the pattern, a real directory (O_NOFOLLOW:
 * never a symlink's target), ours; its files (not subdirectories), then
 * the directory.  1 when removed. */
static int remove_run_dir(const char *dir) {
  if (!sg_run_dir_pattern(dir)) return 0;
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0; /* gone already, or not a directory */
  struct stat sb;
  int dfd = -1;
  DIR *d = NULL;
  if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode) && sb.st_uid == geteuid() &&
      (dfd = dup(fd)) >= 0 && (d = fdopendir(dfd))) {
    struct dirent *e;
    while ((e = readdir(d))) {
      struct stat es;
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      if (fstatat(fd, e->d_name, &es, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(es.st_mode))
        unlinkat(fd, e->d_name, 0);
    }
    closedir(d); /* closes dfd */
  } else if (dfd >= 0) {
    close(dfd);
  }
  int ours = d != NULL;
  close(fd);
  return ours && rmdir(dir) == 0;
}

/* Whether the harness recorded as (pid, identity) still runs here. */
static int harness_alive(int pid, const char *identity) {
  char now[128];
  return sg_proc_identity(pid, now, sizeof now) == 0 && identity && !strcmp(now, identity);
}

typedef struct dead_run {
  sqlite3_int64 id;
  int pid;
  char dir[64];
} dead_run_t;

/* The 'running' runs of this host whose harness is gone, into out[]. */
static int find_dead(sqlite3 *db, dead_run_t *out, int cap, int *n) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  sqlite3_stmt *st = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT id, harness_pid, harness_start, tmp_dir FROM runs WHERE"
                         " status='running' AND harness_host=?1 AND harness_pid IS NOT NULL"
                         " ORDER BY id LIMIT ?2",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "results db: looking for runs of dead harnesses: %s",
                      sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, host, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, cap);
  while (sqlite3_step(st) == SQLITE_ROW) {
    int pid = sqlite3_column_int(st, 1);
    if (harness_alive(pid, (const char *)sqlite3_column_text(st, 2))) continue;
    dead_run_t *d = &out[(*n)++];
    d->id = sqlite3_column_int64(st, 0);
    d->pid = pid;
    snprintf(d->dir, sizeof d->dir, "%s",
             sqlite3_column_text(st, 3) ? (const char *)sqlite3_column_text(st, 3) : "");
  }
  sqlite3_finalize(st);
  return SG_OK;
}

int sg_reconcile(sg_recorder_t *r) {
  sqlite3 *db = sg_recorder_sqlite(r);
  dead_run_t *dead = calloc(RECONCILE_MAX, sizeof *dead);
  sqlite3_stmt *st = NULL;
  int n = 0, rc = SG_OK;
  if (!dead) return SG_ENOMEM;
  SG_TRY(sg_recorder_flush(r));
  SG_TRY(find_dead(db, dead, RECONCILE_MAX, &n));
  if (n && sqlite3_prepare_v2(db,
                              "UPDATE runs SET status='failed', error='harness died',"
                              " finished_at=strftime('%Y-%m-%dT%H:%M:%fZ','now')"
                              " WHERE id=?1 AND status='running'",
                              -1, &st, NULL) != SQLITE_OK) {
    rc = sg_err_set(SG_EIO, "results db: marking runs of dead harnesses: %s", sqlite3_errmsg(db));
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    sqlite3_bind_int64(st, 1, dead[i].id);
    if (sqlite3_step(st) != SQLITE_DONE) {
      rc = sg_err_set(SG_EIO, "results db: marking run %lld failed: %s", (long long)dead[i].id,
                      sqlite3_errmsg(db));
      goto fail;
    }
    sqlite3_reset(st);
    int removed = remove_run_dir(dead[i].dir);
    fprintf(stderr, "sgdlab: run %lld: its harness (pid %d) is gone; marked failed (harness died)%s%s\n",
            (long long)dead[i].id, dead[i].pid, removed ? ", removed " : "", removed ? dead[i].dir : "");
  }
  rc = n;
fail:
  sqlite3_finalize(st);
  free(dead);
  return rc;
}

/* Whether path is an SQLite file with sgdlab's experiments and runs. */
static int is_sgdlab_db(const char *path) {
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  int yes = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_prepare_v2(db,
                           "SELECT count(*) FROM sqlite_master WHERE type='table'"
                           " AND name IN ('experiments','runs')",
                           -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      yes = sqlite3_column_int(st, 0) == 2;
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return yes;
}

void sg_reconcile_path(const char *path) {
  struct stat sb;
  sg_recorder_t *r = NULL;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode) || access(path, W_OK) != 0 ||
      !is_sgdlab_db(path))
    return;
  if (sg_recorder_open(&r, path) == SG_OK) sg_recorder_close(&r);
  sg_err_clear();
}
