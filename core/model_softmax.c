/* model_softmax.c - softmax cross-entropy (the loss of every model) and the
 * sparse input layer used when batches are CSR.
 *
 * Cross-entropy with the log-sum-exp trick: with m = max_c z_c,
 *   loss = log(sum_c exp(z_c - m)) + m - z_y
 * never overflows, and softmax(z)_c = exp(z_c - m) / sum.
 */
#include <math.h>
#include <string.h>

#include "model.h"

double sg_softmax_xent(float *z, const int32_t *y, int n, int C, float gscale,
                       int want_grad, int64_t *correct) {
  double loss = 0.0;
  int64_t ok = 0;
  for (int i = 0; i < n; i++) {
    float *r = z + (size_t)i * C;
    float m = r[0];
    int arg = 0;
    for (int c = 1; c < C; c++)
      if (r[c] > m) {
        m = r[c];
        arg = c;
      }
    ok += arg == y[i];
    const float zy = r[y[i]];
    float s = 0.0f;
    for (int c = 0; c < C; c++) {
      r[c] = expf(r[c] - m);
      s += r[c];
    }
    loss += (double)logf(s) + (double)(m - zy);
    if (want_grad) {
      const float inv = gscale / s;
      for (int c = 0; c < C; c++) r[c] *= inv;
      r[y[i]] -= gscale;
    }
  }
  if (correct) *correct += ok;
  return loss;
}

void sg_csr_forward(const sg_batch_t *b, const float *W, const float *bias,
                    int64_t in, int out, float *Z) {
  for (int i = 0; i < b->n; i++) {
    float *z = Z + (size_t)i * out;
    memcpy(z, bias, (size_t)out * sizeof *z);
    for (int64_t k = b->rowptr[i]; k < b->rowptr[i + 1]; k++) {
      const float v = b->val[k];
      const float *w = W + b->col[k];
      for (int o = 0; o < out; o++) z[o] += v * w[(size_t)o * in];
    }
  }
}

void sg_csr_backward(const sg_batch_t *b, const float *G, int64_t in, int out,
                     float *dW, float *db) {
  memset(dW, 0, (size_t)out * (size_t)in * sizeof *dW);
  memset(db, 0, (size_t)out * sizeof *db);
  for (int i = 0; i < b->n; i++) {
    const float *g = G + (size_t)i * out;
    for (int o = 0; o < out; o++) db[o] += g[o];
    for (int64_t k = b->rowptr[i]; k < b->rowptr[i + 1]; k++) {
      const float v = b->val[k];
      float *w = dW + b->col[k];
      for (int o = 0; o < out; o++) w[(size_t)o * in] += v * g[o];
    }
  }
}
