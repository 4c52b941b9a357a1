/* replica.c - a device replica moved one way at a time (replica.h). */
#include "replica.h"

#include <stdlib.h>

#include "err.h"

#define REPLICA_SLOTS 2 /* double buffering */

int sg_replica_new(sg_replica_t **out, const sg_rdev_t *dev, size_t n, float *host_grad) {
  sg_replica_t *r = calloc(1, sizeof *r);
  if (!r) {
    if (dev->destroy) dev->destroy(dev->ctx);
    return sg_err_set(SG_ENOMEM, "device replica of %zu parameters", n);
  }
  r->dev = *dev;
  r->n = n;
  r->host_grad = host_grad;
  int rc = r->dev.alloc(r->dev.ctx, &r->dp, n, "the parameters");
  if (rc == SG_OK) rc = r->dev.alloc(r->dev.ctx, &r->dg, n, "the gradient");
  if (rc < 0) {
    sg_replica_destroy(&r);
    return rc;
  }
  *out = r;
  return SG_OK;
}

/* A one-way run over the whole vector d <-> host. */
static int run_begin(sg_replica_t *r, float *d, int dir, float *host, sg_stage_cursor_t *c) {
  const sg_stage_ops_t *ops = NULL;
  sg_stage_plan_t p;
  SG_CHECK(sg_stage_plan(&p, r->n, r->dev.chunk ? r->dev.chunk : 1, REPLICA_SLOTS));
  p.plant_bug = r->plant;
  SG_CHECK(r->dev.bind(r->dev.ctx, d, &ops));
  return sg_stage_begin(c, &p, ops, dir, host);
}

int sg_replica_grad(sg_replica_t *r, struct sg_workload *wl, int64_t step, double *loss) {
  SG_CHECK(sg_replica_grad_end(r)); /* a download left over (none when the engine sent it all) */
  SG_CHECK(r->dev.grad(r->dev.ctx, wl, r->dp, r->dg, step, loss));
  return run_begin(r, r->dg, SG_STAGE_DOWN, r->host_grad, &r->down);
}

int sg_replica_grad_until(sg_replica_t *r, size_t hi) {
  if (!r->down.ops) return SG_OK;
  return sg_stage_until(&r->down, hi);
}

int sg_replica_grad_end(sg_replica_t *r) {
  if (!r->down.ops) return SG_OK;
  int rc = sg_stage_end(&r->down);
  r->down.ops = NULL;
  return rc;
}

int sg_replica_put(sg_replica_t *r, float *host) {
  sg_stage_cursor_t up;
  SG_CHECK(sg_replica_grad_end(r)); /* the bound executor is one: the download ends first */
  SG_CHECK(run_begin(r, r->dp, SG_STAGE_UP, host, &up));
  return sg_stage_end(&up);
}

void sg_replica_destroy(sg_replica_t **pr) {
  if (!pr || !*pr) return;
  sg_replica_t *r = *pr;
  if (r->dev.release) {
    r->dev.release(r->dev.ctx, &r->dp);
    r->dev.release(r->dev.ctx, &r->dg);
    r->dev.release(r->dev.ctx, &r->dacc);
  }
  if (r->dev.destroy) r->dev.destroy(r->dev.ctx);
  free(r);
  *pr = NULL;
}

/* ---- mapreduce: the task accumulator --------------------------------------- */

int sg_replica_want_acc(sg_replica_t *r) {
  if (r->dacc) return SG_OK;
  return r->dev.alloc(r->dev.ctx, &r->dacc, r->n, "the task accumulator");
}

int sg_replica_grad_slice(sg_replica_t *r, struct sg_workload *wl, int64_t step, int64_t first,
                          int64_t count, double *loss) {
  return r->dev.grad_slice(r->dev.ctx, wl, r->dp, r->dg, step, first, count, loss);
}

int sg_replica_acc(sg_replica_t *r, float w, int first) {
  if (!r->dacc) return sg_err_set(SG_EINVAL, "device replica: no accumulator");
  return r->dev.acc(r->dev.ctx, r->dacc, r->dg, r->n, w, first);
}

int sg_replica_get_acc(sg_replica_t *r, float *host) {
  sg_stage_cursor_t down;
  if (!r->dacc) return sg_err_set(SG_EINVAL, "device replica: no accumulator");
  SG_CHECK(sg_replica_grad_end(r));
  SG_CHECK(run_begin(r, r->dacc, SG_STAGE_DOWN, host, &down));
  return sg_stage_end(&down);
}
