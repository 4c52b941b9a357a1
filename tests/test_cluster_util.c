/* test_cluster_util.c - see test_cluster_util.h. */
#define _GNU_SOURCE
#include "test_cluster_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "run_util.h"

static sg_cluster_t *g_up[16];

static void down_all(void) {
  for (int i = 0; i < 16; i++)
    if (g_up[i]) {
      fprintf(stderr, "removing cluster %s left by a failed test\n", sg_cluster_name(g_up[i]));
      sg_cluster_down(&g_up[i]);
    }
}

int tc_up(sg_cluster_t **cl, const sg_cluster_desc_t *d) {
  static int registered;
  if (!registered) registered = atexit(down_all) == 0;
  int rc = sg_cluster_up(cl, d);
  for (int i = 0; rc == 0 && i < 16; i++)
    if (!g_up[i]) {
      g_up[i] = *cl;
      break;
    }
  return rc;
}

int tc_down(sg_cluster_t **cl) {
  for (int i = 0; i < 16; i++)
    if (g_up[i] && g_up[i] == *cl) g_up[i] = NULL;
  return sg_cluster_down(cl);
}

int tc_root_or_skip(const char *test) {
  if (geteuid() == 0) return 1;
  fprintf(stderr, "SKIP %s: needs root (network namespaces); running as uid %d\n", test,
          (int)geteuid());
  return 0;
}

int tc_read_full(int fd, void *buf, size_t n, double secs) {
  double end = sg_now() + secs;
  size_t got = 0;
  while (got < n) {
    int ms = (int)((end - sg_now()) * 1000);
    if (ms <= 0) return -1;
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) continue;
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r == 0) return -1;
    if (r > 0) got += (size_t)r;
  }
  return 0;
}

int tc_wait(pid_t pid, double secs) {
  int st;
  if (!ru_wait_exit(pid, secs, &st)) {
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
  }
  return ru_exit_code(st);
}

int tc_run(char *const *argv, int ns_fd, char *out, size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (ns_fd >= 0 && setns(ns_fd, CLONE_NEWNET) < 0) _exit(126);
    dup2(p[1], 1);
    dup2(p[1], 2);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(p[1]);
  size_t n = 0;
  double end = sg_now() + 30;
  for (;;) {
    int ms = (int)((end - sg_now()) * 1000);
    struct pollfd pf = {p[0], POLLIN, 0};
    if (ms <= 0 || poll(&pf, 1, ms) < 0) break;
    char sink[512];
    int room = n + 1 < cap;
    ssize_t r = read(p[0], room ? out + n : sink, room ? cap - 1 - n : sizeof sink);
    if (r <= 0) break;
    if (room) n += (size_t)r;
  }
  out[n] = '\0';
  close(p[0]);
  return tc_wait(pid, 5);
}

int tc_ns_exists(const char *ns) {
  char path[256];
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  return access(path, F_OK) == 0;
}

int tc_ns_count(const char *prefix) {
  DIR *d = opendir("/run/netns");
  int n = 0;
  if (!d) return 0;
  for (struct dirent *e; (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
  closedir(d);
  return n;
}

int tc_has_link(int ns_fd, const char *needle) {
  static char out[65536];
  char *argv[] = {"ip", "-o", "link", "show", NULL};
  if (tc_run(argv, ns_fd, out, sizeof out) != 0) return -1;
  return strstr(out, needle) != NULL;
}

int tc_links_besides_lo(int ns_fd) {
  static char out[65536];
  char *argv[] = {"ip", "-o", "link", "show", NULL};
  if (tc_run(argv, ns_fd, out, sizeof out) != 0) return -1;
  int n = 0;
  char *save;
  for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
    n += strstr(line, ": lo:") == NULL;
  return n;
}

void tc_name(char tag, char *out, size_t cap) {
  snprintf(out, cap, "%c%x", tag, (unsigned)getpid() & 0xfffffffu);
}

const char *tc_owner(void) {
  static char pid[16];
  snprintf(pid, sizeof pid, "%d", (int)getpid());
  return pid;
}

pid_t tc_spawn_on(const sg_cluster_t *cl, int host, int (*fn)(void *arg, int wfd), void *arg,
                  int *rfd) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(p[0]);
    alarm(60); /* never outlive the test */
    if (sg_cluster_enter(cl, host) < 0) {
      fprintf(stderr, "child: %s\n", sg_err_msg());
      _exit(3);
    }
    _exit(fn(arg, p[1]) ? 1 : 0);
  }
  close(p[1]);
  *rfd = p[0];
  return pid;
}

int tc_link_tx(const char *name, int nhosts, uint64_t *tx) {
  sg_cluster_t *cl = NULL;
  if (sg_cluster_open(&cl, name) < 0) return -1;
  int rc = 0;
  for (int h = 0; h < nhosts; h++) {
    sg_cluster_link_t s;
    if (sg_cluster_link_stats(cl, h, &s) < 0) rc = -1;
    else tx[h] = s.host_tx;
  }
  sg_cluster_close(&cl);
  return rc;
}

int tc_links_vs_ranks(const char *db, const char *name, int nhosts, const uint64_t *before,
                      const char *what, double lo, double hi, int *single) {
  uint64_t after[SG_CLUSTER_MAX_HOSTS];
  *single = 0;
  if (nhosts > SG_CLUSTER_MAX_HOSTS || tc_link_tx(name, nhosts, after) < 0) return -1;
  long long id = ru_db_int(db, "SELECT max(id) FROM runs");
  int ok = 0;
  for (int h = 0; h < nhosts; h++) {
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ranks WHERE run_id = %lld AND host = 'h%d'",
             id, h);
    long long n = ru_db_int(db, sql);
    if (n != 1) {
      fprintf(stderr, "  %s: h%d has %lld ranks: not compared\n", what, h, n);
      continue;
    }
    ++*single;
    snprintf(sql, sizeof sql, "SELECT coalesce(sum(s.bytes_sent), 0) FROM steps s JOIN ranks r "
             "ON r.run_id = s.run_id AND r.rank = s.rank WHERE s.run_id = %lld AND r.host = 'h%d'",
             id, h);
    long long sent = ru_db_int(db, sql);
    uint64_t link = after[h] - before[h];
    double ratio = sent > 0 ? (double)link / (double)sent : 0.0;
    fprintf(stderr, "  %s: h%d: its rank sent %lld B, its link carried %llu B (%.3f; band %.2f-%.2f)\n",
            what, h, sent, (unsigned long long)link, ratio, lo, hi);
    ok += sent > 0 && ratio >= lo && ratio <= hi;
  }
  return ok;
}

void tc_submit_to_first_step(const char *db, double submit, const char *what) {
  char *start = ru_db_text(db, "SELECT printf('%.3f', (julianday(started_at) - 2440587.5) * "
                           "86400) FROM runs ORDER BY id DESC LIMIT 1");
  char *first = ru_db_text(db, "SELECT printf('%.6f', min(t_start)) FROM steps WHERE run_id = "
                           "(SELECT max(id) FROM runs)");
  if (start && first)
    fprintf(stderr, "  %s: submit to run start (row claimed) %.3f s, submit to first step "
            "%.3f s\n", what, atof(start) - submit, atof(start) + atof(first) - submit);
  free(start);
  free(first);
}
