/* launch_slurm.c - launcher slurm: the ranks are one srun step inside the
 * allocation sgdlab runs in (SLURM_JOB_ID), one task per rank spread
 * cyclically over the allocation's nodes (see launch.h). */
#define _GNU_SOURCE
#include "launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"
#include "outfile.h"
#include "stage.h"

/* NodeAddr of one node ("NodeAddr=198.18.0.2 "), or its name. */
static int node_addr(const char *node, char *out, size_t cap) {
  char buf[8192];
  char *argv[] = {"scontrol", "show", "node", "-o", (char *)node, NULL};
  SG_CHECK(sg_cluster_run(argv, buf, sizeof buf));
  const char *a = strstr(buf, "NodeAddr=");
  if (!a) return snprintf(out, cap, "%s", node), SG_OK;
  a += strlen("NodeAddr=");
  snprintf(out, cap, "%.*s", (int)strcspn(a, " \n"), a);
  return SG_OK;
}

int sg_slurm_node_addrs(char *out, size_t cap, int *nnodes) {
  const char *list = getenv("SLURM_JOB_NODELIST");
  char names[16384];
  out[0] = '\0';
  *nnodes = 0;
  if (!list || !*list) return sg_err_set(SG_ECONFIG, "launcher slurm: SLURM_JOB_NODELIST is not set");
  char *argv[] = {"scontrol", "show", "hostnames", (char *)list, NULL};
  SG_CHECK(sg_cluster_run(argv, names, sizeof names));
  size_t len = 0;
  for (char *save = NULL, *h = strtok_r(names, "\n", &save); h; h = strtok_r(NULL, "\n", &save)) {
    char addr[256];
    SG_CHECK(node_addr(h, addr, sizeof addr));
    int w = snprintf(out + len, cap - len, "%s%s", len ? "," : "", addr);
    if (w < 0 || (size_t)w >= cap - len) return sg_err_set(SG_ERANGE, "launcher slurm: too many nodes");
    len += (size_t)w;
    ++*nnodes;
  }
  if (!*nnodes) return sg_err_set(SG_ECONFIG, "launcher slurm: no nodes in '%s'", list);
  return SG_OK;
}

/* Test only: the stage in plain text over srun's standard input, as it
 * went before (proof that the capture test sees what it looks for). */
static int plain_stage(void) {
  const char *v = getenv(SG_SLURM_PLAIN_STAGE_ENV);
  return v && !strcmp(v, "1");
}

/* munged's socket for munge here and unmunge on the nodes: the one Slurm
 * itself uses (AuthInfo socket=, as `scontrol show config` says), else
 * munge's default; put in SG_STAGE_MUNGE_SOCKET_ENV for the tasks
 * (--export=ALL).  One set by the user stays. */
static int munge_socket(void) {
  static char conf[65536];
  const char *set = getenv(SG_STAGE_MUNGE_SOCKET_ENV);
  if (set && *set) return SG_OK;
  char *argv[] = {"scontrol", "show", "config", NULL};
  SG_CHECK(sg_cluster_run(argv, conf, sizeof conf));
  const char *a = strstr(conf, "\nAuthInfo");
  const char *eol = a ? strchr(a + 1, '\n') : NULL;
  const char *sock = a ? strstr(a, "socket=") : NULL;
  if (!sock || (eol && sock > eol)) return SG_OK;
  sock += strlen("socket=");
  char path[4096];
  snprintf(path, sizeof path, "%.*s", (int)strcspn(sock, ", \n"), sock);
  if (path[0]) setenv(SG_STAGE_MUNGE_SOCKET_ENV, path, 1);
  return SG_OK;
}

int sg_slurm_admit_socket(void) {
  const char *set = getenv(SG_STAGE_MUNGE_SOCKET_ENV);
  char why[1024];
  if (!set || !*set || sg_stage_munge_socket_check(set) == SG_OK) return SG_OK;
  snprintf(why, sizeof why, "%s", sg_err_msg());
  return sg_err_set(SG_EINVAL, "launcher slurm: %s", why);
}

/* Before srun starts: munge is here and its daemon answers (one empty
 * credential made), or one line says why not.  No plain fallback.  The
 * socket (the user's or Slurm's AuthInfo) only where no one else can
 * replace it. */
static int munge_ready(void) {
  if (!sg_launch_on_path("munge"))
    return sg_err_set(SG_ENOTFOUND, "launcher slurm: munge is not on PATH: the stage goes to the "
                      "nodes only as munge credentials (install munge; munged must run on every "
                      "node)");
  SG_CHECK(munge_socket());
  char *cred = NULL, why[1024];
  size_t len = 0;
  SG_CHECK(sg_slurm_admit_socket());
  if (sg_stage_munge_encode("", 0, getenv(SG_STAGE_MUNGE_SOCKET_ENV), &cred, &len) < 0) {
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return sg_err_set(SG_EIO, "launcher slurm: munged does not answer here: %s", why);
  }
  free(cred);
  return SG_OK;
}

/* This srun's run id (stage.h), drawn by sg_slurm_argv and put in the
 * environment the tasks inherit; the credentials carry it. */
static char stage_run[SG_STAGE_RUN_HEX + 1];

static int new_stage_run(void) {
  unsigned char r[SG_STAGE_RUN_HEX / 2];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
    return sg_err_set(SG_EIO, "launcher slurm: getrandom: %s", strerror(errno));
  for (size_t i = 0; i < sizeof r; i++) snprintf(stage_run + 2 * i, 3, "%02x", r[i]);
  setenv(SG_STAGE_RUN_ENV, stage_run, 1); /* srun --export=ALL */
  return SG_OK;
}

int sg_slurm_stage_write(int fd, int size, const char *spec_path, const char *keys_path) {
  if (plain_stage()) return sg_stage_write(fd, -1, size, spec_path, keys_path);
  const char *sock = getenv(SG_STAGE_MUNGE_SOCKET_ENV);
  int rc = SG_OK;
  if (!stage_run[0]) return sg_err_set(SG_EINTERNAL, "launcher slurm: no run id drawn");
  for (int r = 0; r < size && rc == SG_OK; r++) {
    char *text = NULL, *cred = NULL;
    size_t tlen = 0, clen = 0;
    rc = sg_stage_munge_payload(stage_run, r, size, spec_path, keys_path, &text, &tlen);
    if (rc == SG_OK) rc = sg_stage_munge_encode(text, tlen, sock, &cred, &clen);
    if (text) explicit_bzero(text, tlen);
    free(text);
    if (rc == SG_OK) rc = sg_stage_write_bytes(fd, cred, clen);
    free(cred);
  }
  return rc;
}

int sg_slurm_argv(const sg_launch_cfg_t *cfg, int mpi, char bufs[4][32], char **argv, size_t cap) {
  size_t a = 0;
  int plain = plain_stage();
  if (!plain) SG_CHECK(munge_ready());
  if (!plain) SG_CHECK(new_stage_run());
  const char *nn = getenv("SLURM_JOB_NUM_NODES");
  int nodes = nn ? atoi(nn) : 0;
  if (nodes <= 0 || nodes > cfg->nprocs) nodes = cfg->nprocs;
  snprintf(bufs[0], sizeof bufs[0], "--ntasks=%d", cfg->nprocs);
  snprintf(bufs[1], sizeof bufs[1], "--nodes=%d", nodes);
  snprintf(bufs[2], sizeof bufs[2], "--mpi=%s", mpi ? "pmix" : "none");
  char *args[] = {"srun", bufs[0], bufs[1], "--distribution=cyclic", "--overcommit",
                  "--kill-on-bad-exit=1", "--export=ALL", bufs[2], "--input=all",
                  (char *)cfg->rank_bin, plain ? "--stdin" : "--stdin-munge", NULL};
  for (int i = 0; args[i]; i++) {
    if (a + 1 >= cap) return sg_err_set(SG_EINVAL, "srun: too many arguments");
    argv[a++] = args[i];
  }
  argv[a] = NULL;
  return SG_OK;
}

/* s as one single-quoted shell word ('\'' for each quote) into f. */
static void sh_quote(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++)
    if (*s == '\'') fputs("'\\''", f);
    else fputc(*s, f);
  fputc('\'', f);
}

/* path made absolute against the working directory (the job may start
 * elsewhere) into out; SG_ERANGE when it does not fit. */
static int absolute(const char *path, char *out, size_t cap) {
  char cwd[4096];
  int w = path[0] == '/' || !getcwd(cwd, sizeof cwd) ? snprintf(out, cap, "%s", path)
                                                     : snprintf(out, cap, "%s/%s", cwd, path);
  if (w < 0 || (size_t)w >= cap) return sg_err_set(SG_ERANGE, "--sbatch: path too long: %s", path);
  return SG_OK;
}

int sg_slurm_write_batch(const sg_slurm_batch_t *b) {
  char exe[4096], cfg[4096], db[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return sg_err_set(SG_EIO, "--sbatch: /proc/self/exe: %s", strerror(errno));
  exe[n] = '\0';
  SG_CHECK(absolute(b->config, cfg, sizeof cfg));
  SG_CHECK(absolute(b->db, db, sizeof db));
  FILE *f = NULL; /* the user's own directory and file, renamed into place (outfile.h) */
  if (sg_out_fopen_path(&f, b->path) < 0) {
    char why[1024];
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return sg_err_set(SG_EIO, "--sbatch: %s", why);
  }
  fprintf(f, "#!/bin/sh\n# written by sgdlab run --sbatch: one task per rank, one rank per "
             "node\n#SBATCH --job-name=sgdlab\n#SBATCH --ntasks=%d\n#SBATCH --nodes=%d\n"
             "#SBATCH --overcommit\nexec ", b->nprocs, b->nprocs);
  sh_quote(f, exe);
  fputs(" run ", f);
  sh_quote(f, cfg);
  fputs(" --db ", f);
  sh_quote(f, db);
  for (int i = 0; i < b->nsets; i++) {
    fputs(" --set ", f);
    sh_quote(f, b->sets[i]);
  }
  fputc('\n', f);
  return sg_out_fclose(f);
}
