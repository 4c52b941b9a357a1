/* The stage as munge credentials (core/stage.h, launcher slurm), against a
 * real munged of the test's own (fresh key, socket in a private
 * directory) and the real sgdlab-rank:
 *  - a round trip: rank 1 of 3 decodes line 2 of three credentials and
 *    gets its stage (spec and keys equal to the files', but only its own
 *    secret key: the other ranks' and the harness's are not in it);
 *  - refused, each in one line naming the rank, exit 2, before any socket
 *    opens: a replayed credential (decoded once already), a credential of
 *    another uid (made by nobody, unrestricted; root's munged decodes it,
 *    the rank's uid check refuses), one restricted to another uid (munged
 *    refuses), garbage, a credential with more on its line, a line cut
 *    short, an empty input, a line longer than any credential, a credential whose stage is another rank's, one made for
 *    another run (another run id: a fresh credential munged has not seen,
 *    as a replay into another job's input would be), and a task without
 *    a run id in its environment;
 *  - a munged socket (SGDLAB_MUNGE_SOCKET) that someone else could put in
 *    place: in a directory others may write, where nobody listens as a
 *    munged of their own, the harness's encode is refused in one line and
 *    nobody reads a byte (a munge client sends the payload to whoever
 *    answers there: before the check, nobody read the stage's secret),
 *    the rank refuses in one line, exit 2, and `sgdlab run` with launcher
 *    slurm exits 2 before anything launches; then one probe each: a
 *    sticky world-writable directory, a directory of nobody's, a
 *    directory reached through nobody's symlink, the socket a symlink or
 *    a file or nobody's socket, a relative path; a root 0755 directory
 *    with root's socket or none passes.
 * Skips when munge is not installed; the other-uid cases need root. */
#define _GNU_SOURCE
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include "auth.h"
#include "err.h"
#include "proc.h"
#include "run_util.h"
#include "stage.h"

#define NOBODY 65534
/* this test's run id and another run's (stage.h, SG_STAGE_RUN_ENV) */
#define RUN "0123456789abcdef0123456789abcdef"
#define OTHER_RUN "fedcba9876543210fedcba9876543210"

static char g_dir[128], g_sock[192];
static const char *g_rank_sock; /* the rank's SGDLAB_MUNGE_SOCKET; NULL: g_sock */
static pid_t g_munged = -1;
static int g_guard = -1; /* munged_guard's pipe: a byte there says munged_stop has run */
static unsigned long long g_munged_start; /* its start time, read right after its pid */

/* A pidfd of munged, or -1 when g_munged is no longer it (it ended by
 * itself and the pid may be another process's by now): opened first,
 * checked after, so a signal through it reaches munged or nobody. */
static int munged_pidfd(void) {
  int pfd = (int)syscall(SYS_pidfd_open, g_munged, 0);
  if (pfd >= 0 && (!g_munged_start || sg_proc_start(g_munged) != g_munged_start)) {
    close(pfd);
    pfd = -1;
  }
  return pfd;
}

static void munged_stop(void) {
  if (g_munged <= 0) return;
  /* through a checked pidfd: a munged that ended by itself leaves its pid
   * to be reused, and a kill by pid would reach whoever has it now */
  int pfd = munged_pidfd();
  if (pfd >= 0) syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0);
  struct pollfd p = {pfd, POLLIN, 0};
  int gone = pfd < 0 || poll(&p, 1, 10000) == 1; /* readable when it has exited */
  if (pfd >= 0) close(pfd);
  g_munged = -1;
  if (g_dir[0]) ru_rm_rf(g_dir);
  /* the guard's word: nothing left for it (unless munged outlived the wait) */
  if (g_guard >= 0 && gone && write(g_guard, "x", 1) != 1)
    fprintf(stderr, "  munged guard: %s\n", strerror(errno));
}

/* munged daemonizes, so it would outlive this test if CTest killed it
 * (SIGKILL at the timeout; CTest kills the test's process tree, and a
 * daemon is not in it).  A guard, not in the tree either (forked twice),
 * holds a pidfd of munged and the read end of a pipe whose write end only
 * this test holds (close-on-exec): when the test has ended, however, the
 * read sees EOF and, when munged still runs (munged_stop did not), the
 * guard stops it through the pidfd and removes the directory.  When
 * munged_stop has done so itself, it writes a byte first and the guard
 * does nothing (the path, removed, may be anyone's by then). */
static void munged_guard(void) {
  int p[2], pfd = munged_pidfd();
  if (pfd < 0 || pipe2(p, O_CLOEXEC) < 0) {
    fprintf(stderr, "  no guard for munged (%s): a kill of this test would leave it\n",
            strerror(errno));
    if (pfd >= 0) close(pfd);
    return;
  }
  pid_t mid = fork();
  if (mid == 0) {
    if (fork() != 0) _exit(0);
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3 && null >= 0; fd++) dup2(null, fd); /* not CTest's pipes */
    close(p[1]);
    char c;
    ssize_t r;
    while ((r = read(p[0], &c, 1)) < 0 && errno == EINTR) {
    }
    /* a byte: munged_stop has stopped munged and removed the directory,
     * and the path may be anyone's by now; a signal to munged would also
     * "succeed" while it is a zombie nobody reaps.  EOF without it: the
     * test ended before munged_stop did. */
    if (r == 1) _exit(0);
    struct pollfd q = {pfd, POLLIN, 0};
    if (syscall(SYS_pidfd_send_signal, pfd, SIGTERM, NULL, 0) == 0) { /* munged_stop did not run */
      poll(&q, 1, 10000);
      ru_rm_rf(g_dir);
    }
    _exit(0);
  }
  close(p[0]);
  close(pfd);
  if (mid > 0) waitpid(mid, NULL, 0);
  g_guard = p[1]; /* open until this process ends, or munged_stop's word */
}

/* munged of our own; it daemonizes once its socket is ready (munged's
 * parent waits for the child's word), so its exit is the signal. */
static int munged_start(void) {
  if (g_munged > 0) return 0;
  char key[256], pid[256], log[256], seed[256], cmd[2048];
  if (ru_mkdtemp(g_dir, sizeof g_dir, "munge") < 0) return -1;
  chmod(g_dir, 0755); /* nobody's munge reaches the socket */
  snprintf(g_sock, sizeof g_sock, "%s/munge.sock", g_dir);
  snprintf(key, sizeof key, "%s/munge.key", g_dir);
  snprintf(pid, sizeof pid, "%s/munged.pid", g_dir);
  snprintf(log, sizeof log, "%s/munged.log", g_dir);
  snprintf(seed, sizeof seed, "%s/munged.seed", g_dir);
  snprintf(cmd, sizeof cmd, "head -c 1024 /dev/urandom > '%s' && chmod 0400 '%s' && "
           "munged --force --socket='%s' --key-file='%s' --pid-file='%s' --log-file='%s' "
           "--seed-file='%s'", key, key, g_sock, key, pid, log, seed);
  if (ru_sh(cmd) != 0) return -1;
  char *p = ru_slurp(pid, 64);
  g_munged = p ? atoi(p) : -1;
  free(p);
  g_munged_start = g_munged > 0 ? sg_proc_start(g_munged) : 0;
  if (g_munged > 0) munged_guard();
  atexit(munged_stop);
  return g_munged > 0 ? 0 : -1;
}

static int on_path(const char *prog) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", prog);
  return ru_sh(cmd) == 0;
}

/* A spec and key file for a run of 3 ranks in g_dir. */
static void files(char *spec, char *keys, size_t cap) {
  snprintf(spec, cap, "%s/spec", g_dir);
  snprintf(keys, cap, "%s/keys", g_dir);
  unlink(keys);
  CHECK_OK(ru_write_file(spec, "engine=local\nworkers=3\n_nprocs=3\n"));
  sg_keys_t *k = NULL;
  CHECK_OK(sg_keys_new(&k, 3));
  CHECK_OK(sg_keys_save(k, keys));
  sg_keys_destroy(&k);
}

/* The credential of rank r's stage (made as uid/gid when >= 0, by a
 * child that drops to them; with restrict, restricted to them). */
static void cred_run(char **out_cred, const char *run, const char *spec, const char *keys, int r,
                     int uid, int restrict_to) {
  char *text = NULL, *cred = NULL;
  *out_cred = NULL;
  size_t tlen = 0, clen = 0;
  CHECK_OK(sg_stage_munge_payload(run, r, 3, spec, keys, &text, &tlen));
  if (uid < 0) {
    CHECK_OK(sg_stage_munge_encode(text, tlen, g_sock, &cred, &clen));
    free(text);
    *out_cred = cred;
    return;
  }
  char in[256], out[256], cmd[2048];
  snprintf(in, sizeof in, "%s/payload", g_dir);
  snprintf(out, sizeof out, "%s/cred", g_dir);
  FILE *f = fopen(in, "w");
  CHECK(f);
  fwrite(text, 1, tlen, f);
  fclose(f);
  chmod(in, 0644);
  snprintf(cmd, sizeof cmd, "setpriv --reuid=%d --regid=%d --clear-groups munge --socket='%s' "
           "%s --input='%s' > '%s'", uid, uid, g_sock,
           restrict_to ? "--restrict-uid=65534 --restrict-gid=65534" : "", in, out);
  CHECK_MSG(ru_sh(cmd) == 0, "munge as uid %d failed", uid);
  free(text);
  *out_cred = ru_slurp(out, SG_STAGE_CRED_MAX);
}

/* The same for this test's run. */
static void cred_as(char **out_cred, const char *spec, const char *keys, int r, int uid,
                    int restrict_to) {
  cred_run(out_cred, RUN, spec, keys, r, uid, restrict_to);
}

/* sgdlab-rank --stdin-munge as SLURM_PROCID=1 with `input` on its
 * standard input (and `env`, "" or VAR=VALUE, in its environment): exit 2
 * and one line on stderr holding `want`. */
static void refused_env(const char *input, const char *env, const char *want, const char *what) {
  char in[256], err[256], cmd[4096];
  snprintf(in, sizeof in, "%s/stdin", g_dir);
  snprintf(err, sizeof err, "%s/stderr", g_dir);
  CHECK_OK(ru_write_file(in, input));
  snprintf(cmd, sizeof cmd, "%s SLURM_PROCID=1 %s='%s' '%s/harness/sgdlab-rank' --stdin-munge < "
           "'%s' 2> '%s'", env, SG_STAGE_MUNGE_SOCKET_ENV, g_rank_sock ? g_rank_sock : g_sock,
           getenv("SGDLAB_BIN_DIR"), in,
           err);
  int rc = ru_sh(cmd);
  char *e = ru_slurp(err, 65536);
  CHECK(e);
  int lines = 0;
  for (const char *p = e; *p; p++) lines += *p == '\n';
  fprintf(stderr, "  %s: exit %d: %s", what, rc, e);
  CHECK_MSG(rc == 2 && lines == 1, "%s: exit %d, %d lines", what, rc, lines);
  CHECK_MSG(strstr(e, "rank 1:") && strstr(e, want), "%s: '%s' lacks 'rank 1:' or '%s'", what, e,
            want);
  free(e);
}

static void refused(const char *input, const char *want, const char *what) {
  refused_env(input, "", want, what);
}

/* Three credential lines with `mid` (rank 1's) in the middle. */
static char *three(const char *a, const char *mid, const char *c) {
  char *s = NULL;
  return asprintf(&s, "%s%s%s", a, mid, c) > 0 ? s : NULL;
}

TEST(munge_stage_round_trip_and_refusals) {
  if (!on_path("munged") || !on_path("munge") || !on_path("unmunge")) {
    fprintf(stderr, "SKIP munge_stage: munge is not installed\n");
    return;
  }
  CHECK_OK(munged_start());
  setenv(SG_STAGE_RUN_ENV, RUN, 1); /* what srun --export=ALL hands the tasks */
  char spec[256], keys[256];
  files(spec, keys, sizeof spec);
  char *c0, *c1, *c2;
  cred_as(&c0, spec, keys, 0, -1, 0);
  cred_as(&c1, spec, keys, 1, -1, 0);
  cred_as(&c2, spec, keys, 2, -1, 0);
  CHECK(c0 && c1 && c2);
  char *all = three(c0, c1, c2);
  CHECK(all);
  int p[2];
  CHECK_EQ_INT(pipe(p), 0);
  CHECK_EQ_INT((int)write(p[1], all, strlen(all)), (int)strlen(all));
  close(p[1]);
  sg_opts_t *o = NULL;
  sg_keys_t *k = NULL, *want = NULL;
  int size = 0;
  CHECK_OK(sg_stage_munge_read(p[0], 1, g_sock, &o, &k, &size));
  close(p[0]);
  CHECK_OK(sg_keys_load(&want, keys, 3));
  CHECK_EQ_INT(size, 3);
  CHECK(sg_opts_get(o, "engine") && !strcmp(sg_opts_get(o, "engine"), "local"));
  CHECK(!strcmp(sg_keys_secret(k, 1), sg_keys_secret(want, 1)));
  /* rank 1's own secret only: the others' public keys, never their secrets */
  CHECK(!sg_keys_secret(k, 0) && !sg_keys_secret(k, 2) && !sg_keys_secret(k, SG_AUTH_HARNESS));
  CHECK(!strcmp(sg_keys_public(k, 2), sg_keys_public(want, 2)));
  CHECK(!strcmp(sg_keys_public(k, SG_AUTH_HARNESS), sg_keys_public(want, SG_AUTH_HARNESS)));
  sg_keys_destroy(&k);
  sg_keys_destroy(&want);
  sg_opts_destroy(&o);
  refused(all, "Replayed", "a replayed credential");
  char *fresh0, *fresh1;
  cred_as(&fresh0, spec, keys, 0, -1, 0);
  cred_as(&fresh1, spec, keys, 1, -1, 0);
  CHECK(fresh0 && fresh1);
  char *swapped = three(fresh1, fresh0, c2); /* line 2 holds rank 0's stage */
  refused(swapped, "stage is rank 0's", "another rank's stage");
  refused("MUNGE:nothing-like-it\nhello\n", "not a munge credential", "garbage");
  char *extra = strdup(fresh1);
  extra[strlen(extra) - 1] = '\0';
  char *tail = NULL;
  CHECK(asprintf(&tail, "%s%s x\n", c0, extra) > 0);
  refused(tail, "not a munge credential", "more after the credential");
  refused("MUNGE:AAAA:\n", "ends at offset", "no line 2");
  refused("", "ends at offset 0", "an empty input");
  size_t hcap = strlen(c0) + SG_STAGE_CRED_MAX + 64;
  char *huge = malloc(hcap);
  CHECK(huge);
  if (huge) { /* line 2 one byte past the cap, no newline: not buffered whole */
    size_t at = (size_t)snprintf(huge, hcap, "%sMUNGE:", c0);
    memset(huge + at, 'A', SG_STAGE_CRED_MAX + 1 - 6);
    huge[at + SG_STAGE_CRED_MAX + 1 - 6] = '\0';
    refused(huge, "is longer than", "a line longer than a credential can be");
    free(huge);
  }
  refused("MUNGE:AAAA:\nMUNGE:AAAAAAAAAAAA:\n", "unmunge", "a credential munged cannot decode");
  char *elsewhere, *fresh2;
  cred_run(&elsewhere, OTHER_RUN, spec, keys, 1, -1, 0);
  cred_as(&fresh2, spec, keys, 1, -1, 0);
  CHECK(elsewhere && fresh2);
  char *l3 = three(c0, elsewhere, c2), *l4 = three(c0, fresh2, c2);
  refused(l3, "another run's", "a credential made for another run");
  refused_env(l4, SG_STAGE_RUN_ENV "=", "is not set", "a task without a run id");
  free(l3), free(l4), free(elsewhere), free(fresh2);
  if (getuid() == 0) {
    char *other, *restricted;
    cred_as(&other, spec, keys, 1, NOBODY, 0);
    cred_as(&restricted, spec, keys, 1, NOBODY, 1);
    CHECK(other && restricted);
    char *l1 = three(c0, other, c2), *l2 = three(c0, restricted, c2);
    refused(l1, "uid 65534", "a credential of another uid");
    refused(l2, "Unauthorized", "a credential restricted to another uid");
    free(l1), free(l2), free(other), free(restricted);
  } else {
    fprintf(stderr, "  (not root: the other-uid cases skipped)\n");
  }
  free(c0), free(c1), free(c2), free(all), free(fresh0), free(fresh1), free(swapped);
  free(extra), free(tail);
}

/* ---- a munged socket someone else could put in place ------------------------- */

static void drop_to_nobody(void) {
  if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
      setresuid(NOBODY, NOBODY, NOBODY) < 0)
    _exit(1);
}

static int listen_at(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path) return -1;
  memcpy(a.sun_path, path, strlen(path) + 1);
  int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 8) < 0) return -1;
  return ls;
}

/* As nobody: a "munged" on path that reads what clients send until `stop`
 * is readable (at most 30 s; a client silent for 3 s is dropped), then
 * writes to `out` how many bytes came and whether `secret` was in them. */
static void fake_munged(const char *path, int stop, int out, const char *secret) {
  static char buf[1 << 20];
  long res[2] = {0, 0};
  drop_to_nobody();
  int ls = listen_at(path);
  if (ls < 0 || write(out, "R", 1) != 1) _exit(2);
  for (size_t got = 0;;) {
    struct pollfd p[2] = {{ls, POLLIN, 0}, {stop, POLLIN, 0}};
    if (poll(p, 2, 30000) <= 0 || p[1].revents) break;
    int c = accept(ls, NULL, NULL);
    struct pollfd q = {c, POLLIN, 0};
    for (ssize_t r; c >= 0 && got < sizeof buf && poll(&q, 1, 3000) == 1 &&
                    (r = read(c, buf + got, sizeof buf - got)) > 0;)
      got += (size_t)r;
    if (c >= 0) close(c);
    res[0] = (long)got;
    res[1] = memmem(buf, got, secret, strlen(secret)) != NULL;
  }
  _exit(write(out, res, sizeof res) == (ssize_t)sizeof res ? 0 : 3);
}

/* One probe of sg_stage_munge_socket_check: refused with `want` in its
 * one line, or (want NULL) accepted. */
static void probe(const char *sock, const char *want, const char *what) {
  int rc = sg_stage_munge_socket_check(sock);
  fprintf(stderr, "  probe %s: %s\n", what, rc ? sg_err_msg() : "accepted");
  if (!want) {
    CHECK_MSG(rc == 0, "%s: refused: %s", what, sg_err_msg());
    return;
  }
  CHECK_MSG(rc == SG_EINVAL && strstr(sg_err_msg(), want) && !strchr(sg_err_msg(), '\n') &&
            strstr(sg_err_msg(), SG_STAGE_MUNGE_SOCKET_ENV "="),
            "%s: rc %d, '%s' lacks '%s'", what, rc, sg_err_msg(), want);
}

/* The attack: nobody's munged in a world-writable directory, the harness's
 * encode against it, and what nobody read. */
static void socket_attack(const char *dir, const char *sock) {
  const char *secret = "rank-1-secret-0123456789abcdefghijABCDEFGHIJ";
  char payload[256];
  int stop[2], out[2];
  long res[2] = {-1, -1};
  snprintf(payload, sizeof payload, "sgdlab-run %s\nkeys: %s\n", RUN, secret);
  CHECK(pipe(stop) == 0 && pipe(out) == 0);
  pid_t fake = fork();
  if (fake == 0) fake_munged(sock, stop[0], out[1], secret);
  char ready = 0;
  CHECK(fake > 0 && read(out[0], &ready, 1) == 1 && ready == 'R');
  char *cred = NULL;
  size_t clen = 0;
  int rc = sg_stage_munge_encode(payload, strlen(payload), sock, &cred, &clen);
  fprintf(stderr, "  encode with the socket in %s (mode 0777), nobody listening: %d: %s\n", dir,
          rc, rc ? sg_err_msg() : "a credential");
  free(cred);
  CHECK(write(stop[1], "x", 1) == 1);
  CHECK(read(out[0], res, sizeof res) == (ssize_t)sizeof res);
  waitpid(fake, NULL, 0);
  close(stop[0]), close(stop[1]), close(out[0]), close(out[1]);
  fprintf(stderr, "  nobody's munged read %ld bytes, the secret %s in them\n", res[0],
          res[1] ? "IS" : "is not");
  CHECK_MSG(res[1] == 0, "nobody's munged read the stage's secret");
  CHECK_MSG(rc == SG_EINVAL && strstr(sg_err_msg(), "writable by others"),
            "encode was not refused: %d", rc);
  CHECK_MSG(res[0] == 0, "nobody's munged got %ld bytes", res[0]);
}

/* `sgdlab run` with launcher slurm and the socket named: exit 2, one
 * line, nothing launched. */
static void run_refused(const char *dir, const char *sock) {
  char cfg[256], db[256], *out = NULL;
  snprintf(cfg, sizeof cfg, "%s/exp.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK_OK(ru_write_file(cfg, "name: s\nworkers: 2\nlauncher: slurm\nengines: [allreduce]\n"
                              "workload: {epochs: 1}\n"));
  setenv("SLURM_JOB_ID", "1", 1);
  setenv(SG_STAGE_MUNGE_SOCKET_ENV, sock, 1);
  int rc = ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, NULL);
  unsetenv("SLURM_JOB_ID");
  unsetenv(SG_STAGE_MUNGE_SOCKET_ENV);
  fprintf(stderr, "  sgdlab run, launcher slurm: exit %d: %s", rc, out ? out : "(none)\n");
  int lines = 0;
  for (const char *p = out ? out : ""; *p; p++) lines += *p == '\n';
  CHECK_MSG(rc == 2 && lines == 1 && strstr(out, "writable by others") && access(db, F_OK) < 0,
            "sgdlab run: exit %d, %d lines, database %s", rc, lines,
            access(db, F_OK) == 0 ? "made" : "not made");
  free(out);
}

/* A directory made 0755 and given to uid. */
static void dir_of(char *out, size_t cap, const char *parent, const char *leaf, int uid, int mode) {
  snprintf(out, cap, "%s/%s", parent, leaf);
  CHECK(mkdir(out, 0700) == 0 && chown(out, (uid_t)uid, (gid_t)uid) == 0 && chmod(out, (mode_t)mode) == 0);
}

/* The probes that need another user (root only). */
static void probes_as_root(const char *top) {
  char d[256], sock[320], link[256];
  dir_of(d, sizeof d, top, "nobodys", NOBODY, 0755);
  snprintf(sock, sizeof sock, "%s/munge.sock", d);
  probe(sock, "owned by uid 65534", "a directory of nobody's");
  dir_of(d, sizeof d, top, "root", 0, 0755);
  snprintf(link, sizeof link, "%s/via", top);
  CHECK(symlink(d, link) == 0 && lchown(link, NOBODY, NOBODY) == 0);
  snprintf(sock, sizeof sock, "%s/munge.sock", link);
  probe(sock, "symlink owned by uid 65534", "a directory through nobody's symlink");
  snprintf(sock, sizeof sock, "%s/theirs.sock", d);
  int ls = listen_at(sock);
  CHECK(ls >= 0 && chown(sock, NOBODY, NOBODY) == 0);
  close(ls);
  probe(sock, "a socket of uid 65534", "nobody's socket in root's directory");
}

/* One probe per way the socket could be someone else's, and the two that
 * pass. */
static void socket_probes(const char *top) {
  char d[256], sock[320], target[320];
  dir_of(d, sizeof d, top, "sticky", 0, 01777);
  snprintf(sock, sizeof sock, "%s/munge.sock", d);
  probe(sock, "writable by others (mode 1777)", "a sticky world-writable directory");
  dir_of(d, sizeof d, top, "ok", 0, 0755);
  snprintf(sock, sizeof sock, "%s/munge.sock", d);
  probe(sock, NULL, "a root 0755 directory, no socket yet");
  int ls = listen_at(sock);
  CHECK(ls >= 0);
  close(ls);
  probe(sock, NULL, "a root 0755 directory, root's socket");
  snprintf(target, sizeof target, "%s/link.sock", d);
  CHECK(symlink(sock, target) == 0);
  probe(target, "a symlink, not a socket", "the socket a symlink");
  snprintf(target, sizeof target, "%s/file.sock", d);
  CHECK_OK(ru_write_file(target, "x"));
  probe(target, "a file, not a socket", "the socket a regular file");
  probe("munge.sock", "not an absolute path", "a relative path");
  if (geteuid() == 0) probes_as_root(top);
}

TEST(munge_socket_others_could_replace_is_refused) {
  if (!on_path("munge") || !on_path("unmunge")) {
    fprintf(stderr, "SKIP munge_socket: munge is not installed\n");
    return;
  }
  char top[128], w[256], sock[320];
  CHECK(ru_mkdtemp(top, sizeof top, "munge-sock") == 0);
  chmod(top, 0755);
  dir_of(w, sizeof w, top, "open", 0, 0777); /* others may write it */
  snprintf(sock, sizeof sock, "%s/munge.sock", w);
  if (geteuid() == 0) socket_attack(w, sock);
  else probe(sock, "writable by others", "a world-writable directory");
  if (test_failed_now_) return;
  unlink(sock);
  setenv(SG_STAGE_RUN_ENV, RUN, 1);
  char keep[sizeof g_dir]; /* the munged's directory, removed at exit */
  snprintf(keep, sizeof keep, "%s", g_dir);
  snprintf(g_dir, sizeof g_dir, "%s", top);
  g_rank_sock = sock;
  refused("MUNGE:AAAA:\nMUNGE:AAAA:\n", "writable by others", "the rank, its socket's directory 0777");
  g_rank_sock = NULL;
  snprintf(g_dir, sizeof g_dir, "%s", keep);
  if (test_failed_now_) return;
  run_refused(top, sock);
  if (!test_failed_now_) socket_probes(top);
  ru_rm_rf(top);
}
