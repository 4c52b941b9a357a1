/* sg_cuda.h - the small C interface between sgdlab and its CUDA parts.
 *
 * One header per concern, all included here:
 *   sg_cuda_rt.h     the runtime, device vectors, the optimizer step
 *   sg_cuda_gemms.h  a step's GEMMs alone (bench step's bound)
 *   sg_cuda_wl.h     the workload on the device (gradient, evaluation)
 *   sg_cuda_comm.h   allreduce of device vectors (staged, device ring, NCCL)
 *
 * Built from core/cuda/cuda_*.c and cuda_kernels.cu when CMake finds a
 * CUDA toolkit (SG_HAVE_CUDA); otherwise cuda_none.c stands in, and every
 * call returns SG_EUNSUPPORTED "this build has no CUDA".  All device work
 * of a process runs on one stream; the functions return when their result
 * is ready unless they say otherwise.  Pointers named d* are device
 * memory.
 */
#ifndef SG_CUDA_H
#define SG_CUDA_H

#include "sg_cuda_comm.h"
#include "sg_cuda_gemms.h"
#include "sg_cuda_rt.h"
#include "sg_cuda_wl.h"

#endif
