/* sg_mpi.h - <mpi.h> for the project's files.
 *
 * Under SimGrid's smpicc (SG_SMPI) <mpi.h> pulls in SimGrid's C API,
 * whose names share the project's prefix: its `sg_comm_t` and `SG_OK`
 * would collide with transport.h's and err.h's.  Inside the include they
 * are renamed; nothing of that API is used here. */
#ifndef SG_SG_MPI_H
#define SG_SG_MPI_H

#ifdef SG_SMPI
#define sg_comm_t sg_simgrid_comm_t_
#define SG_OK SG_SIMGRID_OK_
#include <mpi.h>
#undef sg_comm_t
#undef SG_OK
#else
#include <mpi.h>
#endif

#endif
