/* thread_ranks.c - see thread_ranks.h. */
#include "thread_ranks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <zmq.h>

#include "err.h"
#include "transport_new.h"

typedef struct tr_thread {
  const tr_group_t *g;
  void *zctx;
  int rank, rc;
  char group[32];
  char err[512];
} tr_thread_t;

static void *tr_main(void *p) {
  tr_thread_t *t = p;
  const tr_group_t *g = t->g;
  sg_comm_t *c = NULL;
  sg_zmq_cfg_t zc = {.rank = t->rank, .size = g->n,
                     .deadline_s = g->deadline_s > 0 ? g->deadline_s : 20,
                     .scheme = "inproc", .group = t->group, .zctx = t->zctx};
  int rc = sg_comm_zmq_new(&c, &zc);
  if (rc == 0) rc = g->fn(c, (char *)g->args + (size_t)t->rank * g->stride);
  if (rc < 0) snprintf(t->err, sizeof t->err, "%s [%s]", sg_err_msg(), sg_err_trace());
  sg_comm_destroy(&c);
  t->rc = rc;
  return NULL;
}

/* Join the first `started` threads; the first failure's code and message. */
static int tr_join(tr_group_t *g, tr_thread_t *t, pthread_t *th, int started) {
  int rc = 0;
  for (int r = 0; r < started; r++) {
    pthread_join(th[r], NULL);
    if (t[r].rc >= 0) continue;
    fprintf(stderr, "%s rank %d: %s\n", g->what ? g->what : "", r, t[r].err);
    if (rc == 0) {
      rc = t[r].rc;
      snprintf(g->err, sizeof g->err, "rank %d: %.480s", r, t[r].err);
    }
  }
  return rc;
}

int tr_run(tr_group_t *g) {
  static atomic_int serial; /* a fresh inproc group name per run */
  int s = atomic_fetch_add(&serial, 1), started = 0, rc = 0;
  /* A context per group: zmq_ctx_term() waits until every socket of the
   * group is closed (a shared one runs into ZMQ_MAX_SOCKETS). */
  void *zctx = zmq_ctx_new();
  tr_thread_t *t = calloc((size_t)(g->n > 0 ? g->n : 1), sizeof *t);
  pthread_t *th = calloc((size_t)(g->n > 0 ? g->n : 1), sizeof *th);
  g->err[0] = '\0';
  if (!zctx || !t || !th) rc = sg_err_set(SG_ENOMEM, "thread ranks: out of memory");
  for (int r = 0; rc == 0 && r < g->n; r++) {
    t[r] = (tr_thread_t){.g = g, .zctx = zctx, .rank = r};
    snprintf(t[r].group, sizeof t[r].group, "tr%d", s);
    if (pthread_create(&th[r], NULL, tr_main, &t[r]) != 0)
      rc = sg_err_set(SG_EIO, "thread ranks: cannot start rank %d", r);
    else
      started++;
  }
  int jrc = tr_join(g, t, th, started);
  if (rc == 0) rc = jrc;
  if (zctx) zmq_ctx_term(zctx);
  free(t);
  free(th);
  return rc;
}
