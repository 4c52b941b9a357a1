/* main.c - the `sgdlab` CLI: dispatch, `engines`, `help config`.
 *
 * Each subcommand lives in its own file (commands.h) and returns the exit
 * code; only main() exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "commands.h"
#include "device.h"
#include "engine.h"
#include "reconcile.h"
#include "report.h"
#include "run.h"
#include "settings.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab COMMAND [options]      (sgdlab COMMAND --help for its options)\n"
          "\n"
          "Run one data-parallel SGD workload under interchangeable synchronization\n"
          "engines, record timing and convergence into SQLite, and plot them.\n"
          "\n"
          "commands:\n"
          "  run CONFIG       run an experiment file (sweeps, repeats) and record it\n"
          "  bench allreduce  one step of communication per size: ring, rhd, native,\n"
          "                   ps, mapreduce (time, algbw, busbw)\n"
          "  bench step       single-process training-step throughput vs its sgemm bound\n"
          "  report           figures, summary.md and index.html from the database\n"
          "  list             experiments and runs in the database (--json)\n"
          "  show RUN         one run: options, status, ranks, evaluations\n"
          "  trace RUN        a run's steps as a Perfetto / chrome://tracing timeline\n"
          "  export           an experiment's rows as CSV or JSON\n"
          "  model            predicted (alpha-beta-gamma) vs measured step time per run\n"
          "  engines          the engines and their options\n"
          "  cluster          an emulated cluster in this machine: network namespaces\n"
          "                   joined by rate-limited links (up, status, exec, down)\n"
          "  help config      every experiment-file key (--markdown for docs)\n"
          "\n"
          "  --version        print the version\n"
          "  -h, --help       this help\n");
}

/* ---- sgdlab engines ---------------------------------------------------- */

static void print_option(FILE *f, const sg_setting_t *s, int indent) {
  char range[64] = "";
  if (s->choices) snprintf(range, sizeof range, " {%s}", s->choices);
  else if (s->min <= s->max && s->type != SG_T_STR)
    snprintf(range, sizeof range, " [%g..%g]", s->min, s->max);
  fprintf(f, "%*s%-16s %-8s default %-10s %s%s\n", indent, "", s->name, sg_type_name(s->type),
          s->def[0] ? s->def : "\"\"", s->help, range);
}

int sg_cmd_engines(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: sgdlab engines\n\nList every engine with its one-line summary and its options\n"
             "(name, type, default, help, choices or bounds), and the devices this build supports.\n");
      return 0;
    }
    fprintf(stderr, "sgdlab engines: unknown argument '%s'\n", argv[i]);
    return 2;
  }
  printf("devices (workload key device): %s\n\n", sg_device_build());
  for (const sg_engine_t *const *e = sg_engines; *e; e++) {
    printf("%s\n  %s\n", (*e)->name, (*e)->summary);
    if (!(*e)->options || !(*e)->options->name) printf("  (no options)\n");
    for (const sg_setting_t *s = (*e)->options; s && s->name; s++) print_option(stdout, s, 4);
    printf("\n");
  }
  return 0;
}

/* ---- sgdlab help config ------------------------------------------------ */

static const char CONFIG_INTRO[] =
    "An experiment file is YAML.  Top level: experiment keys and run keys;\n"
    "`workload:` holds the workload keys; `engines:` lists the engines to run,\n"
    "each a name (`- local`) or a mapping (`- {engine: ps, mode: sync}`) with\n"
    "that engine's options and any run key, `workers` or workload key to\n"
    "override for that entry.\n"
    "\n"
    "A list where one value is expected is a sweep: `workers: [1, 2, 4]` runs\n"
    "every engine entry at each value; several swept keys give their cartesian\n"
    "product (`workers` varies slowest, then workload keys, run keys and engine\n"
    "options, in the order of the tables below).  List-typed keys\n"
    "(`hidden: [256, 128]`) sweep with a list of lists: `hidden: [[128], [256, 128]]`.\n"
    "`repeat: R` runs every point R times with the same seed (sweep `seed` to\n"
    "vary it).\n"
    "\n"
    "`sgdlab run FILE --set key=value` overrides a key in every run (YAML value\n"
    "syntax, so `--set lr=[0.1,0.05]` sweeps); `workload.key` and\n"
    "`engines.I.key` (entry I, from 0) are accepted too; `engines` and\n"
    "`workload` themselves cannot be replaced from the command line.\n"
    "\n"
    "Everything is checked before anything launches: a problem is one line\n"
    "`file:line:col: key: what is wrong` and exit status 2.  Numbers must be\n"
    "finite (`nan`, `inf`, `.nan`, `.inf` are refused) and integers fit 64 bits\n"
    "with their K/M/G suffix; a file holds one YAML document nested at most 64\n"
    "levels deep.\n"
    "\n"
    "Admission: `sgdlab run` (and `run -n`) then checks every run against this\n"
    "host.  Total steps come from the data's real row count (0 steps, or more\n"
    "than 1e12, is an error).  Memory is estimated per rank -- the training\n"
    "and test sets as the ranks decode them (float32 rows, CSR for sparse data;\n"
    "every worker holds the whole training set), parameters, gradient,\n"
    "optimizer state, activations and the engine's buffers (a ps server's shard\n"
    "and per-worker slots, a ring's scratch) -- summed over the ranks placed on\n"
    "this host and compared with MemAvailable: a run that does not fit is one\n"
    "line (needed, available, the biggest term) and exit 2 unless `--force`.\n"
    "Transport zmq is a full mesh: more processes than libzmq's sockets per\n"
    "process or the open-file limit allow are refused (`--force` does not\n"
    "apply); more processes than 4x the cores is a warning.  The datasets are\n"
    "opened (IDX headers read, LIBSVM files loaded) once per experiment.\n";

static const char CLUSTER_INTRO[] =
    "`cluster: {hosts: 4, link: 1gbit}` runs the ranks on an emulated cluster\n"
    "made for the run and removed after it (docs/cluster.md): each host a\n"
    "network namespace, its link rate-limited in both directions.  Needs root\n"
    "(CAP_NET_ADMIN and CAP_SYS_ADMIN), transport zmq and the local launcher;\n"
    "ranks talk tcp over the links (zmq_scheme is set to tcp, CURVE as\n"
    "zmq_auth says), the harness's records and rendezvous stay on ipc.  The\n"
    "keys are written `cluster.KEY` with --set (`--set cluster.hosts=4`); a\n"
    "per-host list sweeps as a list of lists (`link: [[1gbit], [100mbit]]`).\n"
    "The `ranks` table records each rank's `cluster_host` and `address`,\n"
    "run_info the cluster's name and every link's byte counters.\n";

static const char EXAMPLE[] =
    "name: quickstart\n"
    "workers: 4\n"
    "workload: {dataset: fashion-mnist, model: mlp, hidden: [128], batch: 64, lr: 0.05, epochs: 2}\n"
    "engines:\n"
    "  - local\n"
    "  - {engine: ps, mode: sync}\n"
    "  - {engine: allreduce, algorithm: ring, transport: mpi}\n";

static const char SIMULATE_INTRO[] =
    "`simulate: {link: 10gbit, latency: 1us}` runs the engine's own rank code\n"
    "as simulated processes of SimGrid SMPI on a platform made for the run\n"
    "(docs/simulate.md): MPI calls and clocks in simulated time, computation\n"
    "executed or modeled.  Needs transport mpi and a build with SimGrid\n"
    "(sgdlab-rank-smpi).  Keys are written `simulate.KEY` with --set.\n";

static const char *section_title(sg_section_t s) {
  switch (s) {
  case SG_S_EXPERIMENT: return "Experiment keys (top level)";
  case SG_S_WORKLOAD: return "Workload keys (under `workload:`)";
  case SG_S_RUN: return "Run keys (top level, or per engine entry)";
  case SG_S_ENGINE: return "Engine keys";
  case SG_S_CLUSTER: return "Cluster keys (under `cluster:`, top level or per engine entry)";
  case SG_S_SIMULATE: return "Simulation keys (under `simulate:`, top level or per engine entry)";
  }
  return "?";
}

static void md_escape(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '|') fputs("\\|", f);
    else fputc(*s, f);
  }
}

static void md_table(FILE *f, const sg_setting_t *table, int section) {
  fprintf(f, "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
  for (const sg_setting_t *s = table; s && s->name; s++) {
    if (section >= 0 && (int)s->section != section) continue;
    char range[96] = "";
    if (s->choices) snprintf(range, sizeof range, "%s", s->choices);
    else if (s->min <= s->max && s->type != SG_T_STR) snprintf(range, sizeof range, "%g .. %g", s->min, s->max);
    fprintf(f, "| `%s` | %s | %s%s%s | ", s->name, sg_type_name(s->type), s->def[0] ? "`" : "",
            s->def[0] ? s->def : "(empty)", s->def[0] ? "`" : "");
    md_escape(f, range);
    fprintf(f, " | ");
    md_escape(f, s->help);
    fprintf(f, " |\n");
  }
  fprintf(f, "\n");
}

static void help_config(FILE *f, int markdown) {
  static const sg_section_t order[] = {SG_S_EXPERIMENT, SG_S_RUN, SG_S_WORKLOAD, SG_S_CLUSTER,
                                       SG_S_SIMULATE};
  const size_t nsec = sizeof order / sizeof order[0];
  if (markdown) {
    fprintf(f, "# Experiment files\n\n<!-- generated by `sgdlab help config --markdown`; "
               "edit core/settings.c or the engine's options, not this file -->\n\n");
    fprintf(f, "%s\n```yaml\n%s```\n\n", CONFIG_INTRO, EXAMPLE);
    for (size_t i = 0; i < nsec; i++) {
      fprintf(f, "## %s\n\n", section_title(order[i]));
      if (order[i] == SG_S_CLUSTER) fprintf(f, "%s\n", CLUSTER_INTRO);
      if (order[i] == SG_S_SIMULATE) fprintf(f, "%s\n", SIMULATE_INTRO);
      md_table(f, sg_settings, (int)order[i]);
    }
    fprintf(f, "## Engines\n\n");
    for (const sg_engine_t *const *e = sg_engines; *e; e++) {
      fprintf(f, "### `%s`\n\n%s\n\n", (*e)->name, (*e)->summary);
      if (!(*e)->options || !(*e)->options->name) fprintf(f, "No options.\n\n");
      else md_table(f, (*e)->options, -1);
    }
    return;
  }
  fprintf(f, "%s\nexample:\n\n%s\n", CONFIG_INTRO, EXAMPLE);
  /* build-dependent, so not in the --markdown reference */
  fprintf(f, "devices in this build (workload key device): %s\n\n", sg_device_build());
  for (size_t i = 0; i < nsec; i++) {
    fprintf(f, "%s:\n", section_title(order[i]));
    if (order[i] == SG_S_CLUSTER) fprintf(f, "%s", CLUSTER_INTRO);
    if (order[i] == SG_S_SIMULATE) fprintf(f, "%s", SIMULATE_INTRO);
    for (const sg_setting_t *s = sg_settings; s->name; s++)
      if (s->section == order[i]) print_option(f, s, 2);
    fprintf(f, "\n");
  }
  for (const sg_engine_t *const *e = sg_engines; *e; e++) {
    fprintf(f, "engine %s: %s\n", (*e)->name, (*e)->summary);
    if (!(*e)->options || !(*e)->options->name) fprintf(f, "  (no options)\n");
    for (const sg_setting_t *s = (*e)->options; s && s->name; s++) print_option(f, s, 2);
    fprintf(f, "\n");
  }
}

int sg_cmd_help(int argc, char **argv) {
  int markdown = 0;
  const char *topic = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--markdown")) markdown = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: sgdlab help config [--markdown]\n\n"
             "Print every experiment-file key (type, default, allowed values, meaning)\n"
             "and every engine's options.\n"
             "  --markdown   the same as Markdown (docs/config.md is this output)\n");
      return 0;
    } else if (!topic) topic = argv[i];
    else {
      fprintf(stderr, "sgdlab help: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (!topic) {
    usage(stdout);
    return 0;
  }
  if (strcmp(topic, "config") != 0) {
    fprintf(stderr, "sgdlab help: no help topic '%s' (try: sgdlab help config)\n", topic);
    return 2;
  }
  help_config(stdout, markdown);
  return 0;
}

/* Commands that only read the database (list, show, report) first bring
 * it up to date: runs whose harness died are marked failed (reconcile.h;
 * run and bench do it when they open it).  The --db value as those
 * commands read it; help asked for: nothing. */
static void reconcile_for(int argc, char **argv) {
  const char *db = SG_DEFAULT_DB;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return;
    if (!strncmp(a, "--db=", 5)) db = a + 5;
    else if (i + 1 < argc && (!strcmp(a, "--db") || !strcmp(a, "--out") || !strcmp(a, "--run") ||
                              !strcmp(a, "--target"))) {
      if (!strcmp(a, "--db")) db = argv[i + 1];
      i++; /* the option's value */
    }
  }
  sg_reconcile_path(db);
}

/* Commands that take --db; bench's only under `bench allreduce`. */
static int takes_db(int argc, char **argv) {
  static const char *const cmds[] = {"run", "report", "list", "show", "trace", "export", NULL};
  for (int i = 0; cmds[i]; i++)
    if (!strcmp(argv[1], cmds[i])) return 1;
  return !strcmp(argv[1], "bench") && argc > 2 && !strcmp(argv[2], "allreduce"); /* not an engine: the collective */
}

/* $SGDLAB_DB, when set and not empty, is the database of a command that
 * takes --db and was given none: "--db VALUE" goes in right after the
 * command's name (after `bench allreduce`), so the command reads it as if
 * typed.  argv is replaced (*argvp) when it is; the new array lives to
 * exit.  Otherwise results/sgdlab.db, relative to the current directory. */
static void env_db(int *argcp, char ***argvp) {
  int argc = *argcp;
  char **argv = *argvp;
  const char *env = getenv("SGDLAB_DB");
  if (!env || !*env || !takes_db(argc, argv)) return;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--db") || !strncmp(argv[i], "--db=", 5)) return;
  static char **a; /* lives to exit (a static: leak checkers see it held) */
  if (!(a = calloc((size_t)argc + 3, sizeof *a))) return;
  int at = !strcmp(argv[1], "bench") ? 3 : 2, n = 0;
  for (int i = 0; i < at; i++) a[n++] = argv[i];
  a[n++] = "--db";
  a[n++] = (char *)env;
  for (int i = at; i < argc; i++) a[n++] = argv[i];
  *argcp = n;
  *argvp = a;
}

static int wants_help(int argc, char **argv) {
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(cmd, "--version")) {
    printf("sgdlab %s\n", SGDLAB_VERSION);
    return 0;
  }
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } cmds[] = {
      {"run", sg_cmd_run},       {"bench", sg_cmd_bench},     {"report", sg_cmd_report},
      {"list", sg_cmd_list},     {"show", sg_cmd_show},       {"engines", sg_cmd_engines},
      {"help", sg_cmd_help},     {"cluster", sg_cmd_cluster},
      {"trace", sg_cmd_trace},   {"export", sg_cmd_export},
      {"model", sg_cmd_model},
  };
  int help = takes_db(argc, argv) && wants_help(argc, argv);
  env_db(&argc, &argv);
  if (!strcmp(cmd, "list") || !strcmp(cmd, "show") || !strcmp(cmd, "report"))
    reconcile_for(argc - 1, argv + 1);
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
    if (strcmp(cmd, cmds[i].name)) continue;
    int code = cmds[i].fn(argc - 1, argv + 1);
    if (help && code == 0) /* every command's help says where --db defaults to */
      printf("\nenvironment:\n"
             "  SGDLAB_DB   the database when --db is not given; unset or empty:\n"
             "              %s, relative to the current directory\n", SG_DEFAULT_DB);
    return code;
  }
  fprintf(stderr, "sgdlab: unknown command '%s' (sgdlab --help lists them)\n", cmd);
  return 2;
}
