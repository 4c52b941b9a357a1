/* msgbuf.h - memory a message is built in or received into.
 *
 * In a simulation with compute: modeled (sgdlab-rank-smpi, docs/simulate.md)
 * SMPI folds every malloc/calloc of 64 KiB or more into one buffer shared
 * by all simulated ranks (smpi/auto-shared-malloc-thresh): right for the
 * parameter and gradient payload, whose values a timing study does not
 * read, wrong for a buffer holding a message header, which another rank
 * would overwrite before it is parsed (a ps push then read "bad magic 0").
 * These two calls are never folded: the parenthesised name skips the
 * function-like malloc/calloc macros of smpicc's smpi_helpers.h and calls
 * the C library; SMPI's free() releases such memory like any unshared
 * block.  Outside a simulation they are malloc and calloc.
 */
#ifndef SG_MSGBUF_H
#define SG_MSGBUF_H

#include <stdlib.h>

static inline void *sg_msg_malloc(size_t bytes) { return (malloc)(bytes); }

static inline void *sg_msg_calloc(size_t n, size_t size) { return (calloc)(n, size); }

#endif
