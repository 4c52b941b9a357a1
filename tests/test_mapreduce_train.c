/* test_mapreduce_train.c - the mapreduce engine trains exactly like
 * `local` with batch N*b: 100 steps of the real workload (Fashion-MNIST,
 * MLP) with the driver and executors as threads over inproc ZeroMQ, the
 * final parameters (dump_params) compared with local's.  The engine code
 * is the same the processes run; test_mapreduce_run covers real processes
 * over both transports.
 *
 * Cases: flat and tree, P = N, P > N, P not dividing N*b (N = 3, b = 64,
 * P = 5), and the extremes P = 1 and P = N*b.
 *
 * Tolerance: relative L2 distance ||p - p_local|| / ||p_local|| <= 1e-4.
 * Partial sums in another order change the last bits of each step's
 * gradient; after 100 steps the distance measured here is ~4e-7.  The
 * planted bug (one executor's result counted twice) gives ~0.6, and the
 * test asserts that it fails the same check.
 */
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "mapreduce.h"
#include "settings.h"
#include "run_util.h"
#include "thread_ranks.h"
#include "transport.h"

#define STEPS 100
#define RTOL 1e-4

/* The equivalence settings (run_util.h) for this engine. */
static sg_opts_t *make_opts(int workers, const char *dump, const char *const *kv) {
  return ru_train_opts("mapreduce", workers, dump, STEPS, kv);
}

typedef struct rank_arg {
  int workers;
  const sg_opts_t *opts;
  const mr_config_t *cfg;
} rank_arg_t;

static int mr_train_rank(sg_comm_t *c, void *p) {
  rank_arg_t *a = p;
  sg_records_t *rec = NULL;
  int rc;
  SG_TRY(sg_records_open(&rec, NULL, c->rank, c->rank ? "executor" : "driver", sg_wall(), NULL));
  sg_rank_ctx_t ctx = {.rank = c->rank, .size = c->size, .workers = a->workers, .comm = c,
                       .opts = a->opts, .rec = rec, .t0 = sg_wall()};
  rc = mr_run(&ctx, a->cfg);
fail:
  sg_records_close(&rec);
  return rc;
}

/* The engine over N+1 threads; plant = executor rank counted twice. */
static int run_mapreduce(const sg_opts_t *o, int workers, int plant) {
  mr_config_t cfg;
  int size = workers + 1;
  rank_arg_t args[17];
  SG_CHECK(mr_config_parse(o, workers, &cfg));
  cfg.plant_double_rank = plant;
  if (size > 17) return SG_EINVAL;
  for (int r = 0; r < size; r++) args[r] = (rank_arg_t){.workers = workers, .opts = o, .cfg = &cfg};
  tr_group_t g = {.n = size, .deadline_s = 60, .fn = mr_train_rank, .args = args,
                  .stride = sizeof *args, .what = "mapreduce train"};
  return tr_run(&g);
}

/* One configuration against local; *dist gets the distance. */
static int compare_case(int workers, const char *const *kv, int plant, double *dist) {
  char dir[] = "/tmp/sgdlab-mrtrain-XXXXXX", local[64], mr[64];
  if (!mkdtemp(dir)) return SG_EIO;
  snprintf(local, sizeof local, "%s/local.bin", dir);
  snprintf(mr, sizeof mr, "%s/mr.bin", dir);
  sg_opts_t *ol = make_opts(workers, local, kv), *om = make_opts(workers, mr, kv);
  int rc = (ol && om) ? 0 : SG_ENOMEM;
  if (!rc) rc = ru_run_local(ol, workers);
  if (!rc) rc = run_mapreduce(om, workers, plant);
  *dist = rc ? -1 : ru_rel_distance(mr, local, NULL);
  fprintf(stderr, "  workers=%d plant=%d distance %.3g\n", workers, plant, *dist);
  unlink(local);
  unlink(mr);
  rmdir(dir);
  sg_opts_destroy(&ol);
  sg_opts_destroy(&om);
  return rc;
}

TEST(flat_matches_local) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  double d;
  CHECK_OK(compare_case(3, NULL, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "distance %.3g > %g", d, RTOL);
}

TEST(tree_matches_local) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  const char *kv[] = {"broadcast", "tree", "aggregate", "tree", "depth", "2", NULL};
  double d;
  CHECK_OK(compare_case(4, kv, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "distance %.3g > %g", d, RTOL);
}

TEST(more_partitions_than_executors_match_local) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  /* 8 tasks of 6 samples on 3 executors: dynamic scheduling and stealing */
  const char *kv[] = {"partitions", "8", "aggregate", "tree", "depth", "2", NULL};
  double d;
  CHECK_OK(compare_case(3, kv, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "distance %.3g > %g", d, RTOL);
}

TEST(partitions_not_dividing_the_global_batch_match_local) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  /* N = 3, b = 64: B = 192 in 5 tasks of 39, 39, 38, 38, 38 samples */
  const char *kv[] = {"batch", "64", "partitions", "5", NULL};
  double d;
  CHECK_OK(compare_case(3, kv, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "distance %.3g > %g", d, RTOL);
}

TEST(one_sample_per_task_and_one_task_match_local) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  /* the extremes: P = B = 2*16 tasks of one sample; P = 1 (one executor
   * runs the whole batch, the other sends zeros) */
  const char *kv_max[] = {"partitions", "32", "broadcast", "tree", NULL};
  const char *kv_one[] = {"partitions", "1", NULL};
  double d;
  CHECK_OK(compare_case(2, kv_max, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "P = 32: distance %.3g > %g", d, RTOL);
  CHECK_OK(compare_case(2, kv_one, 0, &d));
  CHECK_MSG(d >= 0 && d <= RTOL, "P = 1: distance %.3g > %g", d, RTOL);
}

TEST(planted_double_count_fails_the_check) {
  CHECK_MSG(ru_data_dir(), "Fashion-MNIST is not installed (dataset-fashion-mnist)");
  double d;
  CHECK_OK(compare_case(3, NULL, 2, &d));
  CHECK_MSG(d > RTOL, "the planted bug went unnoticed: distance %.3g <= %g", d, RTOL);
}

TEST(partitions_up_to_the_global_batch) {
  /* N = 3, b = 16: B = 48; any 1 <= P <= 48, also P not dividing 48 */
  sg_opts_t *o = make_opts(3, "", (const char *const[]){"partitions", "49", NULL});
  mr_config_t cfg;
  CHECK(o);
  int rc = mr_config_parse(o, 3, &cfg);
  CHECK_EQ_INT(rc, SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "partitions");
  CHECK_STR_CONTAINS(sg_err_msg(), "48");
  sg_opts_set(o, "partitions", "-1");
  CHECK_EQ_INT(mr_config_parse(o, 3, &cfg), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "partitions");
  const int ok[] = {1, 5, 7, 47, 48};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    sg_opts_setf(o, "partitions", "%d", ok[i]);
    CHECK_OK(mr_config_parse(o, 3, &cfg));
    CHECK_EQ_INT(cfg.partitions, ok[i]);
  }
  sg_opts_set(o, "partitions", "0");
  CHECK_OK(mr_config_parse(o, 3, &cfg));
  CHECK_EQ_INT(cfg.partitions, 3);
  sg_opts_destroy(&o);
}
