/* launch_ssh.c - launcher ssh, and the host lists of hosts:/hostfile:
 * (see launch.h).  Each rank is one `ssh [-F CONFIG] -T ... -- HOST exec
 * 'sgdlab-rank' --stdin`, its spec and keys written to ssh's standard
 * input (core/stage.h), never to argv, the environment or the remote
 * host's disk. */
#define _GNU_SOURCE
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define SG_SSH_PROBE_S 30.0 /* every host's answer within this */

/* A host name or address as the launchers accept it: letters, digits,
 * '.', '-', '_' (and ':' inside an IPv6 address is not supported), not
 * starting with '-', at most 255 characters. */
static int host_ok(const char *h, size_t len) {
  if (!len || len > 255 || h[0] == '-' || h[0] == '.') return 0;
  for (size_t i = 0; i < len; i++)
    if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
          (h[i] >= '0' && h[i] <= '9') || h[i] == '.' || h[i] == '-' || h[i] == '_'))
      return 0;
  return 1;
}

/* One "host" or "host:N" of a list into *host (len) and *slots. */
static int entry(const char *e, size_t len, const char **host, size_t *hlen, long *slots) {
  const char *colon = memchr(e, ':', len);
  *host = e;
  *hlen = colon ? (size_t)(colon - e) : len;
  *slots = 1;
  if (colon) {
    char num[16], *end;
    size_t nl = len - *hlen - 1;
    if (!nl || nl >= sizeof num) return -1;
    memcpy(num, colon + 1, nl);
    num[nl] = '\0';
    errno = 0;
    *slots = strtol(num, &end, 10);
    if (*end || errno || *slots < 1 || *slots > 4096) return -1;
  }
  return host_ok(*host, *hlen) ? 0 : -1;
}

int sg_hosts_check(const char *hosts, int *nslots) {
  int total = 0;
  for (const char *p = hosts; *p;) {
    size_t len = strcspn(p, ",");
    const char *h;
    size_t hl;
    long slots;
    if (entry(p, len, &h, &hl, &slots) < 0)
      return sg_err_set(SG_ECONFIG, "'%.*s' is not HOST or HOST:SLOTS (HOST of letters, digits, "
                        "'.', '-', '_'; SLOTS 1..4096)", (int)len, p);
    total += (int)slots;
    p += len + (p[len] == ',');
  }
  if (!total) return sg_err_set(SG_ECONFIG, "no hosts");
  if (nslots) *nslots = total;
  return SG_OK;
}

int sg_hosts_of_rank(const char *hosts, int rank, char *out, size_t cap) {
  int total;
  SG_CHECK(sg_hosts_check(hosts, &total));
  int want = rank % total;
  for (const char *p = hosts; *p;) {
    size_t len = strcspn(p, ","), hl;
    const char *h;
    long slots;
    entry(p, len, &h, &hl, &slots);
    if (want < slots) {
      snprintf(out, cap, "%.*s", (int)hl, h);
      return SG_OK;
    }
    want -= (int)slots;
    p += len + (p[len] == ',');
  }
  return sg_err_set(SG_EINTERNAL, "no host for rank %d", rank);
}

/* One hostfile line (comment cut, trimmed) appended to out as "host[:N]". */
static int hostfile_line(const char *path, int lineno, char *line, char *out, size_t cap,
                         size_t *len) {
  char *save = NULL, *host = strtok_r(line, " \t", &save), *w;
  if (!host) return SG_OK;
  long slots = 1;
  while ((w = strtok_r(NULL, " \t", &save))) {
    char *end;
    errno = 0;
    if (!strncmp(w, "slots=", 6)) slots = strtol(w + 6, &end, 10);
    else if (!strncmp(w, "max_slots=", 10)) continue; /* mpirun's cap; not a placement */
    else return sg_err_set(SG_ECONFIG, "%s:%d: '%s': expected slots=N", path, lineno, w);
    if (*end || errno || slots < 1 || slots > 4096)
      return sg_err_set(SG_ECONFIG, "%s:%d: '%s': slots must be 1..4096", path, lineno, w);
  }
  if (!host_ok(host, strlen(host)))
    return sg_err_set(SG_ECONFIG, "%s:%d: '%s' is not a host name or address", path, lineno, host);
  int w2 = slots == 1 ? snprintf(out + *len, cap - *len, "%s%s", *len ? "," : "", host)
                      : snprintf(out + *len, cap - *len, "%s%s:%ld", *len ? "," : "", host, slots);
  if (w2 < 0 || (size_t)w2 >= cap - *len)
    return sg_err_set(SG_ERANGE, "%s:%d: too many hosts", path, lineno);
  *len += (size_t)w2;
  return SG_OK;
}

int sg_hosts_from_file(const char *path, char *out, size_t cap) {
  FILE *f = fopen(path, "re");
  if (!f) return sg_err_set(SG_ECONFIG, "%s: %s", path, strerror(errno));
  char line[1024];
  size_t len = 0;
  int rc = SG_OK;
  out[0] = '\0';
  for (int lineno = 1; rc == SG_OK && fgets(line, sizeof line, f); lineno++) {
    if (!strchr(line, '\n') && !feof(f)) {
      rc = sg_err_set(SG_ECONFIG, "%s:%d: line longer than %zu bytes", path, lineno,
                      sizeof line - 2);
      break;
    }
    line[strcspn(line, "#\r\n")] = '\0';
    rc = hostfile_line(path, lineno, line, out, cap, &len);
  }
  fclose(f);
  if (rc == SG_OK && !len) rc = sg_err_set(SG_ECONFIG, "%s: no hosts in it", path);
  return rc;
}

/* ssh runs what the file says (ProxyCommand, LocalCommand, Match exec) as
 * the user who runs sgdlab, and does not check who owns it: accept it only
 * when nobody else could have written it or what leads to it.  The file and
 * every directory above it (symbolic links resolved) belong to this user or
 * root and are writable by no one else; a directory anyone may write (/tmp)
 * is accepted only with the sticky bit, where others cannot replace what is
 * not theirs.  The path must be the file's own (no symbolic link, no . or
 * .. on the way): ssh opens the path as given, so a link checked here could
 * be pointed elsewhere later by whoever owns the directory it sits in. */
static int trusted_file(const char *path) {
  char real[PATH_MAX];
  if (!realpath(path, real)) return sg_err_set(SG_ECONFIG, "'%s': %s", path, strerror(errno));
  if (strcmp(real, path))
    return sg_err_set(SG_ECONFIG, "'%s' leads through a symbolic link or . and .. (to %s): "
                      "give the file's own path (ssh opens the path as given)", path, real);
  for (int top = 1;; top = 0) {
    struct stat sb;
    if (stat(real[0] ? real : "/", &sb) < 0)
      return sg_err_set(SG_ECONFIG, "'%s': %s", real, strerror(errno));
    if (sb.st_uid != 0 && sb.st_uid != geteuid())
      return sg_err_set(SG_ECONFIG, "'%s': %s is owned by uid %u, not by you or root (ssh "
                        "runs the commands its configuration names)", path, real[0] ? real : "/",
                        (unsigned)sb.st_uid);
    if ((sb.st_mode & 022) && (top || !(sb.st_mode & S_ISVTX)))
      return sg_err_set(SG_ECONFIG, "'%s': %s is writable by others (mode %04o; ssh runs the "
                        "commands its configuration names)", path, real[0] ? real : "/",
                        (unsigned)(sb.st_mode & 07777));
    if (top && !S_ISREG(sb.st_mode))
      return sg_err_set(SG_ECONFIG, "'%s': not a regular file", path);
    if (!real[0]) return SG_OK;
    *strrchr(real, '/') = '\0';
  }
}

int sg_ssh_config_check(const char *path) {
  if (path[0] != '/')
    return sg_err_set(SG_ECONFIG, "'%s': give an absolute path (ssh -F; mpirun's agent)", path);
  for (const char *c = path; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          strchr("/._+-", *c)))
      return sg_err_set(SG_ECONFIG, "'%s': only letters, digits and / . _ + - (it becomes part "
                        "of mpirun's agent command line, split at spaces)", path);
  FILE *f = fopen(path, "re");
  if (!f) return sg_err_set(SG_ECONFIG, "'%s': %s", path, strerror(errno));
  fclose(f);
  return trusted_file(path);
}

/* s as one single-quoted word for the remote shell. */
static int quoted(const char *s, char *out, size_t cap) {
  size_t n = 0;
  if (cap < 3) return -1;
  out[n++] = '\'';
  for (; *s; s++) {
    const char *piece = *s == '\'' ? "'\\''" : NULL;
    size_t pl = piece ? 4 : 1;
    if (n + pl + 2 > cap) return -1;
    if (piece) memcpy(out + n, piece, pl);
    else out[n] = *s;
    n += pl;
  }
  out[n++] = '\'';
  out[n] = '\0';
  return 0;
}

int sg_ssh_argv(const sg_launch_cfg_t *cfg, const char *host, const char *cmd, char **argv,
                size_t cap) {
  size_t a = 0;
  argv[a++] = "ssh";
  if (cfg->ssh_config && cfg->ssh_config[0]) {
    argv[a++] = "-F";
    argv[a++] = (char *)cfg->ssh_config;
  }
  /* no tty, no escape character, no agent or X11 forwarding, never a
   * password prompt (the harness's terminal is not the rank's) */
  char *const opts[] = {"-T", "-e", "none", "-a", "-x", "-o", "BatchMode=yes", "--",
                        (char *)host, (char *)cmd, NULL};
  for (int i = 0; opts[i]; i++) {
    if (a + 1 >= cap) return sg_err_set(SG_EINVAL, "ssh: too many arguments");
    argv[a++] = opts[i];
  }
  argv[a] = NULL;
  return SG_OK;
}

int sg_ssh_rank_cmd(const char *rank_bin, char *cmd, size_t cap) {
  char q[4200];
  if (quoted(rank_bin, q, sizeof q) < 0) return sg_err_set(SG_ERANGE, "ssh: path too long");
  snprintf(cmd, cap, "exec %s --stdin", q);
  return SG_OK;
}

/* ---- does every host see the run's directory (mpirun over ssh)? ---------- */

/* Whether host names an address of this machine (of this network
 * namespace): one that a socket can bind. */
static int host_is_here(const char *host) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res = NULL;
  if (getaddrinfo(host, NULL, &hints, &res) != 0 || !res) return 0;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), here = 0;
  if (fd >= 0) {
    struct sockaddr_in a = *(struct sockaddr_in *)res->ai_addr;
    a.sin_port = 0;
    here = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
  }
  freeaddrinfo(res);
  return here;
}

typedef struct probe {
  char host[256];
  pid_t pid;
  int fd;
  char out[256];
  size_t len;
} probe_t;

/* Start `ssh HOST exec cat 'DIR/visible'` with its stdout and stderr into
 * a pipe. */
static int probe_start(const sg_launch_cfg_t *cfg, probe_t *p, const char *file) {
  char q[4200], cmd[4300], *argv[24];
  if (quoted(file, q, sizeof q) < 0) return sg_err_set(SG_ERANGE, "ssh: path too long");
  snprintf(cmd, sizeof cmd, "exec cat -- %s", q);
  SG_CHECK(sg_ssh_argv(cfg, p->host, cmd, argv, sizeof argv / sizeof *argv));
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) < 0) return sg_err_set(SG_EIO, "pipe: %s", strerror(errno));
  p->pid = fork();
  if (p->pid == 0) {
    int in = open("/dev/null", O_RDONLY);
    dup2(in, STDIN_FILENO);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(fds[1]);
  if (p->pid < 0) {
    close(fds[0]);
    return sg_err_set(SG_EIO, "fork: %s", strerror(errno));
  }
  p->fd = fds[0];
  return SG_OK;
}

/* Read every probe's output until each ends or the deadline; reap them. */
static void probe_collect(probe_t *p, int n, double deadline) {
  for (int open_n = n; open_n > 0 && sg_now() < deadline;) {
    struct pollfd pf[64];
    int m = 0;
    for (int i = 0; i < n; i++)
      if (p[i].fd >= 0) pf[m++] = (struct pollfd){p[i].fd, POLLIN, 0};
    if (poll(pf, (nfds_t)m, 100) <= 0) continue;
    for (int i = 0; i < n; i++) {
      if (p[i].fd < 0) continue;
      size_t room = sizeof p[i].out - 1 - p[i].len;
      char sink[256];
      ssize_t r = read(p[i].fd, room ? p[i].out + p[i].len : sink, room ? room : sizeof sink);
      if (r > 0 && room) p[i].len += (size_t)r;
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        close(p[i].fd), p[i].fd = -1, open_n--;
    }
  }
  for (int i = 0; i < n; i++) {
    if (p[i].fd >= 0) close(p[i].fd);
    if (p[i].pid > 0) kill(p[i].pid, SIGKILL), waitpid(p[i].pid, NULL, 0);
    p[i].out[p[i].len] = '\0';
  }
}

/* The distinct hosts of the list that are not this machine, into p. */
static int probe_hosts(const char *hosts, probe_t *p, int cap) {
  int n = 0, total;
  SG_CHECK(sg_hosts_check(hosts, &total));
  for (int r = 0; r < total && n < cap; r++) {
    char h[256];
    SG_CHECK(sg_hosts_of_rank(hosts, r, h, sizeof h));
    int seen = host_is_here(h);
    for (int i = 0; i < n && !seen; i++) seen = !strcmp(p[i].host, h);
    if (!seen) {
      memset(&p[n], 0, sizeof p[n]);
      snprintf(p[n].host, sizeof p[n].host, "%s", h);
      p[n++].fd = -1;
    }
  }
  return n;
}

int sg_ssh_probe_rundir(const sg_launch_cfg_t *cfg, const char *dir) {
  static probe_t p[64];
  int n = probe_hosts(cfg->hosts, p, 64), rc = SG_OK;
  if (n <= 0) return n;
  unsigned char raw[16];
  char nonce[40], file[4200];
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
    return sg_err_set(SG_EIO, "getrandom: %s", strerror(errno));
  for (int i = 0; i < 16; i++) snprintf(nonce + 2 * i, 3, "%02x", raw[i]);
  snprintf(file, sizeof file, "%s/visible", dir);
  int fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 || write(fd, nonce, 32) != 32 || close(fd) != 0)
    return sg_err_set(SG_EIO, "%s: %s", file, strerror(errno));
  for (int i = 0; i < n && rc == SG_OK; i++) rc = probe_start(cfg, &p[i], file);
  probe_collect(p, n, sg_now() + SG_SSH_PROBE_S);
  unlink(file);
  SG_CHECK(rc);
  for (int i = 0; i < n; i++)
    if (strncmp(p[i].out, nonce, 32)) {
      p[i].out[strcspn(p[i].out, "\r\n")] = '\0';
      return sg_err_set(SG_ECONFIG, "host %s does not see the run's directory %s (mpirun's ranks "
                        "read their spec and keys there; ssh said: %s): run where the hosts share "
                        "/tmp, or use transport zmq with launcher ssh, which sends both over ssh",
                        p[i].host, dir, p[i].out[0] ? p[i].out : "nothing");
    }
  return SG_OK;
}
