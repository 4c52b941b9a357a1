/* gossip_engine.c - `gossip`: decentralized averaging, no global barrier.
 *
 * Schedule (all N ranks are workers; rank 0 also evaluates):
 *
 *   every rank: params = init(seed)  (a pure function of the seed: no
 *   broadcast), one barrier, then the training clock starts
 *   every step t, on every rank r, with its own momentum state:
 *     g_r = grad(params_r, batch_t of worker r)           compute_s
 *     params_r = apply(params_r, g_r, t)
 *     after every gossip_every-th step (round k = (t+1)/gossip_every - 1):
 *       p = partner(topology, N, k, seed, r)   (gossip.h; -1 = sit out)
 *       send params_r to p, receive params_p   wait_s + comm_s
 *       params_r = (params_r + params_p) / 2   -- p computes the same sum
 *                                                 in the other order, so
 *                                                 the pair ends identical
 *   after the last step: rank 0 gathers every params_r and evaluates
 *   their mean (the last eval record); earlier eval records are rank 0's
 *   own replica.
 *
 * Deadlock-freedom: the round-k matching is known to both sides without a
 * message, each rank runs its rounds in order and in round k talks only
 * to its round-k partner, and the pairwise exchange posts the send before
 * it waits for the receive.  Take the smallest round k in which some rank
 * waits for ever: its partner has finished every round < k (minimality)
 * and cannot pass round k without this rank, so it is in round k too,
 * both sends are posted, and both receives complete: a contradiction.
 * A dead partner is a receive that times out after one deadline and
 * names the rank (transport.h).
 *
 * Bytes per rank per gossip round: K = 4 * nparams sent and K received
 * (0 when sitting out); at the end N-1 models go to rank 0.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "engine.h"
#include "err.h"
#include "msgbuf.h"
#include "gossip.h"

#define GS_TAG_ROUNDS 16384        /* round k uses tag k mod this */
#define GS_TAG_FINAL GS_TAG_ROUNDS /* the final gather */

/* clang-format off */
static const sg_setting_t gs_options[] = {
  {"topology", SG_T_ENUM, "ring", "gossip: whom a worker averages with each round: ring (left and right neighbour in turn), random (a seeded random matching per round), complete (round robin over every peer)", SG_GOSSIP_TOPOLOGIES, 0, 0, SG_S_ENGINE},
  {"gossip_every", SG_T_INT, "1", "gossip: local steps between two pairwise averagings", NULL, 1, 1 << 30, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

typedef struct gs {
  sg_rank_ctx_t *ctx;
  sg_gossip_topo_t topo;
  int64_t every;
  uint64_t seed;
  int no_average; /* _plant_bug gossip-no-average: exchange but keep my model (tests) */
  int keep_buffers; /* a send was left in flight after an error */
  size_t n;
  float *params, *peer;
} gs_t;


/* One pairwise averaging with this round's partner.  The send is posted
 * first (deadlock-freedom, above); the time until the partner's model is
 * there is waiting, the rest (the transfer and the average) is comm. */
static int gs_exchange(gs_t *g, int64_t round, sg_step_rec_t *s) {
  sg_comm_t *c = g->ctx->comm;
  int p = sg_gossip_partner(g->topo, c->size, round, g->seed, c->rank);
  int tag = (int)(round % GS_TAG_ROUNDS), rc;
  size_t len = g->n * sizeof *g->params;
  sg_req_t *req = NULL;
  sg_status_t st;
  if (p < 0) return SG_OK;
  double t0 = sg_now();
  SG_TRY(sg_isend(c, p, tag, g->params, len, &req));
  SG_TRY(sg_probe(c, p, tag, &st));
  double t1 = sg_now();
  SG_TRY(sg_recv(c, p, tag, g->peer, len, &st));
  SG_TRY(sg_wait(c, &req, NULL));
  if (st.bytes != len) {
    rc = sg_err_set(SG_EPROTO, "gossip: rank %d sent %zu bytes, expected %zu", p, st.bytes, len);
    goto fail;
  }
  if (!g->no_average)
    for (size_t i = 0; i < g->n; i++) g->params[i] = 0.5f * (g->params[i] + g->peer[i]);
  s->wait_s += t1 - t0;
  s->comm_s += sg_now() - t1;
  return SG_OK;
fail:
  /* Not waited for: a wait on a send to a dead partner could block another
   * deadline and replace the message that names it.  The transport may
   * still read params, so the run keeps both buffers until it exits. */
  g->keep_buffers = req != NULL;
  return rc;
}

/* The final model: rank 0 sums every rank's params (in rank order) and
 * divides by N; the others send theirs. */
static int gs_final_average(gs_t *g) {
  sg_comm_t *c = g->ctx->comm;
  size_t len = g->n * sizeof *g->params;
  sg_status_t st;
  if (c->size < 2) return SG_OK;
  if (c->rank != 0) return sg_send(c, 0, GS_TAG_FINAL, g->params, len);
  for (int r = 1; r < c->size; r++) {
    SG_CHECK(sg_recv(c, r, GS_TAG_FINAL, g->peer, len, &st));
    if (st.bytes != len)
      return sg_err_set(SG_EPROTO, "gossip: rank %d sent a %zu-byte model, expected %zu", r,
                        st.bytes, len);
    for (size_t i = 0; i < g->n; i++) g->params[i] += g->peer[i];
  }
  const float scale = 1.0f / (float)c->size;
  for (size_t i = 0; i < g->n; i++) g->params[i] *= scale;
  return SG_OK;
}

/* Gossip after this step?  The last step always ends in the final
 * average instead. */
static int gs_communicate(gs_t *g, int64_t step, int64_t total, sg_step_rec_t *s) {
  if (step + 1 == total) {
    double t = sg_now();
    SG_CHECK(gs_final_average(g));
    s->comm_s += sg_now() - t;
    return SG_OK;
  }
  if ((step + 1) % g->every) return SG_OK;
  return gs_exchange(g, (step + 1) / g->every - 1, s);
}

static int gs_setup(gs_t *g, sg_rank_ctx_t *ctx) {
  int64_t every, seed;
  g->ctx = ctx;
  const char *topo;
  SG_CHECK(sg_setting_str(ctx->opts, gs_options, "topology", &topo));
  g->topo = (sg_gossip_topo_t)sg_gossip_topo(topo);
  if ((int)g->topo < 0)
    return sg_err_set(SG_ECONFIG, "topology: must be one of %s", SG_GOSSIP_TOPOLOGIES);
  SG_CHECK(sg_setting_int(ctx->opts, gs_options, "gossip_every", &every));
  SG_CHECK(sg_setting_int(ctx->opts, gs_options, "seed", &seed));
  if (every < 1) return sg_err_set(SG_ECONFIG, "gossip_every: must be >= 1");
  g->every = every;
  g->seed = (uint64_t)seed;
  /* tests only: `sgdlab run --plant-bug gossip-no-average` */
  g->no_average = !strcmp(sg_opts_str_or(ctx->opts, "_plant_bug", ""), "gossip-no-average");
  return SG_OK;
}

static uint64_t bytes_moved(const sg_comm_t *c, uint64_t *recvd) {
  *recvd = sg_comm_bytes_recvd(c);
  return sg_comm_bytes_sent(c);
}

/* The training loop proper: step, gossip, record. */
static int gs_train(gs_t *g, sg_workload_t *wl, sg_optim_t *opt, sg_trainlog_t *log) {
  sg_rank_ctx_t *ctx = g->ctx;
  const int root = ctx->rank == 0;
  float *grad = sg_fold_alloc(g->n * sizeof *grad); /* core/msgbuf.h */
  int64_t total = sg_workload_total_steps(wl), spe = sg_workload_steps_per_epoch(wl);
  int rc;
  if (!grad) return sg_err_set(SG_ENOMEM, "gossip: no memory for %zu parameters", g->n);
  for (int64_t step = 0; step < total; step++) {
    sg_step_rec_t s = {.step = step, .epoch = (int32_t)(step / spe),
                       .t_start = sg_records_elapsed(ctx->rec), .staleness = -1};
    uint64_t r0, s0 = bytes_moved(ctx->comm, &r0), r1;
    double t = sg_now();
    sg_engine_delay(ctx, step);
    SG_TRY(sg_workload_grad(wl, g->params, grad, step, &s.loss));
    sg_optim_apply(opt, g->params, grad, step);
    s.compute_s = sg_now() - t;
    SG_TRY(gs_communicate(g, step, total, &s));
    s.bytes_sent = bytes_moved(ctx->comm, &r1) - s0;
    s.bytes_recv = r1 - r0;
    SG_TRY(sg_trainlog_step(log, &s, root ? g->params : NULL));
  }
  if (root) SG_TRY(sg_engine_dump_params(ctx, g->params, g->n));
  rc = SG_OK;
fail:
  sg_fold_free(grad);
  return rc;
}

static int gs_run(sg_rank_ctx_t *ctx) {
  gs_t g = {0};
  sg_workload_t *wl = NULL;
  sg_optim_t *opt = NULL;
  sg_trainlog_t *log = NULL;
  const int root = ctx->rank == 0;
  int rc;

  SG_TRY(gs_setup(&g, ctx));
  SG_TRY(sg_workload_new(&wl, ctx->opts, ctx->rank, ctx->size, root ? SG_WL_ALL : SG_WL_TRAIN));
  g.n = sg_workload_nparams(wl);
  /* vectors nobody reads under compute: modeled (core/msgbuf.h) */
  g.params = sg_fold_alloc(g.n * sizeof *g.params);
  g.peer = sg_fold_alloc(g.n * sizeof *g.peer);
  if (!g.params || !g.peer) {
    rc = sg_err_set(SG_ENOMEM, "gossip: no memory for %zu parameters", g.n);
    goto fail;
  }
  SG_TRY(sg_workload_init_params(wl, g.params));
  SG_TRY(sg_workload_optim_new(wl, ctx->opts, &opt));
  if (root) {
    SG_TRY(sg_records_info(ctx->rec, "workload", sg_workload_describe(wl)));
    SG_TRY(sg_records_info(ctx->rec, "blas", sg_blas_info()));
  }
  SG_TRY(sg_trainlog_new(&log, ctx, wl, root));
  /* The clock starts when every rank has loaded its data. */
  SG_TRY(sg_barrier(ctx->comm));
  SG_TRY(sg_trainlog_begin(log, root ? g.params : NULL));
  SG_TRY(gs_train(&g, wl, opt, log));
  rc = SG_OK;
fail:
  sg_trainlog_destroy(&log);
  sg_optim_destroy(&opt);
  sg_workload_destroy(&wl);
  if (!g.keep_buffers) {
    sg_fold_free(g.params);
    sg_fold_free(g.peer);
  }
  return rc;
}

const sg_engine_t sg_engine_gossip = {
    .name = "gossip",
    .summary = "decentralized: every worker averages its model with one peer per round (ring, random or complete schedule), no global barrier; the mean model at the end",
    .options = gs_options,
    .layout = NULL,
    .devices = "|cpu|", /* the harness refuses device: cuda */
    .role = NULL,
    .check_transport = NULL,
    .run = gs_run,
};
