/* reconcile.c - runs whose harness died (see reconcile.h). */
#include "reconcile.h"

#include <ctype.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "proc.h"
#include "rundir.h"

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

typedef struct dead_run {
  sqlite3_int64 id;
  int pid;
  char dir[64];
  char proof[SG_RUNDIR_PROOF_LEN + 1];
} dead_run_t;

/* The 'running' runs of this host whose run directory proves them ours
 * and their harness gone (rundir.h: the owner file, its hash in run_info
 * tmp_dir.proof), into out[].
 * A row without that proof is left as it is, whatever it claims. */
static int find_dead(sqlite3 *db, dead_run_t *out, int cap, int *n) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  sqlite3_stmt *st = NULL;
  *n = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT r.id, r.harness_pid, r.tmp_dir, i.value FROM runs r"
                         " JOIN run_info i ON i.run_id = r.id AND i.key = 'tmp_dir.proof'"
                         " WHERE r.status='running' AND r.harness_host=?1"
                         " AND r.harness_pid IS NOT NULL ORDER BY r.id LIMIT ?2",
                         -1, &st, NULL) != SQLITE_OK)
    return sg_err_set(SG_EIO, "results db: looking for runs of dead harnesses: %s",
                      sqlite3_errmsg(db));
  sqlite3_bind_text(st, 1, host, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 2, cap);
  while (sqlite3_step(st) == SQLITE_ROW) {
    dead_run_t *d = &out[*n];
    const char *dir = (const char *)sqlite3_column_text(st, 2);
    const char *proof = (const char *)sqlite3_column_text(st, 3);
    snprintf(d->dir, sizeof d->dir, "%s", dir ? dir : "");
    snprintf(d->proof, sizeof d->proof, "%s", proof ? proof : "");
    if (!sg_rundir_reclaim(d->dir, d->proof, NULL)) continue;
    d->id = sqlite3_column_int64(st, 0);
    d->pid = sqlite3_column_int(st, 1);
    ++*n;
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
    int removed = 0; /* marked first: a directory half removed would prove nothing later */
    sg_rundir_reclaim(dead[i].dir, dead[i].proof, &removed);
    fprintf(stderr, "sgdlab: run %lld: its harness (pid %d) is gone; marked failed (harness died)%s%s\n",
            (long long)dead[i].id, dead[i].pid, removed ? ", removed " : "", removed ? dead[i].dir : "");
  }
  rc = n;
fail:
  sqlite3_finalize(st);
  free(dead);
  return rc;
}
