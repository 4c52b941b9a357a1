/* cuda_ring_rank.c - one rank of test_cuda_gpu's device-ring check, under
 * mpirun: the device ring on test_allreduce.c's inputs and counts, two
 * inbox sizes, staged and persistent; exit 0 when every element is exact.
 * `cuda_ring_rank --copy BYTES` (no mpirun) prints the device-to-device
 * copy bandwidth instead.  `cuda_ring_rank --dead` (mpirun -np 2): rank 1
 * never calls the persistent ring; rank 0's kernel must give up after its
 * 2-second limit and the call fail naming rank 1 (exit 0 when it does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"

#include "cuda/sg_cuda.h"
#include "device.h"
#include "err.h"
#include "bench_method.h"
#include "transport_new.h"

static long check_count(sg_comm_t *c, size_t seg, size_t count, int mode) {
  sg_cuda_ring_t *rg = NULL;
  float *x = malloc((count + 1) * sizeof *x), *d = NULL;
  long wrong = -1;
  if (!x) return -1;
  for (size_t i = 0; i < count; i++) x[i] = sg_bench_input(c->rank, i);
  if (sg_cuda_ring_new(&rg, c, seg, mode) < 0 || sg_cuda_alloc(&d, count + 1, "x") < 0 ||
      sg_cuda_put(d, x, count) < 0)
    goto out;
  for (int rep = 0; rep < 2; rep++) { /* twice: no leftovers between calls */
    if (rep && sg_cuda_put(d, x, count) < 0) goto out;
    if (sg_cuda_ring_run(rg, d, count) < 0) goto out;
  }
  if (sg_cuda_get(x, d, count) < 0) goto out;
  wrong = 0;
  for (size_t i = 0; i < count; i++) wrong += x[i] != sg_bench_expected(c->size, i);
out:
  if (wrong < 0) fprintf(stderr, "rank %d count %zu: %s\n", c->rank, count, sg_err_msg());
  sg_cuda_free(&d);
  sg_cuda_ring_destroy(&rg);
  free(x);
  return wrong;
}

/* The device copy bandwidth (the reference of the device allreduce
 * benchmark): cudaMemcpy device to device of `bytes`, median of 21. */
static int copy_bw(size_t bytes) {
  const size_t n = bytes / sizeof(float);
  float *a = NULL, *b = NULL;
  double t[21];
  if (sg_cuda_use(0) < 0 || sg_cuda_alloc(&a, n, "a") < 0 || sg_cuda_alloc(&b, n, "b") < 0 ||
      sg_cuda_zero(a, n) < 0 || sg_cuda_copy(b, a, n) < 0) {
    fprintf(stderr, "cuda_ring_rank --copy: %s\n", sg_err_msg());
    return 1;
  }
  for (int i = 0; i < 21; i++) {
    const double t0 = sg_now();
    if (sg_cuda_copy(b, a, n) < 0) return fprintf(stderr, "%s\n", sg_err_msg()), 1;
    t[i] = sg_now() - t0;
  }
  qsort(t, 21, sizeof *t, sg_cmp_double);
  printf("d2d-copy bytes %zu: median %.6f s, %.1f GB/s (bytes / time)\n", n * sizeof(float),
         t[10], (double)(n * sizeof(float)) / t[10] / 1e9);
  sg_cuda_free(&a);
  sg_cuda_free(&b);
  return 0;
}

/* A neighbour that never comes: rank 0's persistent call must end with
 * the error, within its limit, and not hang the kernel.  1 = wrong. */
static int dead_peer(sg_comm_t *c) {
  sg_cuda_ring_t *rg = NULL;
  float *d = NULL;
  int bad = 0;
  const size_t count = (1u << 20) + 3;
  if (sg_cuda_ring_new(&rg, c, 1u << 16, SG_CUDA_RING_PERSISTENT) < 0 ||
      sg_cuda_alloc(&d, count, "x") < 0 || sg_cuda_zero(d, count) < 0) {
    fprintf(stderr, "dead-peer rank %d: setup: %s\n", c->rank, sg_err_msg());
    bad = 1;
  } else if (c->rank == 0) {
    sg_cuda_ring_set_timeout(rg, 2.0);
    const double t0 = sg_now();
    const int rc = sg_cuda_ring_run(rg, d, count);
    const double dt = sg_now() - t0;
    bad = rc >= 0 || !strstr(sg_err_msg(), "rank 1") || !strstr(sg_err_msg(), "waited") ||
          dt < 1.5 || dt > 20;
    fprintf(stderr, "dead-peer: %s after %.2f s: %s\n", bad ? "WRONG" : "OK", dt,
            rc < 0 ? sg_err_msg() : "the call succeeded");
  }
  /* rank 1 keeps its inbox mapped until rank 0's kernel has ended */
  if (sg_barrier(c) < 0) bad = 1;
  sg_cuda_free(&d);
  sg_cuda_ring_destroy(&rg);
  return bad;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--copy")) return copy_bw((size_t)strtoull(argv[2], NULL, 0));
  const int dead = argc == 2 && !strcmp(argv[1], "--dead");
  sg_comm_t *c = NULL;
  int count = 0, lr = 0, ls = 0;
  if (sg_comm_mpi_new(&c, 60) < 0 || sg_cuda_probe(&count) < 0) {
    fprintf(stderr, "cuda_ring_rank: %s\n", sg_err_msg());
    return 1;
  }
  sg_device_local_rank(c, &lr, &ls);
  if (sg_cuda_use(sg_device_pick(lr, count, 0)) < 0) return 1;
  if (dead) {
    const int bad = dead_peer(c);
    sg_comm_destroy(&c);
    sg_mpi_finalize();
    return bad;
  }
  const int n = c->size;
  const size_t counts[] = {0, 1, (size_t)n - 1, (size_t)n + 1, 1001, (1u << 20) + 3};
  long bad = 0;
  for (int mode = SG_CUDA_RING_STAGED; mode <= SG_CUDA_RING_PERSISTENT; mode++)
    for (size_t j = 0; j < sizeof counts / sizeof *counts; j++) {
      long w = check_count(c, 1u << 18, counts[j], mode);
      if (counts[j] <= 1001 && w == 0) w = check_count(c, 2, counts[j], mode);
      if (w != 0) fprintf(stderr, "device ring (%s) N=%d rank %d count %zu: %ld wrong\n",
                          mode ? "persistent" : "staged", n, c->rank, counts[j], w);
      bad += w != 0;
    }
  sg_comm_destroy(&c);
  sg_mpi_finalize();
  return bad ? 1 : 0;
}
