/* bench step: runs on a small workload and reports every number it claims
 * (speed itself is never asserted here). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_step.h"
#include "err.h"
#include "opts.h"
#include "test.h"

TEST(bench_step_reports_step_and_bound) {
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "dataset", "synthetic");
  sg_opts_set(o, "features", "64");
  sg_opts_set(o, "train_samples", "2000");
  sg_opts_set(o, "hidden", "32");
  sg_opts_set(o, "batch", "16");
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  sg_bench_step_result_t r;
  CHECK_OK(sg_bench_step_run(o, f, &r));
  fclose(f);
  fputs(text, stderr);
  CHECK(r.step_s > 0 && isfinite(r.step_s));
  CHECK(r.gemm_s > 0 && r.bound_sps > 0);
  CHECK_NEAR(r.step_sps, 16 / r.step_s, 1e-6 * r.step_sps);
  /* 2 * (16*32*64 fwd0 + 16*10*32 fwd1 + 10*32*16 dW1 + 16*32*10 dX1 + 32*64*16 dW0) */
  CHECK_NEAR(r.gemm_flops, 2.0 * (2 * 16 * 32 * 64 + 3 * 16 * 10 * 32), 0.5);
  CHECK_NEAR(r.ratio, r.step_sps / r.bound_sps, 1e-9);
  CHECK_STR_CONTAINS(text, "mlp 64-32-10");
  CHECK_STR_CONTAINS(text, "dW L0");
  CHECK_STR_CONTAINS(text, "sgemm bound:");
  CHECK_STR_CONTAINS(text, "ratio step/bound:");
  CHECK_STR_CONTAINS(text, "blas: OpenBLAS");
  free(text);
  sg_opts_destroy(&o);
}
