/* cost.h - what an engine's cost formula sees and says (the alpha-beta-
 * gamma model of one step's communication, docs/model.md).
 *
 * Each engine's formulas live with the engine, behind sg_engine_t's
 * `cost` hook (core/engine.h): allreduce/allreduce_cost.c,
 * ps/ps_cost.c, mapreduce/mapreduce_cost.c.  The harness holds the table
 * that calls them, the fit of the constants and `sgdlab model`
 * (harness/model/cost_model.h).
 */
#ifndef SG_COST_H
#define SG_COST_H

#include <stddef.h>

#include "opts.h"

typedef struct sg_cost_params {
  double alpha, beta, gamma;
  double kappa, cores; /* kappa 0: the CPU never binds */
} sg_cost_params_t;

/* What the formulas need from a run (or a what-if case). */
typedef struct sg_cost_case {
  const char *engine; /* "allreduce", "ps", "mapreduce" (also bench-*) */
  const char *variant; /* ring|rhd|tree|hier|native; sync|ssp|async; flat|tree (broadcast) */
  int N;               /* workers / executors */
  int S;               /* ps: servers */
  int sparse;          /* ps: K is then the measured bytes per worker step */
  int tree_aggregate;  /* mapreduce: aggregate tree */
  int depth;           /* mapreduce: aggregate tree levels, driver included */
  double K;            /* bytes through the formula (model bytes, dense) */
  /* beta multipliers (fitted link's rate / this link's rate; 0 means 1):
   * the slowest link of the run's hosts and the slowest of the hub's
   * (ps servers, mapreduce driver; placement spread puts them first) */
  double slow, hub;
  double own; /* the median worker's link: what an async worker, who waits
               * for no other, sees (0 means 1) */
  double slice; /* ps sync, dense: bytes per slice of a shard the run used
                 * (its `slice` when the shard is at least `slice_from`);
                 * 0: whole shards */
  int group;      /* allreduce hier: ranks per group (0: N) */
  double segment; /* allreduce tree: bytes per pipeline segment (0: 1 MiB) */
  /* Two-level network (rack > 0): racks of `rack` consecutive ranks, each
   * under a switch whose uplink carries rack x link rate / oversub;
   * a message between racks costs rack_alpha more.  rack 0: flat. */
  int rack;
  double oversub;    /* 0 means 1 */
  double rack_alpha; /* seconds */
  /* The run's transport ("mpi", "zmq"); NULL in a case of `sgdlab model
   * --what-if`, which no run recorded.  Only the case's label reads it. */
  const char *transport;
  int overlap; /* allreduce: `overlap: true` (no barrier before the sum) */
  /* An MPI transport's eager size: bytes below which a send returns
   * before its bytes have gone (under SimGrid smpi/send-is-detached-thresh,
   * 64 KiB).  A sync ps server's replies below it leave at once and end
   * together; larger ones block it one after another, so it takes no push
   * while it replies.  0: neither (every reply in turn, and the first
   * worker's next push comes in during the others' replies, as measured
   * over ZeroMQ). */
  double eager;
  /* Below eager, a message's bytes still move only once its receive is
   * posted (SimGrid's own thresholds, simulate.eager: simgrid; `--eager
   * simgrid`): a sync ps server takes its pushes one at a time, and the
   * worker that pushes last at one server pushes last at all S, which
   * take its shards through its link at once.  0: they move when sent. */
  int eager_matched;
} sg_cost_case_t;

/* SimGrid 3.32's own eager size (smpi/send-is-detached-thresh's default),
 * the what-if's `--eager simgrid` */
#define SG_COST_SIMGRID_EAGER 65536.0

/* What a formula says about one step. */
typedef struct sg_cost_split {
  double link_s;     /* the links' time: alpha, beta, gamma terms */
  double cpu_s;      /* kappa * cpu_bytes / cores */
  double link_bytes; /* busiest link, one direction */
  double cpu_bytes;  /* sent + received by every process together */
  /* Seconds of link_s in which a worker's compute runs without holding
   * the step up (a sync ps: the server still answers and hears the other
   * workers), so the step is the hub's compute + link_s + max(0, the
   * worker's compute - overlap_s); 0: compute and communication add. */
  double overlap_s;
} sg_cost_split_t;

/* An engine's formula: the links' seconds of one step of c under p, with
 * o->link_bytes and o->cpu_bytes filled in; negative when the engine has
 * no formula for c's variant. */
typedef double (*sg_cost_fn)(const sg_cost_case_t *c, const sg_cost_params_t *p,
                             sg_cost_split_t *o);

/* A case `sgdlab model --what-if --engines` knows by name (besides
 * ENGINE:VARIANT). */
typedef struct sg_cost_whatif {
  const char *name;    /* "ps-async" */
  const char *variant; /* "async" */
  int tree_aggregate;  /* sets the case's tree_aggregate */
  /* Place in the default --engines list (1 first, across engines; equal
   * places in registry order); 0: named only. */
  int by_default;
} sg_cost_whatif_t;

/* Everything `sgdlab model` knows of an engine: the engine table's `cost`
 * (core/engine.h).  The harness reads a run's case, names it and lists
 * the what-if cases only through these. */
typedef struct sg_cost_info {
  sg_cost_fn formula;
  /* The engine's part of a recorded run's case from the run's options
   * (read back from runs.options_json): variant (pointing into o), S,
   * sparse, tree_aggregate, depth, slice, group, segment.  c->N and c->K
   * are set before.  NULL: variant "" and nothing else. */
  void (*read)(const sg_opts_t *o, sg_cost_case_t *c);
  /* The case's name in the model's tables ("ps-sync-S2", "ring-mpi");
   * NULL: its variant, or the engine's name when it has none. */
  void (*label)(const sg_cost_case_t *c, char *out, size_t cap);
  const sg_cost_whatif_t *what_if; /* {NULL}-terminated; NULL: none */
} sg_cost_info_t;

/* A multiplier that may be unset: m, or 1 when m is 0. */
static inline double sg_cost_mult(double m) { return m > 0 ? m : 1; }

/* Two-level network: whether ranks a and b sit in different racks. */
static inline int sg_cost_cross(const sg_cost_case_t *c, int a, int b) {
  return c->rack > 0 && a / c->rack != b / c->rack;
}

/* Two-level network: the beta factor of a phase in which `flows` flows of
 * equal bytes leave one rack at once through its uplink (rack x the link
 * rate / oversub); at least 1 (the rank's own link). */
static inline double sg_cost_uplink(const sg_cost_case_t *c, double flows) {
  if (c->rack <= 0) return 1;
  double f = flows * sg_cost_mult(c->oversub) / c->rack;
  return f > 1 ? f : 1;
}

#endif
