/* test_cluster_slurm.c - `sgdlab run` through Slurm on the emulated
 * cluster (`sgdlab cluster up --slurm`: munged, slurmctld on h0, one
 * slurmd per host; harness/run/launch_slurm.c).
 *
 *  - equivalence: on 4 hosts, ring with transport mpi and zmq and ps (zmq)
 *    run through `salloc -N4` around `sgdlab run`, and ring zmq through
 *    `sbatch --wait` of the script `sgdlab run --sbatch` writes; each ends
 *    within relative L2 distance 1e-4 of `local`, was launched by slurm,
 *    and its ranks ran on 4 distinct hosts (ranks.host: each slurmd's UTS
 *    namespace has its node's name).
 *  - a rank killed (SIGSEGV, found by SLURM_PROCID and the cluster's
 *    SLURM_CONF in its environment) ends the run within 2 deadlines, the
 *    run failed naming the rank; the rank's own line names the phase it
 *    died in (training), kept in run_info mpirun_stderr.
 *  - the harness killed with SIGKILL under salloc: no rank is left.
 *  - node h2 lost (its slurmd, step daemon and rank killed at once): the
 *    run ends within 2 deadlines naming rank 2, nothing is left; where the
 *    time went is printed (the harness's -v stop line).
 *  - every node's /tmp is its own (slurmd's tmpfs): a file in this /tmp
 *    is seen by no node, one in the test's directory (/var/tmp) by all;
 *    ring with transport mpi runs all the same (its ranks get the spec
 *    and keys over srun's standard input).
 *  - a PMIx fence that fails (timeout cut to 1 s, rank 2 late into
 *    MPI_Init): ring over MPI still ends ok, equal to local (no rank
 *    sends before every rank is out of MPI_Init).
 *  - a process named slurmstepd with the cluster's SLURM_CONF that the
 *    cluster did not start survives `down`.
 *  - each host's link (tc's counter on its end) carried 1.0-1.25 x the
 *    bytes its rank recorded sending (hosts with one rank); the time from sbatch to the first
 *    step is reported.
 *  - `down` leaves no namespace, no slurm or munge process of the cluster
 *    and no state directory.
 *  - (a second test, its own cluster) the stage on h1's link: no secret
 *    key of the run in the frames captured there during a 2-node run;
 *    with the plain stage planted back, the keys are found.
 *
 * Skips (with a SKIP line) when not root or when Slurm is not installed.
 * The cluster is removed at exit even when a CHECK stops the test.
 */
#define _GNU_SOURCE
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "auth.h"
#include "clock.h"
#include "err.h"
#include "run_util.h"
#include "test_cluster_util.h"

#define RTOL 1e-4
#define DEADLINE_S 5.0
#define LINK_LO 1.0 /* a host's link bytes / its rank's recorded bytes */
#define LINK_HI 1.25

static char g_name[16]; /* the cluster this test brought up, until down */
static int g_daemon_procs = -1; /* processes in its namespaces when idle */
/* How long a failed run's step daemons may outlive salloc's return (they
 * slept KillWait = 2 s before; 0.02-0.1 s now) */
#define STEP_GONE_S 1.5
static char g_conf[256];
/* The test's files (experiments, databases, dumps, the job's output):
 * every node's /tmp is its own (slurmd's tmpfs), so they live where all
 * nodes see them, as on a shared file system: /var/tmp. */
static char g_dir[64];

static void scratch_at_exit(void) {
  if (g_dir[0]) ru_rm_rf(g_dir);
}

static void down_at_exit(void) {
  if (!g_name[0]) return;
  char *out = NULL;
  ru_sgdlab_in(NULL, &out, "cluster", "down", g_name, NULL);
  free(out);
}

static int on_path(const char *prog) {
  const char *path = getenv("PATH");
  char buf[4096], full[4200];
  snprintf(buf, sizeof buf, "%s:/usr/sbin:/sbin", path ? path : "/usr/bin:/bin");
  for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(full, sizeof full, "%s/%s", d, prog);
    if (access(full, X_OK) == 0) return 1;
  }
  return 0;
}

static int slurm_or_skip(const char *test) {
  if (!tc_root_or_skip(test)) return 0;
  if (!strncmp(ru_sgdlab(), "/tmp/", 5)) { /* the nodes' /tmp is not this one */
    fprintf(stderr, "SKIP %s: the build (%s) is under /tmp, which each Slurm node of the "
            "cluster has of its own; build outside /tmp\n", test, ru_sgdlab());
    return 0;
  }
  static const char *const need[] = {"slurmctld", "slurmd", "munged", "salloc", "sbatch", "srun"};
  for (size_t i = 0; i < sizeof need / sizeof *need; i++)
    if (!on_path(need[i])) {
      fprintf(stderr, "SKIP %s: Slurm is not installed (%s not found)\n", test, need[i]);
      return 0;
    }
  return 1;
}

/* Processes whose environment holds `needle` (the cluster's SLURM_CONF),
 * or whose command line does; with `procid` >= 0 the pid of the
 * sgdlab-rank with that SLURM_PROCID instead (0 when none). */
static int scan_procs(const char *needle, int procid, pid_t *found) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  int n = 0;
  char want_id[32];
  snprintf(want_id, sizeof want_id, "SLURM_PROCID=%d", procid);
  for (struct dirent *e; (e = readdir(d));) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    char path[64], env[65536], cmd[4096];
    size_t elen = 0, clen = 0;
    snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
    FILE *fp = fopen(path, "r");
    if (fp) elen = fread(env, 1, sizeof env - 1, fp), fclose(fp);
    env[elen] = '\0';
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    fp = fopen(path, "r");
    if (fp) clen = fread(cmd, 1, sizeof cmd - 1, fp), fclose(fp);
    cmd[clen] = '\0';
    int hit = 0, id = 0;
    for (size_t o = 0; o < elen; o += strlen(env + o) + 1) {
      if (strstr(env + o, needle)) hit = 1;
      if (!strcmp(env + o, want_id)) id = 1;
    }
    for (size_t o = 0; o < clen; o += strlen(cmd + o) + 1)
      if (strstr(cmd + o, needle)) hit = 1;
    if (!strstr(cmd, "sgdlab-rank")) id = 0;
    if (procid >= 0 && hit && id) *found = pid, n = 1;
    if (procid < 0 && hit) n++;
    if (procid >= 0 && n) break;
  }
  closedir(d);
  return n;
}

/* Every process in one of the cluster's namespaces: a host's network
 * namespace (/run/netns/sgc-NAME-hI) or a node's mount namespace (the
 * slurmds', recorded in the daemons file).  Each one printed (pid, parent,
 * name, where) under `label`; the count, or -1. */
static int cluster_procs(const char *label) { /* label NULL: count only */
  unsigned long long ns[16];
  int nns = 0;
  struct stat sb;
  for (int h = 0; h < 4; h++) {
    char path[96];
    snprintf(path, sizeof path, "/run/netns/" SG_CLUSTER_NS_PREFIX "%s-h%d", g_name, h);
    if (stat(path, &sb) == 0) ns[nns++] = (unsigned long long)sb.st_ino;
  }
  char dpath[300], line[160];
  snprintf(dpath, sizeof dpath, "%s", g_conf);
  char *slash = strrchr(dpath, '/');
  if (!slash) return -1;
  snprintf(slash, sizeof dpath - (size_t)(slash - dpath), "/daemons");
  FILE *f = fopen(dpath, "r");
  unsigned long long mnt;
  while (f && fgets(line, sizeof line, f) && nns < 16)
    if (sscanf(line, "%*s %*d %*s %llu", &mnt) == 1) ns[nns++] = mnt;
  if (f) fclose(f);
  DIR *d = opendir("/proc");
  int n = 0;
  if (label) fprintf(stderr, "  processes in the cluster's namespaces (%s):", label);
  for (struct dirent *e; d && (e = readdir(d));) {
    pid_t pid = atoi(e->d_name);
    const char *kinds[] = {"net", "mnt"};
    int hit = -1;
    for (int k = 0; k < 2 && hit < 0 && pid > 0; k++) {
      char path[64], link[64];
      snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, kinds[k]);
      ssize_t len = readlink(path, link, sizeof link - 1);
      unsigned long long ino;
      if (len <= 0) continue;
      link[len] = '\0';
      if (sscanf(strchr(link, '[') ? strchr(link, '[') + 1 : "", "%llu", &ino) != 1) continue;
      for (int i = 0; i < nns; i++)
        if (ns[i] == ino) hit = k;
    }
    if (hit < 0) continue;
    char spath[64], stat_line[512], comm[64] = "?";
    int ppid = 0;
    snprintf(spath, sizeof spath, "/proc/%d/stat", (int)pid);
    FILE *sf = fopen(spath, "r");
    if (sf && fgets(stat_line, sizeof stat_line, sf)) {
      char *l = strchr(stat_line, '('), *r = strrchr(stat_line, ')');
      if (l && r && r > l) snprintf(comm, sizeof comm, "%.*s", (int)(r - l - 1), l + 1);
      if (r) sscanf(r + 2, "%*c %d", &ppid);
    }
    if (sf) fclose(sf);
    if (label) fprintf(stderr, " %d(%s<-%d,%s)", (int)pid, comm, ppid, hit ? "mnt" : "net");
    n++;
  }
  if (d) closedir(d);
  if (label) fprintf(stderr, "; %d in all\n", n);
  return d ? n : -1;
}

static void up_or_fail(void) {
  tc_name('s', g_name, sizeof g_name);
  char *out = NULL;
  double t0 = sg_now();
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "up", "--hosts", "4", "--link", "1gbit",
                        "--name", g_name, "--slurm", "--owner", tc_owner(), NULL);
  fprintf(stderr, "  cluster up --slurm: exit %d in %.2f s\n%s", rc, sg_now() - t0,
          out ? out : "");
  const char *c = out ? strstr(out, "SLURM_CONF=") : NULL;
  if (c) snprintf(g_conf, sizeof g_conf, "%.*s", (int)strcspn(c + 11, " \n;"), c + 11);
  free(out);
  if (rc) g_name[0] = '\0';
  CHECK_MSG(rc == 0 && g_conf[0], "cluster up --slurm failed (exit %d)", rc);
}

/* `sgdlab cluster exec NAME/h0 -- words...` with its output on stderr. */
static int on_h0(char **words) {
  char host[32], cmd[8192];
  snprintf(host, sizeof host, "%s/h0", g_name);
  size_t len = (size_t)snprintf(cmd, sizeof cmd, "'%s' cluster exec %s --", ru_sgdlab(), host);
  for (int i = 0; words[i] && len < sizeof cmd; i++)
    len += (size_t)snprintf(cmd + len, sizeof cmd - len, " '%s'", words[i]);
  if (len + 8 >= sizeof cmd) return -1;
  snprintf(cmd + len, sizeof cmd - len, " >&2");
  return ru_sh(cmd);
}

/* What tc counted on each host's link, sent by the host (tbf on its end). */
static int link_tx(uint64_t tx[4]) { return tc_link_tx(g_name, 4, tx); }

/* Each host with one rank: its link carried what the rank recorded
 * sending, plus frame headers, acknowledgements, records and Slurm's own
 * traffic: within LINK_LO..LINK_HI of it (measured 1.055-1.101). */
static void check_links(const char *db, const uint64_t before[4], const char *what) {
  int single = 0, ok = tc_links_vs_ranks(db, g_name, 4, before, what, LINK_LO, LINK_HI, &single);
  CHECK_MSG(single >= 3 && ok == single, "%s: %d of %d one-rank hosts' links carried their "
            "rank's bytes within %.2f-%.2f of them", what, ok, single, LINK_LO, LINK_HI);
}

static void check_run(const char *db, const char *dump, const char *ref, int nranks,
                      const char *what) {
  long long id = ru_db_int(db, "SELECT max(id) FROM runs");
  char sql[256];
  double dist = ru_rel_distance(dump, ref, NULL);
  snprintf(sql, sizeof sql, "SELECT count(DISTINCT host) FROM ranks WHERE run_id = %lld", id);
  long long hosts = ru_db_int(db, sql);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM ranks WHERE run_id = %lld", id);
  long long ranks = ru_db_int(db, sql);
  snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld AND options_json LIKE "
           "'%%\"launcher\":\"slurm\"%%'", id);
  long long slurm = ru_db_int(db, sql);
  fprintf(stderr, "  %s: distance to local %.3g, %lld ranks on %lld hosts\n", what, dist, ranks,
          hosts);
  CHECK_MSG(dist >= 0 && dist <= RTOL, "%s: distance %.3g > %g", what, dist, RTOL);
  CHECK_MSG(hosts == 4 && ranks == nranks, "%s: %lld ranks on %lld hosts", what, ranks, hosts);
  CHECK_MSG(slurm == 1, "%s: not launched by slurm", what);
  unlink(dump);
}

/* Each variant through salloc (interactive) on 4 hosts equals local. */
static void interactive_runs(const char *d, const char *ref) {
  static const char *const variants[][4] = {
      {"{engine: allreduce, algorithm: ring}", "transport: mpi\n", "4", "ring mpi (salloc)"},
      {"{engine: allreduce, algorithm: ring}", "transport: zmq\n", "4", "ring zmq (salloc)"},
      {"{engine: ps, mode: sync}", "transport: zmq\n", "5", "ps zmq (salloc)"},
  };
  char cfg[128], db[128], dump[128], n[16];
  snprintf(db, sizeof db, "%s/s.db", d);
  for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
    snprintf(cfg, sizeof cfg, "%s/v%zu.yaml", d, v);
    snprintf(dump, sizeof dump, "%s/v%zu.bin", d, v);
    CHECK_OK(ru_write_train_config(cfg, "slurm-eq", variants[v][0], variants[v][1], dump, 4, 40));
    snprintf(n, sizeof n, "-n%s", variants[v][2]);
    char *words[] = {"salloc", "-N4", n, "--overcommit", (char *)ru_sgdlab(), "run", cfg,
                     "--db", db, NULL};
    uint64_t before[4];
    CHECK_EQ_INT(link_tx(before), 0);
    double t0 = sg_now(), submit = sg_wall();
    CHECK_MSG(on_h0(words) == 0, "%s: salloc ... sgdlab run failed", variants[v][3]);
    fprintf(stderr, "  %s: %.2f s from salloc to its return\n", variants[v][3], sg_now() - t0);
    tc_submit_to_first_step(db, submit, variants[v][3]);
    check_run(db, dump, ref, atoi(variants[v][2]), variants[v][3]);
    if (!test_failed_now_) check_links(db, before, variants[v][3]);
    if (test_failed_now_) return;
  }
}

/* `sgdlab run --sbatch` writes the batch script; sbatch --wait runs it. */
static void batch_run(const char *d, const char *ref) {
  char cfg[128], db[128], dump[128], script[128], *out = NULL;
  snprintf(cfg, sizeof cfg, "%s/b.yaml", d);
  snprintf(db, sizeof db, "%s/b.db", d);
  snprintf(dump, sizeof dump, "%s/b.bin", d);
  snprintf(script, sizeof script, "%s/job.sh", d);
  CHECK_OK(ru_write_train_config(cfg, "slurm-eq", "{engine: allreduce, algorithm: ring}",
                                 "transport: zmq\n", dump, 4, 40));
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "--sbatch", script, NULL), 0);
  free(out);
  char *text = ru_slurp(script, 8192);
  CHECK(text);
  fprintf(stderr, "  batch script:\n%s", text);
  int ok = strstr(text, "#SBATCH --ntasks=4\n") && strstr(text, "#SBATCH --nodes=4\n");
  free(text);
  CHECK_MSG(ok, "the batch script lacks the task/node counts");
  char outfile[160];
  snprintf(outfile, sizeof outfile, "--output=%s/job.out", d);
  char *words[] = {"sbatch", "--wait", outfile, script, NULL};
  double t0 = sg_now(), submit = sg_wall();
  int rc = on_h0(words);
  fprintf(stderr, "  ring zmq (sbatch): exit %d, %.2f s from sbatch to its return\n", rc,
          sg_now() - t0);
  tc_submit_to_first_step(db, submit, "ring zmq (sbatch)");
  snprintf(outfile, sizeof outfile, "%s/job.out", d);
  char *log = ru_slurp(outfile, 16384);
  if (log) fprintf(stderr, "  job output:\n%s", log);
  free(log);
  CHECK_EQ_INT(rc, 0);
  check_run(db, dump, ref, 4, "ring zmq (sbatch)");
}

/* The cluster's mpi.conf (Slurm's PMIx plugin): text, or removed when
 * NULL; slurmd and the step daemons read it at `scontrol reconfigure`. */
static int set_mpi_conf(const char *text) {
  char path[300];
  snprintf(path, sizeof path, "%s", g_conf);
  char *slash = strrchr(path, '/');
  if (!slash) return -1;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/mpi.conf");
  if (text && ru_write_file(path, text) != 0) return -1;
  if (!text) unlink(path);
  char *words[] = {"scontrol", "reconfigure", NULL};
  return on_h0(words);
}

/* A fence of the process manager that fails (Slurm's PMIx timeout cut to
 * 1 s, rank 2 held back 3 s before MPI_Init): Open MPI lets the other
 * ranks out of MPI_Init regardless, and without the barrier after it
 * their first message reached rank 2 inside its first fence, before its
 * PML had receive handlers: SIGSEGV in the TCP BTL.  With the barrier
 * the run ends ok, equal to local. */
static void failed_fence(const char *d, const char *ref) {
  char cfg[128], db[128], dump[128];
  snprintf(cfg, sizeof cfg, "%s/f.yaml", d);
  snprintf(db, sizeof db, "%s/f.db", d);
  snprintf(dump, sizeof dump, "%s/f.bin", d);
  CHECK_OK(ru_write_train_config(cfg, "slurm-eq", "{engine: allreduce, algorithm: ring}",
                                 "transport: mpi\n", dump, 4, 40));
  CHECK_EQ_INT(set_mpi_conf("PMIxTimeout=1\n"), 0);
  setenv("SGDLAB_TEST_MPI_INIT_DELAY_S", "2:3", 1);
  char *words[] = {"salloc", "-N4", "-n4", (char *)ru_sgdlab(), "run", cfg, "--db", db, NULL};
  int rc = on_h0(words);
  unsetenv("SGDLAB_TEST_MPI_INIT_DELAY_S");
  int restored = set_mpi_conf(NULL);
  char *error = ru_db_text(db, "SELECT coalesce(error, '') FROM runs ORDER BY id DESC LIMIT 1");
  fprintf(stderr, "  ring mpi, PMIx fence timing out, rank 2 late into MPI_Init: exit %d%s%s\n",
          rc, error && error[0] ? ": " : "", error ? error : "");
  int segv = error && strstr(error, "signal 11");
  free(error);
  CHECK_EQ_INT(restored, 0);
  CHECK_MSG(!segv, "a rank got an MPI message inside MPI_Init (SIGSEGV)");
  CHECK_EQ_INT(rc, 0);
  check_run(db, dump, ref, 4, "ring mpi (failed fence)");
}

/* A rank killed under salloc ends the run within 2 deadlines, naming it.
 * SIGSEGV, as a crash would: the rank's own line names the phase it was
 * in, and reaches the run's record through srun's stderr. */
static void killed_rank(const char *d) {
  char cfg[128], db[128], extra[128], sql[128], host[32];
  snprintf(cfg, sizeof cfg, "%s/k.yaml", d);
  snprintf(db, sizeof db, "%s/k.db", d);
  snprintf(extra, sizeof extra, "transport: zmq\ndeadline: %g\n", DEADLINE_S);
  CHECK_OK(ru_write_train_config(cfg, "slurm-kill", "{engine: allreduce, algorithm: ring}", extra,
                                 "", 4, 100000));
  snprintf(host, sizeof host, "%s/h0", g_name);
  char *argv[] = {"sgdlab", "cluster", "exec", host, "--", "salloc", "-N4", "-n4",
                  (char *)ru_sgdlab(), "run", cfg, "--db", db, NULL};
  char errpath[160];
  snprintf(errpath, sizeof errpath, "%s/k.err", d);
  pid_t sg = ru_start(argv, errpath, 1, NULL);
  CHECK(sg > 0);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM steps WHERE rank = 0");
  int st = 0, w = ru_db_wait(db, sql, 5, 60, sg, &st);
  pid_t v = 0;
  if (w == 0) scan_procs(g_conf, 2, &v);
  if (w != 0 || v <= 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(w == 0, "training did not start (wait %d, status %d)", w, st);
  CHECK_MSG(v > 0, "rank 2's process not found");
  double t_kill = sg_now();
  CHECK_EQ_INT(kill(v, SIGSEGV), 0);
  ru_kill_outcome_t o = ru_kill_outcome(sg, t_kill, 4 * DEADLINE_S + 10, db, 2, "killed rank 2");
  char *tail = ru_db_text(db, "SELECT value FROM run_info WHERE key = 'mpirun_stderr' AND "
                          "run_id = (SELECT max(id) FROM runs)");
  int phase = tail && strstr(tail, "sgdlab-rank: rank 2: signal 11 during training");
  fprintf(stderr, "  rank 2's line in srun's stderr (run_info mpirun_stderr): %s\n",
          phase ? "sgdlab-rank: rank 2: signal 11 during training" : "missing");
  free(tail);
  /* the run's end leaves nothing of its own: its step daemons go with
   * its tasks (KillWait=0; with 2 s they stayed 2 s past salloc) */
  double t_end = sg_now();
  int left;
  while ((left = cluster_procs(NULL)) > g_daemon_procs && sg_now() - t_end < STEP_GONE_S) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "  killed rank's run: %d processes in the cluster's namespaces %.2f s after "
          "salloc returned (its %d daemons before the job)\n", left, sg_now() - t_end,
          g_daemon_procs);
  if (left != g_daemon_procs) cluster_procs("after the killed rank's run ended");
  CHECK_MSG(left == g_daemon_procs, "%d processes of the killed rank's job outlived it by %.1f s",
            left - g_daemon_procs, STEP_GONE_S);
  CHECK_MSG(o.code > 0, "salloc/sgdlab exit %d after the kill", o.code);
  CHECK_MSG(o.took <= 2 * DEADLINE_S, "failure took %.2f s > 2 deadlines", o.took);
  CHECK_MSG(o.named, "the run's error does not name rank 2");
  CHECK_MSG(phase, "rank 2's signal line (with its phase) is not in the run's srun stderr");
}

/* The `sgdlab run CFG` process (not salloc or cluster exec around it). */
static pid_t find_harness(const char *cfg) {
  DIR *d = opendir("/proc");
  pid_t found = 0;
  for (struct dirent *e; d && !found && (e = readdir(d));) {
    pid_t pid = atoi(e->d_name);
    char path[64], cmd[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *fp = pid > 0 ? fopen(path, "r") : NULL;
    if (!fp) continue;
    size_t len = fread(cmd, 1, sizeof cmd - 1, fp);
    fclose(fp);
    cmd[len] = '\0';
    size_t a0 = strlen(cmd);
    if (a0 >= 7 && !strcmp(cmd + a0 - 7, "/sgdlab") && a0 + 1 < len &&
        !strcmp(cmd + a0 + 1, "run") && memmem(cmd, len, cfg, strlen(cfg)))
      found = pid;
  }
  if (d) closedir(d);
  return found;
}

static int count_files(const char *path);

/* The killed harness left its run's directory (spec, keys) and its row
 * running; the next `sgdlab run` into the same database (a one-step local
 * run) marks the row failed and removes the directory. */
static void after_killed_harness(const char *d, const char *db) {
  char cfg[128], sql[96], *dir = ru_db_text(db, "SELECT tmp_dir FROM runs ORDER BY id DESC LIMIT 1");
  long long id = ru_db_int(db, "SELECT max(id) FROM runs");
  struct stat sb;
  int files = dir && dir[0] && stat(dir, &sb) == 0 ? count_files(dir) : 0;
  snprintf(cfg, sizeof cfg, "%s/after.yaml", d);
  CHECK_OK(ru_write_train_config(cfg, "slurm-after", "local", NULL, "", 1, 2));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  int left = dir && dir[0] && stat(dir, &sb) == 0;
  snprintf(sql, sizeof sql, "SELECT status FROM runs WHERE id = %lld", id);
  char *status = ru_db_text(db, sql);
  fprintf(stderr, "  killed harness's run directory %s: %d files before the next run, %s after; "
          "its row %s\n", dir ? dir : "?", files, left ? "still there" : "gone",
          status ? status : "?");
  CHECK_MSG(dir && dir[0] && files > 0 && !left, "the killed harness's run directory was not "
            "removed by the next run (%s)", dir ? dir : "no tmp_dir");
  free(dir);
  free(status);
}

/* The harness killed with SIGKILL under salloc: salloc ends, Slurm ends
 * the job's step, and no rank of the cluster is left (bounded wait). */
static void killed_harness(const char *d) {
  char cfg[128], db[128], extra[128], host[32], errpath[160];
  snprintf(cfg, sizeof cfg, "%s/h.yaml", d);
  snprintf(db, sizeof db, "%s/h.db", d);
  snprintf(errpath, sizeof errpath, "%s/h.err", d);
  snprintf(extra, sizeof extra, "transport: zmq\ndeadline: %g\n", DEADLINE_S);
  CHECK_OK(ru_write_train_config(cfg, "slurm-kill9", "{engine: allreduce, algorithm: ring}",
                                 extra, "", 4, 100000));
  snprintf(host, sizeof host, "%s/h0", g_name);
  char *argv[] = {"sgdlab", "cluster", "exec", host, "--", "salloc", "-N4", "-n4",
                  (char *)ru_sgdlab(), "run", cfg, "--db", db, NULL};
  int idle = scan_procs(g_conf, -1, NULL); /* the daemons (and slurmctld's slurmscriptd) */
  pid_t sg = ru_start(argv, errpath, 1, NULL);
  CHECK(sg > 0);
  int st = 0, w = ru_db_wait(db, "SELECT COUNT(*) FROM steps WHERE rank = 3", 5, 60, sg, &st);
  pid_t h = w == 0 ? find_harness(cfg) : 0, rank_pid[4] = {0};
  int found = 0;
  for (int r = 0; r < 4; r++) found += scan_procs(g_conf, r, &rank_pid[r]) > 0;
  int procs_before = scan_procs(g_conf, -1, NULL);
  if (h > 0) kill(h, SIGKILL);
  int code = ru_wait_exit_code(sg, 30);
  double t0 = sg_now();
  int ranks = 0;
  for (int r = 0; r < 4; r++)
    ranks += rank_pid[r] > 0 && !ru_wait_gone(rank_pid[r], t0 + 30 - sg_now(), 1);
  double gone = sg_now() - t0;
  /* the step daemons end once Slurm has ended the job (KillWait 0):
   * polled, at most 20 s, until only what ran before the job is left */
  int procs_after;
  while ((procs_after = scan_procs(g_conf, -1, NULL)) > idle && sg_now() - t0 < 20) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "  harness killed (-9): salloc exit %d; %d ranks before, %d left %.2f s "
          "later; processes of the cluster (daemons, step daemons, ranks) %d before the job, "
          "%d during, %d %.2f s after\n", code, found, ranks, gone, idle, procs_before,
          procs_after, sg_now() - t0);
  CHECK_MSG(procs_after == idle, "%d processes of the cluster left, %d before the job",
            procs_after, idle);
  CHECK_MSG(w == 0 && h > 0 && found == 4, "training did not start or harness not found (wait %d)", w);
  CHECK_MSG(ranks == 0, "%d ranks left after the harness was killed", ranks);
  after_killed_harness(d, db);
}

/* Every node's /tmp is its own: no node sees a file in this /tmp, every
 * node sees one in the test's directory (the check's other half, which a
 * /tmp-only test would pass by accident if srun ran nothing). */
static void per_node_tmp(const char *d) {
  char mark[] = "/tmp/sgdlab-slurm-mark-XXXXXX", shared[160], script[600];
  int fd = mkstemp(mark);
  CHECK(fd >= 0);
  close(fd);
  snprintf(shared, sizeof shared, "%s/shared-mark", d);
  CHECK_OK(ru_write_file(shared, "x\n"));
  snprintf(script, sizeof script, "test ! -e %s && test -e %s && echo \"$(hostname): own /tmp\"",
           mark, shared);
  char *words[] = {"salloc", "-N4", "-n4", "srun", "-N4", "-n4", "sh", "-c", script, NULL};
  int rc = on_h0(words);
  unlink(mark);
  CHECK_MSG(rc == 0, "a node sees this machine's /tmp (or not the test's directory): srun %d", rc);
}

/* The pid of daemon TAG recorded in the cluster's daemons file, or 0. */
static pid_t daemon_pid(const char *tag) {
  char path[300], line[128], t[32];
  snprintf(path, sizeof path, "%s", g_conf);
  char *slash = strrchr(path, '/');
  if (!slash) return 0;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/daemons");
  FILE *f = fopen(path, "r");
  int pid = 0, p;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%31s %d", t, &p) == 2 && !strcmp(t, tag)) pid = p;
  if (f) fclose(f);
  return pid;
}

/* Where the time from the kill to salloc's return went, from the
 * harness's -v line "run N: stop from monotonic T s: launcher ... after
 * A s ...; all reaped at +B s" (sg_now() is CLOCK_MONOTONIC, one clock
 * for every process of the machine). */
static void stop_breakdown(const char *errpath, double t_kill, double took) {
  char *log = ru_slurp(errpath, 1 << 16);
  const char *p = log ? strstr(log, "stop from monotonic ") : NULL;
  double t0 = 0, reaped = 0;
  const char *r = p ? strstr(p, "all reaped at +") : NULL;
  if (p && r && sscanf(p, "stop from monotonic %lf", &t0) == 1 &&
      sscanf(r, "all reaped at +%lf", &reaped) == 1)
    fprintf(stderr, "  node lost, where the time went: kill to the harness's stop %.2f s (the "
            "peers' deadline, then collecting the blame), stopping srun %.2f s, the harness's "
            "and salloc's exit %.2f s; %.2f s in all\n  %.*s\n", t0 - t_kill, reaped,
            took - (t0 - t_kill) - reaped, took, (int)strcspn(p, "\n"), p);
  else
    fprintf(stderr, "  node lost: no stop line in the harness's output\n");
  free(log);
}

/* The mount namespace number recorded for daemon TAG (0: none), and
 * whether DIR/TAG.mntns pins it (its inode is that number). */
static unsigned long long daemon_ns(const char *tag, int *pinned) {
  char path[300], line[160], t[32];
  unsigned long long start, ns = 0, v;
  struct stat st;
  int p;
  snprintf(path, sizeof path, "%s", g_conf);
  char *slash = strrchr(path, '/');
  *pinned = 0;
  if (!slash) return 0;
  snprintf(slash, sizeof path - (size_t)(slash - path), "/daemons");
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "%31s %d %llu %llu", t, &p, &start, &v) == 4 && !strcmp(t, tag)) ns = v;
  if (f) fclose(f);
  snprintf(slash, sizeof path - (size_t)(slash - path), "/%s.mntns", tag);
  *pinned = ns && stat(path, &st) == 0 && (unsigned long long)st.st_ino == ns;
  return ns;
}

/* How many of `tries` new mount namespaces (each made by a child that
 * reports its number) got number ns. */
static int ns_reused(unsigned long long ns, int tries) {
  int hits = 0;
  for (int i = 0; i < tries; i++) {
    int fd[2];
    if (pipe(fd) < 0) break;
    pid_t c = fork();
    if (c == 0) {
      struct stat st;
      unsigned long long got = 0;
      if (unshare(CLONE_NEWNS) == 0 && stat("/proc/self/ns/mnt", &st) == 0) got = st.st_ino;
      _exit(write(fd[1], &got, sizeof got) == sizeof got ? 0 : 1);
    }
    close(fd[1]);
    unsigned long long got = 0;
    if (c > 0 && read(fd[0], &got, sizeof got) == sizeof got && got == ns) hits++;
    close(fd[0]);
    if (c > 0) waitpid(c, NULL, 0);
  }
  return hits;
}

/* Node h2 lost under a running job: its slurmd, the step daemon and the
 * rank on it killed at once (SIGKILL).  The run ends within 2 deadlines
 * naming rank 2, salloc returns, and no rank of the job is left. */
static void node_lost(const char *d) {
  char cfg[128], db[128], extra[128], host[32], errpath[160];
  snprintf(cfg, sizeof cfg, "%s/n.yaml", d);
  snprintf(db, sizeof db, "%s/n.db", d);
  snprintf(errpath, sizeof errpath, "%s/n.err", d);
  snprintf(extra, sizeof extra, "transport: zmq\ndeadline: %g\n", DEADLINE_S);
  CHECK_OK(ru_write_train_config(cfg, "slurm-node", "{engine: allreduce, algorithm: ring}", extra,
                                 "", 4, 100000));
  snprintf(host, sizeof host, "%s/h0", g_name);
  char *argv[] = {"sgdlab", "cluster", "exec", host, "--", "salloc", "-N4", "-n4",
                  (char *)ru_sgdlab(), "run", "-v", cfg, "--db", db, NULL};
  pid_t sg = ru_start(argv, errpath, 1, NULL);
  CHECK(sg > 0);
  int st = 0, w = ru_db_wait(db, "SELECT COUNT(*) FROM steps WHERE rank = 3", 5, 60, sg, &st);
  pid_t rank_pid[4] = {0}, slurmd = daemon_pid("slurmd-h2");
  for (int r = 0; r < 4 && w == 0; r++) scan_procs(g_conf, r, &rank_pid[r]);
  pid_t stepd = rank_pid[2] > 0 ? ru_parent_of(rank_pid[2]) : 0;
  if (w != 0 || slurmd <= 0 || rank_pid[2] <= 0 || stepd <= 1)
    kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(w == 0 && slurmd > 0 && rank_pid[2] > 0 && stepd > 1,
            "training did not start or h2's processes not found (wait %d)", w);
  double t_kill = sg_now();
  kill(slurmd, SIGKILL);
  kill(stepd, SIGKILL);
  kill(rank_pid[2], SIGKILL);
  int code = ru_wait_exit_code(sg, 60);
  double took = sg_now() - t_kill;
  char *error = ru_db_text(db, "SELECT error FROM runs ORDER BY id DESC LIMIT 1");
  double t0 = sg_now();
  int left = 0;
  for (int r = 0; r < 4; r++)
    left += rank_pid[r] > 0 && !ru_wait_gone(rank_pid[r], t0 + 30 - sg_now(), 1);
  fprintf(stderr, "  node h2 lost (slurmd %d, slurmstepd %d, rank 2 %d killed): salloc exit %d "
          "%.2f s later: %s; %d ranks left %.2f s after\n", (int)slurmd, (int)stepd,
          (int)rank_pid[2], code, took, error ? error : "?", left, sg_now() - t0);
  int named = error && strstr(error, "rank 2");
  free(error);
  stop_breakdown(errpath, t_kill, took);
  cluster_procs("after the lost node's run ended");
  CHECK_MSG(code > 0, "salloc/sgdlab exit %d after the node was lost", code);
  CHECK_MSG(took <= 2 * DEADLINE_S, "the run took %.2f s > 2 deadlines to end (deadline %g s)",
            took, DEADLINE_S);
  CHECK_MSG(named, "the run's error does not name rank 2");
  CHECK_MSG(left == 0, "%d ranks left after the node was lost", left);
  /* h2's mount namespace has no process left; `down` still trusts its
   * number to find h2's step daemons only because the cluster pins it:
   * no new namespace may get that number meanwhile. */
  int pinned = 0;
  unsigned long long ns = daemon_ns("slurmd-h2", &pinned);
  int reused = ns ? ns_reused(ns, 32) : 0;
  fprintf(stderr, "  h2's mount namespace %llu: %s; 32 new namespaces, %d got its number\n", ns,
          pinned ? "pinned" : "NOT pinned", reused);
  CHECK_MSG(ns && pinned, "h2's mount namespace (%llu) is not pinned", ns);
  CHECK_MSG(reused == 0, "a new mount namespace got h2's number %llu", ns);
}

/* A process named slurmstepd, root's, with this cluster's SLURM_CONF in
 * its environment, that the cluster did not start (a copy of sleep): what
 * `down` once took for a step daemon of its own. */
static pid_t fake_stepd(const char *d) {
  char exe[160], env[300], cmd[400];
  snprintf(exe, sizeof exe, "%s/slurmstepd", d);
  snprintf(cmd, sizeof cmd, "cp /bin/sleep '%s'", exe);
  if (ru_sh(cmd) != 0) return -1;
  snprintf(env, sizeof env, "SLURM_CONF=%s", g_conf);
  pid_t pid = fork();
  if (pid == 0) {
    char *argv[] = {exe, "300", NULL}, *envp[] = {env, NULL};
    execve(exe, argv, envp);
    _exit(127);
  }
  return pid;
}

/* Files and directories under path (0 when it is gone). */
static int g_nfiles;
static int count_one(const char *p, const struct stat *sb, int type, struct FTW *ftw) {
  (void)p, (void)sb, (void)type, (void)ftw;
  g_nfiles++;
  return 0;
}
static int count_files(const char *path) {
  g_nfiles = 0;
  nftw(path, count_one, 16, FTW_PHYS);
  return g_nfiles;
}

static void down_leaves_nothing(const char *d) {
  char state[128], why[160] = "", ns_prefix[64], dir[256];
  snprintf(dir, sizeof dir, "%s", g_conf);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  snprintf(ns_prefix, sizeof ns_prefix, SG_CLUSTER_NS_PREFIX "%s-", g_name);
  pid_t fake = fake_stepd(d);
  int procs_before = scan_procs(g_conf, -1, NULL) - (fake > 0);
  int ns_before = tc_ns_count(ns_prefix), files_before = count_files(dir);
  double t0 = sg_now();
  char *out = NULL;
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "down", g_name, NULL);
  fprintf(stderr, "  cluster down: exit %d in %.2f s %s", rc, sg_now() - t0, out ? out : "");
  free(out);
  /* slurmd/slurmctld/munged name the conf or its directory in argv/env */
  int fake_alive = fake > 0 && waitpid(fake, NULL, WNOHANG) == 0;
  int procs = scan_procs(dir, -1, NULL) - fake_alive, ns = tc_ns_count(ns_prefix);
  struct stat sb;
  snprintf(state, sizeof state, "%s/cluster-%s", SG_CLUSTER_RUN_DIR, g_name);
  int left = stat(dir, &sb) == 0 || stat(state, &sb) == 0;
  snprintf(why, sizeof why, "%d processes, %d namespaces, %d files, state %s", procs, ns,
           count_files(dir), left ? "left" : "gone");
  fprintf(stderr, "  before down: %d processes of the cluster, %d namespaces, %d files; after: "
          "%s; the planted slurmstepd %s\n", procs_before, ns_before, files_before, why,
          fake_alive ? "survived" : "was killed");
  if (fake > 0) kill(fake, SIGKILL), waitpid(fake, NULL, 0);
  CHECK_EQ_INT(rc, 0);
  g_name[0] = '\0';
  CHECK_MSG(procs == 0 && ns == 0 && !left, "after down: %s", why);
  CHECK_MSG(fake > 0 && fake_alive, "down killed a slurmstepd the cluster did not start");
}

TEST(slurm_runs_equal_local_on_4_hosts) {
  if (!slurm_or_skip("slurm_runs_equal_local_on_4_hosts")) return;
  atexit(down_at_exit);
  atexit(scratch_at_exit);
  snprintf(g_dir, sizeof g_dir, "/var/tmp/sgdlab-slurm-XXXXXX");
  if (!mkdtemp(g_dir)) g_dir[0] = '\0';
  const char *d = g_dir;
  CHECK(d[0]);
  chmod(d, 0755); /* slurmd's tasks (root) write the dumps; the job output too */
  char ref[128];
  CHECK_OK(ru_cluster_reference(d, "slurm-eq", 40, ref, sizeof ref));
  up_or_fail();
  if (test_failed_now_) return;
  g_daemon_procs = cluster_procs("after up");
  per_node_tmp(d);
  if (!test_failed_now_) interactive_runs(d, ref);
  if (!test_failed_now_) batch_run(d, ref);
  if (!test_failed_now_) failed_fence(d, ref);
  if (!test_failed_now_) killed_rank(d);
  if (!test_failed_now_) killed_harness(d);
  if (!test_failed_now_) node_lost(d);
  cluster_procs("before down");
  down_leaves_nothing(d);
}

/* ---- the stage on the wire ----------------------------------------------------
 * A run through salloc on h0 and h1: srun carries its standard input to
 * h1's step daemon over h1's link.  An AF_PACKET socket opened in h1's
 * namespace takes every frame there (both directions, bounded in bytes
 * and time) while an inotify watch on /tmp reads each new run
 * directory's key file; no secret key of it may be in the frames.  With
 * the plain stage planted back (SGDLAB_TEST_PLAIN_STAGE=1) the same
 * search finds them: the capture sees what it looks for. */

#define CAP_MAX (64u << 20) /* bytes of frames kept */
#define CAP_S 150.0         /* the capture's own bound in time */
#define CAP_KEYS 64
#define CAP_TMP "/tmp" /* where run directories are made (mkdtemp) */

typedef struct capture {
  int sock, ino, stop[2];
  char *buf;
  size_t len;
  char keys[CAP_KEYS][SG_KEY_Z85]; /* secret keys of the run directories seen */
  int nkeys;
} capture_t;

/* A key file's secret keys (the third word of each line after the first). */
static void grab_keys(capture_t *c, const char *dir) {
  char path[128], line[256];
  struct stat sb;
  /* a name inotify reported (mkdtemp's): read only a regular file of
   * this user, never through a link another user planted */
  snprintf(path, sizeof path, "%s/%s/keys", CAP_TMP, dir);
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0 && (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != getuid()))
    close(fd), fd = -1;
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  for (int n = 0; f && fgets(line, sizeof line, f); n++) {
    char who[16], pub[64], sec[64];
    if (n == 0 || sscanf(line, "%15s %63s %63s", who, pub, sec) != 3 || strlen(sec) != 40) continue;
    int dup = 0;
    for (int i = 0; i < c->nkeys; i++) dup |= !strcmp(c->keys[i], sec);
    if (!dup && c->nkeys < CAP_KEYS) memcpy(c->keys[c->nkeys++], sec, SG_KEY_Z85); /* 40 + NUL */
  }
  if (f) fclose(f);
}

/* inotify: a new /tmp/sgdlab-* gets a watch of its own; a key file
 * written in one is read (also at once: it may be there already). */
static void on_inotify(capture_t *c, int tmp_wd, char (*dirs)[64], int *ndirs, int *wds) {
  char ev[8192] __attribute__((aligned(8)));
  ssize_t n = read(c->ino, ev, sizeof ev);
  for (ssize_t o = 0; o < n;) {
    struct inotify_event *e = (struct inotify_event *)(ev + o);
    o += (ssize_t)(sizeof *e + e->len);
    if (!e->len) continue;
    if (e->wd == tmp_wd && !strncmp(e->name, "sgdlab-", 7) && *ndirs < 64) {
      char path[96];
      snprintf(dirs[*ndirs], 64, "%s", e->name);
      snprintf(path, sizeof path, "%s/%s", CAP_TMP, e->name);
      wds[*ndirs] = inotify_add_watch(c->ino, path, IN_CLOSE_WRITE | IN_MOVED_TO);
      grab_keys(c, dirs[(*ndirs)++]);
      continue;
    }
    for (int i = 0; i < *ndirs; i++)
      if (e->wd == wds[i] && !strcmp(e->name, "keys")) grab_keys(c, dirs[i]);
  }
}

static void *capture_loop(void *p) {
  capture_t *c = p;
  char dirs[64][64];
  int wds[64], ndirs = 0;
  int tmp_wd = inotify_add_watch(c->ino, CAP_TMP, IN_CREATE | IN_ONLYDIR);
  double end = sg_now() + CAP_S;
  struct pollfd fds[3] = {{c->sock, POLLIN, 0}, {c->ino, POLLIN, 0}, {c->stop[0], POLLIN, 0}};
  while (sg_now() < end && !fds[2].revents) {
    if (poll(fds, 3, 200) <= 0) continue;
    if (fds[1].revents) on_inotify(c, tmp_wd, dirs, &ndirs, wds);
    if (fds[0].revents) {
      char frame[65536];
      ssize_t n = recv(c->sock, frame, sizeof frame, MSG_DONTWAIT);
      if (n > 0 && c->len + (size_t)n <= CAP_MAX) memcpy(c->buf + c->len, frame, (size_t)n),
                                                    c->len += (size_t)n;
    }
  }
  return NULL;
}

/* The packet socket, opened inside h1's network namespace. */
static int capture_open(capture_t *c) {
  char path[96];
  snprintf(path, sizeof path, "/run/netns/" SG_CLUSTER_NS_PREFIX "%s-h1", g_name);
  int ns = open(path, O_RDONLY | O_CLOEXEC), self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  c->sock = -1;
  if (ns >= 0 && self >= 0 && setns(ns, CLONE_NEWNET) == 0) {
    c->sock = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (setns(self, CLONE_NEWNET) != 0) abort(); /* this thread must not stay in h1 */
  }
  if (ns >= 0) close(ns);
  if (self >= 0) close(self);
  c->ino = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  c->buf = malloc(CAP_MAX);
  c->len = 0;
  c->nkeys = 0;
  if (pipe(c->stop) < 0 || c->sock < 0 || c->ino < 0 || !c->buf) return -1;
  return 0;
}

/* Capture during `salloc -w h0,h1 sgdlab run` (env words first, or NULL);
 * the secret keys found in the frames into *found, of *nkeys seen. */
static void capture_run(const char *d, const char *env, const char *what, int *found,
                        int *nkeys) {
  char cfg[128], db[128], dump[128];
  snprintf(cfg, sizeof cfg, "%s/cap.yaml", d);
  snprintf(db, sizeof db, "%s/cap.db", d);
  snprintf(dump, sizeof dump, "%s/cap.bin", d);
  CHECK_OK(ru_write_train_config(cfg, "slurm-cap", "{engine: allreduce, algorithm: ring}",
                                 "transport: zmq\n", dump, 2, 10));
  capture_t *c = calloc(1, sizeof *c);
  CHECK(c);
  CHECK_MSG(capture_open(c) == 0, "capture in h1: %s", strerror(errno));
  pthread_t t;
  CHECK_EQ_INT(pthread_create(&t, NULL, capture_loop, c), 0);
  char *words[] = {"env", env ? (char *)env : "SGDLAB_STAGE_CAPTURE=1", "salloc", "-N2", "-n2",
                   "-w", "h0,h1", "--overcommit", (char *)ru_sgdlab(), "run", cfg, "--db", db,
                   NULL};
  double t0 = sg_now();
  int rc = on_h0(words);
  double took = sg_now() - t0;
  if (write(c->stop[1], "x", 1) != 1) abort();
  pthread_join(t, NULL);
  *found = 0;
  for (int i = 0; i < c->nkeys; i++) *found += memmem(c->buf, c->len, c->keys[i], 40) != NULL;
  *nkeys = c->nkeys;
  fprintf(stderr, "  %s: run exit %d in %.2f s; %zu bytes captured on h1; %d of %d secret keys "
          "(run directories seen meanwhile) in them\n", what, rc, took, c->len, *found, *nkeys);
  close(c->sock), close(c->ino), close(c->stop[0]), close(c->stop[1]);
  free(c->buf);
  free(c);
  unlink(dump);
  CHECK_MSG(rc == 0, "%s: salloc ... sgdlab run failed", what);
}

/* munged not answering on the harness's host (its socket named wrong):
 * `sgdlab run` refuses in one line before srun starts, no plain stage. */
static void munge_absent(const char *d) {
  char host[32], cfg[128], db[128], env[256], *out = NULL;
  snprintf(host, sizeof host, "%s/h0", g_name);
  snprintf(cfg, sizeof cfg, "%s/cap.yaml", d);
  snprintf(db, sizeof db, "%s/nomunge.db", d);
  /* in the test's own directory: one in /var/tmp (sticky, world-writable)
   * is refused before munge is asked (another user could make it) */
  snprintf(env, sizeof env, "SGDLAB_MUNGE_SOCKET=%s/no-such-munge.sock", d);
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "exec", host, "--", "env", env, "salloc", "-N2", "-n2",
                        ru_sgdlab(), "run", cfg, "--db", db, NULL);
  fprintf(stderr, "  munged not answering: exit %d:\n%s", rc, out ? out : "");
  CHECK_MSG(rc != 0 && out && strstr(out, "munged does not answer") && !strstr(out, "[1/1]"),
            "a harness without munged did not refuse in one line");
  free(out);
}

TEST(slurm_stage_not_in_clear_on_the_wire) {
  if (!slurm_or_skip("slurm_stage_not_in_clear_on_the_wire")) return;
  atexit(down_at_exit);
  atexit(scratch_at_exit);
  if (!g_dir[0]) {
    snprintf(g_dir, sizeof g_dir, "/var/tmp/sgdlab-slurm-XXXXXX");
    if (!mkdtemp(g_dir)) g_dir[0] = '\0';
  }
  CHECK(g_dir[0]);
  chmod(g_dir, 0755);
  up_or_fail();
  if (test_failed_now_) return;
  int found = 0, nkeys = 0;
  capture_run(g_dir, "SGDLAB_TEST_PLAIN_STAGE=1", "plain stage (planted)", &found, &nkeys);
  CHECK_MSG(!test_failed_now_ && nkeys >= 3 && found >= 3, "the capture found %d of %d keys of "
            "the plain stage: it does not see the stage", found, nkeys);
  if (!test_failed_now_) capture_run(g_dir, NULL, "munge stage", &found, &nkeys);
  CHECK_MSG(nkeys >= 3, "no key file seen during the munge run (%d keys)", nkeys);
  CHECK_MSG(found == 0, "%d secret keys in clear on h1's link", found);
  if (!test_failed_now_) munge_absent(g_dir);
  char *out = NULL;
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "cluster", "down", g_name, NULL), 0);
  free(out);
  g_name[0] = '\0';
}
