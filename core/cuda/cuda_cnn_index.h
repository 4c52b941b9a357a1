/* cuda_cnn_index.h - the index math of `model: cnn` on the device, written
 * once for the kernels (cuda_cnn_kernels.cu) and for the CPU twin that
 * runs the same per-thread bodies for every thread index
 * (tests/test_cuda_cnn.c).  Plain C, static inline; under nvcc each body
 * is also a __device__ function.
 *
 * The geometry is model_cnn.c's, shape for shape and offset for offset:
 * conv1 5x5 1 -> 6, pool 2x2, conv2 5x5 6 -> 16, pool 2x2, dense
 * 256 -> 120 -> 84 -> classes (for side 28); one flat parameter vector,
 * per layer W then b: conv1 W, b; conv2 W, b; dense W, b x 3.
 * Activations are NHWC; cols has one row per output pixel (i, oy, ox) with
 * the patch's columns in (ky, kx, c) order.
 *
 * Every body computes ONE output element (thread index t) and adds in
 * model_cnn.c's order, so a body's result equals the host loop's bit for
 * bit: col2im gathers a pixel's contributions in the order the host's
 * scatter adds them (output pixels (oy, ox) ascending), max-pool keeps the
 * first of equal maxima, colsum adds rows in ascending order.
 */
#ifndef SG_CUDA_CNN_INDEX_H
#define SG_CUDA_CNN_INDEX_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define SG_CNN_HD static inline __host__ __device__
#else
#define SG_CNN_HD static inline
#endif

#define SG_CNN_KS 5 /* kernel side */
#define SG_CNN_NCONV 2
#define SG_CNN_NDENSE 3

typedef struct sg_cnn_conv {
  int cin, cout, h, w; /* input h x w x cin */
  int oh, ow, ph, pw;  /* conv output oh x ow x cout; pooled ph x pw x cout */
  int kkc;             /* SG_CNN_KS^2 * cin: one patch */
  size_t offW, offb;
} sg_cnn_conv_t;

typedef struct sg_cnn_dense {
  int in, out;
  size_t offW, offb;
} sg_cnn_dense_t;

typedef struct sg_cnn_geom {
  int side, classes;
  sg_cnn_conv_t cv[SG_CNN_NCONV];
  sg_cnn_dense_t fc[SG_CNN_NDENSE];
  size_t nparams;
} sg_cnn_geom_t;

/* model_cnn.c's shapes and offsets for a side x side image; 0, or -1 when
 * a pool would not be even (side 16, 20, 24, 28, ... pool evenly). */
static inline int sg_cnn_geom_init(sg_cnn_geom_t *g, int side, int classes) {
  static const int ch[SG_CNN_NCONV + 1] = {1, 6, 16};
  static const int width[SG_CNN_NDENSE] = {120, 84, 0};
  int h = side;
  size_t off = 0;
  g->side = side;
  g->classes = classes;
  for (int l = 0; l < SG_CNN_NCONV; l++) {
    sg_cnn_conv_t *v = &g->cv[l];
    v->cin = ch[l];
    v->cout = ch[l + 1];
    v->h = v->w = h;
    v->oh = v->ow = h - SG_CNN_KS + 1;
    if (v->oh < 2 || v->oh % 2) return -1;
    v->ph = v->pw = v->oh / 2;
    v->kkc = SG_CNN_KS * SG_CNN_KS * v->cin;
    v->offW = off;
    off += (size_t)v->cout * (size_t)v->kkc;
    v->offb = off;
    off += (size_t)v->cout;
    h = v->ph;
  }
  int in = h * h * ch[SG_CNN_NCONV];
  for (int l = 0; l < SG_CNN_NDENSE; l++) {
    sg_cnn_dense_t *f = &g->fc[l];
    f->in = in;
    f->out = l + 1 < SG_CNN_NDENSE ? width[l] : classes;
    f->offW = off;
    off += (size_t)f->out * (size_t)f->in;
    f->offb = off;
    off += (size_t)f->out;
    in = f->out;
  }
  g->nparams = off;
  return classes >= 2 ? 0 : -1;
}

/* cuBLAS is column-major: the row-major C (m x n) = op(A) op(B), inner
 * dimension k, is the column-major C^T = op(B)^T op(A)^T, i.e. the call
 * with the same op flags, the operands swapped and m, n swapped.  The
 * device's sgemm (cuda_cnn.c) and the twin's column-major sgemm both take
 * their arguments from here. */
typedef struct sg_cnn_colmajor {
  char ta, tb; /* op of the first and the second operand: 'N' or 'T' */
  int m, n, k;
  const float *A, *B;
  int lda, ldb;
} sg_cnn_colmajor_t;

static inline sg_cnn_colmajor_t sg_cnn_colmajor(char ta, char tb, int m, int n, int k,
                                                const float *A, int lda, const float *B,
                                                int ldb) {
  sg_cnn_colmajor_t c = {tb, ta, n, m, k, B, A, ldb, lda};
  return c;
}

/* Thread counts of the bodies below for n images. */
static inline size_t sg_cnn_npix(const sg_cnn_conv_t *v, int n) { /* rows of cols and z */
  return (size_t)n * (size_t)v->oh * (size_t)v->ow;
}
static inline size_t sg_cnn_nin(const sg_cnn_conv_t *v, int n) { /* input elements */
  return (size_t)n * (size_t)v->h * (size_t)v->w * (size_t)v->cin;
}
static inline size_t sg_cnn_npooled(const sg_cnn_conv_t *v, int n) {
  return (size_t)n * (size_t)v->ph * (size_t)v->pw * (size_t)v->cout;
}

/* im2col, t < npix * kkc: cols[t] = X at (i, oy + ky, ox + kx, c). */
SG_CNN_HD void sg_cnn_im2col1(const sg_cnn_conv_t *v, const float *X, float *cols, size_t t) {
  const size_t row = t / (size_t)v->kkc, j = t % (size_t)v->kkc;
  const size_t pix = (size_t)v->oh * (size_t)v->ow;
  const size_t i = row / pix, oy = row % pix / (size_t)v->ow, ox = row % (size_t)v->ow;
  const size_t patch_row = (size_t)SG_CNN_KS * (size_t)v->cin;
  const size_t ky = j / patch_row, kx = j % patch_row / (size_t)v->cin, c = j % (size_t)v->cin;
  cols[t] = X[((i * (size_t)v->h + oy + ky) * (size_t)v->w + ox + kx) * (size_t)v->cin + c];
}

/* col2im, t < nin: dX[t] = the sum of every patch element that copied
 * input element t, added in output-pixel order (oy, then ox, ascending):
 * the order of model_cnn.c's scatter. */
SG_CNN_HD void sg_cnn_col2im1(const sg_cnn_conv_t *v, const float *dcols, float *dX, size_t t) {
  const int c = (int)(t % (size_t)v->cin);
  const size_t px = t / (size_t)v->cin;
  const int x = (int)(px % (size_t)v->w), y = (int)(px / (size_t)v->w % (size_t)v->h);
  const size_t i = px / ((size_t)v->w * (size_t)v->h);
  const int oy0 = y - SG_CNN_KS + 1 > 0 ? y - SG_CNN_KS + 1 : 0, oy1 = y < v->oh ? y : v->oh - 1;
  const int ox0 = x - SG_CNN_KS + 1 > 0 ? x - SG_CNN_KS + 1 : 0, ox1 = x < v->ow ? x : v->ow - 1;
  float s = 0.0f;
  for (int oy = oy0; oy <= oy1; oy++)
    for (int ox = ox0; ox <= ox1; ox++) {
      const size_t row = (i * (size_t)v->oh + (size_t)oy) * (size_t)v->ow + (size_t)ox;
      const int col = ((y - oy) * SG_CNN_KS + (x - ox)) * v->cin + c;
      s += dcols[row * (size_t)v->kkc + (size_t)col];
    }
  dX[t] = s;
}

/* 2x2 max-pool, o < npooled: p[o] = the window's maximum, arg[o] = its
 * index in z (the first of equal values, window row by row). */
SG_CNN_HD void sg_cnn_pool1(const sg_cnn_conv_t *v, const float *z, float *p, int32_t *arg,
                            size_t o) {
  const size_t C = (size_t)v->cout, ch = o % C, q = o / C;
  const size_t px = q % (size_t)v->pw, py = q / (size_t)v->pw % (size_t)v->ph;
  const size_t i = q / ((size_t)v->pw * (size_t)v->ph);
  size_t best = 0;
  float m = -INFINITY;
  for (size_t dy = 0; dy < 2; dy++)
    for (size_t dx = 0; dx < 2; dx++) {
      const size_t at = ((i * (size_t)v->oh + 2 * py + dy) * (size_t)v->ow + 2 * px + dx) * C + ch;
      if (z[at] > m) {
        m = z[at];
        best = at;
      }
    }
  p[o] = m;
  arg[o] = (int32_t)best;
}

/* The pool's backward, j < npooled, on a zeroed dz: the pooled gradient
 * goes to its window's maximum (windows do not overlap: no races). */
SG_CNN_HD void sg_cnn_unpool1(const int32_t *arg, const float *dp, float *dz, size_t j) {
  dz[arg[j]] = dp[j];
}

/* Z[t] = b[t mod out]: the bias rows before an sgemm with beta 1. */
SG_CNN_HD void sg_cnn_fill1(float *Z, const float *b, int out, size_t t) {
  Z[t] = b[t % (size_t)out];
}

SG_CNN_HD void sg_cnn_relu1(float *Z, size_t t) { Z[t] = Z[t] > 0.0f ? Z[t] : 0.0f; }

/* G[t] = A[t] > 0 ? G[t] : 0 (the ReLU's backward on its output A). */
SG_CNN_HD void sg_cnn_relu_back1(float *G, const float *A, size_t t) {
  G[t] = A[t] > 0.0f ? G[t] : 0.0f;
}

/* db[o] = the sum over rows of G[r][o], rows ascending, o < out. */
SG_CNN_HD void sg_cnn_colsum1(const float *G, size_t rows, int out, float *db, size_t o) {
  float s = 0.0f;
  for (size_t r = 0; r < rows; r++) s += G[r * (size_t)out + o];
  db[o] = s;
}

#endif
