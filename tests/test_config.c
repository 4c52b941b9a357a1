/* test_config.c - experiment files: validation messages, sweeps, --set.
 * (The same errors through the real `sgdlab` binary: test_run_cli.c.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "err.h"
#include "run_util.h"
#include "test.h"
#include "workload.h"

static sg_experiment_t *parse(const char *text, char *const *sets, int nsets, int *rc) {
  sg_experiment_t *x = NULL;
  sg_err_clear();
  *rc = sg_config_parse(&x, "t.yaml", text, strlen(text), sets, nsets);
  return x;
}

/* The error of `text` must be exactly `want`. */
#define CHECK_ERR(text, want)                                    \
  do {                                                           \
    int rc_;                                                     \
    sg_experiment_t *x_ = parse((text), NULL, 0, &rc_);          \
    CHECK_MSG(rc_ == SG_ECONFIG && !x_, "rc %d", rc_);           \
    CHECK_MSG(!strcmp(sg_err_msg(), (want)), "got '%s', want '%s'", sg_err_msg(), (want)); \
  } while (0)

TEST(unknown_key_suggests_the_closest) {
  CHECK_ERR("name: t\nworkload:\n  batchsize: 64\nengines: [local]\n",
            "t.yaml:3:3: batchsize: unknown key; did you mean 'batch'?");
  CHECK_ERR("name: t\nworkload: {lrr: 0.1}\nengines: [local]\n",
            "t.yaml:2:12: lrr: unknown key; did you mean 'lr'?");
  CHECK_ERR("name: t\nzzzzzzzz: 1\nengines: [local]\n",
            "t.yaml:2:1: zzzzzzzz: unknown key (sgdlab help config lists them)");
}

TEST(wrong_type_and_range) {
  CHECK_ERR("workload:\n  lr: fast\nengines: [local]\n",
            "t.yaml:2:7: lr: expected a number, got 'fast'");
  CHECK_ERR("workers: 0\nengines: [local]\n", "t.yaml:1:10: workers: must be >= 1");
  CHECK_ERR("workload: {model: rnn}\nengines: [local]\n",
            "t.yaml:1:19: model: 'rnn' is not one of softmax|mlp|cnn|embedding");
  CHECK_ERR("workload: {hidden: [128, x]}\nengines: [local]\n",
            "t.yaml:1:26: hidden: expected an integer, got 'x'");
  CHECK_ERR("workers: {a: 1}\nengines: [local]\n",
            "t.yaml:1:10: workers: expected a value, got a mapping");
  CHECK_ERR("repeat: [1, 2]\nengines: [local]\n", "t.yaml:1:9: repeat: takes one value, not a list");
}

TEST(wrong_section_duplicate_unknown_engine) {
  CHECK_ERR("lr: 0.1\nengines: [local]\n", "t.yaml:1:1: lr: belongs under workload:");
  CHECK_ERR("workload: {transport: mpi}\nengines: [local]\n",
            "t.yaml:1:12: transport: belongs at the top level, not under workload:");
  CHECK_ERR("workers: 2\nworkers: 3\nengines: [local]\n",
            "t.yaml:2:1: workers: duplicate key (first set at line 1)");
  char want[640];
  snprintf(want, sizeof want, "t.yaml:3:14: engine: unknown engine 'nosuch' (known: %s)",
           ru_known_engines());
  CHECK_ERR("engines:\n  - local\n  - {engine: nosuch}\n", want);
  CHECK_ERR("name: t\n", "t.yaml:1:1: engines: missing; list the engines to run, e.g. engines: [local]");
  CHECK_ERR("engines: [local\n", "t.yaml:2:1: YAML: did not find expected ',' or ']' while parsing a flow sequence");
}

TEST(engine_options_are_checked_by_the_engine_table) {
  CHECK_ERR("engines:\n  - {engine: local, mode: sync}\n",
            "t.yaml:2:21: mode: not an option of engine local (engine ps has it)");
  CHECK_ERR("engines:\n  - {engine: ps, mode: fast}\n",
            "t.yaml:2:24: mode: 'fast' is not one of sync|ssp|async");
  CHECK_ERR("mode: sync\nengines: [ps]\n",
            "t.yaml:1:1: mode: an option of engine ps; set it in its engine entry");
  CHECK_ERR("engines:\n  - {engine: local, transport: mpi, launcher: local}\n",
            "t.yaml:2:14: launcher: local cannot start MPI ranks; transport: mpi needs launcher "
            "mpirun (or auto)");
}

TEST(defaults_are_filled_and_launcher_resolved) {
  int rc;
  sg_experiment_t *x = parse("engines: [local, {engine: local, transport: mpi}]\n", NULL, 0, &rc);
  CHECK_OK(rc);
  CHECK_EQ_INT(x->nruns, 2);
  CHECK(!strcmp(x->name, "t")); /* the file's base name */
  for (const sg_setting_t *s = sg_settings; s->name; s++)
    CHECK_MSG(sg_opts_has(x->runs[0].opts, s->name), "missing %s", s->name);
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "engine"), "local"));
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "launcher"), "local"));
  CHECK(!strcmp(sg_opts_get(x->runs[1].opts, "launcher"), "mpirun"));
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "lr"), "0.05"));
  CHECK_EQ_INT(x->runs[0].nprocs, 1);
  sg_experiment_destroy(&x);
  CHECK(x == NULL);
}

/* Two entries of one engine that differ only in the model (an entry's own
 * hidden and batch beside one on the workload's) get different run lines:
 * the variant names every setting that tells a run apart. */
TEST(entries_differing_in_the_model_have_different_run_lines) {
  int rc;
  sg_experiment_t *x = parse("name: lab\nworkers: 1\n"
                             "workload: {model: mlp, hidden: [64], batch: 32}\n"
                             "engines: [local, {engine: local, hidden: [128], batch: 64}]\n",
                             NULL, 0, &rc);
  CHECK_OK(rc);
  CHECK_EQ_INT(x->nruns, 2);
  CHECK_MSG(strcmp(x->runs[0].label, x->runs[1].label) != 0, "both runs read '%s'",
            x->runs[0].label);
  CHECK_STR_CONTAINS(x->runs[0].label, "hidden=64 batch=32");
  CHECK_STR_CONTAINS(x->runs[1].label, "hidden=128 batch=64");
  sg_experiment_destroy(&x);
}

TEST(sweeps_expand_to_the_cartesian_product) {
  int rc;
  sg_experiment_t *x = parse("name: sw\nworkers: [1, 2, 4]\nrepeat: 2\n"
                             "workload: {lr: [0.1, 0.2], hidden: [[64], [128, 64]], batch: 4K}\n"
                             "engines: [local, {engine: ps, mode: [sync, async]}]\n",
                             NULL, 0, &rc);
  CHECK_OK(rc);
  /* local: 3*2*2 points * 2 repeats; ps: 3*2*2*2 points * 2 repeats */
  CHECK_EQ_INT(x->nruns, 24 + 48);
  /* first swept key (workers) varies slowest; repeats innermost */
  const sg_run_spec_t *r = x->runs;
  CHECK(!strcmp(sg_opts_get(r[0].opts, "workers"), "1"));
  CHECK(!strcmp(sg_opts_get(r[0].opts, "hidden"), "64"));
  CHECK(!strcmp(sg_opts_get(r[0].opts, "lr"), "0.1"));
  CHECK(!strcmp(sg_opts_get(r[0].opts, "batch"), "4096"));
  CHECK_EQ_INT(r[0].repeat, 0);
  CHECK_EQ_INT(r[1].repeat, 1);
  CHECK(!strcmp(sg_opts_get(r[1].opts, "repeat"), "1"));
  CHECK(!strcmp(sg_opts_get(r[2].opts, "lr"), "0.2"));
  CHECK(!strcmp(sg_opts_get(r[4].opts, "hidden"), "128,64"));
  CHECK(!strcmp(sg_opts_get(r[8].opts, "workers"), "2"));
  CHECK_EQ_INT(r[23].workers, 4);
  CHECK(!strcmp(r[24].engine->name, "ps"));
  CHECK(!strcmp(sg_opts_get(r[24].opts, "mode"), "sync"));
  CHECK(!strcmp(sg_opts_get(r[26].opts, "mode"), "async"));
  CHECK_STR_CONTAINS(r[26].label, "ps async");
  /* every run has the same seed across repeats */
  CHECK_EQ_INT(r[0].seed, r[1].seed);
  /* every (workers, lr, hidden) point appears exactly twice among local runs */
  for (int i = 0; i < 24; i++) {
    int same = 0;
    for (int j = 0; j < 24; j++)
      same += !strcmp(sg_opts_get(r[i].opts, "workers"), sg_opts_get(r[j].opts, "workers")) &&
              !strcmp(sg_opts_get(r[i].opts, "lr"), sg_opts_get(r[j].opts, "lr")) &&
              !strcmp(sg_opts_get(r[i].opts, "hidden"), sg_opts_get(r[j].opts, "hidden"));
    CHECK_EQ_INT(same, 2);
  }
  sg_experiment_destroy(&x);
}

TEST(entry_overrides_and_set) {
  int rc;
  char *sets[] = {"workload.lr=0.3", "mode=async", "engines.0.workers=[1,3]"};
  sg_experiment_t *x = parse("workers: 2\ntransport: zmq\nworkload: {lr: 0.1}\n"
                             "engines:\n  - local\n  - {engine: ps, mode: sync, transport: mpi, batch: 8}\n",
                             sets, 3, &rc);
  CHECK_OK(rc);
  CHECK_EQ_INT(x->nruns, 3);
  CHECK_EQ_INT(x->runs[0].workers, 1);
  CHECK_EQ_INT(x->runs[1].workers, 3);
  CHECK_EQ_INT(x->runs[2].workers, 2);
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "lr"), "0.3"));
  CHECK(!strcmp(sg_opts_get(x->runs[2].opts, "lr"), "0.3"));
  CHECK(!strcmp(sg_opts_get(x->runs[2].opts, "mode"), "async"));
  CHECK(!strcmp(sg_opts_get(x->runs[2].opts, "transport"), "mpi"));
  CHECK(!strcmp(sg_opts_get(x->runs[2].opts, "batch"), "8"));
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "batch"), "64"));
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "transport"), "zmq"));
  CHECK_STR_CONTAINS(x->config_text, "# --set mode=async\n");
  sg_experiment_destroy(&x);
}

TEST(bad_set_names_the_set) {
  int rc;
  char *a[] = {"lr=abc"};
  sg_experiment_t *x = parse("engines: [local]\n", a, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK(!strcmp(sg_err_msg(), "--set lr=abc: lr: expected a number, got 'abc'"));
  char *b[] = {"bacth=4"};
  x = parse("engines: [local]\n", b, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK(!strcmp(sg_err_msg(), "--set bacth=4: bacth: unknown key; did you mean 'batch'?"));
  char *c[] = {"novalue"};
  x = parse("engines: [local]\n", c, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_CONTAINS(sg_err_msg(), "expected key=value");
  char *d[] = {"mode=sync"};
  x = parse("engines: [local]\n", d, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK(!strcmp(sg_err_msg(), "--set mode=sync: mode: no engine entry runs ps, the engine with this option"));
}

/* ---- values must be numbers a run can use ------------------------------ */

static const char *const nonfinite[] = {"nan", "NaN", "-nan", "inf", "-inf", "Infinity",
                                        ".nan", ".NaN", ".inf", "-.Inf", "+.inf", "1e999"};

/* One float key set to v in the file, at the place its section wants. */
static void float_in_file(const sg_setting_t *s, const char *engine, const char *v) {
  char text[512], want[512];
  size_t kl = strlen(s->name);
  if (engine) {
    snprintf(text, sizeof text, "engines:\n  - {engine: %s, %s: %s}\n", engine, s->name, v);
    snprintf(want, sizeof want, "t.yaml:2:%zu: %s: must be a finite number, got '%s'",
             13 + strlen(engine) + 2 + kl + 3, s->name, v);
  } else if (s->section == SG_S_SIMULATE) { /* simulate: {KEY: v} */
    const char *k = s->name + strlen("simulate.");
    snprintf(text, sizeof text, "simulate:\n  %s: %s\nengines: [local]\n", k, v);
    snprintf(want, sizeof want, "t.yaml:2:%zu: %s: must be a finite number, got '%s'",
             strlen(k) + 5, s->name, v);
  } else if (s->section == SG_S_WORKLOAD) {
    snprintf(text, sizeof text, "workload:\n  %s: %s\nengines: [local]\n", s->name, v);
    snprintf(want, sizeof want, "t.yaml:2:%zu: %s: must be a finite number, got '%s'", kl + 5,
             s->name, v);
  } else {
    snprintf(text, sizeof text, "%s: %s\nengines: [local]\n", s->name, v);
    snprintf(want, sizeof want, "t.yaml:1:%zu: %s: must be a finite number, got '%s'", kl + 3,
             s->name, v);
  }
  CHECK_ERR(text, want);
}

static void float_in_set(const sg_setting_t *s, const char *engine, const char *v) {
  char arg[128], want[512], text[128];
  int rc;
  snprintf(arg, sizeof arg, "%s=%s", s->name, v);
  snprintf(text, sizeof text, "engines: [%s]\n", engine ? engine : "local");
  char *sets[] = {arg};
  sg_experiment_t *x = parse(text, sets, 1, &rc);
  CHECK_MSG(rc == SG_ECONFIG && !x, "%s: rc %d", arg, rc);
  snprintf(want, sizeof want, "--set %s: %s: must be a finite number, got '%s'", arg, s->name, v);
  CHECK_MSG(!strcmp(sg_err_msg(), want), "got '%s', want '%s'", sg_err_msg(), want);
  sg_experiment_destroy(&x);
}

TEST(nan_and_inf_are_refused_for_every_float_key) {
  int nfloat = 0;
  for (size_t i = 0; i < sizeof nonfinite / sizeof *nonfinite; i++) {
    for (const sg_setting_t *s = sg_settings; s->name; s++)
      if (s->type == SG_T_FLOAT) {
        float_in_file(s, NULL, nonfinite[i]);
        float_in_set(s, NULL, nonfinite[i]);
        nfloat += i == 0;
      }
    for (const sg_engine_t *const *e = sg_engines; *e; e++)
      for (const sg_setting_t *s = (*e)->options; s && s->name; s++)
        if (s->type == SG_T_FLOAT) {
          float_in_file(s, (*e)->name, nonfinite[i]);
          float_in_set(s, (*e)->name, nonfinite[i]);
        }
  }
  CHECK_MSG(nfloat >= 8, "only %d float keys in the table", nfloat); /* the loop ran */
  /* a sweep with one non-finite value is refused at that value */
  CHECK_ERR("workload: {lr: [0.1, .nan]}\nengines: [local]\n",
            "t.yaml:1:22: lr: must be a finite number, got '.nan'");
  /* finite extremes still pass their range checks */
  CHECK_ERR("workload: {lr: 1e308}\nengines: [local]\n", "t.yaml:1:16: lr: must be <= 1e+06");
}

/* A string value longer than what the resolved run keeps is refused: it
 * used to be cut at 1023 bytes without a word (a long data_dir then named
 * another directory).  The same through --set. */
TEST(long_strings_are_refused_not_cut) {
  static char text[4096], val[1100], set[1200];
  memset(val, 'a', 1050);
  val[0] = '/';
  snprintf(text, sizeof text, "workload: {data_dir: %s}\nengines: [local]\n", val);
  CHECK_ERR(text, "t.yaml:1:22: data_dir: longer than 1023 bytes");
  val[1023] = '\0';
  snprintf(text, sizeof text, "workload: {data_dir: %s}\nengines: [local]\n", val);
  int rc;
  sg_experiment_t *x = parse(text, NULL, 0, &rc);
  CHECK_MSG(rc == 0 && x, "1023 bytes refused: %s", sg_err_msg());
  if (x) CHECK_EQ_INT(strlen(sg_opts_get(x->runs[0].opts, "data_dir")), 1023);
  sg_experiment_destroy(&x);
  memset(val, 'b', 1050);
  snprintf(set, sizeof set, "hosts=%s", val);
  char *sets[] = {set};
  x = parse("engines: [local]\n", sets, 1, &rc);
  CHECK_MSG(rc == SG_ECONFIG && !x, "rc %d", rc);
  CHECK_STR_CONTAINS(sg_err_msg(), "hosts: longer than 1023 bytes");
  sg_experiment_destroy(&x);
}

TEST(integers_that_overflow_are_refused) {
  CHECK_ERR("workload: {batch: 9999999999999G}\nengines: [local]\n",
            "t.yaml:1:19: batch: '9999999999999G' is out of range for a 64-bit integer");
  CHECK_ERR("workload: {seed: 99999999999999999999}\nengines: [local]\n",
            "t.yaml:1:18: seed: '99999999999999999999' is out of range for a 64-bit integer");
  CHECK_ERR("workload: {hidden: [8, 9223372036854775807K]}\nengines: [local]\n",
            "t.yaml:1:24: hidden: '9223372036854775807K' is out of range for a 64-bit integer");
  CHECK_ERR("workload: {epochs: nan}\nengines: [local]\n",
            "t.yaml:1:20: epochs: must be a finite number, got 'nan'");
  /* what a rank reads back from its spec file is checked the same way */
  sg_opts_t *o = sg_opts_new();
  double d;
  int64_t v;
  CHECK_OK(sg_opts_set(o, "lr", "nan"));
  CHECK(sg_opts_double(o, "lr", &d) == SG_ECONFIG);
  CHECK_OK(sg_opts_set(o, "lr", "-inf"));
  CHECK(sg_opts_double(o, "lr", &d) == SG_ECONFIG);
  CHECK_OK(sg_opts_set(o, "batch", "9000000000000G"));
  CHECK(sg_opts_int(o, "batch", &v) == SG_ECONFIG);
  CHECK_OK(sg_opts_set(o, "batch", "4K"));
  CHECK_OK(sg_opts_int(o, "batch", &v));
  CHECK_EQ_INT(v, 4096);
  sg_opts_destroy(&o);
}

TEST(total_steps_are_checked) {
  int64_t t = -1;
  CHECK_OK(sg_workload_plan_steps(1.5, 10, 0, &t));
  CHECK_EQ_INT(t, 15);
  CHECK_OK(sg_workload_plan_steps(1e6, 937, 5, &t));
  CHECK_EQ_INT(t, 5);
  /* nan would reach an undefined float -> int64 cast (it gave INT64_MIN) */
  t = -1;
  CHECK(sg_workload_plan_steps(NAN, 937, 0, &t) == SG_ECONFIG);
  CHECK(sg_workload_plan_steps(INFINITY, 937, 0, &t) == SG_ECONFIG);
  CHECK(sg_workload_plan_steps(-1, 937, 0, &t) == SG_ECONFIG);
  CHECK_EQ_INT(t, -1);
  CHECK(sg_workload_plan_steps(0, 937, 0, &t) == SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "gives 0 steps");
  CHECK(sg_workload_plan_steps(1e6, 1000000000, 0, &t) == SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "more than the 1000000000000 one run may take");
  CHECK(sg_workload_plan_steps(1e6, 1000000000, 1000, &t) == SG_OK); /* capped by max_steps */
  CHECK_EQ_INT(t, 1000);
}

/* ---- YAML the loader must not take at face value ----------------------- */

static char *nested(size_t depth, const char *open, const char *inner, const char *close) {
  size_t lo = strlen(open), lc = strlen(close), li = strlen(inner);
  char *s = malloc(16 + depth * (lo + lc) + li + 32);
  if (!s) return NULL;
  char *p = s + sprintf(s, "workers: ");
  for (size_t i = 0; i < depth; i++) p += sprintf(p, "%s", open);
  p += sprintf(p, "%s", inner);
  for (size_t i = 0; i < depth; i++) p += sprintf(p, "%s", close);
  sprintf(p, "\nengines: [local]\n");
  return s;
}

TEST(deep_nesting_is_refused_at_the_limit) {
  /* 100k levels took libyaml's loader 35 s; the refusal comes at level 65
   * (the top-level mapping is level 1, so at the 64th '[') */
  char *t = nested(100000, "[", "1", "]");
  CHECK(t != NULL);
  CHECK_ERR(t, "t.yaml:1:73: YAML: nested deeper than 64 levels");
  free(t);
  t = nested(100000, "{a: ", "1", "}");
  CHECK_ERR(t, "t.yaml:1:262: YAML: nested deeper than 64 levels");
  free(t);
  /* block style: one level per line */
  char block[16384];
  size_t len = (size_t)sprintf(block, "x:\n");
  for (int i = 1; i < 100; i++) len += (size_t)sprintf(block + len, "%*sk:\n", i, "");
  CHECK_ERR(block, "t.yaml:65:65: YAML: nested deeper than 64 levels");
  /* 64 levels is the limit, not an error of its own */
  t = nested(63, "[", "1", "]");
  CHECK_ERR(t, "t.yaml:1:11: workers: expected a value, got a nested list");
  free(t);
  int rc;
  char *sets[] = {NULL};
  t = nested(70, "[", "", "]");
  sets[0] = t + 9 - 8; /* "workers=[[[...": the same depth through --set */
  memcpy(sets[0], "workers=", 8);
  sg_experiment_t *x = parse("engines: [local]\n", sets, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_CONTAINS(sg_err_msg(), "YAML: nested deeper than 64 levels");
  free(t);
}

TEST(a_second_document_is_refused) {
  CHECK_ERR("engines: [local]\n---\nworkers: 4\n",
            "t.yaml:2:1: YAML: a second document; an experiment file holds one (split it into two files)");
  CHECK_ERR("---\nengines: [local]\n...\n---\nengines: [ps]\n",
            "t.yaml:4:1: YAML: a second document; an experiment file holds one (split it into two files)");
  int rc; /* one explicit document is fine */
  sg_experiment_t *x = parse("---\nengines: [local]\n...\n", NULL, 0, &rc);
  CHECK_OK(rc);
  sg_experiment_destroy(&x);
}

TEST(set_of_a_whole_section_says_how_to_override_inside_it) {
  int rc;
  char *a[] = {"engines=[local]"};
  sg_experiment_t *x = parse("engines: [local, ps]\n", a, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK(!strcmp(sg_err_msg(), "--set engines=[local]: engines: the engine list cannot be replaced with "
                              "--set; edit the file, or set a key of entry I with --set "
                              "engines.I.key=value (e.g. engines.0.workers=4)"));
  char *b[] = {"workload={lr: 0.1}"};
  x = parse("engines: [local]\n", b, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_CONTAINS(sg_err_msg(), "--set workload={lr: 0.1}: workload: the workload section cannot be "
                                   "replaced with --set; set one key with --set workload.key=value");
}

/* ---- cluster: an emulated cluster for the run ---------------------------- */

TEST(cluster_section_resolves_per_entry_and_sweeps_lists_of_lists) {
  int rc;
  char *sets[] = {"engines.1.cluster.placement=pack"};
  sg_experiment_t *x = parse("workers: 4\n"
                             "cluster: {hosts: 3, link: [1gbit, 100mbit, 1gbit], loss: 1%}\n"
                             "engines: [allreduce, {engine: ps, cluster: {hosts: 5, link: [[1gbit], [200mbit]]}}]\n",
                             sets, 1, &rc);
  CHECK_OK(rc);
  CHECK_EQ_INT(x->nruns, 3);
  const sg_opts_t *a = x->runs[0].opts, *p = x->runs[2].opts;
  CHECK(!strcmp(sg_opts_get(a, "cluster.hosts"), "3"));
  CHECK(!strcmp(sg_opts_get(a, "cluster.link"), "1gbit,100mbit,1gbit"));
  CHECK(!strcmp(sg_opts_get(a, "cluster.loss"), "1%"));
  CHECK(!strcmp(sg_opts_get(a, "cluster.placement"), "spread"));
  CHECK(!strcmp(sg_opts_get(a, "zmq_scheme"), "tcp")); /* ranks talk over the links */
  /* the entry's own cluster keys win over the top level's, key by key */
  CHECK(!strcmp(sg_opts_get(p, "cluster.hosts"), "5"));
  CHECK(!strcmp(sg_opts_get(p, "cluster.link"), "200mbit"));
  CHECK(!strcmp(sg_opts_get(p, "cluster.loss"), "1%"));
  CHECK(!strcmp(sg_opts_get(p, "cluster.placement"), "pack"));
  CHECK_STR_CONTAINS(x->runs[1].label, "cluster.link=1gbit");
  sg_experiment_destroy(&x);
  /* no cluster: nothing changes */
  x = parse("engines: [ps]\n", NULL, 0, &rc);
  CHECK_OK(rc);
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "cluster.hosts"), "0"));
  CHECK(!strcmp(sg_opts_get(x->runs[0].opts, "zmq_scheme"), "ipc"));
  sg_experiment_destroy(&x);
}

TEST(cluster_errors_name_the_key_and_its_place) {
  CHECK_ERR("cluster: {hosts: 3, link: 1gbps}\nengines: [ps]\n",
            "t.yaml:1:27: cluster.link: rate '1gbps': unknown unit 'gbps' (bit, kbit, mbit, gbit, "
            "tbit; e.g. 200mbit)");
  CHECK_ERR("cluster: {hosts: 3, link: [1gbit, 2gbit]}\nengines: [ps]\n",
            "t.yaml:1:21: cluster.link: 2 values for 3 hosts (give one for every host, or one per host)");
  CHECK_ERR("cluster: {hosts: 2, loss: [0, 1.5]}\nengines: [ps]\n",
            "t.yaml:1:31: cluster.loss: loss '1.5': must be in [0, 1)");
  CHECK_ERR("cluster: {hosts: 300}\nengines: [ps]\n", "t.yaml:1:18: cluster.hosts: must be <= 64");
  CHECK_ERR("cluster: {hosts: 3, links: 1gbit}\nengines: [ps]\n",
            "t.yaml:1:21: cluster.links: unknown cluster key (hosts, link, loss, placement, racks, uplink)");
  CHECK_ERR("cluster.hosts: 3\nengines: [ps]\n",
            "t.yaml:1:1: cluster.hosts: belongs under cluster: (cluster: {hosts: ...})");
  CHECK_ERR("cluster: 3\nengines: [ps]\n",
            "t.yaml:1:1: cluster: expected a mapping of cluster keys, e.g. {hosts: 4, link: 1gbit}");
  CHECK_ERR("workload: {cluster: {hosts: 2}}\nengines: [ps]\n",
            "t.yaml:1:12: cluster: belongs at the top level or in an engine entry, not under workload:");
  CHECK_ERR("cluster: {hosts: 2, link: [[1gbit], 2gbit]}\nengines: [ps]\n",
            "t.yaml:1:37: cluster.link: a sweep of lists needs every item to be a list, e.g. "
            "[[1gbit], [100mbit]]");
  int rc;
  char *set[] = {"cluster.link=[1gbit,x]"};
  sg_experiment_t *x = parse("cluster: {hosts: 2}\nengines: [ps]\n", set, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK(!strcmp(sg_err_msg(), "--set cluster.link=[1gbit,x]: cluster.link: rate 'x': not a rate "
                              "(a number and a unit, e.g. 1gbit, 200mbit)"));
}

/* mpirun places ranks on a cluster's hosts itself (launch.c); an mpirun
 * host list would contradict the placement. */
TEST(cluster_takes_mpirun_and_refuses_host_lists) {
  int rc0;
  sg_experiment_t *x0 = parse("cluster: {hosts: 3}\ntransport: mpi\nengines: [allreduce]\n", NULL, 0,
                              &rc0);
  CHECK_OK(rc0);
  CHECK(!strcmp(sg_opts_get(x0->runs[0].opts, "launcher"), "mpirun"));
  sg_experiment_destroy(&x0);
  CHECK_ERR("cluster: {hosts: 2}\nhosts: 'a:2'\nengines: [ps]\n",
            "t.yaml:1:11: cluster.hosts: hosts 'a:2' (an mpirun host list) and a cluster exclude "
            "each other: the cluster places the ranks");
  /* in one engine entry only: the other entries keep mpi */
  int rc;
  sg_experiment_t *x = parse("transport: mpi\nengines: [ps, {engine: allreduce, transport: zmq, "
                             "cluster: {hosts: 2}}]\n", NULL, 0, &rc);
  CHECK_OK(rc);
  CHECK_EQ_INT(x->nruns, 2);
  sg_experiment_destroy(&x);
}

#define CHECK_STR_EQ(a, b) CHECK_MSG(!strcmp((a), (b)), "got '%s', want '%s'", (a), (b))

/* Relative data paths in the file are relative to the file, not to the
 * directory sgdlab runs in; absolute ones stay; --set is relative to the
 * current directory.  The run stores the resolved, absolute path. */
TEST(relative_data_paths_resolve_against_the_experiment_file) {
  char dir[256], sub[300], path[400], want[700], cwd[4096], wantset[4400];
  CHECK(ru_mkdtemp(dir, sizeof dir, "cfg-paths") == 0);
  snprintf(sub, sizeof sub, "%s/exp", dir);
  snprintf(path, sizeof path, "%s/x.yaml", sub);
  CHECK(mkdir(sub, 0700) == 0);
  CHECK(ru_write_file(path, "workload: {dataset: [libsvm, mnist], train_file: data/a.svm,\n"
                            "  test_file: /abs/b.svm, data_dir: ../idx}\n"
                            "engines: [local]\n") == 0);
  sg_experiment_t *x = NULL;
  CHECK_OK(sg_config_load(&x, path, NULL, 0));
  char *real = realpath(sub, NULL);
  snprintf(want, sizeof want, "%s/data/a.svm", real);
  CHECK_STR_EQ(sg_opts_get(x->runs[0].opts, "train_file"), want);
  CHECK_STR_EQ(sg_opts_get(x->runs[0].opts, "test_file"), "/abs/b.svm");
  CHECK_STR_EQ(sg_opts_get(x->runs[0].opts, "data_dir"), "../idx"); /* unused by libsvm */
  snprintf(want, sizeof want, "%s/../idx", real);
  CHECK_STR_EQ(sg_opts_get(x->runs[1].opts, "data_dir"), want);
  sg_experiment_destroy(&x);
  char *sets[] = {"workload.train_file=c.svm"};
  CHECK_OK(sg_config_load(&x, path, sets, 1));
  CHECK(getcwd(cwd, sizeof cwd) != NULL);
  snprintf(wantset, sizeof wantset, "%s/c.svm", cwd);
  CHECK_STR_EQ(sg_opts_get(x->runs[0].opts, "train_file"), wantset);
  sg_experiment_destroy(&x);
  free(real);
  ru_rm_rf(dir);
}

/* A file with four mistakes reports all four, by line, one a line. */
TEST(every_key_error_of_a_file_is_reported_at_once) {
  CHECK_ERR("workers: 0\n"
            "workload:\n"
            "  lr: fast\n"
            "  batchsize: 64\n"
            "engines:\n"
            "  - {engine: ps, mode: sometimes}\n",
            "t.yaml:1:10: workers: must be >= 1\n"
            "t.yaml:3:7: lr: expected a number, got 'fast'\n"
            "t.yaml:4:3: batchsize: unknown key; did you mean 'batch'?\n"
            "t.yaml:6:24: mode: 'sometimes' is not one of sync|ssp|async");
  /* a structural mistake that stops the walk is still reported, after them */
  CHECK_ERR("workers: 0\nworkload: {engines: [local]}\nengines: [local]\n",
            "t.yaml:1:10: workers: must be >= 1\n"
            "t.yaml:2:12: engines: belongs at the top level");
}

/* Workload keys that do nothing for any run are errors, like engine
 * options: the key's place, the key, the condition that makes it count. */
TEST(workload_keys_no_run_uses_are_errors) {
  CHECK_ERR("workload: {train_file: a.svm}\nengines: [local]\n",
            "t.yaml:1:12: train_file: only used with dataset: libsvm/clicks");
  CHECK_ERR("workload: {model: softmax, hidden: [64]}\nengines: [local]\n",
            "t.yaml:1:28: hidden: only used with model: mlp/embedding");
  CHECK_ERR("workload: {dataset: synthetic, nnz: 10}\nengines: [local]\n",
            "t.yaml:1:32: nnz: only used with dataset: synthetic-sparse");
  CHECK_ERR("workload: {nnz: 10}\nengines: [local]\n",
            "t.yaml:1:12: nnz: only used with dataset: synthetic-sparse");
  CHECK_ERR("workload: {lr_gamma: 0.5}\nengines: [local]\n",
            "t.yaml:1:12: lr_gamma: only used with lr_schedule: step");
  CHECK_ERR("workload: {lr_schedule: cosine, lr_step_epochs: 2}\nengines: [local]\n",
            "t.yaml:1:33: lr_step_epochs: only used with lr_schedule: step");
  CHECK_ERR("workload: {classes: 5}\nengines: [local]\n",
            "t.yaml:1:12: classes: only used with dataset: libsvm/synthetic/synthetic-sparse");
  CHECK_ERR("workload: {dataset: synthetic, data_dir: /x}\nengines: [local]\n",
            "t.yaml:1:32: data_dir: only used with dataset: fashion-mnist/mnist");
  CHECK_ERR("workload: {partition_alpha: 0.1}\nengines: [gossip]\n",
            "t.yaml:1:12: partition_alpha: only used with partition: label-skew");
  CHECK_ERR("workload: {partition: by-class, partition_alpha: 0.1}\nengines: [gossip]\n",
            "t.yaml:1:33: partition_alpha: only used with partition: label-skew");
  CHECK_ERR("workload: {partition: label-skew, partition_alpha: 0}\nengines: [gossip]\n",
            "t.yaml:1:52: partition_alpha: must be >= 0.001");
  CHECK_ERR("workload: {partition: label-skew}\nengines: [local, mapreduce]\n",
            "t.yaml:1:12: partition: only used with engine: ps/allreduce/gossip");
  /* in one entry: that entry's runs must use it */
  CHECK_ERR("engines:\n  - local\n  - {engine: local, model: softmax, hidden: [8]}\n",
            "t.yaml:3:37: hidden: only used with model: mlp/embedding");
  /* for the whole experiment: one run of any entry is enough */
  int rc;
  sg_experiment_t *x = parse("workload: {hidden: [8]}\n"
                             "engines:\n  - local\n  - {engine: local, model: softmax}\n",
                             NULL, 0, &rc);
  CHECK_MSG(x != NULL, "%s", sg_err_msg());
  sg_experiment_destroy(&x);
  x = parse("workload: {model: [softmax, mlp], hidden: [8], lr_schedule: [constant, step],"
            " lr_gamma: 0.5}\nengines: [local]\n", NULL, 0, &rc);
  CHECK_MSG(x != NULL, "%s", sg_err_msg());
  sg_experiment_destroy(&x);
}

/* A value quoted in an error is data: its control characters are escaped,
 * so a terminal escape in an experiment file cannot drive the terminal. */
TEST(config_errors_escape_control_characters) {
  CHECK_ERR("workload: {lr: \"\\e]2;x\\a\\e[31m\"}\nengines: [local]\n",
            "t.yaml:1:16: lr: expected a number, got '\\x1b]2;x\\x07\\x1b[31m'");
}

/* An option only some variant of its engine reads is an error when no run
 * of the entry uses that variant, naming what makes it meaningful. */
TEST(options_no_run_uses_are_errors) {
  CHECK_ERR("engines:\n  - {engine: ps, mode: async, staleness: 3}\n",
            "t.yaml:2:31: staleness: only used with mode: ssp");
  CHECK_ERR("engines:\n  - {engine: mapreduce, depth: 3}\n",
            "t.yaml:2:25: depth: only used with aggregate: tree");
  CHECK_ERR("engines:\n  - {engine: allreduce, algorithm: native, transport: mpi, segment: 64K}\n",
            "t.yaml:2:60: segment: only used with algorithm: ring/rhd/tree/hier/cuda-ring");
  CHECK_ERR("workload: {holdout: 0.1}\nengines: [local]\n",
            "t.yaml:1:12: holdout: only used with dataset: libsvm/clicks");
  int rc;
  /* a sweep where some run uses it is fine */
  sg_experiment_t *x = parse("engines:\n  - {engine: ps, mode: [sync, ssp], staleness: 3}\n",
                             NULL, 0, &rc);
  CHECK_MSG(rc == 0 && x && x->nruns == 2, "%s", sg_err_msg());
  sg_experiment_destroy(&x);
  char *a[] = {"engines.0.staleness=1"};
  x = parse("engines:\n  - {engine: ps}\n", a, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_CONTAINS(sg_err_msg(), "--set engines.0.staleness=1: staleness: only used with mode: ssp");
}

/* --set mistakes a new user makes get messages that say what to do. */
TEST(set_messages_name_what_exists) {
  int rc;
  char *a[] = {"engines.3.mode=ssp"};
  sg_experiment_t *x = parse("engines: [ps, {engine: ps, mode: async}, ps]\n", a, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_EQ(sg_err_msg(), "--set engines.3.mode=ssp: engines.3.mode: no engine entry 3: "
                             "engines: has 3 entries (0..2)");
  /* the entry exists but runs another engine: which entries have the option */
  x = parse("engines: [ps, {engine: ps, mode: async}, ps, local]\n", a, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_EQ(sg_err_msg(), "--set engines.3.mode=ssp: mode: engines.3 runs local; mode is an "
                             "option of ps (entries 0, 1, 2)");
  /* spaces around '=' are dropped, inside a key refused */
  char *b[] = {" lr = 0.25 "};
  x = parse("engines: [local]\n", b, 1, &rc);
  CHECK_MSG(rc == 0 && x, "%s", sg_err_msg());
  CHECK_STR_EQ(sg_opts_get(x->runs[0].opts, "lr"), "0.25");
  sg_experiment_destroy(&x);
  char *c[] = {"l r=0.1"};
  x = parse("engines: [local]\n", c, 1, &rc);
  CHECK(rc == SG_ECONFIG && !x);
  CHECK_STR_EQ(sg_err_msg(), "--set l r=0.1: l r: a key has no spaces (expected key=value)");
  /* integer bounds in full */
  CHECK_ERR("workload: {seed: 99999999999}\nengines: [local]\n",
            "t.yaml:1:18: seed: must be <= 4294967295");
}

/* The engine table says where an engine runs (sg_engine_t.devices), what
 * kind each role is (roles: ps server and mapreduce driver are hubs) and
 * whether its gradients are stale (stale: ps ssp and async); the harness
 * reads these, never names.  `device: cuda` for an engine that runs on
 * the CPU only is one line naming the key's position, before any GPU
 * check (so on any machine). */
TEST(engine_table_devices_roles_and_staleness) {
  CHECK_ERR("engines: [gossip]\nworkload: {dataset: synthetic, device: cuda}\n",
            "t.yaml:2:32: device: cuda: the gossip engine runs on cpu only");
  const sg_engine_t *ps = sg_engine_find("ps"), *mr = sg_engine_find("mapreduce"),
                    *ar = sg_engine_find("allreduce");
  CHECK(ps && mr && ar);
  CHECK(!sg_engine_runs_on(sg_engine_find("gossip"), "cuda"));
  CHECK(sg_engine_runs_on(sg_engine_find("gossip"), "cpu"));
  CHECK(sg_engine_runs_on(ar, "cuda") && !sg_engine_runs_on(sg_engine_find("gossip"), "cu"));
  sg_opts_t *o = sg_opts_new();
  CHECK(o);
  CHECK_OK(sg_opts_set(o, "servers", "2"));
  CHECK_OK(sg_opts_set(o, "mode", "sync"));
  CHECK_EQ_INT(sg_engine_role_kind(ps, o, 4, 0), SG_ROLE_HUB);
  CHECK_EQ_INT(sg_engine_role_kind(ps, o, 4, 1), SG_ROLE_HUB);
  CHECK_EQ_INT(sg_engine_role_kind(ps, o, 4, 2), SG_ROLE_WORKER);
  CHECK_EQ_INT(sg_engine_role_kind(mr, o, 4, 0), SG_ROLE_HUB);
  CHECK_EQ_INT(sg_engine_role_kind(mr, o, 4, 1), SG_ROLE_WORKER);
  CHECK_EQ_INT(sg_engine_role_kind(ar, o, 4, 0), SG_ROLE_WORKER);
  CHECK(ps->stale && !ps->stale(o));
  CHECK_OK(sg_opts_set(o, "mode", "ssp"));
  CHECK(ps->stale(o));
  CHECK_OK(sg_opts_set(o, "mode", "async"));
  CHECK(ps->stale(o));
  CHECK(!ar->stale && !mr->stale);
  sg_opts_destroy(&o);
}
