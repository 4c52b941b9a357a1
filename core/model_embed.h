/* model_embed.h - hashed embedding table + small MLP (click / no click).
 *
 * F categorical fields; key k of field f maps to table row
 * h(f, k) mod R (splitmix64 of f and k).  The F rows of E floats are
 * CONCATENATED (input F*E) into an MLP F*E -> H (ReLU) -> 2.
 * ONE flat parameter vector: the dense MLP first (W1 H x F*E, b1 H,
 * W2 2 x H, b2 2; sg_embed_dense_len floats), then the table (R x E,
 * row r at dense_len + r*E), so that a sparse update is the dense prefix
 * plus whole table rows.  Plain loops, fixed order: deterministic.
 * Not yet selectable through `model:` in experiment files.
 */
#ifndef SG_MODEL_EMBED_H
#define SG_MODEL_EMBED_H

#include <stddef.h>
#include <stdint.h>

typedef struct sg_embed sg_embed_t;

/* Options checked: F in [1, 256], R in [1, 2^30], E in [1, 1024],
 * H in [1, 4096], max_rows >= 1.  On error returns -1 and writes one
 * line naming the option into err. */
int sg_embed_new(sg_embed_t **out, int F, int64_t R, int E, int H,
                 int max_rows, char *err, size_t errlen);
void sg_embed_destroy(sg_embed_t **m);
size_t sg_embed_dense_len(const sg_embed_t *m);
size_t sg_embed_nparams(const sg_embed_t *m);
int64_t sg_embed_row(const sg_embed_t *m, int field, uint64_t key);

/* He-uniform MLP weights, table uniform +-0.05, zero biases, from seed. */
void sg_embed_init(const sg_embed_t *m, uint64_t seed, float *params);

/* Mean softmax cross-entropy of n rows (keys n x F, y in {0,1}).
 * dense_grad: dense_len floats, overwritten.  rows: the distinct table
 * rows the batch touches, ascending (*nrows of them, at most n*F);
 * row_grad: their gradients, *nrows x E.  Rows not listed have zero
 * gradient.  correct (may be NULL) += argmax hits. */
int sg_embed_grad(sg_embed_t *m, const float *params, int n,
                  const uint64_t *keys, const int32_t *y, float *dense_grad,
                  int64_t *rows, size_t *nrows, float *row_grad,
                  double *loss, int64_t *correct);

#endif
