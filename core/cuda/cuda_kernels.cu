/* cuda_kernels.cu - the small kernels of the device workload and the
 * device ring; the matrix products are cuBLAS sgemm (cuda_model.c).
 * Each kernel mirrors a host loop named in cuda_impl.h. */
#include <float.h>

#include "cuda_impl.h"
#include "pring_plan.h"
#include "ring_prim_op.h"
#include "sgd_op.h"

namespace {

const int kThreads = 256;
const int kPringThreads = 512;

unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);
}

__global__ void fill_rows(float *Z, const float *b, size_t cnt, int out) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < cnt;
       i += (size_t)gridDim.x * blockDim.x)
    Z[i] = b[i % (size_t)out];
}

__global__ void relu(float *Z, size_t cnt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < cnt;
       i += (size_t)gridDim.x * blockDim.x)
    Z[i] = Z[i] > 0.0f ? Z[i] : 0.0f;
}

__global__ void relu_back(float *G, const float *A, size_t cnt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < cnt;
       i += (size_t)gridDim.x * blockDim.x)
    G[i] = A[i] > 0.0f ? G[i] : 0.0f;
}

/* log-sum-exp with m = max_c z_c, as model_softmax.c */
__global__ void xent(float *Z, const int32_t *y, int n, int C, float gscale, int want_grad,
                     double *row_loss, int *row_ok) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float *r = Z + (size_t)i * C;
  float m = r[0];
  int arg = 0;
  for (int c = 1; c < C; c++)
    if (r[c] > m) {
      m = r[c];
      arg = c;
    }
  const float zy = r[y[i]];
  float s = 0.0f;
  for (int c = 0; c < C; c++) {
    r[c] = expf(r[c] - m);
    s += r[c];
  }
  row_loss[i] = (double)logf(s) + (double)(m - zy);
  row_ok[i] = arg == y[i];
  if (want_grad) {
    const float inv = gscale / s;
    for (int c = 0; c < C; c++) r[c] *= inv;
    r[y[i]] -= gscale;
  }
}

__global__ void sum_rows(const double *row_loss, const int *row_ok, int n, double *out2) {
  __shared__ double sl[kThreads], so[kThreads];
  double l = 0, o = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    l += row_loss[i];
    o += row_ok[i];
  }
  sl[threadIdx.x] = l;
  so[threadIdx.x] = o;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if ((int)threadIdx.x < w) {
      sl[threadIdx.x] += sl[threadIdx.x + w];
      so[threadIdx.x] += so[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out2[0] = sl[0];
    out2[1] = so[0];
  }
}

__global__ void colsum(const float *G, int n, int out, float *db) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += G[(size_t)i * out + o];
    db[o] = s;
  }
}

__global__ void gather(const float *X, const int32_t *Y, const uint32_t *idx, int n, int64_t d,
                       float *xb, int32_t *yb) {
  const size_t cnt = (size_t)n * (size_t)d;
  for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < cnt;
       k += (size_t)gridDim.x * blockDim.x) {
    size_t i = k / (size_t)d, j = k % (size_t)d;
    xb[k] = X[(size_t)idx[i] * (size_t)d + j];
    if (j == 0) yb[i] = Y[idx[i]];
  }
}

/* optim.c's update after g *= gscale */
__global__ void sgd(float *p, float *g, float *v, size_t n, float gscale, float lr, float wd,
                    float mu) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    sg_sgd_apply1(p, g, v, i, gscale, lr, wd, mu);
}

__global__ void prim(int op, float *x, const float *in, float *out, size_t len) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
       i += (size_t)gridDim.x * blockDim.x)
    sg_prim_apply1(op, x, in, out, i);
}

/* ---- the persistent device ring (pring_plan.h) ------------------------ */

__device__ __forceinline__ uint64_t gtimer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Wait until *f >= want, polling with volatile loads; gives up after
 * limit_ns of device time (0 when it did, *seen = the last value). */
__device__ int pring_wait(const volatile uint64_t *f, uint64_t want, uint64_t limit_ns,
                          uint64_t *seen) {
  uint64_t v = *f;
  if (v >= want) return 1;
  const uint64_t t0 = gtimer();
  while ((v = *f) < want) {
    if (gtimer() - t0 > limit_ns) {
      *seen = v;
      return 0;
    }
    __nanosleep(64);
  }
  return 1;
}

__device__ __forceinline__ void apply4(int op, float4 &x, const float4 &in, float4 &out) {
  float xa[4] = {x.x, x.y, x.z, x.w}, ia[4] = {in.x, in.y, in.z, in.w}, oa[4] = {0, 0, 0, 0};
#pragma unroll
  for (int k = 0; k < 4; k++) sg_prim_apply1(op, xa, ia, oa, (size_t)k);
  x = make_float4(xa[0], xa[1], xa[2], xa[3]);
  out = make_float4(oa[0], oa[1], oa[2], oa[3]);
}

/* One step's data, by every thread of the block: 4-float groups (kUnroll
 * of them in flight per thread) when x, in and out are 16-byte aligned,
 * then the rest one float at a time; the same sg_prim_apply1 on every
 * element either way.  x is read only by the ops that use it and written
 * only by those that change it. */
const int kUnroll = 4;
__device__ void pring_move(int op, int rx, int tx, float *x, const float *in, float *out,
                           size_t len) {
  const int rdx = op <= SG_PRIM_RECV_REDUCE_COPY_SEND, wrx = op >= SG_PRIM_RECV_REDUCE_COPY_SEND;
  const uintptr_t al = (uintptr_t)x | (rx ? (uintptr_t)in : 0) | (tx ? (uintptr_t)out : 0);
  size_t done = 0;
  if ((al & 15) == 0) {
    const size_t n4 = len / 4;
    float4 *x4 = (float4 *)x, *o4 = (float4 *)out;
    const float4 *i4 = (const float4 *)in;
    const float4 z = make_float4(0, 0, 0, 0);
    for (size_t b = threadIdx.x; b < n4; b += (size_t)kUnroll * blockDim.x) {
      float4 xv[kUnroll], iv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const size_t e = b + (size_t)u * blockDim.x;
        xv[u] = e < n4 && rdx ? x4[e] : z;
        iv[u] = e < n4 && rx ? __ldcg(i4 + e) : z;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; u++) {
        const size_t e = b + (size_t)u * blockDim.x;
        if (e >= n4) break;
        float4 ov;
        apply4(op, xv[u], iv[u], ov);
        if (wrx) x4[e] = xv[u];
        if (tx) __stcg(o4 + e, ov);
      }
    }
    done = n4 * 4;
  }
  for (size_t e = done + threadIdx.x; e < len; e += blockDim.x) {
    float iv = rx ? __ldcg(in + e) : 0.0f, ov = 0.0f;
    sg_prim_apply1(op, x + e, &iv, &ov, 0);
    if (tx) __stcg(out + e, ov);
  }
}

/* One thread block per lane; the host sees only the launch and the
 * stream's end.  Thread 0 polls the flags; the block's barrier hands the
 * go-ahead to every thread.  A step's data is written (or read) by every
 * thread, each thread fences (system scope: the flag's reader may be
 * another process's kernel or another device), the block meets, and only
 * then does thread 0 store the flag.  Inbox reads bypass L1 (__ldcg): a
 * slot is rewritten by the neighbour between two reads of this block.
 * A wait longer than limit_ns (a neighbour gone or stuck) ends the lane:
 * thread 0 writes {what, step, wanted, seen} into fail[4 * lane] (host
 * memory mapped into the device) and the block returns. */
__global__ void pring(sg_pring_t p, float *x, const float *inbox, float *rinbox, uint64_t *flags,
                      uint64_t *rflags, uint64_t *lflags, uint64_t limit_ns,
                      volatile uint64_t *fail) {
  const int ln = blockIdx.x, ch = sg_pring_chan(&p, ln);
  volatile uint64_t *my = flags + (size_t)ln * SG_PRING_FLAG_STRIDE;
  volatile uint64_t *rready = rflags + (size_t)ln * SG_PRING_FLAG_STRIDE + SG_PRING_READY;
  volatile uint64_t *lack = lflags + (size_t)ln * SG_PRING_FLAG_STRIDE + SG_PRING_ACK;
  __shared__ uint64_t base;
  __shared__ int ok;
  if (threadIdx.x == 0) {
    base = my[SG_PRING_BASE];
    ok = 1;
  }
  __syncthreads();
  const size_t nsteps = sg_pring_nsteps(&p, ch);
  for (size_t t = 0; t < nsteps; t++) {
    sg_pring_step_t s;
    sg_pring_step(&p, ln, base, t, &s);
    if (threadIdx.x == 0) {
      uint64_t seen = 0, what = 0;
      if (s.rx && !pring_wait(my + SG_PRING_READY, s.need_ready, limit_ns, &seen)) what = 1;
      else if (s.tx && s.need_ack && !pring_wait(my + SG_PRING_ACK, s.need_ack, limit_ns, &seen))
        what = 2;
      if (what) {
        volatile uint64_t *f = fail + 4 * (size_t)ln;
        f[1] = t;
        f[2] = what == 1 ? s.need_ready : s.need_ack;
        f[3] = seen;
        f[0] = what;
        ok = 0;
      }
      __threadfence_system();
    }
    __syncthreads();
    if (!ok) return;
    const float *in = inbox + ((size_t)ch * p.slots + (s.rx ? s.in_slot : 0)) * p.seg + s.soff;
    float *out = rinbox + ((size_t)ch * p.slots + (s.tx ? s.out_slot : 0)) * p.seg + s.soff;
    pring_move(s.op, s.rx, s.tx, x + s.off, in, out, s.len);
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
      if (s.tx) *rready = s.post_ready;
      if (s.rx) *lack = s.post_ack;
    }
  }
  if (threadIdx.x == 0) my[SG_PRING_BASE] = base + sg_pring_nsends(&p, ch);
}

}  // namespace

extern "C" {

cudaError_t sg_k_fill_rows(float *Z, const float *b, int n, int out, cudaStream_t s) {
  size_t cnt = (size_t)n * (size_t)out;
  fill_rows<<<blocks_for(cnt), kThreads, 0, s>>>(Z, b, cnt, out);
  return cudaGetLastError();
}

cudaError_t sg_k_relu(float *Z, size_t cnt, cudaStream_t s) {
  relu<<<blocks_for(cnt), kThreads, 0, s>>>(Z, cnt);
  return cudaGetLastError();
}

cudaError_t sg_k_relu_back(float *G, const float *A, size_t cnt, cudaStream_t s) {
  relu_back<<<blocks_for(cnt), kThreads, 0, s>>>(G, A, cnt);
  return cudaGetLastError();
}

cudaError_t sg_k_xent(float *Z, const int32_t *y, int n, int C, float gscale, int want_grad,
                      double *row_loss, int *row_ok, cudaStream_t s) {
  xent<<<blocks_for((size_t)n), kThreads, 0, s>>>(Z, y, n, C, gscale, want_grad, row_loss,
                                                  row_ok);
  return cudaGetLastError();
}

cudaError_t sg_k_sum_rows(const double *row_loss, const int *row_ok, int n, double *out2,
                          cudaStream_t s) {
  sum_rows<<<1, kThreads, 0, s>>>(row_loss, row_ok, n, out2);
  return cudaGetLastError();
}

cudaError_t sg_k_colsum(const float *G, int n, int out, float *db, cudaStream_t s) {
  colsum<<<blocks_for((size_t)out), kThreads, 0, s>>>(G, n, out, db);
  return cudaGetLastError();
}

cudaError_t sg_k_gather(const float *X, const int32_t *Y, const uint32_t *idx, int n, int64_t d,
                        float *xb, int32_t *yb, cudaStream_t s) {
  gather<<<blocks_for((size_t)n * (size_t)d), kThreads, 0, s>>>(X, Y, idx, n, d, xb, yb);
  return cudaGetLastError();
}

cudaError_t sg_k_sgd(float *p, float *g, float *v, size_t n, float gscale, float lr, float wd,
                     float mu, cudaStream_t s) {
  sgd<<<blocks_for(n), kThreads, 0, s>>>(p, g, v, n, gscale, lr, wd, mu);
  return cudaGetLastError();
}

cudaError_t sg_k_prim(int op, float *x, const float *in, float *out, size_t len,
                      cudaStream_t s) {
  if (len == 0) return cudaSuccess;
  prim<<<blocks_for(len), kThreads, 0, s>>>(op, x, in, out, len);
  return cudaGetLastError();
}

cudaError_t sg_k_pring(const sg_pring_t *p, float *x, const float *inbox, float *rinbox,
                       uint64_t *flags, uint64_t *rflags, uint64_t *lflags, uint64_t limit_ns,
                       uint64_t *fail, cudaStream_t s) {
  if (p->n < 2 || p->count == 0) return cudaSuccess;
  pring<<<sg_pring_lanes(p), kPringThreads, 0, s>>>(*p, x, inbox, rinbox, flags, rflags, lflags,
                                                    limit_ns, fail);
  return cudaGetLastError();
}

}  // extern "C"

/* ---- a mapreduce executor's task accumulator (replica.h) ------------------ */
/* acc = w g (first) or acc += w g: rounded product, rounded sum (no FMA),
 * the host loop's operations */
__global__ void task_acc(float *acc, const float *g, size_t n, float w, int first) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float wg = __fmul_rn(w, g[i]);
    acc[i] = first ? wg : __fadd_rn(acc[i], wg);
  }
}

extern "C" cudaError_t sg_k_task_acc(float *acc, const float *g, size_t n, float w, int first,
                                     cudaStream_t s) {
  if (n == 0) return cudaSuccess;
  task_acc<<<blocks_for(n), kThreads, 0, s>>>(acc, g, n, w, first);
  return cudaGetLastError();
}
