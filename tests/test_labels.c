/* test_labels.c - a run's name comes from the engine table
 * (sg_engine_label) everywhere a run is named.  Two ps runs that differ
 * only in `servers` (1 vs 2), as separate engine entries (no sweep, so the
 * experiment file's swept keys cannot tell them apart), must read
 * differently in the run line of `sgdlab run`, in `sgdlab list` and in
 * the report's key (summary.md), while both runs are ps sync with 2
 * workers.  Before the engine table named runs, all three said "ps sync"
 * / "ps workers=2" for both.
 */
#include "test.h"

#include <string.h>

#include "err.h"
#include "run_util.h"

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

TEST(servers_one_and_two_read_differently) {
  const char *dir = ru_scratch("labels");
  CHECK(dir);
  char cfg[256], db[256], out_dir[256];
  static char out[65536];
  snprintf(cfg, sizeof cfg, "%s/servers.yaml", dir);
  snprintf(db, sizeof db, "%s/labels.db", dir);
  snprintf(out_dir, sizeof out_dir, "%s/report", dir);
  CHECK_OK(ru_write_file(cfg,
                         "name: servers-label\n"
                         "workload: {dataset: fashion-mnist, model: softmax, batch: 16,\n"
                         "           max_steps: 5, eval_every: 1000000, seed: 3}\n"
                         "workers: 2\n"
                         "engines:\n"
                         "  - {engine: ps, servers: 1}\n"
                         "  - {engine: ps, servers: 2}\n"));
  /* the run line */
  char *run_argv[] = {"sgdlab", "run", cfg, "--db", db, NULL};
  CHECK_EQ_INT(ru_run(run_argv, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "[1/2] ps sync (zmq) workers=2 ");
  CHECK_STR_CONTAINS(out, "[2/2] ps sync servers=2 (zmq) workers=2 ");
  /* list */
  char *list_argv[] = {"sgdlab", "list", "servers-label", "--db", db, NULL};
  CHECK_EQ_INT(ru_run(list_argv, 1, NULL, out, sizeof out), 0);
  CHECK_EQ_INT(count(out, "ps sync servers=2"), 1);
  CHECK_EQ_INT(count(out, "ps sync "), 2);
  /* the report's key */
  char *rep_argv[] = {"sgdlab", "report", "servers-label", "--db", db, "--out", out_dir, NULL};
  CHECK_EQ_INT(ru_run(rep_argv, 1, NULL, out, sizeof out), 0);
  char path[512];
  snprintf(path, sizeof path, "%s/summary.md", out_dir);
  char *md = ru_slurp(path, 1 << 20);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "| ps sync | 2 | 1 | ok |");
  CHECK_STR_CONTAINS(md, "| ps sync servers=2 | 2 | 1 | ok |");
  free(md);
}

/* A run-wide key most runs share (momentum 0.9 in the workload) is not
 * what tells runs apart: it is left out of their names, while the run
 * that overrides it says so, in the run line and in the report's key. */
TEST(a_label_names_what_differs_within_the_experiment) {
  const char *dir = ru_scratch("labels2");
  CHECK(dir);
  char cfg[256], db[256], out_dir[256], path[512];
  static char out[65536];
  snprintf(cfg, sizeof cfg, "%s/momentum.yaml", dir);
  snprintf(db, sizeof db, "%s/labels.db", dir);
  snprintf(out_dir, sizeof out_dir, "%s/report", dir);
  CHECK_OK(ru_write_file(cfg,
                         "name: momentum-label\n"
                         "workload: {dataset: fashion-mnist, model: softmax, batch: 16,\n"
                         "           momentum: 0.9, max_steps: 5, eval_every: 1000000, seed: 3}\n"
                         "workers: 2\n"
                         "engines:\n"
                         "  - {engine: ps}\n"
                         "  - {engine: allreduce}\n"
                         "  - {engine: ps, mode: async, momentum: 0.5}\n"));
  char *run_argv[] = {"sgdlab", "run", cfg, "--db", db, NULL};
  CHECK_EQ_INT(ru_run(run_argv, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "[1/3] ps sync (zmq) workers=2 ");
  CHECK_STR_CONTAINS(out, "[2/3] allreduce ring (zmq) workers=2 ");
  CHECK_STR_CONTAINS(out, "[3/3] ps async momentum=0.5 (zmq) workers=2 ");
  CHECK(!strstr(out, "momentum=0.9"));
  char *rep_argv[] = {"sgdlab", "report", "momentum-label", "--db", db, "--out", out_dir, NULL};
  CHECK_EQ_INT(ru_run(rep_argv, 1, NULL, out, sizeof out), 0);
  snprintf(path, sizeof path, "%s/summary.md", out_dir);
  char *md = ru_slurp(path, 1 << 20);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "| ps sync | 2 | 1 | ok |");
  CHECK_STR_CONTAINS(md, "| ps async momentum=0.5 | 2 | 1 | ok |");
  CHECK(!strstr(md, "momentum=0.9"));
  free(md);
}

/* Two runs that differ in one rarely-shown setting (warmup_steps, a
 * workload key given in one entry only: no sweep, not a key any label
 * spells by default) read apart in every rendering of a run: the run
 * line, `list`, `show`, the report's keys and the `model` table.  The
 * name comes from the variant decided once when the experiment is
 * expanded (_variant, harness/run/variant.c); before, the run line said
 * "ps sync (zmq) workers=2" for both. */
TEST(a_rare_setting_tells_runs_apart_everywhere) {
  const char *dir = ru_scratch("labels3");
  CHECK(dir);
  char cfg[256], db[256], out_dir[256], path[512];
  static char out[65536];
  snprintf(cfg, sizeof cfg, "%s/rare.yaml", dir);
  snprintf(db, sizeof db, "%s/labels.db", dir);
  snprintf(out_dir, sizeof out_dir, "%s/report", dir);
  CHECK_OK(ru_write_file(cfg,
                         "name: rare-label\n"
                         "workload: {dataset: fashion-mnist, model: softmax, batch: 16,\n"
                         "           max_steps: 5, eval_every: 1000000, seed: 3}\n"
                         "workers: 2\n"
                         "engines:\n"
                         "  - {engine: ps}\n"
                         "  - {engine: ps, warmup_steps: 2}\n"));
  char *run_argv[] = {"sgdlab", "run", cfg, "--db", db, NULL};
  CHECK_EQ_INT(ru_run(run_argv, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "[1/2] ps sync warmup_steps=0 (zmq) workers=2 ");
  CHECK_STR_CONTAINS(out, "[2/2] ps sync warmup_steps=2 (zmq) workers=2 ");
  char *list_argv[] = {"sgdlab", "list", "rare-label", "--db", db, NULL};
  CHECK_EQ_INT(ru_run(list_argv, 1, NULL, out, sizeof out), 0);
  CHECK_EQ_INT(count(out, "ps sync warmup_steps=0 "), 1);
  CHECK_EQ_INT(count(out, "ps sync warmup_steps=2 "), 1);
  for (int run = 1; run <= 2; run++) {
    char id[8], want[64];
    snprintf(id, sizeof id, "%d", run);
    snprintf(want, sizeof want, "variant          ps sync warmup_steps=%d\n", run == 1 ? 0 : 2);
    char *show_argv[] = {"sgdlab", "show", id, "--db", db, NULL};
    CHECK_EQ_INT(ru_run(show_argv, 1, NULL, out, sizeof out), 0);
    CHECK_STR_CONTAINS(out, want);
  }
  char *rep_argv[] = {"sgdlab", "report", "rare-label", "--db", db, "--out", out_dir, NULL};
  CHECK_EQ_INT(ru_run(rep_argv, 1, NULL, out, sizeof out), 0);
  snprintf(path, sizeof path, "%s/summary.md", out_dir);
  char *md = ru_slurp(path, 1 << 20);
  CHECK(md);
  CHECK_STR_CONTAINS(md, "| A | ps sync warmup\\_steps=0 | 2 |");
  CHECK_STR_CONTAINS(md, "| B | ps sync warmup\\_steps=2 | 2 |");
  free(md);
  char *model_argv[] = {"sgdlab", "model", "rare-label", "--db", db,
                        "--alpha", "1e-5", "--beta", "1e-9", NULL};
  CHECK_EQ_INT(ru_run(model_argv, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "  ps sync warmup_steps=0\n");
  CHECK_STR_CONTAINS(out, "  ps sync warmup_steps=2\n");
}
