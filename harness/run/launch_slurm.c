/* launch_slurm.c - launcher slurm: the ranks are one srun step inside the
 * allocation sgdlab runs in (SLURM_JOB_ID), one task per rank spread
 * cyclically over the allocation's nodes (see launch.h). */
#define _GNU_SOURCE
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define SCONTROL_TIMEOUT_S 15.0

/* Run argv (no shell) and keep its stdout in out; SG_OK when it exited 0
 * within the bound. */
static int capture(char *const *argv, char *out, size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return sg_err_set(SG_EIO, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return sg_err_set(SG_EIO, "fork: %s", strerror(errno));
  }
  if (pid == 0) {
    int nul = open("/dev/null", O_RDWR);
    dup2(nul, STDIN_FILENO);
    dup2(p[1], STDOUT_FILENO);
    dup2(nul, STDERR_FILENO);
    execvp(argv[0], argv);
    _exit(127);
  }
  close(p[1]);
  size_t n = 0;
  double until = sg_now() + SCONTROL_TIMEOUT_S;
  for (int left; (left = (int)((until - sg_now()) * 1000)) > 0;) {
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    if (poll(&pf, 1, left) < 0 && errno != EINTR) break;
    ssize_t r = read(p[0], out + n, cap - 1 - n);
    if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN)) break;
    if (r > 0 && (n += (size_t)r) + 1 >= cap) break;
  }
  out[n] = '\0';
  close(p[0]);
  kill(pid, SIGKILL); /* gone already unless it overran */
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return SG_OK;
  return sg_err_set(SG_EIO, "launcher slurm: `%s %s` failed (is Slurm's scontrol on PATH?)",
                    argv[0], argv[1]);
}

/* NodeAddr of one node ("NodeAddr=198.18.0.2 "), or its name. */
static int node_addr(const char *node, char *out, size_t cap) {
  char buf[8192];
  char *argv[] = {"scontrol", "show", "node", "-o", (char *)node, NULL};
  SG_CHECK(capture(argv, buf, sizeof buf));
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
  SG_CHECK(capture(argv, names, sizeof names));
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

int sg_slurm_argv(const sg_launch_cfg_t *cfg, int mpi, char bufs[4][32], char **argv, size_t cap) {
  size_t a = 0;
  const char *nn = getenv("SLURM_JOB_NUM_NODES");
  int nodes = nn ? atoi(nn) : 0;
  if (nodes <= 0 || nodes > cfg->nprocs) nodes = cfg->nprocs;
  snprintf(bufs[0], sizeof bufs[0], "--ntasks=%d", cfg->nprocs);
  snprintf(bufs[1], sizeof bufs[1], "--nodes=%d", nodes);
  snprintf(bufs[2], sizeof bufs[2], "--mpi=%s", mpi ? "pmix" : "none");
  char *args[] = {"srun", bufs[0], bufs[1], "--distribution=cyclic", "--overcommit",
                  "--kill-on-bad-exit=1", "--export=ALL", bufs[2], "--input=none",
                  (char *)cfg->rank_bin, (char *)cfg->spec, NULL};
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
  int fd = open(b->path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0755);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  if (!f) {
    if (fd >= 0) close(fd);
    return sg_err_set(SG_EIO, "--sbatch: %s: %s", b->path, strerror(errno));
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
  if (fclose(f) != 0) return sg_err_set(SG_EIO, "--sbatch: %s: write failed", b->path);
  return SG_OK;
}
