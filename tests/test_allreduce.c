/* test_allreduce.c - ring and rhd are exact, as N threads over the inproc
 * ZeroMQ transport; the broadcast too.
 *
 * Inputs: x_r[i] = (r+1) * (i%7 + 1), so the sum (i%7 + 1) * N(N+1)/2 is
 * a small integer, the same in every summation order: compared exactly.
 * Neighbouring elements differ, so a chunk in the wrong place shows.
 * Counts: 0, 1, N-1, N+1, an odd count, 1M+3 (1M+3 with the default
 * segment; the others also with tiny segments so that every chunk is many
 * segments and the pipeline really overlaps steps).
 *
 * The planted bug (sg_ar_plant_bug: the ring sends a chunk it never
 * reduced at the first allgather step) must make the same check fail.
 */
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "allreduce.h"
#include "bench_method.h"
#include "topk.h"
#include "err.h"
#include "thread_ranks.h"
#include "transport_new.h"

typedef struct rank_arg {
  const char *algo;
  size_t count, segment;
  int group;     /* hier: ranks per group (0: all) */
  int plant;     /* sg_ar_plant_bug: the ring's planted bug */
  int64_t wrong; /* elements that differ from the exact sum */
} rank_arg_t;

static int ar_rank(sg_comm_t *c, void *p) {
  rank_arg_t *a = p;
  sg_ar_t *ar = NULL;
  float *buf = NULL;
  int rc;
  SG_TRY(sg_ar_new(&ar, c, a->algo, a->segment, a->count));
  sg_ar_plant_bug(ar, a->plant);
  sg_ar_set_group(ar, a->group);
  buf = malloc((a->count + 1) * sizeof *buf);
  if (!buf) {
    rc = SG_ENOMEM;
    goto fail;
  }
  /* Twice on the same context: the second call must not see leftovers. */
  for (int rep = 0; rep < 2; rep++) {
    for (size_t i = 0; i < a->count; i++) buf[i] = sg_bench_input(c->rank, i);
    buf[a->count] = -1; /* guard element past the end */
    SG_TRY(sg_ar_run(ar, buf, a->count));
    a->wrong = 0;
    for (size_t i = 0; i < a->count; i++)
      if (buf[i] != sg_bench_expected(c->size, i)) a->wrong++;
    if (buf[a->count] != -1) a->wrong++;
  }
fail:
  free(buf);
  sg_ar_destroy(&ar);
  return rc;
}

/* Run one allreduce on n threads; returns the number of wrong elements
 * over all ranks, or a negative error. */
static int64_t run_g(const char *algo, int n, size_t count, size_t segment, int plant,
                     int group) {
  rank_arg_t args[16];
  char what[64];
  if (n > 16) return SG_EINVAL;
  for (int r = 0; r < n; r++)
    args[r] = (rank_arg_t){.algo = algo, .count = count, .segment = segment, .plant = plant,
                           .group = group};
  snprintf(what, sizeof what, "%s N=%d G=%d count=%zu", algo, n, group, count);
  tr_group_t g = {.n = n, .fn = ar_rank, .args = args, .stride = sizeof *args, .what = what};
  int rc = tr_run(&g);
  int64_t wrong = 0;
  for (int r = 0; r < n; r++) wrong += args[r].wrong;
  return rc < 0 ? rc : wrong;
}

static int64_t run(const char *algo, int n, size_t count, size_t segment, int plant) {
  return run_g(algo, n, count, segment, plant, 0);
}

static const int sizes_n[] = {1, 2, 3, 4, 5, 8};

static void exact_for(const char *algo) {
  for (size_t k = 0; k < sizeof sizes_n / sizeof *sizes_n; k++) {
    int n = sizes_n[k];
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      int64_t w = run(algo, n, counts[j], 0, 0);
      CHECK_MSG(w == 0, "%s N=%d count=%zu: %lld wrong (or error)", algo, n, counts[j],
                (long long)w);
      if (counts[j] > 1u << 20) continue;
      /* 8-byte segments: chunks of many segments, deep pipelines */
      w = run(algo, n, counts[j], 8, 0);
      CHECK_MSG(w == 0, "%s N=%d count=%zu segment 8: %lld wrong (or error)", algo, n,
                counts[j], (long long)w);
    }
  }
}

TEST(ring_exact) { exact_for("ring"); }
TEST(rhd_exact) { exact_for("rhd"); }

/* tree and hier: every N from 1 to 9, counts 0, 1, N-1, N+1, odd, and
 * 1M+3; tiny segments (8 B) so that the pipelines hold many segments.
 * hier with group sizes 1 to 4 (1: the flat ring; N: one group; N not a
 * multiple: the extra ranks fold in; 1M+3 with groups of 2 only, so that
 * the sanitizer pass stays within its time) and every group size of
 * N = 6 and 7. */
static void exact_1_to_9(const char *algo, int group, int big) {
  for (int n = 1; n <= 9; n++) {
    size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
    for (size_t j = 0; j < sizeof counts / sizeof *counts - !big; j++) {
      int64_t w = run_g(algo, n, counts[j], 0, 0, group);
      CHECK_MSG(w == 0, "%s N=%d G=%d count=%zu: %lld wrong (or error)", algo, n, group,
                counts[j], (long long)w);
      if (counts[j] > 1u << 20) continue;
      w = run_g(algo, n, counts[j], 8, 0, group);
      CHECK_MSG(w == 0, "%s N=%d G=%d count=%zu segment 8: %lld wrong (or error)", algo, n,
                group, counts[j], (long long)w);
    }
  }
}

TEST(tree_exact) { exact_1_to_9("tree", 0, 1); }

TEST(hier_exact) {
  for (int g = 1; g <= 4; g++) exact_1_to_9("hier", g, g == 2); /* 1M+3: one group size */
  /* every group size of N = 6 and 7, 1001 floats in 8-byte segments */
  for (int n = 6; n <= 7; n++)
    for (int g = 0; g <= n + 1; g++)
      CHECK_MSG(run_g("hier", n, 1001, 8, 0, g) == 0, "hier N=%d G=%d", n, g);
}

TEST(tree_and_hier_planted_bug_is_caught) {
  /* tree: the root leaves out a child's first segment; hier: the owner of
   * a chunk inside a group leaves out the last part of its sum */
  CHECK_MSG(run("tree", 2, 1001, 0, 1) > 0, "tree N=2: planted bug not detected");
  CHECK_MSG(run("tree", 5, 1001, 8, 1) > 0, "tree N=5: planted bug not detected");
  CHECK_MSG(run_g("hier", 4, 1001, 0, 1, 2) > 0, "hier N=4 G=2: planted bug not detected");
  CHECK_MSG(run_g("hier", 7, 1001, 8, 1, 3) > 0, "hier N=7 G=3: planted bug not detected");
  CHECK_EQ_INT(run("tree", 5, 1001, 8, 0), 0);
  CHECK_EQ_INT(run_g("hier", 7, 1001, 8, 0, 3), 0);
}

TEST(ring_planted_bug_is_caught) {
  /* The same check, with the ring sending a wrong chunk once. */
  int64_t w = run("ring", 3, 1001, 0, 1);
  CHECK_MSG(w > 0, "planted bug not detected (%lld)", (long long)w);
  w = run("ring", 4, 1001, 8, 1);
  CHECK_MSG(w > 0, "planted bug not detected with segments (%lld)", (long long)w);
  /* and without the plant the same runs pass */
  CHECK_EQ_INT(run("ring", 3, 1001, 0, 0), 0);
}

TEST(native_needs_mpi) {
  void *zctx = zmq_ctx_new();
  sg_comm_t *c = NULL;
  sg_ar_t *ar = NULL;
  sg_zmq_cfg_t zc = {.rank = 0, .size = 1, .deadline_s = 5, .scheme = "inproc",
                     .group = "native1", .zctx = zctx};
  CHECK_OK(sg_comm_zmq_new(&c, &zc));
  int rc = sg_ar_new(&ar, c, "native", 0, 10);
  sg_comm_destroy(&c);
  zmq_ctx_term(zctx);
  CHECK_EQ_INT(rc, SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "needs transport mpi");
  CHECK(sg_ar_algo_find("bogus") == NULL);
}

/* ---- rhd bit for bit, fp16 ------------------------------------------- */

/* Inputs whose sums depend on the order of the additions (non-integers of
 * varied magnitude), so a schedule that sums in another order shows. */
static float rough_input(int r, size_t i) {
  uint32_t h = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503u + 17u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  /* within +-64, well inside the range of a half */
  return ((float)(h % 2000001u) - 1000000.0f) / 1e6f * (float)(1u << (h % 13)) / 64.0f;
}

typedef struct vec_arg {
  const char *algo, *compress;
  size_t count, segment;
  float *out;     /* this rank's result */
  uint64_t bytes; /* sent by this rank during the call */
} vec_arg_t;

static int vec_rank(sg_comm_t *c, void *p) {
  vec_arg_t *a = p;
  sg_ar_t *ar = NULL;
  int rc;
  SG_TRY(sg_ar_new(&ar, c, a->algo, a->segment, a->count));
  SG_TRY(sg_ar_set_compress(ar, a->compress));
  for (size_t i = 0; i < a->count; i++) a->out[i] = rough_input(c->rank, i);
  uint64_t b0 = sg_comm_bytes_sent(c);
  SG_TRY(sg_ar_run(ar, a->out, a->count));
  a->bytes = sg_comm_bytes_sent(c) - b0;
fail:
  sg_ar_destroy(&ar);
  return rc;
}

/* Every rank's result of one call, in out[r] (count floats each, the
 * caller's); bytes[r] sent by rank r.  0 or a negative error. */
static int run_vec(const char *algo, const char *compress, int n, size_t count, size_t segment,
                   float **out, uint64_t *bytes) {
  vec_arg_t args[8];
  for (int r = 0; r < n; r++)
    args[r] = (vec_arg_t){.algo = algo, .compress = compress, .count = count,
                          .segment = segment, .out = out[r]};
  tr_group_t g = {.n = n, .fn = vec_rank, .args = args, .stride = sizeof *args,
                  .what = algo};
  int rc = tr_run(&g);
  for (int r = 0; r < n && bytes; r++) bytes[r] = args[r].bytes;
  if (rc < 0) fprintf(stderr, "  %s\n", g.err);
  return rc;
}

/* The schedule rhd had before it was segmented, serially: fold (odd +=
 * even), recursive halving (kept half += the partner's copy of it),
 * recursive doubling (copies), unfold.  v[r] is rank r's vector. */
static void rhd_reference(int n, size_t count, float **v) {
  int p = 1, lo[8], hi[8];
  while (p * 2 <= n) p *= 2;
  int x = n - p;
  for (int i = 0; i < x; i++)
    for (size_t e = 0; e < count; e++) v[2 * i + 1][e] += v[2 * i][e];
#define RANK(nr) ((nr) < x ? 2 * (nr) + 1 : (nr) + x)
  for (int nr = 0; nr < p; nr++) lo[nr] = 0, hi[nr] = p;
  for (int mask = p / 2; mask >= 1; mask /= 2)
    for (int nr = 0; nr < p; nr++) { /* pairs touch disjoint halves */
      int mid = lo[nr] + (hi[nr] - lo[nr]) / 2;
      if (nr & mask) lo[nr] = mid;
      else hi[nr] = mid;
      size_t a = sg_ar_chunk_off(count, p, lo[nr]), b = sg_ar_chunk_off(count, p, hi[nr]);
      for (size_t e = a; e < b; e++) v[RANK(nr)][e] += v[RANK(nr ^ mask)][e];
    }
  for (int mask = 1; mask < p; mask *= 2)
    for (int nr = 0; nr < p; nr++) {
      int theirs = (nr ^ mask) / mask * mask;
      size_t a = sg_ar_chunk_off(count, p, theirs), b = sg_ar_chunk_off(count, p, theirs + mask);
      memcpy(v[RANK(nr)] + a, v[RANK(nr ^ mask)] + a, (b - a) * sizeof(float));
    }
  for (int i = 0; i < x; i++) memcpy(v[2 * i], v[2 * i + 1], count * sizeof(float));
#undef RANK
}

typedef struct vecs {
  float *v[8];
} vecs_t;

static int vecs_new(vecs_t *w, int n, size_t count) {
  for (int r = 0; r < 8; r++) w->v[r] = r < n ? malloc(count * sizeof(float) + 1) : NULL;
  for (int r = 0; r < n; r++)
    if (!w->v[r]) return SG_ENOMEM;
  return SG_OK;
}
static void vecs_free(vecs_t *w) {
  for (int r = 0; r < 8; r++) free(w->v[r]);
}

/* rhd, now composed of the primitives and segmented, must give the old
 * schedule's sums bit for bit, on every rank.  The inputs are sensitive to
 * summation order: the plain left-to-right sum differs from the schedule's
 * (checked, so the comparison can fail). */
TEST(rhd_bit_equal_to_the_unsegmented_schedule) {
  /* (0 = the default segment: one per exchange here; 64 B: many) */
  static const int ns[] = {2, 3, 4, 5, 6, 8};
  const size_t count = 30011;
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    int n = ns[k];
    vecs_t got, ref;
    CHECK_OK(vecs_new(&got, n, count));
    CHECK_OK(vecs_new(&ref, n, count));
    for (int r = 0; r < n; r++)
      for (size_t i = 0; i < count; i++) ref.v[r][i] = rough_input(r, i);
    size_t linear_differs = 0;
    for (size_t i = 0; i < count; i++) {
      float s = 0;
      for (int r = 0; r < n; r++) s += ref.v[r][i];
      got.v[0][i] = s;
    }
    rhd_reference(n, count, ref.v);
    for (size_t i = 0; i < count; i++) linear_differs += got.v[0][i] != ref.v[0][i];
    if (n >= 4) /* (N = 3 folds 0 into 1 and adds 2: the linear order) */
      CHECK_MSG(linear_differs > 0, "N=%d: inputs not order-sensitive", n);
    size_t segs[] = {0, 64};
    for (int sgi = 0; sgi < 2; sgi++) {
      CHECK_OK(run_vec("rhd", "none", n, count, segs[sgi], got.v, NULL));
      for (int r = 0; r < n; r++)
        CHECK_MSG(!memcmp(got.v[r], ref.v[r], count * sizeof(float)),
                  "N=%d segment %zu: rank %d differs from the schedule", n, segs[sgi], r);
    }
    if (n == 4)
      fprintf(stderr, "  N=4: the linear sum differs in %zu of %zu\n", linear_differs, count);
    vecs_free(&got);
    vecs_free(&ref);
  }
}

/* compress: fp16 (ring and rhd): half the bytes of none, exactly; every
 * replica the same bits; each element within a few half roundings of the
 * exact sum (2^-8 of the sum of magnitudes), and not equal to none's
 * result everywhere (the halves are really used). */
static void fp16_case(const char *algo, int n, size_t count, size_t segment) {
  vecs_t h, f;
  uint64_t bh[8], bf[8];
  CHECK_OK(vecs_new(&h, n, count));
  CHECK_OK(vecs_new(&f, n, count));
  CHECK_OK(run_vec(algo, "fp16", n, count, segment, h.v, bh));
  CHECK_OK(run_vec(algo, "none", n, count, segment, f.v, bf));
  size_t far = 0, differs = 0, unequal = 0;
  for (size_t i = 0; i < count; i++) {
    double mag = 0;
    for (int r = 0; r < n; r++) mag += fabs((double)rough_input(r, i));
    far += fabs((double)h.v[0][i] - (double)f.v[0][i]) > mag / 256;
    differs += h.v[0][i] != f.v[0][i];
  }
  for (int r = 1; r < n; r++) unequal += memcmp(h.v[r], h.v[0], count * sizeof(float)) != 0;
  for (int r = 0; r < n; r++)
    CHECK_MSG(bh[r] * 2 == bf[r], "%s N=%d: rank %d sent %llu B with fp16, %llu without", algo,
              n, r, (unsigned long long)bh[r], (unsigned long long)bf[r]);
  CHECK_MSG(unequal == 0, "%s N=%d: %zu replicas differ from rank 0", algo, n, unequal);
  CHECK_MSG(far == 0, "%s N=%d: %zu elements beyond 2^-8 of the magnitude", algo, n, far);
  CHECK_MSG(differs > count / 4, "%s N=%d: only %zu of %zu elements rounded", algo, n, differs,
            count);
  vecs_free(&h);
  vecs_free(&f);
}

TEST(fp16_halves_the_bytes_within_rounding) {
  static const int ns[] = {2, 3, 4, 5, 8};
  for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
    fp16_case("rhd", ns[k], 30011, 0);
    fp16_case("rhd", ns[k], 30011, 256);
    fp16_case("ring", ns[k], 30011, 256);
  }
}

/* ---- broadcast ------------------------------------------------------- */

typedef struct bc_arg {
  int root, ok;
} bc_arg_t;

static int bc_rank(sg_comm_t *c, void *p) {
  bc_arg_t *a = p;
  int v[100];
  for (int i = 0; i < 100; i++) v[i] = c->rank == a->root ? i * 3 + 1 : -7;
  SG_CHECK(sg_ar_bcast(c, v, sizeof v, a->root));
  a->ok = 1;
  for (int i = 0; i < 100; i++)
    if (v[i] != i * 3 + 1) a->ok = 0;
  return 0;
}

TEST(bcast_binomial) {
  for (int n = 1; n <= 7; n++) {
    for (int root = 0; root < n; root += 2) {
      bc_arg_t args[8];
      for (int r = 0; r < n; r++) args[r] = (bc_arg_t){.root = root};
      tr_group_t g = {.n = n, .fn = bc_rank, .args = args, .stride = sizeof *args,
                      .what = "bcast"};
      int bad = tr_run(&g) < 0 ? n : 0;
      for (int r = 0; r < n && !bad; r++) bad += !args[r].ok;
      CHECK_MSG(bad == 0, "N=%d root=%d: %d ranks wrong", n, root, bad);
    }
  }
}

/* compress: topk keeps what it does not send (error feedback): T steps of
 * a fixed integer gradient per rank, then enough steps of zero gradient to
 * flush every residual, must deliver exactly T times the sum of the
 * gradients to every rank (small integers: exact in float).  Dropping
 * the residual loses all but the first top-k entries and fails. */
typedef struct topk_arg {
  int rank;
  int64_t wrong;
} topk_arg_t;

enum { TOPK_COUNT = 1000, TOPK_T = 20 };

static int topk_rank(sg_comm_t *c, void *p) {
  topk_arg_t *a = p;
  sg_topk_t *tk = NULL;
  static _Thread_local float buf[TOPK_COUNT], total[TOPK_COUNT];
  int rc;
  a->rank = c->rank;
  SG_TRY(sg_topk_new(&tk, c, TOPK_COUNT, 0.05)); /* k = 50: 20 flush steps */
  memset(total, 0, sizeof total);
  for (int t = 0; t < TOPK_T + TOPK_COUNT / 50 + 1; t++) {
    for (int i = 0; i < TOPK_COUNT; i++)
      buf[i] = t < TOPK_T ? (float)(c->rank + 1) * (float)(i % 7 + 1) : 0.0f;
    SG_TRY(sg_topk_run(tk, buf));
    for (int i = 0; i < TOPK_COUNT; i++) total[i] += buf[i];
  }
  const float tri = (float)c->size * (float)(c->size + 1) / 2;
  a->wrong = 0;
  for (int i = 0; i < TOPK_COUNT; i++)
    if (total[i] != (float)TOPK_T * tri * (float)(i % 7 + 1)) a->wrong++;
fail:
  sg_topk_destroy(&tk);
  return rc;
}

TEST(topk_conserves_the_gradient) {
  enum { n = 3 };
  topk_arg_t args[n] = {{0}};
  tr_group_t g = {.n = n, .fn = topk_rank, .args = args, .stride = sizeof args[0],
                  .what = "topk N=3"};
  CHECK_MSG(tr_run(&g) == 0, "%s", g.err);
  int64_t wrong = 0;
  for (int r = 0; r < n; r++) wrong += args[r].wrong;
  fprintf(stderr, "  topk: %lld of %d elements not conserved\n", (long long)wrong,
          n * TOPK_COUNT);
  CHECK_EQ_INT(wrong, 0);
}

/* A topk peer whose block is shorter than k pairs (a count that lies):
 * the receive left the rest of the block from the previous step in place
 * and those stale pairs were summed again, silently.  Rank 1 is played by
 * hand: a full block of (i, 1) pairs, then half a block. */
enum { LIAR_COUNT = 100, LIAR_K = 10 };

typedef struct liar_arg {
  int rc2; /* rank 0's second sg_topk_run; rank 1: its own result */
  float buf2[LIAR_COUNT];
  char msg[200];
} liar_arg_t;

static int liar_rank(sg_comm_t *c, void *p) {
  liar_arg_t *a = p;
  sg_topk_t *tk = NULL;
  float buf[LIAR_COUNT] = {0};
  struct { uint32_t idx; float val; } mine[LIAR_K], theirs[LIAR_K];
  int rc = SG_OK;
  if (c->rank == 0) {
    SG_TRY(sg_topk_new(&tk, c, LIAR_COUNT, (double)LIAR_K / LIAR_COUNT));
    SG_TRY(sg_topk_run(tk, buf));
    a->rc2 = sg_topk_run(tk, a->buf2);
    snprintf(a->msg, sizeof a->msg, "%s", sg_err_msg());
  } else {
    for (int j = 0; j < LIAR_K; j++) mine[j].idx = (uint32_t)j, mine[j].val = 1.0f;
    for (int round = 0; round < 2; round++)
      SG_TRY(sg_sendrecv(c, 0, SG_AR_TAG_TOPK, mine, (round ? LIAR_K / 2 : LIAR_K) * sizeof mine[0],
                         0, SG_AR_TAG_TOPK, theirs, sizeof theirs, NULL));
  }
fail:
  sg_topk_destroy(&tk);
  if (c->rank == 1) a->rc2 = rc;
  return SG_OK; /* the outcome is in rc2: rank 0's failure is the point */
}

TEST(topk_block_shorter_than_k_is_refused_not_padded_with_stale_pairs) {
  static liar_arg_t args[2];
  tr_group_t g = {.n = 2, .deadline_s = 10, .fn = liar_rank, .args = args,
                  .stride = sizeof args[0], .what = "topk liar"};
  CHECK_MSG(tr_run(&g) == 0, "%s", g.err);
  CHECK_MSG(args[1].rc2 == 0, "the liar itself failed: %d", args[1].rc2);
  /* before: rc 0 and buf2[5..9] = 1, pairs the liar sent a step earlier */
  fprintf(stderr, "  topk with a short block: rc %d (%s), buf[9] = %g\n", args[0].rc2,
          args[0].msg, (double)args[0].buf2[9]);
  CHECK_EQ_INT(args[0].rc2, SG_EPROTO);
  CHECK_STR_CONTAINS(args[0].msg, "topk: rank 1 sent 40 B, a block is 80 B");
}

/* Uneven vectors: rank 1 reduces fewer floats than rank 0, so every
 * segment it sends is short.  The ring's receive slots then kept bytes of
 * an earlier segment and rank 0 summed them in, without an error. */
typedef struct uneven_arg {
  int rc;
  const char *compress;
  size_t count;
  char msg[300];
} uneven_arg_t;

static int uneven_rank(sg_comm_t *c, void *p) {
  uneven_arg_t *a = p;
  sg_ar_t *ar = NULL;
  float buf[64];
  int rc;
  for (size_t i = 0; i < 64; i++) buf[i] = 1.0f;
  SG_TRY(sg_ar_new(&ar, c, "ring", 0, a->count));
  SG_TRY(sg_ar_set_compress(ar, a->compress));
  SG_TRY(sg_ar_run(ar, buf, a->count));
fail:
  snprintf(a->msg, sizeof a->msg, "%s", rc < 0 ? sg_err_msg() : "");
  a->rc = rc;
  sg_ar_destroy(&ar);
  return SG_OK; /* the outcome is in a->rc: failing is the point */
}

TEST(ring_with_a_peer_of_fewer_floats_fails_on_both_sides) {
  const char *modes[] = {"none", "fp16"};
  for (int m = 0; m < 2; m++) {
    static uneven_arg_t args[2];
    for (int r = 0; r < 2; r++)
      args[r] = (uneven_arg_t){.compress = modes[m], .count = r ? 48 : 64};
    tr_group_t g = {.n = 2, .deadline_s = 3, .fn = uneven_rank, .args = args,
                    .stride = sizeof args[0], .what = "uneven ring"};
    CHECK_MSG(tr_run(&g) == 0, "%s", g.err);
    for (int r = 0; r < 2; r++)
      fprintf(stderr, "  compress %s, rank %d (count %zu): rc %d %s\n", modes[m], r, args[r].count,
              args[r].rc, args[r].msg);
    CHECK_MSG(args[0].rc < 0 && args[1].rc < 0, "compress %s: both ranks must fail", modes[m]);
  }
}

/* A ring peer that sends every segment short (a count that lies, played
 * by hand as rank 1 of 2: it answers each of rank 0's two steps with 8 B
 * of ones).  Rank 0 must fail naming it, not sum what the receive slot
 * or its own buffer held before. */
typedef struct short_arg {
  int rc;
  const char *compress;
  float buf[64];
  char msg[300];
} short_arg_t;

static int short_rank(sg_comm_t *c, void *p) {
  short_arg_t *a = p;
  sg_ar_t *ar = NULL;
  static _Thread_local float big[64];
  const float ones[2] = {1.0f, 1.0f};
  int rc;
  if (c->rank == 0) {
    for (size_t i = 0; i < 64; i++) a->buf[i] = 1.0f;
    SG_TRY(sg_ar_new(&ar, c, "ring", 0, 64));
    SG_TRY(sg_ar_set_compress(ar, a->compress));
    SG_TRY(sg_ar_run(ar, a->buf, 64));
  } else {
    for (int s = 0; s < 2; s++)
      SG_TRY(sg_sendrecv(c, 0, SG_AR_TAG_RING + s, ones, sizeof ones, 0, SG_AR_TAG_RING + s, big,
                         sizeof big, NULL));
  }
fail:
  snprintf(a->msg, sizeof a->msg, "%s", rc < 0 ? sg_err_msg() : "");
  a->rc = rc;
  sg_ar_destroy(&ar);
  return SG_OK; /* the outcome is in a->rc: rank 0 failing is the point */
}

TEST(ring_segment_shorter_than_announced_is_refused) {
  const char *modes[] = {"none", "fp16"};
  for (int m = 0; m < 2; m++) {
    static short_arg_t args[2];
    for (int r = 0; r < 2; r++) args[r] = (short_arg_t){.compress = modes[m]};
    tr_group_t g = {.n = 2, .deadline_s = 3, .fn = short_rank, .args = args,
                    .stride = sizeof args[0], .what = "short ring"};
    CHECK_MSG(tr_run(&g) == 0, "%s", g.err);
    fprintf(stderr, "  compress %s: rank 0 rc %d %s; buf[0] %g buf[40] %g\n", modes[m],
            args[0].rc, args[0].msg, (double)args[0].buf[0], (double)args[0].buf[40]);
    /* (the liar then waits out its deadline for a step rank 0 never sends) */
    CHECK_MSG(args[0].rc == SG_EPROTO, "compress %s: rank 0 returned %d", modes[m], args[0].rc);
    CHECK_STR_CONTAINS(args[0].msg, "from rank 1");
  }
}
