/* ps.h - `ps`: the parameter server (sync, ssp, async; sharded; sparse).
 *
 * Ranks 0..S-1 are servers, ranks S..S+N-1 are workers.
 * Server k owns elements [off_k, off_k + cnt_k) of the flat parameter
 * vector: equal element counts, so equal bytes, rounded to 16 floats
 * (ps_shard_range).  Balancing by bytes, not by layer, is what makes the
 * servers' links equally loaded: a 784x128 layer and a 10-float bias would
 * otherwise land on different servers with 10000x different traffic.
 * Each server creates the initial parameters from the seed (every server
 * the same vector, each keeping its shard) and owns an optimizer for its
 * shard: the update is elementwise, so its slice equals `local`'s slice.
 *
 * One step of worker w (rank S+w), all modes:
 *
 *     g = grad(params, batch_w(t))                      compute
 *     for k in shards:  PUSH(k, t, g[off_k : off_k+cnt_k])
 *     for k in shards:  PULL(k, t+1)  -> PARAMS(k)      params[off_k...] = reply
 *
 * What a server does with the messages is the mode:
 *
 *   sync   the server keeps the N pushes of step t in one slot per worker;
 *          when the N-th arrives it sums them in worker order, scales by
 *          1/N and applies sg_optim_apply(step t), then answers the held
 *          PULL(t+1) of every worker.  That is `local` with batch N*b, up
 *          to the order of the float sums.  Example, N=2, S=1:
 *
 *            worker 0:  PUSH(0) PULL(1) .......... PARAMS  PUSH(1) PULL(2) ...
 *            worker 1:  ..... PUSH(0) PULL(1) ...  PARAMS  PUSH(1) ...
 *            server:          [both PUSH(0) in] apply(0) -> PARAMS to 0, 1
 *
 *   ssp(s) every push is applied on arrival, scaled by 1/N (so that with
 *          plain SGD the N pushes of one clock add up to one sync step);
 *          a PULL(c) is held until every worker still training has pushed
 *          at least c - s gradients: no worker runs more than s clocks
 *          ahead of the slowest.  s = 0 is bulk-synchronous.
 *          The bound is a floor on freshness, as in SSP (Ho et al. 2013):
 *          a pull answered late may also see pushes of the current clock
 *          from faster workers, so ssp(0) is not bit-equal to sync even
 *          with plain SGD.
 *
 *   async  as ssp without the bound: PULL is answered at once.  Each push
 *          is scaled by 1/N as in ssp, which keeps `lr` meaning the same
 *          in every mode (one round of N pushes = one sync step); classic
 *          Downpour-style async applies each gradient with the full lr,
 *          which is ssp/async here with lr*N, and is unstable with stale
 *          gradients at the lrs that work for sync.
 *          A worker silent for `deadline` seconds is declared dead (an
 *          info record names it); the others go on.  The server's probe
 *          waits only until the next live worker's deadline, so that
 *          happens one deadline after the worker's last message even when
 *          no other message comes (the others finished, or wait at the
 *          start barrier).  A worker that is stopped rather than dead
 *          never exits: the harness fails the run once it has been
 *          stopped 1.5 deadlines (harness/run/run.h).
 *
 * End: sync runs the quota (every worker the same steps).  ssp and async
 * end by the servers: a shard stops at N x the sync step count of applied
 * updates or at time_budget, answers every pull with STOP, and worker 0's
 * FINAL pull returns the parameters after the last update (ps_server.c).
 *
 * Staleness (steps.staleness) = updates the shard applied between the
 * read of the params a gradient was computed on and the gradient's own
 * update (sync: always 0; async with N lock-stepped workers: about N-1).
 * The worker's record for step t carries the largest over the shards.
 *
 * Slices (sync, dense, `slice` bytes, shards of at least `slice_from`):
 * a worker pushes shard k as C slices back to back; a server applies
 * slice c as soon as all N pushed it and sends it back (PARAMS(t+1)) at
 * once, so replies go out while later slices still come in.  After the
 * first PULL the pushes ask for the slices.  Bit-equal to whole shards:
 * the same sums in the same order per element (ps_server.c, slices).
 *
 * Sparse (sparse: true), softmax on CSR input: a worker pulls only the
 * coordinates its next batch reads (sg_workload_sparse_coords), computes
 * the gradient at exactly those (sg_workload_grad_sparse) and pushes them
 * as (index, value) pairs; with plain SGD the server updates only the
 * pushed coordinates (ps_server.c, apply_at).  Other models: dense pull,
 * dense gradient, nonzeros pushed.  Worker 0 pulls everything when it
 * evaluates.  Bytes per worker step: 8 B per coordinate each way.
 *
 * Compression (compress: fp16|topk, dense path only): the push carries
 * IEEE halves, or per shard the k = ceil(topk * cnt_k) largest entries of
 * gradient + residual as (index, value) pairs, the worker keeping the rest
 * as its residual (error feedback); the server sums in float32 and refuses
 * a push of another form or of more than k pairs.  Pulls stay float32.
 *
 * Bytes per step, K = model bytes, dense: each worker sends K (+64 B
 * header per shard) and receives K; server k receives N*K/S and sends
 * N*K/S: its link carries 2*N*K/S, the busiest link when S < N.
 *
 * Failure: a server's receive waits at most `deadline` seconds; in sync
 * and ssp a silent worker is then named ("no PUSH for step 12 from worker
 * rank 5") and the run fails.  Workers wait 1.15*deadline for PARAMS
 * (level 1 of deadline.h), so the server, which knows who is missing,
 * reports first.  When EVERY worker is
 * silent they are most likely all stuck on another server; this server
 * then waits a second deadline, and the workers name the server
 * they wait on (at 1.15).  Either way the run fails within two deadlines.
 */
#ifndef PS_H
#define PS_H

#include <stdint.h>

#include "engine.h"

struct sg_rdev;

extern const sg_engine_t sg_engine_ps;

typedef enum { PS_SYNC = 0, PS_SSP = 1, PS_ASYNC = 2 } ps_mode_t;

/* compress: how a dense worker pushes its gradient (docs/engines/ps.md). */
typedef enum { PS_COMPRESS_NONE = 0, PS_COMPRESS_FP16 = 1, PS_COMPRESS_TOPK = 2 } ps_compress_t;

/* What a server saw, for tests (the engine reports the same through
 * sg_records_info: ps.server<k>.rejected, ps.dead_worker). */
enum { PS_STATS_WORKERS = 16 };

typedef struct ps_server_stats {
  int64_t rejected;     /* messages rejected (malformed, out of range, ...) */
  int64_t updates;      /* optimizer updates applied to the shard */
  int64_t dropped;      /* ssp/async: pushes that arrived after the stop */
  int64_t pushes[PS_STATS_WORKERS]; /* pushes received from workers 0..15 */
  double train_s;       /* start barrier to the stop (sync: the last update) */
  int dead_workers;     /* async: workers declared dead */
  int ignored_stop;     /* ssp/async: workers still training a deadline after the stop */
  int slices;           /* slices of the shard (1: unsliced) */
  int max_lead;         /* sliced: the most slices a push ran ahead of the
                           slices all N had pushed (< slice_window) */
  int64_t max_ahead;    /* largest (clock of a released pull) - (pushes of
                           the slowest worker still training) */
  char first_reject[200]; /* "from rank 2: sparse index ..." (empty: none) */
} ps_server_stats_t;

typedef struct ps_cfg {
  ps_mode_t mode;
  int staleness; /* ssp bound (sync behaves as 0) */
  int servers;   /* S */
  int workers;   /* N */
  int sparse;
  ps_compress_t compress; /* dense path only (sparse refuses it) */
  double topk;            /* compress topk: fraction of a shard's entries pushed */
  double time_budget; /* ssp/async: seconds of training at most, 0 = none */
  /* sync, dense (none or fp16): bytes per slice of a shard (ps_slice_elems),
   * 0 = the whole shard in one message; 0 in the other modes. */
  uint64_t slice_bytes;
  uint64_t slice_from;  /* shards below this many bytes go whole */
  int slice_window;     /* slices per server a worker has in flight, 0 = all */
  /* A simulation with compute modeled, dense payloads: message buffers
   * fold their payloads across the simulated ranks and keep their headers
   * (sg_msg_malloc_framed, core/msgbuf.h); 0 everywhere else. */
  int fold;
  /* Tests only: the server adds worker 0's sync push twice (a planted bug
   * the equivalence check must catch).  Never set by a setting. */
  int plant_double_count;
  /* Tests only: a sliced server applies a slice once N-1 workers pushed it
   * and ignores the last push (the equivalence check must catch it). */
  int plant_early_slice;
  /* Tests only: worker 1 takes no STOP and goes on pushing (the servers
   * must end without it, one deadline after their stop). */
  int plant_ignore_stop;
  /* Tests only: server k writes its counts to stats[k] when it ends. */
  ps_server_stats_t *stats;
  /* device: cuda workers (ps_worker.c, core/cuda/replica.h): floats per
   * staged chunk of the gradient's download and the parameters' upload;
   * 0 = PS_DEV_CHUNK.  Tests only: dev_twin makes worker w's device (the
   * CPU twin's simulated one) for a workload on the CPU, and dev_plant
   * plants stage_plan.h's one-way bug in it. */
  size_t dev_chunk;
  int (*dev_twin)(struct sg_rdev *out, size_t chunk, int worker);
  int dev_plant;
} ps_cfg_t;

#define PS_DEV_CHUNK ((size_t)1 << 20) /* 4 MiB of floats, as allreduce's stage_chunk */

/* Read mode, staleness, servers, sparse, compress, topk, time_budget
 * from the run's settings. */
int ps_cfg_from_opts(ps_cfg_t *cfg, const sg_opts_t *o, int workers);

/* The slice bytes a run with n parameters uses (0: whole shards): the
 * `slice` setting when the largest shard holds at least `slice_from`
 * bytes.  Every rank computes the same from the same settings. */
uint64_t ps_slicing(const ps_cfg_t *cfg, size_t n);

/* The loops of one rank: ctx->rank < cfg->servers is server ctx->rank. */
int ps_server_run(sg_rank_ctx_t *ctx, const ps_cfg_t *cfg);
int ps_worker_run(sg_rank_ctx_t *ctx, const ps_cfg_t *cfg);

/* Here, not in the engine table's file, so that the loops (ps_server.c)
 * use it without depending on the table that calls them. */
static inline const char *ps_mode_name(ps_mode_t m) {
  switch (m) {
  case PS_SYNC: return "sync";
  case PS_SSP: return "ssp";
  case PS_ASYNC: return "async";
  }
  return "?";
}

#endif
