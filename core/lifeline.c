/* lifeline.c - a rank ends itself when its harness is gone (lifeline.h). */
#include "lifeline.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "clock.h"
#include "err.h"

enum { POLL_MS = 100 }; /* how often the thread looks at its stop flag */

struct sg_lifeline {
  void *sock;     /* the watched socket (owned by the caller) */
  void *pair;     /* receives the monitor's events; the thread's */
  pthread_t thread;
  atomic_int stop;
  int rank;
  char endpoint[256];
};

static void die(const sg_lifeline_t *l, const char *why) {
  char line[512];
  int n = snprintf(line, sizeof line, "sgdlab-rank: rank %d: the harness is gone (%s %s); exiting\n",
                   l->rank, why, l->endpoint);
  /* write(2), not stdio: the main thread may hold stderr's lock */
  if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1)) {
  }
  _exit(SG_LIFELINE_EXIT);
}

/* One monitor event (two frames: uint16 event + uint32 value, then the
 * endpoint); its event number, or 0 when none could be read. */
static int read_event(void *pair) {
  zmq_msg_t m;
  uint16_t ev = 0;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, pair, ZMQ_DONTWAIT) >= (int)sizeof ev)
    memcpy(&ev, zmq_msg_data(&m), sizeof ev);
  int more = zmq_msg_more(&m);
  zmq_msg_close(&m);
  while (more) { /* the endpoint frame */
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, pair, ZMQ_DONTWAIT) < 0) more = 0;
    else more = zmq_msg_more(&m);
    zmq_msg_close(&m);
  }
  return ev;
}

static void *watch(void *arg) {
  sg_lifeline_t *l = arg;
  int connected = 0;
  double t0 = sg_now();
  while (!atomic_load(&l->stop)) {
    zmq_pollitem_t it = {.socket = l->pair, .events = ZMQ_POLLIN};
    if (zmq_poll(&it, 1, POLL_MS) > 0) {
      int ev = read_event(l->pair);
      if (atomic_load(&l->stop) || ev == ZMQ_EVENT_MONITOR_STOPPED) break;
      if (ev == ZMQ_EVENT_CONNECTED) connected = 1;
      else if (ev == ZMQ_EVENT_DISCONNECTED && connected) die(l, "records connection closed:");
    } else if (!connected && sg_now() - t0 > SG_LIFELINE_CONNECT_S) {
      char why[64];
      snprintf(why, sizeof why, "no records connection within %g s to", SG_LIFELINE_CONNECT_S);
      die(l, why);
    }
  }
  return NULL;
}

int sg_lifeline_start(sg_lifeline_t **out, void *zctx, void *sock, const char *endpoint,
                      int rank) {
  char addr[64];
  sg_lifeline_t *l = calloc(1, sizeof *l);
  if (!l) return SG_ENOMEM;
  l->sock = sock;
  l->rank = rank;
  snprintf(l->endpoint, sizeof l->endpoint, "%s", endpoint);
  if (!strncmp(endpoint, "tcp://", 6)) { /* a vanished host closes nothing */
    int ivl = SG_LIFELINE_HEARTBEAT_IVL_MS, tmo = SG_LIFELINE_HEARTBEAT_TIMEOUT_MS;
    zmq_setsockopt(sock, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(sock, ZMQ_HEARTBEAT_TIMEOUT, &tmo, sizeof tmo);
  }
  snprintf(addr, sizeof addr, "inproc://sgdlab-lifeline-%p", (void *)l);
  /* the PAIR connects before the watched socket does: no event is lost */
  int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_MONITOR_STOPPED;
  if (zmq_socket_monitor(sock, addr, events) < 0 ||
      !(l->pair = zmq_socket(zctx, ZMQ_PAIR)) || zmq_connect(l->pair, addr) < 0) {
    int rc = sg_err_set(SG_EIO, "records: watching the connection to the harness: %s",
                        zmq_strerror(errno));
    if (l->pair) zmq_close(l->pair);
    zmq_socket_monitor(sock, NULL, 0);
    free(l);
    return rc;
  }
  int e = pthread_create(&l->thread, NULL, watch, l);
  if (e) {
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(l->pair);
    free(l);
    return sg_err_set(SG_EIO, "records: starting the lifeline thread: %s", strerror(e));
  }
  *out = l;
  return SG_OK;
}

void sg_lifeline_stop(sg_lifeline_t **pl) {
  if (!pl || !*pl) return;
  sg_lifeline_t *l = *pl;
  atomic_store(&l->stop, 1);
  zmq_socket_monitor(l->sock, NULL, 0); /* wakes the thread (MONITOR_STOPPED) */
  pthread_join(l->thread, NULL);
  int zero = 0;
  zmq_setsockopt(l->pair, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(l->pair);
  free(l);
  *pl = NULL;
}
