/* cuda_none.c - sg_cuda.h in a build without CUDA: every call says so.
 * The harness refuses `device: cuda` before launch in such a build
 * (device.c); these only guard direct library use. */
#include "err.h"
#include "sg_cuda.h"

#define NO_CUDA() sg_err_set(SG_EUNSUPPORTED, "device: cuda: this build of sgdlab has no CUDA")

int sg_cuda_probe(int *count) {
  *count = 0;
  return NO_CUDA();
}
int sg_cuda_use(int dev) { return NO_CUDA(); }
const char *sg_cuda_nccl_version(void) { return "no NCCL"; }

int sg_cuda_alloc(float **d, size_t n, const char *what) {
  *d = NULL;
  return NO_CUDA();
}
void sg_cuda_free(float **d) {
  if (d) *d = NULL;
}
int sg_cuda_put(float *d, const float *h, size_t n) { return NO_CUDA(); }
int sg_cuda_get(float *h, const float *d, size_t n) { return NO_CUDA(); }
int sg_cuda_zero(float *d, size_t n) { return NO_CUDA(); }
int sg_cuda_sync(void) { return NO_CUDA(); }
int sg_cuda_gemms_new(sg_cuda_gemms_t **out, const sg_gemm_shape_t *g, size_t n, int tf32) {
  *out = NULL;
  return NO_CUDA();
}
int sg_cuda_gemms_run(sg_cuda_gemms_t *gs, size_t first, size_t count, int64_t reps) {
  return NO_CUDA();
}
void sg_cuda_gemms_destroy(sg_cuda_gemms_t **gs) {
  if (gs) *gs = NULL;
}
int sg_cuda_copy(float *ddst, const float *dsrc, size_t n) { return NO_CUDA(); }
int sg_cuda_sgd(float *dp, float *dg, float *dv, size_t n, float gscale, float lr, float wd,
                float mu) {
  return NO_CUDA();
}

int sg_cuda_wl_new(sg_cuda_wl_t **out, const sg_cuda_wl_desc_t *d) {
  *out = NULL;
  return NO_CUDA();
}
void sg_cuda_wl_destroy(sg_cuda_wl_t **cw) {
  if (cw) *cw = NULL;
}
size_t sg_cuda_wl_nparams(const sg_cuda_wl_t *cw) { return 0; }
int sg_cuda_wl_grad(sg_cuda_wl_t *cw, const float *dparams, float *dgrad, const uint32_t *idx,
                    int n, double *loss) {
  return NO_CUDA();
}
int sg_cuda_wl_set_ready(sg_cuda_wl_t *cw, sg_cuda_ready_fn fn, void *arg) { return NO_CUDA(); }
int sg_cuda_wl_loss(sg_cuda_wl_t *cw, double *loss) { return NO_CUDA(); }
size_t sg_cuda_wl_buckets(const sg_cuda_wl_t *cw, size_t bucket, sg_bucket_t *out, size_t cap) {
  return 0;
}
int sg_cuda_wl_grad_host(sg_cuda_wl_t *cw, const float *params, float *grad,
                         const uint32_t *idx, int n, double *loss) {
  return NO_CUDA();
}
int sg_cuda_wl_eval_host(sg_cuda_wl_t *cw, const float *params, double *loss_sum,
                         int64_t *correct) {
  return NO_CUDA();
}

int sg_cuda_stage_new(sg_cuda_stage_t **out, size_t chunk, int slots) {
  *out = NULL;
  return NO_CUDA();
}
int sg_cuda_stage_run(sg_cuda_stage_t *st, float *dbuf, size_t count, sg_host_reduce_fn reduce,
                      void *arg) {
  return NO_CUDA();
}
int sg_cuda_stage_buckets(sg_cuda_stage_t *st, size_t nbuckets) { return NO_CUDA(); }
int sg_cuda_stage_mark(sg_cuda_stage_t *st, size_t bucket) { return NO_CUDA(); }
int sg_cuda_stage_run_pieces(sg_cuda_stage_t *st, float *dbuf, const sg_stage_piece_t *pieces,
                             size_t npieces, sg_host_reduce_fn reduce, void *arg) {
  return NO_CUDA();
}
void sg_cuda_stage_destroy(sg_cuda_stage_t **st) {
  if (st) *st = NULL;
}

int sg_cuda_ring_new(sg_cuda_ring_t **out, sg_comm_t *c, size_t seg, int mode) {
  *out = NULL;
  return NO_CUDA();
}
int sg_cuda_ring_run(sg_cuda_ring_t *rg, float *dbuf, size_t count) { return NO_CUDA(); }
int sg_cuda_ring_run_on(sg_cuda_ring_t *rg, sg_cuda_coll_t *co, float *dbuf, size_t count) {
  return NO_CUDA();
}
int sg_cuda_ring_settle(sg_cuda_ring_t *rg) { return NO_CUDA(); }
int sg_cuda_ring_run_sharded(sg_cuda_ring_t *rg, float *dgrad, float *dparams, float *dmom,
                             size_t count, const sg_cuda_sgd_args_t *a) {
  return NO_CUDA();
}

int sg_cuda_coll_new(sg_cuda_coll_t **out, size_t nbuckets) {
  *out = NULL;
  return NO_CUDA();
}
int sg_cuda_coll_mark(sg_cuda_coll_t *co, size_t bucket) { return NO_CUDA(); }
int sg_cuda_coll_wait(sg_cuda_coll_t *co, size_t bucket) { return NO_CUDA(); }
int sg_cuda_coll_done(sg_cuda_coll_t *co, size_t bucket) { return NO_CUDA(); }
int sg_cuda_coll_join(sg_cuda_coll_t *co) { return NO_CUDA(); }
int sg_cuda_coll_times(sg_cuda_coll_t *co, size_t bucket, double *ready, double *end) {
  return NO_CUDA();
}
void sg_cuda_coll_destroy(sg_cuda_coll_t **co) {
  if (co) *co = NULL;
}
void sg_cuda_ring_set_timeout(sg_cuda_ring_t *rg, double seconds) {}
void sg_cuda_ring_destroy(sg_cuda_ring_t **rg) {
  if (rg) *rg = NULL;
}

int sg_cuda_nccl_id(void *id) { return NO_CUDA(); }
int sg_cuda_nccl_new(sg_cuda_nccl_t **out, const void *id, int rank, int size) {
  *out = NULL;
  return NO_CUDA();
}
int sg_cuda_nccl_run(sg_cuda_nccl_t *nc, float *dbuf, size_t count) { return NO_CUDA(); }
int sg_cuda_nccl_run_on(sg_cuda_nccl_t *nc, sg_cuda_coll_t *co, float *dbuf, size_t count) {
  return NO_CUDA();
}
int sg_cuda_nccl_reduce_scatter(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) {
  return NO_CUDA();
}
int sg_cuda_nccl_all_gather(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) { return NO_CUDA(); }
void sg_cuda_nccl_destroy(sg_cuda_nccl_t **nc) {
  if (nc) *nc = NULL;
}

#include "replica.h"
int sg_cuda_rdev_new(sg_rdev_t *out, size_t chunk) {
  (void)chunk;
  *out = (sg_rdev_t){0};
  return NO_CUDA();
}
