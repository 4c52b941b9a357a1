/* cluster.c - the emulated cluster's topology: description, commands run
 * in namespaces, up and down, entering a host (see cluster.h). */
#define _GNU_SOURCE /* setns */
#include "cluster_impl.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "proc.h"

/* ---- description ---------------------------------------------------------- */

int sg_cluster_parse_rate(const char *s, const char *what, uint64_t *bps) {
  static const struct {
    const char *unit;
    double mul;
  } units[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v <= 0 || isspace((unsigned char)*s))
    return sg_err_set(SG_EINVAL, "%s '%s': not a rate (a number and a unit, e.g. 1gbit, 200mbit)",
                      what, s);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].unit) != 0) continue;
    double r = v * units[i].mul;
    if (r < (double)SG_CLUSTER_RATE_MIN || r > (double)SG_CLUSTER_RATE_MAX)
      return sg_err_set(SG_ERANGE, "%s '%s': out of range (1mbit .. 100gbit)", what, s);
    *bps = (uint64_t)llround(r);
    return SG_OK;
  }
  return sg_err_set(SG_EINVAL,
                    "%s '%s': unknown unit '%s' (bit, kbit, mbit, gbit, tbit; e.g. 200mbit)", what,
                    s, end);
}

void sg_cluster_format_rate(uint64_t bps, char *out, size_t cap) {
  static const char *const names[] = {"bit", "Kbit", "Mbit", "Gbit"};
  double v = (double)bps;
  int u = 0;
  while (u < 3 && v >= 1000.0) v /= 1000.0, u++;
  snprintf(out, cap, "%.4g%s", v, names[u]);
}

int sg_cluster_parse_loss(const char *s, const char *what, double *f) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end != s && *end == '%' && end[1] == '\0') v /= 100.0, end++;
  if (end == s || *end || errno || !isfinite(v) || isspace((unsigned char)*s))
    return sg_err_set(SG_EINVAL, "%s '%s': not a fraction (e.g. 0.01 or 1%%)", what, s);
  if (v < 0 || v >= 1) return sg_err_set(SG_ERANGE, "%s '%s': must be in [0, 1)", what, s);
  *f = v;
  return SG_OK;
}

/* Split "a,b,c" into at most max items; the count, or -1 when too many. */
static int split_list(char *s, char **items, int max) {
  int n = 0;
  for (char *tok = s;; n++) {
    if (n == max) return -1;
    items[n] = tok;
    char *c = strchr(tok, ',');
    if (!c) return n + 1;
    *c = '\0';
    tok = c + 1;
  }
}

/* One value for every host, or exactly one per host. */
static int parse_per_host(const char *list, const char *what, int nhosts, int is_rate,
                          sg_cluster_desc_t *d) {
  char *copy = strdup(list);
  char **items = calloc(SG_CLUSTER_MAX_HOSTS + 1, sizeof *items);
  int rc = SG_OK;
  if (!copy || !items) {
    rc = SG_ENOMEM;
    goto fail;
  }
  int n = split_list(copy, items, SG_CLUSTER_MAX_HOSTS + 1);
  if (n != 1 && n != nhosts) {
    rc = sg_err_set(SG_EINVAL, "%s '%s': %s values for %d hosts (give one for all, or one per host)",
                    what, list, n < 0 ? "too many" : "wrong number of", nhosts);
    goto fail;
  }
  for (int h = 0; h < nhosts; h++) {
    const char *item = items[n == 1 ? 0 : h];
    if (is_rate) SG_TRY(sg_cluster_parse_rate(item, what, &d->rate_bps[h]));
    else SG_TRY(sg_cluster_parse_loss(item, what, &d->loss[h]));
  }
fail:
  free(items);
  free(copy);
  return rc;
}

int sg_cluster_desc_parse(sg_cluster_desc_t *d, int nhosts, const char *links, const char *loss) {
  memset(d, 0, sizeof *d);
  if (nhosts < 1 || nhosts > SG_CLUSTER_MAX_HOSTS)
    return sg_err_set(SG_ERANGE, "--hosts %d: must be 1 .. %d", nhosts, SG_CLUSTER_MAX_HOSTS);
  d->nhosts = nhosts;
  if (!links || !*links) return sg_err_set(SG_EINVAL, "--link: a rate is required (e.g. 1gbit)");
  SG_CHECK(parse_per_host(links, "--link", nhosts, 1, d));
  if (loss && *loss) SG_CHECK(parse_per_host(loss, "--loss", nhosts, 0, d));
  return SG_OK;
}

int sg_cluster_name_check(const char *name) {
  size_t n = strlen(name);
  int ok = n >= 1 && n <= SG_CLUSTER_NAME_MAX;
  for (size_t i = 0; ok && i < n; i++)
    ok = (name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9');
  if (!ok)
    return sg_err_set(SG_EINVAL, "cluster name '%s': 1 to %d characters of a-z and 0-9", name,
                      SG_CLUSTER_NAME_MAX);
  return SG_OK;
}

/* tbf, as a link that gives every frame its serialization time:
 *   - the rate's bucket holds 2 ms at the link rate, at least 64 KiB; it
 *     sets the long-run rate and lets a late timer catch up;
 *   - the peak rate, 3 % above the rate, with a bucket of 80 us at the
 *     rate (at least 3 frames: a timer that fires up to two frames late
 *     costs the link nothing), paces every packet: after idle a message
 *     leaves at the peak rate instead of as a burst of the rate's bucket;
 *   - the link's devices build GSO packets of at most the peak bucket's
 *     whole frames, so tbf does not split them in software.
 * Queued packets may wait SG_CLUSTER_TBF_LATENCY_MS.  docs/cluster.md has
 * the measurements. */
uint64_t sg_cluster_tbf_burst(uint64_t bps) {
  uint64_t b = bps / 8 / 500;
  return b < 65536 ? 65536 : b;
}

uint64_t sg_cluster_tbf_peakrate(uint64_t bps) { return bps + bps * 3 / 100; }

uint64_t sg_cluster_tbf_mtu(uint64_t bps) {
  uint64_t b = bps / 8 / 12500; /* 80 us */
  return b < 3 * SG_CLUSTER_FRAME ? 3 * SG_CLUSTER_FRAME : b;
}

unsigned sg_cluster_gso_max_segs(uint64_t bps) {
  return (unsigned)(sg_cluster_tbf_mtu(bps) / SG_CLUSTER_FRAME);
}

/* ---- names -------------------------------------------------------------------- */

void sgc_fill_names(sg_cluster_t *cl) {
  const char *nm = cl->d.name;
  unsigned char hi = (unsigned char)(18 + cl->subnet / 256), mid = (unsigned char)(cl->subnet % 256);
  snprintf(cl->subnet_str, sizeof cl->subnet_str, "198.%hhu.%hhu.0/24", hi, mid);
  snprintf(cl->br_ns, sizeof cl->br_ns, SG_CLUSTER_NS_PREFIX "%s-br", nm);
  snprintf(cl->br_if, sizeof cl->br_if, SG_CLUSTER_IF_PREFIX "%sbr", nm);
  for (int h = 0; h < cl->d.nhosts; h++) {
    snprintf(cl->addr[h], sizeof cl->addr[h], "198.%hhu.%hhu.%hhu", hi, mid,
             (unsigned char)(h + 1));
    snprintf(cl->ns[h], sizeof cl->ns[h], SG_CLUSTER_NS_PREFIX "%s-h%d", nm, h);
    snprintf(cl->ifname[h], sizeof cl->ifname[h], SG_CLUSTER_IF_PREFIX "%se%d", nm, h);
    snprintf(cl->peer[h], sizeof cl->peer[h], SG_CLUSTER_IF_PREFIX "%sp%d", nm, h);
  }
  for (int h = 0; h < SG_CLUSTER_MAX_HOSTS; h++) cl->ns_fd[h] = -1;
}

static void random_name(char *out) {
  static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  unsigned char r[6];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) /* never expected; still unique-ish */
    for (size_t i = 0; i < sizeof r; i++) r[i] = (unsigned char)(getpid() >> (i * 3) ^ (int)i * 37);
  for (size_t i = 0; i < sizeof r; i++) out[i] = abc[r[i] % 36];
  out[sizeof r] = '\0';
}

/* ---- running ip, tc, nft ------------------------------------------------------ */

int sgc_find_prog(const char *prog, char *out, size_t cap) {
  const char *path = getenv("PATH");
  char dirs[4096];
  snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin:/usr/bin:/bin", path ? path : "");
  for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(out, cap, "%s/%s", d, prog);
    if (access(out, X_OK) == 0) return SG_OK;
  }
  return sg_err_set(SG_ENOTFOUND, "%s: not found on PATH nor in /usr/sbin, /sbin", prog);
}

/* The command line for a message, cut at 120 characters (nft's scripts
 * are long). */
static void describe_cmd(char *const *argv, char *out, size_t cap) {
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; argv[i] && n + 1 < cap; i++)
    n += (size_t)snprintf(out + n, cap - n, "%s%s", i ? " " : "", argv[i]);
  if (n > 120 && cap > 124) snprintf(out + 117, cap - 117, "...");
}

static void child_exec(const char *prog, char *const *argv, int ns_fd, int out_fd) {
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  if (ns_fd >= 0 && setns(ns_fd, CLONE_NEWNET) < 0) _exit(126);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  execv(prog, argv);
  _exit(127);
}

/* Read the child's output until EOF or the deadline; kill it at the
 * deadline.  Returns the wait status, or -1 when it had to be killed. */
static int collect(pid_t pid, int fd, char *out, size_t cap, double deadline) {
  size_t n = 0;
  char sink[1024];
  int killed = 0;
  for (;;) {
    int left_ms = (int)((deadline - sg_now()) * 1000);
    if (left_ms <= 0) {
      kill(pid, SIGKILL);
      killed = 1;
      break;
    }
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, left_ms) < 0 && errno != EINTR) break;
    int room = out && n + 1 < cap;
    ssize_t r = read(fd, room ? out + n : sink, room ? cap - 1 - n : sizeof sink);
    if (r == 0) break;
    if (r < 0 && errno != EINTR && errno != EAGAIN) break;
    if (r > 0 && room) n += (size_t)r;
  }
  if (out && cap) out[n] = '\0';
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return killed ? -1 : st;
}

int sgc_run(char *const *argv, int ns_fd, char *out, size_t cap) {
  char prog[4096], buf[2048], cmd[512];
  SG_CHECK(sgc_find_prog(argv[0], prog, sizeof prog));
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) return sg_err_set(SG_EIO, "pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return sg_err_set(SG_EIO, "fork: %s", strerror(errno));
  }
  if (pid == 0) child_exec(prog, argv, ns_fd, p[1]);
  close(p[1]);
  char *o = out ? out : buf;
  size_t ocap = out ? cap : sizeof buf;
  int st = collect(pid, p[0], o, ocap, sg_now() + 15.0);
  close(p[0]);
  if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return SG_OK;
  describe_cmd(argv, cmd, sizeof cmd);
  if (st < 0) return sg_err_set(SG_ETIMEOUT, "`%s` did not finish within 15 s", cmd);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 126)
    return sg_err_set(SG_EIO, "`%s`: cannot enter the namespace", cmd);
  int line = (int)strcspn(o, "\n");
  if (line) return sg_err_set(SG_EIO, "`%s` failed: %.*s", cmd, line, o);
  if (WIFSIGNALED(st))
    return sg_err_set(SG_EIO, "`%s` was killed by signal %d", cmd, WTERMSIG(st));
  return sg_err_set(SG_EIO, "`%s` exited %d without a message", cmd, WEXITSTATUS(st));
}

int sg_cluster_run(char *const *argv, char *out, size_t cap) {
  return sgc_run(argv, -1, out, cap);
}

int sgc_ns_delete(const char *ns) {
  char path[128];
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  if (access(path, F_OK) != 0) return SG_OK;
  char *argv[] = {"ip", "netns", "delete", (char *)ns, NULL};
  return sgc_run(argv, -1, NULL, 0);
}

/* ---- up ------------------------------------------------------------------------ */

#define RUN(...)                                     \
  do {                                               \
    char *argv_[] = {__VA_ARGS__, NULL};             \
    SG_CHECK(sgc_run(argv_, -1, NULL, 0));           \
  } while (0)

static int stopped(const sg_cluster_t *cl) {
  if (cl->d.stop && *cl->d.stop)
    return sg_err_set(SG_EINTERRUPTED, "cluster %s: setup interrupted", cl->d.name);
  return SG_OK;
}

static int add_ns(sg_cluster_t *cl, const char *ns, int host) {
  RUN("ip", "netns", "add", (char *)ns);
  if (host < 0) cl->made_bridge = 1;
  else cl->made_host[host] = 1;
  RUN("ip", "-n", (char *)ns, "link", "set", "lo", "up");
  /* no IPv6 on the links made next (the loopback keeps ::1): no router
   * solicitations, DAD or MLD of the emulation's own, so the links carry
   * only what the hosts send */
  RUN("ip", "netns", "exec", (char *)ns, "sysctl", "-q", "-w",
      "net.ipv6.conf.default.disable_ipv6=1");
  return SG_OK;
}

static int add_tbf(const char *ns, const char *dev, uint64_t bps, int queue_ms) {
  char rate[32], burst[32], lat[16], peak[32], mtu[32], segs[16];
  snprintf(rate, sizeof rate, "%llubit", (unsigned long long)bps);
  snprintf(burst, sizeof burst, "%llub", (unsigned long long)sg_cluster_tbf_burst(bps));
  snprintf(lat, sizeof lat, "%dms", queue_ms > 0 ? queue_ms : SG_CLUSTER_TBF_LATENCY_MS);
  snprintf(peak, sizeof peak, "%llubit", (unsigned long long)sg_cluster_tbf_peakrate(bps));
  snprintf(mtu, sizeof mtu, "%llub", (unsigned long long)sg_cluster_tbf_mtu(bps));
  snprintf(segs, sizeof segs, "%u", sg_cluster_gso_max_segs(bps));
  RUN("ip", "-n", (char *)ns, "link", "set", "dev", (char *)dev, "gso_max_segs", segs);
  RUN("tc", "-n", (char *)ns, "qdisc", "add", "dev", (char *)dev, "root", "tbf", "rate", rate,
      "burst", burst, "latency", lat, "peakrate", peak, "mtu", mtu);
  return SG_OK;
}

/* nftables in the host's namespace, at its link device: drop `loss` of
 * the packets leaving (egress) and of those arriving (ingress).  At the
 * device, as on a lossy wire: the sender's socket sees no error (a drop in
 * the inet output hook would fail UDP sends with EPERM). */
static int add_loss(const sg_cluster_t *cl, int h) {
  char script[1024];
  long k = lround(cl->d.loss[h] * 1e6);
  const char *dev = cl->ifname[h];
  snprintf(script, sizeof script,
           "add table netdev sgdlab; "
           "add chain netdev sgdlab egress "
           "{ type filter hook egress device \"%s\" priority 0; policy accept; }; "
           "add chain netdev sgdlab ingress "
           "{ type filter hook ingress device \"%s\" priority 0; policy accept; }; "
           "add rule netdev sgdlab egress numgen random mod 1000000 < %ld counter drop; "
           "add rule netdev sgdlab ingress numgen random mod 1000000 < %ld counter drop",
           dev, dev, k, k);
  char *argv[] = {"nft", script, NULL};
  return sgc_run(argv, cl->ns_fd[h], NULL, 0);
}

static int up_bridge(sg_cluster_t *cl) {
  SG_CHECK(add_ns(cl, cl->br_ns, -1));
  RUN("ip", "-n", cl->br_ns, "link", "add", cl->br_if, "type", "bridge");
  RUN("ip", "-n", cl->br_ns, "link", "set", cl->br_if, "up");
  return SG_OK;
}

/* ---- two levels: rack bridges under the core bridge ---------------------------- */

/* Rack k's bridge, and its uplink's rack-side and core-side ends. */
static void rack_names(const sg_cluster_t *cl, int k, char br[24], char up[24], char core[24]) {
  snprintf(br, 24, SG_CLUSTER_IF_PREFIX "%sr%d", cl->d.name, k);
  snprintf(up, 24, SG_CLUSTER_IF_PREFIX "%su%d", cl->d.name, k);
  snprintf(core, 24, SG_CLUSTER_IF_PREFIX "%sc%d", cl->d.name, k);
}

int sg_cluster_nracks(const sg_cluster_t *cl) {
  return cl->d.rack > 0 ? (cl->d.nhosts + cl->d.rack - 1) / cl->d.rack : 0;
}

/* Every rack's bridge, joined to the core bridge by its shaped uplink. */
static int up_racks(sg_cluster_t *cl) {
  for (int k = 0; k < sg_cluster_nracks(cl); k++) {
    char br[24], up[24], core[24];
    SG_CHECK(stopped(cl));
    rack_names(cl, k, br, up, core);
    RUN("ip", "-n", cl->br_ns, "link", "add", br, "type", "bridge");
    RUN("ip", "-n", cl->br_ns, "link", "set", br, "up");
    RUN("ip", "-n", cl->br_ns, "link", "add", up, "type", "veth", "peer", "name", core);
    RUN("ip", "-n", cl->br_ns, "link", "set", up, "master", br, "up");
    RUN("ip", "-n", cl->br_ns, "link", "set", core, "master", cl->br_if, "up");
    if (cl->d.uplink_bps) {
      SG_CHECK(add_tbf(cl->br_ns, up, cl->d.uplink_bps, cl->d.queue_ms));
      SG_CHECK(add_tbf(cl->br_ns, core, cl->d.uplink_bps, cl->d.queue_ms));
    }
  }
  return SG_OK;
}

static int up_host(sg_cluster_t *cl, int h) {
  char cidr[48], path[128], master[24], up[24], core[24];
  char *ns = cl->ns[h], *ifn = cl->ifname[h], *peer = cl->peer[h];
  SG_CHECK(add_ns(cl, ns, h));
  snprintf(path, sizeof path, "/run/netns/%s", ns);
  if ((cl->ns_fd[h] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
    return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  RUN("ip", "-n", ns, "link", "add", ifn, "type", "veth", "peer", "name", peer, "netns", cl->br_ns);
  snprintf(cidr, sizeof cidr, "%s/24", cl->addr[h]);
  RUN("ip", "-n", ns, "addr", "add", cidr, "dev", ifn);
  if (cl->d.rack > 0) rack_names(cl, h / cl->d.rack, master, up, core);
  else snprintf(master, sizeof master, "%s", cl->br_if);
  RUN("ip", "-n", cl->br_ns, "link", "set", peer, "master", master, "up");
  RUN("ip", "-n", ns, "link", "set", ifn, "up");
  SG_CHECK(add_tbf(ns, ifn, cl->d.rate_bps[h], cl->d.queue_ms));
  SG_CHECK(add_tbf(cl->br_ns, peer, cl->d.rate_bps[h], cl->d.queue_ms));
  if (cl->d.loss[h] > 0) SG_CHECK(add_loss(cl, h));
  return SG_OK;
}

static int check_tools(const sg_cluster_desc_t *d) {
  char path[4096];
  SG_CHECK(sgc_find_prog("ip", path, sizeof path));
  SG_CHECK(sgc_find_prog("tc", path, sizeof path));
  for (int h = 0; h < d->nhosts; h++)
    if (d->loss[h] > 0 && sgc_find_prog("nft", path, sizeof path) < 0)
      return sg_err_set(SG_ENOTFOUND,
                        "--loss needs nft (Debian package nftables): not found on PATH");
  return SG_OK;
}

/* Under the lock: a unique name and subnet, and the state that claims
 * them, before anything is created. */
static int claim(sg_cluster_t *cl) {
  int rc = SG_OK, lk = sgc_lock();
  if (lk < 0) return lk;
  char path[256];
  if (cl->d.name[0]) {
    sgc_state_path(cl->d.name, path, sizeof path);
    if (access(path, F_OK) == 0) {
      rc = sg_err_set(SG_EINVAL, "cluster %s exists (sgdlab cluster down %s removes it)",
                      cl->d.name, cl->d.name);
      goto fail;
    }
  } else {
    do { /* 36^6 names: a clash is rare, and then only costs another draw */
      random_name(cl->d.name);
      sgc_state_path(cl->d.name, path, sizeof path);
    } while (access(path, F_OK) == 0);
  }
  SG_TRY(sgc_free_subnet(&cl->subnet));
  cl->owner = getpid();
  cl->owner_start = sg_proc_start(cl->owner);
  sgc_fill_names(cl);
  SG_TRY(sgc_state_write(cl));
fail:
  sgc_unlock(lk);
  return rc;
}

int sg_cluster_up(sg_cluster_t **out, const sg_cluster_desc_t *d) {
  int rc = SG_OK;
  *out = NULL;
  SG_CHECK(sg_cluster_check_privilege());
  if (d->nhosts < 1 || d->nhosts > SG_CLUSTER_MAX_HOSTS)
    return sg_err_set(SG_ERANGE, "cluster: %d hosts (1 .. %d)", d->nhosts, SG_CLUSTER_MAX_HOSTS);
  if (d->name[0]) SG_CHECK(sg_cluster_name_check(d->name));
  if (d->rack < 0 || d->rack > d->nhosts)
    return sg_err_set(SG_ERANGE, "cluster: racks of %d hosts for %d hosts", d->rack, d->nhosts);
  SG_CHECK(check_tools(d));
  SG_CHECK(sg_cluster_sweep(NULL));
  sg_cluster_t *cl = calloc(1, sizeof *cl);
  if (!cl) return SG_ENOMEM;
  for (int h = 0; h < SG_CLUSTER_MAX_HOSTS; h++) cl->ns_fd[h] = -1;
  cl->d = *d;
  SG_TRY(claim(cl));
  cl->created = 1; /* from here on, failure removes what was made */
  SG_TRY(stopped(cl));
  SG_TRY(up_bridge(cl));
  SG_TRY(up_racks(cl));
  for (int h = 0; h < cl->d.nhosts; h++) {
    SG_TRY(stopped(cl));
    if ((rc = up_host(cl, h)) < 0) {
      char msg[768];
      snprintf(msg, sizeof msg, "%s", sg_err_msg());
      sg_err_set(rc, "cluster %s host %d: %s", cl->d.name, h, msg);
      goto fail;
    }
  }
  SG_TRY(stopped(cl));
  *out = cl;
  return SG_OK;
fail:
  if (cl->created) sg_cluster_down(&cl); /* keeps the first error's message */
  else sg_cluster_close(&cl);
  return rc;
}

/* ---- down ---------------------------------------------------------------------- */

int sg_cluster_down(sg_cluster_t **pcl) {
  sg_cluster_t *cl = *pcl;
  if (!cl) return SG_OK;
  char first[512] = "";
  int rc = SG_OK;
  /* one pass over everything even when a step fails; the first failure
   * is reported (and a failure of up keeps its own message) */
  if (sg_err_msg()[0]) snprintf(first, sizeof first, "%s", sg_err_msg());
  { /* daemons first: they hold the hosts' namespaces */
    int r = sg_cluster_daemons_down(cl->d.name);
    if (r < 0 && rc == SG_OK) rc = r, snprintf(first, sizeof first, "%s", sg_err_msg());
  }
  for (int h = 0; h < cl->d.nhosts; h++) {
    if (cl->ns_fd[h] >= 0) close(cl->ns_fd[h]);
    cl->ns_fd[h] = -1;
    if (cl->created && !cl->made_host[h]) continue;
    int r = sgc_ns_delete(cl->ns[h]);
    if (r < 0 && rc == SG_OK) rc = r, snprintf(first, sizeof first, "%s", sg_err_msg());
    /* nothing of a host is on disk here: its daemons' temporary files were
     * in the run's own directory (rundir.h), which the run removes */
  }
  if (!cl->created || cl->made_bridge) {
    int r = sgc_ns_delete(cl->br_ns);
    if (r < 0 && rc == SG_OK) rc = r, snprintf(first, sizeof first, "%s", sg_err_msg());
  }
  if (rc == SG_OK) { /* state goes only once nothing is left (else the sweep retries) */
    int r = sgc_state_remove(cl->d.name);
    if (r < 0) rc = r, snprintf(first, sizeof first, "%s", sg_err_msg());
  }
  if (first[0]) sg_err_set(rc ? rc : SG_OK, "%s", first);
  free(cl);
  *pcl = NULL;
  return rc;
}

void sg_cluster_close(sg_cluster_t **pcl) {
  if (!pcl || !*pcl) return;
  for (int h = 0; h < (*pcl)->d.nhosts; h++)
    if ((*pcl)->ns_fd[h] >= 0) close((*pcl)->ns_fd[h]);
  free(*pcl);
  *pcl = NULL;
}

int sg_cluster_persist(sg_cluster_t *cl) {
  int lk = sgc_lock();
  if (lk < 0) return lk;
  cl->persistent = 1;
  int rc = sgc_state_write(cl);
  sgc_unlock(lk);
  return rc;
}

/* Whether uid is this user's: our real uid, or, under sudo, the uid of
 * the user who ran sudo (SUDO_UID). */
static int users_uid(unsigned long uid) {
  const char *su = getenv("SUDO_UID");
  char *end;
  errno = 0;
  unsigned long sudo = su && *su ? strtoul(su, &end, 10) : 0;
  int sudo_ok = su && *su && !*end && !errno;
  return uid == (unsigned long)getuid() || (sudo_ok && uid == sudo);
}

/* SG_OK when process owner runs, is a process (not a thread of another:
 * a thread can end while its process goes on) and belongs to this user
 * (real and effective uid): another user could end it at any time, and
 * the next sweep would remove the cluster under whoever uses it. */
static int owner_ok(pid_t owner, unsigned long long *start) {
  char path[64], line[256];
  unsigned long tgid = 0, ruid = 0, euid = 0;
  int have_tgid = 0, have_uid = 0;
  *start = sgc_running_start(owner);
  if (!*start) return sg_err_set(SG_ENOTFOUND, "--owner %d: no such process", (int)owner);
  snprintf(path, sizeof path, "/proc/%d/status", (int)owner);
  FILE *f = fopen(path, "re");
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "Tgid: %lu", &tgid) == 1) have_tgid = 1;
    if (sscanf(line, "Uid: %lu %lu", &ruid, &euid) == 2) have_uid = 1;
  }
  if (f) fclose(f);
  if (!have_tgid || !have_uid)
    return sg_err_set(SG_ENOTFOUND, "--owner %d: no such process", (int)owner);
  if (tgid != (unsigned long)owner)
    return sg_err_set(SG_EINVAL, "--owner %d: a thread of process %lu; name the process",
                      (int)owner, tgid);
  if (!users_uid(ruid) || !users_uid(euid))
    return sg_err_set(SG_EINVAL, "--owner %d: a process of uid %lu, not of this user (uid %d): "
                      "its user could end it and so the cluster", (int)owner,
                      users_uid(ruid) ? euid : ruid, (int)getuid());
  return SG_OK;
}

int sg_cluster_owner_check(pid_t owner) {
  unsigned long long start;
  return owner_ok(owner, &start);
}

int sg_cluster_hand_over(sg_cluster_t *cl, pid_t owner) {
  unsigned long long start;
  SG_CHECK(owner_ok(owner, &start));
  int lk = sgc_lock();
  if (lk < 0) return lk;
  cl->persistent = 0;
  cl->owner = owner;
  cl->owner_start = start; /* gone from here on, the next sweep removes it */
  int rc = sgc_state_write(cl);
  sgc_unlock(lk);
  return rc;
}

/* ---- hosts ---------------------------------------------------------------------- */

const char *sg_cluster_name(const sg_cluster_t *cl) { return cl->d.name; }
int sg_cluster_nhosts(const sg_cluster_t *cl) { return cl->d.nhosts; }
const sg_cluster_desc_t *sg_cluster_desc(const sg_cluster_t *cl) { return &cl->d; }
const char *sg_cluster_subnet(const sg_cluster_t *cl) { return cl->subnet_str; }
const char *sg_cluster_bridge_ns(const sg_cluster_t *cl) { return cl->br_ns; }

static int host_ok(const sg_cluster_t *cl, int h) { return h >= 0 && h < cl->d.nhosts; }
const char *sg_cluster_host_addr(const sg_cluster_t *cl, int h) {
  return host_ok(cl, h) ? cl->addr[h] : NULL;
}
const char *sg_cluster_host_ns(const sg_cluster_t *cl, int h) {
  return host_ok(cl, h) ? cl->ns[h] : NULL;
}
const char *sg_cluster_host_ifname(const sg_cluster_t *cl, int h) {
  return host_ok(cl, h) ? cl->ifname[h] : NULL;
}
int sg_cluster_host_ns_fd(const sg_cluster_t *cl, int h) {
  return host_ok(cl, h) ? cl->ns_fd[h] : -1;
}

void sg_cluster_owner(const sg_cluster_t *cl, char *out, size_t cap) {
  if (cl->persistent) snprintf(out, cap, "persistent");
  else snprintf(out, cap, "pid %d%s", (int)cl->owner, sgc_owner_alive(cl) ? "" : " (gone)");
}

int sg_cluster_enter(const sg_cluster_t *cl, int h) {
  if (!host_ok(cl, h))
    return sg_err_set(SG_EINVAL, "cluster %s: no host %d (hosts 0 .. %d)", cl->d.name, h,
                      cl->d.nhosts - 1);
  int fd = cl->ns_fd[h];
  if (fd < 0)
    return sg_err_set(SG_ENOTFOUND, "cluster %s host %d: namespace %s is missing", cl->d.name, h,
                      cl->ns[h]);
  if (setns(fd, CLONE_NEWNET) < 0)
    return sg_err_set(SG_EIO, "cluster %s host %d: setns into %s: %s", cl->d.name, h, cl->ns[h],
                      strerror(errno));
  return SG_OK;
}

/* ---- link statistics -------------------------------------------------------------- */

static int tbf_stats(const char *ns, const char *dev, char *rate, size_t rcap, uint64_t *sent,
                     uint64_t *drops) {
  char out[4096];
  char *argv[] = {"tc", "-s", "-n", (char *)ns, "qdisc", "show", "dev", (char *)dev, NULL};
  SG_CHECK(sgc_run(argv, -1, out, sizeof out));
  const char *q = strstr(out, "qdisc tbf");
  if (!q) {
    if (rate && rcap) rate[0] = '\0';
    *sent = *drops = 0;
    return SG_OK;
  }
  const char *r = strstr(q, " rate ");
  if (rate && rcap) snprintf(rate, rcap, "%.*s", r ? (int)strcspn(r + 6, " \n") : 0, r ? r + 6 : "");
  const char *s = strstr(q, "Sent ");
  unsigned long long b = 0, p = 0, d = 0;
  if (!s || sscanf(s, "Sent %llu bytes %llu pkt (dropped %llu", &b, &p, &d) < 2)
    return sg_err_set(SG_EFORMAT, "tc -s qdisc show dev %s (namespace %s): no byte counter", dev, ns);
  *sent = b, *drops = d;
  return SG_OK;
}

int sg_cluster_link_stats(const sg_cluster_t *cl, int h, sg_cluster_link_t *o) {
  memset(o, 0, sizeof *o);
  if (!host_ok(cl, h)) return sg_err_set(SG_EINVAL, "cluster %s: no host %d", cl->d.name, h);
  SG_CHECK(tbf_stats(cl->ns[h], cl->ifname[h], o->tc_rate, sizeof o->tc_rate, &o->host_tx,
                     &o->host_drops));
  SG_CHECK(tbf_stats(cl->br_ns, cl->peer[h], NULL, 0, &o->bridge_tx, &o->bridge_drops));
  return SG_OK;
}

int sg_cluster_uplink_stats(const sg_cluster_t *cl, int k, uint64_t *out_tx, uint64_t *in_tx) {
  char br[24], up[24], core[24];
  uint64_t drops;
  if (k < 0 || k >= sg_cluster_nracks(cl))
    return sg_err_set(SG_EINVAL, "cluster %s: no rack %d", cl->d.name, k);
  rack_names(cl, k, br, up, core);
  SG_CHECK(tbf_stats(cl->br_ns, up, NULL, 0, out_tx, &drops));
  return tbf_stats(cl->br_ns, core, NULL, 0, in_tx, &drops);
}

/* ---- open ----------------------------------------------------------------------- */

int sg_cluster_open(sg_cluster_t **out, const char *name) {
  *out = NULL;
  SG_CHECK(sg_cluster_name_check(name));
  sg_cluster_t *cl;
  SG_CHECK(sgc_state_read(name, &cl));
  for (int h = 0; h < cl->d.nhosts; h++) {
    char path[128];
    snprintf(path, sizeof path, "/run/netns/%s", cl->ns[h]);
    cl->ns_fd[h] = open(path, O_RDONLY | O_CLOEXEC);
    /* a missing namespace is reported by enter and status, not here: down
     * must still be able to remove the rest */
  }
  *out = cl;
  return SG_OK;
}
