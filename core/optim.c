/* optim.c - SGD with momentum and weight decay, and the lr schedule.
 *
 * Update (PyTorch's form, dampening 0, no Nesterov), elementwise:
 *   g' = g + wd * p
 *   v  = mu * v + g'          (v starts at 0; skipped when mu == 0)
 *   p  = p - lr(step) * v
 * Because it is elementwise, a PS server applying it to its key range gets
 * exactly the same slice as the whole-vector update.
 *
 * Schedule (step counts from 0, spe = steps per epoch, T = total steps,
 * W = warmup_steps):
 *   step < W:   lr * (step + 1) / W                  (linear warm-up)
 *   constant:   lr
 *   step:       lr * gamma^floor(step / (lr_step_epochs * spe))
 *   cosine:     lr * (1 + cos(pi * (step - W) / (T - W))) / 2   (0 at T)
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "msgbuf.h"
#include "reduce.h"
#include "workload.h"

enum { SCHED_CONSTANT, SCHED_STEP, SCHED_COSINE };

struct sg_optim {
  size_t n;
  double lr, mu, wd, gamma, step_epochs;
  int sched;
  int64_t warmup, spe, total;
  float *v; /* momentum buffer; NULL when mu == 0 */
};

int sg_optim_new(sg_optim_t **out, const sg_opts_t *o, size_t n,
                 int64_t steps_per_epoch, int64_t total_steps) {
  int rc = SG_OK;
  sg_optim_t *opt = calloc(1, sizeof *opt);
  if (!opt) return SG_ENOMEM;
  opt->n = n;
  opt->spe = steps_per_epoch > 0 ? steps_per_epoch : 1;
  opt->total = total_steps;
  SG_TRY(sg_opts_double_or(o, "lr", 0.05, &opt->lr));
  SG_TRY(sg_opts_double_or(o, "momentum", 0.0, &opt->mu));
  SG_TRY(sg_opts_double_or(o, "weight_decay", 0.0, &opt->wd));
  SG_TRY(sg_opts_double_or(o, "lr_gamma", 0.1, &opt->gamma));
  SG_TRY(sg_opts_double_or(o, "lr_step_epochs", 1.0, &opt->step_epochs));
  SG_TRY(sg_opts_int_or(o, "warmup_steps", 0, &opt->warmup));
  const char *s = sg_opts_str_or(o, "lr_schedule", "constant");
  if (!strcmp(s, "constant")) opt->sched = SCHED_CONSTANT;
  else if (!strcmp(s, "step")) opt->sched = SCHED_STEP;
  else if (!strcmp(s, "cosine")) opt->sched = SCHED_COSINE;
  else {
    rc = sg_err_set(SG_ECONFIG, "lr_schedule: '%s' is not one of constant|step|cosine", s);
    goto fail;
  }
  if (opt->lr < 0 || opt->mu < 0 || opt->mu >= 1 || opt->wd < 0 || opt->warmup < 0 ||
      opt->step_epochs <= 0) {
    rc = sg_err_set(SG_ECONFIG, "lr/momentum/weight_decay/warmup_steps/lr_step_epochs: "
                                "out of range (lr %g, momentum %g, weight_decay %g)",
                    opt->lr, opt->mu, opt->wd);
    goto fail;
  }
  if (opt->mu > 0) {
    opt->v = sg_fold_alloc((n ? n : 1) * sizeof *opt->v); /* zeroed; modeled: folded, undefined */
    if (!opt->v) {
      rc = sg_err_set(SG_ENOMEM, "momentum buffer of %zu floats", n);
      goto fail;
    }
  }
  *out = opt;
  return SG_OK;
fail:
  sg_optim_destroy(&opt);
  return rc;
}

void sg_optim_destroy(sg_optim_t **popt) {
  if (!popt || !*popt) return;
  sg_fold_free((*popt)->v);
  free(*popt);
  *popt = NULL;
}

double sg_optim_lr(const sg_optim_t *opt, int64_t step) {
  if (step < 0) step = 0;
  if (step < opt->warmup) return opt->lr * (double)(step + 1) / (double)opt->warmup;
  switch (opt->sched) {
  case SCHED_STEP: {
    double k = floor((double)step / (opt->step_epochs * (double)opt->spe));
    return opt->lr * pow(opt->gamma, k);
  }
  case SCHED_COSINE: {
    int64_t span = opt->total - opt->warmup;
    if (span <= 0) return opt->lr;
    double t = (double)(step - opt->warmup) / (double)span;
    if (t > 1.0) t = 1.0;
    return opt->lr * 0.5 * (1.0 + cos(3.141592653589793 * t));
  }
  default: return opt->lr;
  }
}

void sg_optim_apply(sg_optim_t *opt, float *params, const float *grad,
                    int64_t step) {
  if (sg_values_unread()) return;
  float *restrict p = params;
  const float *restrict g = grad;
  const size_t n = opt->n;
  const float lr = (float)sg_optim_lr(opt, step), wd = (float)opt->wd;
  if (!opt->v) {
    for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] + wd * p[i]);
    return;
  }
  float *restrict v = opt->v;
  const float mu = (float)opt->mu;
  for (size_t i = 0; i < n; i++) {
    v[i] = mu * v[i] + g[i] + wd * p[i];
    p[i] -= lr * v[i];
  }
}

/* The update of params[off, off+len) from scale * (grad[off + i] + more[i])
 * (more NULL: grad alone).  Inlined with `more` a constant NULL or not, so
 * each caller gets its own loop without a test per element. */
static inline void apply_range(sg_optim_t *opt, float *params, const float *grad,
                               const float *more, size_t off, size_t len, float scale,
                               int64_t step) {
  if (off > opt->n || len > opt->n - off) return; /* never: callers cut within n */
  if (sg_values_unread()) return;
  float *restrict p = params + off;
  const float *restrict g = grad + off, *restrict m = more;
  const float lr = (float)sg_optim_lr(opt, step), wd = (float)opt->wd;
  if (!opt->v) {
    for (size_t i = 0; i < len; i++) {
      const float gi = m ? g[i] + m[i] : g[i];
      p[i] -= lr * (scale * gi + wd * p[i]);
    }
    return;
  }
  float *restrict v = opt->v + off;
  const float mu = (float)opt->mu;
  for (size_t i = 0; i < len; i++) {
    const float gi = m ? g[i] + m[i] : g[i];
    v[i] = mu * v[i] + scale * gi + wd * p[i];
    p[i] -= lr * v[i];
  }
}

void sg_optim_apply_range(sg_optim_t *opt, float *params, const float *grad, size_t off,
                          size_t len, float scale, int64_t step) {
  apply_range(opt, params, grad, NULL, off, len, scale, step);
}

void sg_optim_apply_range2(sg_optim_t *opt, float *params, const float *grad,
                           const float *more, size_t off, size_t len, float scale, int64_t step) {
  if (more) apply_range(opt, params, grad, more, off, len, scale, step);
  else apply_range(opt, params, grad, NULL, off, len, scale, step);
}

int sg_optim_sparse_exact(const sg_optim_t *opt) { return !opt->v && opt->wd == 0.0; }

void sg_optim_apply_at(sg_optim_t *opt, float *params, const float *grad, const uint32_t *idx,
                       size_t m, int64_t step) {
  const float lr = (float)sg_optim_lr(opt, step), wd = (float)opt->wd;
  for (size_t j = 0; j < m; j++) {
    uint32_t i = idx[j];
    params[i] -= lr * (grad[i] + wd * params[i]);
  }
}
