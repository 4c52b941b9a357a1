/* test_embed_run.c - the embedding model under every engine, as real
 * processes through `sgdlab run` (zmq), on the synthetic click log.
 *
 * Equivalence: local (N = 4, global batch 4 x 16), ps sync (dense, and
 * sparse with S = 1 and S = 2), allreduce ring and mapreduce take the same
 * 40 steps; each one's final parameters (dump_params) must be within
 * relative L2 distance 1e-4 of local's (the engines sum N per-worker means
 * instead of one mean: the last bits move, no more).  gossip (not
 * synchronous: it averages with neighbours) must run and learn: final
 * accuracy above the test set's majority class (0.624) by 0.036 or more,
 * as local's.  A planted difference (local with
 * another learning rate) must fail the same distance check.
 *
 * Bytes: a sparse ps worker's bytes of step t (1 <= t < T-1, S = 1) are
 * exactly what the rows the batches touch predict, from the workload in
 * this process (worker w of 4): sent = 64 + 8 c(t) (PUSH: header, then
 * index and value per coordinate) + 64 + 4 c(t+1) (PULL of the next
 * batch's coordinates), received = 64 + 4 c(t+1) (PARAMS), where c(t) =
 * dense_len + E x (distinct table rows of the batch of step t).
 */
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "run_util.h"
#include "settings.h"
#include "workload.h"

#define STEPS 40
#define WL "dataset: clicks, model: embedding, fields: 4, table_rows: 4096, embed_dim: 8, " \
           "hidden: [16], keys_per_field: 3000, batch: 16, lr: 1, momentum: 0, "        \
           "train_samples: 4000, test_samples: 500, seed: 3, eval_every: 1000000"

static const char *const entries[][2] = {
    {"local", "{engine: local}"},
    {"ps-dense", "{engine: ps, mode: sync, servers: 1}"},
    {"ps-sparse", "{engine: ps, mode: sync, sparse: true, servers: 1}"},
    {"ps-sparse-s2", "{engine: ps, mode: sync, sparse: true, servers: 2}"},
    {"ring", "{engine: allreduce, algorithm: ring}"},
    {"mapreduce", "{engine: mapreduce}"},
    {"gossip", "{engine: gossip}"},
};
enum { NENT = sizeof entries / sizeof *entries };

static char dir[256], db[512];

/* One experiment with every entry, each dumping its parameters. */
static int run_all(void) {
  char cfg[512], path[600];
  snprintf(cfg, sizeof cfg, "%s/embed.yaml", dir);
  snprintf(db, sizeof db, "%s/e.db", dir);
  FILE *f = fopen(cfg, "w");
  if (!f) return -1;
  fprintf(f, "name: embed-engines\nworkers: 4\nworkload: {" WL ", max_steps: %d}\nengines:\n",
          STEPS);
  for (int i = 0; i < NENT; i++) {
    snprintf(path, sizeof path, "%s/%s.bin", dir, entries[i][0]);
    size_t n = strlen(entries[i][1]);
    fprintf(f, "  - %.*s, dump_params: '%s'}\n", (int)(n - 1), entries[i][1], path);
  }
  if (fclose(f)) return -1;
  return ru_sgdlab_run(cfg, db);
}

static double dist_to_local(const char *name) {
  char a[600], b[600];
  snprintf(a, sizeof a, "%s/%s.bin", dir, name);
  snprintf(b, sizeof b, "%s/local.bin", dir);
  return ru_rel_distance(a, b, NULL);
}

TEST(every_engine_trains_the_embedding_model) {
  CHECK_OK(ru_mkdtemp(dir, sizeof dir, "embed"));
  CHECK_EQ_INT(run_all(), 0);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status = 'ok'"), NENT);
  for (int i = 1; i < NENT - 1; i++) {
    double d = dist_to_local(entries[i][0]);
    fprintf(stderr, "  %s: relative distance to local %.3g\n", entries[i][0], d);
    CHECK_MSG(d >= 0 && d <= 1e-4, "%s: distance %.3g", entries[i][0], d);
  }
  /* gossip learns: above the majority class of the test set */
  double acc = ru_final_acc(db, ru_db_int(db, "SELECT max(id) FROM runs"));
  /* and so do the others (40 steps of 64 rows) */
  double lacc = ru_final_acc(db, ru_db_int(db, "SELECT min(id) FROM runs"));
  fprintf(stderr, "  local: final accuracy %.4f\n", lacc);
  fprintf(stderr, "  gossip: final accuracy %.4f\n", acc);
  CHECK(acc > 0.66 && lacc > 0.66); /* the test set's majority class: 0.624 */
}

TEST(a_planted_difference_fails_the_distance_check) {
  char cfg[512], path[600];
  snprintf(cfg, sizeof cfg, "%s/planted.yaml", dir);
  snprintf(path, sizeof path, "%s/planted.bin", dir);
  FILE *f = fopen(cfg, "w");
  CHECK(f != NULL);
  fprintf(f, "name: embed-planted\nworkers: 4\nworkload: {" WL ", max_steps: %d}\n"
          "engines:\n  - {engine: local, lr: 1.001, dump_params: '%s'}\n", STEPS, path);
  CHECK(fclose(f) == 0);
  CHECK_EQ_INT(ru_sgdlab_run(cfg, db), 0);
  double d = dist_to_local("planted");
  fprintf(stderr, "  lr 1.001 instead of 1: distance %.3g\n", d);
  CHECK(d > 1e-4);
}

/* c(t) of worker w: the coordinates its batch of step t reads. */
static int coords_of(int w, int64_t *c, int64_t steps) {
  sg_opts_t *o = sg_opts_new();
  sg_workload_t *wl = NULL;
  if (!o) return -1;
  sg_settings_defaults(sg_settings, o);
  static const char *const kv[][2] = {{"dataset", "clicks"}, {"model", "embedding"},
      {"fields", "4"}, {"table_rows", "4096"}, {"embed_dim", "8"}, {"hidden", "16"},
      {"keys_per_field", "3000"}, {"batch", "16"}, {"train_samples", "4000"},
      {"test_samples", "500"}, {"seed", "3"}};
  for (size_t i = 0; i < sizeof kv / sizeof *kv; i++) sg_opts_set(o, kv[i][0], kv[i][1]);
  int rc = sg_workload_new(&wl, o, w, 4, SG_WL_TRAIN);
  sg_opts_destroy(&o);
  for (int64_t t = 0; rc == 0 && t < steps; t++) {
    size_t n = 0;
    rc = sg_workload_sparse_coords(wl, t, NULL, 0, &n);
    if (rc == SG_ERANGE) rc = 0;
    c[t] = (int64_t)n;
  }
  sg_workload_destroy(&wl);
  return rc;
}

TEST(sparse_ps_bytes_are_what_the_touched_rows_predict) {
  /* entries[2], the third run of the first experiment */
  long long run = ru_db_int(db, "SELECT id FROM runs WHERE experiment_id = (SELECT "
                                "min(experiment_id) FROM runs) ORDER BY id LIMIT 1 OFFSET 2");
  CHECK_MSG(run > 0, "no sparse ps run with one server in %s", db);
  int checked = 0;
  for (int w = 0; w < 4; w++) {
    int64_t c[STEPS + 1];
    CHECK_OK(coords_of(w, c, STEPS + 1));
    char sql[256];
    for (int t = 1; t < STEPS - 1; t++) {
      /* worker w is rank w + 1 (rank 0 is the server) */
      snprintf(sql, sizeof sql, "SELECT bytes_sent FROM steps WHERE run_id = %lld AND rank = %d "
               "AND step = %d", run, w + 1, t);
      long long sent = ru_db_int(db, sql);
      snprintf(sql, sizeof sql, "SELECT bytes_recv FROM steps WHERE run_id = %lld AND rank = %d "
               "AND step = %d", run, w + 1, t);
      long long recv = ru_db_int(db, sql);
      CHECK_MSG(sent == 128 + 8 * c[t] + 4 * c[t + 1], "worker %d step %d: sent %lld, predicted %lld",
                w, t, sent, (long long)(128 + 8 * c[t] + 4 * c[t + 1]));
      CHECK_MSG(recv == 64 + 4 * c[t + 1], "worker %d step %d: received %lld, predicted %lld", w, t,
                recv, (long long)(64 + 4 * c[t + 1]));
      checked++;
    }
  }
  CHECK_EQ_INT(checked, 4 * (STEPS - 2));
  ru_rm_rf(dir);
}
