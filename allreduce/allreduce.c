/* allreduce.c - the algorithm table and the allreduce context: one
 * algorithm plus the scratch it needs, allocated and touched once. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "allreduce.h"
#include "err.h"
#include "msgbuf.h"
#include "transport_new.h"

static const sg_ar_algo_t *const algos[] = {&sg_ar_ring, &sg_ar_rhd,  &sg_ar_tree,
                                            &sg_ar_hier, &sg_ar_native, &sg_ar_cuda_ring,
                                            &sg_ar_nccl, NULL};

const sg_ar_algo_t *sg_ar_algo_find(const char *name) {
  for (const sg_ar_algo_t *const *a = algos; *a; a++)
    if (strcmp((*a)->name, name) == 0) return *a;
  return NULL;
}

#define HUGE_ALIGN ((size_t)2 << 20)

void *sg_ar_alloc(size_t bytes) {
#ifdef SG_SMPI
  /* simulated ranks share one process: zeroed memory, or folded across
   * the ranks (contents undefined) when compute is modeled (core/msgbuf.h;
   * a 2 MiB-aligned buffer per rank was 13 MB of every simulated rank) */
  return sg_fold_alloc(bytes);
#endif
  size_t len = (bytes + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
  void *p = NULL;
  if (len == 0) len = HUGE_ALIGN;
  if (posix_memalign(&p, HUGE_ALIGN, len) != 0) return NULL;
  (void)madvise(p, len, MADV_HUGEPAGE); /* advice only: 4 KiB pages still work */
  memset(p, 0, len);
  return p;
}

void sg_ar_free(void *p) { sg_fold_free(p); }

struct sg_ar {
  const sg_ar_algo_t *algo;
  sg_comm_t *comm;
  size_t max_count;
  sg_ar_opts_t o; /* scratch and reqs owned here */
};

static int env_flag(const char *name) {
  const char *e = getenv(name);
  return e && e[0] && strcmp(e, "0") != 0;
}

void sg_ar_plant_bug(sg_ar_t *a, int on) { a->o.plant_bug = on; }

void sg_ar_set_group(sg_ar_t *a, int group) { a->o.group = group > 0 ? group : 0; }

/* The rack of an address 198.18.S.<h+1> (host h) with `rack` hosts per
 * rack; -1 when it does not parse. */
static long rack_of(const char *addr, size_t len, int64_t rack) {
  size_t i = len;
  while (i > 0 && addr[i - 1] != '.') i--;
  long h = i > 0 ? strtol(addr + i, NULL, 10) - 1 : -1;
  return h < 0 || rack <= 0 ? -1 : h / rack;
}

/* Ranks from rank 0 on that share rank 0's address in the list "a,b,..",
 * or with rack > 0 rank 0's rack. */
static int64_t leading_same(const char *list, int64_t rack) {
  size_t first = strcspn(list, ",");
  long r0 = rack_of(list, first, rack);
  int64_t n = 0;
  for (const char *p = list; *p;) {
    size_t len = strcspn(p, ",");
    if (rack > 0 ? rack_of(p, len, rack) != r0 || r0 < 0
                 : len != first || strncmp(p, list, first) != 0)
      break;
    n++;
    p += len;
    if (*p == ',') p++;
  }
  return n ? n : 1;
}

int sg_ar_cfg_from_opts(sg_ar_cfg_t *c, const sg_opts_t *o) {
  const sg_setting_t *t = sg_ar_options;
  const char *device, *overlap;
  memset(c, 0, sizeof *c);
  SG_CHECK(sg_setting_str(o, t, "algorithm", &c->algorithm));
  SG_CHECK(sg_setting_str(o, t, "compress", &c->compress));
  SG_CHECK(sg_setting_str(o, t, "update", &c->update));
  SG_CHECK(sg_setting_str(o, t, "cuda_ring", &c->cuda_ring));
  SG_CHECK(sg_setting_double(o, t, "topk", &c->topk));
  SG_CHECK(sg_setting_int(o, t, "bucket", &c->bucket));
  SG_CHECK(sg_setting_int(o, t, "bucket_every", &c->bucket_every));
  SG_CHECK(sg_setting_int(o, t, "segment", &c->segment));
  SG_CHECK(sg_setting_int(o, t, "group", &c->group));
  SG_CHECK(sg_setting_int(o, t, "cluster.racks", &c->racks));
  SG_CHECK(sg_setting_int(o, t, "stage_chunk", &c->stage_chunk));
  SG_CHECK(sg_setting_int(o, t, "gpus_per_host", &c->gpus_per_host));
  SG_CHECK(sg_setting_str(o, t, "overlap", &overlap));
  SG_CHECK(sg_setting_str(o, t, "device", &device));
  c->overlap = !strcmp(overlap, "true");
  c->device = !strcmp(device, "cuda");
  /* spec keys the harness writes for the ranks, not settings: absent
   * means none */
  const char *addrs = sg_opts_get(o, "_rank_addrs"), *plant = sg_opts_get(o, "_plant_bug");
  c->rank_addrs = addrs ? addrs : "";
  c->plant_bug = plant && !strcmp(plant, "ring-skip");
  return SG_OK;
}

int64_t sg_ar_cfg_group(const sg_ar_cfg_t *c, const sg_comm_t *comm) {
  if (c->group > 0) return c->group;
  return c->rank_addrs[0] ? leading_same(c->rank_addrs, c->racks) : comm->size;
}

int sg_ar_group_opt(const sg_opts_t *o, const sg_comm_t *comm, int64_t *out) {
  sg_ar_cfg_t c;
  SG_CHECK(sg_ar_cfg_from_opts(&c, o));
  *out = sg_ar_cfg_group(&c, comm);
  return SG_OK;
}

int sg_ar_plant_requested(const sg_opts_t *o) {
  sg_ar_cfg_t c;
  return sg_ar_cfg_from_opts(&c, o) == SG_OK && c.plant_bug;
}

int sg_ar_new(sg_ar_t **out, sg_comm_t *c, const char *algorithm, size_t segment_bytes,
              size_t max_count) {
  const sg_ar_algo_t *algo = sg_ar_algo_find(algorithm);
  if (!algo)
    return sg_err_set(SG_ECONFIG, "algorithm: '%s' is not one of %s", algorithm,
                      SG_AR_ALGORITHMS);
  if (algo->memory != SG_AR_MEM_HOST)
    return sg_err_set(SG_ECONFIG, "algorithm: %s sums device buffers; it needs device: cuda",
                      algorithm);
  if (algo->needs_mpi && !sg_comm_mpi_handle(c))
    return sg_err_set(SG_ECONFIG, "algorithm: %s needs transport mpi, not %s", algorithm,
                      c->ops->name);
  sg_ar_t *a = calloc(1, sizeof *a);
  if (!a) return SG_ENOMEM;
  a->algo = algo;
  a->comm = c;
  a->max_count = max_count;
  a->o.segment_bytes = segment_bytes ? segment_bytes : SG_AR_SEGMENT_DEFAULT;
  a->o.depth = SG_AR_DEPTH_DEFAULT;
  a->o.native_nonblocking = env_flag("SG_NATIVE_NONBLOCKING");
  size_t ns = 0, nr = 0;
  algo->needs(c->size, max_count, &a->o, &ns, &nr);
  /* Needs grow with count, so any count <= max_count fits. */
  a->o.scratch_count = ns;
  a->o.reqs_count = nr;
  if (ns && !(a->o.scratch = sg_ar_alloc(ns * sizeof(float)))) goto nomem;
  /* the rank's own (calloc; only sg_fold_alloc folds, core/msgbuf.h):
   * request pointers a simulated rank reads back; rhd needs one per
   * segment of the vector (64 MB in 4 KiB segments: 16,384, 128 KiB) */
  if (nr && !(a->o.reqs = calloc(nr, sizeof(void *)))) goto nomem;
  *out = a;
  return SG_OK;
nomem:
  sg_ar_destroy(&a);
  return sg_err_set(SG_ENOMEM, "allreduce %s: no memory for %zu scratch floats", algorithm, ns);
}

static int fits(const sg_ar_t *a, size_t count) {
  if (count > a->max_count)
    return sg_err_set(SG_EINVAL, "allreduce of %zu floats; context sized for %zu", count,
                      a->max_count);
  return SG_OK;
}

int sg_ar_run(sg_ar_t *a, float *buf, size_t count) {
  SG_CHECK(fits(a, count));
  return a->algo->allreduce(a->comm, buf, count, &a->o);
}

int sg_ar_can_update(const sg_ar_t *a) {
  return a->algo == &sg_ar_ring && a->o.compress == SG_AR_COMPRESS_NONE;
}

int sg_ar_run_update(sg_ar_t *a, float *grad, float *params, size_t count,
                     void (*update)(void *arg, size_t off, size_t len, const float *recv),
                     void *arg) {
  if (!sg_ar_can_update(a))
    return sg_err_set(SG_ECONFIG, "a sharded update needs algorithm ring with float32 on the "
                      "wire, not %s%s", a->algo->name,
                      a->o.compress == SG_AR_COMPRESS_FP16 ? " with fp16" : "");
  SG_CHECK(fits(a, count));
  if (a->comm->size == 1) { /* nothing to sum: the whole vector is this rank's */
    if (count) update(arg, 0, count, NULL);
    return SG_OK;
  }
  a->o.update = update;
  a->o.update_arg = arg;
  a->o.agbuf = params;
  int rc = a->algo->allreduce(a->comm, grad, count, &a->o);
  a->o.update = NULL;
  a->o.update_arg = NULL;
  a->o.agbuf = NULL;
  return rc;
}

const char *sg_ar_name(const sg_ar_t *a) { return a->algo->name; }

int sg_ar_set_compress(sg_ar_t *a, const char *mode) {
  if (!strcmp(mode, "none")) {
    a->o.compress = SG_AR_COMPRESS_NONE;
    return SG_OK;
  }
  if (strcmp(mode, "fp16") != 0)
    return sg_err_set(SG_ECONFIG, "compress: '%s' is not one of none|fp16", mode);
  if (a->algo != &sg_ar_ring && a->algo != &sg_ar_rhd)
    return sg_err_set(SG_ECONFIG, "compress: fp16 is implemented for algorithms ring and rhd, "
                      "not %s", a->algo->name);
  a->o.compress = SG_AR_COMPRESS_FP16;
  return SG_OK;
}

void sg_ar_destroy(sg_ar_t **pa) {
  if (!pa || !*pa) return;
  sg_ar_free((*pa)->o.scratch);
  free((*pa)->o.reqs);
  free(*pa);
  *pa = NULL;
}

int64_t sg_ar_cfg_segment(const sg_ar_cfg_t *c, const sg_comm_t *comm) {
  if (c->segment > 0) return c->segment;
  const sg_ar_algo_t *row = sg_ar_algo_find(c->algorithm);
  if (row && row->memory == SG_AR_MEM_DEVICE) return SG_AR_SEGMENT_DEFAULT; /* cuda-ring's slot */
  return sg_comm_zmq_cma(comm)     ? SG_AR_SEGMENT_ZMQ_IPC
         : sg_comm_zmq_curve(comm) ? SG_AR_SEGMENT_CURVE
                                   : SG_AR_SEGMENT_DEFAULT;
}

int sg_ar_segment_opt(const sg_opts_t *o, const sg_comm_t *comm, int64_t *out) {
  sg_ar_cfg_t c;
  SG_CHECK(sg_ar_cfg_from_opts(&c, o));
  *out = sg_ar_cfg_segment(&c, comm);
  return SG_OK;
}
