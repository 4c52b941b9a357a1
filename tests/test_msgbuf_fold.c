/* test_msgbuf_fold.c - the simulated side of core/msgbuf.c (SG_SMPI):
 * what sg_msg_malloc_framed asks SMPI to fold, and the rank's table of
 * folded allocations that sg_fold_private reads, outside a simulation.
 *
 * msgbuf.c is built into the test with SG_SMPI set; SMPI's
 * smpi_shared_malloc_partial is replaced here: it checks the blocks it is
 * given as SimGrid 3.32 asserts them (start < stop <= size, each block
 * ending before the next starts), keeps them, and hands out memory from a
 * pool at an address the test chooses, so that allocations can sit next
 * to each other and arrive in any order.
 *
 *  - what sg_fold_private calls a message's own parts is exactly what
 *    SMPI keeps private (the complement of the folded blocks), for every
 *    frame and for ranges starting and ending mid-frame, across layouts:
 *    payload exactly SG_MSG_FOLD_MIN or one byte under it, a header as
 *    long as the stride or longer, a stride past the buffer, a short last
 *    frame;
 *  - the table finds each of 300 allocations laid end to end, inserted
 *    in falling, rising and shuffled order (its binary search at every
 *    edge: the first and last byte of each, and the byte after the last);
 *  - sg_fold_free forgets one entry (not for a pointer inside it), and
 *    the last one empties the table;
 *  - a failed allocation (SMPI's, or the table's own growth) leaves the
 *    table as it was and hands back NULL.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define SG_SMPI 1
void *smpi_shared_malloc_partial(size_t size, const size_t *offsets, int nb);
static void *test_realloc(void *p, size_t n);
static void test_free(void *p);
#define realloc(p, n) test_realloc(p, n)
#define free(p) test_free(p)
#include "../core/msgbuf.c"
#undef realloc
#undef free

enum { MAXB = 4096, POOL = 64 << 20 };
static unsigned char *pool; /* SMPI's "shared" memory here */
static size_t pool_next;    /* offset of the next allocation in the pool */
static size_t blk[2 * MAXB]; /* the last call's blocks */
static int nblk, bad_blocks, fail_partial, fail_realloc, pool_freed;
static size_t last_size;

void *smpi_shared_malloc_partial(size_t size, const size_t *off, int nb) {
  if (!pool && !(pool = malloc(POOL))) return NULL;
  for (int i = 0; i < nb; i++)
    if (!(off[2 * i] < off[2 * i + 1] && off[2 * i + 1] <= size) ||
        (i + 1 < nb && !(off[2 * i + 1] < off[2 * i + 2])))
      bad_blocks++;
  nblk = nb < MAXB ? nb : MAXB;
  memcpy(blk, off, 2 * (size_t)nblk * sizeof *off);
  last_size = size;
  if (fail_partial || pool_next + size > POOL) return NULL;
  void *p = pool + pool_next;
  pool_next += size;
  return p;
}

static void *test_realloc(void *p, size_t n) { return fail_realloc ? NULL : realloc(p, n); }

static void test_free(void *p) {
  if (pool && (unsigned char *)p >= pool && (unsigned char *)p < pool + POOL) pool_freed++;
  else free(p);
}

/* SMPI's private bytes of the last allocation within [a, a + len), as
 * offsets from a, merged: the complement of its folded blocks. */
static int smpi_private(size_t a, size_t len, size_t *at) {
  int m = 0;
  size_t b = a + len, lo = 0;
  for (int i = 0; i <= nblk; i++) {
    size_t hi = i < nblk ? blk[2 * i] : last_size;
    size_t plo = lo > a ? lo : a, phi = hi < b ? hi : b;
    if (plo < phi) {
      at[2 * m] = plo - a;
      at[2 * m + 1] = phi - a;
      m++;
    }
    if (i < nblk) lo = blk[2 * i + 1];
  }
  return m;
}

/* For one layout: every frame, and ranges cut mid-frame, own parts as
 * SMPI's; a buffer SMPI was not asked to fold: -1 everywhere. */
static int check_layout(size_t bytes, size_t stride, size_t hdr, char *why, size_t cap) {
  static size_t got[2 * MAXB], want[2 * MAXB];
  nblk = -1;
  unsigned char *p = sg_msg_malloc_framed(bytes, stride, hdr, 1);
  if (!p) return snprintf(why, cap, "no buffer"), -1;
  int folded = nblk >= 0;
  size_t st = stride == 0 || stride > bytes ? bytes : stride;
  size_t cuts[][2] = {{0, bytes}, {0, 1}, {bytes - 1, 1}, {hdr / 2, bytes - hdr / 2},
                      {st > 1 ? st - 1 : 0, bytes - (st > 1 ? st - 1 : 0)},
                      {st + hdr / 3, st < bytes ? bytes - st - hdr / 3 : 0},
                      {st + hdr, st + hdr < bytes ? 1 : 0}};
  int rc = 0;
  for (size_t lo = 0; lo < bytes && rc == 0; lo += st) { /* each frame */
    size_t len = bytes - lo < st ? bytes - lo : st;
    int n = sg_fold_private(p + lo, len, got, MAXB);
    int w = folded ? smpi_private(lo, len, want) : -1;
    if (n != w || (n > 0 && memcmp(got, want, 2 * (size_t)n * sizeof *got)))
      rc = -1, snprintf(why, cap, "frame at %zu: %d own parts, SMPI keeps %d (first %zu-%zu, "
                        "SMPI's %zu-%zu)", lo, n, w, n > 0 ? got[0] : 0, n > 0 ? got[1] : 0,
                        w > 0 ? want[0] : 0, w > 0 ? want[1] : 0);
  }
  for (size_t c = 0; c < sizeof cuts / sizeof *cuts && rc == 0; c++) {
    size_t a = cuts[c][0], len = cuts[c][1];
    if (len == 0 || a + len > bytes) continue;
    int n = sg_fold_private(p + a, len, got, MAXB);
    int w = folded ? smpi_private(a, len, want) : -1;
    if (n != w || (n > 0 && memcmp(got, want, 2 * (size_t)n * sizeof *got)))
      rc = -1, snprintf(why, cap, "bytes %zu+%zu: %d own parts, SMPI keeps %d", a, len, n, w);
  }
  if (rc == 0 && folded && sg_fold_private(p, bytes + 1, got, MAXB) != -1)
    rc = -1, snprintf(why, cap, "a range past the buffer is not -1");
  sg_fold_free(p);
  return rc;
}

TEST(own_parts_are_what_smpi_keeps_private) {
  const size_t H = 64, F = SG_MSG_FOLD_MIN;
  const struct {
    size_t bytes, stride, hdr;
  } cases[] = {
      {H + F, H + F, H},                 /* one frame, payload exactly the minimum */
      {H + F - 1, H + F - 1, H},         /* one byte under: whole */
      {4 * (H + F), H + F, H},           /* four frames at the minimum */
      {3 * (H + F) + H + F - 1, H + F, H}, /* a last frame one byte short */
      {3 * (H + F + 1) + H + F, H + F + 1, H}, /* folded frames, the last at the minimum */
      {3 * (H + F) + H, H + F, H},       /* a last frame of its header only */
      {3 * (H + F) + 10, H + F, H},      /* a last frame shorter than its header */
      {5 * 100000, 100000, 4096},        /* page-sized headers */
      {5 * 100000 + 7, 100000, 4097},    /* odd ones */
      {1 << 20, 1 << 21, H},             /* a stride past the buffer: one frame */
      {1 << 20, 0, H},                   /* stride 0: one frame */
      {4 * (H + F), H + F, H + F},       /* a header as long as the stride */
      {4 * (H + F), H + F, H + F + 1},   /* and longer */
      {2 * (H + F), H + F, 1},           /* a one-byte header */
      {300 * (size_t)(H + F), H + F, H}, /* many frames */
  };
  char why[256];
  sg_fold_enable(1);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    pool_next = 0;
    int rc = check_layout(cases[i].bytes, cases[i].stride, cases[i].hdr, why, sizeof why);
    CHECK_MSG(rc == 0, "layout %zu (%zu bytes, stride %zu, header %zu): %s", i, cases[i].bytes,
              cases[i].stride, cases[i].hdr, why);
  }
  CHECK_EQ_INT(bad_blocks, 0);
  CHECK_EQ_INT(sg_fold_registered(), 0);
}

/* 300 folded blocks end to end in the pool, inserted in `order`. */
static int many(int order, char *why, size_t cap) {
  enum { N = 300 };
  const size_t B = SG_MSG_FOLD_MIN + 4096;
  static void *p[N];
  static int slot[N];
  for (int i = 0; i < N; i++) slot[i] = order == 0 ? N - 1 - i : i;
  if (order == 2)
    for (int i = N - 1; i > 0; i--) { /* a fixed shuffle */
      int j = (int)((unsigned)(i * 2654435761u) % (unsigned)(i + 1)), t = slot[i];
      slot[i] = slot[j], slot[j] = t;
    }
  for (int i = 0; i < N; i++) {
    pool_next = (size_t)slot[i] * B;
    if (!(p[slot[i]] = sg_fold_alloc(B))) return snprintf(why, cap, "alloc %d", i), -1;
  }
  if (sg_fold_registered() != N) return snprintf(why, cap, "%zu registered", sg_fold_registered()), -1;
  size_t at[8];
  for (int i = 0; i < N; i++) {
    unsigned char *q = p[i];
    if (q != pool + (size_t)i * B) return snprintf(why, cap, "block %d misplaced", i), -1;
    if (sg_fold_private(q, B, at, 4) != 0 || sg_fold_private(q, 1, at, 4) != 0 ||
        sg_fold_private(q + B - 1, 1, at, 4) != 0)
      return snprintf(why, cap, "block %d not found whole", i), -1;
    /* from its last byte into the next block: not one allocation */
    if (sg_fold_private(q + B - 1, 2, at, 4) != -1)
      return snprintf(why, cap, "a range across blocks %d and %d was found", i, i + 1), -1;
  }
  if (sg_fold_private(pool + (size_t)N * B, 1, at, 4) != -1 || sg_fold_private(pool - 1, 1, at, 4) != -1)
    return snprintf(why, cap, "a byte outside every block was found"), -1;
  /* free every other one: the others still found, the freed ones not */
  for (int i = 0; i < N; i += 2) sg_fold_free(p[i]);
  for (int i = 0; i < N; i++)
    if (sg_fold_private(p[i], B, at, 4) != (i % 2 ? 0 : -1))
      return snprintf(why, cap, "after freeing the even blocks, block %d", i), -1;
  for (int i = 1; i < N; i += 2) sg_fold_free(p[i]);
  if (sg_fold_registered() != 0) return snprintf(why, cap, "%zu left", sg_fold_registered()), -1;
  return 0;
}

TEST(the_table_finds_each_of_many) {
  char why[256];
  sg_fold_enable(1);
  for (int order = 0; order < 3; order++) {
    int rc = many(order, why, sizeof why);
    CHECK_MSG(rc == 0, "order %d: %s", order, why);
  }
}

TEST(free_forgets_only_its_own_entry) {
  sg_fold_enable(1);
  pool_next = 0;
  const size_t B = SG_MSG_FOLD_MIN;
  unsigned char *a = sg_fold_alloc(B), *b = sg_fold_alloc(B);
  CHECK(a && b);
  CHECK_EQ_INT(sg_fold_registered(), 2);
  fold_forget(a + 1); /* a pointer inside a: nothing */
  CHECK_EQ_INT(sg_fold_registered(), 2);
  size_t at[4];
  sg_fold_free(b);
  CHECK_EQ_INT(sg_fold_registered(), 1);
  CHECK_EQ_INT(sg_fold_private(b, 1, at, 2), -1);
  CHECK_EQ_INT(sg_fold_private(a, B, at, 2), 0);
  sg_fold_free(a);
  CHECK_EQ_INT(sg_fold_registered(), 0);
  CHECK(fold_tab == NULL && fold_cap == 0);
  /* under the minimum, or folding off: calloc, zeroed, not in the table */
  int *s = sg_fold_alloc(B - 1);
  CHECK(s && s[0] == 0);
  CHECK_EQ_INT(sg_fold_registered(), 0);
  sg_fold_free(s);
  sg_fold_enable(0);
  CHECK((s = sg_fold_alloc(B)));
  CHECK_EQ_INT(sg_fold_registered(), 0);
  sg_fold_free(s);
  sg_fold_enable(1);
}

TEST(failed_allocations_leave_the_table) {
  sg_fold_enable(1);
  pool_next = 0;
  const size_t B = SG_MSG_FOLD_MIN;
  size_t at[4];
  fail_partial = 1;
  CHECK(sg_fold_alloc(B) == NULL);
  CHECK(sg_msg_malloc_framed(4 * (64 + B), 64 + B, 64, 1) == NULL);
  fail_partial = 0;
  CHECK_EQ_INT(sg_fold_registered(), 0);
  /* 64 entries fill the table's first allocation; the 65th needs more */
  void *p[65];
  for (int i = 0; i < 64; i++) CHECK((p[i] = sg_fold_alloc(B)));
  fail_realloc = 1;
  int freed = pool_freed;
  unsigned char *q = pool + pool_next;
  CHECK(sg_fold_alloc(B) == NULL);
  CHECK(sg_msg_malloc_framed(2 * (64 + B), 64 + B, 64, 1) == NULL);
  fail_realloc = 0;
  CHECK_EQ_INT(pool_freed - freed, 2); /* both blocks given back */
  CHECK_EQ_INT(sg_fold_registered(), 64);
  CHECK_EQ_INT(sg_fold_private(q, 1, at, 2), -1);
  for (int i = 0; i < 64; i++) CHECK_EQ_INT(sg_fold_private(p[i], B, at, 2), 0);
  CHECK((p[64] = sg_fold_alloc(B)));
  CHECK_EQ_INT(sg_fold_registered(), 65);
  for (int i = 0; i < 65; i++) sg_fold_free(p[i]);
  CHECK_EQ_INT(sg_fold_registered(), 0);
}
