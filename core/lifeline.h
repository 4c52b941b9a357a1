/* lifeline.h - a rank ends itself when its harness is gone.
 *
 * Local ranks and mpirun die with the harness (PR_SET_PDEATHSIG,
 * harness/run/launch.c), but ranks started by mpirun are mpirun's children,
 * on this host or another.  Their link to the harness is the records
 * connection (records.h), so a small thread watches that socket
 * (zmq_socket_monitor): once it has connected, a disconnection means the
 * harness's end closed (the harness exited or was killed: the kernel
 * closes its sockets), and the rank writes one line on stderr
 *   "sgdlab-rank: rank 2: the harness is gone (records connection
 *    closed: ipc:///tmp/sgdlab-Ab12Cd/rec); exiting"
 * and exits with status SG_LIFELINE_EXIT at once, wherever the main
 * thread is (a training loop, a blocking MPI call).  A connection that
 * never comes up within SG_LIFELINE_CONNECT_S ends the rank the same way.
 *
 * Over tcp (a harness on another host) a vanished machine closes
 * nothing, so ZMTP heartbeats are turned on: a PING every
 * SG_LIFELINE_HEARTBEAT_IVL_MS, and no answer within
 * SG_LIFELINE_HEARTBEAT_TIMEOUT_MS drops the connection (and so the
 * rank).  Heartbeats are answered by the harness's zmq I/O thread, so a
 * harness busy committing records still answers; a harness stopped
 * (SIGSTOP, Ctrl-Z) for longer than the timeout ends its remote ranks.
 * Over ipc a stopped harness keeps its sockets: ranks wait.
 */
#ifndef SG_LIFELINE_H
#define SG_LIFELINE_H

#define SG_LIFELINE_CONNECT_S 30.0
#define SG_LIFELINE_HEARTBEAT_IVL_MS 2000
#define SG_LIFELINE_HEARTBEAT_TIMEOUT_MS 20000
#define SG_LIFELINE_EXIT 3

typedef struct sg_lifeline sg_lifeline_t;

/* Watch `sock` (a socket of context zctx, not yet connected) for its
 * connection to `endpoint` (for messages; also decides heartbeats: tcp).
 * Call before zmq_connect so the connection's first event is seen.
 * Caller owns the result; sg_lifeline_stop() before closing the socket. */
int sg_lifeline_start(sg_lifeline_t **out, void *zctx, void *sock, const char *endpoint,
                      int rank);
/* Stop watching (the rank is finishing: its own close is no death).
 * NULL-safe; nulls the pointer. */
void sg_lifeline_stop(sg_lifeline_t **l);

#endif
