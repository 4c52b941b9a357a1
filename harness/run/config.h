/* config.h - experiment files -> a list of resolved runs.
 *
 *   name: quickstart                 # experiment keys (top level)
 *   workers: [1, 2, 4]               # a list where a scalar is expected = a sweep
 *   repeat: 3                        # every point of the sweep 3 times
 *   transport: zmq                   # run keys: defaults for every engine entry
 *   workload: {model: mlp, hidden: [256, 128], lr: [0.1, 0.05]}
 *   engines:
 *     - local                        # an engine by name, all defaults
 *     - {engine: ps, mode: ssp, staleness: [0, 2], transport: mpi}
 *
 * An engine entry may set the engine's own options, run keys, `workers`
 * and workload keys; what it sets overrides the top level for that entry.
 * `--set key=value` (value in YAML syntax, so `--set workers=[2,4]` sweeps)
 * overrides everything: `key` applies to every entry that has the key,
 * `workload.key` to the workload, `engines.I.key` to entry I (0-based).
 *
 * Sweeps: the cartesian product of every swept key, per engine entry, in
 * table order (the first swept key varies slowest), then `repeat`
 * repetitions of each point.  A list-typed key (hidden) is swept with a
 * list of lists: hidden: [[128], [256, 128]].
 *
 * Seeds: every repetition uses the same `seed` (repeats measure timing
 * spread on identical work; sweep `seed: [1, 2, 3]` to vary the seed).
 *
 * Every problem is reported before anything launches as ONE line
 * "file:line:col: key: what is wrong" (SG_ECONFIG, message in
 * sg_err_msg()); `sgdlab run` exits 2 on it.
 */
#ifndef SG_CONFIG_H
#define SG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "opts.h"

typedef struct sg_run_spec {
  /* Every global setting (defaults filled), `engine`, the engine's options
   * (defaults filled), `repeat` = the 0-based repetition index, and
   * `launcher` resolved (never "auto"). */
  sg_opts_t *opts;
  const sg_engine_t *engine;
  int workers;  /* N */
  int nprocs;   /* processes the engine's layout asks for */
  int servers;  /* ranks of kind hub (ps servers, the mapreduce driver) */
  int repeat;   /* 0-based */
  int64_t seed;
  /* The variant (harness/run/variant.c): decided once the experiment is
   * expanded, stored structured in the spec as _variant (a JSON object:
   * the engine, its options not at their default, and every other key
   * whose value tells this run apart from the experiment's other runs),
   * and rendered from it: `variant` ("ps ssp(2) momentum=0.5", also the
   * spec's _label), `label` (the variant and " workers=N"). */
  char variant[256];
  char label[288];
  int names_transport; /* the variant has the transport key */
} sg_run_spec_t;

typedef struct sg_experiment {
  char *name;        /* `name`, or the file's base name without .yaml */
  char *path;
  char *config_text; /* the file, plus one "# --set k=v" line per override */
  size_t nruns;
  sg_run_spec_t *runs;
} sg_experiment_t;

/* Parse and resolve.  sets: "key=value" strings from --set.
 * Caller owns the result. */
int sg_config_load(sg_experiment_t **out, const char *path, char *const *sets,
                   int nsets);
/* Same, from text in memory (fname names it in messages). */
int sg_config_parse(sg_experiment_t **out, const char *fname, const char *text,
                    size_t len, char *const *sets, int nsets);
/* Decide every run's variant (above) over the expanded experiment. */
int sg_config_variants(sg_experiment_t *x);
void sg_experiment_destroy(sg_experiment_t **x);

#endif
