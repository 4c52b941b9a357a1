/* The stage a rank reads from its standard input under launcher ssh
 * (core/stage.h): a round trip through a pipe, and every malformed or
 * short stage refused with a message naming what and where.  Also the
 * host lists of hosts:/hostfile: (harness/run/launch_ssh.c). */
#define _GNU_SOURCE
#include "test.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "err.h"
#include "launch.h"
#include "run_util.h"
#include "stage.h"

static char g_dir[128];

static void files(const char **spec, const char **keys) {
  static char sp[192], kp[192];
  if (!g_dir[0]) CHECK_OK(ru_mkdtemp(g_dir, sizeof g_dir, "stage"));
  snprintf(sp, sizeof sp, "%s/spec", g_dir);
  snprintf(kp, sizeof kp, "%s/keys", g_dir);
  unlink(sp);
  unlink(kp);
  CHECK_OK(ru_write_file(sp, "engine=local\nworkers=2\n_nprocs=2\n"));
  sg_keys_t *k = NULL;
  CHECK_OK(sg_keys_new(&k, 2));
  CHECK_OK(sg_keys_save(k, kp));
  sg_keys_destroy(&k);
  *spec = sp;
  *keys = kp;
}

/* bytes into a pipe (closed after), then sg_stage_read of it */
static int read_bytes(const char *bytes, size_t n, sg_opts_t **o, sg_keys_t **k, int *r, int *s) {
  int p[2];
  if (pipe(p) != 0) return -100;
  ssize_t w = write(p[1], bytes, n);
  close(p[1]);
  int rc = w == (ssize_t)n ? sg_stage_read(p[0], o, k, r, s) : -100;
  close(p[0]);
  return rc;
}

TEST(stage_round_trip) {
  const char *spec, *keys;
  files(&spec, &keys);
  int p[2], rank = -1, size = -1;
  CHECK(pipe(p) == 0);
  CHECK_OK(sg_stage_write(p[1], 1, 2, spec, keys));
  close(p[1]);
  sg_opts_t *o = NULL;
  sg_keys_t *k = NULL;
  CHECK_OK(sg_stage_read(p[0], &o, &k, &rank, &size));
  close(p[0]);
  CHECK_EQ_INT(rank, 1);
  CHECK_EQ_INT(size, 2);
  CHECK(o && !strcmp(sg_opts_str_or(o, "engine", ""), "local"));
  CHECK(k && sg_keys_nranks(k) == 2);
  sg_keys_t *f = NULL;
  CHECK_OK(sg_keys_load(&f, keys, 2));
  CHECK(!strcmp(sg_keys_secret(f, 1), sg_keys_secret(k, 1)));
  /* only its own secret: rank 0's and the harness's stay home */
  CHECK(!sg_keys_secret(k, 0) && !sg_keys_secret(k, SG_AUTH_HARNESS));
  CHECK(!strcmp(sg_keys_public(f, 0), sg_keys_public(k, 0)));
  CHECK(!strcmp(sg_keys_public(f, SG_AUTH_HARNESS), sg_keys_public(k, SG_AUTH_HARNESS)));
  sg_keys_destroy(&f);
  sg_keys_destroy(&k);
  sg_opts_destroy(&o);
}

TEST(stage_refuses_bad_input) {
  static const struct {
    const char *bytes, *want;
  } bad[] = {
      {"", "ends at byte 0"},
      {"hello\n", "not a stage header"},
      {"sgdlab-stage 1 2 2 3 0\nx=1", "rank < size"},
      {"sgdlab-stage 1 -2 2 3 0\nx=1", "rank < size"},
      {"sgdlab-stage 1 0 1 99999999 0\n", "not a stage header"},
      {"sgdlab-stage 1 0 2 10 0\nengine=", "the spec ends at byte 7 of 10"},
      {"sgdlab-stage 1 0 2 4 5\nx=1\nsgdla", "not a key file"},
      {"sgdlab-stage 1 0 2 4 0\nxyz\n", "expected key=value"},
      {"sgdlab-stage 1 0 2 4 0 trailing\n", "not a stage header"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    sg_opts_t *o = NULL;
    sg_keys_t *k = NULL;
    int r, s;
    int rc = read_bytes(bad[i].bytes, strlen(bad[i].bytes), &o, &k, &r, &s);
    CHECK_MSG(rc < 0 && strstr(sg_err_msg(), bad[i].want), "case %zu: rc %d: %s", i, rc,
              sg_err_msg());
    CHECK(!o && !k);
  }
}

TEST(host_lists) {
  char out[256], hf[192];
  int n;
  CHECK_OK(sg_hosts_check("a:2,b.example,10.0.0.3", &n));
  CHECK_EQ_INT(n, 4);
  const char *want[] = {"a", "a", "b.example", "10.0.0.3", "a"};
  for (int r = 0; r < 5; r++) {
    CHECK_OK(sg_hosts_of_rank("a:2,b.example,10.0.0.3", r, out, sizeof out));
    CHECK_MSG(!strcmp(out, want[r]), "rank %d on %s", r, out);
  }
  const char *refused[] = {"-oProxyCommand=x", "a;b", "a:0", "a:", "a b", "", "a,,b", "$(x)"};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
    CHECK_MSG(sg_hosts_check(refused[i], NULL) < 0, "'%s' accepted", refused[i]);
  if (!g_dir[0]) CHECK_OK(ru_mkdtemp(g_dir, sizeof g_dir, "stage"));
  snprintf(hf, sizeof hf, "%s/hostfile", g_dir);
  CHECK_OK(ru_write_file(hf, "# nodes\nn1 slots=2\n\nn2   # one\nn3 slots=1 max_slots=4\n"));
  CHECK_OK(sg_hosts_from_file(hf, out, sizeof out));
  CHECK_MSG(!strcmp(out, "n1:2,n2,n3"), "hostfile read as '%s'", out);
  CHECK_OK(ru_write_file(hf, "n1\nn2 cpus=2\n"));
  CHECK(sg_hosts_from_file(hf, out, sizeof out) < 0 && strstr(sg_err_msg(), ":2: 'cpus=2'"));
  CHECK_OK(ru_write_file(hf, "n1\n-oProxyCommand=x\n"));
  CHECK(sg_hosts_from_file(hf, out, sizeof out) < 0 && strstr(sg_err_msg(), ":2:"));
  CHECK(sg_ssh_config_check("relative/conf") < 0);
  CHECK(sg_ssh_config_check("/tmp/a b") < 0 && strstr(sg_err_msg(), "only letters"));
  CHECK(sg_ssh_config_check("/nonexistent/sgdlab/conf") < 0);
  CHECK_OK(sg_ssh_config_check(hf));
  /* ssh runs what the file names: one another user could write is refused */
  CHECK(chmod(hf, 0666) == 0);
  CHECK(sg_ssh_config_check(hf) < 0 && strstr(sg_err_msg(), "writable by others"));
  CHECK(chmod(hf, 0600) == 0 && chmod(g_dir, 0777) == 0);
  CHECK(sg_ssh_config_check(hf) < 0 && strstr(sg_err_msg(), "writable by others"));
  CHECK(chmod(g_dir, 01777) == 0); /* sticky, as /tmp: others cannot replace the file */
  CHECK_OK(sg_ssh_config_check(hf));
  CHECK(chmod(g_dir, 0700) == 0);
  /* a link is refused even to a trusted file: ssh opens the link, which
   * whoever owns its directory may point elsewhere after the check */
  char ln[PATH_MAX], dotted[PATH_MAX];
  snprintf(ln, sizeof ln, "%s/link", g_dir);
  snprintf(dotted, sizeof dotted, "%s/./hostfile", g_dir);
  CHECK(symlink(hf, ln) == 0);
  CHECK(sg_ssh_config_check(ln) < 0 && strstr(sg_err_msg(), "symbolic link"));
  CHECK(sg_ssh_config_check(dotted) < 0 && strstr(sg_err_msg(), "symbolic link"));
  CHECK(unlink(ln) == 0);
  if (geteuid() == 0) {
    CHECK(chown(hf, 65534, 65534) == 0);
    CHECK(sg_ssh_config_check(hf) < 0 && strstr(sg_err_msg(), "owned by uid 65534"));
    CHECK(chown(hf, 0, 0) == 0);
  }
  ru_rm_rf(g_dir);
}
