/* stage_plan.c - the host-staged chunk schedule (see stage_plan.h). */
#include "stage_plan.h"

#include <string.h>

#include "err.h"

int sg_stage_plan(sg_stage_plan_t *p, size_t count, size_t chunk, int slots) {
  if (chunk == 0 || slots < 2)
    return sg_err_set(SG_EINVAL, "staging: chunk %zu floats, %d slots (need >= 1 and >= 2)",
                      chunk, slots);
  p->count = count;
  p->chunk = chunk;
  p->nchunks = count / chunk + (count % chunk != 0);
  p->slots = slots;
  p->plant_bug = 0;
  p->pieces = NULL;
  return SG_OK;
}

int sg_stage_plan_pieces(sg_stage_plan_t *p, const sg_stage_piece_t *pieces, size_t npieces,
                         size_t chunk, int slots) {
  size_t end = 0;
  SG_CHECK(sg_stage_plan(p, 0, chunk, slots));
  for (size_t i = 0; i < npieces; i++) {
    if (pieces[i].len > chunk)
      return sg_err_set(SG_EINVAL, "staging: piece %zu holds %zu floats, more than a slot (%zu)",
                        i, pieces[i].len, chunk);
    if (pieces[i].off + pieces[i].len > end) end = pieces[i].off + pieces[i].len;
  }
  p->count = end;
  p->nchunks = npieces;
  p->pieces = pieces;
  return SG_OK;
}

/* Pieces plans: before the first piece of a bucket, the down stream waits
 * for the bucket's event (the planted bug leaves the first one out). */
static int wait_ready(const sg_stage_plan_t *p, const sg_stage_ops_t *ops, long c) {
  if (!p->pieces || !ops->ready) return SG_OK;
  const long b = p->pieces[c].bucket;
  if (c > 0 && p->pieces[c - 1].bucket == b) return SG_OK;
  if (p->plant_bug == 2 && b == p->pieces[0].bucket) return SG_OK;
  return ops->ready(ops->ctx, b);
}

size_t sg_stage_nsteps(const sg_stage_plan_t *p) { return p->nchunks ? p->nchunks + 1 : 0; }

void sg_stage_step(const sg_stage_plan_t *p, size_t s, sg_stage_step_t *out) {
  const long n = (long)p->nchunks, k = p->slots, c = (long)s;
  out->down = c < n ? c : -1;
  out->down_after = c < n && c >= k ? c - k : -1;
  out->reduce = c >= 1 && c - 1 < n ? c - 1 : -1;
  out->up = out->reduce;
  out->up_to = out->up;
  /* Planted bug (tests only): the second chunk's result lands on the
   * first chunk's place. */
  if (p->plant_bug == 1 && out->up == 1) out->up_to = 0;
}

int sg_stage_run(const sg_stage_plan_t *p, const sg_stage_ops_t *ops) {
  const size_t steps = sg_stage_nsteps(p);
  for (size_t s = 0; s < steps; s++) {
    sg_stage_step_t st;
    sg_stage_step(p, s, &st);
    if (st.down >= 0) {
      SG_CHECK(wait_ready(p, ops, st.down));
      SG_CHECK(ops->down(ops->ctx, sg_stage_slot(p, st.down), sg_stage_off(p, st.down),
                         sg_stage_len(p, st.down), st.down_after));
    }
    if (st.reduce >= 0) {
      const int slot = sg_stage_slot(p, st.reduce);
      SG_CHECK(ops->wait_down(ops->ctx, slot));
      SG_CHECK(ops->reduce(ops->ctx, slot, sg_stage_len(p, st.reduce)));
    }
    if (st.up >= 0) {
      /* the planted bug may target a shorter chunk: never past it */
      size_t len = sg_stage_len(p, st.up), to = sg_stage_len(p, st.up_to);
      SG_CHECK(ops->up(ops->ctx, sg_stage_slot(p, st.up), sg_stage_off(p, st.up_to),
                       len < to ? len : to, st.up_to));
    }
  }
  return steps ? ops->finish(ops->ctx) : SG_OK;
}

/* ---- one way (stage_plan.h) ---------------------------------------------- */

int sg_stage_begin(sg_stage_cursor_t *c, const sg_stage_plan_t *p, const sg_stage_ops_t *ops,
                   int dir, float *host) {
  if (!ops->slot || (dir != SG_STAGE_DOWN && dir != SG_STAGE_UP))
    return sg_err_set(SG_EINVAL, "staging: a one-way run needs the slots' memory and a direction");
  *c = (sg_stage_cursor_t){.plan = *p, .ops = ops, .dir = dir, .plant = p->plant_bug,
                           .host = host, .nsteps = sg_stage_nsteps(p)};
  return SG_OK;
}

/* Step s of a one-way run (stage_plan.h). */
static int oneway_step(sg_stage_cursor_t *c) {
  const sg_stage_plan_t *p = &c->plan;
  const sg_stage_ops_t *o = c->ops;
  const int down = c->dir == SG_STAGE_DOWN;
  sg_stage_step_t st;
  sg_stage_step(p, c->step++, &st);
  if (st.down >= 0)
    SG_CHECK(o->down(o->ctx, sg_stage_slot(p, st.down), sg_stage_off(p, st.down),
                     down ? sg_stage_len(p, st.down) : 0, down ? -1 : st.down_after));
  if (st.reduce < 0) return SG_OK;
  const int slot = sg_stage_slot(p, st.reduce);
  const size_t off = sg_stage_off(p, st.reduce), len = sg_stage_len(p, st.reduce);
  float *h = o->slot(o->ctx, slot);
  if (!down && c->plant == 2) /* planted: the copy up before the slot is filled */
    SG_CHECK(o->up(o->ctx, slot, off, len, st.up));
  if (!(down && c->plant == 1)) SG_CHECK(o->wait_down(o->ctx, slot));
  if (down) memcpy(c->host + off, h, len * sizeof *h);
  else memcpy(h, c->host + off, len * sizeof *h);
  if (!down && c->plant != 2) SG_CHECK(o->up(o->ctx, slot, off, len, st.up));
  c->done = off + len;
  return SG_OK;
}

int sg_stage_until(sg_stage_cursor_t *c, size_t hi) {
  if (hi > c->plan.count) hi = c->plan.count;
  while (c->done < hi && c->step < c->nsteps) SG_CHECK(oneway_step(c));
  return SG_OK;
}

int sg_stage_end(sg_stage_cursor_t *c) {
  if (c->step >= c->nsteps && c->nsteps == 0) return SG_OK;
  while (c->step < c->nsteps) SG_CHECK(oneway_step(c));
  c->nsteps = 0; /* ended: a second end does nothing */
  return c->ops->finish(c->ops->ctx);
}
