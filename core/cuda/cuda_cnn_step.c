/* cuda_cnn_step.c - the device CNN's step as a sequence of backend
 * operations (cuda_cnn_step.h); plain C, built in every build so that the
 * CPU twin can run it without a GPU. */
#include "cuda_cnn_step.h"

#include "err.h"

int sg_cnn_bufs_each(sg_cnn_bufs_t *b, const sg_cnn_geom_t *g, int rows, sg_cnn_buf_fn fn,
                     void *arg) {
  const size_t f = sizeof(float);
  for (int l = 0; l < SG_CNN_NCONV; l++) {
    const sg_cnn_conv_t *v = &g->cv[l];
    const size_t px = sg_cnn_npix(v, rows), pooled = sg_cnn_npooled(v, rows);
    SG_CHECK(fn(arg, (void **)&b->cols[l], px * (size_t)v->kkc * f));
    SG_CHECK(fn(arg, (void **)&b->z[l], px * (size_t)v->cout * f));
    SG_CHECK(fn(arg, (void **)&b->dz[l], px * (size_t)v->cout * f));
    SG_CHECK(fn(arg, (void **)&b->p[l], pooled * f));
    SG_CHECK(fn(arg, (void **)&b->dp[l], pooled * f));
    SG_CHECK(fn(arg, (void **)&b->arg[l], pooled * sizeof(int32_t)));
  }
  const sg_cnn_conv_t *c2 = &g->cv[SG_CNN_NCONV - 1];
  SG_CHECK(fn(arg, (void **)&b->dcols, sg_cnn_npix(c2, rows) * (size_t)c2->kkc * f));
  for (int l = 0; l < SG_CNN_NDENSE; l++) {
    SG_CHECK(fn(arg, (void **)&b->a[l], (size_t)rows * (size_t)g->fc[l].out * f));
    SG_CHECK(fn(arg, (void **)&b->g[l], (size_t)rows * (size_t)g->fc[l].out * f));
  }
  return SG_OK;
}

/* z = ReLU(cols W^T + b), then the pool (model_cnn.c conv_forward). */
static int conv_fwd(const sg_cnn_ops_t *o, const sg_cnn_conv_t *v, sg_cnn_bufs_t *b, int l,
                    const float *P, const float *X, int n) {
  const int M = (int)sg_cnn_npix(v, n), C = v->cout;
  SG_CHECK(o->im2col(o->ctx, v, X, b->cols[l], n));
  SG_CHECK(o->fill_rows(o->ctx, b->z[l], P + v->offb, M, C));
  SG_CHECK(o->gemm(o->ctx, 'N', 'T', M, C, v->kkc, b->cols[l], v->kkc, P + v->offW, v->kkc,
                   1.0f, b->z[l], C));
  SG_CHECK(o->relu(o->ctx, b->z[l], (size_t)M * (size_t)C));
  return o->pool(o->ctx, v, b->z[l], b->p[l], b->arg[l], n);
}

int sg_cnn_step_forward(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                        const float *P, const float *X, int n) {
  SG_CHECK(conv_fwd(o, &g->cv[0], b, 0, P, X, n));
  SG_CHECK(conv_fwd(o, &g->cv[1], b, 1, P, b->p[0], n));
  const float *in = b->p[SG_CNN_NCONV - 1];
  for (int l = 0; l < SG_CNN_NDENSE; l++) {
    const sg_cnn_dense_t *f = &g->fc[l];
    SG_CHECK(o->fill_rows(o->ctx, b->a[l], P + f->offb, n, f->out));
    SG_CHECK(o->gemm(o->ctx, 'N', 'T', n, f->out, f->in, in, f->in, P + f->offW, f->in, 1.0f,
                     b->a[l], f->out));
    if (l + 1 < SG_CNN_NDENSE) SG_CHECK(o->relu(o->ctx, b->a[l], (size_t)n * (size_t)f->out));
    in = b->a[l];
  }
  return SG_OK;
}

static int hand_over(const sg_cnn_ops_t *o, size_t off, size_t len) {
  return o->ready ? o->ready(o->ctx, off, len) : SG_OK;
}

/* model_cnn.c dense_backward: G is d loss / d Z of layer f, X its input;
 * dX (masked by X > 0 when mask) for the layer below. */
static int dense_bwd(const sg_cnn_ops_t *o, const sg_cnn_dense_t *f, const float *P,
                     const float *G, const float *X, int n, float *grad, float *dX, int mask) {
  SG_CHECK(o->colsum(o->ctx, G, (size_t)n, f->out, grad + f->offb));
  SG_CHECK(hand_over(o, f->offb, (size_t)f->out));
  SG_CHECK(o->gemm(o->ctx, 'T', 'N', f->out, f->in, n, G, f->out, X, f->in, 0.0f,
                   grad + f->offW, f->in));
  SG_CHECK(hand_over(o, f->offW, (size_t)f->out * (size_t)f->in));
  SG_CHECK(o->gemm(o->ctx, 'N', 'N', n, f->in, f->out, G, f->out, P + f->offW, f->in, 0.0f, dX,
                   f->in));
  return mask ? o->relu_back(o->ctx, dX, X, (size_t)n * (size_t)f->in) : SG_OK;
}

/* model_cnn.c conv_backward: from dp to db, dW and, given dX, col2im. */
static int conv_bwd(const sg_cnn_ops_t *o, const sg_cnn_conv_t *v, sg_cnn_bufs_t *b, int l,
                    const float *P, int n, float *grad, float *dX) {
  const int M = (int)sg_cnn_npix(v, n), C = v->cout;
  SG_CHECK(o->unpool(o->ctx, v, b->arg[l], b->dp[l], b->dz[l], n));
  SG_CHECK(o->relu_back(o->ctx, b->dz[l], b->z[l], (size_t)M * (size_t)C));
  SG_CHECK(o->colsum(o->ctx, b->dz[l], (size_t)M, C, grad + v->offb));
  SG_CHECK(hand_over(o, v->offb, (size_t)C));
  SG_CHECK(o->gemm(o->ctx, 'T', 'N', C, v->kkc, M, b->dz[l], C, b->cols[l], v->kkc, 0.0f,
                   grad + v->offW, v->kkc));
  SG_CHECK(hand_over(o, v->offW, (size_t)C * (size_t)v->kkc));
  if (!dX) return SG_OK;
  SG_CHECK(o->gemm(o->ctx, 'N', 'N', M, v->kkc, C, b->dz[l], C, P + v->offW, v->kkc, 0.0f,
                   b->dcols, v->kkc));
  return o->col2im(o->ctx, v, b->dcols, dX, n);
}

int sg_cnn_step_grad(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                     const float *P, const float *X, const int32_t *y, int n, float *grad) {
  const int top = SG_CNN_NDENSE - 1;
  SG_CHECK(sg_cnn_step_forward(o, g, b, P, X, n));
  SG_CHECK(o->xent(o->ctx, b->a[top], y, n, g->classes, 1.0f / (float)n, 1));
  for (int l = top; l >= 0; l--) {
    const float *G = l == top ? b->a[top] : b->g[l];
    const float *in = l ? b->a[l - 1] : b->p[SG_CNN_NCONV - 1];
    float *dX = l ? b->g[l - 1] : b->dp[SG_CNN_NCONV - 1];
    /* pooled outputs are >= 0 with zero gradient below the ReLU already */
    SG_CHECK(dense_bwd(o, &g->fc[l], P, G, in, n, grad, dX, l > 0));
  }
  SG_CHECK(conv_bwd(o, &g->cv[1], b, 1, P, n, grad, b->dp[0]));
  return conv_bwd(o, &g->cv[0], b, 0, P, n, grad, NULL);
}

int sg_cnn_step_eval(const sg_cnn_ops_t *o, const sg_cnn_geom_t *g, sg_cnn_bufs_t *b,
                     const float *P, const float *X, const int32_t *y, int n) {
  SG_CHECK(sg_cnn_step_forward(o, g, b, P, X, n));
  return o->xent(o->ctx, b->a[SG_CNN_NDENSE - 1], y, n, g->classes, 1.0f, 0);
}
