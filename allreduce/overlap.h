/* overlap.h - the gradient allreduced in buckets while backward runs.
 *
 * A compute thread runs the workload's gradient; the model's backward
 * hook (model.h) hands it finished ranges of the gradient, last layer
 * first, which it groups into buckets of at least `bucket` bytes
 * (contiguous, descending offsets).  The calling thread -- the only one
 * that ever touches the comm, which keeps MPI's FUNNELED rule and the
 * comm's one-thread-at-a-time rule -- runs the allreduce on each bucket
 * as it arrives, while backward goes on with the layers below.
 *
 * Bucket boundaries are a function of the model and `bucket` alone, so
 * every rank reduces the same buckets in the same order.  The reduction
 * of an element is the algorithm's on a shorter vector: for N = 2 the
 * very same two-term sum as without overlap.
 */
#ifndef SG_AR_OVERLAP_H
#define SG_AR_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#include "allreduce.h"
#include "workload.h"

#define SG_AR_BUCKET_DEFAULT (512u << 10) /* bytes; docs/engines/allreduce.md */

typedef struct sg_ar_overlap sg_ar_overlap_t;

/* Starts the compute thread and hooks wl's model; ar must reduce vectors
 * of sg_workload_nparams(wl) floats.  wl and ar stay the caller's and
 * must outlive the result; the caller must not use wl while a step runs. */
int sg_ar_overlap_new(sg_ar_overlap_t **out, sg_workload_t *wl, sg_ar_t *ar,
                      size_t bucket_bytes);
/* grad = the sum over all ranks of each rank's gradient of params at
 * `step` (sg_workload_grad's, then allreduced bucket by bucket).  *loss:
 * this rank's batch loss; *t_grad: sg_now() when backward finished, so
 * that the caller can book the comm time left after it (the exposed
 * part).  An error of either thread is returned, after both are idle. */
int sg_ar_overlap_step(sg_ar_overlap_t *ov, const float *params, float *grad, int64_t step,
                       double *loss, double *t_grad);
/* The buckets of the last step, in the order they were reduced (last
 * layer first): floats [off, off+len) of the gradient, and sg_now() when
 * backward handed each over (ready), when its allreduce began and when
 * it ended.  Valid until the next step; *n = how many. */
typedef struct sg_ar_bucket_time {
  size_t off, len;
  double ready, start, end;
} sg_ar_bucket_time_t;
const sg_ar_bucket_time_t *sg_ar_overlap_buckets(const sg_ar_overlap_t *ov, size_t *n);
/* Stops and joins the compute thread, removes the hook.  NULL-safe. */
void sg_ar_overlap_destroy(sg_ar_overlap_t **ov);

#endif
