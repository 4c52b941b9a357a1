/* msgbuf.h - memory a simulation may fold, and message buffers.
 *
 * In a simulation with compute: modeled (sgdlab-rank-smpi, docs/simulate.md)
 * nothing is computed and nobody reads the values of the parameters,
 * gradients, optimizer state and the engines' dense buffers: SMPI can
 * fold such a payload, one block of memory shared by all simulated ranks,
 * so that a thousand ranks need not hold a thousand copies.  Folding is
 * opt-in: only memory from sg_fold_alloc and the payloads of
 * sg_msg_malloc_framed(..., fold = 1) are folded.  Every other allocation
 * (malloc, calloc: smpicc's macros fold nothing, the simulator is not
 * given smpi/auto-shared-malloc-thresh) stays the rank's own, so a
 * header, an index, a counter or a request array keeps its values by
 * construction.
 *
 * sg_fold_enable(on): whether this process folds; the rank program sets
 * it from _sim_step_s (compute: modeled) before the engine runs.  Under
 * SMPI each simulated rank has its own copy of the flag (privatized
 * globals), and all set the same value.  Outside a simulation it has no
 * effect.
 *
 * sg_fold_alloc(bytes): a payload buffer.  Folded (SG_SMPI, folding on,
 * bytes >= SG_MSG_FOLD_MIN): a fresh SMPI shared block
 * (smpi_shared_malloc_partial over the whole buffer) whose contents are
 * whatever any rank last wrote there: never read a value back from it.
 * Otherwise calloc: zeroed.  NULL when out of memory.  Use it exactly for
 * payloads nobody reads under compute: modeled (what harness/run/admit.c
 * counts as params + grad + optim + engine less message buffers).
 * Free with sg_fold_free (never (free)(): a folded block is a memory map,
 * which SMPI's free, the free() macro of smpicc, unmaps; SimGrid 3.32's
 * smpi_shared_free).
 *
 * sg_msg_malloc_framed is a buffer of messages (frames) laid `stride`
 * bytes apart from its start, each a header of `hdr` bytes and then its
 * payload (stride >= bytes: one message).  With `fold` set, under SG_SMPI
 * with folding on, every payload is folded across the simulated ranks and
 * every header stays the rank's own (SMPI_PARTIAL_SHARED_MALLOC): a
 * message still moves its full length through the simulated network, but
 * SMPI copies only the bytes that are private at both ends (the header),
 * and the payload holds no memory per rank.  A rank's own part is the
 * pages its headers touch (one or two per frame), and each frame costs
 * the process a memory map for its header and one per block of 16 MiB
 * (smpi/shared-malloc-blocksize) its payload begins (vm.max_map_count;
 * harness/run/admit.c counts them).  fold is for payloads nobody reads
 * (dense gradients and parameters under compute: modeled); a payload that
 * is parsed (sparse indices) must not be folded.  Frames whose payload is
 * under SG_MSG_FOLD_MIN stay whole (a few pages saved, two maps spent).
 * Without fold, or outside a simulation, it is malloc(bytes).  Free it
 * with sg_fold_free, never free(): the rank keeps a table of its folded
 * buffers (sg_fold_private), and an entry left behind by free() would
 * name a later allocation at the same address folded, so a deferred
 * send from it would stage only part of its bytes.
 *
 * sg_fold_registered(): how many of this rank's allocations the table
 * holds (0 outside a simulation); 0 once every one is freed with
 * sg_fold_free (the rank program checks it under a test's request).
 */
#ifndef SG_MSGBUF_H
#define SG_MSGBUF_H

#include <stdlib.h>

#define SG_MSG_FOLD_MIN ((size_t)65536)

void sg_fold_enable(int on);
int sg_fold_enabled(void);
void *sg_fold_alloc(size_t bytes);
void sg_fold_free(void *p);

void *sg_msg_malloc_framed(size_t bytes, size_t stride, size_t hdr, int fold);
size_t sg_fold_registered(void);

/* The parts of [buf, buf + len) that are the rank's own where buf lies in
 * a folded allocation of this rank (sg_fold_alloc, or a framed buffer
 * with folded payloads): up to max ranges [at[2i], at[2i+1]) as offsets
 * from buf, in order; returns how many (0: all of it is folded).  -1:
 * buf is not in one, or the range runs past it, or it has more than max
 * own parts: all of it is to be taken as the rank's own.  A deferred
 * send under compute: modeled stages only these parts (core/share.h). */
int sg_fold_private(const void *buf, size_t len, size_t *at, int max);
/* The same for [a, a + len) of a buffer of `bytes` laid out as
 * sg_msg_malloc_framed(bytes, stride, hdr, 1) folds it (stride 0: all of
 * it folded), whether or not it was: the rule sg_fold_private applies. */
int sg_frames_private(size_t bytes, size_t stride, size_t hdr, size_t a, size_t len, size_t *at,
                      int max);

#endif
