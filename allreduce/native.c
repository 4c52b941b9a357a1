/* native.c - the MPI library's own allreduce, as the baseline.
 *
 * MPI_Iallreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM) on the
 * comm's MPI communicator, completed by an MPI_Test loop so that a silent
 * peer becomes SG_ETIMEOUT after comm->deadline_s (a blocking
 * MPI_Allreduce would hang).  Open MPI chooses the algorithm (its `tuned`
 * component picks by message size and N; libnbc for the nonblocking
 * call); bytes per rank are whatever that algorithm moves, at least the
 * ring's 2K(N-1)/N.  Set SG_NATIVE_BLOCKING=1 to time the blocking call
 * instead (no deadline).
 *
 * This is the one file of the allreduce engine that calls MPI directly
 * (DESIGN.md 2); it needs the MPI transport.
 */
#include <limits.h>
#include <mpi.h>

#include "allreduce.h"
#include "clock.h"
#include "err.h"

static void native_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                         size_t *reqs) {
  (void)n;
  (void)count;
  (void)o;
  *scratch = 0;
  *reqs = 0;
}

int sg_allreduce_native(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  MPI_Comm *mc = sg_comm_mpi_handle(c);
  if (!mc)
    return sg_err_set(SG_EUNSUPPORTED, "allreduce native needs transport mpi (this comm is %s)",
                      c->ops->name);
  if (count > INT_MAX)
    return sg_err_set(SG_ERANGE, "allreduce native: %zu floats exceed MPI's int count", count);
  if (count == 0 || c->size == 1) return SG_OK;
  if (o && o->native_blocking) {
    int mrc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, *mc);
    if (mrc != MPI_SUCCESS) return sg_err_set(SG_EPEER, "MPI_Allreduce failed (%d)", mrc);
    return SG_OK;
  }
  MPI_Request req;
  int mrc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, *mc, &req);
  if (mrc != MPI_SUCCESS) return sg_err_set(SG_EPEER, "MPI_Iallreduce failed (%d)", mrc);
  double t0 = sg_now();
  for (;;) {
    int done = 0;
    mrc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (mrc != MPI_SUCCESS) return sg_err_set(SG_EPEER, "MPI_Test failed (%d)", mrc);
    if (done) return SG_OK;
    if (sg_now() - t0 > c->deadline_s)
      return sg_err_set(SG_ETIMEOUT,
                        "allreduce native: rank %d (%s) waited %.1f s for the other ranks",
                        c->rank, c->hosts ? c->hosts[c->rank] : "?", sg_now() - t0);
  }
}

const sg_ar_algo_t sg_ar_native = {
    .name = "native",
    .summary = "the MPI library's own MPI_Iallreduce (baseline; transport mpi only)",
    .allreduce = sg_allreduce_native,
    .needs = native_needs,
    .needs_mpi = 1,
};
