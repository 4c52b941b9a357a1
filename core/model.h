/* model.h - softmax regression and MLP over one flat parameter vector.
 *
 * A model is a stack of L fully connected layers: dims[0] = input
 * features, dims[1..L-1] = hidden sizes (ReLU), dims[L] = classes.
 * softmax regression is the stack with no hidden layer.  Parameters are ONE
 * contiguous float vector; layer l is a view: W_l (dims[l+1] x dims[l],
 * row-major) followed by b_l (dims[l+1]), layer after layer.
 *
 * Step (n rows, X = input, A_0 = X):
 *   forward   Z_{l+1} = A_l W_l^T + b_l       sgemm N,T  n x out x in
 *             A_{l+1} = relu(Z_{l+1})         (not on the last layer)
 *   loss      mean over rows of log-sum-exp(z) - z_y  (softmax cross-entropy)
 *   backward  G_L = (softmax(Z_L) - onehot(y)) / n
 *             dW_l = G_{l+1}^T A_l            sgemm T,N  out x in x n
 *             db_l = column sums of G_{l+1}
 *             G_l = (G_{l+1} W_l) * [A_l > 0]  sgemm N,N  n x in x out (l > 0)
 * When the input is CSR, layer 0's forward and dW_0 are sparse loops over
 * the nonzeros instead (softmax on synthetic-sparse and LIBSVM data).
 * Every buffer is allocated once in sg_model_new for up to max_rows rows.
 */
#ifndef SG_MODEL_H
#define SG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "shard.h"

#define SG_MODEL_MAX_LAYERS 16

typedef struct sg_model sg_model_t;

/* kind "softmax" (nhidden must be 0), "mlp" (nhidden >= 1) or "cnn" (the
 * LeNet-5-like network of model_cnn.h; hidden is ignored).
 * sparse_input: batches come as CSR.  Caller owns the result. */
int sg_model_new(sg_model_t **out, const char *kind, int64_t d, int classes,
                 const int64_t *hidden, size_t nhidden, int sparse_input,
                 int max_rows);
/* kind "embedding": the hashed embedding table + MLP of model_embed.h
 * (fields, table rows, embedding dim, hidden units), on click batches. */
int sg_model_new_embed(sg_model_t **out, int fields, int64_t table_rows, int dim, int hidden,
                       int max_rows);
/* The embedding model inside m, or NULL for the other kinds. */
struct sg_embed;
struct sg_embed *sg_model_embed(sg_model_t *m);
void sg_model_destroy(sg_model_t **m);

size_t sg_model_nparams(const sg_model_t *m);
/* Layer sizes into dims[0..L] (input, hidden..., classes); returns L
 * (0 for the cnn, which is not a dense stack).
 * The device model (core/cuda) lays its parameters out from these. */
int sg_model_dims(const sg_model_t *m, int64_t dims[SG_MODEL_MAX_LAYERS + 1]);
/* "mlp 784-128-10 (101770 params)" */
const char *sg_model_describe(const sg_model_t *m);

/* Initial parameters from the seed: softmax all zeros; mlp He (Kaiming)
 * uniform W in +-sqrt(6 / fan_in), zero biases. */
void sg_model_init(const sg_model_t *m, uint64_t seed, float *params);

/* Mean softmax cross-entropy over the batch and its gradient (grad fully
 * overwritten).  b->n <= max_rows. */
int sg_model_grad(sg_model_t *m, const float *params, const sg_batch_t *b,
                  float *grad, double *loss);

/* Backward hook, for engines that reduce the gradient while backward
 * still runs: with fn set, sg_model_grad calls fn(arg, off, len) as soon as
 * grad[off, off+len) is final, in descending order of off (the last layer
 * first), covering the whole vector exactly once per call: a layer's bias
 * gradient, then each block of its dW (sg_model_dw_rows), so that one
 * large layer does not hold back all of its gradient.  fn runs on the
 * thread that called sg_model_grad.  fn NULL removes the hook; the hook
 * changes no arithmetic (the same sgemm calls with or without it). */
typedef void (*sg_grad_ready_fn)(void *arg, size_t off, size_t len);
void sg_model_set_grad_hook(sg_model_t *m, sg_grad_ready_fn fn, void *arg);

/* dW of a dense layer (out x in) is computed in blocks of this many whole
 * output rows (the last block, rows [0, rest), may be smaller), always,
 * hook or not: the whole layer when dW holds at most 256 Ki floats (1 MiB;
 * the default MLP's 784 x 256 is one call), else the fewest blocks of
 * about that size, each a multiple of 16 rows.  The blocks depend on the
 * layer's shape only, so every run of a model makes the same sgemm calls
 * and gets the same bits on a given CPU and BLAS, whatever its engine
 * does with the hook. */
int sg_model_dw_rows(int64_t in, int out);

/* Forward only: adds the batch's summed loss and its number of correctly
 * classified rows (argmax, first on ties) to *loss_sum and *correct. */
int sg_model_eval(sg_model_t *m, const float *params, const sg_batch_t *b,
                  double *loss_sum, int64_t *correct);

/* The sgemm calls of one training step on `rows` rows, in call order
 * (RowMajor; C = alpha op(A) op(B) + beta C, C is m x n, inner dim k). */
typedef struct sg_gemm_shape {
  char ta, tb; /* 'N' or 'T' */
  int m, n, k;
  float beta;
  const char *what; /* "fwd L0", "dW L1", "dX L1" */
} sg_gemm_shape_t;
size_t sg_model_gemms(const sg_model_t *m, int rows, sg_gemm_shape_t *out,
                      size_t cap);

/* The model inside a workload (benchmarks and tests look at its shapes). */
struct sg_workload;
sg_model_t *sg_workload_model(struct sg_workload *w);

/* ---- internals shared by model_mlp.c and model_softmax.c ---------- */

/* Softmax cross-entropy of n rows of C logits z (row-major), in place.
 * Returns the summed loss; adds correct predictions to *correct (may be
 * NULL).  With want_grad, z becomes (softmax(z) - onehot(y)) * gscale. */
double sg_softmax_xent(float *z, const int32_t *y, int n, int C, float gscale,
                       int want_grad, int64_t *correct);

/* Layer 0 on CSR input: Z = X W^T + b (Z is n x out, overwritten). */
void sg_csr_forward(const sg_batch_t *b, const float *W, const float *bias,
                    int64_t in, int out, float *Z);
/* dW = G^T X (dW out x in, fully overwritten), db = column sums of G. */
void sg_csr_backward(const sg_batch_t *b, const float *G, int64_t in, int out,
                     float *dW, float *db);

#endif
