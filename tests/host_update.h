/* host_update.h: allreduce_engine.c's update_range, the host sharded
 * update, as the device twin tests call it for their reference runs. */
#ifndef SG_TEST_HOST_UPDATE_H
#define SG_TEST_HOST_UPDATE_H

#include <stddef.h>
#include <stdint.h>

#include "workload.h"

typedef struct host_ref {
  sg_optim_t *opt;
  float *params, *grad;
  float scale;
  int64_t step;
} host_ref_t;

static inline void host_update_range(void *arg, size_t off, size_t len, const float *recv) {
  host_ref_t *h = arg;
  sg_optim_apply_range2(h->opt, h->params, h->grad, recv, off, len, h->scale, h->step);
}

#endif
