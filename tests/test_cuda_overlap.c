/* test_cuda_overlap.c - overlap with backprop on the device
 * (`device: cuda`, `overlap: true`), its schedule run on the CPU.
 *
 * allreduce_device.c maps three plain-C parts onto CUDA: the bucket plan
 * (core/cuda/bucket_plan.h), the device model's hand-over order
 * (sg_bucket_dev_ranges: per layer db, then the whole dW, as cuda_model.c
 * issues them) with sg_bucket_track marking each bucket's event, and the
 * staged run over the buckets' pieces (stage_plan.h, ops->ready: the down
 * stream waits for a bucket's event).  Checked here:
 *
 *  - plan_is_the_host_hook: the host hook's ranges that the plan assumes
 *    are the ones the real host model reports (softmax, MLPs with one and
 *    two hidden layers, a layer whose dW is cut into row blocks); the
 *    plan's buckets cover the vector once; every bucket is marked exactly
 *    when the device has issued the op that writes its lowest element;
 *  - cnn_plan_is_the_host_hook_and_the_device_step: the CNN's ranges
 *    (whole tensors) are the host hook's and the hand-overs of the device
 *    CNN's step (cuda_cnn_step.c, run with a backend that computes
 *    nothing), in the same order;
 *  - device_equals_host_overlap: N = 2..4 threads over inproc ZeroMQ; on
 *    each rank the REAL host overlap (allreduce/overlap.c, the model's
 *    hook, the ring) and the device schedule on a simulated device fed
 *    with the same rank's gradient (sg_workload_grad): the buckets (offset,
 *    length, order) are the host overlap's, every rank sends the same
 *    bytes, and the summed gradient equals the host overlap's bit for bit
 *    (ring, rhd and tree; ring and rhd also with fp16 on the wire; device
 *    lazy and eager);
 *    for N = 2 it also equals the non-overlapped staged run bit for bit;
 *    with slots smaller than a bucket (several pieces per bucket) every
 *    piece is one call of the host algorithm and N = 2 is still exact;
 *    the same for the CNN (cnn_device_equals_host_overlap, 16 KiB buckets);
 *  - planted bugs: the staged run without the first bucket's wait, and a
 *    device model that hands a range over before issuing its op: the lazy
 *    device (compute ops run as late as the events allow) reads gradient
 *    that backward has not written (counted) and the sum differs; the
 *    eager device cannot see it.
 *
 * And the sharded update on the device (`update: sharded`, ar_loop.h's
 * sg_ar_shard_*: the host-staged ring with the owner's update on the
 * device, the momentum packed for the owned ranges only):
 *
 *  - sharded_equals_host_sharded: N = 2..4 threads, 3 steps (momentum and
 *    weight decay), parameter counts not a multiple of N; with one staged
 *    chunk the device parameters equal the host sharded update's
 *    (sg_ar_run_update with optim.c's update) bit for bit after every
 *    step; with chunks of 1000 floats they equal the replicated device
 *    update (each chunk summed by the ring, then the update kernel's
 *    operation over the whole vector) bit for bit; the packed momentum
 *    holds at most sum ceil(chunk / N) floats;
 *  - a planted off-by-one shard boundary (each owned range updated one
 *    float short) is caught.
 */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "ar_loop.h"
#include "cuda/bucket_plan.h"
#include "cuda/cuda_cnn_step.h"
#include "cuda/sgd_op.h"
#include "cuda/stage_plan.h"
#include "err.h"
#include "host_update.h"
#include "model.h"
#include "opts.h"
#include "overlap.h"
#include "run_util.h"
#include "thread_ranks.h"
#include "transport.h"
#include "workload.h"

#define MAXB 4096

/* ---- the host hook against the plan ------------------------------------ */

typedef struct rec_ranges {
  sg_bucket_t r[MAXB];
  size_t n;
} rec_ranges_t;

static void record_range(void *arg, size_t off, size_t len) {
  rec_ranges_t *rr = arg;
  if (rr->n < MAXB) rr->r[rr->n] = (sg_bucket_t){off, len};
  rr->n++;
}

static sg_workload_t *make_wl(const char *model, const char *hidden, int rank, int size) {
  const char *kv[] = {"batch", "8", "dataset", "synthetic", "features", "784", "train_samples",
                      "512", "test_samples", "64", "model", model, "hidden", hidden, NULL};
  if (strcmp(model, "mlp") != 0) kv[12] = NULL; /* `hidden` is the mlp's key */
  sg_opts_t *o = ru_train_opts("allreduce", size, "", 4, kv);
  sg_workload_t *w = NULL;
  if (o && sg_workload_new(&w, o, rank, size, SG_WL_TRAIN) < 0) w = NULL;
  sg_opts_destroy(&o);
  return w;
}

/* 0 when the buckets cover [0, n) once, descending and adjoining. */
static long cover_errors(const sg_bucket_t *b, size_t nb, size_t n) {
  long bad = 0;
  size_t hi = n;
  for (size_t i = 0; i < nb; i++) {
    bad += b[i].off + b[i].len != hi || b[i].len == 0;
    hi = b[i].off;
  }
  return bad + (hi != 0);
}

/* Marks per device op: bucket k must be marked by the op that writes its
 * lowest element, never before (an element not yet issued) nor later. */
static long mark_errors(const sg_bucket_t *b, size_t nb, const sg_bucket_t *ops, size_t nops) {
  long bad = 0;
  size_t next = 0, low = SIZE_MAX; /* everything from low up is issued */
  for (size_t i = 0; i < nops; i++) {
    const size_t to = sg_bucket_track(b, nb, next, ops[i].off);
    low = ops[i].off;
    for (size_t k = next; k < to; k++) bad += b[k].off < low;
    if (to < nb) bad += b[to].off >= low; /* complete but left unmarked */
    next = to;
  }
  return bad + (next != nb);
}

TEST(plan_is_the_host_hook) {
  static const struct { const char *model, *hidden; } m[] = {
      {"softmax", "-"}, {"mlp", "128"}, {"mlp", "300,200"}, {"mlp", "1024"}};
  static const size_t buckets[] = {1, 1000, 1024, 131072, (size_t)1 << 30};
  static rec_ranges_t rr;
  static sg_bucket_t plan[MAXB], ops[4 * SG_MODEL_MAX_LAYERS], host[MAXB];
  for (size_t i = 0; i < sizeof m / sizeof *m; i++) {
    sg_workload_t *w = make_wl(m[i].model, m[i].hidden, 0, 1);
    CHECK_MSG(w, "workload %s %s: %s", m[i].model, m[i].hidden, sg_err_msg());
    const size_t n = sg_workload_nparams(w);
    float *p = calloc(n, sizeof *p), *g = calloc(n, sizeof *g);
    int64_t dims[SG_MODEL_MAX_LAYERS + 1];
    const int L = sg_model_dims(sg_workload_model(w), dims);
    double loss;
    CHECK(p && g && L >= 1);
    CHECK_OK(sg_workload_init_params(w, p));
    rr.n = 0;
    sg_model_set_grad_hook(sg_workload_model(w), record_range, &rr);
    CHECK_OK(sg_workload_grad(w, p, g, 0, &loss));
    sg_model_set_grad_hook(sg_workload_model(w), NULL, NULL);
    const size_t nh = sg_bucket_host_ranges(L, dims, host, MAXB);
    CHECK_EQ_INT(nh, rr.n);
    CHECK(!memcmp(host, rr.r, nh * sizeof *host));
    const size_t nops = sg_bucket_dev_ranges(L, dims, ops, 4 * SG_MODEL_MAX_LAYERS);
    CHECK_EQ_INT(cover_errors(ops, nops, n), 0);
    for (size_t j = 0; j < sizeof buckets / sizeof *buckets; j++) {
      const size_t nb = sg_bucket_plan_mlp(L, dims, buckets[j], plan, MAXB);
      CHECK(nb >= 1 && nb <= MAXB);
      CHECK_EQ_INT(cover_errors(plan, nb, n), 0);
      CHECK_EQ_INT(mark_errors(plan, nb, ops, nops), 0);
      if (j == 0) CHECK_EQ_INT(nb, nh); /* 1-float buckets: one per hook range */
      if (j == 4) CHECK_EQ_INT(nb, 1);
    }
    fprintf(stderr, "  %s %s: %zu params, %zu host ranges, %zu device ops\n", m[i].model,
            m[i].hidden, n, nh, nops);
    free(p), free(g);
    sg_workload_destroy(&w);
  }
}

/* ---- the CNN: the host hook, the device step's hand-over, the plan ------- */

/* A backend of the device CNN's step that computes nothing: what is left
 * is the order of its operations and hand-overs (cuda_cnn_step.c). */
static int n_gemm(void *c, char ta, char tb, int m, int n, int k, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc) { return SG_OK; }
static int n_fill(void *c, float *Z, const float *b, int rows, int out) { return SG_OK; }
static int n_relu(void *c, float *Z, size_t cnt) { return SG_OK; }
static int n_relu_back(void *c, float *G, const float *A, size_t cnt) { return SG_OK; }
static int n_colsum(void *c, const float *G, size_t rows, int out, float *db) { return SG_OK; }
static int n_im2col(void *c, const sg_cnn_conv_t *v, const float *X, float *cols, int n) {
  return SG_OK;
}
static int n_col2im(void *c, const sg_cnn_conv_t *v, const float *d, float *dX, int n) {
  return SG_OK;
}
static int n_pool(void *c, const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg,
                  int n) {
  return SG_OK;
}
static int n_unpool(void *c, const sg_cnn_conv_t *v, const int32_t *arg, const float *dp,
                    float *dz, int n) {
  return SG_OK;
}
static int n_xent(void *c, float *Z, const int32_t *y, int n, int C, float gs, int wg) {
  return SG_OK;
}
static int n_ready(void *c, size_t off, size_t len) {
  record_range(c, off, len);
  return SG_OK;
}

TEST(cnn_plan_is_the_host_hook_and_the_device_step) {
  static rec_ranges_t host, dev;
  static sg_bucket_t want[16], plan[MAXB];
  sg_cnn_geom_t g;
  sg_cnn_bufs_t b = {0};
  sg_workload_t *w = make_wl("cnn", "-", 0, 1);
  CHECK_MSG(w, "workload cnn: %s", sg_err_msg());
  CHECK_OK(sg_cnn_geom_init(&g, 28, 10));
  const size_t n = sg_workload_nparams(w);
  CHECK_EQ_INT(n, g.nparams);
  float *p = calloc(n, sizeof *p), *gr = calloc(n, sizeof *gr);
  double loss;
  CHECK(p && gr);
  CHECK_OK(sg_workload_init_params(w, p));
  host.n = dev.n = 0;
  sg_model_set_grad_hook(sg_workload_model(w), record_range, &host);
  CHECK_OK(sg_workload_grad(w, p, gr, 0, &loss));
  sg_model_set_grad_hook(sg_workload_model(w), NULL, NULL);
  const sg_cnn_ops_t o = {n_gemm, n_fill, n_relu, n_relu_back, n_colsum, n_im2col, n_col2im,
                          n_pool, n_unpool, n_xent, &dev, n_ready};
  CHECK_OK(sg_cnn_step_grad(&o, &g, &b, p, p, NULL, 4, gr));
  const size_t nr = sg_bucket_cnn_ranges(&g, want, 16);
  CHECK_EQ_INT(host.n, nr);
  CHECK_EQ_INT(dev.n, nr);
  CHECK(!memcmp(host.r, want, nr * sizeof *want));
  CHECK(!memcmp(dev.r, want, nr * sizeof *want));
  CHECK_EQ_INT(cover_errors(want, nr, n), 0);
  for (size_t bucket = 1; bucket <= ((size_t)1 << 20); bucket *= 32) {
    const size_t nb = sg_bucket_plan_cnn(&g, bucket, plan, MAXB);
    CHECK_EQ_INT(cover_errors(plan, nb, n), 0);
    CHECK_EQ_INT(mark_errors(plan, nb, want, nr), 0);
  }
  fprintf(stderr, "  cnn: %zu params, %zu ranges (host hook = device step = plan)\n", n, nr);
  free(p), free(gr);
  sg_workload_destroy(&w);
}

/* ---- a simulated device: a compute stream, a down and an up stream ------ */

enum { QMAX = 1 << 14, SLOTS = 2 };
typedef struct sop { int wait; long bucket; int slot; size_t off, len; long after, piece; } sop_t;

typedef struct sdev {
  float *dev, *slots, *src; /* the device gradient, the pinned slots, backward's values */
  unsigned char *written;
  size_t chunk;
  int lazy;
  sg_bucket_t cops[4 * SG_MODEL_MAX_LAYERS]; /* compute queue: ranges backward writes */
  size_t ncops, crun;
  long ev_pos[MAXB];     /* compute ops before bucket k's event */
  sop_t downq[QMAX], upq[QMAX];
  size_t ndown, nup, down_run, up_run, slot_last_down[SLOTS];
  long up_of_piece[QMAX];
  long unwritten_reads;  /* floats copied down before backward wrote them */
  sg_ar_t *ar;
  int (*reduce)(void *arg, float *host, size_t len); /* NULL: sg_ar_run on ar */
  void *rarg;
} sdev_t;

static void run_compute(sdev_t *s, size_t upto) {
  for (; s->crun < upto; s->crun++) {
    const sg_bucket_t *o = &s->cops[s->crun];
    memcpy(s->dev + o->off, s->src + o->off, o->len * sizeof(float));
    memset(s->written + o->off, 1, o->len);
  }
}

static void run_up(sdev_t *s, size_t upto) {
  for (; s->up_run < upto; s->up_run++) {
    const sop_t *o = &s->upq[s->up_run];
    memcpy(s->dev + o->off, s->slots + (size_t)o->slot * s->chunk, o->len * sizeof(float));
  }
}

static void run_down(sdev_t *s, size_t upto) {
  for (; s->down_run < upto; s->down_run++) {
    const sop_t *o = &s->downq[s->down_run];
    if (o->wait) {
      run_compute(s, (size_t)s->ev_pos[o->bucket]);
      continue;
    }
    if (o->after >= 0) run_up(s, (size_t)s->up_of_piece[o->after] + 1);
    for (size_t i = 0; i < o->len; i++) s->unwritten_reads += !s->written[o->off + i];
    memcpy(s->slots + (size_t)o->slot * s->chunk, s->dev + o->off, o->len * sizeof(float));
  }
}

static int sd_ready(void *ctx, long bucket) {
  sdev_t *s = ctx;
  s->downq[s->ndown++] = (sop_t){.wait = 1, .bucket = bucket};
  if (!s->lazy) run_down(s, s->ndown);
  return SG_OK;
}
static int sd_down(void *ctx, int slot, size_t off, size_t len, long after) {
  sdev_t *s = ctx;
  s->downq[s->ndown] = (sop_t){.slot = slot, .off = off, .len = len, .after = after};
  s->slot_last_down[slot] = s->ndown++;
  if (!s->lazy) run_down(s, s->ndown);
  return SG_OK;
}
static int sd_wait_down(void *ctx, int slot) {
  sdev_t *s = ctx;
  run_down(s, s->slot_last_down[slot] + 1);
  return SG_OK;
}
static int sd_reduce(void *ctx, int slot, size_t len) {
  sdev_t *s = ctx;
  float *h = s->slots + (size_t)slot * s->chunk;
  return s->reduce ? s->reduce(s->rarg, h, len) : sg_ar_run(s->ar, h, len);
}
static int sd_up(void *ctx, int slot, size_t off, size_t len, long piece) {
  sdev_t *s = ctx;
  s->upq[s->nup] = (sop_t){.slot = slot, .off = off, .len = len, .piece = piece};
  s->up_of_piece[piece] = (long)s->nup++;
  if (!s->lazy) run_up(s, s->nup);
  return SG_OK;
}
/* the streams end in this order: backward, the copies down, up */
static int sd_finish(void *ctx) {
  sdev_t *s = ctx;
  run_compute(s, s->ncops);
  run_down(s, s->ndown);
  run_up(s, s->nup);
  return SG_OK;
}

/* backward on the simulated device: issue each op and hand it over
 * (cuda_model.c's order; early = hand over before issuing, a planted bug);
 * the hand-over marks buckets as allreduce_device.c's dev_ready does */
static void sd_backward(sdev_t *s, const sg_bucket_t *ops, size_t nops, const sg_bucket_t *b,
                        size_t nb, int early) {
  size_t next = 0;
  for (size_t i = 0; i < nops; i++) {
    if (!early) s->cops[s->ncops++] = ops[i];
    const size_t to = sg_bucket_track(b, nb, next, ops[i].off);
    for (; next < to; next++) s->ev_pos[next] = (long)s->ncops;
    if (early) s->cops[s->ncops++] = ops[i];
    if (!s->lazy) run_compute(s, s->ncops);
  }
}

/* ---- N ranks: the host overlap and the device schedule ------------------ */

#define STEP 3
#define HIDDEN "1024" /* layer 0's dW is cut into 4 row blocks on the host */

typedef struct oarg {
  int rank, size;
  const char *model, *algo, *compress;
  size_t bucket_bytes, slot; /* slot: floats per staging slot, 0 = the largest bucket */
  int lazy, plant;           /* plant: 2 = first bucket's wait left out, 3 = early hand-over */
  long plan_diff, bytes_diff, vs_host, vs_plain, unwritten;
  size_t nb, npieces;
} oarg_t;

typedef struct rank_state {
  sg_workload_t *w;
  sg_ar_t *ar;
  size_t n, nb, nops;
  float *p, *src, *host;
  sg_bucket_t plan[MAXB], ops[4 * SG_MODEL_MAX_LAYERS];
  sg_stage_piece_t pieces[MAXB];
} rank_state_t;

static long diff_floats(const float *a, const float *b, size_t n) {
  long d = 0;
  for (size_t i = 0; i < n; i++) d += memcmp(a + i, b + i, sizeof *a) != 0;
  return d;
}

/* The real host overlap on this rank: its sum into st->host, its buckets
 * against the plan, its bytes sent. */
static int host_overlap(sg_comm_t *c, oarg_t *a, rank_state_t *st, uint64_t *bytes) {
  sg_ar_overlap_t *ov = NULL;
  double loss, tg;
  size_t nh = 0;
  SG_CHECK(sg_ar_overlap_new(&ov, st->w, st->ar, a->bucket_bytes));
  const uint64_t b0 = sg_comm_bytes_sent(c);
  int rc = sg_ar_overlap_step(ov, st->p, st->host, STEP, &loss, &tg);
  *bytes = sg_comm_bytes_sent(c) - b0;
  const sg_ar_bucket_time_t *hb = rc ? NULL : sg_ar_overlap_buckets(ov, &nh);
  a->plan_diff = nh != st->nb;
  for (size_t i = 0; hb && i < nh && i < st->nb; i++)
    a->plan_diff += hb[i].off != st->plan[i].off || hb[i].len != st->plan[i].len;
  sg_ar_overlap_destroy(&ov);
  return rc;
}

/* The device schedule on the simulated device: backward's ops with the
 * buckets' events, then the staged pieces.  The result into out. */
static int device_overlap(sg_comm_t *c, oarg_t *a, rank_state_t *st, size_t slot, float *out,
                          uint64_t *bytes) {
  sdev_t *s = calloc(1, sizeof *s);
  sg_stage_plan_t plan;
  int rc = SG_ENOMEM;
  if (!s) return rc;
  s->dev = malloc(st->n * sizeof(float));
  s->written = calloc(st->n, 1);
  s->slots = malloc(SLOTS * slot * sizeof(float));
  s->src = st->src, s->chunk = slot, s->lazy = a->lazy, s->ar = st->ar;
  if (s->dev && s->written && s->slots) {
    for (size_t i = 0; i < st->n; i++) s->dev[i] = 1000.0f + (float)i; /* last step's */
    sd_backward(s, st->ops, st->nops, st->plan, st->nb, a->plant == 3);
    rc = sg_stage_plan_pieces(&plan, st->pieces, a->npieces, slot, SLOTS);
    plan.plant_bug = a->plant == 2 ? 2 : 0;
    const sg_stage_ops_t ops = {s, sd_down, sd_wait_down, sd_reduce, sd_up, sd_finish, NULL,
                                sd_ready};
    const uint64_t b0 = sg_comm_bytes_sent(c);
    if (rc == SG_OK) rc = sg_stage_run(&plan, &ops);
    *bytes = sg_comm_bytes_sent(c) - b0;
    memcpy(out, s->dev, st->n * sizeof *out);
    a->unwritten = s->unwritten_reads;
  }
  free(s->dev), free(s->written), free(s->slots), free(s);
  return rc;
}

/* The host algorithm on each piece (ranges) of a host copy of src. */
static int reduce_pieces(sg_ar_t *ar, const float *src, float *out, size_t n,
                         const sg_stage_piece_t *pc, size_t np) {
  memcpy(out, src, n * sizeof *out);
  for (size_t i = 0; i < np; i++) SG_CHECK(sg_ar_run(ar, out + pc[i].off, pc[i].len));
  return SG_OK;
}

static int rank_setup(sg_comm_t *c, oarg_t *a, rank_state_t *st) {
  int64_t dims[SG_MODEL_MAX_LAYERS + 1];
  sg_cnn_geom_t g;
  double loss;
  if (!(st->w = make_wl(a->model, HIDDEN, c->rank, c->size)))
    return sg_err_set(SG_EINVAL, "workload: %s", sg_err_msg());
  st->n = sg_workload_nparams(st->w);
  const int L = sg_model_dims(sg_workload_model(st->w), dims);
  const size_t bucket = a->bucket_bytes / sizeof(float);
  if (L == 0) { /* the cnn: the device hands over the host's ranges */
    if (sg_cnn_geom_init(&g, 28, 10) < 0) return sg_err_set(SG_EINVAL, "cnn geometry");
    st->nb = sg_bucket_plan_cnn(&g, bucket, st->plan, MAXB);
    st->nops = sg_bucket_cnn_ranges(&g, st->ops, 4 * SG_MODEL_MAX_LAYERS);
  } else {
    st->nb = sg_bucket_plan_mlp(L, dims, bucket, st->plan, MAXB);
    st->nops = sg_bucket_dev_ranges(L, dims, st->ops, 4 * SG_MODEL_MAX_LAYERS);
  }
  st->p = malloc(st->n * sizeof(float));
  st->src = malloc(st->n * sizeof(float));
  st->host = malloc(st->n * sizeof(float));
  if (!st->p || !st->src || !st->host || st->nb > MAXB) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(st->w, st->p));
  SG_CHECK(sg_workload_grad(st->w, st->p, st->src, STEP, &loss)); /* this rank's gradient */
  SG_CHECK(sg_ar_new(&st->ar, c, a->algo, 64 << 10, st->n));
  return sg_ar_set_compress(st->ar, a->compress);
}

static int rank_body(sg_comm_t *c, oarg_t *a, rank_state_t *st) {
  uint64_t hbytes = 0, dbytes = 0;
  SG_CHECK(rank_setup(c, a, st));
  size_t slot = a->slot;
  for (size_t i = 0; !a->slot && i < st->nb; i++) slot = st->plan[i].len > slot ? st->plan[i].len : slot;
  a->nb = st->nb;
  a->npieces = sg_bucket_pieces(st->plan, st->nb, slot, st->pieces, MAXB);
  if (a->npieces > MAXB) return SG_ENOMEM;
  SG_CHECK(host_overlap(c, a, st, &hbytes));
  float *dev = malloc(st->n * sizeof *dev), *ref = malloc(st->n * sizeof *ref);
  int rc = dev && ref ? device_overlap(c, a, st, slot, dev, &dbytes) : SG_ENOMEM;
  if (rc == SG_OK && !a->slot) { /* one piece per bucket: the host overlap's calls */
    a->vs_host = diff_floats(dev, st->host, st->n);
    a->bytes_diff = hbytes != dbytes;
  }
  if (rc == SG_OK && a->slot) { /* several pieces per bucket: each the host algorithm's call */
    rc = reduce_pieces(st->ar, st->src, ref, st->n, st->pieces, a->npieces);
    a->vs_host = diff_floats(dev, ref, st->n);
  }
  if (rc == SG_OK && c->size == 2 && !strcmp(a->compress, "none")) {
    /* the non-overlapped staged run: the host algorithm on each chunk */
    sg_stage_plan_t whole;
    sg_stage_piece_t *pc = calloc(st->n / slot + 2, sizeof *pc);
    rc = pc ? sg_stage_plan(&whole, st->n, slot, SLOTS) : SG_ENOMEM;
    for (size_t i = 0; rc == SG_OK && i < whole.nchunks; i++)
      pc[i] = (sg_stage_piece_t){sg_stage_off(&whole, (long)i), sg_stage_len(&whole, (long)i), 0};
    if (rc == SG_OK) rc = reduce_pieces(st->ar, st->src, ref, st->n, pc, whole.nchunks);
    if (rc == SG_OK) a->vs_plain = diff_floats(dev, ref, st->n);
    free(pc);
  }
  free(dev), free(ref);
  return rc;
}

static int rank_fn(sg_comm_t *c, void *arg) {
  oarg_t *a = arg;
  rank_state_t *st = calloc(1, sizeof *st);
  if (!st) return SG_ENOMEM;
  int rc = rank_body(c, a, st);
  sg_ar_destroy(&st->ar);
  free(st->p), free(st->src), free(st->host);
  sg_workload_destroy(&st->w);
  free(st);
  return rc;
}

/* Runs one case on n ranks; per-rank results in a[0..n). */
static int run_model(const char *model, size_t bucket_bytes, int n, const char *algo,
                     const char *compress, size_t slot, int lazy, int plant, oarg_t *a) {
  char what[128];
  snprintf(what, sizeof what, "%s %s %s N=%d slot %zu lazy %d plant %d", model, algo, compress,
           n, slot, lazy, plant);
  for (int r = 0; r < n; r++)
    a[r] = (oarg_t){.rank = r, .size = n, .model = model, .algo = algo, .compress = compress,
                    .bucket_bytes = bucket_bytes, .slot = slot, .lazy = lazy, .plant = plant};
  tr_group_t g = {.n = n, .fn = rank_fn, .args = a, .stride = sizeof *a, .what = what};
  return tr_run(&g);
}

static int run_case(int n, const char *algo, const char *compress, size_t slot, int lazy,
                    int plant, oarg_t *a) {
  return run_model("mlp", SG_AR_BUCKET_DEFAULT, n, algo, compress, slot, lazy, plant, a);
}

TEST(device_equals_host_overlap) {
  static const char *const algos[] = {"ring", "rhd", "tree"}, *const comp[] = {"none", "fp16"};
  oarg_t a[4];
  for (int n = 2; n <= 4; n++)
    for (int al = 0; al < 3; al++)
      for (int cp = 0; cp < 2 - (al == 2); cp++) /* tree: float32 only */
        for (int lazy = 0; lazy < 2; lazy++) {
          CHECK_OK(run_case(n, algos[al], comp[cp], 0, lazy, 0, a));
          for (int r = 0; r < n; r++)
            CHECK_MSG(!a[r].plan_diff && !a[r].bytes_diff && !a[r].vs_host && !a[r].vs_plain &&
                          !a[r].unwritten,
                      "%s %s N=%d lazy %d rank %d: plan %ld, bytes %ld, vs host overlap %ld, "
                      "vs no overlap %ld, unwritten reads %ld", algos[al], comp[cp], n, lazy, r,
                      a[r].plan_diff, a[r].bytes_diff, a[r].vs_host, a[r].vs_plain,
                      a[r].unwritten);
        }
  fprintf(stderr, "  %zu buckets (bucket %u bytes), each one piece: equal to the host overlap\n",
          a[0].nb, SG_AR_BUCKET_DEFAULT);
}

TEST(cnn_device_equals_host_overlap) {
  oarg_t a[4];
  for (int n = 2; n <= 4; n++)
    for (int lazy = 0; lazy < 2; lazy++) {
      CHECK_OK(run_model("cnn", 16 << 10, n, "ring", "none", 0, lazy, 0, a));
      for (int r = 0; r < n; r++)
        CHECK_MSG(!a[r].plan_diff && !a[r].bytes_diff && !a[r].vs_host && !a[r].vs_plain &&
                      !a[r].unwritten,
                  "cnn N=%d lazy %d rank %d: plan %ld, bytes %ld, vs host overlap %ld, "
                  "vs no overlap %ld, unwritten reads %ld", n, lazy, r, a[r].plan_diff,
                  a[r].bytes_diff, a[r].vs_host, a[r].vs_plain, a[r].unwritten);
    }
  fprintf(stderr, "  cnn, 16 KiB buckets: %zu buckets, equal to the host overlap\n", a[0].nb);
}

TEST(pieces_smaller_than_buckets) {
  oarg_t a[4];
  for (int n = 2; n <= 3; n++)
    for (int lazy = 0; lazy < 2; lazy++) {
      CHECK_OK(run_case(n, "ring", "none", 50000, lazy, 0, a));
      for (int r = 0; r < n; r++)
        CHECK_MSG(!a[r].plan_diff && !a[r].vs_host && !a[r].vs_plain && !a[r].unwritten,
                  "N=%d lazy %d rank %d: plan %ld, vs pieces %ld, vs no overlap %ld, "
                  "unwritten %ld", n, lazy, r, a[r].plan_diff, a[r].vs_host, a[r].vs_plain,
                  a[r].unwritten);
      CHECK(a[0].npieces > a[0].nb);
    }
  fprintf(stderr, "  %zu buckets in %zu pieces of <= 50000 floats\n", a[0].nb, a[0].npieces);
}

TEST(planted_missing_wait_and_early_hand_over_are_caught) {
  oarg_t a[2];
  for (int plant = 2; plant <= 3; plant++) {
    long lazy_bad = 0, eager_bad = 0;
    for (int lazy = 1; lazy >= 0; lazy--) {
      CHECK_OK(run_case(2, "ring", "none", 0, lazy, plant, a));
      long bad = 0;
      for (int r = 0; r < 2; r++) bad += a[r].vs_host + a[r].unwritten;
      *(lazy ? &lazy_bad : &eager_bad) = bad;
    }
    fprintf(stderr, "  planted %s: lazy device %ld wrong or unwritten floats, eager %ld\n",
            plant == 2 ? "missing wait (first bucket)" : "hand-over before the op", lazy_bad,
            eager_bad);
    CHECK(lazy_bad > 0);
    CHECK_EQ_INT(eager_bad, 0);
  }
}

/* ---- update: sharded on the device (ar_loop.h) ------------------------- */

#define SH_STEPS 3

typedef struct sharg {
  int rank, size;
  const char *hidden;
  size_t chunk; /* floats per staged chunk; 0 = the whole vector */
  int lazy, plant;
  long diff[SH_STEPS];
  size_t n, cap, used;
} sharg_t;

typedef struct twin_dev {
  float *dp, *dg, *v; /* the device's parameters, gradient, packed momentum */
  float scale, lr, wd, mu;
} twin_dev_t;

/* dev_shard_update on the simulated device: the sum up, the update
 * kernel's operation on the range, the parameters down */
static int twin_update(void *ctx, size_t off, size_t len, size_t soff, const float *sum,
                       float *out) {
  twin_dev_t *t = ctx;
  memcpy(t->dg + off, sum, len * sizeof *sum);
  for (size_t i = 0; i < len; i++)
    sg_sgd_apply1(t->dp + off, t->dg + off, t->mu > 0 ? t->v + soff : NULL, i, t->scale, t->lr,
                  t->wd, t->mu);
  memcpy(out, t->dp + off, len * sizeof *out);
  return SG_OK;
}

/* The device's staged sharded step on the simulated device. */
static int twin_sharded_step(sg_ar_shard_t *sh, twin_dev_t *t, size_t n, size_t chunk, int lazy) {
  sdev_t *s = calloc(1, sizeof *s);
  sg_stage_plan_t plan;
  int rc = SG_ENOMEM;
  if (!s || !(s->slots = malloc(SLOTS * chunk * sizeof(float)))) goto out;
  s->dev = t->dg, s->chunk = chunk, s->lazy = lazy, s->reduce = sg_ar_shard_reduce, s->rarg = sh;
  s->written = malloc(n);
  if (!s->written) goto out;
  memset(s->written, 1, n); /* the gradient is complete (no overlap) */
  const sg_stage_ops_t ops = {s, sd_down, sd_wait_down, sd_reduce, sd_up, sd_finish, NULL, NULL};
  sg_ar_shard_begin(sh);
  rc = sg_stage_plan(&plan, n, chunk, SLOTS);
  if (rc == SG_OK) rc = sg_stage_run(&plan, &ops);
  float *tmp = t->dp; /* cuda_reduce's swap: the gradient vector holds the parameters */
  t->dp = t->dg, t->dg = tmp;
out:
  if (s) free(s->slots), free(s->written);
  free(s);
  return rc;
}

/* The replicated device update (chunks of the ring, then the kernel) on
 * a copy: the reference when the vector is staged in several chunks. */
static int replicated_ref(sg_ar_t *ar, float *p, float *g, float *v, size_t n, size_t chunk,
                          const twin_dev_t *t) {
  for (size_t off = 0; off < n; off += chunk)
    SG_CHECK(sg_ar_run(ar, g + off, n - off < chunk ? n - off : chunk));
  for (size_t i = 0; i < n; i++) sg_sgd_apply1(p, g, t->mu > 0 ? v : NULL, i, t->scale, t->lr,
                                               t->wd, t->mu);
  return SG_OK;
}

typedef struct shard_state {
  sg_opts_t *o;
  sg_workload_t *w;
  sg_optim_t *opt;
  sg_ar_t *ar;
  sg_ar_shard_t sh;
  float *ph, *gh, *dp, *dg, *v, *pr, *gr, *vr;
} shard_state_t;

static int shard_setup(sg_comm_t *c, sharg_t *a, shard_state_t *st) {
  const char *kv[] = {"model", "mlp", "hidden", a->hidden, "batch", "8", "dataset", "synthetic",
                      "features", "784", "train_samples", "512", "test_samples", "64",
                      "weight_decay", "1e-4", NULL};
  st->o = ru_train_opts("allreduce", c->size, "", SH_STEPS, kv);
  if (!st->o || sg_workload_new(&st->w, st->o, c->rank, c->size, SG_WL_TRAIN) < 0)
    return sg_err_set(SG_EINVAL, "workload: %s", sg_err_msg());
  SG_CHECK(sg_workload_optim_new(st->w, st->o, &st->opt));
  const size_t n = a->n = sg_workload_nparams(st->w);
  const size_t chunk = a->chunk ? a->chunk : n;
  a->cap = sg_ar_shard_cap(n, chunk, c->size);
  float **v[] = {&st->ph, &st->gh, &st->dp, &st->dg, &st->pr, &st->gr, &st->vr};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++)
    if (!(*v[i] = calloc(n, sizeof(float)))) return SG_ENOMEM;
  if (!(st->v = calloc(a->cap, sizeof(float)))) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(st->w, st->ph));
  memcpy(st->dp, st->ph, n * sizeof(float));
  memcpy(st->pr, st->ph, n * sizeof(float));
  return sg_ar_new(&st->ar, c, "ring", 64 << 10, n);
}

static int shard_body(sg_comm_t *c, sharg_t *a, shard_state_t *st) {
  double loss;
  SG_CHECK(shard_setup(c, a, st));
  const size_t n = a->n, chunk = a->chunk ? a->chunk : n;
  twin_dev_t t = {.dp = st->dp, .dg = st->dg, .v = st->v, .scale = 1.0f / (float)c->size};
  double mu, wd;
  SG_CHECK(sg_opts_double(st->o, "momentum", &mu));
  SG_CHECK(sg_opts_double(st->o, "weight_decay", &wd));
  t.mu = (float)mu, t.wd = (float)wd;
  const sg_ar_shard_ops_t ops = {&t, twin_update};
  SG_CHECK(sg_ar_shard_init(&st->sh, st->ar, chunk, a->cap, &ops));
  st->sh.plant = a->plant;
  for (int64_t step = 0; step < SH_STEPS; step++) {
    t.lr = (float)sg_optim_lr(st->opt, step);
    host_ref_t h = {st->opt, st->ph, st->gh, t.scale, step};
    SG_CHECK(sg_workload_grad(st->w, st->ph, st->gh, step, &loss));
    SG_CHECK(sg_ar_run_update(st->ar, st->gh, st->ph, n, host_update_range, &h));
    SG_CHECK(sg_workload_grad(st->w, t.dp, t.dg, step, &loss));
    SG_CHECK(twin_sharded_step(&st->sh, &t, n, chunk, a->lazy));
    a->used = st->sh.soff;
    if (a->chunk) {
      SG_CHECK(sg_workload_grad(st->w, st->pr, st->gr, step, &loss));
      SG_CHECK(replicated_ref(st->ar, st->pr, st->gr, st->vr, n, chunk, &t));
    }
    a->diff[step] = diff_floats(t.dp, a->chunk ? st->pr : st->ph, n);
  }
  st->dp = t.dp, st->dg = t.dg; /* swapped: free the right ones */
  return SG_OK;
}

static int shard_rank_fn(sg_comm_t *c, void *arg) {
  shard_state_t *st = calloc(1, sizeof *st);
  if (!st) return SG_ENOMEM;
  int rc = shard_body(c, arg, st);
  sg_ar_shard_free(&st->sh);
  sg_ar_destroy(&st->ar);
  free(st->ph), free(st->gh), free(st->dp), free(st->dg), free(st->v);
  free(st->pr), free(st->gr), free(st->vr);
  sg_optim_destroy(&st->opt);
  sg_workload_destroy(&st->w);
  sg_opts_destroy(&st->o);
  free(st);
  return rc;
}

static int run_shard(int n, const char *hidden, size_t chunk, int lazy, int plant, sharg_t *a) {
  char what[128];
  snprintf(what, sizeof what, "sharded %s N=%d chunk %zu lazy %d plant %d", hidden, n, chunk,
           lazy, plant);
  for (int r = 0; r < n; r++)
    a[r] = (sharg_t){.rank = r, .size = n, .hidden = hidden, .chunk = chunk, .lazy = lazy,
                     .plant = plant};
  tr_group_t g = {.n = n, .fn = shard_rank_fn, .args = a, .stride = sizeof *a, .what = what};
  return tr_run(&g);
}

TEST(sharded_equals_host_sharded) {
  static const char *const hidden[] = {"37", "64,33"};
  sharg_t a[4];
  for (int n = 2; n <= 4; n++)
    for (int h = 0; h < 2; h++)
      for (int c = 0; c < 2; c++)
        for (int lazy = 0; lazy < 2; lazy++) {
          CHECK_OK(run_shard(n, hidden[h], c ? 1000 : 0, lazy, 0, a));
          for (int r = 0; r < n; r++) {
            for (int s = 0; s < SH_STEPS; s++)
              CHECK_MSG(a[r].diff[s] == 0, "%s N=%d chunk %s lazy %d rank %d step %d: %ld "
                        "parameters differ from the %s", hidden[h], n, c ? "1000" : "whole",
                        lazy, r, s, a[r].diff[s], c ? "replicated device update" :
                        "host sharded update");
            const size_t chunks = c ? a[r].n / 1000 + 1 : 1;
            CHECK_MSG(a[r].used <= a[r].cap && a[r].used + chunks >= a[r].n / (size_t)n,
                      "rank %d: packed momentum %zu of cap %zu (n %zu)", r, a[r].used, a[r].cap,
                      a[r].n);
          }
        }
  fprintf(stderr, "  %zu params, N = 4: each rank's momentum %zu floats (cap %zu)\n", a[0].n,
          a[0].used, a[0].cap);
}

TEST(sharded_planted_off_by_one_is_caught) {
  sharg_t a[3];
  CHECK_OK(run_shard(3, "37", 0, 1, 1, a));
  long d = 0;
  for (int r = 0; r < 3; r++) d += a[r].diff[SH_STEPS - 1];
  fprintf(stderr, "  planted: owned ranges one float short: %ld parameters differ\n", d);
  CHECK(d > 0);
}
