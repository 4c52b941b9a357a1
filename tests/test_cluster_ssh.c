/* test_cluster_ssh.c - `sgdlab run` on ssh hosts: `sgdlab cluster up
 * --ssh` (one sshd per emulated host, keys made for the cluster) and runs
 * whose hostfile names the hosts, the harness itself on h0 (`sgdlab
 * cluster exec NAME/h0 -- sgdlab run ...`), as on a head node.
 *
 *  - equivalence: ring with transport mpi (mpirun's own ssh launch,
 *    plm_rsh_agent "ssh -F ssh_config"), ring and ps with transport zmq
 *    (launcher ssh: one ssh per rank, spec and keys over its stdin) on 4
 *    hosts; each ends within relative L2 distance 1e-4 of `local`, with its
 *    ranks on 4 distinct hosts (each sshd's UTS namespace names its host).
 *    Each host with one rank: tc's counter on its end of the link carried
 *    1.0-1.25 x the bytes the rank recorded sending.
 *  - keys: while a zmq run trains, no process's argv or environment
 *    (/proc/PID/cmdline, /proc/PID/environ) holds any of the run's secret
 *    keys; a planted process with one in its environment is found.
 *  - a rank killed (SIGKILL) fails the run within 2 deadlines naming it.
 *  - the harness killed with SIGKILL: every rank is gone (their stdin, the
 *    ssh connection, ends) within a bound.
 *  - a host that does not see the run's directory is refused before
 *    mpirun starts (a planted sshd with its own /tmp).
 *  - `down` leaves no sshd or session of the cluster, no namespace, no
 *    file (counted before and after).
 *
 * Skips (with a SKIP line) when not root or when sshd/ssh/mpirun are
 * missing.  The cluster is removed at exit even when a CHECK stops it. */
#define _GNU_SOURCE
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "run_util.h"
#include "test_cluster_util.h"

#define RTOL 1e-4
#define DEADLINE_S 5.0
/* A host's link bytes over its rank's recorded bytes: frame headers,
 * acknowledgements, CURVE, records, ssh and (h0) the harness's replies
 * come on top of the payload */
#define LINK_LO 1.0
#define LINK_HI 1.25

static char g_name[16], g_dir[256], g_conf[300], g_hostfile[300];

static void down_at_exit(void) {
  if (!g_name[0]) return;
  char *out = NULL;
  ru_sgdlab_in(NULL, &out, "cluster", "down", g_name, NULL);
  free(out);
}

static int ssh_or_skip(const char *test) {
  if (!tc_root_or_skip(test)) return 0;
  static const char *const need[] = {"/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen",
                                     "/usr/bin/mpirun"};
  for (size_t i = 0; i < sizeof need / sizeof *need; i++)
    if (access(need[i], X_OK) < 0) {
      fprintf(stderr, "SKIP %s: %s is not installed\n", test, need[i]);
      return 0;
    }
  return 1;
}

/* One process's argv or environment (which: "cmdline", "environ"). */
static size_t proc_file(pid_t pid, const char *which, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, which);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  return n;
}

/* Processes (not this one) whose argv or environment contains any of the
 * n needles; the first such pid into *first. */
static int procs_holding(char needles[][48], int n, pid_t *first) {
  static char buf[1 << 17];
  DIR *d = opendir("/proc");
  int hits = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    int hit = 0;
    for (int w = 0; w < 2 && !hit; w++) {
      size_t len = proc_file(pid, w ? "environ" : "cmdline", buf, sizeof buf);
      for (int k = 0; k < n && !hit; k++) hit = memmem(buf, len, needles[k], 40) != NULL;
    }
    if (hit && !hits++ && first) *first = pid;
  }
  if (d) closedir(d);
  return hits;
}

/* Processes whose argv names the cluster's daemons directory (its sshds,
 * and the sessions, whose argv is "sshd: root@notty", by parentage). */
static int cluster_procs(void) {
  static char buf[8192];
  DIR *d = opendir("/proc");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    pid_t pid = atoi(e->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    size_t len = proc_file(pid, "cmdline", buf, sizeof buf);
    int hit = memmem(buf, len, g_dir, strlen(g_dir)) != NULL;
    for (pid_t p = ru_parent_of(pid); !hit && p > 1; p = ru_parent_of(p)) {
      size_t l2 = proc_file(p, "cmdline", buf, sizeof buf);
      hit = memmem(buf, l2, g_dir, strlen(g_dir)) && strstr(buf, "sshd");
    }
    n += hit;
  }
  if (d) closedir(d);
  return n;
}

static int files_in(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return d ? n : -1;
}

static void up_or_fail(void) {
  tc_name('x', g_name, sizeof g_name);
  char *out = NULL;
  double t0 = sg_now();
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "up", "--hosts", "4", "--link", "1gbit",
                        "--name", g_name, "--ssh", "--owner", tc_owner(), NULL);
  fprintf(stderr, "  cluster up --ssh: exit %d in %.2f s\n%s", rc, sg_now() - t0, out ? out : "");
  free(out);
  if (rc) g_name[0] = '\0';
  snprintf(g_dir, sizeof g_dir, "%s/daemons-%s", SG_CLUSTER_RUN_DIR, g_name);
  snprintf(g_conf, sizeof g_conf, "%s/ssh_config", g_dir);
  snprintf(g_hostfile, sizeof g_hostfile, "%s/hostfile", g_dir);
  struct stat st;
  CHECK_MSG(rc == 0 && stat(g_conf, &st) == 0, "cluster up --ssh failed (exit %d)", rc);
  CHECK_MSG((st.st_mode & 077) == 0, "ssh_config has mode %o", st.st_mode & 0777);
}

/* argv of `sgdlab cluster exec NAME/h0 -- sgdlab run CFG --db DB` */
static void on_h0_argv(char **argv, char *host, size_t cap, const char *cfg, const char *db) {
  snprintf(host, cap, "%s/h0", g_name);
  char *const a[] = {"sgdlab", "cluster", "exec", host, "--", (char *)ru_sgdlab(), "run",
                     (char *)cfg, "--db", (char *)db, NULL};
  for (int i = 0; i < 11; i++) argv[i] = a[i];
}

/* The runs that kill something use DEADLINE_S (their bound is 2 of it);
 * the equivalence runs a roomier one: on a loaded machine four ssh logins
 * (each starting root's login shell) can keep the rendezvous waiting
 * longer than 5 s */
#define EQ_DEADLINE_S 30.0

static void write_cfg_dl(const char *cfg, const char *engine, const char *extra,
                         const char *dump, long steps, double deadline) {
  char all[1024];
  snprintf(all, sizeof all, "hostfile: %s\nssh_config: %s\ndeadline: %g\n%s", g_hostfile, g_conf,
           deadline, extra);
  CHECK_OK(ru_write_train_config(cfg, "ssh-eq", engine, all, dump, 4, steps));
}

static void write_cfg(const char *cfg, const char *engine, const char *extra, const char *dump,
                      long steps) {
  write_cfg_dl(cfg, engine, extra, dump, steps, DEADLINE_S);
}

static void equal_runs(const char *d, const char *ref) {
  static const char *const variants[][4] = {
      {"{engine: allreduce, algorithm: ring}", "transport: mpi\n", "4", "ring mpi (mpirun/ssh)"},
      {"{engine: allreduce, algorithm: ring}", "transport: zmq\nlauncher: ssh\n", "4",
       "ring zmq (launcher ssh)"},
      {"{engine: ps, mode: sync}", "transport: zmq\nlauncher: ssh\n", "5", "ps zmq (launcher ssh)"},
  };
  char cfg[128], db[128], dump[128], host[32], errp[160], sql[160], *argv[12];
  snprintf(db, sizeof db, "%s/e.db", d);
  for (size_t v = 0; v < sizeof variants / sizeof *variants && !test_failed_now_; v++) {
    snprintf(cfg, sizeof cfg, "%s/v%zu.yaml", d, v);
    snprintf(dump, sizeof dump, "%s/v%zu.bin", d, v);
    snprintf(errp, sizeof errp, "%s/v%zu.err", d, v);
    write_cfg_dl(cfg, variants[v][0], variants[v][1], dump, 40, EQ_DEADLINE_S);
    on_h0_argv(argv, host, sizeof host, cfg, db);
    uint64_t before[4];
    CHECK_EQ_INT(tc_link_tx(g_name, 4, before), 0);
    double t0 = sg_now(), submit = sg_wall();
    int code = ru_wait_exit_code(ru_start(argv, errp, 1, NULL), 120);
    char *err = ru_slurp(errp, 4096);
    fprintf(stderr, "  %s: exit %d in %.2f s\n%s", variants[v][3], code, sg_now() - t0,
            err ? err : "");
    free(err);
    CHECK_EQ_INT(code, 0);
    tc_submit_to_first_step(db, submit, variants[v][3]);
    long long id = ru_db_int(db, "SELECT max(id) FROM runs");
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT host) FROM ranks WHERE run_id = %lld", id);
    long long hosts = ru_db_int(db, sql);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM ranks WHERE run_id = %lld", id);
    long long ranks = ru_db_int(db, sql);
    double dist = ru_rel_distance(dump, ref, NULL);
    fprintf(stderr, "  %s: distance to local %.3g, %lld ranks on %lld hosts\n", variants[v][3],
            dist, ranks, hosts);
    CHECK_MSG(dist >= 0 && dist <= RTOL, "%s: distance %.3g", variants[v][3], dist);
    CHECK_MSG(hosts == 4 && ranks == atoi(variants[v][2]), "%s: %lld ranks on %lld hosts",
              variants[v][3], ranks, hosts);
    int single = 0, ok = tc_links_vs_ranks(db, g_name, 4, before, variants[v][3], LINK_LO,
                                           LINK_HI, &single);
    CHECK_MSG(single >= 3 && ok == single, "%s: %d of %d one-rank hosts' links carried their "
              "rank's bytes within %.2f-%.2f of them", variants[v][3], ok, single, LINK_LO,
              LINK_HI);
  }
}

/* The secret keys of the newest run (its directory's key file) into k. */
static int run_secrets(const char *db, char k[][48], int cap) {
  char *dir = ru_db_text(db, "SELECT tmp_dir FROM runs ORDER BY id DESC LIMIT 1"), path[300];
  if (!dir) return 0;
  snprintf(path, sizeof path, "%s/keys", dir);
  free(dir);
  FILE *f = fopen(path, "r");
  char who[16], pub[64], sec[64];
  int n = 0;
  if (f && fscanf(f, "sgdlab-keys 1 %*d") == 0)
    while (n < cap && fscanf(f, "%15s %63s %63s", who, pub, sec) == 3)
      if (strlen(sec) == 40) memcpy(k[n++], sec, 41); /* 40 characters and the NUL */
  if (f) fclose(f);
  return n;
}

/* Keys in no argv or environment during a run (and a planted one found);
 * then rank 2 killed: the run fails within 2 deadlines, naming it. */
static void keys_then_killed_rank(const char *d) {
  char cfg[128], db[128], host[32], errp[160], *argv[12], keys[8][48];
  snprintf(cfg, sizeof cfg, "%s/k.yaml", d);
  snprintf(db, sizeof db, "%s/k.db", d);
  snprintf(errp, sizeof errp, "%s/k.err", d);
  write_cfg(cfg, "{engine: allreduce, algorithm: ring}", "transport: zmq\nlauncher: ssh\n", "",
            100000);
  on_h0_argv(argv, host, sizeof host, cfg, db);
  pid_t sg = ru_start(argv, errp, 1, NULL);
  CHECK(sg > 0);
  int st = 0, w = ru_db_wait(db, "SELECT COUNT(*) FROM steps WHERE rank = 3", 5, 60, sg, &st);
  int nk = w == 0 ? run_secrets(db, keys, 8) : 0;
  pid_t first = 0;
  int holders = nk ? procs_holding(keys, nk, &first) : -1;
  /* the scan finds a key where one is: a process with one in its environment */
  char env[80], *plant_argv[] = {"sleep", "30", NULL};
  snprintf(env, sizeof env, "PLANTED=%s", keys[0]);
  char *plant_env[] = {env, NULL};
  pid_t plant = nk ? fork() : -1;
  if (plant == 0) execve("/bin/sleep", plant_argv, plant_env), _exit(127);
  int found = 0;
  for (double end = sg_now() + 5; plant > 0 && !found && sg_now() < end;)
    found = procs_holding(keys, nk, NULL) > holders;
  if (plant > 0) kill(plant, SIGKILL), waitpid(plant, NULL, 0);
  fprintf(stderr, "  keys: %d secret keys of the run, %d processes hold one in argv/environ "
          "(planted one found: %s)\n", nk, holders, found ? "yes" : "no");
  long long pid2 = w == 0 ? ru_db_int(db, "SELECT pid FROM ranks WHERE rank = 2") : -1;
  if (w != 0 || pid2 <= 0 || nk != 5 || holders != 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(w == 0, "training did not start (wait %d, status %d)", w, st);
  CHECK_MSG(nk == 5, "%d secret keys read from the run's key file", nk);
  CHECK_MSG(holders == 0, "pid %d holds a secret key of the run in argv or environ", (int)first);
  CHECK_MSG(found, "the scan did not find the planted key");
  CHECK(pid2 > 0);
  double t_kill = sg_now();
  CHECK_EQ_INT(kill((pid_t)pid2, SIGKILL), 0);
  ru_kill_outcome_t o = ru_kill_outcome(sg, t_kill, 4 * DEADLINE_S + 10, db, 2, "killed rank 2");
  CHECK_MSG(o.code > 0, "sgdlab exit %d after the kill", o.code);
  CHECK_MSG(o.took <= 2 * DEADLINE_S, "failure took %.2f s > 2 deadlines", o.took);
  CHECK_MSG(o.named, "the run's error does not name rank 2");
}

/* The `sgdlab run CFG` process (not cluster exec around it: it execs). */
static void killed_harness(const char *d) {
  char cfg[128], db[128], host[32], errp[160], sql[96], *argv[12];
  snprintf(cfg, sizeof cfg, "%s/h.yaml", d);
  snprintf(db, sizeof db, "%s/h.db", d);
  snprintf(errp, sizeof errp, "%s/h.err", d);
  /* the roomy deadline: nothing here waits on a deadline, and a loaded
   * machine's four ssh logins once kept the rendezvous past 5 s, failing
   * the run before its fifth step */
  write_cfg_dl(cfg, "{engine: allreduce, algorithm: ring}", "transport: zmq\nlauncher: ssh\n", "",
               100000, EQ_DEADLINE_S);
  on_h0_argv(argv, host, sizeof host, cfg, db);
  pid_t sg = ru_start(argv, errp, 1, NULL); /* cluster exec execs sgdlab run: the harness */
  CHECK(sg > 0);
  int st = 0, w = ru_db_wait(db, "SELECT COUNT(*) FROM steps WHERE rank = 3", 5, 60, sg, &st);
  pid_t ranks[4] = {0};
  for (int r = 0; r < 4 && w == 0; r++) {
    snprintf(sql, sizeof sql, "SELECT pid FROM ranks WHERE rank = %d", r);
    ranks[r] = (pid_t)ru_db_int(db, sql);
  }
  kill(sg, SIGKILL);
  waitpid(sg, NULL, 0);
  double t0 = sg_now();
  int left = 0;
  for (int r = 0; r < 4; r++) left += ranks[r] > 0 && !ru_wait_gone(ranks[r], t0 + 30 - sg_now(), 1);
  fprintf(stderr, "  harness killed (-9): %d ranks left %.2f s later\n", left, sg_now() - t0);
  if (w != 0) { /* why it ended first: its own output */
    char *out = ru_slurp(errp, 4096);
    fprintf(stderr, "  the run ended before 5 steps of rank 3 (exit status %d): %s\n", st,
            out ? out : "(no output)");
    free(out);
  }
  CHECK_MSG(w == 0 && ranks[0] > 0 && ranks[3] > 0, "training did not start (wait %d)", w);
  CHECK_MSG(left == 0, "%d ranks left after the harness was killed", left);
}

/* A host whose sshd has a /tmp of its own (a tmpfs in a private mount
 * namespace, port 2222): mpirun's run is refused before it starts. */
static void unshared_tmp_refused(const char *d) {
  char cmd[2048], conf[160], cfg[128], db[128], host[32], errp[160], *argv[12], addr[32];
  snprintf(conf, sizeof conf, "%s/ssh_config_2222", d);
  char *base = ru_slurp(g_conf, 8192);
  CHECK(base);
  FILE *f = fopen(conf, "w");
  CHECK(f);
  fprintf(f, "Port 2222\n%s", base);
  free(base);
  fclose(f);
  snprintf(addr, sizeof addr, "198.18.%s", ""); /* h1's address, from the hostfile */
  char *hf = ru_slurp(g_hostfile, 4096), *l2 = hf ? strchr(hf, '\n') : NULL;
  CHECK(l2);
  snprintf(addr, sizeof addr, "%.*s", (int)strcspn(l2 + 1, " \n"), l2 + 1);
  snprintf(cmd, sizeof cmd, "unshare -m --propagation private sh -c 'mount -t tmpfs none /tmp && "
           "exec ip netns exec sgc-%s-h1 /usr/sbin/sshd -D -e -f %s/sshd_config -o "
           "ListenAddress=%s:2222' 2>%s/sshd2222.err & echo $! > %s/sshd2222.pid",
           g_name, g_dir, addr, d, d);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  snprintf(cfg, sizeof cfg, "%s/u.yaml", d);
  snprintf(db, sizeof db, "%s/u.db", d);
  snprintf(errp, sizeof errp, "%s/u.err", d);
  char all[512];
  snprintf(all, sizeof all, "hosts: \"%.*s,%s\"\nssh_config: %s\ntransport: mpi\n",
           (int)strcspn(hf, " \n"), hf, addr, conf);
  free(hf);
  CHECK_OK(ru_write_train_config(cfg, "ssh-tmp", "{engine: allreduce, algorithm: ring}", all, "",
                                 2, 20));
  on_h0_argv(argv, host, sizeof host, cfg, db);
  int code = -1;
  for (int tries = 0; tries < 50 && code != 0; tries++) { /* until it listens */
    snprintf(cmd, sizeof cmd, "ip netns exec sgc-%s-h0 ssh -F %s -- %s true 2>/dev/null", g_name,
             conf, addr);
    code = ru_sh(cmd);
  }
  int run = code == 0 ? ru_wait_exit_code(ru_start(argv, errp, 1, NULL), 90) : -1;
  char *error = ru_db_text(db, "SELECT error FROM runs ORDER BY id DESC LIMIT 1");
  fprintf(stderr, "  host with its own /tmp: ssh %d, run exit %d: %s\n", code, run,
          error ? error : "?");
  char *pidtxt = ru_slurp(strcat(strcpy(cmd, d), "/sshd2222.pid"), 64);
  if (pidtxt && atoi(pidtxt) > 1) kill(atoi(pidtxt), SIGTERM); /* unshare exec'd into ip, sshd */
  free(pidtxt);
  int said = error && strstr(error, "does not see the run's directory") && strstr(error, addr);
  free(error);
  CHECK_MSG(code == 0, "the planted sshd did not answer");
  CHECK_MSG(run > 0 && said, "the run was not refused for its unshared /tmp");
}

static void down_leaves_nothing(void) {
  char ns_prefix[64], state[128];
  snprintf(ns_prefix, sizeof ns_prefix, SG_CLUSTER_NS_PREFIX "%s-", g_name);
  int procs0 = cluster_procs(), ns0 = tc_ns_count(ns_prefix), files0 = files_in(g_dir);
  double t0 = sg_now();
  char *out = NULL;
  int rc = ru_sgdlab_in(NULL, &out, "cluster", "down", g_name, NULL);
  fprintf(stderr, "  cluster down: exit %d in %.2f s %s", rc, sg_now() - t0, out ? out : "");
  free(out);
  snprintf(state, sizeof state, "%s/cluster-%s", SG_CLUSTER_RUN_DIR, g_name);
  int procs = cluster_procs(), ns = tc_ns_count(ns_prefix), files = files_in(g_dir);
  struct stat sb;
  int st = stat(state, &sb) == 0;
  fprintf(stderr, "  before down: %d sshd processes, %d namespaces, %d files; after: %d, %d, %d "
          "(state %s)\n", procs0, ns0, files0, procs, ns, files < 0 ? 0 : files, st ? "left" : "gone");
  g_name[0] = '\0';
  CHECK_EQ_INT(rc, 0);
  CHECK_MSG(procs0 >= 4 && ns0 == 5 && files0 > 0, "before down: %d processes, %d namespaces",
            procs0, ns0);
  CHECK_MSG(procs == 0 && ns == 0 && files < 0 && !st, "after down: %d processes, %d namespaces, "
            "%d files", procs, ns, files);
}

TEST(ssh_runs_equal_local_on_4_hosts) {
  if (!ssh_or_skip("ssh_runs_equal_local_on_4_hosts")) return;
  atexit(down_at_exit);
  const char *d = ru_scratch("ssh");
  CHECK(d);
  chmod(d, 0755);
  char ref[128];
  CHECK_OK(ru_cluster_reference(d, "ssh-eq", 40, ref, sizeof ref));
  up_or_fail();
  if (test_failed_now_) return;
  equal_runs(d, ref);
  if (!test_failed_now_) keys_then_killed_rank(d);
  if (!test_failed_now_) killed_harness(d);
  if (!test_failed_now_) unshared_tmp_refused(d);
  down_leaves_nothing();
}
