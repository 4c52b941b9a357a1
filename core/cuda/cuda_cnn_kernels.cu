/* cuda_cnn_kernels.cu - the kernels of the device CNN (cuda_cnn.h): each
 * thread runs one cuda_cnn_index.h body, the one the CPU twin runs for
 * the same thread index.  The products are cuBLAS (cuda_cnn.c). */
#include "cuda_cnn.h"
#include "cuda_cnn_index.h"

namespace {

const int kThreads = 256;

unsigned blocks_for(size_t n) {
  size_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535u * 16u ? (b ? b : 1) : 65535u * 16u);
}

#define SG_GRID_STRIDE(t, cnt) \
  for (size_t t = blockIdx.x * (size_t)blockDim.x + threadIdx.x; t < (cnt); \
       t += (size_t)gridDim.x * blockDim.x)

/* the geometry is passed by value: kernel parameters live in constant memory */
__global__ void im2col(sg_cnn_conv_t v, const float *X, float *cols, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_im2col1(&v, X, cols, t);
}

__global__ void col2im(sg_cnn_conv_t v, const float *dcols, float *dX, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_col2im1(&v, dcols, dX, t);
}

__global__ void pool(sg_cnn_conv_t v, const float *z, float *p, int32_t *arg, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_pool1(&v, z, p, arg, t);
}

__global__ void unpool(const int32_t *arg, const float *dp, float *dz, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_unpool1(arg, dp, dz, t);
}

__global__ void fill_rows(float *Z, const float *b, int out, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_fill1(Z, b, out, t);
}

__global__ void relu(float *Z, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_relu1(Z, t);
}

__global__ void relu_back(float *G, const float *A, size_t cnt) {
  SG_GRID_STRIDE(t, cnt) sg_cnn_relu_back1(G, A, t);
}

__global__ void colsum_k(const float *G, size_t rows, int out, float *db) {
  SG_GRID_STRIDE(t, (size_t)out) sg_cnn_colsum1(G, rows, out, db, t);
}

}  // namespace

extern "C" {

cudaError_t sg_kc_im2col(const sg_cnn_conv_t *v, const float *X, float *cols, int n,
                         cudaStream_t s) {
  const size_t cnt = sg_cnn_npix(v, n) * (size_t)v->kkc;
  im2col<<<blocks_for(cnt), kThreads, 0, s>>>(*v, X, cols, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_col2im(const sg_cnn_conv_t *v, const float *dcols, float *dX, int n,
                         cudaStream_t s) {
  const size_t cnt = sg_cnn_nin(v, n);
  col2im<<<blocks_for(cnt), kThreads, 0, s>>>(*v, dcols, dX, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_pool(const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg, int n,
                       cudaStream_t s) {
  const size_t cnt = sg_cnn_npooled(v, n);
  pool<<<blocks_for(cnt), kThreads, 0, s>>>(*v, z, p, arg, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_unpool(const sg_cnn_conv_t *v, const int32_t *arg, const float *dp, float *dz,
                         int n, cudaStream_t s) {
  const size_t cnt = sg_cnn_npooled(v, n);
  cudaError_t e = cudaMemsetAsync(dz, 0, sg_cnn_npix(v, n) * (size_t)v->cout * sizeof(float), s);
  if (e != cudaSuccess) return e;
  unpool<<<blocks_for(cnt), kThreads, 0, s>>>(arg, dp, dz, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_fill_rows(float *Z, const float *b, int rows, int out, cudaStream_t s) {
  const size_t cnt = (size_t)rows * (size_t)out;
  fill_rows<<<blocks_for(cnt), kThreads, 0, s>>>(Z, b, out, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_relu(float *Z, size_t cnt, cudaStream_t s) {
  relu<<<blocks_for(cnt), kThreads, 0, s>>>(Z, cnt);
  return cudaGetLastError();
}

cudaError_t sg_kc_relu_back(float *G, const float *A, size_t cnt, cudaStream_t s) {
  relu_back<<<blocks_for(cnt), kThreads, 0, s>>>(G, A, cnt);
  return cudaGetLastError();
}

/* one thread per column: a column's rows added in order (the host's sums) */
cudaError_t sg_kc_colsum(const float *G, size_t rows, int out, float *db, cudaStream_t s) {
  colsum_k<<<blocks_for((size_t)out), kThreads, 0, s>>>(G, rows, out, db);
  return cudaGetLastError();
}

}  // extern "C"
