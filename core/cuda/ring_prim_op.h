/* ring_prim_op.h - the ring primitives' element operation, shared by the
 * host twin (ring_prims.c, tests) and the CUDA kernel (cuda_kernels.cu);
 * plain C with no other dependency, so nvcc compiles it too. */
#ifndef SG_RING_PRIM_OP_H
#define SG_RING_PRIM_OP_H

#include <stddef.h>

#ifdef __CUDACC__
#define SG_HD __host__ __device__
#else
#define SG_HD
#endif

enum {
  SG_PRIM_SEND,
  SG_PRIM_RECV_REDUCE_SEND,
  SG_PRIM_RECV_REDUCE_COPY_SEND,
  SG_PRIM_RECV_COPY_SEND,
  SG_PRIM_RECV,
};

/* One element of a primitive; the host twin and the CUDA kernel both call
 * this.  out may be NULL for recv. */
static inline SG_HD void sg_prim_apply1(int op, float *x, const float *in, float *out, size_t i) {
  switch (op) {
  case SG_PRIM_SEND: out[i] = x[i]; break;
  case SG_PRIM_RECV_REDUCE_SEND: out[i] = x[i] + in[i]; break;
  case SG_PRIM_RECV_REDUCE_COPY_SEND: {
    float v = x[i] + in[i];
    x[i] = v;
    out[i] = v;
    break;
  }
  case SG_PRIM_RECV_COPY_SEND:
    x[i] = in[i];
    out[i] = in[i];
    break;
  default: x[i] = in[i]; break; /* SG_PRIM_RECV */
  }
}

#endif
