/* sg_cuda_gemms.h - a step's matrix products alone on the device (bench step's bound).
 * Part of the CUDA layer's interface (sg_cuda.h includes every part);
 * cuda_none.c stands in for all of it in a build without CUDA. */
#ifndef SG_CUDA_GEMMS_H
#define SG_CUDA_GEMMS_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* ---- a step's GEMMs alone (bench step's bound, cuda_gemms.c) ---------- */

typedef struct sg_cuda_gemms sg_cuda_gemms_t;
/* Device operands for the n row-major sgemm calls g[] (model.h), a
 * cuBLAS handle on the process stream (TF32 when tf32). */
int sg_cuda_gemms_new(sg_cuda_gemms_t **out, const sg_gemm_shape_t *g, size_t n, int tf32);
/* reps passes over calls [first, first + count) in order; returns when
 * the device has finished them. */
int sg_cuda_gemms_run(sg_cuda_gemms_t *gs, size_t first, size_t count, int64_t reps);
void sg_cuda_gemms_destroy(sg_cuda_gemms_t **gs);

#endif
