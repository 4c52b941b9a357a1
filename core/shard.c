/* shard.c - see shard.h for the schedule. */
#include "shard.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

int64_t sg_shard_steps_per_epoch(int64_t n, int nworkers, int batch) {
  if (nworkers < 1 || batch < 1 || n < 1) return 0;
  return n / ((int64_t)nworkers * batch);
}

void sg_shard_permutation(uint64_t seed, int64_t epoch, uint32_t *perm,
                          int64_t n) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, SG_RNG_SHUFFLE, (uint64_t)epoch);
  for (int64_t i = 0; i < n; i++) perm[i] = (uint32_t)i;
  for (int64_t i = n - 1; i > 0; i--) {
    int64_t j = (int64_t)sg_rng_below(&r, (uint64_t)i + 1);
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

void sg_shard_batch(const uint32_t *perm, int worker, int nworkers, int batch,
                    int64_t t, uint32_t *idx) {
  const int64_t base = (int64_t)nworkers * batch * t + worker;
  for (int i = 0; i < batch; i++) idx[i] = perm[base + (int64_t)nworkers * i];
}

struct sg_batch_buf {
  int rows;
  int64_t d, max_nnz;
  float *x;
  int64_t *rowptr;
  uint32_t *col;
  float *val;
  int32_t *y;
};

int sg_batch_buf_new(sg_batch_buf_t **out, const sg_dataset_t *ds, int rows) {
  sg_batch_buf_t *b = calloc(1, sizeof *b);
  if (!b) return SG_ENOMEM;
  b->rows = rows;
  b->d = ds->d;
  b->y = malloc((size_t)rows * sizeof *b->y);
  if (!b->y) goto nomem;
  if (sg_dataset_sparse(ds)) {
    b->max_nnz = ds->max_row_nnz;
    size_t cap = (size_t)rows * (size_t)(ds->max_row_nnz ? ds->max_row_nnz : 1);
    b->rowptr = malloc((size_t)(rows + 1) * sizeof *b->rowptr);
    b->col = malloc(cap * sizeof *b->col);
    b->val = malloc(cap * sizeof *b->val);
    if (!b->rowptr || !b->col || !b->val) goto nomem;
  } else {
    b->x = malloc((size_t)rows * (size_t)ds->d * sizeof *b->x);
    if (!b->x) goto nomem;
  }
  *out = b;
  return SG_OK;
nomem:
  sg_batch_buf_destroy(&b);
  return sg_err_set(SG_ENOMEM, "batch buffers for %d rows", rows);
}

void sg_batch_buf_destroy(sg_batch_buf_t **pb) {
  if (!pb || !*pb) return;
  sg_batch_buf_t *b = *pb;
  free(b->x);
  free(b->rowptr);
  free(b->col);
  free(b->val);
  free(b->y);
  free(b);
  *pb = NULL;
}

void sg_batch_gather(sg_batch_buf_t *b, const sg_dataset_t *ds,
                     const uint32_t *idx, int n, sg_batch_t *batch) {
  memset(batch, 0, sizeof *batch);
  batch->n = n;
  for (int i = 0; i < n; i++) b->y[i] = ds->y[idx[i]];
  batch->y = b->y;
  if (sg_dataset_sparse(ds)) {
    int64_t k = 0;
    b->rowptr[0] = 0;
    for (int i = 0; i < n; i++) {
      int64_t s = ds->rowptr[idx[i]], e = ds->rowptr[idx[i] + 1];
      memcpy(b->col + k, ds->col + s, (size_t)(e - s) * sizeof *b->col);
      memcpy(b->val + k, ds->val + s, (size_t)(e - s) * sizeof *b->val);
      k += e - s;
      b->rowptr[i + 1] = k;
    }
    batch->rowptr = b->rowptr;
    batch->col = b->col;
    batch->val = b->val;
  } else {
    const size_t d = (size_t)ds->d;
    for (int i = 0; i < n; i++)
      memcpy(b->x + (size_t)i * d, ds->x + (size_t)idx[i] * d, d * sizeof(float));
    batch->x = b->x;
  }
}

void sg_batch_view(const sg_dataset_t *ds, int64_t start, int n,
                   sg_batch_t *batch) {
  memset(batch, 0, sizeof *batch);
  batch->n = n;
  batch->y = ds->y + start;
  if (sg_dataset_sparse(ds)) {
    /* offsets stay absolute: rowptr[i] indexes ds->col/val directly */
    batch->rowptr = ds->rowptr + start;
    batch->col = ds->col;
    batch->val = ds->val;
  } else {
    batch->x = ds->x + (size_t)start * (size_t)ds->d;
  }
}

/* ---- non-IID shards (see shard.h) ---- */

int sg_partition_parse(const char *name, sg_partition_t *out) {
  if (!strcmp(name, "iid")) *out = SG_PART_IID;
  else if (!strcmp(name, "label-skew")) *out = SG_PART_LABEL_SKEW;
  else if (!strcmp(name, "by-class")) *out = SG_PART_BY_CLASS;
  else return sg_err_set(SG_ECONFIG, "partition: expected iid, label-skew or by-class, got '%s'", name);
  return SG_OK;
}

int64_t sg_shard_size(int64_t n, int worker, int nworkers) {
  return n / nworkers + (worker < n % nworkers ? 1 : 0);
}

/* Every rank draws the shards itself, so the draw must give the same bits
 * on every host: log and exp below use only +, -, *, / and sqrt (correctly
 * rounded by IEEE 754) and frexp/ldexp (exact), and the build contracts
 * nothing into FMAs (-ffp-contract=off).  libm's log and pow are not
 * portable so: glibc's FMA and SSE2 variants differ in the last bit for
 * about 1 argument in 10^4 (log) and 10^3 (pow), and other libms and
 * versions may differ more.  Relative error about 1e-15: enough to sample. */
static const double LN2 = 0.69314718055994530942;

static double det_log(double x) { /* x > 0, finite */
  int e;
  double m = frexp(x, &e); /* x = m 2^e, m in [0.5, 1) */
  if (m < 0.70710678118654752440) m *= 2, e--; /* m in [sqrt(1/2), sqrt(2)) */
  double s = (m - 1) / (m + 1), s2 = s * s, t = 0; /* log m = 2 atanh s, |s| < 0.172 */
  for (int k = 41; k >= 1; k -= 2) t = t * s2 + 1.0 / k;
  return 2 * s * t + e * LN2;
}

static double det_exp(double y) { /* y <= 0 here */
  if (y < -800) return 0;
  double k = floor(y / LN2 + 0.5), r = y - k * LN2, t = 1; /* |r| <= 0.35 (+ rounding) */
  for (int n = 27; n >= 1; n--) t = 1 + t * r / n;
  return ldexp(t, (int)k);
}

/* N(0,1) by Marsaglia's polar method. */
static double rng_normal(sg_rng_t *r) {
  for (;;) {
    double u = 2 * sg_rng_uniform(r) - 1, v = 2 * sg_rng_uniform(r) - 1, s = u * u + v * v;
    if (s > 0 && s < 1) return u * sqrt(-2 * det_log(s) / s);
  }
}

/* Gamma(a, 1) by Marsaglia and Tsang; a < 1 through Gamma(a+1) * U^(1/a). */
static double rng_gamma(sg_rng_t *r, double a) {
  if (a < 1) {
    double u = sg_rng_uniform(r);
    return rng_gamma(r, a + 1) * det_exp(det_log(u > 0 ? u : 0x1.0p-53) / a);
  }
  const double d = a - 1.0 / 3, c = 1 / sqrt(9 * d);
  for (;;) {
    double x = rng_normal(r), v = 1 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = sg_rng_uniform(r);
    if (det_log(u > 0 ? u : 0x1.0p-53) < 0.5 * x * x + d - d * v + d * det_log(v)) return d * v;
  }
}

/* p[0..k-1] ~ Dirichlet(alpha); all-zero draws (underflow) become uniform. */
static void rng_dirichlet(sg_rng_t *r, double alpha, int k, double *p) {
  double sum = 0;
  for (int c = 0; c < k; c++) sum += (p[c] = rng_gamma(r, alpha));
  for (int c = 0; c < k; c++) p[c] = sum > 0 ? p[c] / sum : 1.0 / k;
}

/* Sample ids grouped by class (class c: ids[start[c] .. start[c+1]-1]),
 * in a seeded order within each class. */
static int class_pools(uint64_t seed, const int32_t *y, int64_t n, int classes, uint32_t *ids,
                       int64_t *start) {
  uint32_t *perm = malloc((size_t)n * sizeof *perm);
  if (!perm) return sg_err_set(SG_ENOMEM, "partition: order of %lld samples", (long long)n);
  sg_shard_permutation(seed ^ 0x5eedULL, 0, perm, n);
  for (int c = 0; c <= classes; c++) start[c] = 0;
  for (int64_t i = 0; i < n; i++) {
    if (y[i] < 0 || y[i] >= classes) {
      free(perm);
      return sg_err_set(SG_EINVAL, "partition: label %d of sample %lld is not in 0..%d", y[i],
                        (long long)i, classes - 1);
    }
    start[y[i] + 1]++;
  }
  for (int c = 0; c < classes; c++) start[c + 1] += start[c];
  int64_t *fill = calloc((size_t)classes, sizeof *fill);
  if (!fill) {
    free(perm);
    return SG_ENOMEM;
  }
  for (int64_t i = 0; i < n; i++) ids[start[y[perm[i]]] + fill[y[perm[i]]]++] = perm[i];
  free(fill);
  free(perm);
  return SG_OK;
}

/* The class worker w draws from p (row of classes), over classes with
 * samples left; u uniform in [0, 1). */
static int draw_class(const double *p, const int64_t *left, int classes, double u) {
  double sum = 0;
  int last = -1, avail = 0;
  for (int c = 0; c < classes; c++)
    if (left[c] > 0) sum += p[c], last = c, avail++;
  if (!(sum > 0)) { /* every class w likes is empty: uniform over the rest */
    int k = (int)(u * avail);
    for (int c = 0; c < classes; c++)
      if (left[c] > 0 && k-- == 0) return c;
    return last;
  }
  double x = u * sum;
  for (int c = 0; c < classes; c++)
    if (left[c] > 0 && (x -= p[c]) < 0) return c;
  return last;
}

/* ---- the same draw in O(log classes) ------------------------------------
 * draw_class walks every class twice per sample: with 100,000 classes and
 * 60,000 samples that is 10^10 steps.  The fast draw finds the class that
 * draw_class would pick without walking, and proves it is that class, or
 * says it cannot and draw_class decides; so every owner is the same.
 *
 * Per worker, a Fenwick tree holds p in fixed point (units of 2^-120,
 * truncated: each unit short by less than one unit) over the classes with
 * samples left, summed exactly in integers.  draw_class computes
 * x = fl(u * s) with s the sequential sum of the m available p, then
 * subtracts p class by class and stops at the first x < 0.  In exact
 * arithmetic that is the first class whose prefix T exceeds u * S.  Each
 * rounding is within 2^-53 of its result and every intermediate is at
 * most S (1 + m 2^-52), so the computed x after i classes is within
 * E0 = 3 (m + 2) 2^-53 S of u * S - T_i; the fixed-point sums are within m
 * units of T.  When no prefix lies within E (> E0 + both truncations, with
 * room) of u * S, the exact answer and draw_class's agree; otherwise
 * draw_class runs.  That happens about 2 m E / S of the time (< 10^-5 for
 * 10^5 classes) and where S falls under a few hundred units (a worker
 * left only with classes of vanishing p). */
typedef unsigned __int128 fix_t;

typedef struct fen {
  fix_t *t;   /* N trees of classes + 1 nodes (1-based) */
  fix_t *tot; /* each tree's total */
  int n, top; /* classes; highest power of two <= n */
} fen_t;

static fix_t fix_of(double p) { return (fix_t)ldexp(p, 120); }

static void fen_add(fen_t *f, int w, int c, fix_t v, int sub) {
  fix_t *t = f->t + (size_t)w * (size_t)(f->n + 1);
  for (int i = c + 1; i <= f->n; i += i & -i) t[i] = sub ? t[i] - v : t[i] + v;
  f->tot[w] = sub ? f->tot[w] - v : f->tot[w] + v;
}

/* The trees of the classes with samples left; 0 when too big to hold. */
static int fen_init(fen_t *f, const double *p, const int64_t *left, int classes, int N) {
  size_t nodes = (size_t)N * (size_t)(classes + 1);
  *f = (fen_t){.n = classes, .top = 1};
  if (classes < 32 || nodes > ((size_t)1 << 24)) return 0; /* walking is cheap, or 256 MiB */
  f->t = calloc(nodes, sizeof *f->t);
  f->tot = calloc((size_t)N, sizeof *f->tot);
  if (!f->t || !f->tot) return free(f->t), free(f->tot), *f = (fen_t){0}, 0;
  while (f->top * 2 <= classes) f->top *= 2;
  for (int w = 0; w < N; w++) {
    fix_t *t = f->t + (size_t)w * (size_t)(classes + 1);
    for (int i = 1; i <= classes; i++) { /* linear build */
      fix_t v = left[i - 1] > 0 ? fix_of(p[(size_t)w * classes + i - 1]) : 0;
      f->tot[w] += v;
      t[i] += v;
      if (i + (i & -i) <= classes) t[i + (i & -i)] += t[i];
    }
  }
  return 1;
}

/* draw_class's answer for worker w and u when provably it; -1 otherwise. */
static int fen_draw(const fen_t *f, int w, double u) {
  const fix_t *t = f->t + (size_t)w * (size_t)(f->n + 1);
  double m = f->n, S = (double)f->tot[w];
  double E = 32 * (m + 4) * 0x1p-53 * (S + m) + 4 * m + 8, x = u * S;
  if (!(S > 0) || x - E < 0 || x + E >= S) return -1;
  fix_t hi = (fix_t)(x + E), lo = (fix_t)(x - E), below = 0;
  int pos = 0; /* largest pos with prefix(pos) <= hi */
  for (int step = f->top; step; step /= 2)
    if (pos + step <= f->n && below + t[pos + step] <= hi) pos += step, below += t[pos];
  if (pos >= f->n || below > lo) return -1; /* a prefix within E of u * S */
  return pos; /* class pos: prefix(pos) <= lo < hi < prefix(pos + 1) */
}

static int owners_label_skew(double alpha, uint64_t seed, const uint32_t *ids,
                             const int64_t *start, int64_t n, int classes, int N,
                             uint16_t *owner) {
  double *p = malloc((size_t)N * (size_t)classes * sizeof *p);
  int64_t *left = malloc((size_t)classes * sizeof *left), *quota = malloc((size_t)N * sizeof *quota);
  if (!p || !left || !quota) {
    free(p), free(left), free(quota);
    return sg_err_set(SG_ENOMEM, "partition: %d workers x %d classes", N, classes);
  }
  sg_rng_t r;
  for (int w = 0; w < N; w++) {
    sg_rng_seed(&r, seed, SG_RNG_PARTITION, 1 + (uint64_t)w);
    rng_dirichlet(&r, alpha, classes, p + (size_t)w * classes);
    quota[w] = sg_shard_size(n, w, N);
  }
  for (int c = 0; c < classes; c++) left[c] = start[c + 1] - start[c];
  fen_t f;
  int fast = fen_init(&f, p, left, classes, N);
  sg_rng_seed(&r, seed, SG_RNG_PARTITION, 1 + (uint64_t)N);
  for (int64_t given = 0; given < n;)
    for (int w = 0; w < N; w++) {
      if (quota[w] == 0) continue;
      double u = sg_rng_uniform(&r);
      int c = fast ? fen_draw(&f, w, u) : -1;
      if (c < 0) c = draw_class(p + (size_t)w * classes, left, classes, u);
      owner[ids[start[c + 1] - left[c]]] = (uint16_t)w;
      left[c]--, quota[w]--, given++;
      for (int v = 0; fast && left[c] == 0 && v < N; v++) /* class c is gone */
        fen_add(&f, v, c, fix_of(p[(size_t)v * classes + c]), 1);
    }
  free(f.t), free(f.tot);
  free(p), free(left), free(quota);
  return SG_OK;
}

int sg_shard_owners(sg_partition_t kind, double alpha, uint64_t seed, const int32_t *y,
                    int64_t n, int classes, int nworkers, uint16_t *owner) {
  if (nworkers < 1 || nworkers > 65535 || classes < 1 || n < 1)
    return sg_err_set(SG_EINVAL, "partition: %d workers, %d classes, %lld samples", nworkers,
                      classes, (long long)n);
  if (kind == SG_PART_LABEL_SKEW && !(alpha > 0))
    return sg_err_set(SG_ECONFIG, "partition_alpha: must be > 0, got %g", alpha);
  uint32_t *ids = malloc((size_t)n * sizeof *ids);
  int64_t *start = malloc((size_t)(classes + 1) * sizeof *start);
  int rc = ids && start ? SG_OK : sg_err_set(SG_ENOMEM, "partition of %lld samples", (long long)n);
  if (rc == SG_OK) rc = class_pools(seed, y, n, classes, ids, start);
  if (rc == SG_OK && kind == SG_PART_LABEL_SKEW)
    rc = owners_label_skew(alpha, seed, ids, start, n, classes, nworkers, owner);
  else if (rc == SG_OK && kind == SG_PART_BY_CLASS)
    for (int64_t i = 0, w = 0, end = sg_shard_size(n, 0, nworkers); i < n; i++) {
      if (i == end) end += sg_shard_size(n, (int)++w, nworkers);
      owner[ids[i]] = (uint16_t)w;
    }
  else if (rc == SG_OK) /* iid: worker w holds positions w, w+N, ... of epoch 0 */
    for (int64_t i = 0; i < n; i++) owner[ids[i]] = (uint16_t)(i % nworkers);
  free(ids), free(start);
  return rc;
}

int sg_shard_build(sg_partition_t kind, double alpha, uint64_t seed, const int32_t *y,
                   int64_t n, int classes, int worker, int nworkers, uint32_t *shard,
                   int64_t *len) {
  uint16_t *owner = malloc((size_t)n * sizeof *owner);
  if (!owner) return sg_err_set(SG_ENOMEM, "partition of %lld samples", (long long)n);
  int rc = sg_shard_owners(kind, alpha, seed, y, n, classes, nworkers, owner);
  int64_t k = 0, cap = sg_shard_size(n, worker, nworkers);
  for (int64_t i = 0; rc == SG_OK && i < n; i++)
    if (owner[i] == worker && k < cap) shard[k++] = (uint32_t)i;
  free(owner);
  *len = k;
  return rc;
}

void sg_shard_order(uint64_t seed, int64_t epoch, int worker, const uint32_t *shard,
                    int64_t len, uint32_t *out) {
  sg_rng_t r;
  sg_rng_seed(&r, seed, SG_RNG_SHARD_ORDER, ((uint64_t)epoch << 20) + (uint64_t)worker);
  memcpy(out, shard, (size_t)len * sizeof *out);
  for (int64_t i = len - 1; i > 0; i--) {
    int64_t j = (int64_t)sg_rng_below(&r, (uint64_t)i + 1);
    uint32_t t = out[i];
    out[i] = out[j];
    out[j] = t;
  }
}
