/* test_engine_toy.c - an engine added by the recipe (docs/design.md,
 * "Adding an engine") runs as real processes, and no engine looks an
 * option up by key while it trains.
 *
 *  - The toy engine (toy_engine.c, built only in tests/engine_toy/ into a
 *    copy of sgdlab and sgdlab-rank of its own, SG_TOY_DIR) trains through
 *    `sgdlab run` with 2 workers over zmq and over mpi: status ok, every
 *    step recorded on both ranks, the final accuracy above chance by far
 *    (ACC_MIN), and both transports end with the same accuracy (the
 *    averaging order is fixed: rank order at toy_root).  `sgdlab engines`
 *    of that copy lists it; a toy_root that is not a rank is one line and
 *    exit 2 before anything starts.
 *  - No late reads: none of those runs, nor a short run of every tree
 *    engine in thirteen variants (every host allreduce algorithm; the
 *    real sgdlab; ps servers and the mapreduce driver included: a rank's
 *    first step record freezes too),
 *    records run_info opts.late_reads.*.  The
 *    copy built with TOY_PLANT_LATE_READ (SG_TOY_PLANT_DIR) reads toy_root
 *    by key every step: the same check must find it on both ranks, with a
 *    count of at least one per step and the key named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "run_util.h"
#include "test.h"

#define STEPS 150
#define ACC_MIN 0.5 /* ten classes: chance is 0.1; 150 steps reach ~0.7 */
#define LATE "SELECT count(*) FROM run_info WHERE key LIKE 'opts.late_reads.%'"

static char ok_dir[512], plant_dir[512];

static int use_bin_dir(const char *var, char *keep, size_t cap) {
  const char *d = getenv(var);
  if (!d) return -1;
  snprintf(keep, cap, "%s", d);
  return setenv("SGDLAB_BIN_DIR", keep, 1);
}

static int write_toy(const char *cfg, const char *engines) {
  char text[2048];
  snprintf(text, sizeof text,
           "name: toy\n"
           "workers: 2\n"
           "deadline: 30\n"
           "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 16,\n"
           "           lr: 0.1, momentum: 0.9, max_steps: %d, eval_every: 1000000, seed: 3}\n"
           "engines:\n%s",
           STEPS, engines);
  return ru_write_file(cfg, text);
}

TEST(toy_engine_trains_as_real_processes) {
  const char *d = ru_scratch("toy");
  CHECK(d);
  CHECK_OK(use_bin_dir("SG_TOY_DIR", ok_dir, sizeof ok_dir));
  char cfg[256], db[256], sql[256];
  snprintf(cfg, sizeof cfg, "%s/toy.yaml", d);
  snprintf(db, sizeof db, "%s/toy.db", d);
  CHECK_OK(write_toy(cfg, "  - {engine: toy, transport: zmq}\n"
                          "  - {engine: toy, transport: mpi, toy_root: 1}\n"));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  for (int id = 1; id <= 2; id++) {
    snprintf(sql, sizeof sql, "SELECT count(*) FROM runs WHERE id = %d AND status = 'ok'", id);
    CHECK_EQ_INT(ru_db_int(db, sql), 1);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM steps WHERE run_id = %d", id);
    CHECK_EQ_INT(ru_db_int(db, sql), 2 * STEPS);
    double acc = ru_final_acc(db, id);
    fprintf(stderr, "  toy run %d: final test accuracy %.4f\n", id, acc);
    CHECK_MSG(acc >= ACC_MIN, "run %d: accuracy %.4f < %.2f", id, acc, ACC_MIN);
  }
  CHECK(ru_final_acc(db, 1) == ru_final_acc(db, 2));
  CHECK_EQ_INT(ru_db_int(db, LATE), 0);

  char *out = NULL;
  CHECK_EQ_INT(ru_sgdlab_in(d, &out, "engines", NULL), 0);
  CHECK_MSG(out && strstr(out, "toy"), "sgdlab engines of the toy copy: %s", out ? out : "");
  free(out);
  /* a toy_root outside the run: one line, exit 2, no run recorded */
  snprintf(db, sizeof db, "%s/bad.db", d);
  CHECK_OK(write_toy(cfg, "  - {engine: toy, toy_root: 2}\n"));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 2);
}

TEST(no_tree_engine_reads_an_option_while_training) {
  const char *d = ru_scratch("late");
  CHECK(d);
  CHECK_OK(setenv("SGDLAB_BIN_DIR", getenv("SG_REAL_BIN_DIR"), 1));
  char cfg[256], db[256];
  snprintf(cfg, sizeof cfg, "%s/all.yaml", d);
  snprintf(db, sizeof db, "%s/all.db", d);
  CHECK_OK(write_toy(cfg, "  - {engine: local}\n"
                          "  - {engine: ps, mode: sync}\n"
                          "  - {engine: ps, mode: ssp, staleness: 2}\n"
                          "  - {engine: ps, mode: async, servers: 2, compress: fp16}\n"
                          "  - {engine: allreduce, algorithm: ring}\n"
                          "  - {engine: allreduce, algorithm: rhd, compress: fp16, overlap: true}\n"
                          "  - {engine: allreduce, algorithm: ring, compress: topk}\n"
                          "  - {engine: allreduce, algorithm: native, transport: mpi}\n"
                          "  - {engine: allreduce, algorithm: tree, update: replicated}\n"
                          "  - {engine: allreduce, algorithm: hier, segment: 64K}\n"
                          "  - {engine: allreduce, algorithm: rhd, transport: mpi}\n"
                          "  - {engine: mapreduce, aggregate: tree}\n"
                          "  - {engine: gossip, delay_rank: 1, delay_ms: 1}\n"));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), 13);
  char *late = ru_db_text(db, "SELECT group_concat(run_id || ' ' || key || ': ' || value, '; ') "
                              "FROM run_info WHERE key LIKE 'opts.late_reads.%'");
  CHECK_MSG(ru_db_int(db, LATE) == 0, "late reads: %s", late ? late : "");
  free(late);
}

TEST(a_planted_per_step_lookup_is_caught) {
  const char *d = ru_scratch("toyplant");
  CHECK(d);
  CHECK_OK(use_bin_dir("SG_TOY_PLANT_DIR", plant_dir, sizeof plant_dir));
  char cfg[256], db[256], sql[256];
  snprintf(cfg, sizeof cfg, "%s/toy.yaml", d);
  snprintf(db, sizeof db, "%s/toy.db", d);
  CHECK_OK(write_toy(cfg, "  - {engine: toy, transport: zmq}\n"));
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  CHECK_EQ_INT(ru_db_int(db, LATE), 2);
  for (int r = 0; r < 2; r++) {
    snprintf(sql, sizeof sql,
             "SELECT value FROM run_info WHERE key = 'opts.late_reads.rank%d'", r);
    char *v = ru_db_text(db, sql);
    fprintf(stderr, "  planted, rank %d: %s\n", r, v ? v : "(none)");
    CHECK(v && atol(v) >= STEPS && strstr(v, "first toy_root"));
    free(v);
  }
}
