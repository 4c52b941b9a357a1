/* native.c - the MPI library's own allreduce, as the baseline.
 *
 * MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM) on the
 * comm's MPI communicator.  Open MPI chooses the algorithm (its `tuned`
 * component picks by message size and N); bytes per rank are whatever that
 * algorithm moves, at least the ring's 2K(N-1)/N.
 *
 * Deadline: a blocking MPI_Allreduce cannot time out.  A rank that dies
 * makes mpirun end the job, and a silent rank is caught by the harness's
 * watchdog (no record for deadline + 30 s).  SG_NATIVE_NONBLOCKING=1
 * selects MPI_Iallreduce completed by an MPI_Test loop instead, which
 * returns SG_ETIMEOUT after comm->deadline_s -- not the default because
 * Open MPI's nonblocking collectives (libnbc) are a different, slower
 * implementation (measured here: 0.9 vs 3.6-4.8 GB/s busbw at 16-256 MiB,
 * N = 2), which would make an unfair baseline.
 *
 * This is the one file of the allreduce engine that calls MPI directly
 *; it needs the MPI transport.
 */
#include <limits.h>
#include "sg_mpi.h"
#ifdef SG_SMPI
#include <xbt/config.h>
#endif

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
#ifdef SG_SMPI
  /* SMPI's collectives send these messages, not the transport: detached
   * below simulate.eager again, undoing the transport's deferred sends
   * (core/transport_mpi.c, "Deferred sends"; the whole simulation's) */
  sg_cfg_set_int("smpi/send-is-detached-thresh", sg_cfg_get_int("smpi/async-small-thresh"));
  int blocking = 1; /* simulated: no polling (core/transport_mpi.c, MQ_BLOCKING) */
#else
  int blocking = !o || !o->native_nonblocking;
#endif
  if (blocking) {
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
    .summary = "the MPI library's own MPI_Allreduce (baseline; transport mpi only)",
    .allreduce = sg_allreduce_native,
    .needs = native_needs,
    .needs_mpi = 1,
};
