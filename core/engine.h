/* engine.h - how an engine plugs in.
 *
 * An engine is one const sg_engine_t (designated initializers) registered
 * by name in rank/registry.c.  The harness knows engines only through
 * this table: it validates their options, computes how many processes a run
 * needs, and starts `sgdlab-rank`, which looks the engine up and calls its
 * run() on every rank.  Adding an engine = one folder or file + one
 * registry line + one CMake list entry (docs/design.md, "Adding an
 * engine"); a test's own engine registers with sg_engine_register().
 */
#ifndef SG_ENGINE_H
#define SG_ENGINE_H

#include "cost.h"
#include "opts.h"
#include "records.h"
#include "settings.h"
#include "transport.h"
#include "workload.h"

/* The run-wide settings every loop uses, parsed once by sg_trainlog_new
 * (a loop never looks them up by key: core/opts.h, sg_opts_freeze). */
typedef struct sg_run_conf {
  int parsed;
  int64_t delay_rank;      /* the on-purpose straggler, -1 = none, -2 = every rank */
  double delay_ms;         /* its delay per slowed step */
  double delay_prob;       /* chance that a given step is slowed (1 = every step) */
  int64_t seed;            /* the workload's seed: which steps are slowed */
  const char *dump_params; /* "" = none; points into the ctx's opts */
} sg_run_conf_t;

typedef struct sg_rank_ctx {
  int rank, size;        /* this process among the run's processes */
  int workers;           /* N, as the experiment file says */
  sg_comm_t *comm;       /* connected to every rank of the run */
  const sg_opts_t *opts; /* every setting of the run, engine keys included */
  sg_records_t *rec;     /* stream to the harness */
  double t0;             /* the run's start, sg_wall() seconds */
  sg_run_conf_t run;     /* filled by sg_trainlog_new */
} sg_rank_ctx_t;

struct sg_bench_round; /* bench_method.h */

/* An option that means something only when another key has one of some
 * values ("staleness" only with mode: ssp): set in an entry none of
 * whose runs meets the condition, it is a config error that names the
 * condition (harness/run/config.c). */
typedef struct sg_option_need {
  const char *key, *when, *values; /* values: "|a|b|" */
} sg_option_need_t;

/* What one rank holds, for the admission check's memory estimate
 * (harness/run/admit.c), in units of P, the model's parameter bytes, besides
 * its dataset shard and activations. */
typedef struct sg_mem_plan {
  double params;     /* parameter copies (1 on most ranks) */
  double grad;       /* gradient buffers */
  double optim;      /* optimizer state when momentum is on */
  double engine;     /* the engine's own buffers (scratch, slots, replies) */
  double batch_mult; /* activations for batch x this rows (0: none) */
  int train, test;   /* holds the training set / the test set */
  /* Under simulation with compute modeled every large allocation is
   * folded across the ranks but message buffers (core/msgbuf.h): */
  double msg;        /* of engine: message buffers (a header and a payload per message) */
  double msg_frames; /* the messages they hold (one per slice where sliced) */
  int msg_fold;      /* their payloads fold (dense): a rank keeps each message's
                        header pages and maps two regions per message; else all of msg */
  double msg_out;    /* of msg: what the rank may have sent and not yet seen
                        received at once (a simulated deferred send holds a
                        copy of each: core/transport_mpi.c; all of it where
                        the payloads do not fold) */
  double own;        /* of engine, besides msg: buffers that stay the rank's own
                        (parsed: sparse indices, topk pairs; not sg_fold_alloc) */
  double in_P;       /* in: P, set by the caller before the call */
} sg_mem_plan_t;

/* One role a rank of the engine may have, and its kind: a worker computes
 * gradients on its shard (its steps count for throughput and the phase
 * means); a hub serves the workers (ps server, mapreduce driver) and is
 * measured apart.  The harness reads kinds from this table, never from
 * role names. */
typedef enum { SG_ROLE_WORKER = 0, SG_ROLE_HUB = 1 } sg_role_kind_t;
typedef struct sg_role_info {
  const char *name; /* "server" */
  sg_role_kind_t kind;
} sg_role_info_t;

typedef struct sg_engine {
  const char *name;    /* "allreduce" */
  const char *summary; /* one line for `sgdlab engines` */
  const sg_setting_t *options; /* engine keys, NULL-name terminated */
  /* Processes needed for `workers` workers under these options; also the
   * place to reject option combinations (SG_ECONFIG, message names the
   * key).  NULL means nprocs = workers. */
  int (*layout)(const sg_opts_t *o, int workers, int *nprocs);
  /* Role name of a rank ("worker", "server", "driver", "executor"). NULL
   * means every rank is a "worker". */
  const char *(*role)(const sg_opts_t *o, int workers, int rank);
  /* Whether a transport is usable (e.g. native needs mpi); NULL = both. */
  int (*check_transport)(const sg_opts_t *o, const char *transport);
  /* The per-rank training loop. */
  int (*run)(sg_rank_ctx_t *ctx);
  /* Nonzero when `rank` may die (killed, or exit non-zero without an
   * error in its DONE) without failing the run: the harness records the
   * death (run_info dead_rank.R) and lets the other ranks finish.  Honored
   * by the local launcher only (under mpirun, Open MPI aborts the whole
   * job when one process dies).  NULL = no rank may die. */
  int (*tolerates_exit)(const sg_opts_t *o, int workers, int rank);
  /* One round of the engine's gradient communication, for the benchmark
   * method (core/bench_method.h); NULL = the engine has none. */
  const struct sg_bench_round *bench;
  /* What a run of this engine is called: its name, its variant and every
   * option that differs from its default ("ps ssp(2) servers=2"); NULL =
   * the default (sg_engine_label).  Everything that names a run (the run
   * line, `list`, the report's keys) goes through sg_engine_label. */
  void (*label)(const sg_opts_t *o, char *out, size_t cap);
  /* The single-process reference every other engine is compared with
   * (runs the global batch workers*batch in one process). */
  int baseline;
  /* Nonzero when the run's traffic bypasses the transport's byte
   * counters (e.g. MPI_Allreduce moves its bytes inside MPI). */
  int (*bytes_uncounted)(const sg_opts_t *o);
  /* Options meaningful only under a condition; {NULL}-terminated, NULL =
   * none. */
  const sg_option_need_t *needs;
  /* What rank `rank` holds (see sg_mem_plan_t); NULL = a replica: the
   * parameters, a gradient, optimizer state, the training set, the test
   * set on rank 0, activations of one batch. */
  void (*memory)(const sg_opts_t *o, int workers, int rank, sg_mem_plan_t *m);
  /* The alpha-beta-gamma formula of one step's communication and what
   * `sgdlab model` needs around it: how a run's options make a case, its
   * label, the what-if cases (core/cost.h, docs/model.md); NULL = none
   * (`sgdlab model` says so). */
  const sg_cost_info_t *cost;
  /* Every role role() may return, with its kind; {NULL}-terminated.  NULL
   * = one role, "worker", of kind worker. */
  const sg_role_info_t *roles;
  /* Whether a run under these options has stale gradients (a worker's
   * gradient applied to parameters newer than those it read: ps async,
   * ssp); the report draws the staleness histogram for these even when
   * every recorded staleness is 0.  NULL = never. */
  int (*stale)(const sg_opts_t *o);
  /* The devices the engine runs on, "|cpu|"; the harness refuses any
   * other `device` with one line before anything starts.  NULL = every
   * device (the workload computes there; docs/cuda.md). */
  const char *devices;
} sg_engine_t;

/* The registry (rank/registry.c): NULL-terminated. */
extern const sg_engine_t *sg_engines[];
/* Add an engine that is not in the tree's list (a program's own, e.g. a
 * test's: call it from a constructor, before main).  0, or -1 when the
 * name is taken or the registry is full (4 extra engines). */
int sg_engine_register(const sg_engine_t *e);
const sg_engine_t *sg_engine_find(const char *name);
const char *sg_engine_role(const sg_engine_t *e, const sg_opts_t *o,
                           int workers, int rank);
/* The kind of rank `rank` (its role looked up in e->roles). */
sg_role_kind_t sg_engine_role_kind(const sg_engine_t *e, const sg_opts_t *o, int workers,
                                   int rank);
/* Whether e runs on device (e->devices). */
int sg_engine_runs_on(const sg_engine_t *e, const char *device);
int sg_engine_nprocs(const sg_engine_t *e, const sg_opts_t *o, int workers,
                     int *nprocs);

/* The run's label (core/engine_label.c): the engine's label, then the
 * run and workload keys that change what it measures (transport,
 * momentum, lr_schedule) when they differ from their defaults. */
void sg_engine_label(const sg_engine_t *e, const sg_opts_t *o, char *out, size_t cap);
/* The engine's part of the label alone: its name, its variant and its
 * options not at their default, no run-wide keys ("ps ssp(2)").  The
 * harness renders a run's variant (harness/run/variant.c) from it. */
void sg_engine_label_head(const sg_engine_t *e, const sg_opts_t *o, char *out, size_t cap);
/* The run-wide keys sg_engine_label spells when not at their default
 * ("transport", "momentum", "lr_schedule"); NULL-terminated.  An
 * experiment whose runs all share one value leaves it out of its labels
 * (harness/run/config.c): a label names what differs. */
extern const char *const sg_engine_label_overrides[];
/* The name rendered from a run's variant v (its structured key, decided
 * when the experiment is expanded: harness/run/variant.c), whole and
 * malloc'd (NULL: out of memory): the engine's label head over opts, then
 * every other key of v in v's order (" key=value", the value quoted when
 * it could read as another pair), then " [sim]" when sim.  The run line
 * and the report both call it, so they never parse a name. */
char *sg_variant_render(const sg_engine_t *e, const sg_opts_t *opts, const sg_opts_t *v,
                        int sim);
/* Append " key=value" for every option of e not at its default and not in
 * skip (NULL-terminated, may be NULL) at out+len; the new length. */
size_t sg_engine_label_options(const sg_engine_t *e, const sg_opts_t *o, const char *const *skip,
                               char *out, size_t cap, size_t len);
/* Whether sg_engine_label shows `key` when it matters (an engine option
 * or one of the run keys above). */
int sg_engine_label_spells(const sg_engine_t *e, const char *key);
/* Whether value (NULL = unset) is s's default ("1M" equals "1048576"). */
int sg_setting_is_default(const sg_setting_t *s, const char *value);

/* ---- helpers every training loop uses (core/engine_util.c) ----------- */

/* Evaluation and progress bookkeeping for the rank that evaluates.
 * sg_trainlog_step() records a step (and, every eval_every steps -- once
 * per epoch when eval_every is 0 -- and after the last step, evaluates
 * params and sends an eval record).  Eval records carry step = steps
 * completed and wall_s = seconds since sg_trainlog_begin() minus the time
 * spent evaluating.  Non-evaluating ranks pass evaluates = 0 (params may
 * then be NULL). */
typedef struct sg_trainlog sg_trainlog_t;
int sg_trainlog_new(sg_trainlog_t **out, sg_rank_ctx_t *ctx,
                    sg_workload_t *wl, int evaluates);
/* Training starts now (wall_s counts from here); the evaluating rank
 * evaluates the initial params as step 0. */
int sg_trainlog_begin(sg_trainlog_t *t, const float *params);
/* Override the samples-per-step count (default: workers * batch). */
void sg_trainlog_set_global_batch(sg_trainlog_t *t, int64_t global_batch);
/* Whether sg_trainlog_step for `step` will evaluate (for an engine that
 * must fetch the parameters first, e.g. from a device). */
int sg_trainlog_due(const sg_trainlog_t *t, int64_t step);
/* Engines whose progress is not the rank's own step count (ps ssp/async:
 * the servers' applied updates) pass params = NULL to sg_trainlog_step
 * and evaluate by progress instead: sg_trainlog_due_at says whether
 * `steps_done` (sync-equivalent steps) has crossed an eval period since
 * the last evaluation, before the end; sg_trainlog_eval_at evaluates at
 * it; sg_trainlog_end evaluates the final params once training is over. */
int sg_trainlog_due_at(const sg_trainlog_t *t, int64_t steps_done);
int sg_trainlog_eval_at(sg_trainlog_t *t, int64_t steps_done, const float *params);
int sg_trainlog_end(sg_trainlog_t *t, int64_t steps_done, const float *params);
/* Seconds spent evaluating so far. */
double sg_trainlog_eval_time(const sg_trainlog_t *t);
/* Send the step record; evaluate if this step ends an eval period. */
int sg_trainlog_step(sg_trainlog_t *t, const sg_step_rec_t *s,
                     const float *params);
void sg_trainlog_destroy(sg_trainlog_t **t);

/* When the `dump_params` setting names a file, write params (n raw
 * float32, native byte order) to it.  Call once, at the end of training,
 * from the one rank that holds the full final parameters. */
int sg_engine_dump_params(const sg_rank_ctx_t *ctx, const float *params,
                          size_t n);

/* Whether `rank` is slowed at `step`: delay_rank is that rank (or -2,
 * every rank) and, unless prob >= 1, a draw hashed from (seed, rank,
 * step) falls below prob.  Stateless: the same arguments give the same
 * answer on every host, so a run's slowed steps follow from its settings. */
int sg_delay_hit(int64_t delay_rank, double prob, uint64_t seed, int rank, int64_t step);

/* Sleep delay_ms when sg_delay_hit says this rank is slowed at `step`
 * (the on-purpose straggler). */
void sg_engine_delay(const sg_rank_ctx_t *ctx, int64_t step);

#endif
