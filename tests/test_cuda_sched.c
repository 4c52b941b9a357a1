/* test_cuda_sched.c - the CUDA communication schedules, run on the CPU.
 *
 * The device paths (core/cuda/cuda_comm.c) only map these plain-C
 * schedules onto CUDA calls, so their logic is checked here, where no GPU
 * exists:
 *
 *  - staging (stage_plan.h): a simulated device whose async copies run as
 *    LATE as the declared orderings allow (and, separately, at once), so
 *    a slot reused before its up-copy has read it shows as a wrong sum;
 *    every chunk goes down, is reduced and comes up exactly once, in that
 *    order; counts 0, 1, not divisible, 1M+3; then the same plan driven
 *    by N threads whose host reduce is the real ring allreduce over
 *    inproc ZeroMQ.  The planted bug (one chunk uploaded to the wrong
 *    place) and a plan stripped of its device-side ordering must fail.
 *  - the device ring's primitives (ring_prims.h): the host twin, N threads
 *    writing into each other's inboxes with the real flow control over
 *    inproc ZeroMQ, exact on test_allreduce.c's inputs and counts
 *    (x_r[i] = (r+1)(i%7+1): small integers, exact in any order); the
 *    planted wrong-chunk bug must fail the same check.
 *  - fp16 on the wire through the staging (device cuda, compress fp16):
 *    the staged vector equals the host fp16 ring / rhd run on each chunk
 *    of a host copy, bit for bit, N = 2..5; leaving fp16 off is caught.
 *  - which device a local rank takes.
 */
#include "test.h"

#include <stdint.h>
#include <string.h>

#include "allreduce.h"
#include "thread_ranks.h"
#include "cuda/ring_prims.h"
#include "cuda/stage_plan.h"
#include "device.h"
#include "err.h"
#include "bench_method.h"
#include "transport.h"

static float expect_at(size_t i, int n) { return sg_bench_expected(n, i); }
static float input_at(size_t i, int r) { return sg_bench_input(r, i); }

/* ---- a simulated device for the staging plan ---------------------------- */

enum { Q_MAX = 1 << 16 };
typedef struct op { int slot; size_t off, len; long after, chunk; } op_t;

typedef struct sim {
  float *dev, *slots;
  size_t chunk;
  int lazy, drop_order; /* drop_order: ignore down's `after` (a broken plan) */
  op_t *downq, *upq;
  size_t ndown, nup, down_run, up_run; /* issued, executed (FIFO per stream) */
  long up_of_chunk[Q_MAX];             /* index in upq, -1 */
  size_t slot_last_down[16];
  long seq, t_down[Q_MAX], t_reduce[Q_MAX], t_up[Q_MAX]; /* per chunk, 0 = never */
  int times_down[Q_MAX], times_up[Q_MAX], bad_order;
  long slot_chunk[16];
  /* the host reduce: the real allreduce, or x tri when NULL */
  sg_ar_t *ar;
  float tri;
} sim_t;

static void run_up(sim_t *s, size_t upto) {
  for (; s->up_run < upto; s->up_run++) {
    op_t *o = &s->upq[s->up_run];
    memcpy(s->dev + o->off, s->slots + (size_t)o->slot * s->chunk, o->len * sizeof(float));
    s->t_up[o->chunk] = ++s->seq;
    s->times_up[o->chunk]++;
  }
}

static void run_down(sim_t *s, size_t upto) {
  for (; s->down_run < upto; s->down_run++) {
    op_t *o = &s->downq[s->down_run];
    if (o->after >= 0 && !s->drop_order) run_up(s, (size_t)s->up_of_chunk[o->after] + 1);
    memcpy(s->slots + (size_t)o->slot * s->chunk, s->dev + o->off, o->len * sizeof(float));
    s->slot_chunk[o->slot] = o->chunk;
    s->t_down[o->chunk] = ++s->seq;
    s->times_down[o->chunk]++;
  }
}

static int sim_down(void *ctx, int slot, size_t off, size_t len, long after) {
  sim_t *s = ctx;
  s->downq[s->ndown] = (op_t){slot, off, len, after, (long)(off / s->chunk)};
  s->slot_last_down[slot] = s->ndown++;
  if (!s->lazy) run_down(s, s->ndown);
  return SG_OK;
}
static int sim_wait_down(void *ctx, int slot) {
  sim_t *s = ctx;
  run_down(s, s->slot_last_down[slot] + 1);
  return SG_OK;
}
static int sim_reduce(void *ctx, int slot, size_t len) {
  sim_t *s = ctx;
  float *p = s->slots + (size_t)slot * s->chunk;
  long c = s->slot_chunk[slot];
  if (!s->t_down[c]) s->bad_order++;
  s->t_reduce[c] = ++s->seq;
  if (s->ar) return sg_ar_run(s->ar, p, len);
  for (size_t i = 0; i < len; i++) p[i] *= s->tri;
  return SG_OK;
}
static int sim_up(void *ctx, int slot, size_t off, size_t len, long chunk) {
  sim_t *s = ctx;
  s->upq[s->nup] = (op_t){slot, off, len, -1, (long)(off / s->chunk)};
  s->up_of_chunk[chunk] = (long)s->nup++;
  if (!s->lazy) run_up(s, s->nup);
  return SG_OK;
}
static int sim_finish(void *ctx) {
  sim_t *s = ctx;
  run_down(s, s->ndown);
  run_up(s, s->nup);
  return SG_OK;
}

/* Stage count floats of rank r's input through the simulated device;
 * returns the wrong elements (+ order faults), or a negative error. */
static long stage_io(size_t count, size_t chunk, int slots, int lazy, int plant, int drop,
                     sg_ar_t *ar, int r, int n, const float *in, float *out);
static long stage_once(size_t count, size_t chunk, int slots, int lazy, int plant, int drop,
                       sg_ar_t *ar, int r, int n) {
  return stage_io(count, chunk, slots, lazy, plant, drop, ar, r, n, NULL, NULL);
}

/* The same with the device vector's input `in` (NULL: input_at) and its
 * result copied to `out` instead of checked against the exact sum (the
 * order checks stay). */
static long stage_io(size_t count, size_t chunk, int slots, int lazy, int plant, int drop,
                     sg_ar_t *ar, int r, int n, const float *in, float *out) {
  sim_t *s = calloc(1, sizeof *s);
  sg_stage_plan_t p;
  long wrong = 0;
  if (!s || sg_stage_plan(&p, count, chunk, slots) < 0 || p.nchunks >= Q_MAX) return SG_EINVAL;
  p.plant_bug = plant;
  s->dev = malloc((count + 1) * sizeof(float));
  s->slots = malloc((size_t)slots * chunk * sizeof(float));
  s->downq = malloc(Q_MAX * sizeof(op_t));
  s->upq = malloc(Q_MAX * sizeof(op_t));
  s->chunk = chunk, s->lazy = lazy, s->drop_order = drop, s->ar = ar;
  s->tri = (float)n * (float)(n + 1) / 2;
  for (size_t i = 0; i < count; i++) s->dev[i] = in ? in[i] : input_at(i, r);
  s->dev[count] = -1; /* guard */
  const sg_stage_ops_t ops = {s, sim_down, sim_wait_down, sim_reduce, sim_up, sim_finish, NULL,
                              NULL};
  int rc = sg_stage_run(&p, &ops);
  if (out && rc == 0) memcpy(out, s->dev, count * sizeof *out);
  for (size_t i = 0; rc == 0 && !out && i < count; i++) wrong += s->dev[i] != expect_at(i, n);
  wrong += s->dev[count] != -1;
  for (size_t c = 0; rc == 0 && c < p.nchunks; c++) /* once each, down < reduce < up */
    wrong += s->times_down[c] != 1 || s->times_up[c] != 1 || !(s->t_down[c] < s->t_reduce[c]) ||
             !(s->t_reduce[c] < s->t_up[c]);
  wrong += s->bad_order;
  free(s->dev), free(s->slots), free(s->downq), free(s->upq), free(s);
  return rc < 0 ? rc : wrong;
}

TEST(stage_plan_worked_example) {
  /* docs/cuda.md and stage_plan.h: count 10, chunk 4, slots 2 */
  sg_stage_plan_t p;
  CHECK_OK(sg_stage_plan(&p, 10, 4, 2));
  CHECK_EQ_INT(sg_stage_nsteps(&p), 4);
  const long want[4][4] = {{0, -1, -1, -1}, {1, -1, 0, 0}, {2, 0, 1, 1}, {-1, -1, 2, 2}};
  for (size_t s = 0; s < 4; s++) {
    sg_stage_step_t st;
    sg_stage_step(&p, s, &st);
    CHECK_MSG(st.down == want[s][0] && st.down_after == want[s][1] && st.reduce == want[s][2] &&
                  st.up == want[s][3],
              "step %zu: down %ld after %ld reduce %ld up %ld", s, st.down, st.down_after,
              st.reduce, st.up);
  }
  CHECK_EQ_INT(sg_stage_len(&p, 2), 2);
  CHECK_OK(sg_stage_plan(&p, 0, 4, 2));
  CHECK_EQ_INT(sg_stage_nsteps(&p), 0);
  CHECK(sg_stage_plan(&p, 10, 0, 2) < 0);
  CHECK(sg_stage_plan(&p, 10, 4, 1) < 0);
}

TEST(stage_exact_lazy_and_eager) {
  const size_t counts[] = {0, 1, 3, 10, 1001, (1u << 20) + 3};
  const size_t chunks[] = {1, 4, 1000, 1u << 16};
  for (size_t a = 0; a < sizeof counts / sizeof *counts; a++)
    for (size_t b = 0; b < sizeof chunks / sizeof *chunks; b++)
      for (int slots = 2; slots <= 3; slots++)
        for (int lazy = 0; lazy < 2; lazy++) {
          if (counts[a] / chunks[b] >= Q_MAX - 1) continue;
          long w = stage_once(counts[a], chunks[b], slots, lazy, 0, 0, NULL, 0, 4);
          CHECK_MSG(w == 0, "count %zu chunk %zu slots %d lazy %d: %ld wrong", counts[a],
                    chunks[b], slots, lazy, w);
        }
}

TEST(stage_planted_bug_is_caught) {
  long w = stage_once(1001, 100, 2, 1, 1, 0, NULL, 0, 4);
  fprintf(stderr, "planted wrong-chunk upload: %ld wrong (must be > 0)\n", w);
  CHECK(w > 0);
}

TEST(stage_without_device_ordering_is_caught) {
  /* A plan whose copies down do not wait for the slot's previous copy up:
   * the lazy device shows the overwritten slot; the eager one cannot. */
  long lazy = stage_once(1001, 100, 2, 1, 0, 1, NULL, 0, 4);
  long eager = stage_once(1001, 100, 2, 0, 0, 1, NULL, 0, 4);
  fprintf(stderr, "no slot ordering: lazy %ld wrong, eager %ld wrong\n", lazy, eager);
  CHECK(lazy > 0);
  CHECK_EQ_INT(eager, 0);
}

/* ---- N threads over inproc ZeroMQ --------------------------------------- */

typedef struct targ {
  int rank, size, mode, plant; /* mode 0: staging + ring allreduce; 1: device-ring twin;
                                  2: staging + fp16 ring/rhd (plant: fp16 left off) */
  const char *algo;            /* mode 2: ring | rhd */
  size_t count, chunk;
  float **inboxes;             /* the twin's: every rank's inbox */
  long wrong;
} targ_t;

/* The host twin of the device ring: inboxes are plain memory. */
typedef struct twin {
  float *x, *inbox, *right;
  size_t seg;
} twin_t;

static int twin_apply(void *ctx, int op, size_t off, size_t len, int in_slot, int out_slot) {
  twin_t *t = ctx;
  const float *in = t->inbox + (size_t)in_slot * t->seg;
  float *out = t->right ? t->right + (size_t)out_slot * t->seg : NULL;
  for (size_t i = 0; i < len; i++) sg_prim_apply1(op, t->x + off, in, out, i);
  return SG_OK;
}

static int twin_run(sg_comm_t *c, targ_t *a, float *x) {
  twin_t t = {.x = x, .seg = a->chunk};
  if (!(t.inbox = malloc(2 * t.seg * sizeof(float)))) return SG_ENOMEM;
  /* the handle exchanged is the inbox's address (CUDA: an IPC handle) */
  int rc = sg_dring_exchange(c, &t.inbox, &t.right, sizeof t.inbox);
  const sg_dring_plan_t p = {.count = a->count, .seg = t.seg, .plant_bug = a->plant};
  const sg_dring_ops_t ops = {&t, twin_apply, NULL};
  if (rc == 0) rc = sg_barrier(c);
  if (rc == 0) rc = sg_dring_run(c, &p, &ops);
  if (rc == 0) rc = sg_barrier(c); /* nobody frees an inbox still written to */
  free(t.inbox);
  return rc;
}

/* compress: fp16 with device cuda (allreduce_device.c): the host-staged
 * path runs the fp16 ring (or rhd) on each chunk.  Checked by
 * construction: the staged device vector must equal, bit for bit, the
 * same fp16 algorithm run on a host copy chunk by chunk; inputs that
 * halves do not hold exactly (fp16_input), so of 1000 or more elements
 * some must differ from the float32 sum (an fp16 silently dropped fails
 * that). */
static float fp16_input(size_t i, int r) {
  return (float)((i * 2654435761u) % 1000u) * 1e-3f + (float)r * 0.37f;
}

static int stage_fp16(sg_comm_t *c, targ_t *a) {
  const size_t n = a->count, chunk = a->chunk;
  float *in = malloc((n + 1) * sizeof *in), *got = malloc((n + 1) * sizeof *got),
        *ref = malloc((n + 1) * sizeof *ref);
  sg_ar_t *ar = NULL, *ra = NULL;
  int rc = in && got && ref ? SG_OK : SG_ENOMEM;
  for (size_t i = 0; rc == 0 && i < n; i++) in[i] = ref[i] = fp16_input(i, a->rank);
  if (rc == 0) rc = sg_ar_new(&ar, c, a->algo, 0, chunk);
  if (rc == 0) rc = sg_ar_set_compress(ar, a->plant ? "none" : "fp16");
  if (rc == 0) rc = sg_ar_new(&ra, c, a->algo, 0, chunk);
  if (rc == 0) rc = sg_ar_set_compress(ra, "fp16");
  long w = rc == 0 ? stage_io(n, chunk, 2, 1, 0, 0, ar, a->rank, a->size, in, got) : 0;
  if (w < 0) rc = (int)w;
  for (size_t off = 0; rc == 0 && off < n; off += chunk)
    rc = sg_ar_run(ra, ref + off, n - off < chunk ? n - off : chunk);
  long rounded = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    float f32 = 0;
    for (int r = 0; r < a->size; r++) f32 += fp16_input(i, r);
    w += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    rounded += got[i] != f32;
  }
  /* fp16 must show where there are enough elements for a rounding (a
   * few small sums may all be exact in halves) */
  a->wrong = w + (a->size > 1 && n >= 1000 && rounded == 0);
  sg_ar_destroy(&ar), sg_ar_destroy(&ra);
  free(in), free(got), free(ref);
  return rc;
}

static int thread_rank(sg_comm_t *c, void *p) {
  targ_t *a = p;
  sg_ar_t *ar = NULL;
  float *x = NULL;
  int rc;
  a->rank = c->rank;
  a->size = c->size;
  if (a->mode == 2) {
    SG_TRY(stage_fp16(c, a));
  } else if (a->mode == 0) {
    SG_TRY(sg_ar_new(&ar, c, "ring", 0, a->chunk));
    long w = stage_once(a->count, a->chunk, 2, 1, 0, 0, ar, a->rank, a->size);
    if (w < 0) SG_TRY((int)w);
    a->wrong = w;
  } else {
    if (!(x = malloc((a->count + 1) * sizeof *x))) SG_TRY(SG_ENOMEM);
    for (size_t i = 0; i < a->count; i++) x[i] = input_at(i, a->rank);
    x[a->count] = -1;
    SG_TRY(twin_run(c, a, x));
    a->wrong = 0;
    for (size_t i = 0; i <= a->count; i++)
      a->wrong += x[i] != (i < a->count ? expect_at(i, a->size) : -1);
  }
  rc = SG_OK;
fail:
  free(x);
  sg_ar_destroy(&ar);
  return rc;
}

static long threads(int mode, int n, size_t count, size_t chunk, int plant) {
  targ_t args[8];
  char what[64];
  if (n > 8) return SG_EINVAL;
  for (int r = 0; r < n; r++)
    args[r] = (targ_t){.mode = mode, .plant = plant, .count = count, .chunk = chunk};
  snprintf(what, sizeof what, "mode %d N=%d count=%zu", mode, n, count);
  tr_group_t g = {.n = n, .fn = thread_rank, .args = args, .stride = sizeof *args, .what = what};
  int rc = tr_run(&g);
  long wrong = 0;
  for (int r = 0; r < n; r++) wrong += args[r].wrong;
  return rc < 0 ? rc : wrong;
}

static const int sizes_n[] = {1, 2, 3, 4, 5, 8};

TEST(stage_with_ring_allreduce_exact) {
  for (size_t k = 0; k < sizeof sizes_n / sizeof *sizes_n; k++) {
    int n = sizes_n[k];
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      size_t chunk = counts[j] > 1u << 20 ? 1u << 18 : 100;
      long w = threads(0, n, counts[j], chunk, 0);
      CHECK_MSG(w == 0, "staged ring N=%d count=%zu: %ld wrong (or error)", n, counts[j], w);
    }
  }
}

static long threads_fp16(const char *algo, int n, size_t count, size_t chunk, int plant) {
  targ_t args[8];
  if (n > 8) return SG_EINVAL;
  for (int r = 0; r < n; r++)
    args[r] = (targ_t){.mode = 2, .algo = algo, .plant = plant, .count = count, .chunk = chunk};
  tr_group_t g = {.n = n, .fn = thread_rank, .args = args, .stride = sizeof *args,
                  .what = "staged fp16"};
  int rc = tr_run(&g);
  long wrong = 0;
  for (int r = 0; r < n; r++) wrong += args[r].wrong;
  return rc < 0 ? rc : wrong;
}

TEST(stage_fp16_equals_the_host_algorithm_per_chunk) {
  static const char *const algos[] = {"ring", "rhd"};
  for (size_t k = 0; k < 2; k++)
    for (int n = 2; n <= 5; n++) {
      size_t counts[] = {1, (size_t)n + 1, 1001, 100003};
      for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
        long w = threads_fp16(algos[k], n, counts[j], counts[j] > 10000 ? 4096 : 100, 0);
        CHECK_MSG(w == 0, "staged fp16 %s N=%d count=%zu: %ld wrong (or error)", algos[k], n,
                  counts[j], w);
      }
    }
  /* planted: the staged path left at float32 on the wire */
  long w = threads_fp16("ring", 3, 1001, 100, 1);
  CHECK_MSG(w > 0, "fp16 left off was not caught (%ld)", w);
}

TEST(ring_prims_schedule) {
  /* N = 3 worked example of ring_prims.h, rank 1 */
  const int ops[5] = {SG_PRIM_SEND, SG_PRIM_RECV_REDUCE_SEND, SG_PRIM_RECV_REDUCE_COPY_SEND,
                      SG_PRIM_RECV_COPY_SEND, SG_PRIM_RECV};
  const int chunks[5] = {0, 2, 1, 0, 2};
  CHECK_EQ_INT(sg_ring_nprims(3), 5);
  CHECK_EQ_INT(sg_ring_nprims(1), 0);
  for (int k = 0; k < 5; k++) {
    sg_prim_t p = sg_ring_prim(3, 1, k, 0);
    CHECK_MSG(p.op == ops[k] && p.chunk == chunks[k], "k %d: %s chunk %d", k,
              sg_prim_name(p.op), p.chunk);
  }
  /* every rank's final recvReduceCopySend is its own chunk, and what rank
   * r sends at step k is the chunk rank r+1 works on at step k+1 */
  for (int n = 2; n <= 8; n++)
    for (int r = 0; r < n; r++)
      for (int k = 0; k + 1 < sg_ring_nprims(n); k++)
        CHECK_EQ_INT(sg_ring_prim(n, r, k, 0).chunk, sg_ring_prim(n, (r + 1) % n, k + 1, 0).chunk);
}

TEST(ring_prims_twin_exact) {
  for (size_t k = 0; k < sizeof sizes_n / sizeof *sizes_n; k++) {
    int n = sizes_n[k];
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      long w = threads(1, n, counts[j], 1u << 18, 0);
      CHECK_MSG(w == 0, "device-ring twin N=%d count=%zu: %ld wrong (or error)", n, counts[j], w);
      if (counts[j] > 1u << 20) continue;
      /* 2-float inbox slots: many blocks, every slot reused many times */
      w = threads(1, n, counts[j], 2, 0);
      CHECK_MSG(w == 0, "device-ring twin N=%d count=%zu seg 2: %ld wrong (or error)", n,
                counts[j], w);
    }
  }
}

TEST(ring_prims_planted_bug_is_caught) {
  long w = threads(1, 3, 1001, 64, 1);
  fprintf(stderr, "planted wrong chunk in recvCopySend: %ld wrong (must be > 0)\n", w);
  CHECK(w > 0);
  CHECK_EQ_INT(threads(1, 3, 1001, 64, 0), 0);
}

TEST(ring_prims_bytes) {
  /* each rank sends 2(N-1) of the N chunks of every block: together
   * 2(N-1) x count floats */
  CHECK_EQ_INT(sg_dring_floats_sent(4, 1, 1000, 1000), 2 * 3 * 250);
  CHECK_EQ_INT(sg_dring_floats_sent(1, 0, 1000, 10), 0);
  /* N 3, seg 2: block [0,6) 4 chunks of 2; block [6,10) chunks 2,1,1 and
   * rank 0 sends chunks 2, 1, 0, 2 of it */
  CHECK_EQ_INT(sg_dring_floats_sent(3, 0, 10, 2), 8 + 1 + 1 + 2 + 1);
  for (int n = 2; n <= 8; n++) {
    size_t sum = 0;
    for (int r = 0; r < n; r++) sum += sg_dring_floats_sent(n, r, 1001, 7);
    CHECK_EQ_INT(sum, (size_t)(2 * n - 2) * 1001);
  }
}

TEST(device_pick_by_local_rank) {
  CHECK_EQ_INT(sg_device_pick(0, 4, 0), 0);
  CHECK_EQ_INT(sg_device_pick(5, 4, 0), 1);
  CHECK_EQ_INT(sg_device_pick(5, 4, 2), 1);
  CHECK_EQ_INT(sg_device_pick(4, 4, 2), 0);
  CHECK_EQ_INT(sg_device_pick(3, 4, 8), 3); /* more than visible: all visible */
  CHECK_EQ_INT(sg_device_pick(3, 0, 0), 0);
  char hosts[5][64] = {"a", "b", "a", "a", "b"};
  sg_comm_t c = {.rank = 3, .size = 5, .hosts = hosts};
  int lr = -1, ls = -1;
  sg_device_local_rank(&c, &lr, &ls);
  CHECK_EQ_INT(lr, 2);
  CHECK_EQ_INT(ls, 3);
  c.rank = 4;
  sg_device_local_rank(&c, &lr, &ls);
  CHECK_EQ_INT(lr, 1);
  CHECK_EQ_INT(ls, 2);
}

#ifdef SG_HAVE_CUDA
#include "cuda/cuda_dl.h"

/* cuBLAS and NCCL are loaded on first use, not linked: both must load and
 * bind here (no GPU is needed to load a library). */
TEST(cublas_and_nccl_load_on_demand) {
  const sg_cublas_api_t *cb = NULL;
  CHECK_OK(sg_cublas(&cb));
  CHECK(cb && cb->create && cb->sgemm);
#ifdef SG_HAVE_NCCL
  const sg_nccl_api_t *nc = NULL;
  CHECK_OK(sg_nccl(&nc));
  CHECK(nc && nc->all_reduce);
  CHECK_STR_CONTAINS(nc->error_string(ncclInvalidUsage), "invalid");
#endif
}
#endif

/* The device algorithms are rows of the allreduce algorithm table with
 * memory SG_AR_MEM_DEVICE; the engine's list of device algorithms names
 * exactly those rows; a host context refuses them. */
TEST(algorithm_table_memory_flag) {
  static const char *const host[] = {"ring", "rhd", "tree", "hier", "native"};
  static const char *const dev[] = {"cuda-ring", "nccl"};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) {
    const sg_ar_algo_t *a = sg_ar_algo_find(host[i]);
    CHECK_MSG(a && a->memory == SG_AR_MEM_HOST && a->allreduce && !a->dev, "%s", host[i]);
    CHECK_MSG(strstr(SG_AR_ALGORITHMS, host[i]) != NULL, "%s", host[i]);
  }
  char list[64] = "";
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) {
    const sg_ar_algo_t *a = sg_ar_algo_find(dev[i]);
    CHECK_MSG(a && a->memory == SG_AR_MEM_DEVICE && a->dev && !a->allreduce, "%s", dev[i]);
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? "|" : "", dev[i]);
  }
  CHECK_MSG(strcmp(list, SG_AR_DEVICE_ALGORITHMS) == 0, "rows %s, list %s", list,
            SG_AR_DEVICE_ALGORITHMS);
  /* refused from the row alone, before the communicator is used */
  sg_ar_t *ar = NULL;
  CHECK(sg_ar_new(&ar, NULL, "cuda-ring", 0, 16) == SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "sums device buffers");
  CHECK(ar == NULL);
}
