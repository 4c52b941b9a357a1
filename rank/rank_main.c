/* rank_main.c - `sgdlab-rank SPEC`: one process of a run.
 *
 * Started by the harness (local launcher: SGDLAB_RANK / SGDLAB_SIZE in the
 * environment) or by mpirun (OMPI_COMM_WORLD_RANK / _SIZE); built with
 * smpicc (SG_SMPI, sgdlab-rank-smpi) by smpirun, every rank a simulated
 * actor of one process that learns its rank from MPI_Comm_rank.  Reads the
 * spec the harness wrote (every setting plus _records, _rendezvous, _clock, _t0,
 * _nprocs, and on an emulated cluster _rank_addrs, the address each rank
 * binds), opens the records stream, connects the transport, and runs the
 * engine's training loop.  Ends with a DONE record (ok, or the error
 * message) and exit status 0 / 1; on failure also one line on stderr:
 * "sgdlab-rank: rank R: <message>".
 *
 * `sgdlab-rank --stdin` (launcher ssh) takes its rank, size, spec and
 * keys from its standard input instead (stage.h) and exits when that
 * input ends: nothing of the run is read from this host's disk.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg_mpi.h"

#include "auth.h"
#include "clock.h"
#include "clock_sync.h"
#include "bench_method.h"
#include "device.h"
#include "engine.h"
#include "err.h"
#include "msgbuf.h"
#include "stage.h"
#include "transport_new.h"

/* ---- where a crash happened ------------------------------------------- */

/* The phase this rank is in, for the one line a fatal signal prints
 * ("sgdlab-rank: rank 2: signal 11 during MPI_Init and the barrier after
 * it"), which the launcher's stderr carries to the harness (srun's and
 * mpirun's tail is kept as run_info mpirun_stderr when a run fails). */
static const char *volatile g_phase = "starting";
static volatile int g_phase_rank = -1;

static void phase(const char *what) { g_phase = what; }

#ifndef SG_SMPI /* simulated: every rank is an actor of one process */
/* Text and decimal numbers into buf (at most cap bytes); both
 * async-signal-safe. */
static void put_str(char *buf, size_t cap, size_t *len, const char *s) {
  for (; *s && *len < cap; s++) buf[(*len)++] = *s;
}
static void put_uint(char *buf, size_t cap, size_t *len, unsigned u) {
  char d[12];
  int k = 0;
  do d[k++] = (char)('0' + u % 10);
  while ((u /= 10) && k < (int)sizeof d);
  while (k && *len < cap) buf[(*len)++] = d[--k];
}

/* The line, by write(2); then the signal's default action (a core where
 * the limit allows), so the rank still ends "killed by signal N". */
static void on_fatal(int sig) {
  char buf[256];
  size_t n = 0, cap = sizeof buf - 1;
  put_str(buf, cap, &n, "sgdlab-rank: rank ");
  if (g_phase_rank >= 0) put_uint(buf, cap, &n, (unsigned)g_phase_rank);
  else put_str(buf, cap, &n, "?");
  put_str(buf, cap, &n, ": signal ");
  put_uint(buf, cap, &n, (unsigned)sig);
  put_str(buf, cap, &n, " during ");
  put_str(buf, cap, &n, g_phase);
  buf[n++] = '\n';
  if (write(STDERR_FILENO, buf, n)) {
  }
  raise(sig); /* SA_RESETHAND: the default action now; SA_NODEFER: at once */
}

/* SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT print the phase, on a stack
 * of their own (a stack overflow too).  Installed before MPI_Init: Open
 * MPI leaves a handler that is already there in place. */
static void catch_fatal_signals(int rank) {
  static char alt[64 * 1024];
  stack_t st = {.ss_sp = alt, .ss_size = sizeof alt};
  sigaltstack(&st, NULL);
  g_phase_rank = rank;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) sigaction(sigs[i], &sa, NULL);
}
#endif

/* Item `rank` of the spec's _rank_addrs ("a0,a1,..."; a run on an
 * emulated cluster: the address of the host each rank is placed on) into
 * out; "" when the run has none. */
static int rank_addr(const sg_opts_t *o, int rank, char *out, size_t cap) {
  const char *p = sg_opts_str_or(o, "_rank_addrs", "");
  out[0] = '\0';
  if (!*p) return SG_OK;
  for (int i = 0; i < rank && p; i++)
    if ((p = strchr(p, ','))) p++;
  size_t len = p ? strcspn(p, ",") : 0;
  if (!p || !len || len >= cap)
    return sg_err_set(SG_ECONFIG, "_rank_addrs: no address for rank %d", rank);
  memcpy(out, p, len);
  out[len] = '\0';
  return SG_OK;
}

static int env_int(const char *const *names, int def) {
  for (int i = 0; names[i]; i++) {
    const char *v = getenv(names[i]);
    if (v && *v) return atoi(v);
  }
  return def;
}

/* The MPI library this rank runs with, up to its first comma ("Open MPI
 * v4.1.4"), as run_info mpi (the harness's own is the fallback). */
static int send_mpi_version(sg_records_t *rec) {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  if (MPI_Get_library_version(v, &len) != MPI_SUCCESS) return SG_OK;
  v[strcspn(v, ",\n")] = '\0';
  return sg_records_info(rec, "mpi", v);
}

/* The run's shape from the spec; the launcher's rank and size must match. */
typedef struct rank_shape {
  int size;
  int64_t workers, threads;
  double t0, deadline;
} rank_shape_t;

static int rank_shape(const sg_opts_t *o, int rank, rank_shape_t *sh) {
  static const char *const size_env[] = {"SGDLAB_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  int64_t nprocs;
  SG_CHECK(sg_opts_int(o, "_nprocs", &nprocs));
  SG_CHECK(sg_opts_int(o, "workers", &sh->workers));
  SG_CHECK(sg_opts_double(o, "_t0", &sh->t0));
  SG_CHECK(sg_opts_double(o, "deadline", &sh->deadline));
  SG_CHECK(sg_opts_int_or(o, "threads", 1, &sh->threads));
  sh->size = env_int(size_env, (int)nprocs);
  if (sh->size != nprocs || rank < 0 || rank >= sh->size)
    return sg_err_set(SG_ECONFIG, "started as rank %d of %d, but the run has %lld processes", rank,
                      sh->size, (long long)nprocs);
  return SG_OK;
}

/* Test only: a delay this rank takes, from the variable `name` of the
 * form "RANK:SECONDS"; 0 when unset or for another rank.
 *   SGDLAB_TEST_MPI_INIT_DELAY_S holds the rank back before MPI_Init (a
 *     rank that is late into the process manager's fence, as on a loaded
 *     node);
 *   SGDLAB_TEST_EXIT_DELAY_S holds it after its DONE and every close,
 *     before it exits (an exit slowed by a loaded disk). */
static double test_delay(const char *name, int rank) {
  const char *v = getenv(name);
  int r;
  double s;
  if (!v || sscanf(v, "%d:%lf", &r, &s) != 2 || r != rank || !(s > 0 && s < 600)) return 0;
  return s;
}

static void test_nap(double s) {
  if (s <= 0) return;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* An MPI comm; MPI's rank and size must be the launcher's.  MPI_Init and
 * the barrier after it (transport_new.h) come first: no rank sends before
 * every rank is out of MPI_Init. */
static int rank_comm_mpi(sg_comm_t **comm, const sg_opts_t *o, int rank, int size,
                         double deadline, const sg_keys_t *keys, sg_records_t *rec) {
  test_nap(test_delay("SGDLAB_TEST_MPI_INIT_DELAY_S", rank));
#ifndef SG_SMPI
  SG_CHECK(sg_mpi_init_barrier(sg_opts_str_or(o, "_rendezvous", ""), rank, size, deadline, keys));
#else
  (void)keys;
  int64_t defer = 0;
  SG_CHECK(sg_opts_int_or(o, "_sim_defer", 0, &defer));
  if (defer) /* core/transport_mpi.c, "Deferred sends" */
    sg_mpi_sim_defer(!strcmp(sg_opts_str_or(o, "_plant_bug", ""), "defer-early-wait"));
#endif
  SG_CHECK(sg_comm_mpi_new(comm, deadline));
  if ((*comm)->size == 1 && size > 1) /* srun without PMI: N singletons */
    return sg_err_set(SG_ECONFIG, "MPI world of 1 process where the run has %d: MPI found no "
                      "process manager (srun needs --mpi=pmix; mpirun starts it itself)", size);
  if ((*comm)->rank != rank || (*comm)->size != size)
    return sg_err_set(SG_ECONFIG, "MPI says rank %d of %d, the launcher said %d of %d",
                      (*comm)->rank, (*comm)->size, rank, size);
  if (rank == 0) SG_CHECK(send_mpi_version(rec));
  return SG_OK;
}

/* A ZeroMQ comm.  Every engine gets a comm, even of size 1 (an allreduce
 * of one rank is a no-op, not a NULL dereference).  One process needs no
 * rendezvous. */
static int rank_comm_zmq(sg_comm_t **comm, const sg_opts_t *o, int rank, int size,
                         double deadline, const sg_keys_t *keys) {
  const char *rdv = sg_opts_str_or(o, "_rendezvous", "");
  char addr[64];
  SG_CHECK(rank_addr(o, rank, addr, sizeof addr));
  sg_zmq_cfg_t zc = {.rank = rank, .size = size, .deadline_s = deadline,
                     .scheme = sg_opts_str_or(o, "zmq_scheme", "ipc"),
                     .ipc_dir = sg_opts_str_or(o, "_rundir", NULL),
                     .keys = keys,
                     .bind_addr = addr,
                     .no_cma = !strcmp(sg_opts_str_or(o, "zmq_cma", "auto"), "off"),
                     .rendezvous = rdv[0] ? rdv : NULL};
  sg_zmq_malloc_keep(); /* this process's allocator: this main decides */
  return sg_comm_zmq_new(comm, &zc);
}

/* Measure this rank's clock offset to the harness (clock_sync.h) and
 * send it as INFO clock.start or clock.end; nothing where the run has no
 * clock endpoint (simulated: the clocks are the simulation's). */
static int rank_clock(sg_records_t *rec, const sg_opts_t *o, int rank, const sg_keys_t *keys,
                      const rank_shape_t *sh, const char *key) {
  const char *ep = sg_opts_str_or(o, "_clock", "");
  sg_clock_est_t est;
  if (!ep[0]) return SG_OK;
  SG_CHECK(sg_clock_sync(ep, rank, keys, sh->deadline, &est));
  char val[96];
  snprintf(val, sizeof val, "%.9f %.9f %.9f", est.offset_s, est.unc_s, est.at_s - sh->t0);
  return sg_records_info(rec, key, val);
}

/* Rank 0's INFO: the BLAS, and what the run is called, for the database's
 * views (the harness's _label: what differs in the experiment). */
static int rank_describe(sg_records_t *rec, const sg_opts_t *o, const sg_engine_t *eng) {
  char own[256];
  SG_CHECK(sg_records_info(rec, "blas", sg_blas_info()));
  const char *label = sg_opts_get(o, "_label");
  if (!label) label = (sg_engine_label(eng, o, own, sizeof own), own);
  return sg_records_info(rec, "label", label);
}

/* The engine ran: refused arrivals (counted, never fatal) as run_info,
 * then DONE ok. */
static int rank_finish(sg_records_t *rec, const sg_comm_t *comm, int rank) {
  if (comm->dropped) {
    char key[48], val[32];
    snprintf(key, sizeof key, "transport.dropped.rank%d", rank);
    snprintf(val, sizeof val, "%llu", (unsigned long long)comm->dropped);
    SG_CHECK(sg_records_info(rec, key, val));
  }
  return sg_records_done(rec, 0, NULL, -1, SG_BLAME_NONE);
}

/* Lookups by key while the engine trained (core/opts.h): none is the
 * rule; a count is recorded for the tests to see. */
static int rank_late_reads(sg_records_t *rec, int rank) {
  const char *first;
  long n = sg_opts_late_reads(&first);
  if (!n) return SG_OK;
  char key[48], val[96];
  snprintf(key, sizeof key, "opts.late_reads.rank%d", rank);
  snprintf(val, sizeof val, "%ld, first %s", n, first);
  return sg_records_info(rec, key, val);
}

/* The engine's loop (or, for `sgdlab bench`, its communication round),
 * then the lookups it made while training. */
static int rank_train(sg_rank_ctx_t *ctx, const sg_engine_t *eng) {
  SG_CHECK(sg_bench_requested(ctx->opts) ? sg_bench_method_run(ctx, eng) : eng->run(ctx));
  sg_opts_freeze(0);
#ifdef SG_SMPI
  /* Test only (SGDLAB_TEST_FOLD_RELEASED; tests/test_simulate_run.c,
   * ps_modeled_runs): an engine that ended ok has freed every folded
   * allocation with sg_fold_free (core/msgbuf.h).  One freed with free()
   * stays in the rank's table, and a later allocation at its address
   * would send only the bytes the table calls its own. */
  if (getenv("SGDLAB_TEST_FOLD_RELEASED") && sg_fold_registered() > 0)
    return sg_err_set(SG_EINVAL, "%zu folded allocation(s) of rank %d still registered after "
                      "the engine ended (freed without sg_fold_free)", sg_fold_registered(),
                      ctx->rank);
#endif
  return rank_late_reads(ctx->rec, ctx->rank);
}

/* One line on stderr and DONE with the message. */
static void rank_report_failure(sg_records_t *rec, int rank, int rc) {
  const char *msg = sg_err_msg()[0] ? sg_err_msg() : sg_strerror(rc);
  int why, blamed = sg_err_blamed(&why); /* read before anything sets another error */
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", msg);
  /* on a terminal, first clear the harness's status line */
  fprintf(stderr, "%ssgdlab-rank: rank %d: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", rank,
          copy);
  if (rec) sg_records_done(rec, 1, copy, blamed, why);
}

/* --stdin: the stage (stage.h) from standard input; the size goes where
 * the launchers put it (SGDLAB_SIZE, this process only), and a thread
 * ends the rank when the input ends. */
static const char *const rank_env[] = {"SGDLAB_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                       "SLURM_PROCID", NULL};

/* --stdin-munge (launcher slurm): line SLURM_PROCID of the input, a munge
 * credential (stage.h), is this rank's stage. */
static int rank_staged(sg_opts_t **o, sg_keys_t **keys, int *rank, int munged) {
  int size;
  if (munged) {
    static const char *const procid[] = {"SLURM_PROCID", NULL};
    if ((*rank = env_int(procid, -1)) < 0)
      return sg_err_set(SG_ECONFIG, "--stdin-munge: SLURM_PROCID is not set (not a Slurm task)");
    SG_CHECK(sg_stage_munge_read(STDIN_FILENO, *rank, getenv(SG_STAGE_MUNGE_SOCKET_ENV), o, keys,
                                 &size));
  } else {
    SG_CHECK(sg_stage_read(STDIN_FILENO, o, keys, rank, &size));
  }
  if (*rank < 0) *rank = env_int(rank_env, 0); /* srun --input=all: one stage for every task */
  char v[16];
  snprintf(v, sizeof v, "%d", size);
  setenv("SGDLAB_SIZE", v, 1);
  return sg_stage_watch(STDIN_FILENO, *rank);
}

/* Before anything else: the usage, the rank (from the launcher's
 * environment, or with --stdin the stage, which also brings the spec and
 * keys) and the test-only clock shift.  0, or the exit status. */
static int rank_begin(int argc, char **argv, int staged, sg_opts_t **o, sg_keys_t **keys,
                      int *rank) {
  if (argc != 2 || (argv[1][0] == '-' && !staged)) {
    fprintf(stderr,
            "usage: sgdlab-rank SPECFILE\n"
            "One process of an sgdlab run; `sgdlab run` starts it (directly or through\n"
            "mpirun) with the spec file it wrote.  Rank from SGDLAB_RANK or\n"
            "OMPI_COMM_WORLD_RANK.  sgdlab-rank --stdin: rank, size, spec and keys\n"
            "from standard input (launcher ssh); exits when it ends.  --stdin-munge:\n"
            "line SLURM_PROCID of standard input, a munge credential, is the stage\n"
            "(launcher slurm).\n");
    return 2;
  }
  if (staged && rank_staged(o, keys, rank, !strcmp(argv[1], "--stdin-munge")) < 0) {
    fprintf(stderr, "sgdlab-rank: %s\n", sg_err_msg());
    sg_keys_destroy(keys);
    sg_opts_destroy(o);
    return 2;
  }
  if (!staged) *rank = env_int(rank_env, 0);
#ifndef SG_SMPI
  if (sg_clock_skew_apply(*rank) < 0) { /* test only (clock_sync.h) */
    fprintf(stderr, "sgdlab-rank: rank %d: %s\n", *rank, sg_err_msg());
    return 2;
  }
#endif
  return 0;
}

#ifdef SG_SMPI
/* Test only (SGDLAB_TEST_SIM_PRIVATE=BYTES; tests/test_simulate_run.c,
 * modeled_memory_private_by_construction): every rank writes its number
 * into an ordinary allocation of BYTES and into one from sg_fold_alloc,
 * and reads both back after a barrier.  The ordinary one must hold the
 * rank's own values (memory is private unless folded on purpose,
 * core/msgbuf.h); under compute: modeled the folded one must be shared
 * (some rank reads another's number).  Rank 0 records that the check ran
 * and passed on every rank (run_info test.sim_private_checked, which the
 * test asserts: a check skipped leaves none). */
static int sim_memory_check(sg_records_t *rec, int rank, int size) {
  const char *e = getenv("SGDLAB_TEST_SIM_PRIVATE");
  long long bytes = e ? atoll(e) : 0;
  if (bytes < (long long)sizeof(int)) return SG_OK;
  size_t n = (size_t)bytes / sizeof(int), at = n;
  int *own = malloc(n * sizeof *own), *fold = sg_fold_alloc(n * sizeof *fold);
  /* bad own, foreign folded, ranks that checked */
  int rc = SG_OK, saw = rank, mine[3] = {0, 0, 0}, all[3] = {0, 0, 0};
  const int have = own && fold; /* a rank without its memory still joins the collectives */
  for (size_t i = 0; have && i < n; i++) own[i] = fold[i] = rank;
  MPI_Barrier(MPI_COMM_WORLD);
  for (size_t i = 0; have && i < n && at == n; i++)
    if (own[i] != rank) at = i, saw = own[i];
  mine[0] = at < n;
  for (size_t i = 0; have && i < n && !mine[1]; i++) mine[1] = fold[i] != rank;
  mine[2] = have;
  /* every rank fails alike: none waits for a rank that stopped */
  MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(mine + 2, all + 2, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (!have)
    rc = sg_err_set(SG_ENOMEM, "memory check: %lld bytes", bytes);
  else if (at < n)
    rc = sg_err_set(SG_EINVAL, "memory check: rank %d read %d at entry %zu of its own %lld "
                    "bytes (folded across the ranks)", rank, saw, at, bytes);
  else if (all[0])
    rc = sg_err_set(SG_EINVAL, "memory check: another rank's own memory was overwritten");
  else if (sg_fold_enabled() && size > 1 && !all[1])
    rc = sg_err_set(SG_EINVAL, "memory check: sg_fold_alloc's %lld bytes are not shared by the "
                    "%d ranks (not folded)", bytes, size);
  else if (rank == 0) {
    char v[160];
    snprintf(v, sizeof v, "%d of %d ranks, %lld bytes: own memory private, sg_fold_alloc %s",
             all[2], size, bytes, sg_fold_enabled() ? "shared" : "not folded");
    rc = sg_records_info(rec, "test.sim_private_checked", v);
  }
  free(own);
  sg_fold_free(fold);
  return rc;
}

/* compute: modeled (_sim_step_s): sg_fold_alloc folds the payloads
 * (core/msgbuf.h) from here on, before the engine allocates any. */
static int sim_fold(const sg_opts_t *o, sg_records_t *rec, int rank, int size) {
  double sim_step = 0;
  SG_CHECK(sg_opts_double_or(o, "_sim_step_s", 0, &sim_step));
  sg_fold_enable(sim_step > 0);
  return sim_memory_check(rec, rank, size);
}
#endif

int main(int argc, char **argv) {
  sg_opts_t *o = NULL;
  sg_records_t *rec = NULL;
  sg_comm_t *comm = NULL;
  sg_keys_t *keys = NULL;
  rank_shape_t sh;
  int rc, rank = -1, mpi = 0;
  int staged = argc == 2 && (!strcmp(argv[1], "--stdin") || !strcmp(argv[1], "--stdin-munge"));
  const char *spec_name = staged ? "spec (stdin)" : argc == 2 ? argv[1] : "";
  int early = rank_begin(argc, argv, staged, &o, &keys, &rank);
  if (early) return early;
#ifndef SG_SMPI
  catch_fatal_signals(rank);
#endif
#ifdef SG_SMPI
  /* simulated (smpirun): every rank is an actor of one process sharing
   * one environment; MPI says which rank this is */
  int provided;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
#endif
  sg_fd_limit_raise(); /* mpirun on another host does not pass the harness's on */

  phase("setting up (spec, records)");
  if (!staged) SG_TRY(sg_opts_load(&o, argv[1]));
  const char *name = sg_opts_str_or(o, "engine", "");
  const sg_engine_t *eng = sg_engine_find(name);
  if (!eng) {
    rc = sg_err_set(SG_ECONFIG, "%s: unknown engine '%s'", spec_name, name);
    goto fail;
  }
  SG_TRY(rank_shape(o, rank, &sh));
  const char *role = sg_engine_role(eng, o, (int)sh.workers, rank);
  const char *keys_path = sg_opts_str_or(o, "_keys", "");
  if (keys_path[0] && !staged) SG_TRY(sg_keys_load(&keys, keys_path, sh.size));
  SG_TRY(sg_records_open(&rec, sg_opts_str_or(o, "_records", ""), rank, role, sh.t0, keys));
  sg_blas_set_threads((int)sh.threads);
  sg_denormals_apply(o); /* before the BLAS line records it */
  if (rank == 0) SG_TRY(rank_describe(rec, o, eng));

  mpi = !strcmp(sg_opts_str_or(o, "transport", "zmq"), "mpi");
  phase(mpi ? "MPI_Init and the barrier after it" : "connecting (zmq rendezvous)");
  if (mpi)
    SG_TRY(rank_comm_mpi(&comm, o, rank, sh.size, sh.deadline, keys, rec));
  else
    SG_TRY(rank_comm_zmq(&comm, o, rank, sh.size, sh.deadline, keys));
  if (!mpi && rank == 0) /* which path large ipc sends took (zmq_cma) */
    SG_TRY(sg_records_info(rec, "transport.zmq_cma", sg_comm_zmq_cma(comm) ? "on" : "off"));

  SG_TRY(sg_device_bind(comm, o)); /* device: cuda: this rank's GPU */
#ifdef SG_SMPI
  SG_TRY(sim_fold(o, rec, rank, sh.size));
#endif
  SG_TRY(rank_clock(rec, o, rank, keys, &sh, "clock.start"));
  /* the engine's start: its trainlog reports the data load from here */
  SG_TRY(sg_opts_setf(o, "_engine_t", "%.6f", sg_now()));
  sg_rank_ctx_t ctx = {.rank = rank, .size = sh.size, .workers = (int)sh.workers, .comm = comm,
                       .opts = o, .rec = rec, .t0 = sh.t0};
  phase("training");
  SG_TRY(rank_train(&ctx, eng));
  phase("finishing (clock, DONE)");
  SG_TRY(rank_clock(rec, o, rank, keys, &sh, "clock.end"));
  SG_TRY(rank_finish(rec, comm, rank));
  rc = SG_OK;
fail:
  phase("closing (transport, records, MPI_Finalize)");
  if (rc < 0) rank_report_failure(rec, rank, rc);
  sg_comm_destroy(&comm);
  sg_records_close(&rec);
  sg_keys_destroy(&keys);
  sg_opts_destroy(&o);
  if (mpi) sg_mpi_finalize();
#ifdef SG_SMPI
  MPI_Finalize();
#endif
  test_nap(test_delay("SGDLAB_TEST_EXIT_DELAY_S", rank));
  return rc < 0 ? 1 : 0;
}
