/* cuda_gemms.c - a step's sgemm calls alone on the device (bench step's
 * bound with device: cuda, sg_cuda.h).
 *
 * One device buffer triple per call, filled once with small values; a pass
 * issues every call in order on the process stream with the same cuBLAS
 * handle settings as the model (cuda_model.c: default math mode, so fp32
 * unless tf32 is asked), and the host waits once at the end of the reps.
 */
#include <cublas_v2.h>
#include <stdlib.h>

#include "cuda_dl.h"
#include "cuda_impl.h"
#include "err.h"
#include "sg_cuda_gemms.h"
#include "sg_cuda_rt.h"

struct sg_cuda_gemms {
  size_t n;
  sg_gemm_shape_t *g;
  float **A, **B, **C;
  const sg_cublas_api_t *cb;
  cublasHandle_t h;
  int have_h;
};

static int filled(float **d, size_t count) {
  SG_CHECK(sg_cuda_alloc(d, count, "a GEMM operand"));
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  /* any finite values do: bytes 0x3c make 0.0117 in every float */
  SG_CU(cudaMemsetAsync(*d, 0x3c, (count ? count : 1) * sizeof(float), s));
  return SG_OK;
}

int sg_cuda_gemms_new(sg_cuda_gemms_t **out, const sg_gemm_shape_t *g, size_t n, int tf32) {
  int rc;
  cudaStream_t s = NULL;
  sg_cuda_gemms_t *gs = calloc(1, sizeof *gs);
  if (!gs) return SG_ENOMEM;
  gs->n = n;
  gs->g = calloc(n ? n : 1, sizeof *gs->g);
  gs->A = calloc(n ? n : 1, sizeof *gs->A);
  gs->B = calloc(n ? n : 1, sizeof *gs->B);
  gs->C = calloc(n ? n : 1, sizeof *gs->C);
  if (!gs->g || !gs->A || !gs->B || !gs->C) {
    rc = SG_ENOMEM;
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    gs->g[i] = g[i];
    SG_TRY(filled(&gs->A[i], (size_t)g[i].m * (size_t)g[i].k));
    SG_TRY(filled(&gs->B[i], (size_t)g[i].k * (size_t)g[i].n));
    SG_TRY(filled(&gs->C[i], (size_t)g[i].m * (size_t)g[i].n));
  }
  SG_TRY(sg_cuda_stream(&s));
  SG_TRY(sg_cublas(&gs->cb));
  SG_TRY(sg_cublas_handle(gs->cb, s, tf32, &gs->h));
  gs->have_h = 1;
  SG_TRY(sg_cuda_sync());
  *out = gs;
  return SG_OK;
fail:
  sg_cuda_gemms_destroy(&gs);
  return rc;
}

/* reps passes over calls [first, first+count), then wait for them. */
int sg_cuda_gemms_run(sg_cuda_gemms_t *gs, size_t first, size_t count, int64_t reps) {
  const float one = 1.0f;
  for (int64_t r = 0; r < reps; r++)
    for (size_t i = first; i < first + count && i < gs->n; i++) {
      const sg_gemm_shape_t *s = &gs->g[i];
      const int lda = s->ta == 'N' ? s->k : s->m, ldb = s->tb == 'N' ? s->n : s->k;
      const float beta = s->beta * 1e-3f;
      /* row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T */
      cublasStatus_t st = gs->cb->sgemm(gs->h, s->tb == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N,
                                        s->ta == 'T' ? CUBLAS_OP_T : CUBLAS_OP_N, s->n, s->m,
                                        s->k, &one, gs->B[i], ldb, gs->A[i], lda, &beta,
                                        gs->C[i], s->n);
      if (st != CUBLAS_STATUS_SUCCESS)
        return sg_err_set(SG_EIO, "bench step: cublasSgemm %s: status %d", s->what, (int)st);
    }
  return sg_cuda_sync();
}

void sg_cuda_gemms_destroy(sg_cuda_gemms_t **pgs) {
  if (!pgs || !*pgs) return;
  sg_cuda_gemms_t *gs = *pgs;
  for (size_t i = 0; gs->A && i < gs->n; i++) {
    sg_cuda_free(&gs->A[i]);
    sg_cuda_free(&gs->B[i]);
    sg_cuda_free(&gs->C[i]);
  }
  if (gs->have_h) gs->cb->destroy(gs->h);
  free(gs->g);
  free(gs->A);
  free(gs->B);
  free(gs->C);
  free(gs);
  *pgs = NULL;
}
