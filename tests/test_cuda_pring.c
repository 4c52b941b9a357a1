/* test_cuda_pring.c - the persistent device ring's schedule, run on the CPU.
 *
 * The kernel (core/cuda/cuda_kernels.cu, pring) and this host twin both
 * walk core/cuda/pring_plan.h step by step; only the waiting and the
 * flag stores differ (device volatile + fences there, C11 acquire/release
 * atomics here).  Ranks and channels share plain memory: inboxes, flags
 * and vectors, as the IPC mappings share device memory.
 *
 *  - threads: one thread per (rank, lane) as the kernel has one block
 *    per lane (channels cut into parts), N = 2..8, exact against sg_bench_expected on the
 *    allreduce exactness inputs (small integers: exact in any order, and
 *    the additions are the staged ring's in any case), two calls in a row
 *    (the counters carry over), the element past the vector untouched;
 *  - a deterministic scheduler that starves rank 1 and lets every other
 *    rank run ahead as far as its flags allow: no deadlock, exact, and a
 *    plan without the ACK wait (a slot overwritten before its reader took
 *    it) must come out wrong, as must lanes whose windows move with each
 *    chunk's length;
 *  - the plan's own arithmetic: flag values and slots of a worked example.
 */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bench_method.h"
#include "cuda/pring_plan.h"
#include "cuda/sg_cuda.h"

enum { MAXN = 8, MAXL = 32 };

typedef struct world {
  int n, chans, parts, slots;
  int no_ack, chunk_split; /* planted bugs: no ACK wait; lanes split by each chunk's length */
  int rev;                 /* the adversary steps the starved rank's last lane first */
  size_t count, seg;
  float *x[MAXN], *inbox[MAXN];
  _Atomic uint64_t *flags[MAXN];
  pthread_mutex_t mu; /* threads: a lane that cannot move waits on cv ... */
  pthread_cond_t cv;  /* ... which every step's flag stores signal */
} world_t;

static sg_pring_t plan_of(const world_t *w, int r) {
  return (sg_pring_t){.n = w->n, .r = r, .chans = w->chans, .parts = w->parts,
                      .slots = w->slots, .count = w->count, .seg = w->seg};
}

static int lanes(const world_t *w) { return w->chans * w->parts; }

static _Atomic uint64_t *flag(world_t *w, int r, int ln, int which) {
  return w->flags[r] + (size_t)ln * SG_PRING_FLAG_STRIDE + which;
}

static int can_run(world_t *w, int r, int ln, const sg_pring_step_t *s) {
  if (s->rx && atomic_load_explicit(flag(w, r, ln, SG_PRING_READY), memory_order_acquire) <
                   s->need_ready)
    return 0;
  if (s->tx && s->need_ack && !w->no_ack &&
      atomic_load_explicit(flag(w, r, ln, SG_PRING_ACK), memory_order_acquire) < s->need_ack)
    return 0;
  return 1;
}

/* Step t of lane ln: the plan's, or with the planted chunk_split the
 * chunk cut by its own length (windows that move with it). */
static void plan_step(const world_t *w, const sg_pring_t *pl, int ln, uint64_t base, size_t t,
                      sg_pring_step_t *s) {
  if (!w->chunk_split) {
    sg_pring_step(pl, ln, base, t, s);
    return;
  }
  sg_pring_t whole = *pl;
  whole.parts = 1;
  sg_pring_step(&whole, sg_pring_chan(pl, ln), base, t, s); /* the whole chunk */
  const size_t start = s->off, groups = (s->len + 3) / 4, q = (size_t)(ln % pl->parts);
  size_t a = 4 * sg_prim_chunk_off(groups, pl->parts, (int)q);
  size_t b = a + 4 * sg_prim_chunk_len(groups, pl->parts, (int)q);
  a = a < s->len ? a : s->len;
  b = b < s->len ? b : s->len;
  s->soff = a;
  s->off = start + a;
  s->len = b - a;
}

/* The kernel's step body (cuda_kernels.cu pring), element by element. */
static void do_step(world_t *w, int r, int ln, const sg_pring_step_t *s) {
  const int right = (r + 1) % w->n, left = (r + w->n - 1) % w->n, ch = ln / w->parts;
  const float *in =
      w->inbox[r] + ((size_t)ch * w->slots + (s->rx ? s->in_slot : 0)) * w->seg + s->soff;
  float *out =
      w->inbox[right] + ((size_t)ch * w->slots + (s->tx ? s->out_slot : 0)) * w->seg + s->soff;
  for (size_t e = 0; e < s->len; e++) {
    float iv = s->rx ? in[e] : 0.0f, ov = 0.0f;
    sg_prim_apply1(s->op, w->x[r] + s->off + e, &iv, &ov, 0);
    if (s->tx) out[e] = ov;
  }
  if (s->tx)
    atomic_store_explicit(flag(w, right, ln, SG_PRING_READY), s->post_ready, memory_order_release);
  if (s->rx)
    atomic_store_explicit(flag(w, left, ln, SG_PRING_ACK), s->post_ack, memory_order_release);
}

static int world_new(world_t *w, int n, int chans, int parts, int slots, size_t count,
                     size_t seg) {
  if (n < 1 || n > MAXN || chans * parts > MAXL) return -1; /* w stays empty */
  *w = (world_t){.n = n, .chans = chans, .parts = parts, .slots = slots, .count = count,
                 .seg = seg};
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  for (int r = 0; r < n; r++) {
    w->x[r] = malloc((count + 1) * sizeof(float));
    w->inbox[r] = calloc((size_t)chans * slots * seg, sizeof(float));
    w->flags[r] = calloc((size_t)lanes(w) * SG_PRING_FLAG_STRIDE, sizeof(uint64_t));
    if (!w->x[r] || !w->inbox[r] || !w->flags[r]) return -1;
  }
  return 0;
}

static void world_inputs(world_t *w) {
  for (int r = 0; r < w->n; r++) {
    for (size_t i = 0; i < w->count; i++) w->x[r][i] = sg_bench_input(r, i);
    w->x[r][w->count] = -1;
  }
}

static long world_wrong(const world_t *w) {
  long wrong = 0;
  for (int r = 0; r < w->n; r++)
    for (size_t i = 0; i <= w->count; i++)
      wrong += w->x[r][i] != (i < w->count ? sg_bench_expected(w->n, i) : -1);
  return wrong;
}

static void world_free(world_t *w) {
  if (w->n == 0) return; /* never set up */
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  for (int r = 0; r < w->n; r++) {
    free(w->x[r]);
    free(w->inbox[r]);
    free((void *)w->flags[r]);
  }
}

/* ---- one thread per (rank, lane), as the kernel's blocks ---------------- */

typedef struct lane_arg {
  world_t *w;
  int r, ln;
} lane_arg_t;

static void *lane_thread(void *p) {
  lane_arg_t *a = p;
  world_t *w = a->w;
  const sg_pring_t pl = plan_of(w, a->r);
  _Atomic uint64_t *basef = flag(w, a->r, a->ln, SG_PRING_BASE);
  const uint64_t base = atomic_load(basef);
  const int ch = sg_pring_chan(&pl, a->ln);
  const size_t nsteps = sg_pring_nsteps(&pl, ch);
  for (size_t t = 0; t < nsteps; t++) {
    sg_pring_step_t s;
    plan_step(w, &pl, a->ln, base, t, &s);
    if (!can_run(w, a->r, a->ln, &s)) {
      /* checked again under the mutex: a store made after this check
       * is followed by a broadcast taken after we wait */
      pthread_mutex_lock(&w->mu);
      while (!can_run(w, a->r, a->ln, &s)) pthread_cond_wait(&w->cv, &w->mu);
      pthread_mutex_unlock(&w->mu);
    }
    do_step(w, a->r, a->ln, &s);
    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
  }
  atomic_store(basef, base + sg_pring_nsends(&pl, ch));
  return NULL;
}

/* Two calls in a row on the threads; wrong elements after the second. */
static long threaded(int n, int chans, int parts, int slots, size_t count, size_t seg) {
  world_t w = {0};
  long wrong = -1;
  pthread_t th[MAXN * MAXL];
  lane_arg_t args[MAXN * MAXL];
  if (world_new(&w, n, chans, parts, slots, count, seg) < 0) goto out;
  for (int call = 0; call < 2; call++) {
    world_inputs(&w);
    int nt = 0;
    for (int r = 0; r < n; r++)
      for (int ln = 0; ln < lanes(&w); ln++, nt++) {
        args[nt] = (lane_arg_t){&w, r, ln};
        if (pthread_create(&th[nt], NULL, lane_thread, &args[nt]) != 0) abort();
      }
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
  }
  wrong = world_wrong(&w);
out:
  world_free(&w);
  return wrong;
}

static const int sizes_n[] = {2, 3, 4, 5, 8};

TEST(pring_threads_exact) {
  for (size_t k = 0; k < sizeof sizes_n / sizeof *sizes_n; k++) {
    const int n = sizes_n[k];
    const size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      const size_t big = counts[j] > 1u << 20;
      long w = threaded(n, 3, 1, 2, counts[j], big ? 1u << 14 : 2);
      CHECK_MSG(w == 0, "threads N=%d count=%zu: %ld wrong (or error)", n, counts[j], w);
      /* lanes: 2 channels of 3 windows (whole 4-float groups of the slot,
       * the last short; chunks of unequal length in the last block) */
      if (counts[j] >= 1001) {
        w = threaded(n, 2, 3, 2, counts[j], big ? (1u << 14) + 3 : 37);
        CHECK_MSG(w == 0, "threads N=%d count=%zu 2x3 lanes: %ld wrong", n, counts[j], w);
      }
      if (big) continue;
      w = threaded(n, 2, 1, 4, counts[j], 7);
      CHECK_MSG(w == 0, "threads N=%d count=%zu seg 7: %ld wrong", n, counts[j], w);
    }
  }
}

/* ---- a deterministic adversary ------------------------------------------ */

/* Steps rank r's lanes: as far as the flags allow (one = 0) or a single
 * step on the first lane that can move (one = 1).  Steps taken. */
static int advance(world_t *w, int r, size_t t[MAXL], const uint64_t base[MAXL], int one) {
  const sg_pring_t pl = plan_of(w, r);
  int moved = 0;
  for (int i = 0; i < lanes(w); i++) {
    const int ln = w->rev ? lanes(w) - 1 - i : i;
    while (t[ln] < sg_pring_nsteps(&pl, sg_pring_chan(&pl, ln))) {
      sg_pring_step_t s;
      plan_step(w, &pl, ln, base[ln], t[ln], &s);
      if (!can_run(w, r, ln, &s)) break;
      do_step(w, r, ln, &s);
      t[ln]++;
      moved++;
      if (one) return moved;
    }
  }
  return moved;
}

static int all_done(world_t *w, size_t t[][MAXL]) {
  for (int r = 0; r < w->n; r++) {
    const sg_pring_t pl = plan_of(w, r);
    for (int ln = 0; ln < lanes(w); ln++)
      if (t[r][ln] < sg_pring_nsteps(&pl, sg_pring_chan(&pl, ln))) return 0;
  }
  return 1;
}

/* One call: every rank but rank 1 runs as far as its flags allow; rank 1
 * takes a single step only when nobody else can move.  -1: deadlock. */
static int starve_call(world_t *w) {
  size_t t[MAXN][MAXL] = {{0}};
  uint64_t base[MAXN][MAXL];
  for (int r = 0; r < w->n; r++)
    for (int ln = 0; ln < lanes(w); ln++) base[r][ln] = atomic_load(flag(w, r, ln, SG_PRING_BASE));
  while (!all_done(w, t)) {
    int moved = 0;
    for (int r = 0; r < w->n; r++)
      if (r != 1) moved += advance(w, r, t[r], base[r], 0);
    if (!moved && !advance(w, 1, t[1], base[1], 1)) return -1;
  }
  for (int r = 0; r < w->n; r++) {
    const sg_pring_t pl = plan_of(w, r);
    for (int ln = 0; ln < lanes(w); ln++)
      atomic_store(flag(w, r, ln, SG_PRING_BASE),
                   base[r][ln] + sg_pring_nsends(&pl, sg_pring_chan(&pl, ln)));
  }
  return 0;
}

/* Two calls under the adversary; wrong elements, -1 on a deadlock. */
static long starve(int n, int chans, int parts, int slots, size_t count, size_t seg,
                   int bug, int rev_order) {
  world_t w = {0};
  long wrong = -1;
  if (world_new(&w, n, chans, parts, slots, count, seg) < 0) goto out;
  w.no_ack = bug == 1;
  w.chunk_split = bug == 2;
  w.rev = rev_order;
  for (int call = 0; call < 2; call++) {
    world_inputs(&w);
    if (starve_call(&w) < 0) goto out;
  }
  wrong = world_wrong(&w);
out:
  world_free(&w);
  return wrong;
}

TEST(pring_starved_rank_exact_no_deadlock) {
  for (int n = 2; n <= MAXN; n++) {
    const size_t counts[] = {0, 1, (size_t)n + 1, 1001, 100003};
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      long w = starve(n, 3, 1, 2, counts[j], 5, 0, 0);
      CHECK_MSG(w == 0, "starved N=%d count=%zu: %ld wrong (-1: deadlock)", n, counts[j], w);
      /* the kernel's own channels, parts and slots (seg 41: 11 groups over
       * 4 windows, the last short; 20011 in place of 100003 keeps the
       * adversary's rescans of 32 lanes x N ranks within seconds) */
      const size_t kc = counts[j] > 1001 ? 20011 : counts[j];
      for (int rev = 0; rev < 2; rev++) {
        w = starve(n, SG_CUDA_PRING_CHANS, SG_CUDA_PRING_PARTS, SG_CUDA_PRING_SLOTS, kc, 41, 0,
                   rev);
        CHECK_MSG(w == 0, "starved N=%d count=%zu kernel's lanes (order %d): %ld wrong (-1: "
                  "deadlock)", n, counts[j], rev, w);
      }
    }
  }
}

TEST(pring_without_ack_is_caught) {
  /* rank 0 runs N-1 sends ahead of the starved rank 1: with 2 slots and
   * no ACK wait it overwrites a slot rank 1 has not read yet */
  long w = starve(4, 1, 1, 2, 1001, 5, 1, 0);
  fprintf(stderr, "plan without the ACK wait: %ld wrong (must be > 0)\n", w);
  CHECK(w > 0);
  CHECK_EQ_INT(starve(4, 1, 1, 2, 1001, 5, 0, 0), 0);
  /* the same with lanes: each lane's ACK guards its own part of a slot */
  w = starve(4, 1, 3, 2, 1001, 21, 1, 0);
  fprintf(stderr, "plan without the ACK wait, 3 lanes: %ld wrong (must be > 0)\n", w);
  CHECK(w > 0);
  CHECK_EQ_INT(starve(4, 1, 3, 2, 1001, 21, 0, 0), 0);
}

TEST(pring_lanes_split_by_chunk_is_caught) {
  /* chunks of unequal length (a last, partial block): cut by each chunk's
   * own length, a lane's window in a slot moves between two uses of the
   * slot and covers bytes of the next lane's earlier window, which that
   * lane's reader may not have taken yet (its ACK guards only its own
   * window).  The adversary steps the starved rank's last lane first.
   * The plan's fixed windows are exact under both orders. */
  static const struct { int n, parts; size_t seg, count; } cases[] = {
      {2, 2, 9, 71}, {3, 3, 13, 154}, {4, 4, 17, 269}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    const int n = cases[k].n, parts = cases[k].parts;
    const size_t seg = cases[k].seg, count = cases[k].count;
    const long w = starve(n, 1, parts, 2, count, seg, 2, 1);
    fprintf(stderr, "N=%d %d lanes split by each chunk's length: %ld wrong (must be > 0)\n", n,
            parts, w);
    CHECK(w > 0);
    for (int rev = 0; rev < 2; rev++)
      CHECK_EQ_INT(starve(n, 1, parts, 2, count, seg, 0, rev), 0);
  }
}

TEST(pring_plan_worked_example) {
  /* N 3, rank 1, 2 channels, 2 slots, seg 2: blocks of 6 floats; count 20
   * = blocks 0,1,2 of 6 and block 3 of 2; channel 1 takes blocks 1 and 3 */
  const sg_pring_t p = {.n = 3, .r = 1, .chans = 2, .parts = 1, .slots = 2, .count = 20,
                        .seg = 2};
  CHECK_EQ_INT(sg_pring_nblocks(&p, 0), 2);
  CHECK_EQ_INT(sg_pring_nblocks(&p, 1), 2);
  CHECK_EQ_INT(sg_pring_nsteps(&p, 1), 10);
  CHECK_EQ_INT(sg_pring_nsends(&p, 1), 8);
  sg_pring_step_t s;
  sg_pring_step(&p, 1, 100, 0, &s); /* block 1, k 0: send chunk 0 */
  CHECK(s.op == SG_PRIM_SEND && s.off == 6 && s.len == 2 && s.tx && !s.rx);
  CHECK(s.out_slot == 0 && s.need_ack == 99 && s.post_ready == 101);
  sg_pring_step(&p, 1, 100, 2, &s); /* k 2: recvReduceCopySend chunk 1 */
  CHECK(s.op == SG_PRIM_RECV_REDUCE_COPY_SEND && s.off == 8 && s.len == 2);
  CHECK(s.in_slot == 1 && s.need_ready == 102 && s.post_ack == 102);
  CHECK(s.out_slot == 0 && s.need_ack == 101 && s.post_ready == 103);
  sg_pring_step(&p, 1, 100, 4, &s); /* k 4: recv chunk 2 */
  CHECK(s.op == SG_PRIM_RECV && s.off == 10 && !s.tx && s.need_ready == 104);
  sg_pring_step(&p, 1, 100, 5, &s); /* block 3 (2 floats: chunks 1,1,0), k 0: send chunk 0 */
  CHECK(s.op == SG_PRIM_SEND && s.off == 18 && s.len == 1 && s.post_ready == 105);
  sg_pring_step(&p, 1, 0, 1, &s); /* first call: the first two sends wait for nothing */
  CHECK(s.need_ack == 0 && s.need_ready == 1);
}
