/* stage_munge.c - the stage as munge credentials, for launcher slurm
 * (stage.h): munge on the harness's side, unmunge on the rank's, each run
 * by fork/exec without a shell. */
#define _GNU_SOURCE
#include "stage.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "trusted_path.h"

#define OUT_MAX (SG_STAGE_CRED_MAX + 256) /* unmunge's metadata and payload */

typedef struct filter {
  const char *in;
  size_t in_len, in_off;
  char *out;
  size_t out_len;
} filter_t;

/* Feed f->in to the child's stdin (sock) and gather its stdout and
 * stderr (out) until it closes them; SG_ERANGE past OUT_MAX bytes. */
static int pump(filter_t *f, int sock, int out) {
  if (!(f->out = malloc(OUT_MAX + 1))) return SG_ENOMEM;
  struct pollfd p[2] = {{sock, POLLOUT, 0}, {out, POLLIN, 0}};
  if (!f->in_len) shutdown(sock, SHUT_WR), p[0].fd = -1;
  while (p[1].fd >= 0) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return sg_err_set(SG_EIO, "poll: %s", strerror(errno));
    }
    if (p[0].fd >= 0 && p[0].revents) {
      ssize_t w = send(sock, f->in + f->in_off, f->in_len - f->in_off, MSG_NOSIGNAL);
      if (w > 0) f->in_off += (size_t)w;
      if (w < 0 && errno != EINTR && errno != EAGAIN) f->in_off = f->in_len; /* it stopped reading */
      if (f->in_off == f->in_len) shutdown(sock, SHUT_WR), p[0].fd = -1;
    }
    if (p[1].revents) {
      ssize_t r = read(out, f->out + f->out_len, OUT_MAX - f->out_len);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) p[1].fd = -1;
      else if ((f->out_len += (size_t)r) == OUT_MAX)
        return sg_err_set(SG_ERANGE, "more than %d bytes of output", OUT_MAX);
    }
  }
  f->out[f->out_len] = '\0';
  return SG_OK;
}

/* argv[0] (found on PATH) with f->in on its stdin; its stdout and stderr
 * into f->out; its exit status into *status (-1: not run). */
static int filter_run(char *const *argv, filter_t *f, int *status) {
  int s[2], o[2];
  *status = -1;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) < 0)
    return sg_err_set(SG_EIO, "%s: socketpair: %s", argv[0], strerror(errno));
  if (pipe2(o, O_CLOEXEC) < 0) {
    close(s[0]), close(s[1]);
    return sg_err_set(SG_EIO, "%s: pipe: %s", argv[0], strerror(errno));
  }
  pid_t pid = fork();
  if (pid == 0) {
    if (dup2(s[1], 0) < 0 || dup2(o[1], 1) < 0 || dup2(o[1], 2) < 0) _exit(127);
    execvp(argv[0], argv);
    dprintf(1, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(s[1]);
  close(o[1]);
  int rc = pid < 0 ? sg_err_set(SG_EIO, "%s: fork: %s", argv[0], strerror(errno))
                   : pump(f, s[0], o[0]);
  close(s[0]);
  close(o[0]);
  int st = 0;
  while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (pid > 0) *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return rc;
}

/* The program's own message (its line with "Error:"), for errors; never
 * the rest of its output, which may hold a decoded payload. */
static const char *error_line(const char *text, char *msg, size_t cap) {
  static const char *const names[] = {
      "Success", "Snafu", "Bad argument", "Bad length", "Overflow", "No memory", "Socket",
      "Timeout", "Bad credential", "Bad version", "Bad cipher", "Bad MAC", "Bad zip",
      "Bad realm", "Invalid credential", "Expired credential", "Rewound credential",
      "Replayed credential", "Unauthorized credential"};
  const char *e = text ? strstr(text, "Error:") : NULL;
  int st = -1; /* a replayed credential: no message, only its status */
  if (!e && text && sscanf(text, "STATUS: %d", &st) == 1 && st >= 0 && st < 19)
    return snprintf(msg, cap, "status %d: %s", st, names[st]), msg;
  if (!e) return "no message";
  snprintf(msg, cap, "%.*s", (int)strcspn(e, "\n"), e);
  return msg;
}

/* munged's own account ("munge"), which Debian's package gives /run/munge
 * and its socket: it holds the cluster's key, so it is trusted already. */
static uid_t munge_uid(void) {
  struct passwd pw, *got = NULL;
  char buf[1024];
  return getpwnam_r("munge", &pw, buf, sizeof buf, &got) == 0 && got ? got->pw_uid
                                                                     : SG_TRUSTED_NO_UID;
}

/* The socket's own directory (fd, named dir): no one but its owner may
 * make or replace an entry in it, not even where it is sticky (munged
 * removes and makes its socket again when it restarts). */
static int socket_dir(int fd, const char *socket, const char *dir) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return sg_err_set(SG_EIO, "%s=%s: %s: %s", SG_STAGE_MUNGE_SOCKET_ENV, socket, dir,
                      strerror(errno));
  if (st.st_mode & 022)
    return sg_err_set(SG_EINVAL, "%s=%s: its directory %s is writable by others (mode %04o): "
                      "another user could put a munged of their own there; refused",
                      SG_STAGE_MUNGE_SOCKET_ENV, socket, dir, (unsigned)(st.st_mode & 07777));
  return SG_OK;
}

/* The entry itself, when there is one: a socket of root's, ours or
 * munge's; never a link. */
static int socket_entry(int fd, const char *socket, const char *leaf, uid_t also) {
  struct stat st;
  if (fstatat(fd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0) return SG_OK; /* munge will say so */
  if (!S_ISSOCK(st.st_mode))
    return sg_err_set(SG_EINVAL, "%s=%s: a %s, not a socket; refused", SG_STAGE_MUNGE_SOCKET_ENV,
                      socket, S_ISLNK(st.st_mode) ? "symlink" : "file");
  if (st.st_uid != 0 && st.st_uid != geteuid() && st.st_uid != also)
    return sg_err_set(SG_EINVAL, "%s=%s: a socket of uid %u, not of root, uid %u or munge; "
                      "refused", SG_STAGE_MUNGE_SOCKET_ENV, socket, (unsigned)st.st_uid,
                      (unsigned)geteuid());
  return SG_OK;
}

int sg_stage_munge_socket_check(const char *socket) {
  char dir[4096], what[4200], why[1024];
  uid_t also = munge_uid();
  const char *slash = strrchr(socket, '/');
  if (socket[0] != '/' || !slash[1] || (size_t)(slash - socket) >= sizeof dir)
    return sg_err_set(SG_EINVAL, "%s=%.200s: not an absolute path to a socket; refused",
                      SG_STAGE_MUNGE_SOCKET_ENV, socket);
  snprintf(dir, sizeof dir, "%.*s", slash == socket ? 1 : (int)(slash - socket), socket);
  snprintf(what, sizeof what, "%s=%s", SG_STAGE_MUNGE_SOCKET_ENV, socket);
  int fd = sg_trusted_dir_walk(dir, what, also);
  if (fd < 0) {
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return sg_err_set(SG_EINVAL, "%s; refused", why);
  }
  int rc = socket_dir(fd, socket, dir);
  if (rc == SG_OK) rc = socket_entry(fd, socket, slash + 1, also);
  close(fd);
  return rc;
}

int sg_stage_munge_encode(const char *payload, size_t len, const char *socket, char **cred,
                          size_t *clen) {
  char uid[48], gid[48], sock[4200], msg[256];
  snprintf(uid, sizeof uid, "--restrict-uid=%u", (unsigned)getuid());
  snprintf(gid, sizeof gid, "--restrict-gid=%u", (unsigned)getgid());
  snprintf(sock, sizeof sock, "--socket=%s", socket ? socket : "");
  /* ttl -1: munged's maximum (3600 s unless its --max-ttl says other):
   * srun may wait for the step's resources after the credential is made */
  char *argv[] = {"munge", uid, gid, "--ttl=-1", socket && socket[0] ? sock : NULL, NULL};
  if (socket && socket[0]) SG_CHECK(sg_stage_munge_socket_check(socket));
  filter_t f = {payload, len, 0, NULL, 0};
  int status, rc = filter_run(argv, &f, &status);
  if (rc == SG_OK && (status != 0 || f.out_len < 8 || strncmp(f.out, "MUNGE:", 6) ||
                      f.out[f.out_len - 1] != '\n' || memchr(f.out, '\n', f.out_len) !=
                                                          f.out + f.out_len - 1))
    rc = sg_err_set(SG_EIO, "munge (exit %d) made no credential of the %zu-byte stage: %s",
                    status, len, error_line(f.out, msg, sizeof msg));
  if (rc < 0) return free(f.out), rc;
  *cred = f.out;
  *clen = f.out_len;
  return SG_OK;
}

/* Line `rank` (0-based) of fd, without its '\n', into *line (malloc'd);
 * the lines before it are read and dropped. */
static int read_line_k(int fd, int rank, char **line, size_t *len) {
  char *buf = malloc(SG_STAGE_CRED_MAX + 1);
  size_t n = 0, off = 0; /* bytes of line `rank` so far; stdin offset */
  int at = 0, rc = SG_OK;
  if (!buf) return SG_ENOMEM;
  for (;;) {
    char chunk[65536];
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      rc = sg_err_set(SG_EPROTO, "rank %d: the stage (stdin) ends at offset %zu in line %d, before "
                      "this rank's credential (line %d) ends", rank, off, at + 1, rank + 1);
      break;
    }
    for (ssize_t i = 0; i < r && at <= rank; i++, off++) {
      if (at == rank && chunk[i] != '\n') buf[n++] = chunk[i];
      if (chunk[i] == '\n') at++;
      if (n > SG_STAGE_CRED_MAX) break;
    }
    if (n > SG_STAGE_CRED_MAX) {
      rc = sg_err_set(SG_EPROTO, "rank %d: the stage (stdin): line %d is longer than %d bytes",
                      rank, rank + 1, SG_STAGE_CRED_MAX);
      break;
    }
    if (at > rank) break;
  }
  if (rc < 0) return free(buf), rc;
  buf[n] = '\0';
  *line = buf;
  *len = n;
  return SG_OK;
}

/* "MUNGE:" base64 ":" and nothing else. */
static int check_cred(const char *line, size_t len, int rank) {
  size_t body = len > 7 ? strspn(line + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                           "0123456789+/=") : 0;
  if (len < 8 || strncmp(line, "MUNGE:", 6) || 6 + body != len - 1 || line[len - 1] != ':')
    return sg_err_set(SG_EPROTO, "rank %d: the stage (stdin): line %d is not a munge credential "
                      "(\"MUNGE:\" base64 \":\"; byte %zu)", rank, rank + 1,
                      len < 8 || strncmp(line, "MUNGE:", 6) ? (size_t)0 : 6 + body);
  return SG_OK;
}

/* unmunge's output: its status, uid and gid, then a blank line and the
 * payload; the uid and gid must be this process's. */
static int check_meta(const char *out, size_t len, int rank, size_t *payload_at) {
  int st;
  unsigned uid, gid;
  const char *blank = strstr(out, "\n\n");
  if (sscanf(out, "STATUS: %d UID: %u GID: %u", &st, &uid, &gid) != 3 || !blank || st != 0)
    return sg_err_set(SG_EPROTO, "rank %d: unmunge's answer is not STATUS 0, UID, GID", rank);
  if (uid != (unsigned)getuid() || gid != (unsigned)getgid())
    return sg_err_set(SG_EPROTO, "rank %d: the stage's credential is of uid %u gid %u, not this "
                      "rank's uid %u gid %u: refused", rank, uid, gid, (unsigned)getuid(),
                      (unsigned)getgid());
  *payload_at = (size_t)(blank + 2 - out);
  if (*payload_at > len) return sg_err_set(SG_EPROTO, "rank %d: unmunge's answer is cut", rank);
  return SG_OK;
}

int sg_stage_munge_payload(const char *run, int rank, int size, const char *spec_path,
                           const char *keys_path, char **buf, size_t *len) {
  char *text = NULL, head[64];
  size_t tlen = 0;
  int h = snprintf(head, sizeof head, "sgdlab-run %s\n", run);
  if (strlen(run) != SG_STAGE_RUN_HEX || strspn(run, "0123456789abcdef") != SG_STAGE_RUN_HEX)
    return sg_err_set(SG_EINVAL, "stage: run id '%.40s' is not %d hex digits", run,
                      SG_STAGE_RUN_HEX);
  SG_CHECK(sg_stage_text(rank, size, spec_path, keys_path, &text, &tlen));
  char *out = malloc((size_t)h + tlen);
  if (out) memcpy(out, head, (size_t)h), memcpy(out + h, text, tlen);
  explicit_bzero(text, tlen);
  free(text);
  if (!out) return SG_ENOMEM;
  *buf = out;
  *len = (size_t)h + tlen;
  return SG_OK;
}

/* The decoded payload's run line against this task's run id (the
 * environment's); where the stage begins after it into *at. */
static int check_run(const char *p, size_t len, int rank, size_t *at) {
  const char *want = getenv(SG_STAGE_RUN_ENV);
  size_t h = strlen("sgdlab-run ") + SG_STAGE_RUN_HEX + 1;
  if (!want || strlen(want) != SG_STAGE_RUN_HEX)
    return sg_err_set(SG_ECONFIG, "rank %d: %s is not set (%d hex digits): the run this task "
                      "belongs to is unknown", rank, SG_STAGE_RUN_ENV, SG_STAGE_RUN_HEX);
  if (len < h || strncmp(p, "sgdlab-run ", 11) || p[h - 1] != '\n')
    return sg_err_set(SG_EPROTO, "rank %d: the decoded stage does not begin with its run line",
                      rank);
  if (memcmp(p + 11, want, SG_STAGE_RUN_HEX))
    return sg_err_set(SG_EPROTO, "rank %d: the stage credential (line %d) is another run's, "
                      "not this task's run %s: refused", rank, rank + 1, want);
  *at += h;
  return SG_OK;
}

int sg_stage_munge_read(int fd, int rank, const char *socket, sg_opts_t **spec, sg_keys_t **keys,
                        int *size) {
  char *line = NULL, sock[4200], msg[256];
  size_t len = 0, at = 0;
  int status, got = -2, rc = SG_OK;
  filter_t f = {0};
  *spec = NULL;
  *keys = NULL;
  if (socket && socket[0]) SG_TRY(sg_stage_munge_socket_check(socket));
  SG_TRY(read_line_k(fd, rank, &line, &len));
  SG_TRY(check_cred(line, len, rank));
  snprintf(sock, sizeof sock, "--socket=%s", socket ? socket : "");
  char *argv[] = {"unmunge", "--numeric", "--keys=STATUS,UID,GID",
                  socket && socket[0] ? sock : NULL, NULL};
  f.in = line;
  f.in_len = len;
  if (filter_run(argv, &f, &status) < 0 || status != 0) {
    rc = sg_err_set(SG_EPROTO, "rank %d: unmunge (exit %d) refused this rank's stage credential "
                    "(line %d): %s", rank, status, rank + 1,
                    f.out ? error_line(f.out, msg, sizeof msg) : sg_err_msg());
    goto fail;
  }
  SG_TRY(check_meta(f.out, f.out_len, rank, &at));
  SG_TRY(check_run(f.out + at, f.out_len - at, rank, &at));
  if ((rc = sg_stage_parse(f.out + at, f.out_len - at, spec, keys, &got, size)) < 0) {
    snprintf(msg, sizeof msg, "%s", sg_err_msg());
    rc = sg_err_set(rc, "rank %d: the decoded stage: %s", rank, msg);
  } else if (got != rank) {
    rc = sg_err_set(SG_EPROTO, "rank %d: line %d's stage is rank %d's", rank, rank + 1, got);
  }
fail:
  if (rc < 0 && strncmp(sg_err_msg(), "rank ", 5)) { /* a pipe, poll or fork error */
    snprintf(msg, sizeof msg, "%s", sg_err_msg());
    rc = sg_err_set(rc, "rank %d: the stage: %s", rank, msg);
  }
  if (f.out) explicit_bzero(f.out, f.out_len);
  free(f.out);
  free(line);
  if (rc < 0) {
    sg_keys_destroy(keys);
    sg_opts_destroy(spec);
  }
  return rc;
}
