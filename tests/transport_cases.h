/* transport_cases.h - the transport conformance suite.
 *
 * The same cases run on every transport: ranks as threads over ZeroMQ
 * inproc (test_transport_inproc.c), and as processes over ZeroMQ ipc/tcp
 * and over MPI (transport_rank.c, started by test_transport_proc.c).  Every
 * rank of a group calls tc_run_all() with its own comm; the cases are
 * collective (all ranks run them in the same order).
 */
#ifndef SG_TRANSPORT_CASES_H
#define SG_TRANSPORT_CASES_H

#include <stddef.h>

#include "transport.h"

/* Run every case; returns 0, or -1 with a message naming the case, the
 * rank and what was wrong in err. */
int tc_run_all(sg_comm_t *c, char *err, size_t errlen);

#endif
