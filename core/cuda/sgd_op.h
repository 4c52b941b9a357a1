/* sgd_op.h - the device optimizer step's element operation (sg_cuda_sgd,
 * the kernel `sgd` in cuda_kernels.cu), shared with the CPU twins of the
 * device update (tests/test_cuda_overlap.c); plain C, nvcc compiles it
 * too.  optim.c's update in PyTorch's form with the gradient scaled
 * first: g = g * gscale (kept); with v: v = mu v + g + wd p, p -= lr v;
 * without: p -= lr (g + wd p). */
#ifndef SG_SGD_OP_H
#define SG_SGD_OP_H

#include <stddef.h>

#ifndef SG_HD
#ifdef __CUDACC__
#define SG_HD __host__ __device__
#else
#define SG_HD
#endif
#endif

static inline SG_HD void sg_sgd_apply1(float *p, float *g, float *v, size_t i, float gscale,
                                       float lr, float wd, float mu) {
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

#endif
