/* execute.c - one run: its row, sockets, spec and launch, then the
 * supervision (supervise.c), and what is recorded when it ends (run.h). */
#include "run_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sg_mpi.h"

#include "auth.h"
#include "clock.h"
#include "err.h"
#include "rundir.h"
#include "sg_revision.h" /* SG_REVISION, generated at build time */

#if defined(__clang__)
#define SG_COMPILER __VERSION__
#elif defined(__GNUC__)
#define SG_COMPILER "gcc " __VERSION__
#else
#define SG_COMPILER "unknown"
#endif

/* Set by the signal handler; the only global state of the harness. */
volatile sig_atomic_t sg_run_interrupted_;

static void on_signal(int sig) {
  if (!sg_run_interrupted_) sg_run_interrupted_ = sig; /* the first one names the exit code */
}

int sg_run_signal(void) { return (int)sg_run_interrupted_; }

void sg_run_install_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL); /* terminal closed: stop the run as for SIGTERM */
  signal(SIGPIPE, SIG_IGN);
}

int sg_run_begin(sg_recorder_t *db, const sg_experiment_t *x, int quiet, int verbose,
                 const char *rank_bin, sg_progress_t **prog, sg_run_env_t *env) {
  int64_t exp_id;
  SG_CHECK(sg_recorder_experiment(db, x->name, x->config_text, &exp_id));
  SG_CHECK(sg_progress_new(prog, quiet, x->nruns));
  sg_run_install_signals();
  *env = (sg_run_env_t){.db = db, .exp_id = exp_id, .progress = *prog, .verbose = verbose,
                        .rank_bin = rank_bin};
  return SG_OK;
}

/* What the progress line calls the run: its variant's name (config.h),
 * then the transport when there are several processes and the variant
 * does not name it, then the worker count: "allreduce rhd (zmq) workers=4". */
static void variant_label(const sg_run_spec_t *run, char *out, size_t cap) {
  int n; /* a name cut at cap is still told apart by the run's index */
  if (run->nprocs > 1 && !run->names_transport)
    n = snprintf(out, cap, "%s (%s) workers=%d", run->variant,
                 sg_opts_str_or(run->opts, "transport", "?"), run->workers);
  else n = snprintf(out, cap, "%s workers=%d", run->variant, run->workers);
  (void)n;
}

/* ---- the control plane ------------------------------------------------- */

/* What the harness listens on for one run: the records PULL socket and,
 * for ZeroMQ ranks, the rendezvous.  Nothing binds the wildcard address:
 * on one host everything is ipc in the run's 0700 directory (or loopback
 * tcp with zmq_scheme tcp); with hosts, tcp on the address this host uses
 * to reach them.  On an emulated cluster the ranks talk tcp between the
 * hosts' addresses, but records and rendezvous stay ipc: ipc sockets are
 * files, which every network namespace reaches, while this namespace's
 * loopback is not the hosts'.  Any tcp socket speaks CURVE with the run's fresh keys
 * (auth.h) unless zmq_auth is none. */
typedef struct control {
  sg_rec_server_t *rec;
  sg_rdv_t *rdv;
  sg_keys_t *keys;
  int tcp;           /* some socket of the run is tcp */
  int zmq_ranks;     /* ZeroMQ ranks meet at the rendezvous */
  int mpi_ranks;     /* so do MPI ranks, as a barrier after MPI_Init */
  char keys_path[160];
} control_t;

/* The address to bind with hosts: the one that reaches the first of them
 * that is not this host (all loopback: every host is this one). */
static int control_addr(const char *hosts, char *out, size_t cap) {
  snprintf(out, cap, "127.0.0.1");
  char list[8192];
  snprintf(list, sizeof list, "%s", hosts);
  for (char *save = NULL, *h = strtok_r(list, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
    char *colon = strchr(h, ':');
    if (colon) *colon = '\0';
    char addr[64];
    SG_CHECK(sg_net_addr_toward(h, addr, sizeof addr));
    if (strncmp(addr, "127.", 4)) {
      snprintf(out, cap, "%s", addr);
      break;
    }
  }
  return SG_OK;
}

static int control_open(control_t *c, const sg_run_spec_t *run, const char *dir,
                        const char *hosts, int cluster, const run_sim_t *sim) {
  const char *scheme = sg_opts_str_or(run->opts, "zmq_scheme", "ipc");
  int zmq_ranks = !strcmp(sg_opts_get(run->opts, "transport"), "zmq") && run->nprocs > 1;
  int remote = hosts[0] != '\0', tcp = remote || (zmq_ranks && !strcmp(scheme, "tcp"));
  int rdv_tcp = tcp && !cluster;
  char addr[64] = "127.0.0.1";
  c->tcp = tcp;
  if (remote) SG_CHECK(control_addr(hosts, addr, sizeof addr));
  if (tcp && strcmp(sg_opts_str_or(run->opts, "zmq_auth", "curve"), "none")) {
    snprintf(c->keys_path, sizeof c->keys_path, "%s/keys", dir);
    SG_CHECK(sg_keys_new(&c->keys, run->nprocs));
    SG_CHECK(sg_keys_save(c->keys, c->keys_path));
  }
  char ep[256]; /* records: tcp (CURVE when keyed) toward remote hosts, else ipc */
  if (remote) snprintf(ep, sizeof ep, "tcp://%s:*", addr);
  else if (sim) snprintf(ep, sizeof ep, "%s", sim->records); /* a file per rank */
  else snprintf(ep, sizeof ep, "ipc://%s/rec", dir);
  SG_CHECK(sg_rec_server_open(&c->rec, ep, run->nprocs, c->keys));
  c->zmq_ranks = zmq_ranks;
  c->mpi_ranks = !strcmp(sg_opts_get(run->opts, "transport"), "mpi") && run->nprocs > 1;
  if (!sim) { /* the ZeroMQ ranks' rendezvous, and every rank's clock pings */
    char base[256];
    if (rdv_tcp) snprintf(base, sizeof base, "tcp://%s:*", addr);
    else snprintf(base, sizeof base, "ipc://%s/rdv", dir);
    SG_CHECK(sg_rdv_new(&c->rdv, sg_rec_server_zctx(c->rec), base, run->nprocs,
                        rdv_tcp ? c->keys : NULL));
  }
  return SG_OK;
}

/* What was refused during the run, in run_info (only when something was). */
static int control_record(const control_t *c, const serve_t *s) {
  const struct { const char *key; unsigned long n; } counts[] = {
      {"records.dropped", sg_rec_server_dropped(c->rec)},
      {"rendezvous.refused", sg_rdv_refused(c->rdv)},
      {"auth.refused", sg_rec_server_auth_refused(c->rec)},
  };
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    char v[32];
    snprintf(v, sizeof v, "%lu", counts[i].n);
    if (counts[i].n) SG_CHECK(sg_recorder_info(s->env->db, s->run_id, counts[i].key, v));
  }
  return SG_OK;
}

static void control_close(control_t *c) {
  sg_rdv_destroy(&c->rdv); /* before the context it shares goes */
  sg_rec_server_close(&c->rec);
  sg_keys_destroy(&c->keys);
  memset(c, 0, sizeof *c);
}

/* -v: where each rank of a cluster run runs, its host and address. */
static void print_placement(const sg_run_cluster_t *c, const sg_run_spec_t *run, int64_t run_id) {
  fprintf(stderr, "%ssgdlab: run %lld: placement:", isatty(STDERR_FILENO) ? "\r\033[K" : "",
          (long long)run_id);
  for (int r = 0; r < run->nprocs; r++)
    fprintf(stderr, "%s rank %d %s on %s (%s)", r ? "," : "", r,
            sg_engine_role(run->engine, run->opts, run->workers, r), sg_run_cluster_host(c, r),
            sg_run_cluster_addr(c, r));
  fputc('\n', stderr);
}

/* The run's emulated cluster (cluster.hosts > 0), made before anything
 * listens or launches: its name, subnet, hosts and setup time go to
 * run_info.  *out stays NULL for a run without one. */
static int cluster_open(sg_run_cluster_t **out, const sg_run_env_t *env, const sg_run_spec_t *run,
                        int64_t run_id) {
  double t0 = sg_now();
  SG_CHECK(sg_run_cluster_up(out, run, &sg_run_interrupted_));
  if (!*out) return SG_OK;
  char v[32];
  snprintf(v, sizeof v, "%.3f", sg_now() - t0);
  SG_CHECK(sg_recorder_info(env->db, run_id, "cluster.setup_s", v));
  if (env->verbose) print_placement(*out, run, run_id);
  return sg_run_cluster_record_start(*out, env->db, run_id);
}

/* Remove the run's cluster once its ranks are reaped; a failure to remove
 * it is said (the next sgdlab run sweeps what is left). */
static void cluster_close(sg_run_cluster_t **c, int64_t run_id) {
  if (*c && sg_run_cluster_down(c) < 0)
    fprintf(stderr, "%ssgdlab: run %lld: removing its cluster: %s\n",
            isatty(STDERR_FILENO) ? "\r\033[K" : "", (long long)run_id, sg_err_msg());
}

/* ---- where the time went, and on what machine ------------------------ */

static int info_seconds(const serve_t *s, const char *key, double v) {
  char buf[32];
  if (isnan(v)) return SG_OK; /* not measured: no key */
  snprintf(buf, sizeof buf, "%.3f", v < 0 ? 0 : v);
  return sg_recorder_info(s->env->db, s->run_id, key, buf);
}

/* The run's wall time (start: just before launch, as wall_s) split into
 * launch (-> every rank's HELLO), data (the slowest rank's data load),
 * train (every rank's first step start -> the last step end, the
 * evaluations in between taken out), eval (every evaluation) and
 * teardown (last DONE -> every process reaped).  What lies between them
 * (MPI_Init, transport set-up, ...) is in none.  Step times are the
 * ranks' wall clocks against the harness's: across hosts, as good as
 * their clocks agree. */
static int record_times(const serve_t *s, double start, double reaped) {
  const run_times_t *t = &s->times;
  double in = isnan(t->eval_in_s) ? 0 : t->eval_in_s;
  double train = isnan(t->first_step) ? NAN : t->last_step_end - t->first_step - in;
  SG_CHECK(info_seconds(s, "time.launch_s", t->nhello == s->nprocs ? t->last_hello - start : NAN));
  SG_CHECK(info_seconds(s, "time.data_s", t->data_s));
  SG_CHECK(info_seconds(s, "time.train_s", train));
  SG_CHECK(info_seconds(s, "time.eval_s", t->eval_s));
  return info_seconds(s, "time.teardown_s", t->last_done > 0 ? reaped - t->last_done : NAN);
}

/* The 1-minute load average, "?" when it cannot be read. */
static void load_text(char *out, size_t cap) {
  double l;
  if (getloadavg(&l, 1) == 1) snprintf(out, cap, "%.2f", l);
  else snprintf(out, cap, "?");
}

/* The harness's MPI headers; a rank that runs MPI sends its library's own
 * version first (INSERT OR IGNORE keeps that one). */
static void mpi_text(char *out, size_t cap) {
#if defined(OMPI_MAJOR_VERSION)
  snprintf(out, cap, "Open MPI v%d.%d.%d (headers)", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
           OMPI_RELEASE_VERSION);
#else
  snprintf(out, cap, "MPI %d.%d (headers)", MPI_VERSION, MPI_SUBVERSION);
#endif
}

/* What the run ran on: load before and after, cores, libraries, the
 * compiler and source revision of this harness (run_info, docs/results.md). */
static int record_env(const serve_t *s, const char *load_before) {
  char after[32], cores[16], zmqv[32], mpiv[96];
  load_text(after, sizeof after);
  snprintf(cores, sizeof cores, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  sg_rec_server_zmq_version(zmqv, sizeof zmqv);
  mpi_text(mpiv, sizeof mpiv);
  const char *kv[][2] = {{"load.before", load_before}, {"load.after", after}, {"cores", cores},
                         {"zmq", zmqv}, {"mpi", mpiv}, {"compiler", SG_COMPILER},
                         {"revision", SG_REVISION}, {"version", SGDLAB_VERSION}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    SG_CHECK(sg_recorder_info(s->env->db, s->run_id, kv[i][0], kv[i][1]));
  /* what the engine table says about reading the run's rows (the
   * run_summary view uses these instead of engine names) */
  const sg_engine_t *e = s->run->engine;
  int uncounted = e->bytes_uncounted && e->bytes_uncounted(s->run->opts);
  SG_CHECK(sg_recorder_info(s->env->db, s->run_id, "engine.baseline", e->baseline ? "1" : "0"));
  SG_CHECK(sg_recorder_info(s->env->db, s->run_id, "engine.bytes_uncounted", uncounted ? "1" : "0"));
  return SG_OK;
}

/* The run's row (planned and claimed, or inserted now) and its progress
 * line; 1 when another harness claimed the planned row first. */
static int begin_row(serve_t *s, size_t index, char *shown, size_t cap) {
  const sg_run_spec_t *run = s->run;
  char *json = sg_opts_json(run->opts);
  if (!json) return sg_err_set(SG_ENOMEM, "run %zu: no memory for its options", index + 1);
  sg_run_row_t row = {.engine = run->engine->name, .options_json = json,
                      .transport = sg_opts_get(run->opts, "transport"),
                      .launcher = sg_opts_get(run->opts, "launcher"), .workers = run->workers,
                      .servers = run->servers, .processes = run->nprocs, .repeat = run->repeat,
                      .seed = run->seed};
  int rc;
  if (s->env->run_ids && s->env->run_ids[index]) {
    s->run_id = s->env->run_ids[index];
    rc = sg_recorder_run_claim(s->env->db, s->run_id);
  } else {
    rc = sg_recorder_run_begin(s->env->db, s->env->exp_id, &row, &s->run_id);
    rc = rc < 0 ? rc : 1;
  }
  free(json);
  SG_CHECK(rc);
  if (rc == 0) return 1; /* another harness has it */
  variant_label(run, shown, cap);
  size_t len = strlen(shown);
  sg_run_placement(run, shown + len, cap - len); /* " on an emulated cluster of 4 hosts ..." */
  sg_progress_run_begin(s->env->progress, index, shown);
  return SG_OK;
}

/* The spec every rank reads (path): every setting plus _run_id, where to
 * report (_records, _rendezvous, _clock, _keys), _t0, _nprocs, _rundir. */
static int write_spec(serve_t *s, const control_t *ctl, const sg_run_cluster_t *rcl,
                      const char *dir, char *path, size_t cap) {
  const sg_run_spec_t *run = s->run;
  int rc, remote = sg_opts_str_or(run->opts, "hosts", "")[0] != '\0' ||
                   !strcmp(sg_opts_str_or(run->opts, "launcher", ""), "slurm"); /* not an engine: the launcher */
  sg_opts_t *spec = sg_opts_dup(run->opts);
  if (!spec) return sg_err_set(SG_ENOMEM, "run %lld: no memory for its spec", (long long)s->run_id);
  SG_TRY(sg_opts_setf(spec, "_run_id", "%lld", (long long)s->run_id));
  SG_TRY(sg_opts_set(spec, "_records", sg_rec_server_endpoint(ctl->rec)));
  /* MPI ranks meet there too, once out of MPI_Init (transport_new.h) */
  SG_TRY(sg_opts_set(spec, "_rendezvous", ctl->rdv && (ctl->zmq_ranks || ctl->mpi_ranks)
                                              ? sg_rdv_endpoint(ctl->rdv) : ""));
  SG_TRY(sg_opts_set(spec, "_clock", ctl->rdv ? sg_rdv_endpoint(ctl->rdv) : ""));
  SG_TRY(sg_opts_set(spec, "_keys", ctl->keys_path));
  /* simulated ranks count from the simulation's start (their clocks are simulated) */
  SG_TRY(sg_opts_setf(spec, "_t0", "%.6f", s->sim ? 0.0 : s->times.t0));
  if (s->sim && s->sim->cfg.modeled) SG_TRY(sg_opts_setf(spec, "_sim_step_s", "%.9g", s->sim->step_s));
  /* deferred sends (core/transport_mpi.c): compute modeled (a staged
   * copy is not timed) and eager sends */
  if (s->sim && s->sim->cfg.modeled && s->sim->cfg.eager > 1)
    SG_TRY(sg_opts_set(spec, "_sim_defer", "1"));
  SG_TRY(sg_opts_setf(spec, "_nprocs", "%d", run->nprocs));
  SG_TRY(sg_opts_set(spec, "_rundir", remote ? "" : dir));
  if (rcl) SG_TRY(sg_run_cluster_spec(rcl, spec));
  snprintf(path, cap, "%s/spec", dir);
  SG_TRY(sg_opts_save(spec, path));
fail:
  sg_opts_destroy(&spec);
  return rc;
}

/* The run's directory, cluster and sockets; then its spec.  The row
 * names the directory and the hash of its owner file: reconcile.h removes
 * it if we die, and nothing else (rundir.h). */
static int prepare(serve_t *s, control_t *ctl, sg_run_cluster_t **rcl, const sg_rundir_t *rd,
                   char *spec_path, size_t cap) {
  const sg_run_env_t *env = s->env;
  const char *dir = rd->path;
  SG_CHECK(sg_recorder_run_dir(env->db, s->run_id, dir));
  SG_CHECK(sg_recorder_info(env->db, s->run_id, "tmp_dir.proof", rd->proof));
  SG_CHECK(cluster_open(rcl, env, s->run, s->run_id));
  s->cluster = *rcl;
  if (s->sim) SG_CHECK(run_sim_prepare(s->sim, s->run, dir));
  const char *hosts = sg_opts_str_or(s->run->opts, "hosts", "");
  char nodes[8192];
  int nnodes = 0;
  if (!strcmp(sg_opts_str_or(s->run->opts, "launcher", ""), "slurm")) { /* not an engine: the launcher */
    SG_CHECK(sg_slurm_node_addrs(nodes, sizeof nodes, &nnodes));
    SG_CHECK(sg_recorder_info(env->db, s->run_id, "slurm.nodes", nodes));
    SG_CHECK(sg_recorder_info(env->db, s->run_id, "slurm.job_id", getenv("SLURM_JOB_ID")));
    hosts = nodes; /* records and rendezvous on tcp toward them */
  }
  SG_CHECK(control_open(ctl, s->run, dir, hosts, *rcl != NULL, s->sim));
  s->rec = ctl->rec;
  s->rdv = ctl->rdv;
  if (!ctl->keys && ctl->tcp && env->verbose)
    fprintf(stderr, "%ssgdlab: run %lld: zmq_auth none: the run's tcp sockets admit anyone "
            "who can reach them\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", (long long)s->run_id);
  s->times.t0 = sg_wall();
  return write_spec(s, ctl, *rcl, dir, spec_path, cap);
}

static int launch(serve_t *s, const char *spec_path, const sg_run_cluster_t *rcl,
                  sg_launch_t **out) {
  const sg_run_spec_t *run = s->run;
  char rank_bin[4096];
  if (s->sim) snprintf(rank_bin, sizeof rank_bin, "%s", s->sim->rank_bin);
  else if (s->env->rank_bin) snprintf(rank_bin, sizeof rank_bin, "%s", s->env->rank_bin);
  else SG_CHECK(sg_launch_find_rank_bin(rank_bin, sizeof rank_bin));
  const char *launcher = sg_opts_get(run->opts, "launcher");
  sg_launch_cfg_t lc = {.launcher = launcher,
                        .mpi = !strcmp(sg_opts_str_or(run->opts, "transport", ""), "mpi"),
                        .rank_bin = rank_bin, .spec = spec_path,
                        .nprocs = run->nprocs, .hosts = sg_opts_str_or(run->opts, "hosts", ""),
                        .ssh_config = sg_opts_str_or(run->opts, "ssh_config", ""),
                        .verbose = s->env->verbose, .cluster = sg_run_cluster_handle(rcl),
                        .host_of = sg_run_cluster_host_of(rcl),
                        .sim_argv = s->sim ? s->sim->argv : NULL,
                        .sim_tmpdir = s->sim ? s->sim->tmpdir : NULL};
  s->last_rec = sg_now();
  sg_fd_limit_raise(); /* before the ranks inherit it; admission kept to the user's limit */
  SG_CHECK(sg_launch_start(out, &lc));
  s->launch = *out;
  /* ssh: one process per rank, as local; smpirun, srun: as mpirun (the launcher, not an engine) */
  s->local = (!strcmp(launcher, "local") || !strcmp(launcher, "ssh")) && !s->sim; /* not an engine */
  s->err_fd = sg_launch_stderr_fd(*out);
  s->err_open = s->err_fd >= 0;
  return SG_OK;
}

/* The run ended: its result, what it ran on, and its row's status. */
static int finish(serve_t *s, const control_t *ctl, const sg_run_cluster_t *rcl, double start,
                  double reaped, const char *load_before, sg_run_result_t *res,
                  const char **status) {
  res->wall_s = sg_now() - start;
  res->ok = !s->error[0];
  res->final_acc = s->final_acc;
  snprintf(res->error, sizeof res->error, "%s", s->error);
  SG_CHECK(control_record(ctl, s));
  if (!res->ok) SG_CHECK(run_record_blame(s));
  SG_CHECK(record_times(s, start, reaped));
  SG_CHECK(record_env(s, load_before));
  if (rcl) SG_CHECK(sg_run_cluster_record_links(rcl, s->env->db, s->run_id));
  if (s->sim) SG_CHECK(run_sim_record(s->sim, s->env->db, s->run_id));
  *status = res->ok ? "ok" : s->interrupted ? "interrupted" : "failed";
  return sg_recorder_run_end(s->env->db, s->run_id, *status, res->ok ? NULL : s->error, res->wall_s);
}

/* The harness itself failed (or a signal stopped the cluster's setup):
 * keep the run's row honest. */
static void end_row_on_error(serve_t *s, int rc) {
  char why[512];
  if (rc == SG_EINTERRUPTED) snprintf(why, sizeof why, "interrupted");
  else snprintf(why, sizeof why, "harness: %s", sg_err_msg());
  sg_launch_stop(s->launch, STOP_GRACE_S);
  sg_recorder_run_end(s->env->db, s->run_id, rc == SG_EINTERRUPTED ? "interrupted" : "failed", why,
                      0);
}

int sg_run_execute(const sg_run_env_t *env, const sg_run_spec_t *run, size_t index, size_t nruns,
                   sg_run_result_t *res) {
  int rc = SG_OK, ended = 0;
  char spec_path[128], shown[512], load_before[32];
  const char *status = "failed";
  sg_rundir_t rd = {.fd = -1};
  sg_run_cluster_t *rcl = NULL;
  control_t ctl = {0};
  sg_launch_t *launch_h = NULL;
  serve_t s = {.env = env, .run = run, .nprocs = run->nprocs, .final_acc = NAN, .err_fd = -1,
               .first_fail = -1, .cause = -1, .suspect = -1, .suspect_status = -1, .culprit = -1,
               .times = {.first_step = NAN, .data_s = NAN, .eval_s = NAN, .eval_in_s = NAN}};
  (void)nruns;
  sg_mpirun_notice_init(&s.notice);
  memset(res, 0, sizeof *res);
  res->final_acc = NAN;
  if (!(s.ranks = calloc((size_t)run->nprocs, sizeof *s.ranks))) return SG_ENOMEM;
  if (sg_sim_enabled(run->opts) && !(s.sim = calloc(1, sizeof *s.sim))) {
    free(s.ranks);
    return SG_ENOMEM;
  }
  for (int r = 0; r < run->nprocs; r++) s.ranks[r].last_step = s.ranks[r].blamed = -1;
  SG_TRY(sg_opts_double_or(run->opts, "deadline", 30, &s.deadline));
  SG_TRY(begin_row(&s, index, shown, sizeof shown));
  res->run_id = s.run_id;
  if (rc == 1) { /* claimed by another harness: not ours to run */
    res->skipped = 1;
    free(s.ranks);
    return SG_OK;
  }
  SG_TRY(sg_rundir_create(&rd));
  SG_TRY(prepare(&s, &ctl, &rcl, &rd, spec_path, sizeof spec_path));
  load_text(load_before, sizeof load_before);
  double start = sg_now(), reaped;
  SG_TRY(launch(&s, spec_path, rcl, &launch_h));
  SG_TRY(run_serve(&s, &reaped));
  SG_TRY(finish(&s, &ctl, rcl, start, reaped, load_before, res, &status));
  ended = 1;
  sg_progress_run_end(env->progress, shown, status, res->final_acc, res->wall_s,
                      res->ok ? NULL : s.error);
  rc = s.interrupted ? SG_EINTERRUPTED : SG_OK;
fail:
  if (rc < 0 && !ended && s.run_id) end_row_on_error(&s, rc);
  sg_launch_destroy(&launch_h); /* every rank reaped: their namespaces can go */
  cluster_close(&rcl, s.run_id);
  control_close(&ctl);
  sg_rundir_remove(&rd); /* after the cluster: its hosts' daemons kept files there */
  free(s.ranks);
  free(s.sim);
  return rc;
}

