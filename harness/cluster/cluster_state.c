/* cluster_state.c - /run/sgdlab: the lock, one state file per cluster,
 * the sweep of leftovers, privilege checks (see cluster.h). */
#define _GNU_SOURCE
#include "cluster_impl.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "proc.h"

#define CAP_NET_ADMIN_BIT 12
#define CAP_SYS_ADMIN_BIT 21
#define NSUBNETS 512 /* 198.18.0.0/15 in /24s */

int sg_cluster_check_privilege(void) {
  unsigned long long eff = 0;
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "CapEff: %llx", &eff) == 1) break;
  if (f) fclose(f);
  int net = (eff >> CAP_NET_ADMIN_BIT) & 1, sys = (eff >> CAP_SYS_ADMIN_BIT) & 1;
  if (net && sys) return SG_OK;
  return sg_err_set(SG_EUNSUPPORTED,
                    "needs root: network namespaces need CAP_NET_ADMIN and CAP_SYS_ADMIN, and "
                    "this process (uid %d) lacks %s%s%s",
                    (int)geteuid(), net ? "" : "CAP_NET_ADMIN", net || sys ? "" : " and ",
                    sys ? "" : "CAP_SYS_ADMIN");
}

/* /run/sgdlab must be our own directory that nobody else can write. */
static int run_dir(void) {
  struct stat st;
  if (mkdir(SG_CLUSTER_RUN_DIR, 0700) < 0 && errno != EEXIST)
    return sg_err_set(SG_EIO, "%s: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
  if (lstat(SG_CLUSTER_RUN_DIR, &st) < 0)
    return sg_err_set(SG_EIO, "%s: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
    return sg_err_set(SG_EIO, "%s: not a directory of uid %d with mode 0700; remove it",
                      SG_CLUSTER_RUN_DIR, (int)geteuid());
  return SG_OK;
}

int sgc_lock(void) {
  SG_CHECK(run_dir());
  int fd = open(SG_CLUSTER_RUN_DIR "/lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return sg_err_set(SG_EIO, "%s/lock: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
  while (flock(fd, LOCK_EX) < 0)
    if (errno != EINTR) {
      close(fd);
      return sg_err_set(SG_EIO, "%s/lock: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
    }
  return fd;
}

void sgc_unlock(int fd) {
  if (fd >= 0) close(fd); /* releases the flock */
}

void sgc_state_path(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/cluster-%s", SG_CLUSTER_RUN_DIR, name);
}

unsigned long long sgc_running_start(pid_t pid) {
  char buf[1024];
  /* state and start time from one read: from two, the pid could change
   * hands in between and the state be another process's */
  const char *s = pid > 0 ? sg_proc_stat(pid, buf, sizeof buf) : NULL;
  const char *start = sg_proc_field(s, 22);
  /* a zombie has ended: only its parent's wait is missing */
  if (!s || !start || s[0] == 'Z' || s[0] == 'X') return 0;
  return strtoull(start, NULL, 10);
}

int sgc_owner_alive(const sg_cluster_t *cl) {
  if (cl->persistent) return 1;
  unsigned long long s = sgc_running_start(cl->owner);
  return s != 0 && s == cl->owner_start;
}

int sgc_state_write(const sg_cluster_t *cl) {
  char path[256], tmp[256];
  sgc_state_path(cl->d.name, path, sizeof path);
  snprintf(tmp, sizeof tmp, "%s/.cluster-%s.tmp", SG_CLUSTER_RUN_DIR, cl->d.name);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "%s: %s", tmp, strerror(errno));
  }
  fprintf(f, "sgdlab-cluster 1\nname %s\n", cl->d.name);
  if (cl->persistent) fprintf(f, "owner persistent\n");
  else fprintf(f, "owner %d %llu\n", (int)cl->owner, cl->owner_start);
  fprintf(f, "subnet %d\nhosts %d\n", cl->subnet, cl->d.nhosts);
  for (int h = 0; h < cl->d.nhosts; h++)
    fprintf(f, "host %d %llu %.9g\n", h, (unsigned long long)cl->d.rate_bps[h], cl->d.loss[h]);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad || rename(tmp, path) < 0) {
    unlink(tmp);
    return sg_err_set(SG_EIO, "%s: cannot write the cluster state", path);
  }
  return SG_OK;
}

/* One line of a state file into cl; 0, or -1 when it is not understood. */
static int state_line(sg_cluster_t *cl, const char *line, int *nhost_lines) {
  char name[32];
  int pid, h;
  unsigned long long start, rate;
  double loss;
  if (!line[0] || !strcmp(line, "sgdlab-cluster 1")) return 0;
  if (sscanf(line, "name %31s", name) == 1) {
    if (sg_cluster_name_check(name) < 0) return -1;
    snprintf(cl->d.name, sizeof cl->d.name, "%.8s", name);
    return 0;
  }
  if (!strcmp(line, "owner persistent")) {
    cl->persistent = 1;
    return 0;
  }
  if (sscanf(line, "owner %d %llu", &pid, &start) == 2) {
    cl->owner = pid;
    cl->owner_start = start;
    return 0;
  }
  if (sscanf(line, "subnet %d", &cl->subnet) == 1)
    return cl->subnet >= 0 && cl->subnet < NSUBNETS ? 0 : -1;
  if (sscanf(line, "hosts %d", &cl->d.nhosts) == 1)
    return cl->d.nhosts >= 1 && cl->d.nhosts <= SG_CLUSTER_MAX_HOSTS ? 0 : -1;
  if (sscanf(line, "host %d %llu %lf", &h, &rate, &loss) == 3 && h >= 0 && h < cl->d.nhosts) {
    cl->d.rate_bps[h] = rate;
    cl->d.loss[h] = loss;
    ++*nhost_lines;
    return 0;
  }
  return -1;
}

int sgc_state_read(const char *name, sg_cluster_t **out) {
  char path[256], line[256];
  sgc_state_path(name, path, sizeof path);
  FILE *f = fopen(path, "re");
  if (!f) {
    if (errno == ENOENT) return sg_err_set(SG_ENOTFOUND, "no cluster %s", name);
    return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  }
  sg_cluster_t *cl = calloc(1, sizeof *cl);
  if (!cl) {
    fclose(f);
    return SG_ENOMEM;
  }
  cl->subnet = -1;
  int lineno = 0, hosts = 0, bad = 0;
  while (!bad && fgets(line, sizeof line, f)) {
    lineno++;
    line[strcspn(line, "\n")] = '\0';
    bad = state_line(cl, line, &hosts) < 0;
  }
  fclose(f);
  if (!bad && (strcmp(cl->d.name, name) || cl->subnet < 0 || hosts != cl->d.nhosts || !cl->d.nhosts ||
               (!cl->persistent && !cl->owner)))
    bad = 1, lineno = 0;
  if (bad) {
    free(cl);
    return sg_err_set(SG_EFORMAT, "%s:%d: not a cluster state this version understands", path,
                      lineno);
  }
  sgc_fill_names(cl);
  *out = cl;
  return SG_OK;
}

int sgc_state_remove(const char *name) {
  char path[256];
  sgc_state_path(name, path, sizeof path);
  if (unlink(path) < 0 && errno != ENOENT)
    return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  return SG_OK;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int sg_cluster_list(char ***names, int *n) {
  *names = NULL;
  *n = 0;
  SG_CHECK(run_dir());
  DIR *d = opendir(SG_CLUSTER_RUN_DIR);
  if (!d) return sg_err_set(SG_EIO, "%s: %s", SG_CLUSTER_RUN_DIR, strerror(errno));
  int cap = 0, rc = SG_OK;
  for (struct dirent *e; (e = readdir(d));) {
    const char *nm = e->d_name + 8;
    if (strncmp(e->d_name, "cluster-", 8) || sg_cluster_name_check(nm) < 0) continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 8;
      char **grown = realloc(*names, (size_t)cap * sizeof *grown);
      if (!grown) {
        rc = SG_ENOMEM;
        break;
      }
      *names = grown;
    }
    if (!((*names)[*n] = strdup(nm))) {
      rc = SG_ENOMEM;
      break;
    }
    (*n)++;
  }
  closedir(d);
  sg_err_clear(); /* the name checks of other files are not errors */
  if (*n) qsort(*names, (size_t)*n, sizeof **names, cmp_str);
  return rc;
}

static void free_list(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

int sgc_free_subnet(int *subnet) {
  char **names;
  int n;
  unsigned char used[NSUBNETS] = {0};
  SG_CHECK(sg_cluster_list(&names, &n));
  for (int i = 0; i < n; i++) {
    sg_cluster_t *cl;
    if (sgc_state_read(names[i], &cl) == SG_OK) {
      used[cl->subnet] = 1;
      free(cl);
    }
  }
  free_list(names, n);
  for (int s = 0; s < NSUBNETS; s++)
    if (!used[s]) return *subnet = s, SG_OK;
  return sg_err_set(SG_ERANGE, "all %d cluster subnets of 198.18.0.0/15 are in use", NSUBNETS);
}

/* The cluster name of namespace "sgc-NAME-br" / "sgc-NAME-hI" into name;
 * -1 when ns is not one of ours. */
static int ns_cluster(const char *ns, char *name, size_t cap) {
  size_t plen = strlen(SG_CLUSTER_NS_PREFIX);
  if (strncmp(ns, SG_CLUSTER_NS_PREFIX, plen)) return -1;
  const char *dash = strrchr(ns, '-');
  if (!dash || dash < ns + plen + 1 || (size_t)(dash - ns - plen) >= cap) return -1;
  snprintf(name, cap, "%.*s", (int)(dash - ns - plen), ns + plen);
  if (sg_cluster_name_check(name) < 0) {
    sg_err_clear();
    return -1;
  }
  return 0;
}

/* 1 when cluster `name` should be swept: no state, or a dead owner. */
static int orphaned(const char *name) {
  sg_cluster_t *cl;
  int rc = sgc_state_read(name, &cl);
  if (rc == SG_ENOTFOUND) return 1;
  if (rc < 0) return 0; /* unreadable: leave it to a person */
  int dead = !sgc_owner_alive(cl);
  free(cl);
  return dead;
}

static int sweep_namespaces(int *removed) {
  int rc = SG_OK;
  DIR *d = opendir("/run/netns");
  if (!d) return SG_OK; /* no namespaces at all */
  for (struct dirent *e; (e = readdir(d));) {
    char name[SG_CLUSTER_NAME_MAX + 1];
    if (ns_cluster(e->d_name, name, sizeof name) < 0 || !orphaned(name)) continue;
    int r = sgc_ns_delete(e->d_name);
    if (r < 0 && rc == SG_OK) rc = r;
    if (r == SG_OK && removed) (*removed)++;
  }
  closedir(d);
  return rc;
}

/* Daemons (daemons.c) of clusters with no state or a dead owner. */
static int sweep_daemons(void) {
  int rc = SG_OK;
  DIR *d = opendir(SG_CLUSTER_RUN_DIR);
  if (!d) return SG_OK;
  for (struct dirent *e; (e = readdir(d));) {
    const char *nm = e->d_name + 8;
    if (strncmp(e->d_name, "daemons-", 8) || sg_cluster_name_check(nm) < 0) continue;
    if (orphaned(nm)) {
      int r = sg_cluster_daemons_down(nm);
      if (r < 0 && rc == SG_OK) rc = r;
    }
  }
  closedir(d);
  if (rc == SG_OK) sg_err_clear(); /* the name checks of other entries are not errors */
  return rc;
}

int sg_cluster_sweep(int *removed) {
  if (removed) *removed = 0;
  int lk = sgc_lock();
  if (lk < 0) return lk;
  int rc = sweep_daemons();
  if (rc == SG_OK) rc = sweep_namespaces(removed);
  char **names = NULL;
  int n = 0;
  if (rc == SG_OK) rc = sg_cluster_list(&names, &n);
  for (int i = 0; rc == SG_OK && i < n; i++) /* namespaces are gone: now their states */
    if (orphaned(names[i])) rc = sgc_state_remove(names[i]);
  free_list(names, n);
  sgc_unlock(lk);
  return rc;
}

int sg_cluster_find_addr(const char *addr, char *name, size_t cap, int *host) {
  struct in_addr a;
  if (inet_pton(AF_INET, addr, &a) != 1)
    return sg_err_set(SG_ENOTFOUND, "%s: not an IPv4 address", addr);
  uint32_t v = ntohl(a.s_addr);
  int subnet = (int)((v >> 8) & 0x1ff), h = (int)(v & 0xff) - 1;
  if ((v >> 17) != (198u << 7 | 18u >> 1))
    return sg_err_set(SG_ENOTFOUND, "%s: not a cluster address (198.18.0.0/15)", addr);
  char **names;
  int n, found = 0;
  SG_CHECK(sg_cluster_list(&names, &n));
  for (int i = 0; i < n && !found; i++) {
    sg_cluster_t *cl;
    if (sgc_state_read(names[i], &cl) < 0) continue;
    if (cl->subnet == subnet && h >= 0 && h < cl->d.nhosts) {
      snprintf(name, cap, "%s", cl->d.name);
      *host = h;
      found = 1;
    }
    free(cl);
  }
  free_list(names, n);
  sg_err_clear();
  return found ? SG_OK : sg_err_set(SG_ENOTFOUND, "%s: no cluster host has this address", addr);
}
