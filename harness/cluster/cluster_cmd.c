/* cluster_cmd.c - `sgdlab cluster up|status|exec|down|sweep`: the emulated
 * cluster (cluster.h) by hand. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"

static const char USAGE[] =
    "usage: sgdlab cluster up --hosts N --link RATE[,RATE...] [--loss F[,F...]] [--name NAME]\n"
    "                         [--queue MS] [--owner PID] [--slurm] [--ssh]\n"
    "       sgdlab cluster status [NAME]\n"
    "       sgdlab cluster exec HOST [--] CMD [ARG...]\n"
    "       sgdlab cluster down NAME... | --all\n"
    "       sgdlab cluster sweep\n"
    "\n"
    "An emulated cluster in this machine: one network namespace per host, joined\n"
    "by a bridge through links rate-limited in both directions (tc tbf), with\n"
    "optional packet loss (nftables).  Needs root.  docs/cluster.md has the details.\n"
    "\n"
    "  up      create a cluster that stays until `down`; prints its hosts\n"
    "  status  clusters, hosts, addresses, link rates (configured and as tc\n"
    "          reports them) and bytes per link direction\n"
    "  exec    run CMD inside host HOST's network namespace (no shell)\n"
    "  down    remove clusters (namespaces, links, rules, state)\n"
    "  sweep   remove what clusters of processes that are gone left behind\n"
    "\n"
    "sgdlab cluster COMMAND --help shows one command's options.\n";

static const char USAGE_UP[] =
    "usage: sgdlab cluster up --hosts N --link RATE[,RATE...] [--loss F[,F...]] [--name NAME]\n"
    "                         [--queue MS] [--owner PID] [--slurm] [--ssh]\n"
    "\n"
    "Create a cluster of N hosts (1..250) that stays until `sgdlab cluster down`\n"
    "(or, with --owner, until its owner has ended and a sweep runs).\n"
    "  --hosts N     number of hosts\n"
    "  --link RATE   link rate of every host (1gbit, 200mbit, 10gbit; units bit,\n"
    "                kbit, mbit, gbit, tbit), or one rate per host: 1gbit,100mbit,...\n"
    "  --loss F      fraction of packets dropped in each direction of a host's\n"
    "                link (0.01 or 1%), or one per host; needs nft\n"
    "  --name NAME   1-8 of a-z 0-9 (default: random)\n"
    "  --queue MS    how long a packet may wait in a link's queue, 1..1000 ms\n"
    "                (default 20: shallow, drops under incast; 200: no drops)\n"
    "  --owner PID   the cluster belongs to process PID (pid and start time)\n"
    "                instead of staying until `down`: once PID has ended, the\n"
    "                next sweep (`cluster sweep`, `cluster up`, a run on a\n"
    "                cluster) removes it and its daemons\n"
    "  --slurm       also run Slurm on it: munged, slurmctld on h0, one slurmd per\n"
    "                host (node hI); waits until every node is idle.  Clients\n"
    "                (sinfo, srun, sbatch) run on a host: sgdlab cluster exec\n"
    "                NAME/h0 -- sbatch ... (exec sets SLURM_CONF)\n"
    "  --ssh         also run sshd on every host (its address, port 22) with a host\n"
    "                key and a user key made for the cluster; writes ssh_config\n"
    "                (ssh -F) and a hostfile for hosts:/hostfile: runs\n"
    "Prints each host's name, address, namespace and interface.\n";

static const char USAGE_STATUS[] =
    "usage: sgdlab cluster status [NAME]\n"
    "\n"
    "Every cluster (or NAME): owner, subnet, and per host its address, namespace,\n"
    "link rate as configured and as tc reports it, loss, and the bytes tc counted\n"
    "in each direction (host->bridge on the host's end, bridge->host on the\n"
    "bridge's end) with the packets tbf dropped.\n";

static const char USAGE_EXEC[] =
    "usage: sgdlab cluster exec HOST [--] CMD [ARG...]\n"
    "\n"
    "Run CMD (looked up on PATH, no shell) in the network namespace of HOST:\n"
    "  NAME/hI or NAME/I   host I of cluster NAME\n"
    "  hI or I             host I of the only cluster\n"
    "  198.18.S.H          the host with this address\n"
    "Exit status: CMD's; 127 when CMD cannot be run, 2 when HOST is unknown.\n";

static const char USAGE_DOWN[] =
    "usage: sgdlab cluster down NAME... | --all\n"
    "\n"
    "Remove the named clusters, or every cluster (--all, which also sweeps\n"
    "leftovers).\n";

static const char USAGE_SWEEP[] =
    "usage: sgdlab cluster sweep\n"
    "\n"
    "Remove every sgc- namespace whose cluster has no state or whose owning\n"
    "process is gone, and such states.  Persistent clusters (`up`) stay.\n";

static int wants_help(int argc, char **argv, const char *text) {
  for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      fputs(text, stdout);
      return 1;
    }
  return 0;
}

static int fail(const char *cmd, int code) {
  fprintf(stderr, "sgdlab cluster %s: %s\n", cmd, sg_err_msg());
  return code;
}

/* ---- up ---------------------------------------------------------------------- */

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

static void catch_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal; /* no SA_RESTART: waits return EINTR */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
}

static void print_hosts(const sg_cluster_t *cl) {
  const sg_cluster_desc_t *d = sg_cluster_desc(cl);
  printf("cluster %s: %d host%s on %s, bridge in namespace %s\n", sg_cluster_name(cl), d->nhosts,
         d->nhosts == 1 ? "" : "s", sg_cluster_subnet(cl), sg_cluster_bridge_ns(cl));
  printf("  %-5s %-15s %-16s %-15s %-9s %s\n", "host", "address", "namespace", "interface", "link",
         "loss");
  for (int h = 0; h < d->nhosts; h++) {
    char rate[32], hn[16];
    sg_cluster_format_rate(d->rate_bps[h], rate, sizeof rate);
    snprintf(hn, sizeof hn, "h%d", h);
    printf("  %-5s %-15s %-16s %-15s %-9s %g\n", hn, sg_cluster_host_addr(cl, h),
           sg_cluster_host_ns(cl, h), sg_cluster_host_ifname(cl, h), rate, d->loss[h]);
  }
}

static int g_slurm, g_ssh; /* up --slurm, --ssh */
static pid_t g_owner;      /* up --owner; 0: persistent */
#define SSH_UP_TIMEOUT_S 30.0
#define SLURM_UP_TIMEOUT_S 60.0

static int parse_up(int argc, char **argv, sg_cluster_desc_t *d) {
  const char *links = NULL, *loss = NULL, *name = NULL;
  long hosts = -1, queue = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--slurm") || !strcmp(a, "--ssh")) {
      *(!strcmp(a, "--ssh") ? &g_ssh : &g_slurm) = 1;
      continue;
    }
    if (strcmp(a, "--hosts") && strcmp(a, "--link") && strcmp(a, "--loss") && strcmp(a, "--name") &&
        strcmp(a, "--queue") && strcmp(a, "--owner"))
      return sg_err_set(SG_EINVAL, "unknown argument '%s' (sgdlab cluster up --help)", a);
    if (!v) return sg_err_set(SG_EINVAL, "%s needs a value", a);
    i++;
    if (!strcmp(a, "--hosts")) {
      char *end;
      errno = 0;
      hosts = strtol(v, &end, 10);
      if (end == v || *end || errno) return sg_err_set(SG_EINVAL, "--hosts '%s': not a number", v);
      if (hosts < 1 || hosts > SG_CLUSTER_MAX_HOSTS)
        return sg_err_set(SG_ERANGE, "--hosts %s: must be 1 .. %d", v, SG_CLUSTER_MAX_HOSTS);
    } else if (!strcmp(a, "--queue")) {
      char *end;
      errno = 0;
      queue = strtol(v, &end, 10);
      if (end == v || *end || errno || queue < SG_CLUSTER_QUEUE_MS_MIN || queue > SG_CLUSTER_QUEUE_MS_MAX)
        return sg_err_set(SG_ERANGE, "--queue '%s': milliseconds, %d .. %d", v,
                          SG_CLUSTER_QUEUE_MS_MIN, SG_CLUSTER_QUEUE_MS_MAX);
    } else if (!strcmp(a, "--owner")) {
      char *end;
      errno = 0;
      long pid = strtol(v, &end, 10);
      if (end == v || *end || errno || pid < 1 || pid > 0x3fffffff)
        return sg_err_set(SG_EINVAL, "--owner '%s': a process id", v);
      g_owner = (pid_t)pid;
    } else if (!strcmp(a, "--link")) links = v;
    else if (!strcmp(a, "--loss")) loss = v;
    else name = v;
  }
  if (hosts < 0) return sg_err_set(SG_EINVAL, "--hosts N is required");
  SG_CHECK(sg_cluster_desc_parse(d, (int)hosts, links, loss));
  d->queue_ms = (int)queue;
  if (name) {
    SG_CHECK(sg_cluster_name_check(name));
    snprintf(d->name, sizeof d->name, "%s", name);
  }
  return SG_OK;
}

static int cmd_up(int argc, char **argv) {
  static sg_cluster_desc_t d; /* large: not on the stack */
  sg_cluster_t *cl = NULL;
  if (wants_help(argc, argv, USAGE_UP)) return 0;
  if (parse_up(argc, argv, &d) < 0) return fail("up", 2);
  if (sg_cluster_check_privilege() < 0) return fail("up", 2);
  if (g_owner && sg_cluster_owner_check(g_owner) < 0) return fail("up", 2);
  catch_signals();
  d.stop = &g_stop;
  double t0 = sg_now();
  int rc = sg_cluster_up(&cl, &d);
  if (rc == SG_OK && !g_owner) rc = sg_cluster_persist(cl);
  double t_net = sg_now() - t0;
  if (rc == SG_OK && g_slurm && !g_stop) rc = sg_cluster_slurm_up(cl, SLURM_UP_TIMEOUT_S);
  if (rc == SG_OK && g_ssh && !g_stop) rc = sg_cluster_ssh_up(cl, SSH_UP_TIMEOUT_S);
  /* --owner: handed over once its daemons run.  Until then the cluster is
   * this process's: an owner that ended while they started would let a
   * sweep beside us stop the recorded ones and remove their directory
   * while we start the next, which then outlives everything (its record
   * gone with the directory); this way the hand-over fails, and we remove
   * what we made. */
  if (rc == SG_OK && g_owner && !g_stop) rc = sg_cluster_hand_over(cl, g_owner);
  if (rc == SG_OK && g_stop) /* the signal came after the last check */
    rc = sg_err_set(SG_EINTERRUPTED, "interrupted");
  if (rc < 0) {
    if (cl) sg_cluster_down(&cl);
    if (rc == SG_EINTERRUPTED)
      fprintf(stderr,
              "sgdlab cluster up: interrupted by signal %d; everything it created was removed\n",
              (int)g_stop);
    else fail("up", 1);
    return 1;
  }
  print_hosts(cl);
  const char *nm = sg_cluster_name(cl);
  if (g_slurm) {
    char conf[256];
    sg_cluster_slurm_conf(nm, conf, sizeof conf);
    printf("slurm: munged, slurmctld on h0, slurmd on h0..h%d, every node idle; "
           "SLURM_CONF=%s\n", d.nhosts - 1, conf);
  }
  if (g_ssh) {
    char conf[256], hf[256];
    sg_cluster_ssh_config(nm, conf, sizeof conf);
    sg_cluster_ssh_hostfile(nm, hf, sizeof hf);
    printf("ssh: sshd on h0..h%d (port 22 of each address), every host accepts the cluster's "
           "key; ssh_config %s hostfile %s\n", d.nhosts - 1, conf, hf);
  }
  if (g_owner)
    printf("owner pid %d: once it has ended, the next sweep removes the cluster\n", (int)g_owner);
  printf("up in %.2f s (network %.2f s); sgdlab cluster exec %s/h0 -- CMD runs CMD on h0; "
         "sgdlab cluster down %s removes it\n", sg_now() - t0, t_net, nm, nm);
  sg_cluster_close(&cl);
  return 0;
}

/* ---- status ------------------------------------------------------------------- */

static void status_one(const sg_cluster_t *cl) {
  const sg_cluster_desc_t *d = sg_cluster_desc(cl);
  char owner[64];
  sg_cluster_owner(cl, owner, sizeof owner);
  printf("cluster %s: %d host%s on %s, owner %s, bridge in namespace %s\n", sg_cluster_name(cl),
         d->nhosts, d->nhosts == 1 ? "" : "s", sg_cluster_subnet(cl), owner,
         sg_cluster_bridge_ns(cl));
  printf("  %-5s %-15s %-16s %-9s %-9s %-6s %-24s %s\n", "host", "address", "namespace", "link",
         "tc", "loss", "host->bridge B (drops)", "bridge->host B (drops)");
  for (int h = 0; h < d->nhosts; h++) {
    char rate[32], hn[16], up[48] = "?", down[48] = "?";
    sg_cluster_link_t s;
    sg_cluster_format_rate(d->rate_bps[h], rate, sizeof rate);
    snprintf(hn, sizeof hn, "h%d", h);
    int ok = sg_cluster_host_ns_fd(cl, h) >= 0 && sg_cluster_link_stats(cl, h, &s) == SG_OK;
    if (ok) {
      snprintf(up, sizeof up, "%llu (%llu)", (unsigned long long)s.host_tx,
               (unsigned long long)s.host_drops);
      snprintf(down, sizeof down, "%llu (%llu)", (unsigned long long)s.bridge_tx,
               (unsigned long long)s.bridge_drops);
    }
    printf("  %-5s %-15s %-16s %-9s %-9s %-6g %-24s %s\n", hn, sg_cluster_host_addr(cl, h),
           sg_cluster_host_ns(cl, h), rate, ok ? (s.tc_rate[0] ? s.tc_rate : "none") : "missing",
           d->loss[h], up, down);
  }
}

static int cmd_status(int argc, char **argv) {
  if (wants_help(argc, argv, USAGE_STATUS)) return 0;
  if (argc > 2) {
    fprintf(stderr, "sgdlab cluster status: unexpected argument '%s'\n", argv[2]);
    return 2;
  }
  if (sg_cluster_check_privilege() < 0) return fail("status", 2);
  char **names = NULL;
  int n = 0, rc = 0;
  if (argc == 2) {
    if (sg_cluster_name_check(argv[1]) < 0) return fail("status", 2);
    names = malloc(sizeof *names);
    if (!names || !(names[0] = strdup(argv[1]))) return free(names), fail("status", 1);
    n = 1;
  } else if (sg_cluster_list(&names, &n) < 0) return fail("status", 1);
  if (n == 0) printf("no clusters\n");
  for (int i = 0; i < n; i++) {
    sg_cluster_t *cl;
    if (sg_cluster_open(&cl, names[i]) < 0) rc = fail("status", 1);
    else {
      status_one(cl);
      sg_cluster_close(&cl);
    }
    free(names[i]);
  }
  free(names);
  return rc;
}

/* ---- exec --------------------------------------------------------------------- */

/* "I" or "hI" into *host; 0 or -1. */
static int parse_host_index(const char *s, int *host) {
  if (*s == 'h') s++;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < 0 || v >= SG_CLUSTER_MAX_HOSTS) return -1;
  *host = (int)v;
  return 0;
}

static int resolve_host(const char *spec, char *name, size_t cap, int *host) {
  const char *slash = strchr(spec, '/');
  if (slash) {
    snprintf(name, cap, "%.*s", (int)(slash - spec), spec);
    if (parse_host_index(slash + 1, host) < 0)
      return sg_err_set(SG_EINVAL, "host '%s': expected NAME/hI", spec);
    return SG_OK;
  }
  if (parse_host_index(spec, host) < 0) return sg_cluster_find_addr(spec, name, cap, host);
  char **names;
  int n;
  SG_CHECK(sg_cluster_list(&names, &n));
  if (n == 1) snprintf(name, cap, "%s", names[0]);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  if (n == 0) return sg_err_set(SG_ENOTFOUND, "host '%s': no cluster exists", spec);
  if (n > 1)
    return sg_err_set(SG_EINVAL, "host '%s': %d clusters exist; say which (NAME/%s)", spec, n, spec);
  return SG_OK;
}

static int cmd_exec(int argc, char **argv) {
  if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
    fputs(USAGE_EXEC, stdout);
    return 0;
  }
  int c = argc >= 3 && !strcmp(argv[2], "--") ? 3 : 2;
  if (argc <= c) {
    fprintf(stderr, "sgdlab cluster exec: usage: sgdlab cluster exec HOST [--] CMD [ARG...]\n");
    return 2;
  }
  if (sg_cluster_check_privilege() < 0) return fail("exec", 2);
  char name[64];
  int host;
  sg_cluster_t *cl;
  if (resolve_host(argv[1], name, sizeof name, &host) < 0 || sg_cluster_open(&cl, name) < 0)
    return fail("exec", 2);
  int rc = sg_cluster_enter(cl, host);
  sg_cluster_close(&cl);
  if (sg_cluster_has_slurm(name)) { /* clients find the cluster's slurmctld */
    char conf[256];
    sg_cluster_slurm_conf(name, conf, sizeof conf);
    setenv("SLURM_CONF", conf, 1);
  }
  if (rc < 0) return fail("exec", 2);
  execvp(argv[c], argv + c);
  fprintf(stderr, "sgdlab cluster exec: %s: %s\n", argv[c], strerror(errno));
  return 127;
}

/* ---- down, sweep --------------------------------------------------------------- */

static int down_one(const char *name) {
  sg_cluster_t *cl;
  if (sg_cluster_open(&cl, name) < 0 || sg_cluster_down(&cl) < 0) return fail("down", 1);
  printf("cluster %s removed\n", name);
  return 0;
}

static int cmd_down(int argc, char **argv) {
  if (wants_help(argc, argv, USAGE_DOWN)) return 0;
  int all = argc == 2 && !strcmp(argv[1], "--all");
  if (argc < 2 || (!all && argv[1][0] == '-')) {
    fprintf(stderr, "sgdlab cluster down: usage: sgdlab cluster down NAME... | --all\n");
    return 2;
  }
  for (int i = 1; !all && i < argc; i++)
    if (sg_cluster_name_check(argv[i]) < 0) return fail("down", 2);
  if (sg_cluster_check_privilege() < 0) return fail("down", 2);
  int rc = 0;
  if (!all) {
    for (int i = 1; i < argc; i++) rc |= down_one(argv[i]);
    return rc;
  }
  char **names;
  int n;
  if (sg_cluster_list(&names, &n) < 0) return fail("down", 1);
  for (int i = 0; i < n; i++) {
    rc |= down_one(names[i]);
    free(names[i]);
  }
  free(names);
  int swept;
  if (sg_cluster_sweep(&swept) < 0) return fail("down", 1);
  if (swept) printf("%d leftover namespace%s removed\n", swept, swept == 1 ? "" : "s");
  return rc;
}

static int cmd_sweep(int argc, char **argv) {
  if (wants_help(argc, argv, USAGE_SWEEP)) return 0;
  if (argc > 1) {
    fprintf(stderr, "sgdlab cluster sweep: unexpected argument '%s'\n", argv[1]);
    return 2;
  }
  if (sg_cluster_check_privilege() < 0) return fail("sweep", 2);
  int swept;
  if (sg_cluster_sweep(&swept) < 0) return fail("sweep", 1);
  printf("%d leftover namespace%s removed\n", swept, swept == 1 ? "" : "s");
  return 0;
}

int sg_cmd_cluster(int argc, char **argv) {
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {{"up", cmd_up},     {"status", cmd_status}, {"exec", cmd_exec},
              {"down", cmd_down}, {"sweep", cmd_sweep}};
  if (argc < 2) {
    fputs(USAGE, stderr);
    return 2;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
    fputs(USAGE, stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "sgdlab cluster: unknown command '%s' (sgdlab cluster --help lists them)\n",
          argv[1]);
  return 2;
}
