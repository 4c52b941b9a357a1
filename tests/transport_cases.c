/* transport_cases.c - the conformance cases (see transport_cases.h).
 *
 * Payload bytes depend on (source, destination, index, length), so a
 * message delivered to the wrong rank, shifted, or cut short fails the
 * content check; receive buffers carry a guard zone after the expected
 * length that must stay untouched.
 */
#include "transport_cases.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define BIG ((size_t)1 << 20) + 3 /* 1 MiB + 3 */
#define GUARD 16

typedef struct tc {
  sg_comm_t *c;
  int rank, size, left, right;
  char *err;
  size_t errlen;
  const char *name;
  uint8_t *sbuf, *rbuf; /* BIG + GUARD each */
} tc_t;

static int tc_fail(tc_t *t, int line, const char *fmt, ...) {
  int n = snprintf(t->err, t->errlen, "case %s, rank %d of %d (line %d): ",
                   t->name, t->rank, t->size, line);
  va_list ap;
  va_start(ap, fmt);
  if (n >= 0 && (size_t)n < t->errlen)
    vsnprintf(t->err + n, t->errlen - (size_t)n, fmt, ap);
  va_end(ap);
  return -1;
}

#define TC_CHECK(t, cond, ...)                                          \
  do {                                                                  \
    if (!(cond)) return tc_fail(t, __LINE__, __VA_ARGS__);              \
  } while (0)
#define TC_OK(t, expr)                                                  \
  do {                                                                  \
    int rc_ = (expr);                                                   \
    if (rc_ != 0)                                                       \
      return tc_fail(t, __LINE__, "%s: %s: %s [%s]", #expr,             \
                     sg_errname(rc_), sg_err_msg(), sg_err_trace());    \
  } while (0)
#define TC_RUN(t, fn)                                                   \
  do {                                                                  \
    t->name = #fn;                                                      \
    if (fn(t) != 0) goto out;                                           \
  } while (0)

static uint8_t pat(int s, int d, size_t k, size_t n) {
  return (uint8_t)((size_t)s * 31 + (size_t)d * 7 + k * 13 + n * 3 + (k >> 8));
}
static void fill(uint8_t *b, int s, int d, size_t n) {
  for (size_t k = 0; k < n; k++) b[k] = pat(s, d, k, n);
}
/* Index of the first wrong byte (content or guard), or -1. */
static long bad_byte(const uint8_t *b, int s, int d, size_t n) {
  for (size_t k = 0; k < n; k++)
    if (b[k] != pat(s, d, k, n)) return (long)k;
  for (size_t k = n; k < n + GUARD; k++)
    if (b[k] != 0xEE) return (long)k;
  return -1;
}
static void clear(uint8_t *b, size_t n) { memset(b, 0xEE, n + GUARD); }

/* Receive n bytes from src and check them (status and content). */
static int recv_check(tc_t *t, int src, int tag, size_t n) {
  sg_status_t st = {-5, -5, 0};
  clear(t->rbuf, n);
  TC_OK(t, sg_recv(t->c, src, tag, t->rbuf, n, &st));
  TC_CHECK(t, st.source == src && st.tag == tag && st.bytes == n,
           "status {%d, %d, %zu}, expected {%d, %d, %zu}", st.source, st.tag,
           st.bytes, src, tag, n);
  long bad = bad_byte(t->rbuf, src, t->rank, n);
  TC_CHECK(t, bad < 0, "%zu bytes from rank %d: byte %ld is wrong", n, src,
           bad);
  return 0;
}

/* Blocking send/recv (gather to 0, scatter from 0) and isend/recv/wait
 * between all pairs (self included), for sizes 0, 1, N-1, N+1, odd, 1M+3. */
static int case_sizes(tc_t *t) {
  size_t sizes[] = {0, 1, (size_t)t->size - 1, (size_t)t->size + 1, 1001,
                    BIG};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t n = sizes[i];
    if (t->rank == 0) {
      for (int s = 1; s < t->size; s++)
        if (recv_check(t, s, 10, n)) return -1;
      for (int d = 1; d < t->size; d++) {
        fill(t->sbuf, 0, d, n);
        TC_OK(t, sg_send(t->c, d, 11, t->sbuf, n));
      }
    } else {
      fill(t->sbuf, t->rank, 0, n);
      TC_OK(t, sg_send(t->c, 0, 10, t->sbuf, n));
      if (recv_check(t, 0, 11, n)) return -1;
    }
    for (int d = 0; d < t->size; d++) {
      int dst = (t->rank + d) % t->size, src = (t->rank - d + t->size) % t->size;
      sg_req_t *r = NULL;
      fill(t->sbuf, t->rank, dst, n);
      TC_OK(t, sg_isend(t->c, dst, 12, t->sbuf, n, &r));
      if (recv_check(t, src, 12, n)) return -1;
      TC_OK(t, sg_wait(t->c, &r, NULL));
      TC_CHECK(t, r == NULL, "wait left the request set");
    }
  }
  return 0;
}

/* Rank 0 receives from every peer with SG_ANY_SOURCE; then everyone
 * receives from its left neighbour with SG_ANY_TAG. */
static int case_any(tc_t *t) {
  if (t->rank == 0) {
    char seen[64] = {0};
    for (int i = 1; i < t->size; i++) {
      sg_status_t st = {-5, -5, 0};
      clear(t->rbuf, 64);
      TC_OK(t, sg_recv(t->c, SG_ANY_SOURCE, 13, t->rbuf, 64, &st));
      TC_CHECK(t, st.source >= 1 && st.source < t->size && !seen[st.source],
               "source %d unexpected or repeated", st.source);
      seen[st.source] = 1;
      size_t n = 4 + (size_t)st.source;
      TC_CHECK(t, st.tag == 13 && st.bytes == n, "tag %d bytes %zu", st.tag,
               st.bytes);
      TC_CHECK(t, bad_byte(t->rbuf, st.source, 0, n) < 0,
               "content from rank %d", st.source);
    }
  } else {
    fill(t->sbuf, t->rank, 0, 4 + (size_t)t->rank);
    TC_OK(t, sg_send(t->c, 0, 13, t->sbuf, 4 + (size_t)t->rank));
  }
  sg_req_t *r = NULL;
  sg_status_t st;
  fill(t->sbuf, t->rank, t->right, 50);
  TC_OK(t, sg_isend(t->c, t->right, 100 + t->rank, t->sbuf, 50, &r));
  clear(t->rbuf, 50);
  TC_OK(t, sg_recv(t->c, t->left, SG_ANY_TAG, t->rbuf, 64, &st));
  TC_CHECK(t, st.tag == 100 + t->left && st.source == t->left && st.bytes == 50,
           "any-tag status {%d, %d, %zu}", st.source, st.tag, st.bytes);
  TC_CHECK(t, bad_byte(t->rbuf, t->left, t->rank, 50) < 0, "any-tag content");
  TC_OK(t, sg_wait(t->c, &r, NULL));
  return 0;
}

/* Tags 2 then 1 sent; received 1 then 2. */
static int case_tag_order(tc_t *t) {
  uint8_t a[40], b[50];
  fill(a, t->rank, t->right, sizeof a);
  fill(b, t->rank, t->right, sizeof b);
  TC_OK(t, sg_send(t->c, t->right, 2, a, sizeof a));
  TC_OK(t, sg_send(t->c, t->right, 1, b, sizeof b));
  if (recv_check(t, t->left, 1, sizeof b)) return -1;
  if (recv_check(t, t->left, 2, sizeof a)) return -1;
  return 0;
}

/* Ring shift with sendrecv, both directions; rank r sends n + r bytes. */
static int case_ring(tc_t *t) {
  size_t sizes[] = {0, 1, 4099, BIG - 64};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    for (int dir = 0; dir < 2; dir++) {
      int to = dir ? t->left : t->right, from = dir ? t->right : t->left;
      size_t n = sizes[i] + (size_t)t->rank, m = sizes[i] + (size_t)from;
      sg_status_t st = {-5, -5, 0};
      fill(t->sbuf, t->rank, to, n);
      clear(t->rbuf, m);
      TC_OK(t, sg_sendrecv(t->c, to, 20 + dir, t->sbuf, n, from, 20 + dir,
                           t->rbuf, BIG, &st));
      TC_CHECK(t, st.source == from && st.tag == 20 + dir && st.bytes == m,
               "status {%d, %d, %zu}, expected {%d, %d, %zu}", st.source,
               st.tag, st.bytes, from, 20 + dir, m);
      TC_CHECK(t, bad_byte(t->rbuf, from, t->rank, m) < 0,
               "ring content from rank %d, %zu bytes", from, m);
    }
  }
  return 0;
}

/* Many receives posted, then sends in the reverse tag order; wait all. */
static int case_many(tc_t *t) {
  enum { K = 40 };
  size_t sz[2] = {1000, 300 * 1024}; /* copied; zero-copy in ZeroMQ */
  int counts[2] = {K, 6};
  for (int v = 0; v < 2; v++) {
    int k = counts[v];
    size_t n = sz[v];
    uint8_t *sb = malloc((size_t)k * n), *rb = malloc((size_t)k * (n + GUARD));
    sg_req_t *rr[K] = {0}, *sr[K] = {0};
    TC_CHECK(t, sb && rb, "no memory");
    for (int j = 0; j < k; j++) {
      clear(rb + (size_t)j * (n + GUARD), n);
      TC_OK(t, sg_irecv(t->c, t->left, j, rb + (size_t)j * (n + GUARD), n,
                        &rr[j]));
    }
    for (int j = k - 1; j >= 0; j--) {
      fill(sb + (size_t)j * n, t->rank + j, t->right, n);
      TC_OK(t, sg_isend(t->c, t->right, j, sb + (size_t)j * n, n, &sr[j]));
    }
    for (int j = 0; j < k; j++) TC_OK(t, sg_wait(t->c, &sr[j], NULL));
    for (int j = 0; j < k; j++) {
      sg_status_t st;
      TC_OK(t, sg_wait(t->c, &rr[j], &st));
      TC_CHECK(t, st.tag == j && st.source == t->left && st.bytes == n,
               "request %d: status {%d, %d, %zu}", j, st.source, st.tag,
               st.bytes);
      TC_CHECK(t, bad_byte(rb + (size_t)j * (n + GUARD), t->left + j, t->rank,
                           n) < 0, "request %d: content", j);
    }
    free(sb);
    free(rb);
  }
  return 0;
}

static int case_probe(tc_t *t) {
  sg_req_t *r = NULL;
  sg_status_t st = {-5, -5, 0};
  size_t n = 777 + (size_t)t->rank, m = 777 + (size_t)t->left;
  fill(t->sbuf, t->rank, t->right, n);
  TC_OK(t, sg_isend(t->c, t->right, 9, t->sbuf, n, &r));
  TC_OK(t, sg_probe(t->c, t->left, SG_ANY_TAG, &st));
  TC_CHECK(t, st.source == t->left && st.tag == 9 && st.bytes == m,
           "probe status {%d, %d, %zu}", st.source, st.tag, st.bytes);
  st.bytes = 0;
  TC_OK(t, sg_probe(t->c, SG_ANY_SOURCE, 9, &st)); /* still queued */
  TC_CHECK(t, st.source == t->left && st.bytes == m, "second probe");
  if (recv_check(t, t->left, 9, m)) return -1;
  TC_OK(t, sg_wait(t->c, &r, NULL));
  return 0;
}

/* Rank 0 enters late; nobody may leave before it entered (one host, one
 * monotonic clock).  The delay only makes a broken barrier visible. */
static int case_barrier(tc_t *t) {
  double entered = 0;
  if (t->rank == 0) {
    usleep(100 * 1000);
    entered = sg_now();
  }
  TC_OK(t, sg_barrier(t->c));
  double left_at = sg_now();
  if (t->rank == 0) {
    for (int d = 1; d < t->size; d++)
      TC_OK(t, sg_send(t->c, d, 30, &entered, sizeof entered));
  } else {
    TC_OK(t, sg_recv(t->c, 0, 30, &entered, sizeof entered, NULL));
    TC_CHECK(t, left_at >= entered, "left the barrier %.6f s before rank 0 "
             "entered it", entered - left_at);
  }
  for (int i = 0; i < 20; i++) TC_OK(t, sg_barrier(t->c));
  return 0;
}

/* A receive from a peer that never sends times out within ~deadline and
 * names the peer and its host. */
static int case_deadline(tc_t *t) {
  double saved = t->c->deadline_s, dl = 0.3;
  char want[128];
  t->c->deadline_s = dl;
  double t0 = sg_now();
  int rc = sg_recv(t->c, t->left, 301, t->rbuf, 8, NULL);
  double took = sg_now() - t0;
  int rc_any = sg_recv(t->c, SG_ANY_SOURCE, 302, t->rbuf, 8, NULL);
  char any_msg[1024];
  snprintf(any_msg, sizeof any_msg, "%s", sg_err_msg());
  int rc_probe = sg_probe(t->c, t->left, 303, NULL);
  t->c->deadline_s = saved;
  TC_CHECK(t, rc == SG_ETIMEOUT, "recv returned %s", sg_errname(rc));
  TC_CHECK(t, took >= dl * 0.99 && took < 2 * dl + 0.5,
           "timed out after %.3f s for a %.1f s deadline", took, dl);
  TC_CHECK(t, rc_any == SG_ETIMEOUT && rc_probe == SG_ETIMEOUT,
           "any-source recv %s, probe %s", sg_errname(rc_any),
           sg_errname(rc_probe));
  snprintf(want, sizeof want, "rank %d (%s)", t->left, t->c->hosts[t->left]);
  TC_CHECK(t, strstr(sg_err_msg(), want), "'%s' does not name '%s'",
           sg_err_msg(), want);
  snprintf(want, sizeof want, "%d (%s)", t->left, t->c->hosts[t->left]);
  TC_CHECK(t, strstr(any_msg, want) && strstr(any_msg, "any source"),
           "'%s' does not name '%s'", any_msg, want);
  TC_OK(t, sg_barrier(t->c));
  return 0;
}

static int case_trunc(tc_t *t) {
  sg_req_t *r = NULL;
  char want[32];
  fill(t->sbuf, t->rank, t->right, 100);
  TC_OK(t, sg_isend(t->c, t->right, 31, t->sbuf, 100, &r));
  int rc = sg_recv(t->c, t->left, 31, t->rbuf, 50, NULL);
  TC_CHECK(t, rc == SG_ETRUNC, "recv of 100 bytes into 50 returned %s",
           sg_errname(rc));
  snprintf(want, sizeof want, "rank %d", t->left);
  TC_CHECK(t, strstr(sg_err_msg(), want), "'%s' does not name '%s'",
           sg_err_msg(), want);
  TC_OK(t, sg_wait(t->c, &r, NULL));
  TC_OK(t, sg_barrier(t->c));
  return 0;
}

/* Byte counters: exact payload bytes per peer. */
static int case_counters(tc_t *t) {
  int n = t->size;
  uint64_t *s0 = calloc((size_t)n, 8), *r0 = calloc((size_t)n, 8);
  TC_CHECK(t, s0 && r0, "no memory");
  TC_OK(t, sg_barrier(t->c));
  memcpy(s0, t->c->sent, (size_t)n * 8);
  memcpy(r0, t->c->recvd, (size_t)n * 8);
  uint64_t tot_s = sg_comm_bytes_sent(t->c), tot_r = sg_comm_bytes_recvd(t->c);
  for (int d = 1; d < n; d++) {
    int dst = (t->rank + d) % n, src = (t->rank - d + n) % n;
    size_t ns = 10 * (size_t)t->rank + (size_t)d + 1;
    size_t nr = 10 * (size_t)src + (size_t)d + 1;
    sg_req_t *r = NULL;
    fill(t->sbuf, t->rank, dst, ns);
    TC_OK(t, sg_isend(t->c, dst, 40, t->sbuf, ns, &r));
    if (recv_check(t, src, 40, nr)) return -1;
    TC_OK(t, sg_wait(t->c, &r, NULL));
  }
  TC_OK(t, sg_barrier(t->c));
  uint64_t sum_s = 0, sum_r = 0;
  for (int p = 0; p < n; p++) {
    int d = (p - t->rank + n) % n; /* p = rank + d */
    int e = (t->rank - p + n) % n; /* p = rank - e */
    uint64_t want_s = d ? 10 * (uint64_t)t->rank + (uint64_t)d + 1 : 0;
    uint64_t want_r = e ? 10 * (uint64_t)p + (uint64_t)e + 1 : 0;
    TC_CHECK(t, t->c->sent[p] - s0[p] == want_s,
             "sent[%d] grew by %llu, expected %llu", p,
             (unsigned long long)(t->c->sent[p] - s0[p]),
             (unsigned long long)want_s);
    TC_CHECK(t, t->c->recvd[p] - r0[p] == want_r,
             "recvd[%d] grew by %llu, expected %llu", p,
             (unsigned long long)(t->c->recvd[p] - r0[p]),
             (unsigned long long)want_r);
    sum_s += want_s;
    sum_r += want_r;
  }
  TC_CHECK(t, sg_comm_bytes_sent(t->c) - tot_s == sum_s &&
               sg_comm_bytes_recvd(t->c) - tot_r == sum_r,
           "totals disagree with the per-peer counters");
  free(s0);
  free(r0);
  return 0;
}

int tc_run_all(sg_comm_t *c, char *err, size_t errlen) {
  tc_t tt = {.c = c, .rank = c->rank, .size = c->size, .err = err,
             .errlen = errlen, .name = "setup"};
  tc_t *t = &tt;
  int rc = -1;
  t->left = (c->rank - 1 + c->size) % c->size;
  t->right = (c->rank + 1) % c->size;
  err[0] = '\0';
  t->sbuf = malloc(BIG + GUARD);
  t->rbuf = malloc(BIG + GUARD);
  if (!t->sbuf || !t->rbuf) {
    tc_fail(t, __LINE__, "no memory");
    goto out;
  }
  TC_RUN(t, case_sizes);
  TC_RUN(t, case_any);
  TC_RUN(t, case_tag_order);
  TC_RUN(t, case_ring);
  TC_RUN(t, case_many);
  TC_RUN(t, case_probe);
  TC_RUN(t, case_barrier);
  TC_RUN(t, case_deadline);
  TC_RUN(t, case_trunc);
  TC_RUN(t, case_counters);
  rc = 0;
out:
  free(t->sbuf);
  free(t->rbuf);
  return rc;
}
