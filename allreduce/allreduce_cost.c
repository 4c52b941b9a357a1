/* allreduce_cost.c - the allreduce engine's alpha-beta-gamma formulas, one
 * per algorithm (core/cost.h; docs/model.md derives every line).
 *
 * Flat network: every rank has a link of its own (beta per byte, alpha per
 * message, times c->slow for the slowest).  Two-level (c->rack > 0):
 * racks of c->rack consecutive ranks; a phase whose messages leave a rack
 * pays c->rack_alpha more per message and, when f flows leave one rack at
 * once, beta x max(1, f x oversub / rack) (sg_cost_uplink). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "allreduce.h"
#include "cost.h"

/* Ring: 2(N-1) steps of K/N bytes; the reduce-scatter half adds each
 * received chunk.  Every chunk crosses every link, so the slowest sets
 * the pace; across racks, one ring flow leaves each rack per step. */
static double ring(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double n = c->N, f = (n - 1) / n;
  int cross = c->rack > 0 && c->N > c->rack;
  double beta = p->beta * sg_cost_mult(c->slow) * (cross ? sg_cost_uplink(c, 1) : 1);
  double alpha = p->alpha + (cross ? c->rack_alpha : 0);
  o->link_bytes = 2 * f * c->K;
  o->cpu_bytes = c->N < 2 ? 0 : 4 * (n - 1) * c->K;
  if (c->N < 2) return 0;
  return 2 * (n - 1) * alpha + 2 * f * c->K * beta + f * c->K * p->gamma;
}

/* Rabenseifner over p = 2^floor(log2 N) ranks: the exchange at distance
 * mask moves K mask / p bytes each way, once halving (reduced) and once
 * doubling; the N - p extra ranks fold their vector in before (one message
 * of K, reduced) and get the result back after (one message of K).  Two-
 * level: an exchange at mask >= rack crosses, every rank of a rack at once
 * (rack flows). */
static double rhd(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  int pw = 1;
  while (pw * 2 <= c->N) pw *= 2;
  double f = (double)(pw - 1) / pw, b = p->beta * sg_cost_mult(c->slow), t = 0;
  for (int mask = 1; mask < pw; mask *= 2) {
    int x = c->rack > 0 && mask >= c->rack;
    double bytes = c->K * mask / pw;
    t += 2 * (p->alpha + (x ? c->rack_alpha : 0) + bytes * b * (x ? sg_cost_uplink(c, c->rack) : 1));
    t += bytes * p->gamma;
  }
  o->link_bytes = 2 * f * c->K;
  o->cpu_bytes = 4 * (pw - 1) * c->K + 4.0 * (c->N - pw) * c->K;
  if (pw < c->N) {
    int x = sg_cost_cross(c, 0, 1); /* the fold pairs neighbours 2i, 2i+1 */
    t += 2 * (p->alpha + (x ? c->rack_alpha : 0) + c->K * b) + c->K * p->gamma;
    o->link_bytes += c->K;
  }
  return c->N < 2 ? 0 : t;
}

/* Tree edges that leave rack k (the heap tree of tree.c): the most over
 * the racks, as flows through one uplink in one direction. */
static int tree_rack_flows(const sg_cost_case_t *c) {
  int most = 0;
  for (int k = 0; c->rack > 0 && k * c->rack < c->N; k++) {
    int out = 0, in = 0;
    for (int r = k * c->rack; r < (k + 1) * c->rack && r < c->N; r++) {
      if (r > 0 && sg_cost_cross(c, r, (r - 1) / 2)) out++;
      for (int ch = 2 * r + 1; ch <= 2 * r + 2 && ch < c->N; ch++) in += sg_cost_cross(c, r, ch);
    }
    if (out > most) most = out;
    if (in > most) most = in;
  }
  return most;
}

/* Pipelined binary tree (tree.c) on the heap of depth D = floor(log2 N),
 * whose deepest level holds L = N - 2^D + 1 ranks.  A rank posts the
 * receives of SG_AR_DEPTH_DEFAULT (d) segments ahead and the link shares
 * its bandwidth among the flows in it, so d segments arrive together:
 * the pipeline's unit is M = min(K, d m), S = ceil(K/M) of them.  A rank
 * takes its two children's units through its own link (the earlier
 * child's while the later one's still comes: max(later + 1, earlier + 2)
 * unit times M beta after them) and sends one up; down, it sends each
 * unit to its c children, c unit times.  The first unit reaches the root
 * 2 a level, 2D, less 1 where the deepest level is not full (L < 2^D)
 * and 1 more where it does not fill the root's left half (L < 2^(D-1));
 * the last reaches the deepest rank 2 a level after the root sent it,
 * less 1 where that rank is an only child (L = 1, N = 2^D); between
 * them, the root's link takes 2K in and sends 2K.  Whole:
 * 2(D+S-1) alpha + (4(D-1) - [L < 2^D] - [L < 2^(D-1)] - [L = 1]) M beta
 * + 4K beta + (D+S-1) 2M gamma, 3 M beta less than 4(D+S-1) M beta at a
 * power of two; N = 2 (one child): 2S alpha + 2K beta + S M gamma. */
static double tree(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  if (c->N < 2 || !(c->K > 0)) return o->link_bytes = o->cpu_bytes = 0, 0;
  double m = (c->segment > 0 ? c->segment : SG_AR_SEGMENT_DEFAULT) * SG_AR_DEPTH_DEFAULT;
  if (m > c->K) m = c->K;
  int D = 0;
  while (2 << D <= c->N) D++;
  int L = c->N - (1 << D) + 1;
  double S = ceil(c->K / m), ch = c->N > 2 ? 2 : 1, stages = D + S - 1;
  double ends = c->N > 2 ? 4.0 * (D - 1) - (L < 1 << D) - (L < 1 << (D - 1)) - (L == 1) : 0;
  int flows = tree_rack_flows(c);
  double b = p->beta * sg_cost_mult(c->slow) * (flows ? sg_cost_uplink(c, flows) : 1);
  double alpha = p->alpha + (flows ? c->rack_alpha : 0);
  o->link_bytes = (ch + 1) * c->K;
  o->cpu_bytes = 4 * (c->N - 1) * c->K;
  return stages * (2 * alpha + ch * m * p->gamma) + (ends * m + 2 * ch * c->K) * b;
}

/* A ring of n places over k bytes (one phase: half, both: whole). */
static double ring_part(double n, double k, double alpha, double beta, double gamma, int whole) {
  if (n < 2) return 0;
  double f = (n - 1) / n;
  return (whole ? 2 : 1) * ((n - 1) * alpha + f * k * beta) + f * k * gamma;
}

/* Hierarchical (hier.c), G ranks per group, m = floor(N/G) groups, x = N
 * - mG extra ranks: reduce-scatter inside (G-1 steps of K/G, reduced),
 * a whole ring across the m groups on K/G, allgather inside; the extra
 * ranks fold in and out as rhd's do.  Two-level: a group inside a rack
 * keeps its phases off the uplinks; the rings across leave each rack with
 * min(G, rack) flows at once. */
static double hier(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  int n = c->N, g = c->group > 0 && c->group < n ? c->group : n, m = n / g, x = n - m * g;
  double b = p->beta * sg_cost_mult(c->slow), K = c->K;
  int in_x = c->rack > 0 && g > c->rack, across_x = c->rack > 0 && m > 1;
  double a_in = p->alpha + (in_x ? c->rack_alpha : 0), b_in = b * (in_x ? sg_cost_uplink(c, 1) : 1);
  double a_x = p->alpha + (across_x ? c->rack_alpha : 0);
  double b_x = b * (across_x ? sg_cost_uplink(c, g < c->rack ? g : c->rack) : 1);
  if (n < 2) return o->link_bytes = o->cpu_bytes = 0, 0;
  double t = ring_part(g, K, a_in, b_in, p->gamma, 1) + ring_part(m, K / g, a_x, b_x, p->gamma, 1);
  o->link_bytes = 2.0 * (g - 1) / g * K + (m > 1 ? 2.0 * (m - 1) / m * K / g : 0);
  o->cpu_bytes = 4.0 * m * (g - 1) * K + 4.0 * (m - 1) * K + 4.0 * x * K;
  if (x > 0) {
    t += 2 * (a_x + K * b) + K * p->gamma;
    o->link_bytes += K;
  }
  return t;
}

/* The barrier before every sum (allreduce_engine.c, grad_then_reduce:
 * sg_barrier, MPI_Barrier under simulation): ceil(log2 N) rounds of one
 * message each (the transports' dissemination barrier; Open MPI's and
 * SMPI's recursive doubling at a power of two), a round leaving a rack
 * when N spans racks.  Not in the bench's runs (bench-allreduce times
 * the sum alone) nor with overlap (no barrier). */
static double barrier(const sg_cost_case_t *c, const sg_cost_params_t *p) {
  if (c->N < 2 || c->overlap || !c->engine || strcmp(c->engine, "allreduce")) return 0;
  double rounds = ceil(log2((double)c->N));
  return rounds * (p->alpha + (c->rack > 0 && c->N > c->rack ? c->rack_alpha : 0));
}

/* native is Open MPI's choice: the ring's line, the bound it cannot beat
 * on bytes. */
double sg_ar_cost(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  const char *v = c->variant ? c->variant : "";
  double t;
  if (!strcmp(v, "ring") || !strcmp(v, "native")) t = ring(c, p, o);
  else if (!strcmp(v, "rhd")) t = rhd(c, p, o);
  else if (!strcmp(v, "tree")) t = tree(c, p, o);
  else if (!strcmp(v, "hier")) t = hier(c, p, o);
  else return -1;
  return t + barrier(c, p);
}

/* The run's case: algorithm (`impl` in runs recorded before it had that
 * name), hier's group, tree's segment (0: their defaults) and overlap. */
static void ar_cost_read(const sg_opts_t *o, sg_cost_case_t *c) {
  int64_t group = 0, segment = 0;
  int overlap = 0;
  c->variant = sg_opts_str_or(o, "algorithm", sg_opts_str_or(o, "impl", ""));
  if (sg_opts_int_or(o, "group", 0, &group) < 0) group = 0;
  if (sg_opts_int_or(o, "segment", 0, &segment) < 0) segment = 0;
  c->group = (int)group, c->segment = (double)segment;
  if (sg_opts_has(o, "overlap") && sg_opts_bool(o, "overlap", &overlap) < 0) overlap = 0;
  c->overlap = overlap;
}

/* The algorithm's name.  ring, rhd, tree and hier run over either
 * transport: a run's name says MPI's (native is MPI's only); a what-if
 * hier names its group size. */
static void ar_cost_label(const sg_cost_case_t *c, char *out, size_t cap) {
  const char *v = c->variant ? c->variant : "";
  size_t n;
  snprintf(out, cap, "%s", v[0] ? v : "allreduce");
  n = strlen(out);
  if (c->transport && !strcmp(c->transport, "mpi") && strcmp(v, "native"))
    snprintf(out + n, cap - n, "-mpi");
  else if (!c->transport && !strcmp(v, "hier"))
    snprintf(out + n, cap - n, "-G%d", c->group < c->N ? c->group : c->N);
}

static const sg_cost_whatif_t ar_what_if[] = {
    {"ring", "ring", 0, 1}, {"rhd", "rhd", 0, 2},       {"tree", "tree", 0, 3},
    {"hier", "hier", 0, 4}, {"native", "native", 0, 0}, {NULL, NULL, 0, 0}};

const sg_cost_info_t sg_ar_cost_info = {
    .formula = sg_ar_cost, .read = ar_cost_read, .label = ar_cost_label, .what_if = ar_what_if};
