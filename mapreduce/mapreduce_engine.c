/* mapreduce_engine.c - the `mapreduce` engine's table: options, layout
 * (driver + N executors), roles, and the per-rank entry point.  The
 * algorithm is in mapreduce.h and the mr_*.c files. */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "mapreduce.h"

/* clang-format off */
static const sg_setting_t mr_options[] = {
  {"broadcast", SG_T_ENUM, "flat", "parameters to executors: flat (driver sends N copies) or tree (binomial, like Spark's torrent broadcast)", "flat|tree", 1, 0, SG_S_ENGINE},
  {"aggregate", SG_T_ENUM, "flat", "gradients to the driver: flat (N messages) or tree (Spark's treeAggregate, see depth)", "flat|tree", 1, 0, SG_S_ENGINE},
  {"depth", SG_T_INT, "2", "aggregate tree: levels, driver included (2 = one level of combining on executors)", NULL, 1, 16, SG_S_ENGINE},
  {"partitions", SG_T_INT, "0", "tasks per step, scheduled on executors as they come free (0 = workers); at most workers*batch, task sizes differ by at most 1", NULL, 0, 1e6, SG_S_ENGINE},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

int mr_config_parse(const sg_opts_t *o, int workers, mr_config_t *cfg) {
  int64_t depth, parts, batch;
  memset(cfg, 0, sizeof *cfg);
  if (workers < 1) return sg_err_set(SG_ECONFIG, "mapreduce: workers must be >= 1, got %d", workers);
  SG_CHECK(sg_setting_int(o, mr_options, "depth", &depth));
  SG_CHECK(sg_setting_int(o, mr_options, "partitions", &parts));
  SG_CHECK(sg_setting_int(o, mr_options, "batch", &batch));
  const char *bc;
  SG_CHECK(sg_setting_str(o, mr_options, "broadcast", &bc));
  const char *ag;
  SG_CHECK(sg_setting_str(o, mr_options, "aggregate", &ag));
  if (strcmp(bc, "flat") && strcmp(bc, "tree"))
    return sg_err_set(SG_ECONFIG, "broadcast: '%s' is not one of flat|tree", bc);
  if (strcmp(ag, "flat") && strcmp(ag, "tree"))
    return sg_err_set(SG_ECONFIG, "aggregate: '%s' is not one of flat|tree", ag);
  if (depth < 1 || depth > 16) return sg_err_set(SG_ECONFIG, "depth: must be in 1..16, got %lld", (long long)depth);
  if (parts < 0) return sg_err_set(SG_ECONFIG, "partitions: must be >= 0, got %lld", (long long)parts);
  if (parts == 0) parts = workers;
  /* Every task is a slice of at least one sample of the global batch. */
  int64_t global = batch * workers;
  if (parts > global)
    return sg_err_set(SG_ECONFIG,
                      "partitions: %lld tasks exceed the global batch workers*batch = %d*%lld = %lld samples",
                      (long long)parts, workers, (long long)batch, (long long)global);
  cfg->tree_broadcast = strcmp(bc, "tree") == 0;
  cfg->depth = strcmp(ag, "tree") == 0 ? (int)depth : 1;
  cfg->partitions = (int)parts;
  cfg->executors = workers;
  cfg->batch = batch;
  return SG_OK;
}

static int mr_layout(const sg_opts_t *o, int workers, int *nprocs) {
  mr_config_t cfg;
  SG_CHECK(mr_config_parse(o, workers, &cfg));
  *nprocs = workers + 1;
  return SG_OK;
}

static const sg_role_info_t mr_roles[] = {
    {"driver", SG_ROLE_HUB}, {"executor", SG_ROLE_WORKER}, {NULL, SG_ROLE_WORKER}};

static const char *mr_role(const sg_opts_t *o, int workers, int rank) {
  (void)o;
  (void)workers;
  return rank == 0 ? "driver" : "executor";
}

int mr_run(sg_rank_ctx_t *ctx, const mr_config_t *cfg) {
  return ctx->rank == 0 ? mr_driver_run(ctx, cfg) : mr_executor_run(ctx, cfg);
}

static int mr_engine_run(sg_rank_ctx_t *ctx) {
  mr_config_t cfg;
  SG_CHECK(mr_config_parse(ctx->opts, ctx->workers, &cfg));
  return mr_run(ctx, &cfg);
}

extern const struct sg_bench_round sg_mr_bench_round; /* the benchmark round, next to the engine */

static const sg_option_need_t mr_needs[] = {
    {"depth", "aggregate", "|tree|"},
    {NULL, NULL, NULL},
};

/* The driver (rank 0): parameters, the reduced gradient, one more vector
 * of its own and the test set; an executor: its partitions' training
 * rows, parameters, gradient, two task buffers and activations for the
 * N batches it may be handed. */
static void mr_memory(const sg_opts_t *o, int workers, int rank, sg_mem_plan_t *m) {
  (void)o;
  if (rank == 0) *m = (sg_mem_plan_t){.params = 1, .grad = 1, .engine = 1, .test = 1};
  else *m = (sg_mem_plan_t){.params = 1, .grad = 1, .engine = 2, .batch_mult = workers, .train = 1};
}

extern const sg_cost_info_t sg_mr_cost_info; /* mapreduce_cost.c */

const sg_engine_t sg_engine_mapreduce = {
    .name = "mapreduce",
    .summary = "Spark-like driver: broadcast params, executors map gradients over partitions, reduce (flat or tree) to the driver",
    .options = mr_options,
    .layout = mr_layout,
    .role = mr_role,
    .roles = mr_roles,
    .check_transport = NULL,
    .run = mr_engine_run,
    .bench = &sg_mr_bench_round,
    .needs = mr_needs,
    .memory = mr_memory,
    .cost = &sg_mr_cost_info,
};
