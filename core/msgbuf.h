/* msgbuf.h - memory a message is built in or received into.
 *
 * In a simulation with compute: modeled (sgdlab-rank-smpi, docs/simulate.md)
 * SMPI folds every malloc/calloc of 64 KiB or more into one buffer shared
 * by all simulated ranks (smpi/auto-shared-malloc-thresh): right for the
 * parameter and gradient payload, whose values a timing study does not
 * read, wrong for a buffer holding a message header, which another rank
 * would overwrite before it is parsed (a ps push then read "bad magic 0").
 *
 * sg_msg_malloc and sg_msg_calloc are never folded: the parenthesised name
 * skips the function-like malloc/calloc macros of smpicc's smpi_helpers.h
 * and calls the C library; SMPI's free() releases such memory like any
 * unshared block.  Outside a simulation they are malloc and calloc.
 *
 * sg_msg_malloc_framed is a buffer of messages (frames) laid `stride`
 * bytes apart from its start, each a header of `hdr` bytes and then its
 * payload (stride >= bytes: one message).  With `fold` set, under SG_SMPI,
 * every payload is folded across the simulated ranks and every header
 * stays the rank's own (SMPI_PARTIAL_SHARED_MALLOC): a message still
 * moves its full length through the simulated network, but SMPI copies
 * only the bytes that are private at both ends (the header), and the
 * payload holds no memory per rank.  A rank's own part is the pages its
 * headers touch (one or two per frame), and each frame costs the process
 * about two memory maps (vm.max_map_count; harness/run/admit.c counts
 * them).  fold is for payloads nobody reads (dense gradients and
 * parameters under compute: modeled); a payload that is parsed (sparse
 * indices) must not be folded.  Frames whose payload is under
 * SG_MSG_FOLD_MIN stay whole (a few pages saved, two maps spent).
 * Without fold, or outside a simulation, it is sg_msg_malloc(bytes).
 * Free any of them with free().
 */
#ifndef SG_MSGBUF_H
#define SG_MSGBUF_H

#include <stdlib.h>

#define SG_MSG_FOLD_MIN ((size_t)65536)

static inline void *sg_msg_malloc(size_t bytes) { return (malloc)(bytes); }

static inline void *sg_msg_calloc(size_t n, size_t size) { return (calloc)(n, size); }

void *sg_msg_malloc_framed(size_t bytes, size_t stride, size_t hdr, int fold);

#endif
