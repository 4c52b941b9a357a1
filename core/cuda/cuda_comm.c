/* cuda_comm.c - allreduce of device vectors: host-staged (stage_plan.h),
 * the device ring within a host (ring_prims.h) and NCCL.  The schedules
 * are plain C tested on CPU; this file only maps their steps onto CUDA
 * copies, events, IPC handles and kernels. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cuda_impl.h"
#include "err.h"
#include "ring_prims.h"
#include "sg_cuda_comm.h"
#include "sg_cuda_rt.h"
#include "stage_plan.h"
#include "replica.h"
#include "workload.h"

#ifdef SG_HAVE_NCCL
#include "cuda_dl.h"
#endif

/* A CUDA runtime call inside a function with `int rc` and a `fail:`
 * label: on an error, rc names the call and control goes to fail. */
#define TRYCU(call)                \
  do {                             \
    cudaError_t e_ = (call);       \
    if (e_ != cudaSuccess) {       \
      rc = sg_cuda_err(e_, #call); \
      goto fail;                   \
    }                              \
  } while (0)

/* ---- host-staged ----------------------------------------------------- */

#define STAGE_MAX_SLOTS 8

struct sg_cuda_stage {
  size_t chunk;
  int slots;
  float *pinned;                        /* slots x chunk floats */
  cudaStream_t down, up;
  cudaEvent_t down_done[STAGE_MAX_SLOTS], up_done[STAGE_MAX_SLOTS], start;
  int nev;
  cudaEvent_t *bucket_ev;               /* overlap: one per bucket */
  size_t nbucket_ev;
  float *dbuf;                          /* of the call in progress */
  sg_host_reduce_fn reduce;
  void *arg;
};

int sg_cuda_stage_new(sg_cuda_stage_t **out, size_t chunk, int slots) {
  int rc = SG_OK;
  if (slots < 2 || slots > STAGE_MAX_SLOTS || chunk == 0)
    return sg_err_set(SG_EINVAL, "staging: %d slots of %zu floats", slots, chunk);
  sg_cuda_stage_t *st = calloc(1, sizeof *st);
  if (!st) return SG_ENOMEM;
  st->chunk = chunk;
  st->slots = slots;
  if (cudaMallocHost((void **)&st->pinned, (size_t)slots * chunk * sizeof(float)) != cudaSuccess) {
    st->pinned = NULL;
    rc = sg_err_set(SG_ENOMEM, "pinned host memory for %d staging slots of %zu floats", slots,
                    chunk);
    goto fail;
  }
  TRYCU(cudaStreamCreateWithFlags(&st->down, cudaStreamNonBlocking));
  TRYCU(cudaStreamCreateWithFlags(&st->up, cudaStreamNonBlocking));
  TRYCU(cudaEventCreateWithFlags(&st->start, cudaEventDisableTiming));
  for (; st->nev < slots; st->nev++) {
    TRYCU(cudaEventCreateWithFlags(&st->down_done[st->nev], cudaEventDisableTiming));
    TRYCU(cudaEventCreateWithFlags(&st->up_done[st->nev], cudaEventDisableTiming));
  }
  *out = st;
  return SG_OK;
fail:
  sg_cuda_stage_destroy(&st);
  return rc;
}

void sg_cuda_stage_destroy(sg_cuda_stage_t **pst) {
  if (!pst || !*pst) return;
  sg_cuda_stage_t *st = *pst;
  for (int i = 0; i < st->nev; i++) {
    cudaEventDestroy(st->down_done[i]);
    cudaEventDestroy(st->up_done[i]);
  }
  for (size_t i = 0; i < st->nbucket_ev; i++) cudaEventDestroy(st->bucket_ev[i]);
  free(st->bucket_ev);
  if (st->start) cudaEventDestroy(st->start);
  if (st->down) cudaStreamDestroy(st->down);
  if (st->up) cudaStreamDestroy(st->up);
  if (st->pinned) cudaFreeHost(st->pinned);
  free(st);
  *pst = NULL;
}

static float *slot_ptr(sg_cuda_stage_t *st, int slot) { return st->pinned + (size_t)slot * st->chunk; }

static int st_down(void *ctx, int slot, size_t off, size_t len, long after_up) {
  sg_cuda_stage_t *st = ctx;
  if (after_up >= 0) SG_CU(cudaStreamWaitEvent(st->down, st->up_done[slot], 0));
  if (len) /* len 0: a one-way upload's ordering only (stage_plan.h) */
    SG_CU(cudaMemcpyAsync(slot_ptr(st, slot), st->dbuf + off, len * sizeof(float),
                          cudaMemcpyDeviceToHost, st->down));
  SG_CU(cudaEventRecord(st->down_done[slot], st->down));
  return SG_OK;
}

static int st_wait_down(void *ctx, int slot) {
  sg_cuda_stage_t *st = ctx;
  SG_CU(cudaEventSynchronize(st->down_done[slot]));
  return SG_OK;
}

static int st_reduce(void *ctx, int slot, size_t len) {
  sg_cuda_stage_t *st = ctx;
  return st->reduce(st->arg, slot_ptr(st, slot), len);
}

static int st_up(void *ctx, int slot, size_t off, size_t len, long chunk) {
  sg_cuda_stage_t *st = ctx;
  SG_CU(cudaMemcpyAsync(st->dbuf + off, slot_ptr(st, slot), len * sizeof(float),
                        cudaMemcpyHostToDevice, st->up));
  SG_CU(cudaEventRecord(st->up_done[slot], st->up));
  return SG_OK;
}

static int st_finish(void *ctx) {
  sg_cuda_stage_t *st = ctx;
  SG_CU(cudaStreamSynchronize(st->up));
  return SG_OK;
}

int sg_cuda_stage_run(sg_cuda_stage_t *st, float *dbuf, size_t count, sg_host_reduce_fn reduce,
                      void *arg) {
  sg_stage_plan_t p;
  cudaStream_t s = NULL;
  SG_CHECK(sg_stage_plan(&p, count, st->chunk, st->slots));
  SG_CHECK(sg_cuda_stream(&s));
  /* the copies down start after the work already queued (the gradient) */
  SG_CU(cudaEventRecord(st->start, s));
  SG_CU(cudaStreamWaitEvent(st->down, st->start, 0));
  st->dbuf = dbuf;
  st->reduce = reduce;
  st->arg = arg;
  const sg_stage_ops_t ops = {st, st_down, st_wait_down, st_reduce, st_up, st_finish, NULL, NULL};
  return sg_stage_run(&p, &ops);
}

/* ---- overlap with backprop: pieces of buckets ------------------------ */

int sg_cuda_stage_buckets(sg_cuda_stage_t *st, size_t nbuckets) {
  if (st->nbucket_ev) return sg_err_set(SG_EINVAL, "staging: buckets already set");
  st->bucket_ev = calloc(nbuckets ? nbuckets : 1, sizeof *st->bucket_ev);
  if (!st->bucket_ev) return sg_err_set(SG_ENOMEM, "staging: no memory for %zu events", nbuckets);
  for (; st->nbucket_ev < nbuckets; st->nbucket_ev++)
    SG_CU(cudaEventCreateWithFlags(&st->bucket_ev[st->nbucket_ev], cudaEventDisableTiming));
  return SG_OK;
}

int sg_cuda_stage_mark(sg_cuda_stage_t *st, size_t bucket) {
  cudaStream_t s = NULL;
  if (bucket >= st->nbucket_ev)
    return sg_err_set(SG_EINVAL, "staging: bucket %zu of %zu", bucket, st->nbucket_ev);
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaEventRecord(st->bucket_ev[bucket], s));
  return SG_OK;
}

static int st_ready(void *ctx, long bucket) {
  sg_cuda_stage_t *st = ctx;
  if (bucket < 0 || (size_t)bucket >= st->nbucket_ev)
    return sg_err_set(SG_EINVAL, "staging: bucket %ld of %zu", bucket, st->nbucket_ev);
  SG_CU(cudaStreamWaitEvent(st->down, st->bucket_ev[bucket], 0));
  return SG_OK;
}

int sg_cuda_stage_run_pieces(sg_cuda_stage_t *st, float *dbuf, const sg_stage_piece_t *pieces,
                             size_t npieces, sg_host_reduce_fn reduce, void *arg) {
  sg_stage_plan_t p;
  SG_CHECK(sg_stage_plan_pieces(&p, pieces, npieces, st->chunk, st->slots));
  /* no wait for the whole stream: each bucket's first copy waits for its
   * event (st_ready), recorded as backward issued the bucket's last op */
  st->dbuf = dbuf;
  st->reduce = reduce;
  st->arg = arg;
  const sg_stage_ops_t ops = {st, st_down, st_wait_down, st_reduce, st_up, st_finish, NULL,
                              st_ready};
  return sg_stage_run(&p, &ops);
}

/* ---- overlap of a device collective: events and a comm stream -------- */

struct sg_cuda_coll {
  cudaStream_t comm;
  cudaEvent_t *ready, *done, joined;
  size_t nb, nev; /* buckets; events made (of 2 nb) */
};

int sg_cuda_coll_new(sg_cuda_coll_t **out, size_t nbuckets) {
  int rc = SG_OK;
  sg_cuda_coll_t *co = calloc(1, sizeof *co);
  if (!co) return SG_ENOMEM;
  co->nb = nbuckets;
  co->ready = calloc(nbuckets ? nbuckets : 1, sizeof *co->ready);
  co->done = calloc(nbuckets ? nbuckets : 1, sizeof *co->done);
  if (!co->ready || !co->done) {
    rc = sg_err_set(SG_ENOMEM, "overlap: no memory for %zu events", 2 * nbuckets);
    goto fail;
  }
  TRYCU(cudaStreamCreateWithFlags(&co->comm, cudaStreamNonBlocking));
  TRYCU(cudaEventCreateWithFlags(&co->joined, cudaEventDisableTiming));
  for (; co->nev < 2 * nbuckets; co->nev++) {
    cudaEvent_t *e = co->nev < nbuckets ? &co->ready[co->nev] : &co->done[co->nev - nbuckets];
    TRYCU(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
  *out = co;
  return SG_OK;
fail:
  sg_cuda_coll_destroy(&co);
  return rc;
}

void sg_cuda_coll_destroy(sg_cuda_coll_t **pco) {
  if (!pco || !*pco) return;
  sg_cuda_coll_t *co = *pco;
  for (size_t i = 0; i < co->nev; i++)
    cudaEventDestroy(i < co->nb ? co->ready[i] : co->done[i - co->nb]);
  if (co->joined) cudaEventDestroy(co->joined);
  if (co->comm) cudaStreamDestroy(co->comm);
  free(co->ready);
  free(co->done);
  free(co);
  *pco = NULL;
}

static int coll_bucket(const sg_cuda_coll_t *co, size_t b) {
  if (b >= co->nb) return sg_err_set(SG_EINVAL, "overlap: bucket %zu of %zu", b, co->nb);
  return SG_OK;
}

int sg_cuda_coll_mark(sg_cuda_coll_t *co, size_t b) {
  cudaStream_t s = NULL;
  SG_CHECK(coll_bucket(co, b));
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaEventRecord(co->ready[b], s));
  return SG_OK;
}

int sg_cuda_coll_wait(sg_cuda_coll_t *co, size_t b) {
  SG_CHECK(coll_bucket(co, b));
  SG_CU(cudaStreamWaitEvent(co->comm, co->ready[b], 0));
  return SG_OK;
}

int sg_cuda_coll_done(sg_cuda_coll_t *co, size_t b) {
  SG_CHECK(coll_bucket(co, b));
  SG_CU(cudaEventRecord(co->done[b], co->comm));
  return SG_OK;
}

int sg_cuda_coll_join(sg_cuda_coll_t *co) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaEventRecord(co->joined, co->comm));
  SG_CU(cudaStreamWaitEvent(s, co->joined, 0));
  return SG_OK;
}

int sg_cuda_coll_times(sg_cuda_coll_t *co, size_t b, double *ready, double *end) {
  SG_CHECK(coll_bucket(co, b));
  SG_CU(cudaEventSynchronize(co->ready[b]));
  *ready = sg_now();
  SG_CU(cudaEventSynchronize(co->done[b]));
  *end = sg_now();
  return SG_OK;
}

/* ---- the device ring within a host ---------------------------------- */

struct sg_cuda_ring {
  sg_comm_t *c;
  size_t seg;
  int persistent;     /* SG_CUDA_RING_PERSISTENT: one kernel per call */
  int ran;            /* persistent: a call completed (the neighbours may write) */
  int broken;         /* persistent: a lane gave up waiting; the ring is unusable */
  uint64_t limit_ns;  /* persistent: the longest wait for a neighbour's flag */
  uint64_t *fail, *dfail; /* persistent: per lane {what, step, wanted, seen}, mapped host memory */
  float *inbox;       /* this rank's: 2 slots of seg floats, written by the left
                         (persistent: chans x slots x seg, then the flags) */
  float *right_inbox; /* the right neighbour's, mapped by CUDA IPC */
  float *left_buf;    /* persistent, N > 2: the left neighbour's, for its ack flags */
  uint64_t *flags, *rflags, *lflags; /* persistent: mine, the right's, the left's */
  float *x;           /* the call's vector */
  cudaStream_t s;     /* the call's stream: the process stream, or a comm stream */
  float *p, *v;       /* sharded: the parameters, the packed momentum */
  sg_cuda_sgd_args_t sgd;
};

enum { PRING_LANES = SG_CUDA_PRING_CHANS * SG_CUDA_PRING_PARTS };

/* Persistent: the flag words start at a 128-byte boundary after the slots. */
static size_t pring_flag_off(size_t seg) {
  size_t f = (size_t)SG_CUDA_PRING_CHANS * SG_CUDA_PRING_SLOTS * seg;
  return (f + 31) / 32 * 32;
}

static int ipc_open(float **mapped, const cudaIpcMemHandle_t *h, const char *whose) {
  cudaError_t e = cudaIpcOpenMemHandle((void **)mapped, *h, cudaIpcMemLazyEnablePeerAccess);
  if (e == cudaSuccess) return SG_OK;
  *mapped = NULL;
  char what[96];
  snprintf(what, sizeof what, "cudaIpcOpenMemHandle (the %s neighbour's inbox)", whose);
  return sg_cuda_err(e, what);
}

/* Map the right neighbour's inbox and, persistent with N > 2, the left's
 * (with N = 2 they are one buffer, opened once). */
static int ring_map(sg_cuda_ring_t *rg) {
  sg_comm_t *c = rg->c;
  cudaIpcMemHandle_t mine, right, left;
  SG_CU(cudaIpcGetMemHandle(&mine, rg->inbox));
  SG_CHECK(sg_dring_exchange(c, &mine, &right, sizeof mine));
  SG_CHECK(ipc_open(&rg->right_inbox, &right, "right"));
  if (!rg->persistent) return SG_OK;
  const size_t fo = pring_flag_off(rg->seg);
  rg->flags = (uint64_t *)(rg->inbox + fo);
  rg->rflags = (uint64_t *)(rg->right_inbox + fo);
  rg->lflags = rg->rflags;
  if (c->size == 2) return SG_OK;
  SG_CHECK(sg_sendrecv(c, (c->rank + 1) % c->size, SG_DRING_TAG_HANDLE_LEFT, &mine, sizeof mine,
                       (c->rank + c->size - 1) % c->size, SG_DRING_TAG_HANDLE_LEFT, &left,
                       sizeof left, NULL));
  SG_CHECK(ipc_open(&rg->left_buf, &left, "left"));
  rg->lflags = (uint64_t *)(rg->left_buf + fo);
  return SG_OK;
}

/* The lanes' failure records: pinned host memory the kernel writes. */
static int pring_fail_new(sg_cuda_ring_t *rg) {
  const size_t bytes = 4 * (size_t)PRING_LANES * sizeof(uint64_t);
  rg->limit_ns = (uint64_t)SG_CUDA_PRING_TIMEOUT_MS * 1000000u;
  if (cudaHostAlloc((void **)&rg->fail, bytes, cudaHostAllocMapped) != cudaSuccess) {
    rg->fail = NULL;
    return sg_err_set(SG_ENOMEM, "pinned host memory for the device ring's failure records");
  }
  memset(rg->fail, 0, bytes);
  SG_CU(cudaHostGetDevicePointer((void **)&rg->dfail, rg->fail, 0));
  return SG_OK;
}

void sg_cuda_ring_set_timeout(sg_cuda_ring_t *rg, double seconds) {
  if (seconds > 0) rg->limit_ns = (uint64_t)(seconds * 1e9);
}

int sg_cuda_ring_new(sg_cuda_ring_t **out, sg_comm_t *c, size_t seg, int mode) {
  int rc;
  sg_cuda_ring_t *rg = calloc(1, sizeof *rg);
  if (!rg) return SG_ENOMEM;
  rg->c = c;
  rg->seg = seg ? seg : 1;
  rg->persistent = mode == SG_CUDA_RING_PERSISTENT;
  for (int r = 0; r < c->size; r++)
    if (strncmp(c->hosts[r], c->hosts[c->rank], sizeof c->hosts[r]) != 0) {
      rc = sg_err_set(SG_ECONFIG, "algorithm cuda-ring: every rank must be on one host; rank %d "
                      "is on %s, rank %d on %s", c->rank, c->hosts[c->rank], r, c->hosts[r]);
      goto fail;
    }
  if (rg->persistent) {
    const size_t nf = pring_flag_off(rg->seg) + 2 * (size_t)PRING_LANES * SG_PRING_FLAG_STRIDE;
    SG_TRY(sg_cuda_alloc(&rg->inbox, nf, "the device ring's inbox and flags"));
    SG_TRY(sg_cuda_zero(rg->inbox, nf)); /* every counter starts at 0 */
    SG_TRY(pring_fail_new(rg));
  } else {
    SG_TRY(sg_cuda_alloc(&rg->inbox, 2 * rg->seg, "the device ring's inbox"));
  }
  if (c->size > 1) SG_TRY(ring_map(rg));
  SG_TRY(sg_barrier(c)); /* every mapping is open before anyone writes */
  *out = rg;
  return SG_OK;
fail:
  sg_cuda_ring_destroy(&rg);
  return rc;
}

void sg_cuda_ring_destroy(sg_cuda_ring_t **prg) {
  if (!prg || !*prg) return;
  sg_cuda_ring_t *rg = *prg;
  /* persistent: the right neighbour's kernel posts its last ACK into this
   * rank's flags after this rank's kernel ended; free only once every
   * rank's last call is over */
  if (rg->ran && !rg->broken) (void)sg_barrier(rg->c);
  if (rg->fail) cudaFreeHost(rg->fail);
  if (rg->left_buf) cudaIpcCloseMemHandle(rg->left_buf);
  if (rg->right_inbox) cudaIpcCloseMemHandle(rg->right_inbox);
  sg_cuda_free(&rg->inbox);
  free(rg);
  *prg = NULL;
}

/* sharded: the allgather's primitives move the parameters */
static int ring_apply(void *ctx, int op, size_t off, size_t len, int in_slot, int out_slot) {
  sg_cuda_ring_t *rg = ctx;
  const float *in = rg->inbox + (size_t)in_slot * rg->seg;
  float *out = rg->right_inbox ? rg->right_inbox + (size_t)out_slot * rg->seg : NULL;
  float *x = rg->p && (op == SG_PRIM_RECV_COPY_SEND || op == SG_PRIM_RECV) ? rg->p : rg->x;
  SG_CU(sg_k_prim(op, x + off, in, out, len, rg->s));
  /* the neighbour reads `out` once told: the writes must be complete */
  SG_CU(cudaStreamSynchronize(rg->s));
  return SG_OK;
}

/* The owner's step (ring_prims.h): the sum, sg_cuda_sgd's kernel on the
 * range, the parameters to the right; one synchronization. */
static int ring_owner(void *ctx, size_t off, size_t len, size_t upd, size_t soff, int in_slot,
                      int out_slot) {
  sg_cuda_ring_t *rg = ctx;
  const sg_cuda_sgd_args_t *a = &rg->sgd;
  const float *in = rg->inbox + (size_t)in_slot * rg->seg;
  float *out = rg->right_inbox + (size_t)out_slot * rg->seg;
  SG_CU(sg_k_prim(SG_PRIM_RECV_REDUCE_COPY, rg->x + off, in, NULL, len, rg->s));
  if (upd)
    SG_CU(sg_k_sgd(rg->p + off, rg->x + off, a->mu > 0 ? rg->v + soff : NULL, upd, a->gscale,
                   a->lr, a->wd, a->mu, rg->s));
  SG_CU(sg_k_prim(SG_PRIM_SEND, rg->p + off, NULL, out, len, rg->s));
  SG_CU(cudaStreamSynchronize(rg->s));
  return SG_OK;
}

/* A lane that gave up: the error, naming the neighbour it waited for. */
static int pring_failed(sg_cuda_ring_t *rg) {
  for (int ln = 0; ln < PRING_LANES; ln++) {
    const volatile uint64_t *f = rg->fail + 4 * (size_t)ln;
    if (f[0] == 0) continue;
    const int n = rg->c->size, r = rg->c->rank, ready = f[0] == 1;
    rg->broken = 1;
    return sg_err_set(SG_EIO, "cuda-ring persistent: rank %d (lane %d, step %llu) waited %.1f s "
                      "for rank %d's %s flag (wanted %llu, saw %llu): that rank is gone or stuck",
                      r, ln, (unsigned long long)f[1], (double)rg->limit_ns / 1e9,
                      ready ? (r + n - 1) % n : (r + 1) % n, ready ? "ready" : "ack",
                      (unsigned long long)f[2], (unsigned long long)f[3]);
  }
  return SG_OK;
}

/* One launch on rg->s: the kernel's flags do the flow control; the host
 * waits only for the stream's end, then reads the lanes' failure records
 * (sg_cuda_ring_settle). */
static int pring_launch(sg_cuda_ring_t *rg, float *dbuf, size_t count) {
  if (rg->broken)
    return sg_err_set(SG_EIO, "cuda-ring persistent: unusable after a neighbour did not answer");
  const sg_pring_t p = {.n = rg->c->size, .r = rg->c->rank, .chans = SG_CUDA_PRING_CHANS,
                        .parts = SG_CUDA_PRING_PARTS, .slots = SG_CUDA_PRING_SLOTS,
                        .count = count, .seg = rg->seg};
  SG_CU(sg_k_pring(&p, dbuf, rg->inbox, rg->right_inbox, rg->flags, rg->rflags, rg->lflags,
                   rg->limit_ns, rg->dfail, rg->s));
  return SG_OK;
}

int sg_cuda_ring_run(sg_cuda_ring_t *rg, float *dbuf, size_t count) {
  SG_CHECK(sg_cuda_stream(&rg->s));
  if (rg->persistent) {
    if (rg->c->size == 1) return SG_OK;
    SG_CHECK(pring_launch(rg, dbuf, count)); /* stream-ordered after the gradient */
    SG_CHECK(sg_cuda_sync());
    return sg_cuda_ring_settle(rg);
  }
  SG_CHECK(sg_cuda_sync()); /* the gradient is complete before it travels */
  rg->x = dbuf;
  rg->p = NULL;
  const sg_dring_plan_t p = {.count = count, .seg = rg->seg};
  const sg_dring_ops_t ops = {rg, ring_apply, NULL};
  return sg_dring_run(rg->c, &p, &ops);
}

int sg_cuda_ring_run_on(sg_cuda_ring_t *rg, sg_cuda_coll_t *co, float *dbuf, size_t count) {
  rg->s = co->comm;
  if (rg->persistent) return rg->c->size == 1 ? SG_OK : pring_launch(rg, dbuf, count);
  rg->x = dbuf;
  rg->p = NULL;
  const sg_dring_plan_t p = {.count = count, .seg = rg->seg};
  const sg_dring_ops_t ops = {rg, ring_apply, NULL};
  return sg_dring_run(rg->c, &p, &ops);
}

int sg_cuda_ring_settle(sg_cuda_ring_t *rg) {
  if (!rg->persistent || rg->c->size == 1) return SG_OK;
  SG_CHECK(pring_failed(rg));
  rg->ran = 1;
  return SG_OK;
}

int sg_cuda_ring_run_sharded(sg_cuda_ring_t *rg, float *dgrad, float *dparams, float *dmom,
                             size_t count, const sg_cuda_sgd_args_t *a) {
  if (rg->persistent)
    return sg_err_set(SG_ECONFIG, "update: sharded with cuda-ring needs cuda_ring: staged");
  SG_CHECK(sg_cuda_stream(&rg->s));
  SG_CHECK(sg_cuda_sync()); /* the gradient is complete before it travels */
  rg->x = dgrad;
  rg->p = dparams;
  rg->v = dmom;
  rg->sgd = *a;
  const sg_dring_plan_t p = {.count = count, .seg = rg->seg, .sharded = 1};
  const sg_dring_ops_t ops = {rg, ring_apply, ring_owner};
  int rc = sg_dring_run(rg->c, &p, &ops);
  rg->p = rg->v = NULL;
  return rc;
}

/* ---- NCCL --------------------------------------------------------------- */

#ifdef SG_HAVE_NCCL
struct sg_cuda_nccl {
  const sg_nccl_api_t *api; /* loaded on first use (cuda_dl.h) */
  ncclComm_t comm;
  int rank;
};

static int nccl_fail(const sg_nccl_api_t *api, ncclResult_t r, const char *what) {
  return sg_err_set(SG_EIO, "%s: %s", what, api->error_string(r));
}

int sg_cuda_nccl_id(void *id) {
  ncclUniqueId u;
  const sg_nccl_api_t *api;
  SG_CHECK(sg_nccl(&api));
  ncclResult_t r = api->get_unique_id(&u);
  if (r != ncclSuccess) return nccl_fail(api, r, "ncclGetUniqueId");
  memcpy(id, &u, sizeof u < SG_NCCL_ID_BYTES ? sizeof u : SG_NCCL_ID_BYTES);
  return SG_OK;
}

int sg_cuda_nccl_new(sg_cuda_nccl_t **out, const void *id, int rank, int size) {
  ncclUniqueId u;
  memcpy(&u, id, sizeof u < SG_NCCL_ID_BYTES ? sizeof u : SG_NCCL_ID_BYTES);
  const sg_nccl_api_t *api;
  SG_CHECK(sg_nccl(&api));
  sg_cuda_nccl_t *nc = calloc(1, sizeof *nc);
  if (!nc) return SG_ENOMEM;
  nc->api = api;
  nc->rank = rank;
  ncclResult_t r = api->comm_init_rank(&nc->comm, size, u, rank);
  if (r != ncclSuccess) {
    free(nc);
    return nccl_fail(api, r, "ncclCommInitRank");
  }
  *out = nc;
  return SG_OK;
}

int sg_cuda_nccl_run(sg_cuda_nccl_t *nc, float *dbuf, size_t count) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  ncclResult_t r = nc->api->all_reduce(dbuf, dbuf, count, ncclFloat, ncclSum, nc->comm, s);
  if (r != ncclSuccess) return nccl_fail(nc->api, r, "ncclAllReduce");
  return sg_cuda_sync();
}

int sg_cuda_nccl_run_on(sg_cuda_nccl_t *nc, sg_cuda_coll_t *co, float *dbuf, size_t count) {
  ncclResult_t r =
      nc->api->all_reduce(dbuf, dbuf, count, ncclFloat, ncclSum, nc->comm, co->comm);
  return r == ncclSuccess ? SG_OK : nccl_fail(nc->api, r, "ncclAllReduce");
}

int sg_cuda_nccl_reduce_scatter(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  ncclResult_t r = nc->api->reduce_scatter(dbuf, dbuf + (size_t)nc->rank * shard, shard,
                                           ncclFloat, ncclSum, nc->comm, s);
  return r == ncclSuccess ? SG_OK : nccl_fail(nc->api, r, "ncclReduceScatter");
}

int sg_cuda_nccl_all_gather(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) {
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  ncclResult_t r = nc->api->all_gather(dbuf + (size_t)nc->rank * shard, dbuf, shard, ncclFloat,
                                       nc->comm, s);
  return r == ncclSuccess ? SG_OK : nccl_fail(nc->api, r, "ncclAllGather");
}

void sg_cuda_nccl_destroy(sg_cuda_nccl_t **pnc) {
  if (!pnc || !*pnc) return;
  (*pnc)->api->comm_destroy((*pnc)->comm);
  free(*pnc);
  *pnc = NULL;
}
#else
#define NO_NCCL() sg_err_set(SG_EUNSUPPORTED, "algorithm: nccl: this build found no NCCL")
int sg_cuda_nccl_id(void *id) { return NO_NCCL(); }
int sg_cuda_nccl_new(sg_cuda_nccl_t **out, const void *id, int rank, int size) {
  *out = NULL;
  return NO_NCCL();
}
int sg_cuda_nccl_run(sg_cuda_nccl_t *nc, float *dbuf, size_t count) { return NO_NCCL(); }
int sg_cuda_nccl_run_on(sg_cuda_nccl_t *nc, sg_cuda_coll_t *co, float *dbuf, size_t count) {
  return NO_NCCL();
}
int sg_cuda_nccl_reduce_scatter(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) {
  return NO_NCCL();
}
int sg_cuda_nccl_all_gather(sg_cuda_nccl_t *nc, float *dbuf, size_t shard) { return NO_NCCL(); }
void sg_cuda_nccl_destroy(sg_cuda_nccl_t **nc) {
  if (nc) *nc = NULL;
}
#endif

/* ---- a device replica's staging (replica.h) ------------------------------ */

static float *st_slot(void *ctx, int slot) { return slot_ptr(ctx, slot); }

typedef struct cuda_rdev {
  sg_cuda_stage_t *st;
  sg_stage_ops_t ops;
} cuda_rdev_t;

static int rdev_alloc(void *ctx, float **d, size_t n, const char *what) {
  (void)ctx;
  return sg_cuda_alloc(d, n, what);
}

static void rdev_free(void *ctx, float **d) {
  (void)ctx;
  sg_cuda_free(d);
}

/* The copies start after the device work already queued (the gradient). */
static int rdev_bind(void *ctx, float *d, const sg_stage_ops_t **ops) {
  cuda_rdev_t *rd = ctx;
  cudaStream_t s = NULL;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(cudaEventRecord(rd->st->start, s));
  SG_CU(cudaStreamWaitEvent(rd->st->down, rd->st->start, 0));
  rd->st->dbuf = d;
  rd->ops = (sg_stage_ops_t){rd->st, st_down, st_wait_down, st_reduce, st_up, st_finish, st_slot,
                             NULL};
  *ops = &rd->ops;
  return SG_OK;
}

static int rdev_grad(void *ctx, struct sg_workload *wl, const float *dp, float *dg, int64_t step,
                     double *loss) {
  (void)ctx;
  return sg_workload_grad_device(wl, dp, dg, step, loss);
}

static int rdev_grad_slice(void *ctx, struct sg_workload *wl, const float *dp, float *dg,
                           int64_t step, int64_t first, int64_t count, double *loss) {
  (void)ctx;
  return sg_workload_grad_slice_device(wl, dp, dg, step, first, count, loss);
}

/* stream-ordered: the next task's gradient and the staging follow it */
static int rdev_acc(void *ctx, float *dacc, const float *dg, size_t n, float w, int first) {
  cudaStream_t s = NULL;
  (void)ctx;
  SG_CHECK(sg_cuda_stream(&s));
  SG_CU(sg_k_task_acc(dacc, dg, n, w, first, s));
  return SG_OK;
}

static void rdev_destroy(void *ctx) {
  cuda_rdev_t *rd = ctx;
  if (!rd) return;
  sg_cuda_stage_destroy(&rd->st);
  free(rd);
}

int sg_cuda_rdev_new(sg_rdev_t *out, size_t chunk) {
  cuda_rdev_t *rd = calloc(1, sizeof *rd);
  if (!rd) return SG_ENOMEM;
  int rc = sg_cuda_stage_new(&rd->st, chunk, 2);
  if (rc < 0) {
    rdev_destroy(rd);
    return rc;
  }
  *out = (sg_rdev_t){.ctx = rd, .alloc = rdev_alloc, .release = rdev_free, .bind = rdev_bind,
                     .grad = rdev_grad, .grad_slice = rdev_grad_slice, .acc = rdev_acc,
                     .destroy = rdev_destroy, .chunk = chunk};
  return SG_OK;
}
