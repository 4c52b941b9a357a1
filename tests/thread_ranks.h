/* thread_ranks.h - ranks as threads: a group of n threads, each with a
 * ZeroMQ inproc comm of its own rank, runs one function.  The unit tests
 * of the transport and of every engine use it to run a whole engine in
 * one process. */
#ifndef SG_THREAD_RANKS_H
#define SG_THREAD_RANKS_H

#include <stddef.h>

#include "transport.h"

/* One rank's body: 0 or a negative SG_E* with the message set. */
typedef int (*tr_rank_fn)(sg_comm_t *c, void *arg);

typedef struct tr_group {
  int n;            /* ranks (threads) */
  double deadline_s; /* per blocking wait of every comm; 0 = 20 s */
  tr_rank_fn fn;
  void *args;       /* rank r gets (char *)args + r * stride */
  size_t stride;
  const char *what; /* names the case in the error lines, e.g. "ring N=4" */
  char err[512];    /* out: the first failed rank's message */
} tr_group_t;

/* Start the n threads on a fresh zmq context and group, join them all.
 * Returns 0, or the first failed rank's code; every failed rank's message
 * goes to stderr as "WHAT rank R: message [trace]". */
int tr_run(tr_group_t *g);

#endif
