/* mapreduce.h - a Spark-like driver: broadcast / map / reduce.
 *
 * Rank 0 is the DRIVER, ranks 1..N are EXECUTORS (N = workers).  The driver
 * holds the only copy of the model and the optimizer; executors hold data
 * partitions and compute gradients.  One training step t is one Spark job:
 *
 *   1. broadcast   driver -> executors: the parameters (K bytes)
 *                  flat: the driver sends K to each of N executors.
 *                  tree: a binomial tree over ranks 0..N rooted at the
 *                  driver (like Spark's TorrentBroadcast, executors forward
 *                  what they got).  N = 6, ranks 0..6:
 *                      round 1: 0 -> 4
 *                      round 2: 0 -> 2, 4 -> 6
 *                      round 3: 0 -> 1, 2 -> 3, 4 -> 5
 *   2. map         the global batch of step t (B = N*b samples, exactly
 *                  `local`'s step-t batch with batch N*b) is cut into P
 *                  tasks (partitions; default P = N, any 1 <= P <= B) of
 *                  consecutive positions, sizes differing by at most 1:
 *                  with q = B / P and r = B % P, tasks 0..r-1 get q+1
 *                  samples, the others q.  N = 3, b = 64, P = 5 (B = 192):
 *                      task    0      1      2       3        4
 *                      slice   0..38  39..77 78..115 116..153 154..191
 *                      n_p     39     39     38      38       38
 *                  Every executor holds ONE workload (worker 0 of 1 with
 *                  batch B: the whole training set, loaded once) and
 *                  computes task p as sg_workload_grad_slice over its
 *                  slice, so any executor can run any task at no extra
 *                  cost.  The driver hands task ids to executors as they
 *                  come free: first each executor gets its "home" task
 *                  (p % N == executor - 1, Spark's preferred location),
 *                  then any executor that reports DONE gets the next
 *                  pending task, its own home tasks first, else the
 *                  highest pending task of another executor (the one its
 *                  home executor would reach last).
 *                  A slow executor therefore shows as driver wait_s, and
 *                  with P > N the others absorb its extra tasks.
 *                  An executor computes g_p, the mean gradient over its
 *                  task's n_p samples, and adds w_p * g_p to one
 *                  accumulator, w_p = n_p / B, so that the sum of all
 *                  accumulators is the mean over the global batch.
 *   3. reduce      executors' accumulators are summed to the driver.
 *                  flat: each executor sends K to the driver (N messages).
 *                  tree (Spark's treeAggregate, `depth` d >= 1): fan-in
 *                  f = smallest f >= 2 with f^d >= N; d-1 rounds of
 *                  combining among executors, then the surviving leaders
 *                  send to the driver.  N = 8, d = 2 -> f = 3 (executor
 *                  index i = rank - 1):
 *                      round 1: i1,i2 -> i0;  i4,i5 -> i3;  i7 -> i6
 *                      final:   i0, i3, i6 -> driver
 *                  d = 1 is flat.
 *   4. update      the driver applies the optimizer to the summed gradient
 *                  and evaluates (sg_trainlog); then step t+1.
 *
 * Bulk-synchronous by construction: step t+1's parameters are broadcast
 * only after every task of step t is reduced, so the updates equal
 * `local`'s with batch N*b up to floating-point summation order.
 *
 * Bytes through the busiest link (the driver's) per step, K = model bytes:
 *   flat broadcast + flat reduce      2*N*K           
 *   tree broadcast                    K*ceil(log2(N+1)) sent by the driver
 *   tree reduce, depth d              K*ceil(N / f^(d-1)) received (<= f*K)
 *   task messages                     16 (task) + 32 (DONE) bytes per task
 * An executor sends/receives K (broadcast) + K (reduce) plus, in a tree,
 * K per child it forwards to or combines from.
 */
#ifndef SG_MAPREDUCE_H
#define SG_MAPREDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "deadline.h"
#include "engine.h"

/* Tags: one per phase; the reduce rounds get MR_TAG_AGG + round. */
enum {
  MR_TAG_JOB = 100,    /* driver -> executor: the job header, once */
  MR_TAG_PARAMS = 101, /* broadcast */
  MR_TAG_TASK = 102,   /* driver -> executor: a task id, or stop */
  MR_TAG_DONE = 103,   /* executor -> driver: task finished */
  MR_TAG_AGG = 110,    /* reduce: + round (0 = the hop to the driver) */
};

/* Resolved engine options. */
struct sg_rdev;

typedef struct mr_config {
  int tree_broadcast; /* broadcast: tree */
  int depth;          /* reduce depth: 1 = flat (aggregate: flat) */
  int partitions;     /* P >= 1 (0 in the options means N) */
  int executors;      /* N */
  int64_t batch;      /* b, per worker */
  /* Tests only (never set from options): the driver adds the reduce
   * message from this executor rank twice (0 = off).  Proves the
   * equivalence check can fail. */
  int plant_double_rank;
  /* Tests only (never set from options): the driver calls this after
   * each step's reduce, before the update, with the parameters the
   * executors computed with and the reduced gradient (NULL = off).  A
   * test compares the gradient with `local`'s at the same parameters,
   * step by step: no roundoff carried from earlier steps. */
  void (*step_check)(void *arg, int64_t step, const float *params, const float *grad,
                     size_t n);
  void *step_check_arg;
  /* device: cuda executors (mr_executor.c, core/cuda/replica.h): floats
   * per staged chunk, 0 = MR_DEV_CHUNK.  Tests only: dev_twin makes
   * executor e's device (the CPU twin's simulated one) for a workload on
   * the CPU; dev_plant plants stage_plan.h's one-way bug in it. */
  size_t dev_chunk;
  int (*dev_twin)(struct sg_rdev *out, size_t chunk, int executor);
  int dev_plant;
} mr_config_t;

#define MR_DEV_CHUNK ((size_t)1 << 20) /* 4 MiB of floats, as allreduce's stage_chunk */

/* Read the engine's options from `o` for `workers` executors; SG_ECONFIG
 * naming the key when they do not fit (partitions must be <= N*b). */
int mr_config_parse(const sg_opts_t *o, int workers, mr_config_t *cfg);

/* Task `task`'s slice of the global batch B = N*b: positions [*first,
 * *first + *count), the split drawn above (sizes q+1 then q).
 * Here, not in the engine table's file, so that the driver and the
 * executors use it without depending on the table that calls them. */
static inline void mr_task_slice(const mr_config_t *cfg, int task, int64_t *first,
                                 int64_t *count) {
  const int64_t B = cfg->batch * cfg->executors, P = cfg->partitions;
  const int64_t q = B / P, r = B % P;
  *count = q + (task < r);
  *first = task * q + (task < r ? task : r);
}

/* Job header, driver -> every executor at the start (a cross-check that
 * both sides agree on the run's shape). */
typedef struct mr_job_msg {
  int64_t total_steps;
  int64_t steps_per_epoch;
  int64_t nparams;
  int32_t partitions;
  int32_t pad_;
} mr_job_msg_t;

/* A task assignment; task < 0 means "no more tasks this step: reduce". */
typedef struct mr_task_msg {
  int64_t step;
  int32_t task;
  int32_t pad_;
} mr_task_msg_t;

/* A finished task: its loss and weight w_p (the gradient stays in the
 * executor's accumulator until the reduce). */
typedef struct mr_done_msg {
  int64_t step;
  int32_t task;
  int32_t pad_;
  double loss;   /* mean loss over the task's samples */
  double weight; /* n_p / (N*b), checked by the driver */
} mr_done_msg_t;

/* ---- mr_broadcast.c ---------------------------------------------------- */

/* The rank this rank receives the broadcast from (-1 for the driver). */
int mr_bcast_parent(const mr_config_t *cfg, int rank, int size);
/* Distance from the driver in the broadcast tree (driver 0; flat: 1). */
int mr_bcast_level(const mr_config_t *cfg, int rank);
/* Broadcast n floats from the driver to every rank (flat or tree). */
int mr_broadcast(sg_comm_t *c, const mr_config_t *cfg, float *buf, size_t n);

/* ---- mr_aggregate.c ---------------------------------------------------- */

/* Fan-in of the reduce tree for N executors and depth d. */
int mr_fanin(int executors, int depth);
/* Sum every executor's `acc` (n floats) into the driver's `acc`.  On an
 * executor acc is its contribution (overwritten with partial sums); tmp
 * is n floats of scratch on every rank. */
int mr_aggregate(sg_comm_t *c, const mr_config_t *cfg, float *acc, float *tmp,
                 size_t n);

/* ---- the two roles ----------------------------------------------------- */

int mr_driver_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg);   /* mr_driver.c */
int mr_executor_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg); /* mr_executor.c */

/* Driver or executor by rank; what the engine's run() calls. */
int mr_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg);

/* sg_recv / sg_probe with the comm's deadline scaled by `factor` for
 * this one call (see the factors below). */
int mr_recv_dl(sg_comm_t *c, double factor, int src, int tag, void *buf,
               size_t cap, sg_status_t *st);
int mr_probe_dl(sg_comm_t *c, double factor, int src, int tag, sg_status_t *st);

/* Deadline factors, from the rule of deadline.h.  A rank blocked on a
 * peer that is itself blocked on someone else must time out later than
 * that peer, or the first error would blame a healthy rank:
 *   - the driver waiting for DONE waits on computing executors: level 0;
 *   - reduce: a tree leader waits on its children (level 0), the driver
 *     on leaders (level 1, MR_DL_REDUCE);
 *   - executors waiting on the driver (tasks, broadcast): level 2;
 *     deeper ranks of the broadcast tree one hop more per level. */
#define MR_DL_REDUCE sg_deadline_factor(1, 0)
#define MR_DL_EXECUTOR sg_deadline_factor(2, 0)

/* The engine (mapreduce_engine.c): its options table holds every default. */
extern const sg_engine_t sg_engine_mapreduce;

#endif
