/* mapreduce_cost.c - the mapreduce engine's alpha-beta-gamma formula
 * (core/cost.h; docs/model.md derives it).  Two-level network: the
 * driver's link is its own; a tree hop between racks takes one flow
 * through each uplink (sg_cost_uplink of 1). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "engine.h"

extern const sg_engine_t sg_engine_mapreduce; /* mapreduce_engine.c: its options table */

/* Mapreduce broadcast: flat, the driver's link sends N copies; tree
 * (binomial), ceil(log2(N+1)) rounds of one message of K each. */
static double mr_broadcast(const sg_cost_case_t *c, const sg_cost_params_t *p, double *link) {
  if (!strcmp(c->variant, "tree")) {
    int rounds = (int)ceil(log2((double)c->N + 1));
    *link = rounds * c->K;
    return rounds * (p->alpha + c->K * p->beta * sg_cost_mult(c->slow) * sg_cost_uplink(c, 1));
  }
  *link = c->N * c->K;
  return p->alpha + c->N * c->K * p->beta * sg_cost_mult(c->hub);
}

/* Fan-in of the aggregate tree: smallest f >= 2 with f^d >= N (mapreduce.h). */
static int fanin(int n, int d) {
  for (int f = 2;; f++) {
    double v = 1;
    for (int i = 0; i < d; i++) v *= f;
    if (v >= n) return f;
  }
}

/* Mapreduce aggregate: flat, N gradients of K into the driver, summed
 * there; tree of depth d, d-1 rounds where a leader takes (f-1)K from its
 * group, then the driver takes ceil(N / f^(d-1)) K.  After a flat
 * broadcast, as with a ps server's replies, the first executor's gradient
 * comes in while the other copies still go out, so the driver's link
 * takes N-1 of them after the broadcast (flat_after).  Each receive is
 * one after another (mr_aggregate.c, recv_sum in a loop), so every
 * gradient a rank takes costs its alpha.  *sent: messages of K sent in
 * all. */
static double mr_aggregate(const sg_cost_case_t *c, const sg_cost_params_t *p, double *link,
                           double *sent) {
  int d = c->tree_aggregate && c->depth > 1 ? c->depth : 1, f = fanin(c->N, d);
  double t = 0, last = c->N, b = p->beta * sg_cost_mult(c->slow) * sg_cost_uplink(c, 1);
  *sent = 0;
  for (int r = 1; r < d; r++) {
    t += (f - 1) * (p->alpha + c->K * (b + p->gamma));
    *sent += last - ceil(last / f);
    last = ceil(last / f);
  }
  *link = last * c->K;
  *sent += last;
  double after = d == 1 && !strcmp(c->variant, "flat") && c->N > 1 ? last - 1 : last;
  return t + last * p->alpha + after * c->K * p->beta * sg_cost_mult(c->hub) +
         last * c->K * p->gamma;
}

/* The map stage between the two (mr_driver.c, map_stage): the driver
 * takes every executor's DONE report with one receive at a time, alpha
 * each.  Not in the bench's rounds (bench-mapreduce: broadcast and
 * aggregate alone). */
static double mr_reports(const sg_cost_case_t *c, const sg_cost_params_t *p) {
  if (!c->engine || strcmp(c->engine, "mapreduce")) return 0;
  return c->N * p->alpha;
}

static double sg_mr_cost(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double out, in, sent;
  double t = mr_broadcast(c, p, &out) + mr_reports(c, p) + mr_aggregate(c, p, &in, &sent);
  o->link_bytes = out > in ? out : in;
  /* the broadcast delivers K to each executor (flat or tree), the
   * aggregate sends `sent` messages of K; each byte is sent and received */
  o->cpu_bytes = 2 * (c->N + sent) * c->K;
  return t;
}

/* The run's case: broadcast (the variant), aggregate tree and its depth;
 * absent keys read as flat and 2 levels. */
static void mr_cost_read(const sg_opts_t *o, sg_cost_case_t *c) {
  int64_t depth;
  c->variant = sg_opts_str_or(o, "broadcast", "");
  c->tree_aggregate = !strcmp(sg_setting_or(o, sg_engine_mapreduce.options, "aggregate"), "tree");
  depth = sg_setting_int_or(o, sg_engine_mapreduce.options, "depth");
  c->depth = (int)depth;
}

/* "mapreduce-BROADCAST/AGGREGATE": "mapreduce-flat/tree". */
static void mr_cost_label(const sg_cost_case_t *c, char *out, size_t cap) {
  snprintf(out, cap, "mapreduce-%s/%s", c->variant ? c->variant : "",
           c->tree_aggregate ? "tree" : "flat");
}

static const sg_cost_whatif_t mr_what_if[] = {
    {"mapreduce", "flat", 0, 0}, {"mapreduce-tree", "tree", 1, 0}, {NULL, NULL, 0, 0}};

const sg_cost_info_t sg_mr_cost_info = {
    .formula = sg_mr_cost, .read = mr_cost_read, .label = mr_cost_label, .what_if = mr_what_if};
