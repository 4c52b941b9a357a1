/* cuda_kernels.cu - the small kernels of the device workload and the
 * device ring; the matrix products are cuBLAS sgemm (cuda_model.c).
 * Each kernel mirrors a host loop named in cuda_impl.h. */
#include <float.h>

#include "cuda_impl.h"
#include "pring_plan.h"
#include "ring_prim_op.h"

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
       i += (size_t)gridDim.x * blockDim.x) {
    const float gi = g[i] * gscale;
    g[i] = gi;
    if (v) {
      const float vi = mu * v[i] + gi + wd * p[i];
      v[i] = vi;
      p[i] -= lr * vi;
    } else {
      p[i] -= lr * (gi + wd * p[i]);
    }
  }
}

__global__ void prim(int op, float *x, const float *in, float *out, size_t len) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < len;
       i += (size_t)gridDim.x * blockDim.x)
    sg_prim_apply1(op, x, in, out, i);
}

/* ---- the persistent device ring (pring_plan.h) ------------------------ */

__device__ void pring_wait(const volatile uint64_t *f, uint64_t want) {
  while (*f < want) __nanosleep(64);
}

/* One thread block per channel; the host sees only the launch and the
 * stream's end.  Thread 0 polls the flags; the block's barrier hands the
 * go-ahead to every thread.  A step's data is written (or read) by every
 * thread, each thread fences (system scope: the flag's reader may be
 * another process's kernel or another device), the block meets, and only
 * then does thread 0 store the flag.  Inbox reads bypass L1 (__ldcg): a
 * slot is rewritten by the neighbour between two reads of this block. */
__global__ void pring(sg_pring_t p, float *x, const float *inbox, float *rinbox, uint64_t *flags,
                      uint64_t *rflags, uint64_t *lflags) {
  const int ch = blockIdx.x;
  volatile uint64_t *my = flags + (size_t)ch * SG_PRING_FLAG_STRIDE;
  volatile uint64_t *rready = rflags + (size_t)ch * SG_PRING_FLAG_STRIDE + SG_PRING_READY;
  volatile uint64_t *lack = lflags + (size_t)ch * SG_PRING_FLAG_STRIDE + SG_PRING_ACK;
  __shared__ uint64_t base;
  if (threadIdx.x == 0) base = my[SG_PRING_BASE];
  __syncthreads();
  const size_t nsteps = sg_pring_nsteps(&p, ch);
  for (size_t t = 0; t < nsteps; t++) {
    sg_pring_step_t s;
    sg_pring_step(&p, ch, base, t, &s);
    if (threadIdx.x == 0) {
      if (s.rx) pring_wait(my + SG_PRING_READY, s.need_ready);
      if (s.tx && s.need_ack) pring_wait(my + SG_PRING_ACK, s.need_ack);
      __threadfence_system();
    }
    __syncthreads();
    const float *in = inbox + ((size_t)ch * p.slots + (s.rx ? s.in_slot : 0)) * p.seg;
    float *out = rinbox + ((size_t)ch * p.slots + (s.tx ? s.out_slot : 0)) * p.seg;
    for (size_t e = threadIdx.x; e < s.len; e += blockDim.x) {
      float iv = s.rx ? __ldcg(in + e) : 0.0f, ov = 0.0f;
      sg_prim_apply1(s.op, x + s.off + e, &iv, &ov, 0);
      if (s.tx) __stcg(out + e, ov);
    }
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
                       uint64_t *flags, uint64_t *rflags, uint64_t *lflags, cudaStream_t s) {
  if (p->n < 2 || p->count == 0) return cudaSuccess;
  pring<<<p->chans, kPringThreads, 0, s>>>(*p, x, inbox, rinbox, flags, rflags, lflags);
  return cudaGetLastError();
}

}  // extern "C"
