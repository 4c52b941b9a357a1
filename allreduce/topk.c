/* topk.c - see topk.h. */
#include "topk.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "allreduce.h"
#include "err.h"
#include "msgbuf.h"
#include "topk_select.h"

typedef sg_topk_pair_t pair_t;

struct sg_topk {
  sg_comm_t *c;
  size_t count, k;
  float *resid; /* error feedback: accumulated, not yet sent */
  float *mag;   /* scratch: |buf + resid| for the selection */
  pair_t *all;  /* N blocks of k pairs; block r is rank r's */
};

int sg_topk_new(sg_topk_t **out, sg_comm_t *c, size_t count, double ratio) {
  if (!(ratio > 0 && ratio <= 1) || count == 0 || count > UINT32_MAX)
    return sg_err_set(SG_EINVAL, "topk: ratio %g over %zu floats (want 0 < ratio <= 1)", ratio,
                      count);
  sg_topk_t *t = calloc(1, sizeof *t);
  if (!t) return SG_ENOMEM;
  t->c = c;
  t->count = count;
  t->k = sg_topk_k(ratio, count);
  /* vectors (the magnitudes read in the burst that writes them), folded
   * under compute: modeled (core/msgbuf.h).  The pairs are folded too:
   * of its own, every rank would hold N blocks of k pairs, N^2 k pairs
   * per simulator (N = 256 at 64 MB: 83 GB), which harness/run/admit.c
   * counts as folded.  Folded, a block may hold another rank's pairs,
   * whose indices are as valid (every rank writes only indices below
   * count, and sg_topk_run checks each before it adds it): the values
   * are wrong, which a modeled run never reads. */
  t->resid = sg_fold_alloc(count * sizeof *t->resid);
  t->mag = sg_fold_alloc(count * sizeof *t->mag);
  t->all = sg_fold_alloc((size_t)c->size * t->k * sizeof *t->all);
  if (!t->resid || !t->mag || !t->all) {
    sg_topk_destroy(&t);
    return sg_err_set(SG_ENOMEM, "topk: no memory for %zu floats", count);
  }
  *out = t;
  return SG_OK;
}

/* Ring allgather of the N blocks: at step s send block r - s, receive
 * block r - s - 1 (mod N), as the ring allreduce's allgather. */
static int allgather(sg_topk_t *t) {
  int n = t->c->size, r = t->c->rank, left = (r + n - 1) % n, right = (r + 1) % n;
  size_t bytes = t->k * sizeof(pair_t);
  for (int s = 0; s < n - 1; s++) {
    pair_t *snd = t->all + (size_t)((r - s + n) % n) * t->k;
    pair_t *rcv = t->all + (size_t)((r - s - 1 + 2 * n) % n) * t->k;
    sg_status_t st;
    SG_CHECK(sg_sendrecv(t->c, right, SG_AR_TAG_TOPK + s, snd, bytes, left, SG_AR_TAG_TOPK + s,
                         rcv, bytes, &st));
    /* a short block would leave the previous step's pairs in its tail */
    if (st.bytes != bytes)
      return sg_err_set(SG_EPROTO, "topk: rank %d sent %zu B, a block is %zu B", left, st.bytes,
                        bytes);
  }
  return SG_OK;
}

int sg_topk_run(sg_topk_t *t, float *buf) {
  int n = t->c->size;
  /* acc = buf + resid; my block <- its k largest |acc|; resid <- the rest */
  sg_topk_select(buf, t->resid, t->mag, t->count, t->k, t->all + (size_t)t->c->rank * t->k);
  SG_CHECK(allgather(t));
  memset(buf, 0, t->count * sizeof *buf);
  for (int r = 0; r < n; r++) /* rank order: the same bits everywhere */
    for (size_t j = 0; j < t->k; j++) {
      const pair_t *p = &t->all[(size_t)r * t->k + j];
      if (p->idx >= t->count)
        return sg_err_set(SG_EPROTO, "topk: rank %d sent index %u of %zu", r, p->idx, t->count);
      buf[p->idx] += p->val;
    }
  return SG_OK;
}

void sg_topk_destroy(sg_topk_t **pt) {
  if (!pt || !*pt) return;
  sg_fold_free((*pt)->resid);
  sg_fold_free((*pt)->mag);
  sg_fold_free((*pt)->all);
  free(*pt);
  *pt = NULL;
}
