/* bench_step.c - training-step throughput vs the sgemm bound (bench_step.h).
 *
 * Method: untimed warm-up; then BLOCKS rounds, each one
 * block of K training steps followed by one block of K passes over the
 * step's sgemm calls alone (same shapes and order, on buffers of the same
 * sizes); K is chosen so a step block lasts about BLOCK_S.  Step and bound
 * are the medians of their blocks.  Alternating the two blocks keeps both
 * under the same machine load: on a shared host, timing them minutes apart
 * gave ratios from 0.4 to 0.95 for the same build.  The per-shape table is
 * timed separately, for information.
 *
 * With device: cuda the step is local's device step (parameters, gradient
 * and momentum in device memory, the update one kernel) and the bound is
 * the same sgemm calls issued to cuBLAS on device buffers; a block ends
 * when the device has finished it.
 */
#include "bench_method.h"
#include "bench_step.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cuda/sg_cuda.h"
#include "device.h"
#include "err.h"
#include "model.h"
#include "rng.h"
#include "settings.h"
#include "workload.h"

#define BLOCKS 9
#define BLOCK_S 0.15
#define WARMUP_STEPS 30
#define MAX_GEMMS 512

/* Reps per block so that one block lasts about BLOCK_S given t per rep. */
static int64_t reps_for(double t) {
  int64_t k = t > 0 ? (int64_t)(BLOCK_S / t) : 1000;
  return k < 1 ? 1 : k;
}

typedef struct {
  sg_workload_t *w;
  sg_optim_t *opt;
  float *params, *grad;
  float *dp, *dg, *dv; /* device: cuda */
  double mu, wd;
  int64_t step, total;
} step_ctx_t;

static int run_steps(step_ctx_t *c, int64_t k) {
  for (int64_t i = 0; i < k; i++) {
    double loss;
    if (c->dp) {
      SG_CHECK(sg_workload_grad_device(c->w, c->dp, c->dg, c->step, &loss));
      SG_CHECK(sg_cuda_sgd(c->dp, c->dg, c->dv, sg_workload_nparams(c->w), 1.0f,
                           (float)sg_optim_lr(c->opt, c->step), (float)c->wd, (float)c->mu));
      c->step++;
      continue;
    }
    /* stay inside the run's schedule; the data order wraps around epochs */
    SG_CHECK(sg_workload_grad(c->w, c->params, c->grad, c->step, &loss));
    sg_optim_apply(c->opt, c->params, c->grad, c->step);
    c->step++;
  }
  return c->dp ? sg_cuda_sync() : SG_OK;
}

static float *rand_buf(size_t n, uint64_t seed) {
  float *p = malloc((n ? n : 1) * sizeof *p);
  if (!p) return NULL;
  sg_rng_t r;
  sg_rng_seed(&r, seed, 99, 0);
  for (size_t i = 0; i < n; i++) p[i] = (float)(sg_rng_uniform(&r) - 0.5);
  return p;
}

/* Buffers for every sgemm of one step. */
typedef struct {
  size_t n;
  const sg_gemm_shape_t *g;
  float *A[MAX_GEMMS], *B[MAX_GEMMS], *C[MAX_GEMMS];
  sg_cuda_gemms_t *dev; /* device: cuda: the calls on device buffers */
} gemm_set_t;

static void gemm_set_free(gemm_set_t *gs) {
  sg_cuda_gemms_destroy(&gs->dev);
  for (size_t i = 0; i < gs->n; i++) {
    free(gs->A[i]);
    free(gs->B[i]);
    free(gs->C[i]);
  }
}

static int gemm_set_init(gemm_set_t *gs, const sg_gemm_shape_t *g, size_t n, int dev,
                         int tf32) {
  gs->n = n;
  gs->g = g;
  if (dev) return sg_cuda_gemms_new(&gs->dev, g, n, tf32);
  for (size_t i = 0; i < n; i++) {
    gs->A[i] = rand_buf((size_t)g[i].m * g[i].k, 1);
    gs->B[i] = rand_buf((size_t)g[i].k * g[i].n, 2);
    gs->C[i] = rand_buf((size_t)g[i].m * g[i].n, 3);
    if (!gs->A[i] || !gs->B[i] || !gs->C[i]) return SG_ENOMEM;
  }
  return SG_OK;
}

static void gemm_one(const gemm_set_t *gs, size_t i) {
  const sg_gemm_shape_t *s = &gs->g[i];
  const int lda = s->ta == 'N' ? s->k : s->m, ldb = s->tb == 'N' ? s->n : s->k;
  cblas_sgemm(CblasRowMajor, s->ta == 'N' ? CblasNoTrans : CblasTrans,
              s->tb == 'N' ? CblasNoTrans : CblasTrans, s->m, s->n, s->k, 1.0f, gs->A[i], lda,
              gs->B[i], ldb, s->beta * 1e-3f, gs->C[i], s->n);
}

/* k passes over every call of the step. */
static int gemm_passes(const gemm_set_t *gs, int64_t k) {
  if (gs->dev) return sg_cuda_gemms_run(gs->dev, 0, gs->n, k);
  for (int64_t i = 0; i < k; i++)
    for (size_t j = 0; j < gs->n; j++) gemm_one(gs, j);
  return SG_OK;
}

/* Median seconds of call i alone on the device. */
static int time_gemm_dev(const gemm_set_t *gs, size_t i, double *med) {
  double t0 = sg_now(), t[BLOCKS];
  SG_CHECK(sg_cuda_gemms_run(gs->dev, i, 1, 10));
  int64_t k = reps_for((sg_now() - t0) / 10);
  for (int b = 0; b < BLOCKS; b++) {
    t0 = sg_now();
    SG_CHECK(sg_cuda_gemms_run(gs->dev, i, 1, k));
    t[b] = (sg_now() - t0) / (double)k;
  }
  qsort(t, BLOCKS, sizeof t[0], sg_cmp_double);
  *med = t[BLOCKS / 2];
  return SG_OK;
}

/* Median seconds of one sgemm of shape s. */
static int time_gemm(const sg_gemm_shape_t *s, double *med) {
  size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n, nc = (size_t)s->m * s->n;
  float *A = rand_buf(na, 1), *B = rand_buf(nb, 2), *C = rand_buf(nc, 3);
  int rc = SG_OK;
  if (!A || !B || !C) {
    rc = SG_ENOMEM;
    goto fail;
  }
  const int lda = s->ta == 'N' ? s->k : s->m, ldb = s->tb == 'N' ? s->n : s->k;
  const enum CBLAS_TRANSPOSE ta = s->ta == 'N' ? CblasNoTrans : CblasTrans;
  const enum CBLAS_TRANSPOSE tb = s->tb == 'N' ? CblasNoTrans : CblasTrans;
  double t0 = sg_now();
  for (int i = 0; i < 10; i++)
    cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, A, lda, B, ldb, s->beta * 1e-3f,
                C, s->n);
  int64_t k = reps_for((sg_now() - t0) / 10);
  double t[BLOCKS];
  for (int b = 0; b < BLOCKS; b++) {
    t0 = sg_now();
    for (int64_t i = 0; i < k; i++)
      cblas_sgemm(CblasRowMajor, ta, tb, s->m, s->n, s->k, 1.0f, A, lda, B, ldb,
                  s->beta * 1e-3f, C, s->n);
    t[b] = (sg_now() - t0) / (double)k;
  }
  qsort(t, BLOCKS, sizeof t[0], sg_cmp_double);
  *med = t[BLOCKS / 2];
fail:
  free(A);
  free(B);
  free(C);
  return rc;
}

/* The settings the step runs with (mlp, hidden 256, batch 64 unless
 * given), its workload, optimizer and buffers, parameters initialised. */
static int step_setup(const sg_opts_t *o, sg_opts_t **so, step_ctx_t *c) {
  if (!(*so = sg_opts_dup(o))) return SG_ENOMEM;
  if (!sg_opts_has(*so, "model")) SG_CHECK(sg_opts_set(*so, "model", "mlp"));
  if (!sg_opts_has(*so, "hidden")) SG_CHECK(sg_opts_set(*so, "hidden", "256"));
  if (!sg_opts_has(*so, "batch")) SG_CHECK(sg_opts_set(*so, "batch", "64"));
  SG_CHECK(sg_settings_defaults(sg_settings, *so));
  if (sg_device_admit(*so) < 0) return sg_err_set(SG_ECONFIG, "device: %s", sg_err_msg());
  SG_CHECK(sg_workload_new(&c->w, *so, 0, 1, SG_WL_TRAIN));
  SG_CHECK(sg_workload_optim_new(c->w, *so, &c->opt));
  const size_t np = sg_workload_nparams(c->w);
  c->params = malloc(np * sizeof(float));
  c->grad = malloc(np * sizeof(float));
  if (!c->params || !c->grad) return SG_ENOMEM;
  SG_CHECK(sg_workload_init_params(c->w, c->params));
  if (!sg_workload_on_device(c->w)) return SG_OK;
  SG_CHECK(sg_opts_double_or(*so, "momentum", 0.0, &c->mu));
  SG_CHECK(sg_opts_double_or(*so, "weight_decay", 0.0, &c->wd));
  SG_CHECK(sg_cuda_alloc(&c->dp, np, "the parameters"));
  SG_CHECK(sg_cuda_alloc(&c->dg, np, "the gradient"));
  if (c->mu > 0) {
    SG_CHECK(sg_cuda_alloc(&c->dv, np, "the momentum"));
    SG_CHECK(sg_cuda_zero(c->dv, np));
  }
  return sg_cuda_put(c->dp, c->params, np);
}

/* Warm-up (untimed for the result; sizes the blocks: *k steps each), then
 * BLOCKS blocks alternating the step and its sgemm calls alone; tb[] and
 * tq[] sorted, seconds per step. */
static int step_time_blocks(step_ctx_t *c, gemm_set_t *gs, size_t ng, double *tb, double *tq,
                            int64_t *k) {
  double t0 = sg_now();
  SG_CHECK(run_steps(c, WARMUP_STEPS));
  *k = reps_for((sg_now() - t0) / WARMUP_STEPS);
  (void)ng;
  SG_CHECK(gemm_passes(gs, WARMUP_STEPS));
  for (int b = 0; b < BLOCKS; b++) {
    t0 = sg_now();
    SG_CHECK(run_steps(c, *k));
    tb[b] = (sg_now() - t0) / (double)*k;
    t0 = sg_now();
    SG_CHECK(gemm_passes(gs, *k));
    tq[b] = (sg_now() - t0) / (double)*k;
  }
  qsort(tb, BLOCKS, sizeof tb[0], sg_cmp_double);
  qsort(tq, BLOCKS, sizeof tq[0], sg_cmp_double);
  return SG_OK;
}

/* The report: per-shape table, the sgemm bound, the step, their ratio. */
static void step_print(FILE *out, const step_ctx_t *c, const sg_gemm_shape_t *g, size_t ng,
                       const double *tg, const double *tb, const double *tq, int64_t k,
                       const sg_bench_step_result_t *r) {
  fprintf(out, "bench step: %s\n", sg_workload_describe(c->w));
  if (c->dp)
    fprintf(out, "blas: cuBLAS sgemm on the device (%s)\n", sg_device_build());
  else
    fprintf(out, "blas: %s\n", sg_blas_info());
  fprintf(out, "%-8s %5s %7s %7s %7s %9s %10s %8s\n", "gemm", "op", "m", "n", "k", "MFLOP",
          "time_us", "GFLOP/s");
  for (size_t i = 0; i < ng; i++) {
    double fl = 2.0 * g[i].m * (double)g[i].n * g[i].k;
    fprintf(out, "%-8s %3c,%c %7d %7d %7d %9.3f %10.2f %8.1f\n", g[i].what, g[i].ta, g[i].tb,
            g[i].m, g[i].n, g[i].k, fl * 1e-6, tg[i] * 1e6, fl / tg[i] * 1e-9);
  }
  if (r->gemm_s > 0)
    fprintf(out, "sgemm bound: %.2f us/step median of %d blocks (min %.2f, max %.2f), "
                 "%.0f samples/s (%.1f GFLOP/s)\n",
            r->gemm_s * 1e6, BLOCKS, tq[0] * 1e6, tq[BLOCKS - 1] * 1e6, r->bound_sps,
            r->gemm_flops / r->gemm_s * 1e-9);
  else
    fprintf(out, "sgemm bound: n/a (the step makes no sgemm call)\n");
  fprintf(out, "step (grad+apply): %.2f us median of %d blocks x %lld steps "
               "(min %.2f, max %.2f), %.0f samples/s\n",
          r->step_s * 1e6, BLOCKS, (long long)k, tb[0] * 1e6, tb[BLOCKS - 1] * 1e6,
          r->step_sps);
  if (r->gemm_s > 0) fprintf(out, "ratio step/bound: %.3f\n", r->ratio);
}

int sg_bench_step_run(const sg_opts_t *o, FILE *out, sg_bench_step_result_t *res) {
  int rc = SG_OK;
  sg_bench_step_result_t r = {0};
  step_ctx_t c = {0};
  gemm_set_t gs = {0};
  sg_opts_t *so = NULL;
  SG_TRY(step_setup(o, &so, &c));
  const int batch = sg_workload_batch(c.w);
  sg_gemm_shape_t g[MAX_GEMMS];
  size_t ng = sg_model_gemms(sg_workload_model(c.w), batch, g, MAX_GEMMS);
  if (ng > MAX_GEMMS) ng = MAX_GEMMS;
  int tf32 = 0;
  if (c.dp && sg_opts_has(so, "tf32")) SG_TRY(sg_opts_bool(so, "tf32", &tf32));
  SG_TRY(gemm_set_init(&gs, g, ng, c.dp != NULL, tf32));
  for (size_t i = 0; i < ng; i++) r.gemm_flops += 2.0 * g[i].m * (double)g[i].n * g[i].k;

  double tb[BLOCKS], tq[BLOCKS];
  int64_t k;
  SG_TRY(step_time_blocks(&c, &gs, ng, tb, tq, &k));
  r.step_s = tb[BLOCKS / 2];
  r.step_sps = batch / r.step_s;
  if (ng > 0) {
    r.gemm_s = tq[BLOCKS / 2];
    r.bound_sps = batch / r.gemm_s;
    r.ratio = r.step_sps / r.bound_sps;
  }
  /* per-shape table (information only) */
  double tg[MAX_GEMMS];
  for (size_t i = 0; i < ng; i++)
    SG_TRY(gs.dev ? time_gemm_dev(&gs, i, &tg[i]) : time_gemm(&g[i], &tg[i]));
  if (out) step_print(out, &c, g, ng, tg, tb, tq, k, &r);
  if (res) *res = r;
fail:
  gemm_set_free(&gs);
  free(c.params);
  free(c.grad);
  sg_cuda_free(&c.dp);
  sg_cuda_free(&c.dg);
  sg_cuda_free(&c.dv);
  sg_optim_destroy(&c.opt);
  sg_workload_destroy(&c.w);
  sg_opts_destroy(&so);
  return rc;
}

int sg_bench_step(const sg_opts_t *o, FILE *out) {
  return sg_bench_step_run(o, out, NULL);
}
