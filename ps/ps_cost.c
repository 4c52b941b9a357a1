/* ps_cost.c - the parameter server's alpha-beta-gamma formula (core/cost.h;
 * docs/model.md derives it). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "ps.h"

/* Parameter server: each of S servers takes N pushes of K/S (incast on
 * its link) while each worker sends its K through its own link, so a
 * phase lasts as long as the slower of the two; it sums them, then
 * answers N pulls of K/S the same way.  Whole shards: a sync server
 * answers only after the N-th push, but its N replies do not end
 * together: the first one ends early (measured: the next step's pushes
 * begin while the replies still go out, docs/model.md), and that worker's
 * next push crosses the server's link during the other replies.  So the
 * out phase carries N K/S and the in phase after it (N-1) K/S (one push
 * when N = 1).  A server takes one request at a time (ps_server.c,
 * serve_one: one receive, then the next), and every worker sends it two
 * per step, its PUSH and its PULL (ps_worker.c, exchange), so the in
 * phase pays 2N alpha, one after another, where the replies pay one:
 * (2N + 1) alpha + T_out + T_in + N K/S gamma.  A worker computes while
 * the server still answers and hears the others: o->overlap_s.  Under
 * MPI (c->eager > 0) the replies are blocking sends, so the in phase
 * carries all N pushes; shards below the eager size are answered at once,
 * the replies end together and nothing hides, and with S > 1 the in phase
 * carries (S - 1)/S K beta more where the bytes move only once received
 * (SimGrid's own thresholds): the worker pushing last at one server
 * pushes last at all, and all S take its shards through its link at once
 * (docs/model.md, "Under MPI").  Sliced
 * (sync, C > 1 slices of a shard): slice c goes out while slice c+1 comes
 * in, so the link's two directions overlap and only the last slice's
 * reply (and its sum) follows the last push: 2 alpha + T (1 + 1/C) +
 * N K/S gamma / C.  Sparse: K is the measured bytes per worker step.
 * Two-level network: the servers sit outside the workers' racks, so all
 * of a rack's workers cross its uplink at once (sg_cost_uplink of rack
 * flows). */
static double sg_ps_cost(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double s = c->S > 0 ? c->S : 1, per = c->N * c->K / s;
  /* sync and ssp wait for the slowest worker, async only for its own link */
  int async = c->variant && !strcmp(c->variant, "async");
  double ws = async ? sg_cost_mult(c->own) : sg_cost_mult(c->slow);
  ws *= sg_cost_uplink(c, c->rack); /* two-level: a rack's workers share its uplink */
  double hub = per * p->beta * sg_cost_mult(c->hub), worker = c->K * p->beta * ws;
  double T = hub > worker ? hub : worker;
  o->link_bytes = per;
  o->cpu_bytes = 4 * c->N * c->K; /* workers 2K each, servers 2NK/S each */
  /* the server's requests, one at a time: each worker's PUSH and PULL */
  double requests = 2.0 * (c->N > 0 ? c->N : 1) * p->alpha;
  /* async: no barrier between a push and the next pull, so the server's
   * link carries pushes in and pulls out at once (full duplex): one phase */
  if (async) return requests + T + per * p->gamma;
  int sliced = c->slice > 0 && !c->sparse && c->variant && !strcmp(c->variant, "sync");
  double C = sliced ? ceil(c->K / s / c->slice) : 1;
  if (C > 1) return 2 * p->alpha + T * (1 + 1 / C) + per * p->gamma / C;
  /* With an eager size (MPI): replies below it leave at once and end
   * together, so no worker pushes early nor computes while the server
   * still sends; larger ones are blocking sends in turn, during which the
   * server takes no push.  Either way all N pushes follow the replies. */
  int at_once = c->eager > 0 && c->K / s < c->eager;
  double after = c->N > 1 && c->eager <= 0 ? (c->N - 1) / (double)c->N : 1; /* of the hub's bytes */
  double hub_in = hub * after, T_in = hub_in > worker ? hub_in : worker;
  /* Replies below the eager size whose bytes move only once received
   * (SimGrid's own thresholds): the worker whose push was a server's N-th
   * sends its PULL after the release, so its replies leave last (by
   * microseconds), it pushes last, and every server, taking one push at a
   * time, takes it last, all S at once: its S shards cross its own link
   * together, K beta where the line has K/S beta, (S - 1)/S of a
   * worker's K more.  Sent eagerly (bytes moving at once) no server
   * takes them in turn and they do not meet. */
  if (at_once && c->eager_matched && s > 1) {
    double tied = hub_in + worker * (s - 1) / s;
    T_in = tied > worker ? tied : worker;
  }
  /* A worker's compute runs while the server answers and hears the others:
   * all it must fit in is the in phase less its own pushes (the worker
   * answered last still pushes before the server has heard the rest).
   * With S servers it computes only once all S have answered it, and
   * server k answers from worker k N/S on (ps_server.c, release_all), so
   * the first worker to hold all S replies holds them (S - 1) N/S replies
   * into the out phase, and the last pushes end that much later: of the
   * window, 1/S is left, (N/S - 1) K/S beta (all of it at S = 1). */
  o->overlap_s = T_in > worker && !at_once ? (T_in - worker) / s : 0;
  return p->alpha + requests + T + T_in + per * p->gamma;
}

/* The run's case: mode, servers, sparse, and the slice bytes the run used
 * (ps_slicing: its `slice` on the dense sync path when a shard is at
 * least `slice_from`; compress topk never slices).  Absent keys read as
 * the options of a run recorded before they existed: slice 0 (whole
 * shards), one server, dense. */
static void ps_cost_read(const sg_opts_t *o, sg_cost_case_t *c) {
  int64_t S = 1, slice = 0, from = 0;
  int sparse = 0;
  c->variant = sg_opts_str_or(o, "mode", "");
  S = sg_setting_int_or(o, sg_engine_ps.options, "servers");
  if (sg_opts_has(o, "sparse") && sg_opts_bool(o, "sparse", &sparse) < 0) sparse = 0;
  if (sg_opts_int_or(o, "slice", 0, &slice) < 0) slice = 0;
  if (sg_opts_int_or(o, "slice_from", 0, &from) < 0) from = 0;
  c->S = (int)S, c->sparse = sparse;
  int sync = !strcmp(c->variant, "sync"), topk = !strcmp(sg_opts_str_or(o, "compress", ""), "topk");
  double shard = c->K / (c->S > 0 ? c->S : 1);
  c->slice = sync && !sparse && !topk && shard >= (double)from ? (double)slice : 0;
}

/* "ps-sync-S2", "ps-async-S1-sparse". */
static void ps_cost_label(const sg_cost_case_t *c, char *out, size_t cap) {
  snprintf(out, cap, "ps-%s-S%d%s", c->variant ? c->variant : "", c->S, c->sparse ? "-sparse" : "");
}

static const sg_cost_whatif_t ps_what_if[] = {
    {"ps", "sync", 0, 5}, {"ps-async", "async", 0, 0}, {NULL, NULL, 0, 0}};

const sg_cost_info_t sg_ps_cost_info = {
    .formula = sg_ps_cost, .read = ps_cost_read, .label = ps_cost_label, .what_if = ps_what_if};
