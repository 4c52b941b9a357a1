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
  /* update: sharded (ring_prims.h): x = x + in, nothing sent (the
   * owner's sum, before its update) */
  SG_PRIM_RECV_REDUCE_COPY,
  /* update: sharded, a step of the schedule only (never an element
   * operation): recvReduceCopy, the owner's update, a send of the
   * updated parameters (sg_dring_ops_t.owner) */
  SG_PRIM_OWNER,
};

/* Chunk c of n over count floats: the first count % n chunks get one more
 * (the host ring's split, allreduce.h). */
static inline SG_HD size_t sg_prim_chunk_off(size_t count, int n, int c) {
  size_t base = count / (size_t)n, rem = count % (size_t)n;
  return (size_t)c * base + ((size_t)c < rem ? (size_t)c : rem);
}
static inline SG_HD size_t sg_prim_chunk_len(size_t count, int n, int c) {
  return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

static inline SG_HD int sg_prim_mod(int a, int n) { return ((a % n) + n) % n; }

/* Primitive k (0 .. 2N-2) of rank r in a ring of n: its op and chunk
 * (the table in ring_prims.h). */
static inline SG_HD void sg_ring_prim_at(int n, int r, int k, int *op, int *chunk) {
  if (k == 0) {
    *op = SG_PRIM_SEND;
    *chunk = sg_prim_mod(r - 1, n);
  } else if (k < n - 1) {
    *op = SG_PRIM_RECV_REDUCE_SEND;
    *chunk = sg_prim_mod(r - 1 - k, n);
  } else if (k == n - 1) {
    *op = SG_PRIM_RECV_REDUCE_COPY_SEND;
    *chunk = r;
  } else if (k < 2 * n - 2) {
    *op = SG_PRIM_RECV_COPY_SEND;
    *chunk = sg_prim_mod(r - k + n - 1, n);
  } else {
    *op = SG_PRIM_RECV;
    *chunk = sg_prim_mod(r + 1, n);
  }
}

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
  case SG_PRIM_RECV_REDUCE_COPY: x[i] = x[i] + in[i]; break;
  default: x[i] = in[i]; break; /* SG_PRIM_RECV */
  }
}

#endif
