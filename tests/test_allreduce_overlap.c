/* test_allreduce_overlap.c - `overlap: true` as real processes.
 *
 *  - bit_equal_to_no_overlap: N = 2 workers, 100 steps of the fixture
 *    workload with 128 hidden units (MLP 784-128-10, batch 16), ring over
 *    zmq without overlap (the sharded update), then ring (zmq and mpi),
 *    rhd (mpi) and native (mpi) with overlap and 4 KiB buckets (the
 *    replicated update; 2 buckets a step: the last layer, then layer 0,
 *    whose 128 x 784 dW is one call).
 *    For N = 2 every element's sum is the same two terms, the sharded
 *    update the same operations as the replicated one, and the model
 *    makes the same sgemm calls with or without the overlap hook (its dW
 *    blocks depend on the layer's shape only; BLAS results depend on a
 *    call's shape), so the final parameters must equal the overlap-off
 *    run's byte for byte on every CPU; the bytes all ranks sent must be
 *    equal too (the whole gradient went through the transport), and
 *    every overlap step books wait_s = 0 and comm_s > 0.  A bucket left
 *    unreduced, reduced twice, or a block of rows that backward reports
 *    before it is written changes the parameters (the distance printed
 *    shows by how much: skipping the first bucket 0.43, reporting blocks
 *    before their sgemm 0.79);
 *  - matches_local_n3: N = 3 (uneven chunks, three-term sums in ring
 *    order), ring over zmq and mpi with overlap and 4 KiB buckets, 100
 *    steps, within relative L2 distance 1e-4 of `local` with batch 3b,
 *    the bound of test_allreduce_run's equivalence test (summation order
 *    only);
 *  - cnn_bit_equal: the same claim on `model: cnn` (N = 2, 30 steps):
 *    ring over zmq without overlap against overlap with 16 KiB buckets
 *    (3 buckets a step: dense 3 + dense 2, dense 1, both convolutions;
 *    the cnn's backward reports whole tensors) and with one bucket of
 *    the whole model (1 MiB); the parameters equal byte for byte, the
 *    bytes sent too;
 *  - refused: overlap with compress topk exits 2 and names `overlap`.
 */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "run_util.h"

#define RTOL 1e-4
#define OV "overlap: true, bucket: 4K"
#define H128 "hidden: [128]"

/* 1 when the two files hold the same bytes. */
static int same_bytes(const char *a, const char *b) {
  FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
  int same = f && g, x = 0, y = 0;
  while (same && (x = getc(f)) == (y = getc(g)) && x != EOF) {
  }
  same = same && x == EOF && y == EOF;
  if (f) fclose(f);
  if (g) fclose(g);
  return same;
}

/* The i-th run of db (0-based, in order of creation). */
#define RUN_I "(SELECT id FROM runs ORDER BY id LIMIT 1 OFFSET %d)"

/* Runs 1..n-1 of db against run 0 (no overlap): parameters byte-equal
 * (dumps), the same bytes sent (but for native: MPI_Allreduce's are not
 * counted) and, where steps > 0, that many steps booked as overlap books
 * them (wait 0, comm > 0). */
static void check_equal_to_first(const char *db, char (*dump)[128], const char *const *entries,
                                 int n, int steps) {
  char sql[256];
  long long sent0 = ru_db_int(db, "SELECT SUM(bytes_sent) FROM steps WHERE run_id = "
                                  "(SELECT MIN(id) FROM runs)");
  CHECK(sent0 > 0);
  for (int i = 1; i < n; i++) {
    double dist = ru_rel_distance(dump[i], dump[0], NULL);
    fprintf(stderr, "  %s: relative distance to no overlap %.3g\n", entries[i], dist);
    CHECK_MSG(same_bytes(dump[i], dump[0]), "%s: parameters differ from no overlap (%.3g)",
              entries[i], dist);
    if (steps > 0) {
      snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM steps WHERE run_id = " RUN_I
                                " AND wait_s = 0 AND comm_s > 0", i);
      CHECK_EQ_INT(ru_db_int(db, sql), steps);
    }
    if (strstr(entries[i], "native")) continue; /* MPI_Allreduce's bytes are not counted */
    snprintf(sql, sizeof sql, "SELECT SUM(bytes_sent) FROM steps WHERE run_id = " RUN_I, i);
    CHECK_MSG(ru_db_int(db, sql) == sent0, "%s: %lld bytes sent, no overlap %lld", entries[i],
              ru_db_int(db, sql), sent0);
  }
}

TEST(bit_equal_to_no_overlap) {
  static const char *const entries[] = {
      "{engine: allreduce, algorithm: ring, transport: zmq, " H128 "}",
      "{engine: allreduce, algorithm: ring, transport: zmq, " OV ", " H128 "}",
      "{engine: allreduce, algorithm: ring, transport: mpi, " OV ", " H128 "}",
      "{engine: allreduce, algorithm: rhd, transport: mpi, " OV ", " H128 "}",
      "{engine: allreduce, algorithm: native, transport: mpi, " OV ", " H128 "}",
  };
  const int n = (int)(sizeof entries / sizeof *entries);
  const char *d = ru_scratch("arov2");
  CHECK(d);
  char cfg[128], db[128], dump[5][128];
  snprintf(cfg, sizeof cfg, "%s/ov.yaml", d);
  snprintf(db, sizeof db, "%s/ov.db", d);
  for (int i = 0; i < n; i++) {
    snprintf(dump[i], sizeof dump[i], "%s/v%d.f32", d, i);
    CHECK_OK(ru_write_train_config(cfg, "overlap-n2", entries[i], NULL, dump[i], 2, 100));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", entries[i]);
  }
  check_equal_to_first(db, dump, entries, n, 2 * 100);
}

/* The fixture's workload with model: cnn (ru_write_train_config's names
 * an mlp with hidden units). */
static int write_cnn_config(const char *path, const char *engine, const char *dump) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f,
          "name: overlap-cnn\n"
          "workload: {dataset: fashion-mnist, model: cnn, batch: 16, lr: 0.05,\n"
          "           momentum: 0.9, max_steps: 30, eval_every: 1000000, seed: 3,\n"
          "           dump_params: '%s'}\n"
          "workers: 2\n"
          "engines:\n"
          "  - %s\n",
          dump, engine);
  return fclose(f) ? -1 : 0;
}

TEST(cnn_bit_equal) {
  static const char *const entries[] = {
      "{engine: allreduce, algorithm: ring, transport: zmq}",
      "{engine: allreduce, algorithm: ring, transport: zmq, overlap: true, "
      "bucket: 16K}",
      "{engine: allreduce, algorithm: ring, transport: mpi, overlap: true, "
      "bucket: 1M}",
  };
  const int n = (int)(sizeof entries / sizeof *entries);
  const char *d = ru_scratch("arovcnn");
  CHECK(d);
  char cfg[128], db[128], dump[3][128];
  snprintf(cfg, sizeof cfg, "%s/ov.yaml", d);
  snprintf(db, sizeof db, "%s/ov.db", d);
  for (int i = 0; i < n; i++) {
    snprintf(dump[i], sizeof dump[i], "%s/v%d.f32", d, i);
    CHECK_OK(write_cnn_config(cfg, entries[i], dump[i]));
    CHECK_MSG(ru_sgdlab_run(cfg, db) == 0, "%s: sgdlab run failed", entries[i]);
  }
  check_equal_to_first(db, dump, entries, n, 0);
}

TEST(matches_local_n3) {
  static const char *const variants[][2] = {
      {"{engine: allreduce, algorithm: ring, transport: zmq, " OV "}", "ring zmq overlap"},
      {"{engine: allreduce, algorithm: ring, transport: mpi, " OV "}", "ring mpi overlap"},
  };
  ru_equivalence_case("arov3", "overlap-n3", 3, variants, 2, RTOL);
}

TEST(refused_with_topk) {
  const char *d = ru_scratch("arovtk");
  CHECK(d);
  char cfg[128], db[128], cmd[512];
  snprintf(cfg, sizeof cfg, "%s/tk.yaml", d);
  snprintf(db, sizeof db, "%s/tk.db", d);
  CHECK_OK(ru_write_train_config(cfg, "overlap-topk",
                                 "{engine: allreduce, compress: topk, overlap: true}", NULL,
                                 "", 2, 10));
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --db '%s' -q 2>'%s/err'", ru_sgdlab(), cfg, db, d);
  CHECK_EQ_INT(ru_sh(cmd), 2);
  char path[160];
  snprintf(path, sizeof path, "%s/err", d);
  char *err = ru_slurp(path, 4096);
  CHECK(err);
  fprintf(stderr, "  refused: %s", err);
  CHECK_STR_CONTAINS(err, "overlap");
  free(err);
}
