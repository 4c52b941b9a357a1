/* cost_model.c - the alpha-beta-gamma formulas, one per engine and variant, and
 * the fit of alpha and beta (docs/model.md derives every line here). */
#include "bench_method.h"
#include "cost_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "reduce.h"

/* ---- the formulas ---------------------------------------------------- */

/* Each returns the links' seconds of one step and fills in the bytes its
 * busiest link carries in one direction and the bytes every process
 * together sends and receives (the CPU's share, kappa). */
typedef double (*cost_fn)(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o);

static double mult(double m) { return m > 0 ? m : 1; }

/* Ring: 2(N-1) steps of K/N bytes; the reduce-scatter half adds each
 * received chunk.  Every chunk crosses every link, so the slowest sets
 * the pace. */
static double ring(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double n = c->N, f = (n - 1) / n, beta = p->beta * mult(c->slow);
  o->link_bytes = 2 * f * c->K;
  o->cpu_bytes = c->N < 2 ? 0 : 4 * (n - 1) * c->K;
  if (c->N < 2) return 0;
  return 2 * (n - 1) * p->alpha + 2 * f * c->K * beta + f * c->K * p->gamma;
}

/* Rabenseifner over p = 2^floor(log2 N) ranks; the N - p extra ranks fold
 * their vector in before (one message of K, reduced) and get the result
 * back after (one message of K). */
static double rhd(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  int pw = 1, lg = 0;
  while (pw * 2 <= c->N) pw *= 2, lg++;
  double f = (double)(pw - 1) / pw, beta = p->beta * mult(c->slow);
  double t = 2 * lg * p->alpha + 2 * f * c->K * beta + f * c->K * p->gamma;
  o->link_bytes = 2 * f * c->K;
  o->cpu_bytes = 4 * (pw - 1) * c->K + 4.0 * (c->N - pw) * c->K;
  if (pw < c->N) {
    t += 2 * (p->alpha + c->K * beta) + c->K * p->gamma;
    o->link_bytes += c->K;
  }
  return c->N < 2 ? 0 : t;
}

/* Parameter server: each of S servers takes N pushes of K/S (incast on
 * its link) while each worker sends its K through its own link, so a
 * phase lasts as long as the slower of the two; it sums them, then
 * answers N pulls of K/S the same way.  Whole shards: a sync server
 * answers only after the N-th push, but its N replies do not end
 * together: the first one ends early (measured: the next step's pushes
 * begin while the replies still go out, docs/model.md), and that worker's
 * next push crosses the server's link during the other replies.  So the
 * out phase carries N K/S and the in phase after it (N-1) K/S (one push
 * when N = 1): 2 alpha + T_out + T_in + N K/S gamma.  Sliced (sync, C > 1
 * slices of a shard): slice c goes out while slice c+1 comes in, so the
 * link's two directions overlap and only the last slice's reply (and its
 * sum) follows the last push: 2 alpha + T (1 + 1/C) + N K/S gamma / C.
 * Sparse: K is the measured bytes per worker step. */
static double ps(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double s = c->S > 0 ? c->S : 1, per = c->N * c->K / s;
  /* sync and ssp wait for the slowest worker, async only for its own link */
  int async = c->variant && !strcmp(c->variant, "async");
  double ws = async ? mult(c->own) : mult(c->slow);
  double hub = per * p->beta * mult(c->hub), worker = c->K * p->beta * ws;
  double T = hub > worker ? hub : worker;
  o->link_bytes = per;
  o->cpu_bytes = 4 * c->N * c->K; /* workers 2K each, servers 2NK/S each */
  /* async: no barrier between a push and the next pull, so the server's
   * link carries pushes in and pulls out at once (full duplex): one phase */
  if (async) return p->alpha + T + per * p->gamma;
  int sliced = c->slice > 0 && !c->sparse && c->variant && !strcmp(c->variant, "sync");
  double C = sliced ? ceil(c->K / s / c->slice) : 1;
  if (C > 1) return 2 * p->alpha + T * (1 + 1 / C) + per * p->gamma / C;
  double after = c->N > 1 ? (c->N - 1) / (double)c->N : 1; /* of the hub's bytes */
  double hub_in = hub * after, T_in = hub_in > worker ? hub_in : worker;
  return 2 * p->alpha + T + T_in + per * p->gamma;
}

/* Mapreduce broadcast: flat, the driver's link sends N copies; tree
 * (binomial), ceil(log2(N+1)) rounds of one message of K each. */
static double mr_broadcast(const sg_cost_case_t *c, const sg_cost_params_t *p, double *link) {
  if (!strcmp(c->variant, "tree")) {
    int rounds = (int)ceil(log2((double)c->N + 1));
    *link = rounds * c->K;
    return rounds * (p->alpha + c->K * p->beta * mult(c->slow));
  }
  *link = c->N * c->K;
  return p->alpha + c->N * c->K * p->beta * mult(c->hub);
}

/* Fan-in of the aggregate tree: smallest f >= 2 with f^d >= N (mapreduce.h). */
static int fanin(int n, int d) {
  for (int f = 2;; f++) {
    double v = 1;
    for (int i = 0; i < d; i++) v *= f;
    if (v >= n) return f;
  }
}

/* Mapreduce aggregate: flat, N gradients of K into the driver, summed
 * there; tree of depth d, d-1 rounds where a leader takes (f-1)K from its
 * group, then the driver takes ceil(N / f^(d-1)) K.  After a flat
 * broadcast, as with a ps server's replies, the first executor's gradient
 * comes in while the other copies still go out, so the driver's link
 * takes N-1 of them after the broadcast (flat_after).  *sent: messages
 * of K sent in all. */
static double mr_aggregate(const sg_cost_case_t *c, const sg_cost_params_t *p, double *link,
                           double *sent) {
  int d = c->tree_aggregate && c->depth > 1 ? c->depth : 1, f = fanin(c->N, d);
  double t = 0, last = c->N, b = p->beta * mult(c->slow);
  *sent = 0;
  for (int r = 1; r < d; r++) {
    t += p->alpha + (f - 1) * c->K * (b + p->gamma);
    *sent += last - ceil(last / f);
    last = ceil(last / f);
  }
  *link = last * c->K;
  *sent += last;
  double after = d == 1 && !strcmp(c->variant, "flat") && c->N > 1 ? last - 1 : last;
  return t + p->alpha + after * c->K * p->beta * mult(c->hub) + last * c->K * p->gamma;
}

static double mapreduce(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o) {
  double out, in, sent;
  double t = mr_broadcast(c, p, &out) + mr_aggregate(c, p, &in, &sent);
  o->link_bytes = out > in ? out : in;
  /* the broadcast delivers K to each executor (flat or tree), the
   * aggregate sends `sent` messages of K; each byte is sent and received */
  o->cpu_bytes = 2 * (c->N + sent) * c->K;
  return t;
}

static const struct {
  const char *engine, *variant; /* variant NULL: any */
  cost_fn fn;
} TABLE[] = {
    {"allreduce", "ring", ring},   {"allreduce", "native", ring}, {"allreduce", "rhd", rhd},
    {"ps", NULL, ps},              {"mapreduce", NULL, mapreduce},
};

static cost_fn lookup(const sg_cost_case_t *c) {
  const char *e = c->engine ? c->engine : "";
  if (!strncmp(e, "bench-", 6)) e += 6; /* bench-allreduce, bench-ps, bench-mapreduce */
  for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++)
    if (!strcmp(TABLE[i].engine, e) &&
        (!TABLE[i].variant || (c->variant && !strcmp(TABLE[i].variant, c->variant))))
      return TABLE[i].fn;
  return NULL;
}

int sg_cost_detail(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *out) {
  cost_fn fn = lookup(c);
  if (!fn)
    return sg_err_set(SG_ENOTFOUND, "no cost formula for engine '%s' variant '%s'",
                      c->engine ? c->engine : "", c->variant ? c->variant : "");
  memset(out, 0, sizeof *out);
  out->link_s = fn(c, p, out);
  out->cpu_s = p->kappa > 0 && p->cores > 0 ? p->kappa * out->cpu_bytes / p->cores : 0;
  return SG_OK;
}

/* The links and the CPU work at once (the kernel moves one message while
 * zmq encrypts the next), so the slower of the two sets the time. */
int sg_cost_comm(const sg_cost_case_t *c, const sg_cost_params_t *p, double *seconds) {
  sg_cost_split_t s;
  SG_CHECK(sg_cost_detail(c, p, &s));
  *seconds = s.link_s > s.cpu_s ? s.link_s : s.cpu_s;
  return SG_OK;
}

int sg_cost_known(const sg_cost_case_t *c) { return lookup(c) != NULL; }

double sg_cost_link_bytes(const sg_cost_case_t *c) {
  sg_cost_params_t zero = {0};
  sg_cost_split_t s = {0};
  cost_fn fn = lookup(c);
  if (fn) fn(c, &zero, &s);
  return s.link_bytes;
}

void sg_cost_label(const sg_cost_case_t *c, char *out, size_t cap) {
  const char *e = c->engine ? c->engine : "?", *v = c->variant ? c->variant : "";
  if (!strncmp(e, "bench-", 6)) e += 6;
  if (!strcmp(e, "ps"))
    snprintf(out, cap, "ps-%s-S%d%s", v, c->S, c->sparse ? "-sparse" : "");
  else if (!strcmp(e, "mapreduce"))
    snprintf(out, cap, "mapreduce-%s/%s", v, c->tree_aggregate ? "tree" : "flat");
  else
    snprintf(out, cap, "%s", v[0] ? v : e);
}

/* ---- the fit --------------------------------------------------------- */

int sg_cost_fit_line(const double *x, const double *t, size_t n, double *a, double *b) {
  double sx = 0, st = 0, sxx = 0, sxt = 0;
  if (n < 2) return sg_err_set(SG_EINVAL, "fit: %zu points, need at least 2", n);
  for (size_t i = 0; i < n; i++) sx += x[i], st += t[i];
  double mx = sx / (double)n, mt = st / (double)n;
  /* centred sums: no cancellation between bytes ~1e7 and seconds ~1e-2 */
  for (size_t i = 0; i < n; i++) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxt += (x[i] - mx) * (t[i] - mt);
  }
  if (!(sxx > 0)) return sg_err_set(SG_EINVAL, "fit: all %zu points have the same size", n);
  *b = sxt / sxx;
  *a = mt - *b * mx;
  return SG_OK;
}

int sg_cost_fit_ring(const double *bytes, const double *t, size_t n, int N, double gamma,
                     sg_cost_params_t *p) {
  double a, b;
  if (N < 2) return sg_err_set(SG_EINVAL, "fit: ring rows of np %d, need np >= 2", N);
  SG_CHECK(sg_cost_fit_line(bytes, t, n, &a, &b));
  double f = (double)(N - 1) / N;
  p->gamma = gamma;
  p->alpha = a > 0 ? a / (2.0 * (N - 1)) : 0;
  p->beta = (b - f * gamma) / (2 * f);
  if (!(p->beta > 0))
    return sg_err_set(SG_ERANGE, "fit: slope %.3g s/B gives no positive beta", b);
  return SG_OK;
}

int sg_cost_fit_kappa(const double *bytes, const double *t, size_t n, int N, double cores,
                      double *kappa) {
  double a, b;
  if (N < 2 || !(cores > 0))
    return sg_err_set(SG_EINVAL, "kappa fit: np %d on %g cores", N, cores);
  SG_CHECK(sg_cost_fit_line(bytes, t, n, &a, &b));
  *kappa = b > 0 ? b * cores / (4.0 * (N - 1)) : 0;
  return SG_OK;
}

int sg_cost_measure_gamma(size_t bytes, int reps, double *gamma) {
  size_t n = bytes / sizeof(float);
  float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
  double t[32];
  if (reps < 1 || reps > 32) reps = 5;
  if (!a || !b || n == 0) {
    free(a), free(b);
    return sg_err_set(SG_ENOMEM, "gamma: %zu-byte buffers", bytes);
  }
  for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1; /* touch every page first */
  for (int r = 0; r < reps; r++) {
    double t0 = sg_now();
    sg_sum_f32(a, b, n);
    t[r] = sg_now() - t0;
  }
  qsort(t, (size_t)reps, sizeof t[0], sg_cmp_double);
  *gamma = t[reps / 2] / (double)(n * sizeof(float));
  free(a), free(b);
  return SG_OK;
}
