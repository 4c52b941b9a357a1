/* cost_model_whatif.c - `sgdlab model --what-if`: the formula table (cost_model.h)
 * evaluated for any engine and algorithm, N, gradient size, link rate,
 * latency, servers and topology, without any recorded run.  Every formula
 * is linear in alpha, beta and gamma, so each term is the formula with the
 * other two at 0, and the three add up to the step's communication; the
 * step adds the hub's compute and the worker's, less what the links' time
 * hides of the worker's (sg_cost_split_t.overlap_s). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cost_model.h"
#include "err.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab model --what-if --link RATE (--bytes B | --params P)\n"
          "                    [--workers LIST] [--engines LIST] [--latency T] [--gamma S]\n"
          "                    [--servers S] [--slice B] [--eager B] [--depth D] [--group G]\n"
          "                    [--segment B]\n"
          "                    [--topology flat|two-level --rack R [--oversub O]\n"
          "                     [--rack-latency T]] [--compute T] [--hub-compute T] [--json]\n"
          "\n"
          "The alpha-beta-gamma formulas (docs/model.md) for cases no run recorded:\n"
          "alpha = --latency, beta = 1 / --link, gamma = --gamma (default: timed on\n"
          "this host, float sum of 16 MiB).  Prints per case and N the latency (alpha),\n"
          "bandwidth (beta) and reduction (gamma) terms, the step (compute + their sum,\n"
          "less the compute a sync ps worker does while its server serves the others)\n"
          "and the bytes through the busiest link, one direction.\n"
          "\n"
          "  --link RATE      per rank link: 10gbit, 100mbit (bit/s) or 1GB/s, 6GB/s\n"
          "                   (bytes/s; k M G T are powers of ten)\n"
          "  --bytes B        gradient bytes K (1.2G, 4M, 64Mi: Ki Mi Gi powers of two)\n"
          "  --params P       parameters instead (K = 4 P): 300M\n"
          "  --workers LIST   N values: 2,10,40 or A:B (powers of two from A to B);\n"
          "                   default 2:1024\n"
          "  --engines LIST   cases (default ring,rhd,tree,hier,ps,root): ring rhd tree\n"
          "                   hier native (allreduce), ps ps-async (S servers),\n"
          "                   mapreduce mapreduce-tree (broadcast and aggregate trees),\n"
          "                   root (one rank receives and sends to N-1 others), or\n"
          "                   ENGINE:VARIANT\n"
          "  --latency T      seconds per message (default 0): 5us, 1.5ms, 2e-6\n"
          "  --gamma S        seconds per byte of summation\n"
          "  --servers S      ps servers (default 1)\n"
          "  --slice B        ps (sync): bytes per slice of a shard, as a run with\n"
          "                   `slice: B` on shards of at least `slice_from` (default 0:\n"
          "                   whole shards); the line is a worker's slices reaching a\n"
          "                   server in order: TCP, or SMPI with simulate.eager: simgrid\n"
          "                   (SMPI with slices below simulate.eager, its default, takes\n"
          "                   about 2T: docs/simulate.md)\n"
          "  --eager B        an MPI transport whose sends below B bytes return at once\n"
          "                   (SimGrid's smpi/send-is-detached-thresh is 64Ki): a sync\n"
          "                   ps server's smaller replies end together, larger ones\n"
          "                   block it in turn (default 0: the ZeroMQ line); simgrid:\n"
          "                   64Ki whose bytes move only once received, as SMPI with\n"
          "                   simulate.eager: simgrid (the last worker's S shards meet\n"
          "                   on its link, docs/model.md)\n"
          "  --depth D        mapreduce-tree aggregate levels, driver included (default 2)\n"
          "  --group G        hier ranks per group (default: --rack, else 8)\n"
          "  --segment B      tree pipeline segment (default 1Mi)\n"
          "  --topology T     flat (default) or two-level: racks of --rack consecutive\n"
          "                   ranks, whose uplink carries rack x RATE / --oversub\n"
          "                   (default 1); --rack-latency more per message between racks\n"
          "  --compute T      a worker's compute seconds per step (default 0), added to\n"
          "                   every row but what a sync ps hides (`hidden` in --json)\n"
          "  --hub-compute T  the hub's (ps servers', mapreduce driver's) compute seconds\n"
          "                   on every step's path, never hidden (default 0)\n"
          "  --json           one JSON object instead of the table\n"
          "  --db PATH        ignored (no database is read)\n");
}

typedef struct wargs {
  double rate, K, alpha, gamma, oversub, rack_alpha, compute, hub_compute, segment, slice, eager;
  int servers, depth, group, rack, json, eager_matched;
  char workers[256], engines[512];
} wargs_t;

/* A number with an optional suffix from units (NULL-name terminated), in
 * [0, 1e15] after its unit (as `sgdlab model`'s options: every formula
 * stays finite); -1 and a line naming the flag otherwise. */
typedef struct unit {
  const char *name;
  double mul;
} unit_t;

static int parse_unit(const char *flag, const char *v, const unit_t *units, int nocase,
                      double *out) {
  char *end;
  double d = v ? strtod(v, &end) : NAN;
  for (const unit_t *u = units; v && end != v && u->name; u++)
    if (!(nocase ? strcasecmp : strcmp)(end, u->name) && d * u->mul <= 1e15 && d >= 0) {
      *out = d * u->mul;
      return 0;
    }
  fprintf(stderr, "sgdlab model: %s: '%s' is not a quantity in [0, 1e15] (see --help)\n",
          flag, v ? v : "");
  return -1;
}

static const unit_t SIZES[] = {{"", 1},      {"B", 1},     {"k", 1e3},   {"K", 1e3},
                               {"KB", 1e3},  {"M", 1e6},   {"MB", 1e6},  {"G", 1e9},
                               {"GB", 1e9},  {"T", 1e12},  {"TB", 1e12}, {"Ki", 1024.0},
                               {"KiB", 1024.0}, {"Mi", 1048576.0}, {"MiB", 1048576.0},
                               {"Gi", 1073741824.0}, {"GiB", 1073741824.0}, {NULL, 0}};
static const unit_t PLAIN[] = {{"", 1}, {NULL, 0}};
static const unit_t TIMES[] = {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9},
                               {NULL, 0}};
/* bytes per second */
static const unit_t RATES_BITS[] = {{"bit", 1 / 8.0}, {"kbit", 1e3 / 8}, {"mbit", 1e6 / 8},
                                    {"gbit", 1e9 / 8}, {"tbit", 1e12 / 8}, {NULL, 0}};
static const unit_t RATES_BYTES[] = {{"B/s", 1}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9},
                                     {"TB/s", 1e12}, {NULL, 0}};

static int parse_rate(const char *v, double *out) {
  char *end;
  if (!v) return parse_unit("--link", v, RATES_BYTES, 0, out);
  (void)strtod(v, &end);
  if (strchr(end, '/')) return parse_unit("--link", v, RATES_BYTES, 0, out);
  return parse_unit("--link", v, RATES_BITS, 1, out);
}

static int parse_count(const char *flag, const char *v, int lo, int hi, int *out) {
  double d;
  if (parse_unit(flag, v, SIZES, 0, &d) < 0) return -1;
  if (d < lo || d > hi || d != floor(d)) {
    fprintf(stderr, "sgdlab model: %s: '%s' is not a whole number in [%d, %d]\n", flag, v, lo, hi);
    return -1;
  }
  *out = (int)d;
  return 0;
}

/* One option and its value; 0 when it is not one of these, 1 when taken,
 * -1 after a message. */
static int take(wargs_t *a, const char *s, const char *v) {
  double params;
  if (!strcmp(s, "--link")) return parse_rate(v, &a->rate) < 0 ? -1 : 1;
  if (!strcmp(s, "--bytes")) return parse_unit(s, v, SIZES, 0, &a->K) < 0 ? -1 : 1;
  if (!strcmp(s, "--params"))
    return parse_unit(s, v, SIZES, 0, &params) < 0 ? -1 : (a->K = 4 * params, 1);
  if (!strcmp(s, "--latency")) return parse_unit(s, v, TIMES, 0, &a->alpha) < 0 ? -1 : 1;
  if (!strcmp(s, "--rack-latency")) return parse_unit(s, v, TIMES, 0, &a->rack_alpha) < 0 ? -1 : 1;
  if (!strcmp(s, "--compute")) return parse_unit(s, v, TIMES, 0, &a->compute) < 0 ? -1 : 1;
  if (!strcmp(s, "--hub-compute"))
    return parse_unit(s, v, TIMES, 0, &a->hub_compute) < 0 ? -1 : 1;
  if (!strcmp(s, "--gamma")) return parse_unit(s, v, TIMES, 0, &a->gamma) < 0 ? -1 : 1;
  if (!strcmp(s, "--oversub")) return parse_unit(s, v, PLAIN, 0, &a->oversub) < 0 ? -1 : 1;
  if (!strcmp(s, "--segment")) return parse_unit(s, v, SIZES, 0, &a->segment) < 0 ? -1 : 1;
  if (!strcmp(s, "--slice")) return parse_unit(s, v, SIZES, 0, &a->slice) < 0 ? -1 : 1;
  if (!strcmp(s, "--eager")) {
    a->eager_matched = v && !strcmp(v, "simgrid"); /* SimGrid's own thresholds */
    if (a->eager_matched) return a->eager = SG_COST_SIMGRID_EAGER, 1;
    return parse_unit(s, v, SIZES, 0, &a->eager) < 0 ? -1 : 1;
  }
  if (!strcmp(s, "--servers")) return parse_count(s, v, 1, 1 << 20, &a->servers) < 0 ? -1 : 1;
  if (!strcmp(s, "--depth")) return parse_count(s, v, 1, 16, &a->depth) < 0 ? -1 : 1;
  if (!strcmp(s, "--group")) return parse_count(s, v, 1, 1 << 20, &a->group) < 0 ? -1 : 1;
  if (!strcmp(s, "--rack")) return parse_count(s, v, 1, 1 << 20, &a->rack) < 0 ? -1 : 1;
  if (!strcmp(s, "--workers") && v) return snprintf(a->workers, sizeof a->workers, "%s", v), 1;
  if (!strcmp(s, "--engines") && v) return snprintf(a->engines, sizeof a->engines, "%s", v), 1;
  return 0;
}

/* 0, 1 after --help, -1 after a message. */
static int parse_args(int argc, char **argv, wargs_t *a) {
  char topo[16] = "flat";
  *a = (wargs_t){.gamma = -1, .servers = 1, .depth = 2, .rate = -1, .K = -1};
  snprintf(a->workers, sizeof a->workers, "2:1024");
  sg_cost_whatif_defaults(a->engines, sizeof a->engines);
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int t;
    if (!strcmp(s, "-h") || !strcmp(s, "--help")) return usage(stdout), 1;
    if (!strcmp(s, "--what-if")) continue;
    if (!strcmp(s, "--db") && v) { i++; continue; } /* $SGDLAB_DB's: no database here */
    if (!strcmp(s, "--json")) { a->json = 1; continue; }
    if (!strcmp(s, "--topology") && v && (!strcmp(v, "flat") || !strcmp(v, "two-level"))) {
      snprintf(topo, sizeof topo, "%s", argv[++i]);
      continue;
    }
    if ((t = take(a, s, v)) < 0) return -1;
    if (t) { i++; continue; }
    fprintf(stderr, "sgdlab model --what-if: unknown or incomplete argument '%s' (see --help)\n", s);
    return -1;
  }
  if (!(a->rate > 0) || !(a->K >= 0)) {
    fprintf(stderr, "sgdlab model --what-if: give --link RATE (> 0) and --bytes or --params\n");
    return -1;
  }
  if (!strcmp(topo, "two-level") != (a->rack > 0)) {
    fprintf(stderr, "sgdlab model --what-if: --rack R goes with --topology two-level (and it "
                    "needs one)\n");
    return -1;
  }
  return 0;
}

/* ---- the cases ---------------------------------------------------------- */

typedef struct wcase {
  char engine[32], variant[32];
  int tree;
} wcase_t;

/* A case name: one an engine lists (its what-if cases, core/cost.h), a
 * reference (root), or ENGINE:VARIANT of letters, digits and '-'. */
static int case_of(const char *name, wcase_t *w) {
  sg_cost_case_t c = {0};
  memset(w, 0, sizeof *w);
  if (sg_cost_whatif_find(name, &c) == 0) {
    snprintf(w->engine, sizeof w->engine, "%s", c.engine);
    snprintf(w->variant, sizeof w->variant, "%s", c.variant);
    w->tree = c.tree_aggregate;
    return 0;
  }
  size_t n = strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-:");
  const char *colon = strchr(name, ':');
  if (name[n] || !colon || colon == name || strchr(colon + 1, ':') ||
      (size_t)(colon - name) >= sizeof w->engine || strlen(colon + 1) >= sizeof w->variant)
    return -1;
  snprintf(w->engine, sizeof w->engine, "%.*s", (int)(colon - name), name);
  snprintf(w->variant, sizeof w->variant, "%s", colon + 1);
  return 0;
}

/* N values from "2,10" or "A:B" items; -1 after a message. */
static int workers_of(const char *list, int *ns, int cap, int *n) {
  char buf[256];
  *n = 0;
  snprintf(buf, sizeof buf, "%s", list);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(t, ':');
    int lo, hi;
    if (colon) *colon = 0;
    if (parse_count("--workers", t, 1, 1 << 20, &lo) < 0 ||
        (colon && parse_count("--workers", colon + 1, lo, 1 << 20, &hi) < 0))
      return -1;
    for (long v = lo; v <= (colon ? hi : lo) && *n < cap; v = colon ? v * 2 : v + 1)
      ns[(*n)++] = (int)v;
  }
  if (!*n) fprintf(stderr, "sgdlab model: --workers: no value\n");
  return *n ? 0 : -1;
}

/* ---- the table ---------------------------------------------------------- */

typedef struct wrow {
  double a, b, g, step, link_bytes, hidden;
} wrow_t;

static sg_cost_case_t case_for(const wargs_t *a, const wcase_t *w, int n) {
  sg_cost_case_t c = {.engine = w->engine, .variant = w->variant, .N = n, .S = a->servers,
                      .tree_aggregate = w->tree, .depth = a->depth, .K = a->K,
                      .group = a->group > 0 ? a->group : a->rack > 0 ? a->rack : 8,
                      .segment = a->segment, .slice = a->slice, .rack = a->rack, .oversub = a->oversub,
                      .rack_alpha = a->rack_alpha, .eager = a->eager,
                      .eager_matched = a->eager_matched};
  return c;
}

/* The three terms of c: alpha alone (rack_alpha with it), beta alone,
 * gamma alone. */
static int row_of(const wargs_t *a, sg_cost_case_t c, wrow_t *r) {
  sg_cost_split_t s;
  double rack_alpha = c.rack_alpha;
  sg_cost_params_t pa = {a->alpha, 0, 0, 0, 0}, pb = {0, 1 / a->rate, 0, 0, 0},
                   pg = {0, 0, a->gamma, 0, 0};
  SG_CHECK(sg_cost_detail(&c, &pa, &s));
  r->a = s.link_s;
  c.rack_alpha = 0;
  SG_CHECK(sg_cost_detail(&c, &pb, &s));
  r->b = s.link_s;
  r->link_bytes = s.link_bytes;
  /* the worker's compute that the links' time hides (a bandwidth term) */
  r->hidden = a->compute < s.overlap_s ? a->compute : s.overlap_s;
  SG_CHECK(sg_cost_detail(&c, &pg, &s));
  r->g = s.link_s;
  c.rack_alpha = rack_alpha;
  r->step = a->hub_compute + a->compute - r->hidden + r->a + r->b + r->g;
  return SG_OK;
}

static void print_head(const wargs_t *a) {
  printf("# what-if: K %.6g MB, link %.6g MB/s (beta %.4g ns/B), latency %.4g us, gamma %.4g "
         "ns/B, compute %.4g ms, ", a->K / 1e6, a->rate / 1e6, 1e9 / a->rate, a->alpha * 1e6,
         a->gamma * 1e9, a->compute * 1e3);
  if (a->hub_compute > 0) printf("hub compute %.4g ms, ", a->hub_compute * 1e3);
  if (a->rack > 0)
    printf("two-level: racks of %d ranks, oversubscription %.3g, rack latency %.4g us\n",
           a->rack, a->oversub > 0 ? a->oversub : 1, a->rack_alpha * 1e6);
  else
    printf("flat\n");
  printf("%-22s %6s %12s %12s %12s %12s %14s\n", "case", "N", "latency(ms)", "bandwidth(ms)",
         "reduce(ms)", "step(ms)", "link(MB)");
}

static void print_row(const wargs_t *a, const char *label, const sg_cost_case_t *c,
                      const wrow_t *r, int first) {
  if (a->json)
    printf("%s\n    {\"case\": \"%s\", \"engine\": \"%s\", \"variant\": \"%s\", \"N\": %d, "
           "\"alpha_s\": %.9g, \"beta_s\": %.9g, \"gamma_s\": %.9g, \"compute_s\": %.9g, "
           "\"hub_compute_s\": %.9g, \"hidden_s\": %.9g, \"step_s\": %.9g, \"link_bytes\": %.9g}",
           first ? "" : ",", label, c->engine, c->variant, c->N, r->a, r->b, r->g, a->compute,
           a->hub_compute, r->hidden, r->step, r->link_bytes);
  else
    printf("%-22s %6d %12.4f %13.4f %12.4f %12.4f %14.4f\n", label, c->N, r->a * 1e3,
           r->b * 1e3, r->g * 1e3, r->step * 1e3, r->link_bytes / 1e6);
}

/* Every case of --engines at every N; dry: checked, nothing printed. */
static int print_cases(const wargs_t *a, const int *ns, int nn, int dry) {
  char buf[512];
  int first = 1;
  snprintf(buf, sizeof buf, "%s", a->engines);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    wcase_t w;
    char label[64];
    if (case_of(t, &w) < 0)
      return sg_err_set(SG_ECONFIG, "--engines: '%.40s' is not a case (see --help)", t);
    for (int i = 0; i < nn; i++) {
      sg_cost_case_t c = case_for(a, &w, ns[i]);
      wrow_t r;
      if (!sg_cost_known(&c))
        return sg_err_set(SG_ECONFIG, "--engines: no cost formula for engine '%s' variant '%s'",
                          w.engine, w.variant);
      if (dry) continue;
      SG_CHECK(row_of(a, c, &r));
      sg_cost_label(&c, label, sizeof label);
      print_row(a, label, &c, &r, first);
      first = 0;
    }
  }
  return SG_OK;
}

int sg_cmd_model_whatif(int argc, char **argv) {
  wargs_t a;
  int ns[64], nn;
  int pr = parse_args(argc, argv, &a);
  if (pr) return pr > 0 ? 0 : 2;
  if (workers_of(a.workers, ns, 64, &nn) < 0) return 2;
  if (print_cases(&a, ns, nn, 1) < 0) { /* bad input: one line, nothing printed */
    fprintf(stderr, "sgdlab model --what-if: %s\n", sg_err_msg());
    return 2;
  }
  if (a.gamma < 0 && sg_cost_measure_gamma(16u << 20, 5, &a.gamma) < 0) a.gamma = 0;
  if (a.json)
    printf("{\"K\": %.9g, \"rate_Bps\": %.9g, \"alpha\": %.9g, \"beta\": %.9g, \"gamma\": %.9g, "
           "\"rack\": %d, \"oversub\": %.9g, \"rack_alpha\": %.9g, \"rows\": [",
           a.K, a.rate, a.alpha, 1 / a.rate, a.gamma, a.rack, a.oversub > 0 ? a.oversub : 1,
           a.rack_alpha);
  else
    print_head(&a);
  int rc = print_cases(&a, ns, nn, 0);
  if (a.json) printf("\n]}\n");
  fflush(stdout);
  if (rc < 0) fprintf(stderr, "sgdlab model --what-if: %s\n", sg_err_msg());
  return rc < 0 ? 2 : 0;
}
