/* test_cuda_gpu.c - the CUDA parts on a real device; skips, visibly
 * ("SKIP: no CUDA device: <why>", CTest: Skipped), when none is present.
 *
 *  - the device gradient (cuBLAS + kernels) equals the CPU model's to
 *    1e-4 relative (max |diff| / max |g|), MLP and softmax, through the
 *    host-vector and the device-vector entry points; evaluation too;
 *  - the device SGD step equals optim.c's (momentum, weight decay);
 *  - the device ring (CUDA IPC, ring primitives as kernels) is exact on
 *    test_allreduce.c's inputs and counts, N = 2..4 processes (mpirun;
 *    ranks may share a GPU);
 *  - the persistent ring with a neighbour that never calls: the kernel
 *    gives up after its limit and the call fails naming the neighbour;
 *  - training through sgdlab matches `local` on the CPU: allreduce with
 *    host-staged ring and with cuda-ring, and local itself on the device.
 */
#include "test.h"

#include <stdint.h>

#include "cuda/sg_cuda.h"
#include "err.h"
#include "run_util.h"
#include "workload.h"

#define SKIP_CODE 77

static int g_count;

static void gpu_or_skip(void) {
  if (sg_cuda_probe(&g_count) == 0) return;
  printf("SKIP: no CUDA device: %s\n", sg_err_msg());
  fprintf(stderr, "SKIP: no CUDA device: %s\n", sg_err_msg());
  fflush(NULL);
  exit(SKIP_CODE);
}

static sg_opts_t *opts(const char *model, const char *device) {
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "dataset", "synthetic");
  sg_opts_set(o, "features", "50");
  sg_opts_set(o, "train_samples", "512");
  sg_opts_set(o, "test_samples", "300");
  sg_opts_set(o, "model", model);
  sg_opts_set(o, "hidden", "32,16");
  sg_opts_set(o, "batch", "64");
  sg_opts_set(o, "seed", "7");
  sg_opts_set(o, "device", device);
  return o;
}

static double rel_diff(const float *a, const float *b, size_t n) {
  double md = 0, mb = 0;
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]);
    if (d > md || d != d) md = d;
    if (fabs(b[i]) > mb) mb = fabs(b[i]);
  }
  return mb > 0 ? md / mb : md;
}

static void grad_case(const char *model) {
  sg_opts_t *oc = opts(model, "cpu"), *og = opts(model, "cuda");
  sg_workload_t *wc = NULL, *wg = NULL;
  CHECK_OK(sg_workload_new(&wc, oc, 0, 1, SG_WL_ALL));
  CHECK_OK(sg_workload_new(&wg, og, 0, 1, SG_WL_ALL));
  CHECK(sg_workload_on_device(wg) && !sg_workload_on_device(wc));
  const size_t n = sg_workload_nparams(wc);
  float *p = malloc(n * 4), *gc = malloc(n * 4), *gg = malloc(n * 4), *gd = malloc(n * 4);
  float *dp = NULL, *dg = NULL;
  CHECK_OK(sg_workload_init_params(wc, p));
  for (size_t i = 0; i < n; i++) p[i] += 0.01f * (float)((i * 7919) % 13) - 0.06f; /* not all zero */
  for (int64_t step = 0; step < 3; step++) {
    double lc, lg, ld;
    CHECK_OK(sg_workload_grad(wc, p, gc, step, &lc));
    CHECK_OK(sg_workload_grad(wg, p, gg, step, &lg));
    CHECK_OK(sg_cuda_alloc(&dp, n, "p"));
    CHECK_OK(sg_cuda_alloc(&dg, n, "g"));
    CHECK_OK(sg_cuda_put(dp, p, n));
    CHECK_OK(sg_workload_grad_device(wg, dp, dg, step, &ld));
    CHECK_OK(sg_cuda_get(gd, dg, n));
    sg_cuda_free(&dp), sg_cuda_free(&dg);
    double r = rel_diff(gg, gc, n), rd = rel_diff(gd, gc, n);
    fprintf(stderr, "%s step %lld: loss cpu %.6f gpu %.6f, grad rel diff %.2g (device API %.2g)\n",
            model, (long long)step, lc, lg, r, rd);
    CHECK_MSG(r <= 1e-4 && rd <= 1e-4, "%s: grad differs: %g / %g", model, r, rd);
    CHECK_NEAR(lg, lc, 1e-4 * fabs(lc) + 1e-6);
    CHECK_NEAR(ld, lc, 1e-4 * fabs(lc) + 1e-6);
  }
  sg_eval_t ec, eg;
  CHECK_OK(sg_workload_evaluate(wc, p, &ec));
  CHECK_OK(sg_workload_evaluate(wg, p, &eg));
  CHECK_NEAR(eg.test_loss, ec.test_loss, 1e-4 * fabs(ec.test_loss));
  CHECK_NEAR(eg.test_acc, ec.test_acc, 2.0 / 300);
  free(p), free(gc), free(gg), free(gd);
  sg_workload_destroy(&wc), sg_workload_destroy(&wg);
  sg_opts_destroy(&oc), sg_opts_destroy(&og);
}

TEST(grad_mlp_matches_cpu) {
  gpu_or_skip();
  grad_case("mlp");
}

TEST(grad_softmax_matches_cpu) {
  gpu_or_skip();
  grad_case("softmax");
}

TEST(sgd_matches_optim) {
  gpu_or_skip();
  const size_t n = 1001;
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "lr", "0.1");
  sg_opts_set(o, "momentum", "0.9");
  sg_opts_set(o, "weight_decay", "0.01");
  sg_optim_t *opt = NULL;
  CHECK_OK(sg_optim_new(&opt, o, n, 10, 100));
  float p[1001], g[1001], gd[1001], out[1001];
  float *dp = NULL, *dg = NULL, *dv = NULL;
  for (size_t i = 0; i < n; i++) p[i] = 0.001f * (float)(i % 17), g[i] = 0.01f * (float)(i % 5);
  CHECK_OK(sg_cuda_alloc(&dp, n, "p"));
  CHECK_OK(sg_cuda_alloc(&dg, n, "g"));
  CHECK_OK(sg_cuda_alloc(&dv, n, "v"));
  CHECK_OK(sg_cuda_put(dp, p, n));
  CHECK_OK(sg_cuda_zero(dv, n));
  for (int step = 0; step < 3; step++) {
    CHECK_OK(sg_cuda_put(dg, g, n));
    CHECK_OK(sg_cuda_sgd(dp, dg, dv, n, 0.5f, (float)sg_optim_lr(opt, step), 0.01f, 0.9f));
    for (size_t i = 0; i < n; i++) gd[i] = g[i] * 0.5f;
    sg_optim_apply(opt, p, gd, step);
  }
  CHECK_OK(sg_cuda_get(out, dp, n));
  CHECK_MSG(rel_diff(out, p, n) <= 1e-6, "sgd differs by %g", rel_diff(out, p, n));
  sg_cuda_free(&dp), sg_cuda_free(&dg), sg_cuda_free(&dv);
  sg_optim_destroy(&opt);
  sg_opts_destroy(&o);
}

TEST(device_ring_exact) {
  gpu_or_skip();
  char cmd[1024];
  for (int n = 2; n <= 4; n++) {
    snprintf(cmd, sizeof cmd, "mpirun --allow-run-as-root --oversubscribe -np %d '%s/tests/cuda_ring_rank' >&2",
             n, getenv("SGDLAB_BIN_DIR") ? getenv("SGDLAB_BIN_DIR") : ".");
    CHECK_MSG(ru_sh(cmd) == 0, "device ring N=%d: not exact (or failed)", n);
  }
}

TEST(device_ring_dead_peer_times_out) {
  gpu_or_skip();
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "timeout 60 mpirun --allow-run-as-root --oversubscribe -np 2 '%s/tests/cuda_ring_rank' --dead >&2",
           getenv("SGDLAB_BIN_DIR") ? getenv("SGDLAB_BIN_DIR") : ".");
  CHECK_MSG(ru_sh(cmd) == 0, "persistent ring with a silent neighbour: no clean timeout");
}

TEST(training_matches_local) {
  gpu_or_skip();
  static const char *const variants[][2] = {
      {"{engine: local, device: cuda}", "local on cuda"},
      {"{engine: allreduce, algorithm: ring, device: cuda, stage_chunk: 64K}", "allreduce staged ring on cuda"},
      {"{engine: allreduce, algorithm: cuda-ring, device: cuda, segment: 64K}", "allreduce cuda-ring"},
      {"{engine: allreduce, algorithm: cuda-ring, cuda_ring: persistent, device: cuda, segment: 64K}",
       "allreduce cuda-ring persistent"},
      {"{engine: allreduce, algorithm: nccl, device: cuda}", "allreduce nccl"},
  };
  /* nccl needs a GPU per rank and a build with NCCL */
  size_t nv = g_count >= 2 && sg_cuda_nccl_version()[0] == 'N' ? 5 : 4;
  if (nv == 4) fprintf(stderr, "nccl variant not run: %d GPU(s), %s\n", g_count, sg_cuda_nccl_version());
  ru_equivalence_case("cudarun", "cuda-test", 2, variants, nv, 1e-3);
}
