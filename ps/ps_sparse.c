/* ps_sparse.c - the coordinates a worker's next batch reads. */
#include "ps_sparse.h"

#include <stdlib.h>

#include "err.h"

struct ps_needs {
  sg_workload_t *wl;
  int all;       /* the workload cannot tell: everything is needed */
  uint32_t *idx; /* [cap] coordinates of `step`, sorted */
  size_t n, cap;
  int64_t step;
};

int ps_needs_new(ps_needs_t **out, sg_workload_t *wl, const sg_opts_t *o) {
  (void)o;
  ps_needs_t *n = calloc(1, sizeof *n);
  if (!n) return SG_ENOMEM;
  n->wl = wl;
  n->step = -1;
  /* Ask for step 0 with no room: SG_ERANGE says the workload can tell. */
  size_t need = 0;
  int rc = sg_workload_sparse_coords(wl, 0, NULL, 0, &need);
  if (rc == SG_EUNSUPPORTED) {
    sg_err_clear();
    n->all = 1;
  } else if (rc != SG_ERANGE && rc < 0) {
    ps_needs_destroy(&n); /* the workload's own message stays */
    return rc;
  } else {
    sg_err_clear();
  }
  *out = n;
  return SG_OK;
}

void ps_needs_destroy(ps_needs_t **pn) {
  if (!pn || !*pn) return;
  free((*pn)->idx);
  free(*pn);
  *pn = NULL;
}

int ps_needs_step(ps_needs_t *n, int64_t step) {
  if (n->all) return SG_OK;
  for (;;) {
    size_t need = 0;
    int rc = sg_workload_sparse_coords(n->wl, step, n->idx, n->cap, &need);
    if (rc == SG_OK) {
      n->n = need;
      n->step = step;
      return SG_OK;
    }
    if (rc != SG_ERANGE) return rc;
    /* Grows a few times at most: to the largest batch seen, with slack. */
    sg_err_clear();
    size_t cap = need + need / 4;
    uint32_t *p = realloc(n->idx, cap * sizeof *p);
    if (!p) return sg_err_set(SG_ENOMEM, "ps sparse: %zu coordinates", cap);
    n->idx = p;
    n->cap = cap;
  }
}

int ps_needs_all(const ps_needs_t *n) { return !n || n->all; }

const uint32_t *ps_needs_idx(const ps_needs_t *n, size_t *count) {
  *count = n->n;
  return n->idx;
}

int64_t ps_needs_for_step(const ps_needs_t *n) { return n->step; }

static size_t lower_bound(const uint32_t *a, size_t n, uint64_t v) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

uint64_t ps_needs_shard(const ps_needs_t *n, size_t off, size_t cnt, uint32_t *idx,
                        size_t *first) {
  if (n->all) {
    for (size_t i = 0; i < cnt; i++) idx[i] = (uint32_t)i;
    *first = off;
    return cnt;
  }
  size_t a = lower_bound(n->idx, n->n, off), b = lower_bound(n->idx, n->n, (uint64_t)off + cnt);
  for (size_t j = a; j < b; j++) idx[j - a] = (uint32_t)(n->idx[j] - off);
  *first = a;
  return b - a;
}
