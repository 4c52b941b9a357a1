/* stage_plan.c - the host-staged chunk schedule (see stage_plan.h). */
#include "stage_plan.h"

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
  return SG_OK;
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
  if (p->plant_bug && out->up == 1) out->up_to = 0;
}

int sg_stage_run(const sg_stage_plan_t *p, const sg_stage_ops_t *ops) {
  const size_t steps = sg_stage_nsteps(p);
  for (size_t s = 0; s < steps; s++) {
    sg_stage_step_t st;
    sg_stage_step(p, s, &st);
    if (st.down >= 0)
      SG_CHECK(ops->down(ops->ctx, sg_stage_slot(p, st.down), sg_stage_off(p, st.down),
                         sg_stage_len(p, st.down), st.down_after));
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
