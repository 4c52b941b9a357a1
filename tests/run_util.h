/* run_util.h - what the process-level tests share: finding the built
 * binaries, scratch directories, running `sgdlab` with a bounded wait,
 * SQLite queries on a results database, polling it until a condition
 * holds (with a deadline, never a fixed sleep), comparing dump_params
 * files, finding and waiting for rank processes, and the fault case
 * (a rank killed or stopped mid-run) that the ps and mapreduce run tests
 * both perform.
 *
 * Conventions: functions return 0 / a count / a value, and -1 when they
 * could not find out; waits take a budget in seconds and poll every 20 ms
 * (the interval is how often to look, not a synchronisation).  Strings
 * returned as `const char *` live in a static buffer (the next call of the
 * same function overwrites them); `char *` results are the caller's to
 * free.
 */
#ifndef SG_RUN_UTIL_H
#define SG_RUN_UTIL_H

#include <stddef.h>
#include <sys/types.h>

/* ---- binaries and scratch space ----------------------------------------- */

/* $SGDLAB_BIN_DIR/harness/sgdlab (CTest sets SGDLAB_BIN_DIR to the build
 * directory; "." when unset). */
const char *ru_sgdlab(void);

/* mkdtemp("/tmp/sgdlab-<tag>-XXXXXX") into dir; 0, or -1 with dir[0] = 0.
 * One directory per test keeps tests safe under `ctest -j`. */
int ru_mkdtemp(char *dir, size_t cap, const char *tag);

/* Remove a directory tree (no shell).  SGDLAB_KEEP_TMP=1 keeps it and
 * says where it is. */
void ru_rm_rf(const char *dir);

/* A fresh scratch directory per call: the previous one from this function
 * is removed, the last one at exit.  NULL when mkdtemp fails. */
const char *ru_scratch(const char *tag);

/* Write text to path; 0 or -1. */
int ru_write_file(const char *path, const char *text);

/* The fixture experiment file of the engine run tests: one engine entry
 * on Fashion-MNIST, MLP hidden [32], batch 16, lr 0.1, momentum 0.9,
 * seed 3, no evaluation, dump_params = dump; `extra` (may be NULL) are
 * more top-level lines ("deadline: 4\n").  0 or -1. */
int ru_write_train_config(const char *path, const char *name, const char *engine,
                          const char *extra, const char *dump, int workers, long steps);

/* Whole file into a malloc'd, NUL-terminated buffer of at most cap-1
 * bytes (empty when it cannot be read); NULL only when out of memory. */
char *ru_slurp(const char *path, size_t cap);

/* ---- running commands ---------------------------------------------------- */

/* Exit code of a wait status: the code, or 128 + signal. */
int ru_exit_code(int status);

/* system(cmd) after echoing it to stderr; the exit code, -1 when it did
 * not run or did not exit. */
int ru_sh(const char *cmd);

/* `sgdlab run CONFIG --db DB` with its output on stderr; exit code or -1. */
int ru_sgdlab_run(const char *config, const char *db);
/* The same with one more option and its value (e.g. --plant-bug NAME). */
int ru_sgdlab_run_args(const char *config, const char *db, const char *opt, const char *val);

/* Start `sgdlab run CONFIG --db DB` in the background, its output on
 * ours; the pid, -1 when fork failed. */
pid_t ru_spawn_sgdlab_run(const char *config, const char *db);

/* Start sgdlab with argv (argv[0] is replaced by the binary's path).
 * stderr goes to errpath (created), stdout too when merge, else to
 * /dev/null; cwd (may be NULL) is the child's working directory.  The
 * child's pid, -1 when fork failed. */
pid_t ru_start(char **argv, const char *errpath, int merge, const char *cwd);

/* Start as above and wait for it; *out (cap bytes) gets what it wrote.
 * The exit code (ru_exit_code), -1 when it could not be started. */
int ru_run(char **argv, int merge, const char *cwd, char *out, size_t cap);

/* sgdlab with the NULL-terminated arguments after out, in cwd (may be
 * NULL), stdout and stderr merged into *out (malloc'd, 64 KiB at most).
 * The exit code, -1 when it could not run. */
int ru_sgdlab_in(const char *cwd, char **out, ...);

/* A command function of the CLI (sg_cmd_report, ...) called in a forked
 * child with the NULL-terminated arguments after out as its argv, in dir
 * (may be NULL); its stdout and stderr into *out (malloc'd; free it).
 * The child's exit code, -1 when it could not run. */
int ru_call(int (*cmd)(int, char **), const char *dir, char **out, ...);

/* Wait at most secs for pid (our child) to exit: 1 with *status set, 0
 * when it is still running. */
int ru_wait_exit(pid_t pid, double secs, int *status);

/* As ru_wait_exit, but the exit code; -1 when it was still running after
 * secs (it is then killed with SIGKILL and reaped, so no test leaves it). */
int ru_wait_exit_code(pid_t pid, double secs);

/* What became of run `sg` (a started `sgdlab run`, maybe under salloc or
 * cluster exec) after its rank was killed at t_kill: its exit code (-1
 * when it still ran after wait_s, then killed), the seconds it took, and
 * whether the run's recorded error names "rank R".  Prints one line,
 * "  WHAT: exit C T s after the kill: ERROR". */
typedef struct ru_kill_outcome {
  int code;
  double took;
  int named;
} ru_kill_outcome_t;
ru_kill_outcome_t ru_kill_outcome(pid_t sg, double t_kill, double wait_s, const char *db,
                                  int rank, const char *what);

/* In scratch d: a `local` run of 4 workers for `steps` steps that dumps its
 * parameters to d/local.bin (path into ref), the reference the cluster
 * tests compare with; then Open MPI is told to use TCP on the cluster's
 * subnets only (namespace hosts).  0, or -1 when the run failed. */
int ru_cluster_reference(const char *d, const char *name, int steps, char *ref, size_t cap);

/* ---- the results database ------------------------------------------------ */

/* The first column of the first row as an integer; -1 when the database
 * cannot be opened, the query fails or there is no row. */
long long ru_db_int(const char *db, const char *sql);

/* ... as text, malloc'd (caller frees); NULL when absent or NULL. */
char *ru_db_text(const char *db, const char *sql);
/* The test accuracy of run `id`'s last evaluation; -1 when it has none. */
double ru_final_acc(const char *db, long long id);

/* Two engine entries (`none`, then `topk`, YAML flow maps) trained 300
 * steps on the quickstart MLP by 3 workers in one experiment in scratch
 * dir `tag`: acc[m] their final accuracies, bytes[m] the bytes sent by
 * ranks >= min_rank over the run (0 when sgdlab failed). */
int ru_none_vs_topk(const char *tag, const char *none, const char *topk, int min_rank,
                    double acc[2], double bytes[2]);

/* ... as text into out (empty when absent). */
void ru_db_text_into(const char *db, const char *sql, char *out, size_t cap);

/* Poll ru_db_int(db, sql) until it is >= min, at most secs.  0 when it
 * is; -1 on timeout; -2 when `watch` (> 0, our child) exited first, its
 * status in *watch_status (may be NULL). */
int ru_db_wait(const char *db, const char *sql, long long min, double secs, pid_t watch,
               int *watch_status);

/* ---- parameters ---------------------------------------------------------- */

/* Relative L2 distance ||a - b|| / ||b|| of two float32 dump_params files;
 * -1 when they cannot be compared (missing, different lengths, empty, b
 * all zero).  *n (may be NULL) gets the number of values read. */
double ru_rel_distance(const char *a_path, const char *b_path, long *n);

/* ---- processes ----------------------------------------------------------- */

/* Parent pid from /proc, -1 when the process is gone. */
pid_t ru_parent_of(pid_t pid);

/* The sgdlab-rank process of `rank` among root's descendants (by
 * SGDLAB_RANK or OMPI_COMM_WORLD_RANK in its environment); 0 when none. */
pid_t ru_find_rank(pid_t root, int rank);

/* The pids of ranks 0..nranks-1 under root into pids; how many found. */
int ru_rank_pids(pid_t root, int nranks, pid_t *pids);

/* The pid of parent's child whose command name is comm, or 0. */
pid_t ru_child_named(pid_t parent, const char *comm);

/* Wait at most secs until pid is dead: reaped (kill(pid, 0) fails with
 * ESRCH) when reaped is set, else also a zombie counts.  1 when it is. */
int ru_wait_gone(pid_t pid, double secs, int reaped);

/* ---- settings and in-process training ------------------------------------ */

struct sg_opts;

/* "local, ps, ..." from the engine registry (engines are added over time),
 * as the configuration errors list them. */
const char *ru_known_engines(void);

/* The installed Fashion-MNIST directory, or NULL when it is missing. */
const char *ru_data_dir(void);

/* Settings from "k=v k=v ..." on top of the settings defaults (a token
 * without '=' is ignored); NULL when out of memory. */
struct sg_opts *ru_opts_kv(const char *kv);

/* The settings of the engine equivalence tests: defaults and `engine`'s
 * defaults (none when NULL), then workers, batch 16, hidden [32], lr 0.1,
 * momentum 0.9, max_steps = steps, no evaluation, deadline 60,
 * dump_params = dump, then the key/value pairs of kv (NULL-terminated,
 * may be NULL).  NULL when the engine is unknown or out of memory. */
struct sg_opts *ru_train_opts(const char *engine, int workers, const char *dump, int steps,
                              const char *const *kv);

/* The `local` engine in this process with settings o (its dump_params is
 * where the final parameters go); 0 or a negative SG_E* code. */
int ru_run_local(const struct sg_opts *o, int workers);

/* ---- equivalence with `local` as processes --------------------------------- */

/* `local` once with the fixture config (100 steps, `workers`), then each
 * variant (engine entry, label) the same way; each variant's dump_params
 * must be within relative L2 distance rtol of local's.  CHECKs (the
 * calling test fails on the first). */
void ru_equivalence_case(const char *tag, const char *config_name, int workers,
                         const char *const (*variants)[2], size_t nvariants, double rtol);

/* ---- the fault case of the engine run tests ------------------------------ */

/* An engine run as real processes through `sgdlab run` (fixture config,
 * 100000 steps, one slowed rank); once watch_rank has recorded 5 steps,
 * `sig` goes to `victim`.  Checks: sgdlab exits 1 within 2 deadlines of
 * the signal, the run is `failed`, its error names "rank <victim>" (under
 * mpirun too: the harness reads the rank from mpirun's notice), and every
 * rank process is gone (reaped).  SIGSTOP: the error begins with the
 * stopped rank, "rank <victim> (role, host, pid P) is stopped (state T)",
 * whoever noticed it. */
typedef struct ru_fault {
  const char *name;        /* for messages: "zmq executor" */
  const char *tag;         /* scratch directory tag */
  const char *config_name; /* experiment name */
  const char *engine;      /* the engine entry, "{engine: ..., transport: zmq}" */
  int workers, nranks;     /* nranks: processes the run starts */
  int delay_rank, delay_ms, watch_rank, victim, sig;
  double deadline_s;
  /* rank processes must be gone: each within gone_each_s of the moment we
   * look (after sgdlab exited) when gone_each_s > 0, else all within
   * gone_after_signal_s of the signal */
  double gone_each_s, gone_after_signal_s;
} ru_fault_t;

/* Runs the case with CHECKs (the calling test fails on the first). */
void ru_fault_case(const ru_fault_t *f);

#endif
