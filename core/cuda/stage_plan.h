/* stage_plan.h - the host-staged schedule of a device vector's allreduce.
 *
 * A device buffer of `count` floats is reduced over the host transport in
 * chunks of `chunk` floats, through `slots` pinned host buffers of one
 * chunk each (slots = 2: double buffering).  Chunk c lives in slot
 * c % slots.  Three stages per chunk: copy down (device -> host, async),
 * reduce (the host allreduce of the chunk over the transport, blocking),
 * copy up (host -> device, async).  Pipelined over steps s = 0 .. nchunks:
 *
 *   step s:  down(s)            issued first, overlaps the reduce below;
 *                               ordered on the device after up(s - slots),
 *                               the slot's previous occupant
 *            wait down(s - 1),  then reduce(s - 1) on the host
 *            up(s - 1)          issued, overlaps the next step
 *   after the last step: wait for every up.
 *
 * Worked example, count 10, chunk 4, slots 2 (chunks 0:[0,4) 1:[4,8)
 * 2:[8,10)):
 *
 *   step 0:  down 0 -> slot 0
 *   step 1:  down 1 -> slot 1;   reduce 0 (slot 0);   up 0 <- slot 0
 *   step 2:  down 2 -> slot 0, after up 0;  reduce 1 (slot 1);  up 1
 *   step 3:                      reduce 2 (slot 0);   up 2
 *
 * Pieces instead of chunks (overlap with backprop, bucket_plan.h): the
 * same steps over a list of pieces of at most `chunk` floats each, in the
 * list's order; piece c carries the bucket it belongs to, and before the
 * down-copy of a bucket's first piece the down stream waits for that
 * bucket's event (ops->ready: backward has issued the op that completes
 * the bucket), so a copy never reads gradient that backward has not yet
 * written, while backward goes on with the layers below.
 *
 * The plan is plain C: sg_stage_run drives it through an ops table, the
 * CUDA layer (cuda_comm.c) and the CPU tests (tests/test_cuda_sched.c,
 * with copies that complete as late as allowed) alike. */
#ifndef SG_STAGE_PLAN_H
#define SG_STAGE_PLAN_H

#include <stddef.h>

/* A piece of a pieces plan: floats [off, off+len) of bucket `bucket`. */
typedef struct sg_stage_piece {
  size_t off, len;
  long bucket;
} sg_stage_piece_t;

typedef struct sg_stage_plan {
  size_t count;   /* floats in the device buffer */
  size_t chunk;   /* floats per chunk (the last one may be shorter) */
  size_t nchunks; /* ceil(count / chunk); 0 when count == 0 (pieces: their number) */
  int slots;      /* pinned host buffers of `chunk` floats, >= 2 */
  int plant_bug;  /* tests only: 1 = one up-copy goes to the wrong chunk;
                     2 = the first bucket's ready wait is left out */
  const sg_stage_piece_t *pieces; /* NULL: chunks of `chunk` floats */
} sg_stage_plan_t;

/* What step s does, in this order: -1 = nothing. */
typedef struct sg_stage_step {
  long down;       /* chunk copied device -> slot(down) */
  long down_after; /* ... ordered on the device after the up-copy of this chunk */
  long reduce;     /* chunk reduced on the host, once its down-copy is complete */
  long up;         /* chunk copied slot(up) -> device, after its reduce */
  long up_to;      /* device chunk the up-copy writes (== up unless the bug is planted) */
} sg_stage_step_t;

/* SG_EINVAL for chunk 0 or slots < 2. */
int sg_stage_plan(sg_stage_plan_t *p, size_t count, size_t chunk, int slots);
/* nchunks + 1 steps, or 0 when there is nothing to reduce. */
/* A plan over npieces pieces of at most `chunk` floats each (the caller
 * keeps `pieces`); count = the highest end of a piece.  SG_EINVAL for a
 * longer piece, chunk 0 or slots < 2. */
int sg_stage_plan_pieces(sg_stage_plan_t *p, const sg_stage_piece_t *pieces, size_t npieces,
                         size_t chunk, int slots);
size_t sg_stage_nsteps(const sg_stage_plan_t *p);
void sg_stage_step(const sg_stage_plan_t *p, size_t s, sg_stage_step_t *out);
static inline size_t sg_stage_off(const sg_stage_plan_t *p, long c) {
  return p->pieces ? p->pieces[c].off : (size_t)c * p->chunk;
}
static inline size_t sg_stage_len(const sg_stage_plan_t *p, long c) {
  if (p->pieces) return p->pieces[c].len;
  size_t off = sg_stage_off(p, c);
  return p->count - off < p->chunk ? p->count - off : p->chunk;
}
static inline int sg_stage_slot(const sg_stage_plan_t *p, long c) { return (int)((size_t)c % (size_t)p->slots); }

/* The stages, as the executor provides them.  Offsets and lengths are in
 * floats of the device buffer; a slot holds one chunk. */
typedef struct sg_stage_ops {
  void *ctx;
  /* async copy device[off, off+len) -> slot; after_up >= 0: start it only
   * once the up-copy of chunk after_up (from the same slot) is done */
  int (*down)(void *ctx, int slot, size_t off, size_t len, long after_up);
  int (*wait_down)(void *ctx, int slot);                     /* host blocks */
  int (*reduce)(void *ctx, int slot, size_t len);            /* host, blocking */
  int (*up)(void *ctx, int slot, size_t off, size_t len, long chunk); /* async */
  int (*finish)(void *ctx);                                  /* every up done */
  float *(*slot)(void *ctx, int slot); /* one-way runs: the slot's host memory */
  /* pieces plans: the down stream's next copies wait for bucket's event */
  int (*ready)(void *ctx, long bucket);
} sg_stage_ops_t;

/* Run the plan's steps through ops. */
int sg_stage_run(const sg_stage_plan_t *p, const sg_stage_ops_t *ops);

/* ---- one way: a device replica's pushes and pulls ----------------------
 * The same plan with one half of the copies, for an engine whose protocol
 * moves a device vector one way (a ps worker's gradient down, the
 * parameters it pulls up).  A run covers `count` floats of a host vector
 * `host` and the device vector bound to ops, chunk by chunk:
 *
 *   SG_STAGE_DOWN  step s: down(s) into its slot (async); wait down(s-1),
 *                  copy the slot to host[off, off+len).  No up-copies:
 *                  the host has read a slot before the plan's next down
 *                  into it is issued (slots >= 2), so down needs no
 *                  device-side ordering.
 *   SG_STAGE_UP    step s: down(s) copies nothing but keeps its ordering
 *                  (after up(s - slots), the slot's previous occupant);
 *                  wait for it, copy host[off, off+len) into the slot,
 *                  up(s-1) (async).  The host writes a slot only once the
 *                  up-copy that read it is done.
 *
 * A cursor runs the steps on demand: sg_stage_until(c, hi) returns once
 * host[0, hi) is on the host (DOWN: what the engine may send) or issued
 * (UP), so the copy of chunk c+1 runs while the engine sends chunk c.
 * plant (tests only): 1 = DOWN reads a slot without waiting for its copy;
 * 2 = UP issues the copy of a chunk before the host filled its slot. */
enum { SG_STAGE_DOWN = 0, SG_STAGE_UP = 1 };
typedef struct sg_stage_cursor {
  sg_stage_plan_t plan;
  const sg_stage_ops_t *ops;
  int dir, plant;
  float *host;
  size_t step, nsteps; /* next step to run, of nsteps */
  size_t done;         /* floats of host[] complete (DOWN) or issued (UP) */
} sg_stage_cursor_t;

int sg_stage_begin(sg_stage_cursor_t *c, const sg_stage_plan_t *p, const sg_stage_ops_t *ops,
                   int dir, float *host);
int sg_stage_until(sg_stage_cursor_t *c, size_t hi);
/* Every remaining step, then ops->finish: the whole vector has arrived. */
int sg_stage_end(sg_stage_cursor_t *c);

#endif
