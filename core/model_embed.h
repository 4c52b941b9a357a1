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

#include "shard.h"

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

/* ---- batches of the workload (sg_batch_t) -----------------------------
 * A click batch is CSR with exactly F entries per row: entry f of a row
 * is the key of field f (col, uint32; val is ignored), y in {0, 1}.  A
 * row with another number of entries is SG_EINVAL.  The buffers of
 * sg_embed_new (max_rows rows) serve every call: nothing is allocated. */

/* The full gradient (nparams floats, fully overwritten: dense prefix,
 * table zero but at the batch's rows). */
int sg_embed_batch_grad(sg_embed_t *m, const float *params, const sg_batch_t *b, float *grad,
                        double *loss);
/* Forward only: *loss_sum += summed loss, *correct += argmax hits. */
int sg_embed_batch_eval(sg_embed_t *m, const float *params, const sg_batch_t *b,
                        double *loss_sum, int64_t *correct);
/* The coordinates the batch reads and writes, ascending: [0, dense_len)
 * then dense_len + r*E + e for each distinct row r it touches, e < E.
 * *n is set even when cap is too small (then SG_ERANGE).  *nrows (may be
 * NULL) gets the number of distinct rows: *n = dense_len + *nrows * E. */
int sg_embed_batch_coords(sg_embed_t *m, const sg_batch_t *b, uint32_t *idx, size_t cap,
                          size_t *n, size_t *nrows);
/* gval[j] = the full gradient at idx[j] (strictly increasing), bit-equal
 * to sg_embed_batch_grad's (0 where the batch writes nothing); params are
 * read at the batch's coordinates only. */
int sg_embed_batch_grad_at(sg_embed_t *m, const float *params, const sg_batch_t *b,
                           const uint32_t *idx, size_t n, float *gval, double *loss);
int sg_embed_fields(const sg_embed_t *m);
int sg_embed_dim(const sg_embed_t *m);
int64_t sg_embed_table_rows(const sg_embed_t *m);

#endif
