/* main.c - the `sgdlab` CLI: the command table, dispatch, `engines`,
 * `help config`.
 *
 * Each subcommand lives in its own file (declared by its library: run.h,
 * report.h, cluster.h, or commands.h here) and returns the exit code; only
 * main() exits.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "commands.h"
#include "device.h"
#include "engine.h"
#include "report.h"
#include "run.h"
#include "settings.h"

/* ---- the commands ------------------------------------------------------ */

/* One entry per command (two for bench: its subcommands differ in --db).
 * main() dispatches on name (and sub, when the entry has one), usage()
 * prints usage and help, and db says whether the command takes --db, so
 * that $SGDLAB_DB applies to exactly those. */
typedef struct cmd {
  const char *name;
  const char *sub; /* this entry only for `name sub ...`; NULL: any */
  int (*fn)(int argc, char **argv);
  const char *usage; /* as sgdlab --help shows it */
  const char *help;  /* one or more lines, each '\n'-ended */
  int db;            /* takes --db (and so $SGDLAB_DB) */
} cmd_t;

static const cmd_t CMDS[] = {
    {"run", NULL, sg_cmd_run, "run CONFIG",
     "run an experiment file (sweeps, repeats) and record it\n", 1},
    {"bench", "allreduce", sg_cmd_bench, "bench allreduce", /* not an engine: the collective */
     "one step of communication per size: ring, rhd, tree, hier,\n"
     "native, ps, mapreduce (time, algbw, busbw)\n", 1},
    {"bench", "step", sg_cmd_bench, "bench step",
     "single-process training-step throughput vs its sgemm bound\n", 0},
    {"report", NULL, sg_cmd_report, "report",
     "figures, summary.md and index.html from the database\n", 1},
    {"list", NULL, sg_cmd_list, "list", "experiments and runs in the database (--json)\n", 1},
    {"show", NULL, sg_cmd_show, "show RUN", "one run: options, status, ranks, evaluations\n", 1},
    {"trace", NULL, sg_cmd_trace, "trace RUN",
     "a run's steps as a Perfetto / chrome://tracing timeline\n", 1},
    {"export", NULL, sg_cmd_export, "export", "an experiment's rows as CSV or JSON\n", 1},
    {"model", NULL, sg_cmd_model, "model",
     "predicted (alpha-beta-gamma) vs measured step time per run;\n"
     "--what-if: the formulas for any case, without a run\n", 1},
    {"claims", NULL, sg_cmd_claims, "claims [NAME...]",
     "the seeds' claims as checks: run each, PASS/FAIL/SKIP\n", 1},
    {"lab", NULL, sg_cmd_lab, "lab check N", "grade a student's database for lab N\n", 1},
    {"engines", NULL, sg_cmd_engines, "engines", "the engines and their options\n", 0},
    {"cluster", NULL, sg_cmd_cluster, "cluster",
     "an emulated cluster in this machine: network namespaces\n"
     "joined by rate-limited links (up, status, exec, down)\n", 0},
    {"help", NULL, sg_cmd_help, "help config", "every experiment-file key (--markdown for docs);\n"
     "help COMMAND: that command's --help\n", 0},
};
enum { NCMDS = sizeof CMDS / sizeof CMDS[0] };

static void usage(FILE *f) {
  fprintf(f, "usage: sgdlab COMMAND [options]      (sgdlab COMMAND --help for its options)\n"
             "\n"
             "Run one data-parallel SGD workload under interchangeable synchronization\n"
             "engines, record timing and convergence into SQLite, and plot them.\n"
             "\n"
             "commands:\n");
  for (int i = 0; i < NCMDS; i++) {
    const char *h = CMDS[i].help;
    for (int first = 1; *h; first = 0) { /* the help's lines, under the usage column */
      const char *nl = strchr(h, '\n');
      int len = nl ? (int)(nl - h) : (int)strlen(h);
      fprintf(f, "  %-16s %.*s\n", first ? CMDS[i].usage : "", len, h);
      h += len + (nl != NULL);
    }
  }
  fprintf(f, "\n"
             "  --version        print the version\n"
             "  -h, --help       this help\n");
}

/* The entry of `sgdlab argv[1] [argv[2]]`: the one whose sub matches,
 * else the first of that name (the command reports a bad subcommand). */
static const cmd_t *find_cmd(int argc, char **argv) {
  const cmd_t *first = NULL;
  for (int i = 0; i < NCMDS; i++) {
    if (strcmp(argv[1], CMDS[i].name)) continue;
    if (!CMDS[i].sub || (argc > 2 && !strcmp(argv[2], CMDS[i].sub))) return &CMDS[i];
    if (!first) first = &CMDS[i];
  }
  return first;
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
    "levels deep.  A key that no run reads is an error naming what would make\n"
    "it count, for workload keys as for engine options: `train_file` and\n"
    "`test_file` need `dataset: libsvm`, `hidden` needs `model: mlp`, `nnz`\n"
    "needs `dataset: synthetic-sparse`, `lr_gamma` and `lr_step_epochs` need\n"
    "`lr_schedule: step`, `partition_alpha` needs `partition: label-skew`,\n"
    "`partition` an engine whose workers own data (ps, allreduce, gossip) (a key of the whole experiment needs one run of any\n"
    "entry that reads it; a key of one entry, one run of that entry).\n"
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
    "opened (IDX headers read, LIBSVM files loaded) once per experiment.\n"
    "\n"
    "Data files (`train_file`, `test_file`, the IDX files in `data_dir`) must\n"
    "be regular files: each is opened without waiting and checked before a\n"
    "byte is read, so a FIFO, a device such as `/dev/zero` or a directory is\n"
    "one error naming the file and what it is (symlinks are followed; what\n"
    "they name must be a regular file).  A LIBSVM line may be at most 16 MiB\n"
    "(a longer one is one `file:line:` error, read no further than that) and a\n"
    "LIBSVM file at most 64 GiB (the loader holds up to about three bytes per\n"
    "byte of text); a NUL byte is an error at its line.  IDX files need no cap\n"
    "of their own: the sizes in their headers are checked against the file's\n"
    "size before anything is allocated.  A sweep expands to at most 100,000\n"
    "runs.\n";

static const char CLUSTER_INTRO[] =
    "`cluster: {hosts: 4, link: 1gbit}` runs the ranks on an emulated cluster\n"
    "made for the run and removed after it (docs/cluster.md): each host a\n"
    "network namespace, its link rate-limited in both directions.  Needs root\n"
    "(CAP_NET_ADMIN and CAP_SYS_ADMIN).  Any transport: zmq ranks talk tcp over\n"
    "the links (zmq_scheme is set to tcp, CURVE as zmq_auth says); with\n"
    "transport mpi (or launcher mpirun) mpirun runs across the hosts, one\n"
    "daemon per host.  The harness's records and rendezvous stay on ipc.  The\n"
    "keys are written `cluster.KEY` with --set (`--set cluster.hosts=4`); a\n"
    "per-host list sweeps as a list of lists (`link: [[1gbit], [100mbit]]`).\n"
    "The run line says the run is on a cluster; `run -n -v` prints where each\n"
    "rank goes, `run -v` each rank's host and address once the cluster is up,\n"
    "and `sgdlab show RUN` its rank table (ranks.cluster_host, address);\n"
    "run_info has the cluster's name and every link's byte counters.\n";

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

/* `sgdlab help COMMAND [SUB]`: that command's --help (argv as help's). */
static int help_command(int argc, char **argv) {
  const cmd_t *c = find_cmd(argc, argv);
  if (!c || c->fn == sg_cmd_help) return -1;
  char *a[] = {argv[1], c->sub ? (char *)c->sub : "--help", c->sub ? "--help" : NULL, NULL};
  int code = c->fn(c->sub ? 3 : 2, a);
  if (c->db && code == 0)
    printf("\nenvironment:\n"
           "  SGDLAB_DB   the database when --db is not given; unset or empty:\n"
           "              %s, relative to the current directory\n", SG_DEFAULT_DB);
  return code;
}

int sg_cmd_help(int argc, char **argv) {
  int markdown = 0;
  const char *topic = NULL;
  if (argc >= 2 && strcmp(argv[1], "config") && argv[1][0] != '-') {
    int code = help_command(argc, argv);
    if (code >= 0) return code;
    fprintf(stderr, "sgdlab help: no command or topic '%s' (sgdlab --help lists the commands;"
                    " sgdlab help config: the experiment-file keys)\n", argv[1]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--markdown")) markdown = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: sgdlab help config [--markdown]\n"
             "       sgdlab help COMMAND   (the same as sgdlab COMMAND --help)\n\n"
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

/* $SGDLAB_DB, when set and not empty, is the database of a command that
 * takes --db and was given none: "--db VALUE" goes in right after the
 * command's name (after `bench allreduce`), so the command reads it as if
 * typed.  argv is replaced (*argvp) when it is; the new array lives to
 * exit.  Otherwise results/sgdlab.db, relative to the current directory. */
static void env_db(const cmd_t *c, int *argcp, char ***argvp) {
  int argc = *argcp;
  char **argv = *argvp;
  const char *env = getenv("SGDLAB_DB");
  if (!env || !*env || !c->db) return;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--db") || !strncmp(argv[i], "--db=", 5)) return;
  static char **a; /* lives to exit (a static: leak checkers see it held) */
  if (!(a = calloc((size_t)argc + 3, sizeof *a))) return;
  int at = c->sub ? 3 : 2, n = 0;
  for (int i = 0; i < at; i++) a[n++] = argv[i];
  a[n++] = "--db";
  a[n++] = (char *)env;
  for (int i = at; i < argc; i++) a[n++] = argv[i];
  *argcp = n;
  *argvp = a;
}

/* Every command takes a long option's value as --opt=VALUE too: such an
 * argument becomes "--opt" "VALUE" before the command parses its argv
 * (the new array lives to exit). */
static void split_long_values(int *argcp, char ***argvp) {
  int argc = *argcp, n = 0, more = 0;
  char **argv = *argvp;
  for (int i = 2; i < argc; i++) more += !strncmp(argv[i], "--", 2) && strchr(argv[i], '=');
  if (!more) return;
  static char **a; /* lives to exit (a static: leak checkers see it held) */
  if (!(a = calloc((size_t)(argc + more + 1), sizeof *a))) return;
  for (int i = 0; i < argc; i++) {
    char *eq = i >= 2 && !strncmp(argv[i], "--", 2) ? strchr(argv[i], '=') : NULL;
    if (!eq) {
      a[n++] = argv[i];
      continue;
    }
    *eq = '\0'; /* argv's strings are ours to change */
    a[n++] = argv[i];
    a[n++] = eq + 1;
  }
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
  const cmd_t *c = find_cmd(argc, argv);
  if (!c) {
    fprintf(stderr, "sgdlab: unknown command '%s' (sgdlab --help lists them)\n", cmd);
    return 2;
  }
  split_long_values(&argc, &argv);
  int help = c->db && wants_help(argc, argv);
  env_db(c, &argc, &argv);
  int code = c->fn(argc - 1, argv + 1);
  if (help && code == 0) /* every command's help says where --db defaults to */
    printf("\nenvironment:\n"
           "  SGDLAB_DB   the database when --db is not given; unset or empty:\n"
           "              %s, relative to the current directory\n", SG_DEFAULT_DB);
  return code;
}
