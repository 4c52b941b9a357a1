/* allreduce.h - in-place sum-allreduce of a float vector, three ways.
 *
 * After sg_allreduce_*(c, buf, count, o) returns on every rank of c, each
 * rank's buf[0..count) holds the elementwise sum of all ranks' inputs.
 * Every algorithm is written once against core/transport.h
 * and runs unchanged over MPI and ZeroMQ, except `native`, whose whole
 * point is the MPI library's own MPI_Allreduce.
 *
 *   algorithm  file     bytes sent per rank (K = 4*count)   messages per rank
 *   ring       ring.c   2K(N-1)/N  (bandwidth optimal)      2(N-1) * segments
 *   rhd        rhd.c    2K(p-1)/p  (+K for folded ranks)    (2 log2(p) (+1 or 2)) * segments
 *   tree       tree.c   K up + c K down, c K up + K down      2 (D + S - 1) stages
 *              (c <= 2 children; the root, leaves less)
 *   hier       hier.c   2(G-1)/G K + 2(m-1)/m K/G            (2(G-1) + 2(m-1)) * segments
 *   native     native.c whatever Open MPI chooses           -
 *
 * (p = the largest power of two <= N; D = floor(log2 N) the tree's depth,
 * S its segments; G ranks per group, m = floor(N/G) groups.)
 *
 * Scratch: the algorithms never allocate.  The receive space they need is
 * passed in o->scratch; sg_ar_t (below) allocates it once per engine run,
 * sized for the largest vector it will reduce, and touches every page
 * up front so that no timed call takes page faults.
 *
 * Tags: each algorithm uses its own tag range, one tag per phase step
 * (SG_AR_TAG_*), so that concurrent messages of different steps can never
 * be confused; messages of one step travel in order (transport.h).
 */
#ifndef SG_ALLREDUCE_H
#define SG_ALLREDUCE_H

#include <stddef.h>

#include "opts.h"
#include "settings.h"
#include "transport.h"

/* Tag ranges (each must stay below SG_TAG_MAX for N <= 1024). */
enum {
  SG_AR_TAG_RING = 16384, /* + phase step, 0 .. 2(N-1)-1 */
  SG_AR_TAG_RHD = 20480,  /* + step, < 64 */
  SG_AR_TAG_BCAST = 20600,
  SG_AR_TAG_GATHER = 20601,
  SG_AR_TAG_TOPK = 20608, /* + step, 0 .. N-2 (topk.c) */
  SG_AR_TAG_TREE = 22528,     /* up, + 1 down (tree.c) */
  SG_AR_TAG_HIER = 22532,     /* fold up, + 1 unfold (hier.c) */
  SG_AR_TAG_HIER_IN = 22540,  /* + step inside a group, < 2(G-1) */
  SG_AR_TAG_HIER_X = 24600,   /* + step across groups, < 2(m-1) */
};
#define SG_AR_HIER_MAX 1024 /* ranks hier plans for (its tag ranges) */

#define SG_AR_SEGMENT_DEFAULT (1u << 20)   /* bytes; see docs/engines/allreduce.md */
#define SG_AR_SEGMENT_ZMQ_IPC (4u << 20)   /* zmq over ipc: fewer, larger reads */
#define SG_AR_SEGMENT_CURVE (256u << 10)   /* zmq with CURVE: shorter store-and-forward */

/* ---- the engine's configuration, parsed once ------------------------- */

/* The engine's settings table (allreduce_engine.c): every option's one
 * default. */
extern const sg_setting_t sg_ar_options[];

/* The engine's options, typed, filled once from the run's options and
 * the settings tables (sg_ar_cfg_from_opts) before anything trains; the
 * strings point into the options or the tables. */
typedef struct sg_ar_cfg {
  const char *algorithm; /* SG_AR_ALGORITHMS or SG_AR_DEVICE_ALGORITHMS */
  const char *compress;  /* none | fp16 | topk */
  const char *update;    /* auto | sharded | replicated */
  const char *cuda_ring; /* staged | persistent */
  double topk;           /* compress topk: the fraction sent */
  int64_t bucket;        /* overlap: bytes per bucket */
  int64_t bucket_every;  /* record the buckets of every so many steps; 0 = never */
  int64_t segment;       /* as set; 0 = auto (sg_ar_cfg_segment) */
  int64_t group;         /* as set; 0 = auto (sg_ar_cfg_group) */
  int64_t racks;         /* cluster.racks */
  int64_t stage_chunk;   /* device cuda, host algorithms: bytes per staged chunk */
  int64_t gpus_per_host; /* device cuda: the workload's gpus_per_host */
  const char *rank_addrs; /* the cluster's rank addresses (spec key), or "" */
  int overlap;           /* overlap: true */
  int device;            /* device: cuda */
  int plant_bug;         /* tests: _plant_bug = ring-skip */
} sg_ar_cfg_t;

/* Fill c from o (SG_ECONFIG naming a key that does not parse). */
int sg_ar_cfg_from_opts(sg_ar_cfg_t *c, const sg_opts_t *o);
/* The segment in bytes (auto: a device row's (cuda-ring's slot) 1 MiB;
 * 4 MiB where comm reads large sends from the sender's memory, zmq over
 * ipc (sg_comm_zmq_cma), measured faster from 4 MiB up at N = 2; 256 KiB
 * with CURVE; 1 MiB otherwise). */
int64_t sg_ar_cfg_segment(const sg_ar_cfg_t *c, const sg_comm_t *comm);
/* hier's ranks per group (auto: see sg_ar_group_opt). */
int64_t sg_ar_cfg_group(const sg_ar_cfg_t *c, const sg_comm_t *comm);

/* The run's `segment` resolved as sg_ar_cfg_segment does (kept for
 * callers that hold only the options). */
int sg_ar_segment_opt(const sg_opts_t *o, const sg_comm_t *comm, int64_t *out);
#define SG_AR_DEPTH_DEFAULT 4              /* ring segments received ahead */

typedef struct sg_ar_opts {
  size_t segment_bytes; /* ring, rhd: pipeline segment (0 = default) */
  int depth;            /* ring, rhd: receives posted ahead (0 = default) */
  float *scratch;       /* receive space of scratch_count floats */
  size_t scratch_count;
  void **reqs;          /* ring, rhd: request slots, reqs_count of them */
  size_t reqs_count;
  int plant_bug;        /* tests only: ring sends a wrong chunk once */
  int native_nonblocking; /* native: MPI_Iallreduce + Test loop (deadline) */
  int compress;         /* SG_AR_COMPRESS_*; ring and rhd (sg_ar_set_compress) */
  int group;            /* hier: ranks per group (0 = all; sg_ar_set_group) */
  /* ring, one call of sg_ar_run_update: the owner of each summed segment
   * calls update(update_arg, off, len, recv), and the allgather moves
   * agbuf (the parameters) instead of the sums.  NULL otherwise. */
  void (*update)(void *update_arg, size_t off, size_t len, const float *recv);
  void *update_arg;
  float *agbuf;
} sg_ar_opts_t;

enum { SG_AR_COMPRESS_NONE, SG_AR_COMPRESS_FP16 };

/* Where an algorithm's buffer lives.  A host algorithm also serves
 * device: cuda, its vector staged through pinned host slots; a device
 * algorithm sums device vectors only (allreduce_device.c). */
enum { SG_AR_MEM_HOST = 0, SG_AR_MEM_DEVICE = 1 };
struct sg_ar_dev_algo; /* a device algorithm's setup and run (allreduce_device.c) */

/* One algorithm, as an ops table. */
typedef struct sg_ar_algo {
  const char *name;    /* "ring" */
  const char *summary; /* one line */
  int (*allreduce)(sg_comm_t *c, float *buf, size_t count,
                   const sg_ar_opts_t *o);
  /* Scratch floats and request slots a call on `count` floats needs. */
  void (*needs)(int nranks, size_t count, const sg_ar_opts_t *o,
                size_t *scratch_floats, size_t *req_slots);
  /* Nonzero when the algorithm needs the MPI transport. */
  int needs_mpi;
  /* SG_AR_MEM_HOST (allreduce, needs) or SG_AR_MEM_DEVICE (dev). */
  int memory;
  const struct sg_ar_dev_algo *dev;
} sg_ar_algo_t;

int sg_allreduce_ring(sg_comm_t *c, float *buf, size_t count,
                      const sg_ar_opts_t *o);
int sg_allreduce_rhd(sg_comm_t *c, float *buf, size_t count,
                     const sg_ar_opts_t *o);
int sg_allreduce_native(sg_comm_t *c, float *buf, size_t count,
                        const sg_ar_opts_t *o);
int sg_allreduce_tree(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o);
int sg_allreduce_hier(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o);

extern const sg_ar_algo_t sg_ar_ring, sg_ar_rhd, sg_ar_native, sg_ar_tree, sg_ar_hier;
/* Device rows (allreduce_device.c): cuda-ring, nccl. */
extern const sg_ar_algo_t sg_ar_cuda_ring, sg_ar_nccl;
/* "ring" | "rhd" | "tree" | "hier" | "native" | "cuda-ring" | "nccl", or NULL. */
const sg_ar_algo_t *sg_ar_algo_find(const char *name);
#define SG_AR_ALGORITHMS "ring|rhd|tree|hier|native"

/* ---- an allreduce context: one algorithm and its scratch ------------- */

typedef struct sg_ar sg_ar_t;

/* Set up `algorithm` on comm c for vectors of at most max_count floats
 * (scratch allocated and pre-touched here, once).  segment_bytes 0 = the
 * default.  The ring's test bug is planted with sg_ar_plant_bug (below;
 * tests/test_allreduce.c proves the exactness check catches it);
 * SG_NATIVE_NONBLOCKING=1 in the environment makes native use MPI_Iallreduce
 * with a deadline (native.c).  Caller owns the result. */
int sg_ar_new(sg_ar_t **out, sg_comm_t *c, const char *algorithm,
              size_t segment_bytes, size_t max_count);
/* Sum-allreduce buf[0..count), count <= max_count. */
int sg_ar_run(sg_ar_t *a, float *buf, size_t count);
/* The sharded update (ring, float32 on the wire): reduce-scatter grad,
 * then each segment's owner calls update(arg, off, len, recv) as soon as
 * the segment's last part has arrived: the sum is grad[off + i] + recv[i]
 * for i < len (recv NULL: grad[off + i] alone, N = 1), never stored; the
 * callback updates params[off, off+len) from it.  The allgather then
 * sends the updated parameters instead of sums.  Afterwards every rank
 * holds the same params; grad holds partial sums.  A config error for any
 * other algorithm or with compress: fp16 (sg_ar_can_update). */
int sg_ar_run_update(sg_ar_t *a, float *grad, float *params, size_t count,
                     void (*update)(void *arg, size_t off, size_t len, const float *recv),
                     void *arg);
/* Whether sg_ar_run_update works with this context. */
int sg_ar_can_update(const sg_ar_t *a);
const char *sg_ar_name(const sg_ar_t *a);
/* "none" | "fp16" (ring, rhd: halves on the wire, float32 sums; prim.h).
 * A config error for any other name or algorithm. */
int sg_ar_set_compress(sg_ar_t *a, const char *mode);
/* hier: ranks per group (consecutive ranks; 0 = one group of all). */
void sg_ar_set_group(sg_ar_t *a, int group);
/* The run's `group` (0 = auto: the ranks from rank 0 on that share rank
 * 0's host, or with cluster.racks its rack, from the cluster's rank
 * addresses (`_rank_addrs`); every rank when the run has no cluster,
 * which is one host). */
int sg_ar_group_opt(const sg_opts_t *o, const sg_comm_t *comm, int64_t *out);
/* Tests only: the ring sends a wrong chunk once per call, so a test can
 * show its check catches it.  Processes get it from the spec key
 * _plant_bug = ring-skip (`sgdlab run|bench --plant-bug ring-skip`). */
void sg_ar_plant_bug(sg_ar_t *a, int on);
/* Whether the run's options ask for the planted ring bug. */
int sg_ar_plant_requested(const sg_opts_t *o);
/* NULL-safe; nulls the pointer. */
void sg_ar_destroy(sg_ar_t **a);

/* The engine's alpha-beta-gamma formulas, per algorithm, and how a run
 * or a what-if case reaches them (allreduce_cost.c; core/cost.h); the
 * formula is negative for an algorithm without one. */
#include "cost.h"
double sg_ar_cost(const sg_cost_case_t *c, const sg_cost_params_t *p, sg_cost_split_t *o);
extern const sg_cost_info_t sg_ar_cost_info;

/* ---- device: cuda (allreduce_device.c, docs/cuda.md) ------------------ */

/* The rows of the table with memory SG_AR_MEM_DEVICE: cuda-ring (CUDA IPC
 * within a host) and nccl.  The engine's `algorithm` accepts them. */
#define SG_AR_DEVICE_ALGORITHMS "cuda-ring|nccl"
struct sg_rank_ctx;
/* The summation of a device vector of up to n floats by the run's
 * `algorithm` (host-staged ring/rhd/native, cuda-ring, nccl), as the
 * training loop and the benchmark round use it.  Collective. */
typedef struct sg_ar_dev sg_ar_dev_t;
int sg_ar_dev_new(sg_ar_dev_t **out, struct sg_rank_ctx *ctx, size_t n);
/* dbuf[0..count) summed in place over the ranks; returns when complete. */
int sg_ar_dev_run(sg_ar_dev_t *d, float *dbuf, size_t count);
void sg_ar_dev_destroy(sg_ar_dev_t **d);

/* ---- buffers ---------------------------------------------------------- */

/* A buffer for vectors that go through the transport: 2 MiB aligned,
 * backed by transparent huge pages where the kernel allows it
 * (MADV_HUGEPAGE), and touched (zeroed) here so that no timed call takes
 * page faults.  Huge pages matter for MPI's single-copy transfers (CMA):
 * the kernel pins the peer's pages for every message, one lookup per 4 KiB
 * page otherwise (measured: 14% of a 64 MiB allreduce).  NULL when out of
 * memory.  Under a simulation (SG_SMPI) plain zeroed memory from
 * sg_fold_alloc instead, folded across the ranks when compute is modeled
 * (core/msgbuf.h): vectors only, never state read back.  Free with
 * sg_ar_free(). */
void *sg_ar_alloc(size_t bytes);
void sg_ar_free(void *p);

/* ---- small collectives the engines need ------------------------------ */

/* Binomial-tree broadcast of len bytes from root (bcast.c). */
int sg_ar_bcast(sg_comm_t *c, void *buf, size_t len, int root);

/* Element-wise maximum (SG_AR_MAX) or sum (SG_AR_SUM) of n doubles over
 * all ranks, result on rank 0 only (others' v is left as is); tmp holds
 * n doubles.  For benchmark timings and counts. */
enum { SG_AR_MAX, SG_AR_SUM };
int sg_ar_reduce_to0(sg_comm_t *c, double *v, size_t n, double *tmp, int op);

/* Floats per pipeline segment and receives posted ahead (ring and rhd). */
static inline size_t sg_ar_seg_floats(const sg_ar_opts_t *o) {
  size_t b = o && o->segment_bytes ? o->segment_bytes : SG_AR_SEGMENT_DEFAULT;
  return b / sizeof(float) ? b / sizeof(float) : 1;
}
static inline size_t sg_ar_depth(const sg_ar_opts_t *o) {
  return o && o->depth > 0 ? (size_t)o->depth : SG_AR_DEPTH_DEFAULT;
}

/* Chunk c of N over count elements: the first count % N chunks get one
 * element more.  Used by ring and rhd alike. */
static inline size_t sg_ar_chunk_off(size_t count, int n, int c) {
  size_t base = count / (size_t)n, rem = count % (size_t)n;
  return (size_t)c * base + ((size_t)c < rem ? (size_t)c : rem);
}
static inline size_t sg_ar_chunk_len(size_t count, int n, int c) {
  return count / (size_t)n + ((size_t)c < count % (size_t)n ? 1 : 0);
}

#endif
