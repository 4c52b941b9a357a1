/* simulate.c - the simulate: keys, the SMPI platform and hostfile (see
 * simulate.h). */
#include "simulate.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cluster.h"
#include "err.h"
#include "launch.h"

/* Per-rank memory of a simulation, measured (docs/simulate.md): with
 * computed steps every rank holds its model, buffers and batch; modeled
 * steps fold the large buffers across ranks (1024 ranks of the MLP
 * 784-256-10: 0.54 GB of physical memory, 0.5 MiB a rank; four times
 * that here). */
#define SIM_RANK_EXECUTED_B (24.0 * 1024 * 1024)
#define SIM_RANK_MODELED_B (2.0 * 1024 * 1024)
#define SIM_BASE_B (256.0 * 1024 * 1024) /* the simulator and the shared data */

int sg_sim_enabled(const sg_opts_t *o) {
  const char *v = sg_opts_get(o, "simulate");
  return v && (!strcmp(v, "true") || !strcmp(v, "1"));
}

int sg_sim_parse_latency(const char *s, double *out) {
  static const struct { const char *unit; double mul; } units[] = {
      {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9}};
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0 || isspace((unsigned char)*s))
    return sg_err_set(SG_ECONFIG, "simulate.latency '%s': not a latency (a number and a unit, "
                      "e.g. 1us, 50us, 0.5ms)", s);
  for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
    if (strcasecmp(end, units[i].unit)) continue;
    if (v * units[i].mul > 10)
      return sg_err_set(SG_ECONFIG, "simulate.latency '%s': out of range (0 .. 10 s)", s);
    *out = v * units[i].mul;
    return SG_OK;
  }
  return sg_err_set(SG_ECONFIG, "simulate.latency '%s': unknown unit '%s' (s, ms, us, ns)", s, end);
}

/* "a,b,c" of positive integers into v (at most max), their count or -1. */
static int int_list(const char *s, long *v, int max) {
  int n = 0;
  while (*s) {
    char *end;
    if (n == max || !isdigit((unsigned char)*s)) return -1;
    errno = 0;
    v[n] = strtol(s, &end, 10);
    if (errno || v[n] < 1 || v[n] > 1048576) return -1;
    n++;
    if (*end == ',' && end[1]) s = end + 1;
    else if (*end) return -1;
    else s = end;
  }
  return n;
}

static long product(const long *v, int n) {
  long p = 1;
  for (int i = 0; i < n && p <= 1048576; i++) p *= v[i];
  return p;
}

/* torus: D1,D2,... multiplying to the hosts. */
static int check_torus(sg_sim_cfg_t *c, const char *dims) {
  long d[8];
  int n = int_list(dims, d, 8);
  if (n < 1)
    return sg_err_set(SG_ECONFIG, "simulate.torus '%s': expected dimensions D1,D2,... (1 to 8 "
                      "positive integers, e.g. 4,4,4)", dims);
  if (product(d, n) != c->hosts)
    return sg_err_set(SG_ECONFIG, "simulate.torus '%s' makes %ld hosts, the platform has %d "
                      "(simulate.hosts, or one per process)", dims, product(d, n), c->hosts);
  snprintf(c->topo_params, sizeof c->topo_params, "%s", dims);
  return SG_OK;
}

/* More links than a fat tree of 1024 hosts needs by far (a 3-level tree
 * of 1024 hosts has a few thousand); each is a SimGrid object. */
#define SG_SIM_FAT_TREE_LINKS 65536

/* The links of a fat tree (SimGrid's, Zahavi's PGFT(L; D; U; P)): level
 * l holds D(l+1)...D(L) x U(1)...U(l) nodes (level 0 the hosts), each
 * with U(l+1) x P(l+1) links up.  Each count is bounded by the hosts (the
 * downs) or by the check's cap, so doubles hold them exactly enough. */
static double fat_tree_links(const long *down, const long *up, const long *par, int levels) {
  double links = 0;
  for (int l = 0; l < levels; l++) {
    double nodes = 1;
    for (int i = l; i < levels; i++) nodes *= (double)down[i];
    for (int i = 0; i < l; i++) nodes *= (double)up[i];
    links += nodes * (double)up[l] * (double)par[l];
  }
  return links;
}

/* fat-tree: L;D1,..,DL;U1,..,UL;P1,..,PL, the downs multiplying to the hosts. */
static int check_fat_tree(sg_sim_cfg_t *c, const char *t) {
  char part[4][64];
  int np = 0, rest = 0; /* rest: text after the fourth part */
  const char *p = t;
  while (np < 4) {
    size_t len = strcspn(p, ";");
    if (len >= sizeof part[0]) break;
    memcpy(part[np], p, len);
    part[np++][len] = '\0';
    if (!p[len]) break;
    p += len + 1;
    rest = np == 4;
  }
  long lv[1], down[8], up[8], par[8];
  int ok = np == 4 && !rest && strlen(t) < sizeof c->topo_params &&
           int_list(part[0], lv, 1) == 1 && lv[0] <= 8 &&
           int_list(part[1], down, 8) == lv[0] && int_list(part[2], up, 8) == lv[0] &&
           int_list(part[3], par, 8) == lv[0];
  if (!ok)
    return sg_err_set(SG_ECONFIG, "simulate.fat_tree '%s': expected LEVELS;DOWN,...;UP,...;"
                      "PARALLEL,... with LEVELS (1..8) counts in each list, e.g. 2;4,4;1,2;1,2", t);
  if (product(down, (int)lv[0]) != c->hosts)
    return sg_err_set(SG_ECONFIG, "simulate.fat_tree '%s': the DOWN counts make %ld hosts, the "
                      "platform has %d (simulate.hosts, or one per process)", t,
                      product(down, (int)lv[0]), c->hosts);
  double links = fat_tree_links(down, up, par, (int)lv[0]);
  if (links > SG_SIM_FAT_TREE_LINKS)
    return sg_err_set(SG_ECONFIG, "simulate.fat_tree '%s': %.0f links between the levels, more "
                      "than %d (UP and PARALLEL multiply the switches and links)", t, links,
                      SG_SIM_FAT_TREE_LINKS);
  snprintf(c->topo_params, sizeof c->topo_params, "%s", t);
  return SG_OK;
}

/* two-level: racks dividing the hosts, oversubscription dividing a rack. */
static int check_two_level(sg_sim_cfg_t *c) {
  if (c->racks < 1 || c->hosts % c->racks)
    return sg_err_set(SG_ECONFIG, "simulate.racks %d: does not divide the %d hosts evenly",
                      c->racks, c->hosts);
  int per = c->hosts / c->racks;
  if (c->oversub < 1 || per % c->oversub)
    return sg_err_set(SG_ECONFIG, "simulate.oversubscription %d: does not divide a rack's %d "
                      "hosts evenly (a rack has hosts / oversubscription uplinks)", c->oversub, per);
  snprintf(c->topo_params, sizeof c->topo_params, "2;%d,%d;1,1;1,%d", per, c->racks,
           per / c->oversub);
  return SG_OK;
}

static int read_topology(const sg_opts_t *o, sg_sim_cfg_t *c) {
  const char *t = sg_opts_str_or(o, "simulate.topology", "flat");
  int64_t racks, over;
  SG_CHECK(sg_opts_int_or(o, "simulate.racks", 2, &racks));
  SG_CHECK(sg_opts_int_or(o, "simulate.oversubscription", 1, &over));
  c->racks = (int)racks;
  c->oversub = (int)over;
  c->topo_params[0] = '\0';
  if (!strcmp(t, "flat")) c->topo = SG_SIM_FLAT;
  else if (!strcmp(t, "two-level")) c->topo = SG_SIM_TWO_LEVEL;
  else if (!strcmp(t, "fat-tree")) c->topo = SG_SIM_FAT_TREE;
  else if (!strcmp(t, "torus")) c->topo = SG_SIM_TORUS;
  else return sg_err_set(SG_ECONFIG, "simulate.topology '%s': flat, two-level, fat-tree or torus", t);
  if (c->topo == SG_SIM_TWO_LEVEL) return check_two_level(c);
  if (c->topo == SG_SIM_FAT_TREE) return check_fat_tree(c, sg_opts_str_or(o, "simulate.fat_tree", ""));
  if (c->topo == SG_SIM_TORUS) return check_torus(c, sg_opts_str_or(o, "simulate.torus", ""));
  return SG_OK;
}

/* simulate.eager: `simgrid`, or bytes with an optional K/M/G (powers of
 * two), 0 .. SG_SIM_EAGER_MAX. */
static int read_eager(const char *v, sg_sim_cfg_t *c) {
  if (!strcmp(v, "simgrid")) {
    c->eager = -1;
    return SG_OK;
  }
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  int shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  else if (*end == 'M' || *end == 'm') shift = 20;
  else if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (end == v || *end || errno || x < 0 || x > (SG_SIM_EAGER_MAX >> shift))
    return sg_err_set(SG_ECONFIG, "simulate.eager '%s': bytes from 0 to 1G (e.g. 1114112, 64K, "
                      "1M) or simgrid", v);
  c->eager = (int)(x << shift);
  return SG_OK;
}

int sg_sim_cfg_read(const sg_opts_t *o, int nprocs, sg_sim_cfg_t *c) {
  int64_t hosts;
  memset(c, 0, sizeof *c);
  SG_CHECK(sg_opts_int_or(o, "simulate.hosts", 0, &hosts));
  c->hosts = hosts > 0 ? (int)hosts : nprocs;
  if (sg_cluster_parse_rate(sg_opts_str_or(o, "simulate.link", "10gbit"), "simulate.link",
                            &c->bps) < 0) {
    char m[512]; /* its message, as a configuration error */
    snprintf(m, sizeof m, "%s", sg_err_msg());
    return sg_err_set(SG_ECONFIG, "%s", m);
  }
  SG_CHECK(sg_sim_parse_latency(sg_opts_str_or(o, "simulate.latency", "1us"), &c->lat_s));
  c->modeled = !strcmp(sg_opts_str_or(o, "simulate.compute", "executed"), "modeled");
  SG_CHECK(sg_opts_double_or(o, "simulate.host_speed", 0, &c->host_speed));
  SG_CHECK(read_eager(sg_opts_str_or(o, "simulate.eager",
                                      SG_CLUSTER_EAGER_STR(SG_CLUSTER_EAGER_BYTES)), c));
  return read_topology(o, c);
}

int sg_sim_platform_write(const sg_sim_cfg_t *c, FILE *f) {
  static const char *const topo[] = {"", "FAT_TREE", "FAT_TREE", "TORUS"};
  fprintf(f, "<?xml version='1.0'?>\n"
             "<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
             "<platform version=\"4.1\">\n");
  fprintf(f, "  <cluster id=\"sgdlab\" prefix=\"host\" suffix=\"\" radical=\"0-%d\" "
             "speed=\"%.12gf\" bw=\"%.12gBps\" lat=\"%.12gs\"", c->hosts - 1, c->host_speed,
          (double)c->bps / 8.0, c->lat_s);
  if (c->topo != SG_SIM_FLAT)
    fprintf(f, " topology=\"%s\" topo_parameters=\"%s\"", topo[c->topo], c->topo_params);
  fprintf(f, " sharing_policy=\"SPLITDUPLEX\"/>\n</platform>\n");
  return ferror(f) ? sg_err_set(SG_EIO, "platform: write failed") : SG_OK;
}

int sg_sim_hostfile_write(const sg_sim_cfg_t *c, int nprocs, FILE *f) {
  for (int r = 0; r < nprocs; r++) fprintf(f, "host%d\n", r % c->hosts);
  return ferror(f) ? sg_err_set(SG_EIO, "hostfile: write failed") : SG_OK;
}

double sg_sim_mem_estimate(const sg_sim_cfg_t *c, int nprocs) {
  return SIM_BASE_B + (double)nprocs * (c->modeled ? SIM_RANK_MODELED_B : SIM_RANK_EXECUTED_B);
}

int sg_sim_check_host(void) {
  char bin[4096];
  if (sg_launch_find_bin("sgdlab-rank-smpi", bin, sizeof bin) < 0)
    return sg_err_set(SG_ECONFIG, "simulate: this build has no sgdlab-rank-smpi (SimGrid's smpicc "
                      "was not found when it was configured; scripts/setup.sh installs libsimgrid-dev)");
  if (!sg_launch_on_path("smpirun"))
    return sg_err_set(SG_ECONFIG, "simulate: smpirun is not on PATH (install libsimgrid-dev)");
  return SG_OK;
}
