/* ps_sparse.c - the coordinates a worker's next batch reads. */
#include "ps_sparse.h"

#include <stdlib.h>

#include "err.h"

struct ps_needs {
  sg_workload_t *wl;
  int all; /* the workload cannot tell: everything is needed */
};

int ps_needs_new(ps_needs_t **out, sg_workload_t *wl, const sg_opts_t *o) {
  (void)o;
  ps_needs_t *n = calloc(1, sizeof *n);
  if (!n) return SG_ENOMEM;
  n->wl = wl;
  n->all = 1;
  *out = n;
  return SG_OK;
}

void ps_needs_destroy(ps_needs_t **pn) {
  if (!pn || !*pn) return;
  free(*pn);
  *pn = NULL;
}

int ps_needs_step(ps_needs_t *n, int64_t step) {
  (void)n;
  (void)step;
  return SG_OK;
}

int ps_needs_all(const ps_needs_t *n) { return !n || n->all; }

uint64_t ps_needs_shard(const ps_needs_t *n, size_t off, size_t cnt, uint32_t *idx) {
  (void)n;
  (void)off;
  for (size_t i = 0; i < cnt; i++) idx[i] = (uint32_t)i;
  return cnt;
}
