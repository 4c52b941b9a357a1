/* test_cuda_devcoll.c - overlap with backprop and the sharded update for
 * the device collectives (`algorithm: cuda-ring`, `nccl`), their
 * schedules run on the CPU.
 *
 * allreduce_device.c maps plain-C schedules onto CUDA: the bucket plan
 * (bucket_plan.h), the overlap of a collective per bucket on a second
 * stream and the nccl sharded update (coll_plan.h: sg_coll_overlap_run,
 * sg_coll_shard_run), and the device ring's owner's step (ring_prims.h, a
 * sharded plan).  The same functions run here with the device replaced
 * by a simulated one.  The collectives are modelled by host twins: the
 * device ring by its own host twin (sg_dring_run over inboxes in host
 * memory, the element operation the kernel calls); NCCL, whose order of
 * additions is NCCL's own, by the host ring (sg_ar_run) on the same
 * range: what is proven for nccl is the schedule (the events, the
 * streams, the ranges, the shards and the padding), not NCCL's sums.
 *
 *  - overlap_equals_host_overlap: N = 2..4 threads over inproc ZeroMQ, 3
 *    steps (momentum, weight decay); per rank the REAL host overlap
 *    (allreduce/overlap.c, whose buckets must be the plan's) and the
 *    device schedule on a simulated device -- a compute stream whose ops
 *    write the rank's real gradient, a comm stream waiting on the buckets'
 *    events and running the collective on each bucket, the join, the
 *    update kernel's operation (sg_sgd_apply1) -- MLP 784-1024-10
 *    (default 512 KiB buckets) and the CNN (16 KiB buckets).  The summed
 *    gradient and the parameters equal, bit for bit after every step,
 *    the same collective run on each bucket of a host copy and then the
 *    update; and the host overlap's (nccl model: every N; cuda-ring:
 *    N = 2, the two-term sum; for N > 2 the device ring's order of
 *    additions is NCCL's, not the host ring's).  Three devices: every op
 *    at once (eager); the comm stream's ops as early as the events allow
 *    and the compute stream's as late; the other way round.
 *  - planted: the first bucket's wait left out (the comm-early device
 *    sums gradient backward has not written), and the join left out (the
 *    compute-early device updates from sums not yet made); the eager
 *    device shows neither (why the adversaries are needed).
 *  - sharded_equals_host_sharded: N = 2..4, 3 steps; nccl (reduce-
 *    scatter, update, allgather on vectors padded to N shards; MLPs of
 *    29,425 and 52,725 parameters, not multiples of 2, 3 or 4) equal to
 *    the host sharded update (sg_ar_run_update) bit for bit; cuda-ring
 *    staged with the owner's step (slots of 1,000 floats: many blocks,
 *    the momentum packed over them; and one block) equal to the
 *    replicated device ring and update bit for bit, and for N = 2 to the
 *    host sharded update.  Planted: each owned range updated one float
 *    short, for both.
 */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "cuda/bucket_plan.h"
#include "cuda/coll_plan.h"
#include "cuda/ring_prims.h"
#include "cuda/sgd_op.h"
#include "err.h"
#include "host_update.h"
#include "model.h"
#include "opts.h"
#include "overlap.h"
#include "run_util.h"
#include "thread_ranks.h"
#include "transport.h"
#include "workload.h"

#define MAXB 512
#define STEPS 3

static long diff_floats(const float *a, const float *b, size_t n) {
  long d = 0;
  for (size_t i = 0; i < n; i++) d += memcmp(a + i, b + i, sizeof *a) != 0;
  return d;
}

/* ---- the collectives' host twins ----------------------------------------- */

/* The device ring's twin: the kernel's element operations over inboxes in
 * host memory, the real flow control (ring_prims.c).  p: a sharded call's
 * parameters (the allgather moves them), v its packed momentum. */
typedef struct dtwin {
  float *x, *p, *v, *inbox, *right;
  size_t seg;
  float gscale, lr, wd, mu;
} dtwin_t;

static int dt_apply(void *ctx, int op, size_t off, size_t len, int in_slot, int out_slot) {
  dtwin_t *t = ctx;
  const float *in = t->inbox + (size_t)in_slot * t->seg;
  float *out = t->right ? t->right + (size_t)out_slot * t->seg : NULL;
  float *x = t->p && (op == SG_PRIM_RECV_COPY_SEND || op == SG_PRIM_RECV) ? t->p : t->x;
  for (size_t i = 0; i < len; i++) sg_prim_apply1(op, x + off, in, out, i);
  return SG_OK;
}

/* cuda_comm.c's ring_owner: recvReduceCopy, the sgd kernel's operation on
 * the range, the parameters sent */
static int dt_owner(void *ctx, size_t off, size_t len, size_t upd, size_t soff, int in_slot,
                    int out_slot) {
  dtwin_t *t = ctx;
  const float *in = t->inbox + (size_t)in_slot * t->seg;
  float *out = t->right + (size_t)out_slot * t->seg;
  for (size_t i = 0; i < len; i++)
    sg_prim_apply1(SG_PRIM_RECV_REDUCE_COPY, t->x + off, in, NULL, i);
  for (size_t i = 0; i < upd; i++)
    sg_sgd_apply1(t->p + off, t->x + off, t->mu > 0 ? t->v + soff : NULL, i, t->gscale, t->lr,
                  t->wd, t->mu);
  for (size_t i = 0; i < len; i++) sg_prim_apply1(SG_PRIM_SEND, t->p + off, NULL, out, i);
  return SG_OK;
}

static int dt_new(sg_comm_t *c, dtwin_t *t, size_t seg) {
  t->seg = seg;
  if (!(t->inbox = malloc(2 * seg * sizeof(float)))) return SG_ENOMEM;
  /* the handle exchanged is the inbox's address (CUDA: an IPC handle) */
  SG_CHECK(sg_dring_exchange(c, &t->inbox, &t->right, sizeof t->inbox));
  return sg_barrier(c);
}

static void dt_free(sg_comm_t *c, dtwin_t *t) {
  if (t->inbox) (void)sg_barrier(c); /* nobody frees an inbox still written to */
  free(t->inbox);
  t->inbox = NULL;
}

static int dt_sum(sg_comm_t *c, dtwin_t *t, float *x, size_t len) {
  t->x = x;
  t->p = NULL;
  const sg_dring_plan_t p = {.count = len, .seg = t->seg};
  const sg_dring_ops_t ops = {t, dt_apply, NULL};
  return sg_dring_run(c, &p, &ops);
}

enum { COLL_NCCL, COLL_RING };
static const char *const coll_name[] = {"nccl", "cuda-ring"};

typedef struct coll {
  int kind;
  sg_comm_t *c;
  sg_ar_t *ar;  /* nccl's model */
  dtwin_t dt;   /* the device ring's twin */
} coll_t;

static int coll_sum(coll_t *k, float *x, size_t len) {
  return k->kind == COLL_RING ? dt_sum(k->c, &k->dt, x, len) : sg_ar_run(k->ar, x, len);
}

/* ---- a simulated device: a compute and a comm stream ---------------------- */

enum { C_WRITE, C_JOIN, C_SGD, M_WAIT, M_SUM };
typedef struct sitem {
  int kind;
  size_t off, len, upto; /* WRITE, SUM: the range; JOIN: comm items; WAIT: compute items */
} sitem_t;

typedef struct sdev {
  float *dg, *src, *p, *v; /* gradient, backward's values, parameters, momentum */
  unsigned char *written;
  size_t n;
  int lazy; /* 0: every op at once (eager); 1: the comm stream's ops as early as the
               events allow, the compute stream's as late; 2: the other way round */
  float gscale, lr, wd, mu;
  sitem_t comp[64], comm[2 * MAXB];
  size_t ncomp, ncomm, crun, mrun;
  size_t ev_pos[MAXB];
  long unwritten; /* floats summed before backward wrote them */
  coll_t *coll;
  int rc;
} sdev_t;

static void run_comm(sdev_t *s, size_t upto);

static void run_compute(sdev_t *s, size_t upto) {
  for (; s->crun < upto; s->crun++) {
    const sitem_t *o = &s->comp[s->crun];
    if (o->kind == C_WRITE) {
      memcpy(s->dg + o->off, s->src + o->off, o->len * sizeof(float));
      memset(s->written + o->off, 1, o->len);
    } else if (o->kind == C_JOIN) {
      run_comm(s, o->upto);
    } else {
      for (size_t i = 0; i < s->n; i++)
        sg_sgd_apply1(s->p, s->dg, s->mu > 0 ? s->v : NULL, i, s->gscale, s->lr, s->wd, s->mu);
    }
  }
}

static void run_comm(sdev_t *s, size_t upto) {
  for (; s->mrun < upto; s->mrun++) {
    const sitem_t *o = &s->comm[s->mrun];
    if (o->kind == M_WAIT) {
      run_compute(s, o->upto);
      continue;
    }
    for (size_t i = 0; i < o->len; i++) s->unwritten += !s->written[o->off + i];
    int rc = coll_sum(s->coll, s->dg + o->off, o->len);
    if (rc < 0 && s->rc == SG_OK) s->rc = rc;
  }
}

static void push_comp(sdev_t *s, sitem_t it) {
  s->comp[s->ncomp++] = it;
  if (!s->lazy) run_compute(s, s->ncomp);
}

static void push_comm(sdev_t *s, sitem_t it) {
  s->comm[s->ncomm++] = it;
  if (!s->lazy) run_comm(s, s->ncomm);
}

static int sd_wait(void *ctx, long b) {
  sdev_t *s = ctx;
  push_comm(s, (sitem_t){.kind = M_WAIT, .upto = s->ev_pos[b]});
  return SG_OK;
}
static int sd_sum(void *ctx, long b, size_t off, size_t len) {
  (void)b;
  push_comm(ctx, (sitem_t){.kind = M_SUM, .off = off, .len = len});
  return SG_OK;
}
static int sd_join(void *ctx) {
  sdev_t *s = ctx;
  push_comp(s, (sitem_t){.kind = C_JOIN, .upto = s->ncomm});
  return SG_OK;
}

/* One step on the simulated device: backward's ops with the buckets'
 * events (allreduce_device.c's dev_ready), the shared schedule, the
 * update, then the host's wait for the process stream (the loss) and the
 * device's end. */
static int sd_step(sdev_t *s, const sg_bucket_t *ops, size_t nops, const sg_bucket_t *b,
                   size_t nb, int plant) {
  size_t next = 0;
  s->ncomp = s->ncomm = s->crun = s->mrun = 0;
  memset(s->written, 0, s->n);
  for (size_t i = 0; i < s->n; i++) s->dg[i] = 1000.0f + (float)i; /* the last step's */
  for (size_t i = 0; i < nops; i++) {
    push_comp(s, (sitem_t){.kind = C_WRITE, .off = ops[i].off, .len = ops[i].len});
    const size_t to = sg_bucket_track(b, nb, next, ops[i].off);
    for (; next < to; next++) s->ev_pos[next] = s->ncomp;
  }
  if (next != nb) return sg_err_set(SG_EINTERNAL, "backward completed %zu of %zu", next, nb);
  const sg_coll_ops_t co = {s, sd_wait, sd_sum, sd_join};
  SG_CHECK(sg_coll_overlap_run(b, nb, &co, plant));
  push_comp(s, (sitem_t){.kind = C_SGD});
  if (s->lazy == 2) { /* the compute stream as early as allowed, comm as late */
    run_compute(s, s->ncomp);
    run_comm(s, s->ncomm);
  } else { /* the comm stream as early as allowed, compute as late */
    run_comm(s, s->ncomm);
    run_compute(s, s->ncomp);
  }
  return s->rc;
}

/* ---- overlap: N ranks, the host overlap beside the device schedule ------- */

typedef struct oarg {
  int rank, size, coll, lazy, plant;
  const char *model;
  size_t bucket_bytes;
  long plan_diff, sum_diff, par_diff, host_diff, unwritten;
  size_t n, nb;
} oarg_t;

typedef struct ostate {
  sg_opts_t *o;
  sg_workload_t *w;
  sg_ar_t *ar;
  coll_t coll;
  sdev_t *s;
  size_t n, nb, nops;
  sg_bucket_t plan[MAXB], ops[64];
  float *ph, *hsum, *hv, *ref, *pe, *ve;
  float mu, wd;
} ostate_t;

static int o_setup(sg_comm_t *c, oarg_t *a, ostate_t *st) {
  const char *kv[] = {"batch", "8", "dataset", "synthetic", "features", "784", "train_samples",
                      "512", "test_samples", "64", "weight_decay", "1e-4", "model", a->model,
                      "hidden", "1024", NULL};
  if (strcmp(a->model, "mlp") != 0) kv[14] = NULL;
  st->o = ru_train_opts("allreduce", c->size, "", STEPS, kv);
  if (!st->o || sg_workload_new(&st->w, st->o, c->rank, c->size, SG_WL_TRAIN) < 0)
    return sg_err_set(SG_EINVAL, "workload: %s", sg_err_msg());
  double mu, wd;
  SG_CHECK(sg_opts_double(st->o, "momentum", &mu));
  SG_CHECK(sg_opts_double(st->o, "weight_decay", &wd));
  st->mu = (float)mu, st->wd = (float)wd;
  const size_t n = a->n = st->n = sg_workload_nparams(st->w), bucket = a->bucket_bytes / 4;
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  const int L = sg_model_dims(sg_workload_model(st->w), dims);
  if (L == 0) { /* the cnn: whole tensors on both sides */
    sg_cnn_geom_t g;
    if (sg_cnn_geom_init(&g, 28, 10) < 0) return sg_err_set(SG_EINVAL, "cnn geometry");
    st->nb = sg_bucket_plan_cnn(&g, bucket, st->plan, MAXB);
    st->nops = sg_bucket_cnn_ranges(&g, st->ops, 64);
  } else {
    st->nb = sg_bucket_plan_mlp(L, dims, bucket, st->plan, MAXB);
    st->nops = sg_bucket_dev_ranges(L, dims, st->ops, 64);
  }
  if (st->nb > MAXB || st->nops > 64) return sg_err_set(SG_EINVAL, "plan too large");
  a->nb = st->nb;
  float **v[] = {&st->ph, &st->hsum, &st->hv, &st->ref, &st->pe, &st->ve};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++)
    if (!(*v[i] = calloc(n, sizeof(float)))) return SG_ENOMEM;
  sdev_t *s = st->s = calloc(1, sizeof *st->s);
  if (!s) return SG_ENOMEM;
  s->n = n, s->lazy = a->lazy, s->coll = &st->coll, s->mu = st->mu, s->wd = st->wd;
  s->gscale = 1.0f / (float)c->size;
  s->dg = malloc(n * sizeof(float)), s->src = malloc(n * sizeof(float));
  s->p = malloc(n * sizeof(float)), s->v = calloc(n, sizeof(float));
  s->written = malloc(n);
  if (!s->dg || !s->src || !s->p || !s->v || !s->written) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(st->w, st->ph));
  memcpy(s->p, st->ph, n * sizeof(float));
  memcpy(st->pe, st->ph, n * sizeof(float));
  SG_CHECK(sg_ar_new(&st->ar, c, "ring", 64 << 10, n));
  st->coll = (coll_t){.kind = a->coll, .c = c, .ar = st->ar};
  return a->coll == COLL_RING ? dt_new(c, &st->coll.dt, 1 << 14) : SG_OK;
}

/* The real host overlap on ph: its sum into hsum, its buckets against
 * the plan; then the update kernel's operation on ph. */
static int o_host(oarg_t *a, ostate_t *st, int64_t step, float lr, float gscale) {
  sg_ar_overlap_t *ov = NULL;
  double loss, tg;
  size_t nh = 0;
  SG_CHECK(sg_ar_overlap_new(&ov, st->w, st->ar, a->bucket_bytes));
  int rc = sg_ar_overlap_step(ov, st->ph, st->hsum, step, &loss, &tg);
  const sg_ar_bucket_time_t *hb = rc ? NULL : sg_ar_overlap_buckets(ov, &nh);
  a->plan_diff += nh != st->nb;
  for (size_t i = 0; hb && i < nh && i < st->nb; i++)
    a->plan_diff += hb[i].off != st->plan[i].off || hb[i].len != st->plan[i].len;
  sg_ar_overlap_destroy(&ov);
  for (size_t i = 0; rc == SG_OK && i < st->n; i++)
    sg_sgd_apply1(st->ph, st->hsum, st->mu > 0 ? st->hv : NULL, i, gscale, lr, st->wd, st->mu);
  return rc;
}

static int o_step(oarg_t *a, ostate_t *st, int64_t step, float lr) {
  sdev_t *s = st->s;
  const size_t n = st->n;
  double loss;
  SG_CHECK(sg_workload_grad(st->w, s->p, s->src, step, &loss)); /* backward's values */
  /* the reference: the collective on each bucket of a host copy, the update */
  memcpy(st->ref, s->src, n * sizeof(float));
  for (size_t i = 0; i < st->nb; i++)
    SG_CHECK(coll_sum(&st->coll, st->ref + st->plan[i].off, st->plan[i].len));
  for (size_t i = 0; i < n; i++)
    sg_sgd_apply1(st->pe, st->ref, st->mu > 0 ? st->ve : NULL, i, s->gscale, lr, st->wd, st->mu);
  s->lr = lr;
  SG_CHECK(sd_step(s, st->ops, st->nops, st->plan, st->nb, a->plant));
  a->sum_diff += diff_floats(s->dg, st->ref, n);
  a->par_diff += diff_floats(s->p, st->pe, n);
  a->unwritten += s->unwritten;
  SG_CHECK(o_host(a, st, step, lr, s->gscale));
  if (a->coll == COLL_NCCL || a->size == 2)
    a->host_diff += diff_floats(s->p, st->ph, n) + diff_floats(s->dg, st->hsum, n);
  return SG_OK;
}

static int o_rank_fn(sg_comm_t *c, void *arg) {
  oarg_t *a = arg;
  ostate_t *st = calloc(1, sizeof *st);
  sg_optim_t *opt = NULL;
  if (!st) return SG_ENOMEM;
  int rc = o_setup(c, a, st);
  if (rc == SG_OK) rc = sg_workload_optim_new(st->w, st->o, &opt);
  for (int64_t step = 0; rc == SG_OK && step < STEPS; step++)
    rc = o_step(a, st, step, (float)sg_optim_lr(opt, step));
  dt_free(c, &st->coll.dt);
  if (st->s) {
    free(st->s->dg), free(st->s->src), free(st->s->p), free(st->s->v);
    free(st->s->written);
  }
  free(st->s);
  free(st->ph), free(st->hsum), free(st->hv), free(st->ref), free(st->pe), free(st->ve);
  sg_optim_destroy(&opt);
  sg_ar_destroy(&st->ar);
  sg_workload_destroy(&st->w);
  sg_opts_destroy(&st->o);
  free(st);
  return rc;
}

static int run_overlap(const char *model, size_t bucket, int n, int coll, int lazy, int plant,
                       oarg_t *a) {
  char what[128];
  snprintf(what, sizeof what, "overlap %s %s N=%d lazy %d plant %d", model, coll_name[coll], n,
           lazy, plant);
  for (int r = 0; r < n; r++)
    a[r] = (oarg_t){.rank = r, .size = n, .coll = coll, .lazy = lazy, .plant = plant,
                    .model = model, .bucket_bytes = bucket};
  tr_group_t g = {.n = n, .fn = o_rank_fn, .args = a, .stride = sizeof *a, .what = what};
  return tr_run(&g);
}

static void check_overlap(const char *model, size_t bucket) {
  oarg_t a[4];
  for (int coll = 0; coll < 2; coll++)
    for (int n = 2; n <= 4; n++)
      for (int lazy = 0; lazy < 3; lazy++) {
        CHECK_OK(run_overlap(model, bucket, n, coll, lazy, 0, a));
        for (int r = 0; r < n; r++)
          CHECK_MSG(!a[r].plan_diff && !a[r].sum_diff && !a[r].par_diff && !a[r].host_diff &&
                        !a[r].unwritten,
                    "%s %s N=%d lazy %d rank %d: plan %ld, sums %ld, params %ld (vs the "
                    "collective per bucket), vs host overlap %ld, unwritten %ld", model,
                    coll_name[coll], n, lazy, r, a[r].plan_diff, a[r].sum_diff, a[r].par_diff,
                    a[r].host_diff, a[r].unwritten);
      }
  fprintf(stderr, "  %s: %zu params, %zu buckets, %d steps: equal (nccl model and cuda-ring, "
          "N = 2..4, lazy and eager)\n", model, a[0].n, a[0].nb, STEPS);
}

TEST(overlap_equals_host_overlap_mlp) { check_overlap("mlp", SG_AR_BUCKET_DEFAULT); }

TEST(overlap_equals_host_overlap_cnn) { check_overlap("cnn", 16 << 10); }

TEST(overlap_planted_missing_wait_and_join_are_caught) {
  oarg_t a[3];
  for (int coll = 0; coll < 2; coll++)
    for (int plant = 1; plant <= 2; plant++) {
      long bad[3] = {0, 0, 0};
      for (int lazy = 0; lazy < 3; lazy++) {
        CHECK_OK(run_overlap("mlp", SG_AR_BUCKET_DEFAULT, 3, coll, lazy, plant, a));
        for (int r = 0; r < 3; r++) bad[lazy] += a[r].par_diff + a[r].sum_diff + a[r].unwritten;
      }
      fprintf(stderr, "  planted %s, %s: wrong or unwritten floats: eager %ld, comm early %ld, "
              "compute early %ld\n", plant == 1 ? "missing wait (first bucket)" : "missing join",
              coll_name[coll], bad[0], bad[1], bad[2]);
      /* each has its adversary: comm early sees the wait, compute early the join */
      CHECK(bad[plant] > 0);
      CHECK_EQ_INT(bad[0], 0);
    }
}

/* ---- the sharded update -------------------------------------------------- */

typedef struct sharg {
  int rank, size, coll, plant;
  const char *hidden;
  size_t seg; /* cuda-ring: floats per inbox slot */
  long diff[STEPS], host[STEPS];
  size_t n, own;
} sharg_t;

typedef struct shstate {
  sg_opts_t *o;
  sg_workload_t *w;
  sg_optim_t *opt;
  sg_ar_t *ar;
  sg_comm_t *c;
  dtwin_t dt;
  size_t n, npad;
  float *ph, *gh, *dp, *dg, *dv, *pr, *gr, *vr, *tmp;
  float gscale, lr, wd, mu;
} shstate_t;

/* nccl's model: the reduce-scatter as the host ring on the n floats, this
 * rank's shard kept; the allgather as a ring of sendrecvs */
static int nm_rs(void *ctx, size_t shard) {
  shstate_t *st = ctx;
  const int r = st->c->rank;
  memcpy(st->tmp, st->dg, st->n * sizeof(float));
  SG_CHECK(sg_ar_run(st->ar, st->tmp, st->n));
  const size_t off = (size_t)r * shard, own = sg_coll_own(st->n, st->c->size, r);
  memcpy(st->dg + off, st->tmp + off, own * sizeof(float));
  return SG_OK;
}

static int nm_update(void *ctx, size_t off, size_t len) {
  shstate_t *st = ctx;
  for (size_t i = 0; i < len; i++)
    sg_sgd_apply1(st->dp + off, st->dg + off, st->mu > 0 ? st->dv : NULL, i, st->gscale, st->lr,
                  st->wd, st->mu);
  return SG_OK;
}

static int nm_ag(void *ctx, size_t shard) {
  shstate_t *st = ctx;
  const int n = st->c->size, r = st->c->rank, right = (r + 1) % n, left = (r + n - 1) % n;
  for (int k = 0; k < n - 1; k++) {
    const int sq = (r - k + n) % n, rq = (r - k - 1 + 2 * n) % n;
    SG_CHECK(sg_sendrecv(st->c, right, 20800 + k, st->dp + (size_t)sq * shard,
                         shard * sizeof(float), left, 20800 + k, st->dp + (size_t)rq * shard,
                         shard * sizeof(float), NULL));
  }
  return SG_OK;
}

static int sh_setup(sg_comm_t *c, sharg_t *a, shstate_t *st) {
  const char *kv[] = {"model", "mlp", "hidden", a->hidden, "batch", "8", "dataset", "synthetic",
                      "features", "784", "train_samples", "512", "test_samples", "64",
                      "weight_decay", "1e-4", NULL};
  st->c = c;
  st->o = ru_train_opts("allreduce", c->size, "", STEPS, kv);
  if (!st->o || sg_workload_new(&st->w, st->o, c->rank, c->size, SG_WL_TRAIN) < 0)
    return sg_err_set(SG_EINVAL, "workload: %s", sg_err_msg());
  SG_CHECK(sg_workload_optim_new(st->w, st->o, &st->opt));
  double mu, wd;
  SG_CHECK(sg_opts_double(st->o, "momentum", &mu));
  SG_CHECK(sg_opts_double(st->o, "weight_decay", &wd));
  st->mu = (float)mu, st->wd = (float)wd, st->gscale = 1.0f / (float)c->size;
  const size_t n = a->n = st->n = sg_workload_nparams(st->w);
  st->npad = sg_coll_shard(n, c->size) * (size_t)c->size;
  a->own = a->coll == COLL_NCCL ? sg_coll_own(n, c->size, c->rank)
                                : sg_dring_floats_owned(c->size, c->rank, n, a->seg);
  float **v[] = {&st->ph, &st->gh, &st->dp, &st->dg, &st->dv, &st->pr, &st->gr, &st->vr, &st->tmp};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++)
    if (!(*v[i] = calloc(st->npad, sizeof(float)))) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(st->w, st->ph));
  memcpy(st->dp, st->ph, n * sizeof(float));
  memcpy(st->pr, st->ph, n * sizeof(float));
  SG_CHECK(sg_ar_new(&st->ar, c, "ring", 64 << 10, n));
  return a->coll == COLL_RING ? dt_new(c, &st->dt, a->seg) : SG_OK;
}

/* The device's sharded step on the twin; for cuda-ring also the
 * replicated device ring and update (the reference). */
static int sh_device(sharg_t *a, shstate_t *st, int64_t step) {
  double loss;
  const size_t n = st->n;
  SG_CHECK(sg_workload_grad(st->w, st->dp, st->dg, step, &loss)); /* the padding stays 0 */
  if (a->coll == COLL_NCCL) {
    const sg_coll_shard_ops_t ops = {st, nm_rs, nm_update, nm_ag};
    return sg_coll_shard_run(n, st->c->size, st->c->rank, &ops, a->plant);
  }
  dtwin_t *t = &st->dt;
  t->x = st->dg, t->p = st->dp, t->v = st->dv;
  t->gscale = st->gscale, t->lr = st->lr, t->wd = st->wd, t->mu = st->mu;
  const sg_dring_plan_t p = {.count = n, .seg = t->seg, .sharded = 1,
                             .plant_bug = a->plant ? 2 : 0};
  const sg_dring_ops_t ops = {t, dt_apply, dt_owner};
  SG_CHECK(sg_dring_run(st->c, &p, &ops));
  SG_CHECK(sg_workload_grad(st->w, st->pr, st->gr, step, &loss));
  SG_CHECK(dt_sum(st->c, t, st->gr, n));
  for (size_t i = 0; i < n; i++)
    sg_sgd_apply1(st->pr, st->gr, st->mu > 0 ? st->vr : NULL, i, st->gscale, st->lr, st->wd,
                  st->mu);
  return SG_OK;
}

static int sh_body(sg_comm_t *c, sharg_t *a, shstate_t *st) {
  double loss;
  SG_CHECK(sh_setup(c, a, st));
  const size_t n = st->n;
  for (int64_t step = 0; step < STEPS; step++) {
    st->lr = (float)sg_optim_lr(st->opt, step);
    host_ref_t h = {st->opt, st->ph, st->gh, st->gscale, step};
    SG_CHECK(sg_workload_grad(st->w, st->ph, st->gh, step, &loss));
    SG_CHECK(sg_ar_run_update(st->ar, st->gh, st->ph, n, host_update_range, &h));
    SG_CHECK(sh_device(a, st, step));
    a->host[step] = diff_floats(st->dp, st->ph, n);
    a->diff[step] = a->coll == COLL_NCCL ? a->host[step] : diff_floats(st->dp, st->pr, n);
    for (size_t i = n; i < st->npad; i++) a->diff[step] += st->dp[i] != 0 || st->dg[i] != 0;
  }
  return SG_OK;
}

static int sh_rank_fn(sg_comm_t *c, void *arg) {
  shstate_t *st = calloc(1, sizeof *st);
  if (!st) return SG_ENOMEM;
  int rc = sh_body(c, arg, st);
  dt_free(c, &st->dt);
  float *v[] = {st->ph, st->gh, st->dp, st->dg, st->dv, st->pr, st->gr, st->vr, st->tmp};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++) free(v[i]);
  sg_ar_destroy(&st->ar);
  sg_optim_destroy(&st->opt);
  sg_workload_destroy(&st->w);
  sg_opts_destroy(&st->o);
  free(st);
  return rc;
}

static int run_shard(int n, int coll, const char *hidden, size_t seg, int plant, sharg_t *a) {
  char what[128];
  snprintf(what, sizeof what, "sharded %s %s N=%d seg %zu plant %d", coll_name[coll], hidden, n,
           seg, plant);
  for (int r = 0; r < n; r++)
    a[r] = (sharg_t){.rank = r, .size = n, .coll = coll, .plant = plant, .hidden = hidden,
                     .seg = seg};
  tr_group_t g = {.n = n, .fn = sh_rank_fn, .args = a, .stride = sizeof *a, .what = what};
  return tr_run(&g);
}

TEST(sharded_equals_host_sharded) {
  static const char *const hidden[] = {"37", "64,33"};
  static const size_t segs[] = {1000, 1 << 16};
  sharg_t a[4];
  for (int coll = 0; coll < 2; coll++)
    for (int n = 2; n <= 4; n++)
      for (int h = 0; h < 2; h++)
        for (int sg = 0; sg < 2 - (coll == COLL_NCCL); sg++) {
          CHECK_OK(run_shard(n, coll, hidden[h], segs[sg], 0, a));
          size_t owned = 0;
          for (int r = 0; r < n; r++) {
            owned += a[r].own;
            for (int s = 0; s < STEPS; s++) {
              CHECK_MSG(a[r].diff[s] == 0, "%s %s N=%d seg %zu rank %d step %d: %ld parameters "
                        "differ from the %s", coll_name[coll], hidden[h], n, segs[sg], r, s,
                        a[r].diff[s], coll == COLL_NCCL ? "host sharded update"
                                                       : "replicated device ring");
              if (n == 2)
                CHECK_MSG(a[r].host[s] == 0, "%s N=2 rank %d step %d: %ld differ from the host "
                          "sharded update", coll_name[coll], r, s, a[r].host[s]);
            }
          }
          CHECK_EQ_INT(owned, a[0].n); /* the owned ranges cover the vector once */
        }
  fprintf(stderr, "  %zu params, N = 4: rank 0 owns %zu (cuda-ring, 2^16-float slots)\n",
          a[0].n, a[0].own);
}

TEST(sharded_planted_off_by_one_is_caught) {
  sharg_t a[3];
  for (int coll = 0; coll < 2; coll++) {
    CHECK_OK(run_shard(3, coll, "37", 1000, 1, a));
    long d = 0;
    for (int r = 0; r < 3; r++) d += a[r].diff[STEPS - 1];
    fprintf(stderr, "  planted, %s: owned ranges one float short: %ld parameters differ\n",
            coll_name[coll], d);
    CHECK(d > 0);
  }
}
