/* test_cluster_run.c - `sgdlab run` on an emulated cluster (run_cluster.h).
 *
 *  - placement: spread gives ps servers and the mapreduce driver hosts of
 *    their own, then workers round-robin; pack fills hosts in order; only
 *    the hosts that get a rank are made (no root needed).
 *  - equivalence: ps sync, allreduce ring and rhd, and mapreduce with 4
 *    workers, each rank on a host of its own (1gbit links), end within the
 *    engine tests' relative L2 distance (1e-4) of `local` run without a
 *    cluster; the ranks table names every rank's host and address, and
 *    the links really carried the data: each host's tbf counted at least
 *    the bytes its rank reported sending (and the sum at most 15% + 1 MB
 *    more: headers, CURVE, acks), which traffic over loopback would not
 *    give.  No namespace or state of the run's cluster is left.
 *  - a rank killed mid-run fails the run (naming it) and leaves no
 *    namespace; a harness killed with SIGKILL leaves its cluster, and the
 *    next `sgdlab run` sweeps it.
 *  - mpirun across the hosts: ring with transport mpi, and with zmq ranks
 *    started by mpirun, on 3 hosts equals local, and the links carried
 *    each rank's bytes; sgdlab-nsexec (the rsh agent) enters only hosts of
 *    the cluster SGDLAB_CLUSTER names, giving the daemons TMPDIR = hN in
 *    the run's private directory (a directory others may enter, like
 *    /tmp, is refused naming the host); a rank killed under mpirun fails
 *    the run and leaves no process of the cluster behind; the ranks got
 *    the TCP BTL with a 1 MiB eager limit, without put (btl_tcp_flags)
 *    and with its progress thread.
 *  - without CAP_NET_ADMIN (dropped from the bounding set before exec)
 *    `sgdlab run` refuses in one line, exit 2, before making anything.
 *
 * Root is needed for all but placement: the others skip with the reason.
 * About 25 s here.
 */
#include "test.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "err.h"
#include "run_cluster.h"
#include "run_util.h"
#include "test_cluster_util.h"

#define RTOL 1e-4
#define CLUSTER_5 "cluster: {hosts: 5, link: 1gbit}\n"

/* ---- placement ------------------------------------------------------------ */

/* host_of of the first run of `yaml`, as text "0,1,2"; the used count. */
static int place(const char *yaml, int hosts, int pack, char *out, size_t cap) {
  sg_experiment_t *x = NULL;
  int host_of[64];
  out[0] = '\0';
  if (sg_config_parse(&x, "t.yaml", yaml, strlen(yaml), NULL, 0) < 0) return -1;
  int used = sg_cluster_place(&x->runs[0], hosts, pack, host_of);
  size_t len = 0;
  for (int r = 0; r < x->runs[0].nprocs && len < cap; r++)
    len += (size_t)snprintf(out + len, cap - len, "%s%d", r ? "," : "", host_of[r]);
  sg_experiment_destroy(&x);
  return used;
}

TEST(placement_spread_and_pack) {
  static const struct {
    const char *yaml;
    int hosts, pack, used;
    const char *want; /* host of each rank */
  } cases[] = {
      /* ps: the server alone on h0, workers round-robin over h1, h2 */
      {"workers: 4\nengines: [ps]\n", 3, 0, 3, "0,1,2,1,2"},
      /* two servers on h0, h1; every worker on the one host left */
      {"workers: 4\nengines: [{engine: ps, servers: 2}]\n", 3, 0, 3, "0,1,2,2,2,2"},
      /* more servers than hosts: servers wrap, workers go over every host */
      {"workers: 3\nengines: [{engine: ps, servers: 3}]\n", 2, 0, 2, "0,1,0,0,1,0"},
      /* mapreduce: the driver on h0; more hosts than ranks: the rest unused */
      {"workers: 3\nengines: [mapreduce]\n", 8, 0, 4, "0,1,2,3"},
      /* allreduce: every rank a worker */
      {"workers: 4\nengines: [allreduce]\n", 2, 0, 2, "0,1,0,1"},
      /* pack: ceil(5 / 2) = 3 per host; ceil(5 / 4) = 2 per host uses 3 hosts */
      {"workers: 4\nengines: [ps]\n", 2, 1, 2, "0,0,0,1,1"},
      {"workers: 4\nengines: [ps]\n", 4, 1, 3, "0,0,1,1,2"},
  };
  char got[256];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CHECK_EQ_INT(place(cases[i].yaml, cases[i].hosts, cases[i].pack, got, sizeof got),
                 cases[i].used);
    CHECK_MSG(!strcmp(got, cases[i].want), "case %zu: %s, want %s", i, got, cases[i].want);
  }
}

/* ---- helpers of the runs ------------------------------------------------------ */

/* Neither a namespace nor a state file of cluster `name` is left. */
static int cluster_gone(const char *name, char *why, size_t cap) {
  char ns[64], state[128];
  snprintf(ns, sizeof ns, "sgc-%s-", name);
  snprintf(state, sizeof state, "%s/cluster-%s", SG_CLUSTER_RUN_DIR, name);
  int n = tc_ns_count(ns);
  snprintf(why, cap, "%d namespaces %s*, state %s", n, ns,
           access(state, F_OK) == 0 ? "present" : "absent");
  return n == 0 && access(state, F_OK) != 0;
}

/* The links carried run `id`'s data: every host sent at least what the
 * ranks on it reported sending, and all of them together at most 15% + 1
 * MB more (frame headers, CURVE, TCP acks). */
static void check_links(const char *db, long long id, const char *what) {
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT count(*) FROM ranks k WHERE k.run_id = %lld AND k.address LIKE '198.1_.%%' AND "
           "(SELECT CAST(value AS INTEGER) FROM run_info i WHERE i.run_id = k.run_id AND "
           "i.key = 'cluster.' || k.cluster_host || '.tx_bytes') >= "
           "(SELECT sum(bytes_sent) FROM steps s WHERE s.run_id = k.run_id AND s.rank = k.rank)",
           id);
  long long ok_hosts = ru_db_int(db, sql);
  snprintf(sql, sizeof sql, "SELECT processes FROM runs WHERE id = %lld", id);
  long long nprocs = ru_db_int(db, sql);
  CHECK_MSG(nprocs > 1 && ok_hosts == nprocs, "%s: %lld of %lld hosts sent their rank's bytes",
            what, ok_hosts, nprocs);
  snprintf(sql, sizeof sql, "SELECT sum(bytes_sent) FROM steps WHERE run_id = %lld", id);
  long long sent = ru_db_int(db, sql);
  snprintf(sql, sizeof sql, "SELECT CAST(value AS INTEGER) FROM run_info WHERE run_id = %lld AND "
           "key = 'cluster.tx_bytes'", id);
  long long link = ru_db_int(db, sql);
  fprintf(stderr, "  %s: ranks sent %lld bytes, the links carried %lld (%.3f)\n", what, sent, link,
          sent > 0 ? (double)link / (double)sent : 0);
  CHECK_MSG(sent > 1000000 && link >= sent && link <= sent * 1.15 + 1e6,
            "%s: sent %lld, links %lld", what, sent, link);
}

/* What every run on the cluster must show: its parameters within RTOL of
 * local's (ref), its ranks placed as `hosts_sql` (1 when right) says,
 * each host's link carrying its rank's bytes (check_links), and the
 * cluster gone afterwards (test_failed_now_ tells whether they held). */
static void cluster_run_checks(const char *db, long long id, const char *dump, const char *ref,
                               const char *hosts_sql, const char *what) {
  char sql[256], name[32], why[160];
  double dist = ru_rel_distance(dump, ref, NULL);
  fprintf(stderr, "  %s on the cluster: relative distance to local %.3g\n", what, dist);
  CHECK_MSG(dist >= 0 && dist <= RTOL, "%s: distance %.3g > %g", what, dist, RTOL);
  CHECK_MSG(ru_db_int(db, hosts_sql) == 1, "%s: ranks share a host or lack one", what);
  check_links(db, id, what);
  if (test_failed_now_) return;
  snprintf(sql, sizeof sql, "SELECT value FROM run_info WHERE run_id = %lld AND "
           "key = 'cluster.name'", id);
  ru_db_text_into(db, sql, name, sizeof name);
  CHECK_MSG(name[0] && cluster_gone(name, why, sizeof why), "%s: cluster '%s' left: %s", what,
            name, why);
  unlink(dump);
}

/* ---- every engine over the cluster ---------------------------------------- */

TEST(every_engine_over_the_cluster_equals_local) {
  if (!tc_root_or_skip("every_engine_over_the_cluster_equals_local")) return;
  static const char *const variants[][2] = {
      {"{engine: ps, mode: sync}", "ps sync"},
      {"{engine: allreduce, algorithm: ring}", "allreduce ring"},
      {"{engine: allreduce, algorithm: rhd}", "allreduce rhd"},
      {"{engine: mapreduce}", "mapreduce"},
  };
  const char *d = ru_scratch("clrun");
  CHECK(d);
  char cfg[128], db[128], ref[128], dump[128];
  snprintf(cfg, sizeof cfg, "%s/eq.yaml", d);
  snprintf(db, sizeof db, "%s/eq.db", d);
  snprintf(ref, sizeof ref, "%s/local.bin", d);
  CHECK_OK(ru_write_train_config(cfg, "cluster-eq", "local", NULL, ref, 4, 100));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
    const char *what = variants[v][1];
    snprintf(dump, sizeof dump, "%s/v%zu.bin", d, v);
    CHECK_OK(ru_write_train_config(cfg, "cluster-eq", variants[v][0], CLUSTER_5, dump, 4, 100));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", what);
    long long id = ru_db_int(db, "SELECT max(id) FROM runs");
    /* every rank on a host of its own, named with its address */
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT cluster_host) = count(*) AND "
             "count(DISTINCT address) = count(*) FROM ranks WHERE run_id = %lld", id);
    cluster_run_checks(db, id, dump, ref, sql, what);
    if (test_failed_now_) return;
  }
  /* zmq_scheme was tcp for them, and stays ipc for local */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE options_json LIKE "
                             "'%\"zmq_scheme\":\"tcp\"%'"), 4);
}

/* ---- mpirun across the hosts ------------------------------------------------ */

/* Ring under mpirun on 3 hosts, one rank each: with transport mpi (Open
 * MPI's TCP BTL between host addresses) and with zmq ranks that mpirun
 * starts; both end within RTOL of local, and check_links shows each
 * host's link carried at least its rank's gradient bytes, which traffic
 * that bypassed the links (shared memory, a rank left on mpirun's host,
 * loopback) would not give. */
TEST(mpirun_across_the_cluster_equals_local) {
  if (!tc_root_or_skip("mpirun_across_the_cluster_equals_local")) return;
  static const char *const variants[][2] = {
      {"transport: mpi\n", "ring mpi under mpirun"},
      {"transport: zmq\nlauncher: mpirun\n", "ring zmq under mpirun"},
  };
  const char *d = ru_scratch("clmpi");
  CHECK(d);
  char cfg[128], db[128], ref[128], dump[128], extra[256], sql[256];
  snprintf(cfg, sizeof cfg, "%s/m.yaml", d);
  snprintf(db, sizeof db, "%s/m.db", d);
  snprintf(ref, sizeof ref, "%s/local.bin", d);
  CHECK_OK(ru_write_train_config(cfg, "cluster-mpi", "local", NULL, ref, 3, 60));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
    const char *what = variants[v][1];
    snprintf(dump, sizeof dump, "%s/v%zu.bin", d, v);
    snprintf(extra, sizeof extra, "cluster: {hosts: 3, link: 1gbit}\n%s", variants[v][0]);
    CHECK_OK(ru_write_train_config(cfg, "cluster-mpi", "{engine: allreduce, algorithm: ring}",
                                   extra, dump, 3, 60));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", what);
    long long id = ru_db_int(db, "SELECT max(id) FROM runs");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %lld AND options_json LIKE "
             "'%%\"launcher\":\"mpirun\"%%'", id);
    CHECK_MSG(ru_db_int(db, sql) == 1, "%s: not launched by mpirun", what);
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT cluster_host) = 3 AND count(*) = 3 FROM "
             "ranks WHERE run_id = %lld", id);
    cluster_run_checks(db, id, dump, ref, sql, what);
    if (test_failed_now_) return;
    /* show: each rank's emulated host and address, not this machine */
    char idtext[32], *out = NULL;
    snprintf(idtext, sizeof idtext, "%lld", id);
    CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "show", idtext, "--db", db, NULL), 0);
    CHECK_MSG(out && strstr(out, "emulated cluster ") && strstr(out, " h0 rank 0 worker,") &&
                  strstr(out, " h2 rank 2 worker\n") && strstr(out, "address") &&
                  strstr(out, "198.1"),
              "%s: show: %s", what, out ? out : "");
    free(out);
  }
  unlink(ref);
}

/* A cluster run says so before it starts: `run -n` names the cluster on
 * the run line, -v each rank's host (the placement the run will make). */
TEST(a_cluster_run_says_where_it_runs) {
  if (!tc_root_or_skip("a_cluster_run_says_where_it_runs")) return;
  const char *d = ru_scratch("clsay");
  CHECK(d);
  char cfg[128], db[128], *out = NULL;
  snprintf(cfg, sizeof cfg, "%s/s.yaml", d);
  snprintf(db, sizeof db, "%s/s.db", d);
  CHECK_OK(ru_write_file(cfg, "name: say\nworkers: 3\nengines: [ps, allreduce]\n"
                              "workload: {epochs: 1}\ncluster: {hosts: 3, link: 100mbit}\n"));
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "-n", "-v", NULL), 0);
  CHECK_MSG(out && strstr(out, "repeat=0 on an emulated cluster of 3 hosts (link 100mbit, "
                               "spread)\n  placement: h0: rank 0 server, h1: rank 1 worker, "
                               "h2: rank 2 worker, h1: rank 3 worker\n"),
            "%s", out ? out : "");
  CHECK_MSG(out && strstr(out, "h0: rank 0 worker, h1: rank 1 worker, h2: rank 2 worker\n"),
            "%s", out ? out : "");
  free(out);
  /* a run on this host alone says nothing of the sort */
  CHECK_OK(ru_write_file(cfg, "name: say\nworkers: 2\nengines: [ps]\nworkload: {epochs: 1}\n"));
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "-n", "-v", NULL), 0);
  CHECK_MSG(out && strstr(out, "repeat=0\n") && !strstr(out, "emulated cluster") &&
                !strstr(out, "placement:"), "%s", out ? out : "");
  free(out);
}

/* sgdlab-nsexec, mpirun's rsh agent: enters a host of the cluster that
 * SGDLAB_CLUSTER names and runs the words with sh; another cluster's host,
 * an address of no cluster or no SGDLAB_CLUSTER is refused (exit 2). */
TEST(nsexec_enters_only_a_host_of_the_named_cluster) {
  if (!tc_root_or_skip("nsexec_enters_only_a_host_of_the_named_cluster")) return;
  sg_cluster_desc_t da, db_;
  sg_cluster_t *a = NULL, *b = NULL;
  CHECK_OK(sg_cluster_desc_parse(&da, 2, "1gbit", NULL));
  CHECK_OK(sg_cluster_desc_parse(&db_, 1, "1gbit", NULL));
  tc_name('n', da.name, sizeof da.name);
  CHECK_OK(tc_up(&a, &da));
  CHECK_OK(tc_up(&b, &db_));
  char agent[4096], out[4096];
  snprintf(agent, sizeof agent, "%s", ru_sgdlab());
  char *slash = strrchr(agent, '/');
  CHECK(slash);
  snprintf(slash + 1, sizeof agent - (size_t)(slash + 1 - agent), "sgdlab-nsexec");
  const char *a1 = sg_cluster_host_addr(a, 1), *b0 = sg_cluster_host_addr(b, 0);
  setenv("SGDLAB_CLUSTER", sg_cluster_name(a), 1);
  /* the run's directory must be private: /tmp is refused, naming the host */
  setenv("SGDLAB_RUNDIR", "/tmp", 1);
  char *words[] = {agent, (char *)a1, "true", NULL};
  CHECK_EQ_INT(tc_run(words, -1, out, sizeof out), 2);
  fprintf(stderr, "  refused: %s", out);
  CHECK_STR_CONTAINS(out, "sgdlab-nsexec: host ");
  CHECK_STR_CONTAINS(out, "not a private directory");
  char rundir[64];
  CHECK_OK(ru_mkdtemp(rundir, sizeof rundir, "nsexec"));
  setenv("SGDLAB_RUNDIR", rundir, 1);
  /* the words are one shell command line, as ssh sends them; TMPDIR is
   * host 1's directory in the run's */
  char *ok[] = {agent, (char *)a1, "ip", "-o", "-4", "addr", "show", "|", "grep", "-c", "198.1",
                "&&", "echo", "$TMPDIR", NULL};
  CHECK_EQ_INT(tc_run(ok, -1, out, sizeof out), 0);
  CHECK_MSG(atoi(out) == 1, "inside %s: %s", a1, out);
  char want[96];
  snprintf(want, sizeof want, "%s/h1\n", rundir);
  CHECK_STR_CONTAINS(out, want);
  ru_rm_rf(rundir);
  char *other[] = {agent, (char *)b0, "true", NULL};
  CHECK_EQ_INT(tc_run(other, -1, out, sizeof out), 2);
  fprintf(stderr, "  refused: %s", out);
  CHECK_STR_CONTAINS(out, "not to this run's cluster");
  char *none[] = {agent, "127.0.0.1", "true", NULL};
  CHECK_EQ_INT(tc_run(none, -1, out, sizeof out), 2);
  unsetenv("SGDLAB_CLUSTER");
  unsetenv("SGDLAB_RUNDIR");
  char *unnamed[] = {agent, (char *)a1, "true", NULL};
  CHECK_EQ_INT(tc_run(unnamed, -1, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "SGDLAB_CLUSTER");
  CHECK_OK(tc_down(&a));
  CHECK_OK(tc_down(&b));
}

/* ---- failures: a rank killed, the harness killed ---------------------------- */

/* Start a long ps run on 3 hosts; once rank `watch` recorded 5 steps,
 * *name gets the cluster's name.  The harness's pid, or -1. */
static pid_t start_run_as(const char *cfg, const char *db, const char *extra, char *name,
                          size_t cap) {
  char all[256];
  snprintf(all, sizeof all, "cluster: {hosts: 3, link: 1gbit}\ndeadline: 5\n%s", extra);
  if (ru_write_train_config(cfg, "cluster-fault", "{engine: ps, mode: sync}", all, "", 2,
                            1000000) < 0)
    return -1;
  pid_t sg = ru_spawn_sgdlab_run(cfg, db);
  int st = 0;
  if (sg < 0 || ru_db_wait(db, "SELECT count(*) FROM steps WHERE rank = 1", 5, 60, sg, &st) < 0 ||
      ru_db_wait(db, "SELECT count(*) FROM run_info WHERE key = 'cluster.name'", 1, 10, sg, &st) < 0) {
    if (sg > 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
    return -1;
  }
  ru_db_text_into(db, "SELECT value FROM run_info WHERE key = 'cluster.name'", name, cap);
  return sg;
}

static pid_t start_long_run(const char *cfg, const char *db, char *name, size_t cap) {
  return start_run_as(cfg, db, "", name, cap);
}

/* Whether process pid's environment holds the entry `want` (NAME=VALUE). */
static int env_has(pid_t pid, const char *want) {
  char path[64], env[16384];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  FILE *f = pid > 1 && pid != getpid() ? fopen(path, "r") : NULL;
  if (!f) return 0;
  size_t len = fread(env, 1, sizeof env - 1, f);
  fclose(f);
  env[len] = '\0';
  for (size_t at = 0; at < len; at += strlen(env + at) + 1)
    if (!strcmp(env + at, want)) return 1;
  return 0;
}

/* Processes whose environment holds SGDLAB_CLUSTER=name (mpirun's daemons
 * and ranks on the cluster inherit it). */
static int cluster_procs(const char *name) {
  char want[64];
  snprintf(want, sizeof want, "SGDLAB_CLUSTER=%s", name);
  int n = 0;
  DIR *d = opendir("/proc");
  struct dirent *e;
  while (d && (e = readdir(d))) n += env_has((pid_t)atoi(e->d_name), want);
  if (d) closedir(d);
  return n;
}

TEST(a_killed_rank_fails_the_run_and_leaves_no_namespace) {
  if (!tc_root_or_skip("a_killed_rank_fails_the_run_and_leaves_no_namespace")) return;
  const char *d = ru_scratch("clkill");
  CHECK(d);
  char cfg[128], db[128], name[32], why[160], ns[64];
  snprintf(cfg, sizeof cfg, "%s/k.yaml", d);
  snprintf(db, sizeof db, "%s/k.db", d);
  pid_t sg = start_long_run(cfg, db, name, sizeof name);
  CHECK_MSG(sg > 0 && name[0], "the run did not get going");
  snprintf(ns, sizeof ns, "sgc-%s-h2", name);
  CHECK(tc_ns_exists(ns)); /* while it runs, its hosts exist */
  pid_t victim = ru_find_rank(sg, 2);
  if (victim <= 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(victim > 0, "rank 2 not found");
  CHECK_EQ_INT(kill(victim, SIGKILL), 0);
  CHECK_EQ_INT(ru_wait_exit_code(sg, 40), 1);
  char *err = ru_db_text(db, "SELECT error FROM runs WHERE status = 'failed'");
  CHECK_MSG(err && strstr(err, "rank 2"), "error: %s", err ? err : "(none)");
  free(err);
  CHECK_MSG(cluster_gone(name, why, sizeof why), "cluster '%s' left: %s", name, why);
  /* the counters were read before it went */
  CHECK(ru_db_int(db, "SELECT count(*) FROM run_info WHERE key = 'cluster.tx_bytes' AND "
                      "CAST(value AS INTEGER) > 0") == 1);
}

/* Under mpirun (transport mpi) a rank killed on another host fails the
 * run naming it; mpirun's daemons on the hosts end with it, and the
 * cluster goes. */
TEST(a_killed_rank_under_mpirun_fails_the_run_and_leaves_nothing) {
  if (!tc_root_or_skip("a_killed_rank_under_mpirun_fails_the_run_and_leaves_nothing")) return;
  const char *d = ru_scratch("clmkill");
  CHECK(d);
  char cfg[128], db[128], name[32], why[160];
  snprintf(cfg, sizeof cfg, "%s/k.yaml", d);
  snprintf(db, sizeof db, "%s/k.db", d);
  pid_t sg = start_run_as(cfg, db, "transport: mpi\n", name, sizeof name);
  CHECK_MSG(sg > 0 && name[0], "the run did not get going");
  CHECK_MSG(cluster_procs(name) >= 3, "mpirun's processes do not carry the cluster's name");
  pid_t victim = ru_find_rank(sg, 2);
  if (victim <= 0) kill(sg, SIGKILL), waitpid(sg, NULL, 0);
  CHECK_MSG(victim > 0, "rank 2 not found");
  /* mpirun hands its --mca settings to the ranks as OMPI_MCA_ variables:
   * the TCP BTL sends a 1 MiB segment eagerly, runs without put and with
   * its progress thread (without them, 1 Gbit/s links carried 51-96 %) */
  int no_put = env_has(victim, "OMPI_MCA_btl_tcp_flags=send,inplace,need-ack,need-csum");
  int thread = env_has(victim, "OMPI_MCA_btl_tcp_progress_thread=1");
  int eager = env_has(victim, "OMPI_MCA_btl_tcp_eager_limit=1114112");
  CHECK_EQ_INT(kill(victim, SIGKILL), 0);
  CHECK_MSG(no_put, "rank 2 (pid %d) runs without btl_tcp_flags=send,inplace,need-ack,need-csum",
            (int)victim);
  CHECK_MSG(thread, "rank 2 (pid %d) runs without btl_tcp_progress_thread=1", (int)victim);
  CHECK_MSG(eager, "rank 2 (pid %d) runs without btl_tcp_eager_limit=1114112 (a 1 MiB ring "
            "segment with its header)", (int)victim);
  CHECK_EQ_INT(ru_wait_exit_code(sg, 40), 1);
  char *err = ru_db_text(db, "SELECT error FROM runs WHERE status = 'failed'");
  CHECK_MSG(err && strstr(err, "rank 2"), "error: %s", err ? err : "(none)");
  free(err);
  CHECK_MSG(cluster_gone(name, why, sizeof why), "cluster '%s' left: %s", name, why);
  double t0 = sg_now();
  while (cluster_procs(name) > 0 && sg_now() - t0 < 10) sched_yield();
  CHECK_MSG(cluster_procs(name) == 0, "%d processes of cluster %s left", cluster_procs(name), name);
}

TEST(a_killed_harness_leaves_its_cluster_to_the_next_run) {
  if (!tc_root_or_skip("a_killed_harness_leaves_its_cluster_to_the_next_run")) return;
  const char *d = ru_scratch("clharn");
  CHECK(d);
  char cfg[128], db[128], small[128], name[32], why[160], ns[64];
  snprintf(cfg, sizeof cfg, "%s/h.yaml", d);
  snprintf(db, sizeof db, "%s/h.db", d);
  snprintf(small, sizeof small, "%s/small.yaml", d);
  pid_t sg = start_long_run(cfg, db, name, sizeof name);
  CHECK_MSG(sg > 0 && name[0], "the run did not get going");
  CHECK_EQ_INT(kill(sg, SIGKILL), 0);
  CHECK_EQ_INT(ru_wait_exit_code(sg, 10), 128 + SIGKILL);
  /* nothing removed it: the harness had no chance */
  snprintf(ns, sizeof ns, "sgc-%s-h0", name);
  CHECK_MSG(tc_ns_exists(ns), "%s is gone before any sweep", ns);
  /* any next run (here one process, no cluster) sweeps it first */
  CHECK_OK(ru_write_train_config(small, "after", "local", NULL, "", 1, 1));
  CHECK_EQ_INT(ru_sgdlab_run(small, db), 0);
  CHECK_MSG(cluster_gone(name, why, sizeof why), "cluster '%s' left: %s", name, why);
}

/* ---- refused without the capability ------------------------------------------- */

TEST(without_cap_net_admin_the_run_is_refused_before_anything) {
  if (!tc_root_or_skip("without_cap_net_admin_the_run_is_refused_before_anything")) return;
  const char *d = ru_scratch("clcap");
  CHECK(d);
  char cfg[128], db[128], out[128], text[1024];
  snprintf(cfg, sizeof cfg, "%s/c.yaml", d);
  snprintf(db, sizeof db, "%s/c.db", d);
  snprintf(out, sizeof out, "%s/out", d);
  CHECK_OK(ru_write_train_config(cfg, "cap", "allreduce", CLUSTER_5, "", 2, 10));
  pid_t p = fork();
  CHECK(p >= 0);
  if (p == 0) { /* root, but CAP_NET_ADMIN gone from the bounding set: exec drops it */
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || prctl(PR_CAPBSET_DROP, 12 /* CAP_NET_ADMIN */, 0, 0, 0) < 0) _exit(120);
    dup2(fd, 1), dup2(fd, 2);
    execl(ru_sgdlab(), "sgdlab", "run", cfg, "--db", db, (char *)NULL);
    _exit(121);
  }
  CHECK_EQ_INT(ru_wait_exit_code(p, 30), 2);
  char *got = ru_slurp(out, sizeof text);
  CHECK(got);
  snprintf(text, sizeof text, "%s", got);
  free(got);
  fprintf(stderr, "  refused: %s", text);
  CHECK_STR_CONTAINS(text, "the emulated cluster needs root");
  CHECK_STR_CONTAINS(text, "lacks CAP_NET_ADMIN");
  CHECK_MSG(strchr(text, '\n') == text + strlen(text) - 1, "not one line: %s", text);
  CHECK_MSG(access(db, F_OK) != 0, "the results db was created"); /* refused before it */
}
