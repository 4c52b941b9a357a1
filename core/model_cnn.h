/* model_cnn.h - `model: cnn`, a LeNet-5-like network over one flat
 * parameter vector (internal to core; sg_model_* in model.h dispatch here).
 *
 * Input: a square single-channel image of side s (d = s * s; Fashion-MNIST
 * 28 x 28), rows stored row-major.  Activations are NHWC (image, row,
 * column, channel).  Layers, s = 28:
 *   conv1 5x5, 1 -> 6 ch, no padding   28x28x1 -> 24x24x6, ReLU
 *   max-pool 2x2 stride 2              -> 12x12x6
 *   conv2 5x5, 6 -> 16 ch              -> 8x8x16, ReLU
 *   max-pool 2x2                       -> 4x4x16 = 256
 *   dense 256 -> 120 ReLU -> 84 ReLU -> classes
 * (LeNet-5 pads its 28x28 input to 32x32 and gets 5x5x16 = 400 features;
 * without the padding the flattened size is 256.)  s must leave even
 * sizes for both pools: s = 16, 20, 24, 28, ...
 *
 * A convolution is im2col + one sgemm: cols (n*oh*ow x k*k*cin, one row
 * per output pixel, columns in (ky, kx, c) order) times W^T (W: cout x
 * k*k*cin), so Z (n*oh*ow x cout) is NHWC.  Backward: dW = dZ^T cols
 * (T,N), dcols = dZ W (N,N) scattered back by col2im (conv2 only).
 *
 * Parameters, one tensor after the other: conv1 W, b; conv2 W, b; dense
 * W, b (out x in, row-major) x 3.  The backward hook reports each tensor
 * once it is final: bias then weights, last layer first -- descending,
 * adjoining offsets covering the vector, as model.h promises.  The sgemm
 * calls depend on the batch's row count only, hook or not.
 */
#ifndef SG_MODEL_CNN_H
#define SG_MODEL_CNN_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "shard.h"

typedef struct sg_cnn sg_cnn_t;

int sg_cnn_new(sg_cnn_t **out, int64_t d, int classes, int sparse_input, int max_rows);
void sg_cnn_destroy(sg_cnn_t **c);
size_t sg_cnn_nparams(const sg_cnn_t *c);
const char *sg_cnn_describe(const sg_cnn_t *c);
/* He uniform weights (fan_in = k*k*cin or in), zero biases. */
void sg_cnn_init(const sg_cnn_t *c, uint64_t seed, float *params);
int sg_cnn_grad(sg_cnn_t *c, const float *params, const sg_batch_t *b, float *grad,
                double *loss, sg_grad_ready_fn ready, void *ready_arg);
int sg_cnn_eval(sg_cnn_t *c, const float *params, const sg_batch_t *b, double *loss_sum,
                int64_t *correct);
size_t sg_cnn_gemms(const sg_cnn_t *c, int rows, sg_gemm_shape_t *out, size_t cap);

#endif
