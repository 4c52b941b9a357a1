/* test_cuda_replica.c - the ps worker's device replica, run on the CPU.
 *
 * With `device: cuda` a ps worker keeps its parameters and gradient on the
 * device and moves them through pinned staging one way at a time
 * (core/cuda/replica.h, stage_plan.h's one-way runs): the gradient down,
 * chunk by chunk, as the worker's pushes need it; the pulled parameters
 * up.  Here the device is simulated in host memory -- the gradient is the
 * host model's (sg_workload_grad on the "device" vectors) and the copies
 * are queued per stream and run either as LATE as the declared orderings
 * allow (lazy) or at once (eager) -- and the REAL ps engine runs on it:
 * servers and workers as threads over inproc ZeroMQ, the worker code the
 * processes run, only its device swapped (ps_cfg_t.dev_twin).
 *
 * mapreduce executors the same way: the broadcast parameters staged up,
 * each task's weighted gradient summed into a device accumulator, the sum
 * staged down for the reduce (partitions = N, so the tasks and their sums
 * are the same in every run; flat and tree broadcast and aggregate).
 *
 * Claims: the dumped parameters and every worker's bytes sent equal the
 * host workers' bit for bit (N = 2..4 workers, 1-2 servers, staged chunks
 * of 7, 333, 1000 and 4096 floats against 25,450 parameters -- none
 * divides it -- whole shards and slices, float32 and fp16 pushes); each
 * worker moves exactly the protocol's floats (n down per step, n up per
 * pull).  Planted: a download that reads its slot without waiting for the
 * copy (caught by the lazy device) and an upload issued before the host
 * filled its slot (caught by the eager device) must change the dump.
 */
#include "test.h"

#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "clock.h"
#include "cuda/replica.h"
#include "engine.h"
#include "err.h"
#include "mapreduce.h"
#include "opts.h"
#include "ps.h"
#include "records.h"
#include "run_util.h"
#include "thread_ranks.h"
#include "transport.h"
#include "workload.h"

#define STEPS 20
#define MAXR 8

/* ---- the simulated device ------------------------------------------------ */

typedef struct sop { int slot; size_t off, len; long after, chunk; } sop_t;

typedef struct simdev {
  int lazy, w;         /* copies as late as allowed; the worker */
  size_t chunk, cap;   /* floats per slot; queue capacity */
  float *slots;        /* 2 slots */
  float *d;            /* the bound device vector */
  sop_t *downq, *upq;
  size_t ndown, nup, down_run, up_run;
  long *up_of_chunk;   /* index in upq, per chunk of the bound run */
  size_t slot_last_down[2];
  uint64_t floats_down, floats_up; /* device <-> host, the whole run */
  sg_stage_ops_t ops;
} simdev_t;

/* What every twin device of a case adds up (workers are threads). */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_lazy;
static uint64_t g_down[MAXR], g_up[MAXR];

static void sim_run_up(simdev_t *s, size_t upto) {
  for (; s->up_run < upto; s->up_run++) {
    sop_t *o = &s->upq[s->up_run];
    memcpy(s->d + o->off, s->slots + (size_t)o->slot * s->chunk, o->len * sizeof(float));
    s->floats_up += o->len;
  }
}

static void sim_run_down(simdev_t *s, size_t upto) {
  for (; s->down_run < upto; s->down_run++) {
    sop_t *o = &s->downq[s->down_run];
    if (o->after >= 0) sim_run_up(s, (size_t)s->up_of_chunk[o->after] + 1);
    memcpy(s->slots + (size_t)o->slot * s->chunk, s->d + o->off, o->len * sizeof(float));
    s->floats_down += o->len;
  }
}

static int sim_down(void *ctx, int slot, size_t off, size_t len, long after) {
  simdev_t *s = ctx;
  if (s->ndown >= s->cap) return SG_EINVAL;
  s->downq[s->ndown] = (sop_t){slot, off, len, after, -1};
  s->slot_last_down[slot] = s->ndown++;
  if (!s->lazy) sim_run_down(s, s->ndown);
  return SG_OK;
}
static int sim_wait_down(void *ctx, int slot) {
  simdev_t *s = ctx;
  sim_run_down(s, s->slot_last_down[slot] + 1);
  return SG_OK;
}
static int sim_reduce(void *ctx, int slot, size_t len) {
  (void)ctx, (void)slot, (void)len;
  return SG_EINVAL; /* a one-way run never reduces */
}
static int sim_up(void *ctx, int slot, size_t off, size_t len, long chunk) {
  simdev_t *s = ctx;
  if (s->nup >= s->cap || chunk < 0 || (size_t)chunk >= s->cap) return SG_EINVAL;
  s->upq[s->nup] = (sop_t){slot, off, len, -1, chunk};
  s->up_of_chunk[chunk] = (long)s->nup++;
  if (!s->lazy) sim_run_up(s, s->nup);
  return SG_OK;
}
static int sim_finish(void *ctx) {
  simdev_t *s = ctx;
  sim_run_down(s, s->ndown);
  sim_run_up(s, s->nup);
  return SG_OK;
}
static float *sim_slot(void *ctx, int slot) {
  simdev_t *s = ctx;
  return s->slots + (size_t)slot * s->chunk;
}

static int sim_alloc(void *ctx, float **d, size_t n, const char *what) {
  simdev_t *s = ctx;
  (void)what;
  *d = calloc(n + 1, sizeof **d);
  size_t cap = n / s->chunk + 4;
  if (cap > s->cap) {
    free(s->downq), free(s->upq), free(s->up_of_chunk);
    s->downq = malloc(cap * sizeof *s->downq);
    s->upq = malloc(cap * sizeof *s->upq);
    s->up_of_chunk = malloc(cap * sizeof *s->up_of_chunk);
    s->cap = cap;
  }
  return *d && s->downq && s->upq && s->up_of_chunk ? SG_OK : SG_ENOMEM;
}
static void sim_release(void *ctx, float **d) {
  (void)ctx;
  free(*d);
  *d = NULL;
}
/* A run starts on an idle device: every earlier copy has run. */
static int sim_bind(void *ctx, float *d, const sg_stage_ops_t **ops) {
  simdev_t *s = ctx;
  s->d = d;
  s->ndown = s->nup = s->down_run = s->up_run = 0;
  s->ops = (sg_stage_ops_t){s, sim_down, sim_wait_down, sim_reduce, sim_up, sim_finish, sim_slot,
                            NULL};
  *ops = &s->ops;
  return SG_OK;
}
static int sim_grad(void *ctx, struct sg_workload *wl, const float *dp, float *dg, int64_t step,
                    double *loss) {
  (void)ctx;
  return sg_workload_grad(wl, dp, dg, step, loss);
}
static int sim_grad_slice(void *ctx, struct sg_workload *wl, const float *dp, float *dg,
                          int64_t step, int64_t first, int64_t count, double *loss) {
  (void)ctx;
  return sg_workload_grad_slice(wl, dp, dg, step, first, count, loss);
}
/* the executor's host loop, operation for operation (-ffp-contract=off) */
static int sim_acc(void *ctx, float *dacc, const float *dg, size_t n, float w, int first) {
  (void)ctx;
  for (size_t i = 0; i < n; i++) dacc[i] = first ? w * dg[i] : dacc[i] + w * dg[i];
  return SG_OK;
}
static void sim_destroy(void *ctx) {
  simdev_t *s = ctx;
  pthread_mutex_lock(&g_mu);
  if (s->w >= 0 && s->w < MAXR) g_down[s->w] = s->floats_down, g_up[s->w] = s->floats_up;
  pthread_mutex_unlock(&g_mu);
  free(s->slots), free(s->downq), free(s->upq), free(s->up_of_chunk), free(s);
}

/* ps_cfg_t.dev_twin: worker w's simulated device. */
static int twin_dev(sg_rdev_t *out, size_t chunk, int worker) {
  simdev_t *s = calloc(1, sizeof *s);
  if (!s || !(s->slots = calloc(2 * chunk, sizeof(float)))) {
    free(s);
    return SG_ENOMEM;
  }
  s->lazy = g_lazy, s->w = worker, s->chunk = chunk;
  for (size_t i = 0; i < 2 * chunk; i++) s->slots[i] = -7.0f; /* never a gradient */
  *out = (sg_rdev_t){.ctx = s, .alloc = sim_alloc, .release = sim_release, .bind = sim_bind,
                     .grad = sim_grad, .grad_slice = sim_grad_slice, .acc = sim_acc,
                     .destroy = sim_destroy, .chunk = chunk};
  return SG_OK;
}

/* ---- the ps engine over threads (test_ps_train.c's way) ------------------ */

typedef struct rank_arg {
  const sg_opts_t *opts;
  const ps_cfg_t *cfg;
  uint64_t sent;
  char err[512];
} rank_arg_t;

static int ps_rank(sg_comm_t *c, void *p) {
  rank_arg_t *a = p;
  sg_records_t *rec = NULL;
  int server = c->rank < a->cfg->servers, rc;
  SG_TRY(sg_records_open(&rec, NULL, c->rank, server ? "server" : "worker", sg_wall(), NULL));
  sg_rank_ctx_t ctx = {.rank = c->rank, .size = c->size, .workers = a->cfg->workers, .comm = c,
                       .opts = a->opts, .rec = rec, .t0 = sg_wall()};
  rc = server ? ps_server_run(&ctx, a->cfg) : ps_worker_run(&ctx, a->cfg);
fail:
  a->sent = sg_comm_bytes_sent(c);
  if (rc < 0) snprintf(a->err, sizeof a->err, "%s", sg_err_msg());
  sg_records_close(&rec);
  return rc;
}

typedef struct tcase {
  int S, N;
  size_t chunk;      /* floats per staged chunk */
  const char *kv[9]; /* more settings */
} tcase_t;

typedef struct outcome {
  unsigned char *dump; /* worker 0's dump_params */
  long len;
  uint64_t sent[MAXR]; /* per rank */
  uint64_t down[MAXR], up[MAXR];
} outcome_t;

static unsigned char *slurp_bin(const char *path, long *len) {
  FILE *f = fopen(path, "rb");
  unsigned char *b = NULL;
  *len = -1;
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (b = malloc((size_t)*len)) && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
    free(b);
    b = NULL;
  }
  fclose(f);
  return b;
}

/* One run of case tc: host workers (dev = 0) or twin devices (dev = 1
 * lazy, 2 eager), plant as ps_cfg_t.dev_plant. */
static int run_case(const tcase_t *tc, int dev, int plant, outcome_t *o) {
  char dir[] = "/tmp/sgdlab-replica-XXXXXX", dump[96];
  if (!mkdtemp(dir)) return SG_EIO;
  snprintf(dump, sizeof dump, "%s/ps.bin", dir);
  sg_opts_t *op = ru_train_opts("ps", tc->N, dump, STEPS, tc->kv);
  rank_arg_t args[MAXR];
  ps_cfg_t cfg;
  int rc = op ? 0 : SG_ENOMEM, size = tc->S + tc->N;
  if (!rc) rc = sg_opts_setf(op, "servers", "%d", tc->S);
  if (!rc) rc = ps_cfg_from_opts(&cfg, op, tc->N);
  if (!rc && dev) cfg.dev_twin = twin_dev, cfg.dev_chunk = tc->chunk, cfg.dev_plant = plant;
  g_lazy = dev == 1;
  memset(g_down, 0, sizeof g_down), memset(g_up, 0, sizeof g_up);
  for (int r = 0; r < size; r++) args[r] = (rank_arg_t){.opts = op, .cfg = &cfg};
  tr_group_t g = {.n = size, .deadline_s = 60, .fn = ps_rank, .args = args,
                  .stride = sizeof *args, .what = "ps replica"};
  if (!rc && size <= MAXR) rc = tr_run(&g);
  memset(o, 0, sizeof *o);
  for (int r = 0; r < size && r < MAXR; r++) o->sent[r] = args[r].sent;
  memcpy(o->down, g_down, sizeof g_down), memcpy(o->up, g_up, sizeof g_up);
  o->dump = rc ? NULL : slurp_bin(dump, &o->len);
  unlink(dump);
  rmdir(dir);
  sg_opts_destroy(&op);
  return rc ? rc : o->dump ? SG_OK : SG_EIO;
}

static const tcase_t cases[] = {
    {1, 2, 1000, {NULL}},
    {2, 3, 7, {NULL}},
    {2, 4, 4096, {NULL}},
    {2, 2, 1000, {"slice", "4096", "slice_from", "0", NULL}}, /* slices of 1024 floats */
    {1, 3, 333, {"compress", "fp16", NULL}},
    {2, 2, 333, {"compress", "fp16", "slice", "2048", "slice_from", "0", NULL}},
};

#define NCASES (sizeof cases / sizeof *cases)

/* Case i on the host and on the twin device (lazy or eager): equal dump
 * bytes and bytes sent; the device moved n floats down per step and n up
 * per pull.  Returns the number of differences. */
static long compare(size_t i, int dev, long *nparams) {
  const tcase_t *tc = &cases[i];
  outcome_t h, d;
  long diff = 0;
  if (run_case(tc, 0, 0, &h) < 0) return -1;
  if (run_case(tc, dev, 0, &d) < 0) {
    free(h.dump);
    return -1;
  }
  diff += h.len != d.len || memcmp(h.dump, d.dump, (size_t)h.len) != 0;
  for (int r = 0; r < tc->S + tc->N; r++) diff += h.sent[r] != d.sent[r];
  uint64_t n = (uint64_t)h.len / sizeof(float);
  *nparams = (long)n;
  for (int w = 0; w < tc->N; w++) /* sync: STEPS pushes; the first pull and STEPS more */
    diff += d.down[w] != STEPS * n || d.up[w] != (STEPS + 1) * n;
  fprintf(stderr, "  S=%d N=%d chunk %zu %s%s%s: %ld difference(s); worker 0 moved %llu floats "
          "down, %llu up (n = %llu), sent %llu bytes\n", tc->S, tc->N, tc->chunk,
          dev == 1 ? "lazy" : "eager", tc->kv[0] ? " " : "", tc->kv[0] ? tc->kv[0] : "", diff,
          (unsigned long long)d.down[0], (unsigned long long)d.up[0], (unsigned long long)n,
          (unsigned long long)d.sent[tc->S]);
  free(h.dump), free(d.dump);
  return diff;
}

TEST(ps_worker_on_the_twin_device_equals_the_host_worker_bit_for_bit) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  for (size_t i = 0; i < NCASES; i++)
    for (int dev = 1; dev <= 2; dev++) {
      long n = 0, diff = compare(i, dev, &n);
      CHECK_MSG(diff == 0, "case %zu (%s): %ld difference(s)", i, dev == 1 ? "lazy" : "eager",
                diff);
      CHECK_MSG(n % (long)cases[i].chunk != 0, "case %zu: chunk %zu divides n = %ld", i,
                cases[i].chunk, n);
    }
}

/* The planted one-way bugs: the dump must differ from the host's. */
static int planted_differs(int dev, int plant) {
  const tcase_t *tc = &cases[1];
  outcome_t h, d;
  if (run_case(tc, 0, 0, &h) < 0) return -1;
  int rc = run_case(tc, dev, plant, &d);
  int differs = rc == 0 && (h.len != d.len || memcmp(h.dump, d.dump, (size_t)h.len) != 0);
  fprintf(stderr, "  planted %s on the %s device: %s\n",
          plant == 1 ? "download without waiting for its copy" : "upload before the slot is filled",
          dev == 1 ? "lazy" : "eager", rc ? "the run failed" : differs ? "caught" : "NOT caught");
  free(h.dump), free(d.dump);
  return rc == 0 ? differs : -1;
}

TEST(planted_early_copies_are_caught) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  CHECK_EQ_INT(planted_differs(1, 1), 1);
  CHECK_EQ_INT(planted_differs(2, 2), 1);
}

TEST(one_way_runs_refuse_a_table_without_slots) {
  sg_stage_plan_t p;
  sg_stage_cursor_t c;
  sg_stage_ops_t ops = {0};
  float h[4];
  CHECK_OK(sg_stage_plan(&p, 4, 2, 2));
  CHECK(sg_stage_begin(&c, &p, &ops, SG_STAGE_DOWN, h) < 0);
  sg_err_clear();
}

/* ---- mapreduce executors on the twin device -------------------------------- */

typedef struct mr_arg {
  const sg_opts_t *opts;
  const mr_config_t *cfg;
  int workers;
  uint64_t sent;
} mr_arg_t;

static int mr_rank(sg_comm_t *c, void *p) {
  mr_arg_t *a = p;
  sg_records_t *rec = NULL;
  int rc;
  SG_TRY(sg_records_open(&rec, NULL, c->rank, c->rank ? "executor" : "driver", sg_wall(), NULL));
  sg_rank_ctx_t ctx = {.rank = c->rank, .size = c->size, .workers = a->workers, .comm = c,
                       .opts = a->opts, .rec = rec, .t0 = sg_wall()};
  rc = mr_run(&ctx, a->cfg);
fail:
  a->sent = sg_comm_bytes_sent(c);
  sg_records_close(&rec);
  return rc;
}

/* N executors and the driver, host (dev 0) or twin (1 lazy, 2 eager). */
static int run_mr(int N, size_t chunk, const char *const *kv, int dev, int plant, outcome_t *o) {
  char dir[] = "/tmp/sgdlab-replica-XXXXXX", dump[96];
  if (!mkdtemp(dir)) return SG_EIO;
  snprintf(dump, sizeof dump, "%s/mr.bin", dir);
  sg_opts_t *op = ru_train_opts("mapreduce", N, dump, STEPS, kv);
  mr_config_t cfg;
  mr_arg_t args[MAXR];
  int rc = op ? mr_config_parse(op, N, &cfg) : SG_ENOMEM;
  if (!rc && dev) cfg.dev_twin = twin_dev, cfg.dev_chunk = chunk, cfg.dev_plant = plant;
  g_lazy = dev == 1;
  memset(g_down, 0, sizeof g_down), memset(g_up, 0, sizeof g_up);
  for (int r = 0; r <= N && r < MAXR; r++) args[r] = (mr_arg_t){.opts = op, .cfg = &cfg, .workers = N};
  tr_group_t g = {.n = N + 1, .deadline_s = 60, .fn = mr_rank, .args = args,
                  .stride = sizeof *args, .what = "mapreduce replica"};
  if (!rc && N + 1 <= MAXR) rc = tr_run(&g);
  memset(o, 0, sizeof *o);
  for (int r = 0; r <= N && r < MAXR; r++) o->sent[r] = args[r].sent;
  memcpy(o->down, g_down, sizeof g_down), memcpy(o->up, g_up, sizeof g_up);
  o->dump = rc ? NULL : slurp_bin(dump, &o->len);
  unlink(dump);
  rmdir(dir);
  sg_opts_destroy(&op);
  return rc ? rc : o->dump ? SG_OK : SG_EIO;
}

static const struct mrcase {
  int N;
  size_t chunk;
  const char *kv[7];
} mr_cases[] = {
    {2, 1000, {NULL}},
    {3, 7, {"aggregate", "tree", NULL}},
    {4, 4096, {"broadcast", "tree", NULL}},
};

TEST(mapreduce_executors_on_the_twin_device_equal_the_host_ones_bit_for_bit) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  for (size_t i = 0; i < sizeof mr_cases / sizeof *mr_cases; i++)
    for (int dev = 1; dev <= 2; dev++) {
      const struct mrcase *mc = &mr_cases[i];
      outcome_t h, d;
      CHECK_OK(run_mr(mc->N, mc->chunk, mc->kv, 0, 0, &h));
      CHECK_OK(run_mr(mc->N, mc->chunk, mc->kv, dev, 0, &d));
      long diff = h.len != d.len || memcmp(h.dump, d.dump, (size_t)h.len) != 0;
      for (int r = 0; r <= mc->N; r++) diff += h.sent[r] != d.sent[r];
      uint64_t n = (uint64_t)h.len / sizeof(float), down = 0, up = 0;
      for (int e = 1; e <= mc->N; e++) { /* n up per step; n down per step with a task */
        diff += d.up[e] != STEPS * n || d.down[e] % n != 0 || d.down[e] > STEPS * n;
        down += d.down[e], up += d.up[e];
      }
      fprintf(stderr, "  mapreduce N=%d chunk %zu %s%s%s: %ld difference(s); executors moved "
              "%llu floats down, %llu up (n = %llu)\n", mc->N, mc->chunk,
              dev == 1 ? "lazy" : "eager", mc->kv[0] ? " " : "", mc->kv[0] ? mc->kv[0] : "", diff,
              (unsigned long long)down, (unsigned long long)up, (unsigned long long)n);
      CHECK_MSG(diff == 0, "case %zu: %ld difference(s)", i, diff);
      CHECK(down > 0);
      free(h.dump), free(d.dump);
    }
}

TEST(mapreduce_planted_early_copies_are_caught) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  for (int plant = 1; plant <= 2; plant++) {
    outcome_t h, d;
    CHECK_OK(run_mr(2, 1000, mr_cases[0].kv, 0, 0, &h));
    CHECK_OK(run_mr(2, 1000, mr_cases[0].kv, plant, plant, &d)); /* 1 lazy, 2 eager */
    int differs = h.len != d.len || memcmp(h.dump, d.dump, (size_t)h.len) != 0;
    fprintf(stderr, "  mapreduce planted %d: %s\n", plant, differs ? "caught" : "NOT caught");
    CHECK(differs);
    free(h.dump), free(d.dump);
  }
}
