/* overlap.c - buckets of the gradient allreduced while backward runs
 * (overlap.h).  Two threads, one mutex, one condition variable:
 *
 *   caller (comm)                     compute thread
 *   post step ------------------->    sg_workload_grad(...)
 *                                       hook: range done -> bucket?
 *   pop bucket, allreduce it  <-----      push bucket
 *   ...                                 (last layer first, then below)
 *   pop the last bucket       <-----    flush, done
 *
 * The compute thread never touches the comm; the caller never touches
 * the workload while a step runs.  The queue is sized for the most
 * buckets a step can make, so the hook never blocks.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cuda/bucket_plan.h"
#include "err.h"
#include "model.h"
#include "overlap.h"

typedef sg_ar_bucket_time_t range_t; /* off, len; its times */

struct sg_ar_overlap {
  sg_workload_t *wl;
  sg_ar_t *ar;
  size_t bucket, nparams; /* floats */
  pthread_t th;
  int started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu: the posted step, the queue and the step's outcome */
  int job, quit, done, rc, overflow;
  const float *params;
  float *grad;
  int64_t step;
  range_t *q;
  size_t qcap, qhead, qtail;
  double loss, t_grad;
  char err[1024];
  /* compute thread only: the bucket being filled (bucket_plan.h) */
  sg_bucket_acc_t acc;
};

static void push_bucket(void *arg, size_t off, size_t len) {
  sg_ar_overlap_t *ov = arg;
  pthread_mutex_lock(&ov->mu);
  if (ov->qtail < ov->qcap)
    ov->q[ov->qtail++] = (range_t){.off = off, .len = len, .ready = sg_now()};
  else
    ov->overflow = 1;
  pthread_cond_broadcast(&ov->cv);
  pthread_mutex_unlock(&ov->mu);
}

/* The model's hook: ranges come last first and adjoin; a bucket leaves
 * once it holds `bucket` floats (bucket_plan.h's grouping, which the
 * device overlap plans its buckets with). */
static void on_ready(void *arg, size_t off, size_t len) {
  sg_ar_overlap_t *ov = arg;
  sg_bucket_feed(&ov->acc, off, len, push_bucket, ov);
}

static void run_one(sg_ar_overlap_t *ov) {
  double loss = 0;
  ov->acc = (sg_bucket_acc_t){.bucket = ov->bucket};
  int rc = sg_workload_grad(ov->wl, ov->params, ov->grad, ov->step, &loss);
  double t = sg_now();
  if (rc == SG_OK) sg_bucket_flush(&ov->acc, push_bucket, ov);
  pthread_mutex_lock(&ov->mu);
  ov->rc = rc;
  if (rc) snprintf(ov->err, sizeof ov->err, "%s", sg_err_msg());
  ov->loss = loss;
  ov->t_grad = t;
  ov->done = 1;
  pthread_cond_broadcast(&ov->cv);
  pthread_mutex_unlock(&ov->mu);
}

static void *compute_main(void *arg) {
  sg_ar_overlap_t *ov = arg;
  pthread_mutex_lock(&ov->mu);
  for (;;) {
    while (!ov->job && !ov->quit) pthread_cond_wait(&ov->cv, &ov->mu);
    if (ov->quit) break;
    ov->job = 0;
    pthread_mutex_unlock(&ov->mu);
    run_one(ov);
    pthread_mutex_lock(&ov->mu);
  }
  pthread_mutex_unlock(&ov->mu);
  return NULL;
}

int sg_ar_overlap_new(sg_ar_overlap_t **out, sg_workload_t *wl, sg_ar_t *ar,
                      size_t bucket_bytes) {
  sg_ar_overlap_t *ov = calloc(1, sizeof *ov);
  if (!ov) return sg_err_set(SG_ENOMEM, "overlap: no memory");
  ov->wl = wl;
  ov->ar = ar;
  ov->nparams = sg_workload_nparams(wl);
  ov->bucket = bucket_bytes / sizeof(float) ? bucket_bytes / sizeof(float) : 1;
  /* Every bucket but the last of a step holds >= bucket floats; the rest
   * covers a non-adjoining report, which the model never makes. */
  ov->qcap = ov->nparams / ov->bucket + 2 * SG_MODEL_MAX_LAYERS + 4;
  ov->q = calloc(ov->qcap, sizeof *ov->q);
  pthread_mutex_init(&ov->mu, NULL);
  pthread_cond_init(&ov->cv, NULL);
  if (!ov->q || pthread_create(&ov->th, NULL, compute_main, ov) != 0) {
    sg_ar_overlap_destroy(&ov);
    return sg_err_set(SG_ENOMEM, "overlap: cannot start the compute thread");
  }
  ov->started = 1;
  /* the model's dW blocks (sg_model_dw_rows) gather into buckets */
  sg_model_set_grad_hook(sg_workload_model(wl), on_ready, ov);
  *out = ov;
  return SG_OK;
}

/* Pops and reduces buckets until the compute thread is done and the
 * queue is empty; after a failed allreduce it only drains. */
static int drain(sg_ar_overlap_t *ov, float *grad, size_t *covered) {
  int rc = SG_OK;
  pthread_mutex_lock(&ov->mu);
  for (;;) {
    while (ov->qhead == ov->qtail && !ov->done) pthread_cond_wait(&ov->cv, &ov->mu);
    if (ov->qhead == ov->qtail) break;
    range_t *q = &ov->q[ov->qhead++];
    range_t r = *q;
    pthread_mutex_unlock(&ov->mu);
    *covered += r.len;
    double t0 = sg_now();
    if (rc == SG_OK) rc = sg_ar_run(ov->ar, grad + r.off, r.len);
    double t1 = sg_now();
    pthread_mutex_lock(&ov->mu);
    q->start = t0; /* the queue never moves while a step runs */
    q->end = t1;
  }
  pthread_mutex_unlock(&ov->mu);
  return rc;
}

int sg_ar_overlap_step(sg_ar_overlap_t *ov, const float *params, float *grad, int64_t step,
                       double *loss, double *t_grad) {
  size_t covered = 0;
  pthread_mutex_lock(&ov->mu);
  ov->params = params;
  ov->grad = grad;
  ov->step = step;
  ov->qhead = ov->qtail = 0;
  ov->done = ov->overflow = 0;
  ov->job = 1;
  pthread_cond_broadcast(&ov->cv);
  pthread_mutex_unlock(&ov->mu);
  int rc = drain(ov, grad, &covered);
  /* done is set and the compute thread waits for the next job: its
   * fields are stable without the lock. */
  *loss = ov->loss;
  *t_grad = ov->t_grad;
  if (rc) return rc;
  if (ov->rc) return sg_err_set(ov->rc, "%s", ov->err);
  if (ov->overflow || covered != ov->nparams)
    return sg_err_set(SG_EINTERNAL, "overlap: backward handed over %zu of %zu gradient floats%s",
                      covered, ov->nparams, ov->overflow ? " (bucket queue full)" : "");
  return SG_OK;
}

const sg_ar_bucket_time_t *sg_ar_overlap_buckets(const sg_ar_overlap_t *ov, size_t *n) {
  *n = ov->qtail; /* the compute thread is idle between steps */
  return ov->q;
}

void sg_ar_overlap_destroy(sg_ar_overlap_t **pov) {
  if (!pov || !*pov) return;
  sg_ar_overlap_t *ov = *pov;
  if (ov->started) {
    pthread_mutex_lock(&ov->mu);
    ov->quit = 1;
    pthread_cond_broadcast(&ov->cv);
    pthread_mutex_unlock(&ov->mu);
    pthread_join(ov->th, NULL);
    sg_model_set_grad_hook(sg_workload_model(ov->wl), NULL, NULL);
  }
  pthread_mutex_destroy(&ov->mu);
  pthread_cond_destroy(&ov->cv);
  free(ov->q);
  free(ov);
  *pov = NULL;
}
