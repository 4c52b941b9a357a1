/* run.c - `sgdlab run` and the execution of one run (see run.h). */
#include "run.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>
#include <mpi.h>
#include <zmq.h>

#include "admit.h"
#include "auth.h"
#include "clock.h"
#include "commands.h"
#include "err.h"
#include "launch.h"
#include "proc.h"
#include "run_cluster.h"
#include "sg_revision.h" /* SG_REVISION, generated at build time */
#include "transport.h"

#if defined(__clang__)
#define SG_COMPILER __VERSION__
#elif defined(__GNUC__)
#define SG_COMPILER "gcc " __VERSION__
#else
#define SG_COMPILER "unknown"
#endif

enum { POLL_MS = 100 };
/* Silence watchdog (see watchdog()): the run fails when no rank has sent
 * any record for WATCHDOG_FACTOR x deadline once a step record has come,
 * and before that for deadline + SILENCE_MARGIN_S (start-up: data loading,
 * mpirun's launch). */
#define WATCHDOG_FACTOR 1.5
#define SILENCE_MARGIN_S 30.0
#define STOP_GRACE_S 2.0      /* SIGTERM -> SIGKILL */
#define DRAIN_S 0.5           /* after an exit, wait this long for the rank's DONE */
#define NOTICE_WAIT_S 3.0     /* a rank found dead under mpirun: wait this long for
                                 mpirun's notice of how it ended */
#define MPIRUN_ABORT_S 3.0    /* a failed run under mpirun: let mpirun abort the job
                                 itself (it also reaches other hosts) before signals */
#define EOF_WAIT_S 1.0        /* mpirun exited: read its stderr to the end */
#define SETTLE_S 0.5          /* after a rank's failure, collect the others' (root_cause) */
#define SCAN_S 0.25           /* how often the ranks' process states are read */
enum { TAIL_CAP = 8192 };     /* the end of mpirun's stderr kept for run_info */

/* Set by the signal handler; the only global state of the harness. */
static volatile sig_atomic_t g_interrupted;

static void on_signal(int sig) {
  if (!g_interrupted) g_interrupted = sig; /* the first one names the exit code */
}

int sg_run_signal(void) { return (int)g_interrupted; }

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

typedef struct rank_info {
  int hello, done, status, exited;
  int dead; /* died, and the engine tolerates it (run_info dead_rank.R) */
  char role[16], host[64], msg[400];
  int pid;
  int64_t last_step; /* step of its last step record, -1: none yet */
  double last_t;     /* sg_now() of its last record of any kind, 0: none */
  int state;         /* its process state when last read (scan_states), 0: gone,
                        -1: not known (another host, no pid yet) */
  double stopped_since; /* sg_now() when first seen stopped (state T/t), 0: not */
} rank_info_t;

/* Where a run's wall time went (run_info time.*, see record_times). */
typedef struct run_times {
  double t0;            /* sg_wall() the ranks' t_start counts from */
  int nhello;
  double last_hello;    /* sg_now() when the last HELLO came */
  double first_step;    /* latest first-step start of a rank, seconds since t0; NAN: none */
  double last_step_end; /* latest step record's arrival, seconds since t0 */
  double last_done;     /* sg_now() of the last DONE, 0: none */
  double data_s, eval_s, eval_in_s; /* the ranks' own: max, sum, sum; NAN: none */
} run_times_t;

typedef struct serve {
  const sg_run_env_t *env;
  const sg_run_spec_t *run;
  int64_t run_id;
  rank_info_t *ranks;
  int nprocs, ndone;
  char error[512]; /* first failure */
  double last_rec; /* sg_now() of the last record */
  int armed;       /* a step record has come: the watchdog's bound is tight */
  int hung;        /* the watchdog failed the run: nothing will end by itself */
  double final_acc;
  unsigned char *buf;
  size_t cap;
  int keyed;                 /* records arrive over CURVE: sender checked */
  unsigned long rec_dropped; /* records refused (malformed, forged) */
  /* mpirun launcher: its stderr, parsed and kept (see mpirun_read) */
  int err_fd;
  sg_mpirun_notice_t notice;
  char line[1024];
  size_t line_len;
  char tail[TAIL_CAP];
  size_t tail_len;
  int first_fail;       /* rank whose DONE error failed the run, or -1 */
  double settle_until;  /* keep serving until then after first_fail */
  int suspect;          /* a rank found dead without DONE (-1: none) */
  double suspect_t;     /* when */
  int suspect_status;   /* its wait status from /proc (zombie), or -1 */
  sg_launch_t *launch;  /* what may be signalled (sg_launch_signal) */
  double scanned;       /* sg_now() of the last scan_states */
  int culprit;          /* a stopped or dead rank when the run failed (blame), or -1 */
  int noted;            /* note_culprit has looked */
  const sg_run_cluster_t *cluster; /* the run's emulated cluster, or NULL */
  run_times_t times;
} serve_t;

static void rank_name(const serve_t *s, int r, char *out, size_t cap) {
  const rank_info_t *ri = &s->ranks[r];
  const char *role = ri->hello ? ri->role
                               : sg_engine_role(s->run->engine, s->run->opts, s->run->workers, r);
  if (ri->pid) snprintf(out, cap, "rank %d (%s, %s, pid %d)", r, role, ri->hello ? ri->host : "?", ri->pid);
  else snprintf(out, cap, "rank %d (%s)", r, role);
}

static void fail_run(serve_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_run(serve_t *s, const char *fmt, ...) {
  if (s->error[0]) return; /* the first cause wins */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->error, sizeof s->error, fmt, ap);
  va_end(ap);
  for (char *c = s->error; *c; c++)
    if (*c == '\n') *c = ' ';
}

/* A rank's own time.* INFO: data load (the longest rank's counts), time
 * spent evaluating, and of it the part between the first and last step. */
static void rank_time(run_times_t *t, const char *key, const char *val) {
  char *end;
  double v = strtod(val, &end);
  if (end == val || !(v >= 0) || v > 1e9) return;
  if (!strcmp(key, "time.data_s")) t->data_s = isnan(t->data_s) || v > t->data_s ? v : t->data_s;
  else if (!strcmp(key, "time.eval_s")) t->eval_s = (isnan(t->eval_s) ? 0 : t->eval_s) + v;
  else if (!strcmp(key, "time.eval_in_s")) t->eval_in_s = (isnan(t->eval_in_s) ? 0 : t->eval_in_s) + v;
}

static int handle_record(serve_t *s, const unsigned char *m, size_t len, int sender) {
  sg_rec_header_t h;
  const unsigned char *p;
  /* A record that is malformed, or (CURVE) not from the rank it names, is
   * dropped and counted (run_info records.dropped), never acted on. */
  if (sg_rec_decode(m, len, s->nprocs, &h, &p) < 0 || (s->keyed && sender != h.rank)) {
    s->rec_dropped++;
    return SG_OK;
  }
  rank_info_t *ri = &s->ranks[h.rank];
  sg_recorder_t *db = s->env->db;
  s->last_rec = sg_now();
  ri->last_t = s->last_rec;
  switch (h.type) {
  case SG_REC_HELLO: {
    sg_rec_hello_t x;
    if (ri->hello) break; /* one per rank */
    memcpy(&x, p, sizeof x);
    x.role[sizeof x.role - 1] = '\0';
    x.host[sizeof x.host - 1] = '\0';
    ri->hello = 1;
    snprintf(ri->role, sizeof ri->role, "%s", x.role);
    snprintf(ri->host, sizeof ri->host, "%s", x.host);
    ri->pid = x.pid;
    s->times.nhello++;
    s->times.last_hello = s->last_rec;
    SG_CHECK(sg_recorder_rank(db, s->run_id, h.rank, ri->role, ri->host, ri->pid,
                              sg_run_cluster_host(s->cluster, h.rank),
                              sg_run_cluster_addr(s->cluster, h.rank)));
    break;
  }
  case SG_REC_STEP: {
    sg_step_rec_t x; /* sg_rec_decode checked every size and terminator */
    memcpy(&x, p, sizeof x);
    SG_CHECK(sg_recorder_step(db, s->run_id, h.rank, ri->hello ? ri->role : "worker", &x));
    /* training is under way once every rank has begun: the latest first
     * step start (a rank that starts earlier waits on the evaluating
     * rank's first evaluation inside its step) */
    if (ri->last_step < 0 && !(x.t_start <= s->times.first_step)) s->times.first_step = x.t_start;
    ri->last_step = x.step;
    s->armed = 1;
    s->times.last_step_end = sg_wall() - s->times.t0;
    sg_progress_step(s->env->progress, x.step, x.epoch);
    break;
  }
  case SG_REC_EVAL: {
    sg_eval_rec_t x;
    memcpy(&x, p, sizeof x);
    SG_CHECK(sg_recorder_eval(db, s->run_id, &x));
    s->final_acc = x.test_acc;
    sg_progress_eval(s->env->progress, x.test_acc);
    break;
  }
  case SG_REC_BENCH: {
    sg_bench_rec_t x;
    memcpy(&x, p, sizeof x);
    x.collective[sizeof x.collective - 1] = x.impl[sizeof x.impl - 1] = '\0';
    x.transport[sizeof x.transport - 1] = '\0';
    SG_CHECK(sg_recorder_bench(db, s->env->exp_id, &x));
    break;
  }
  case SG_REC_INFO: {
    const char *key = (const char *)p, *val = key + strlen(key) + 1;
    if (!strncmp(key, "time.", 5)) { /* the harness writes time.* (record_times) */
      rank_time(&s->times, key, val);
      break;
    }
    SG_CHECK(sg_recorder_info(db, s->run_id, key, val));
    if (!strcmp(key, "total_steps")) sg_progress_total(s->env->progress, atoll(val));
    break;
  }
  case SG_REC_DONE: {
    int32_t st;
    memcpy(&st, p, sizeof st);
    if (ri->done) break;
    ri->done = 1;
    s->times.last_done = s->last_rec;
    ri->status = st;
    s->ndone++;
    if (h.len > sizeof st)
      snprintf(ri->msg, sizeof ri->msg, "%.*s", (int)(h.len - sizeof st), (const char *)p + sizeof st);
    if (st != 0) {
      char who[160];
      rank_name(s, h.rank, who, sizeof who);
      if (!s->error[0]) {
        s->first_fail = h.rank;
        s->settle_until = sg_now() + SETTLE_S;
      }
      fail_run(s, "%s: %s", who, ri->msg[0] ? ri->msg : "failed");
    }
    break;
  }
  default:
    break;
  }
  return SG_OK;
}

/* The rank a failure message blames: the first "rank N" in it other than
 * the reporting rank itself, or -1. */
static int blamed_rank(const serve_t *s, int self, const char *msg) {
  for (const char *p = msg; (p = strstr(p, "rank ")); p += 5) {
    char *end;
    long r = strtol(p + 5, &end, 10);
    if (end != p + 5 && r >= 0 && r < s->nprocs && r != self) return (int)r;
  }
  return -1;
}

/* Deadlines cascade: when rank 1 goes silent, rank 2 times out waiting on
 * it, and rank 0, waiting on rank 2, may time out a moment earlier and
 * report first, blaming rank 2.  So the first failure is followed along
 * the blame chain (rank 0 -> rank 2 -> rank 1) to the last rank that
 * reported a failure itself: rank 2's message, naming rank 1, is the
 * cause.  SETTLE_S after the first failure gives the others time to
 * report. */
static void root_cause(serve_t *s) {
  int r = s->first_fail;
  if (r < 0) return;
  for (int hops = 0;; hops++) {
    int b = blamed_rank(s, r, s->ranks[r].msg);
    if (b < 0 || !s->ranks[b].done || !s->ranks[b].status || !s->ranks[b].msg[0]) break;
    if (hops == s->nprocs) return; /* ranks blaming each other in a circle: keep the first */
    r = b;
  }
  if (r == s->first_fail) return;
  char who[160];
  rank_name(s, r, who, sizeof who);
  s->error[0] = '\0';
  fail_run(s, "%s: %s", who, s->ranks[r].msg);
}

/* Read every record waiting on the PULL socket. */
static int drain(serve_t *s, void *pull) {
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    int n = zmq_msg_recv(&msg, pull, ZMQ_DONTWAIT);
    if (n < 0) {
      zmq_msg_close(&msg);
      if (errno == EAGAIN || errno == EINTR) return SG_OK;
      return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
    }
    int rc = handle_record(s, zmq_msg_data(&msg), zmq_msg_size(&msg), sg_auth_sender(&msg));
    zmq_msg_close(&msg);
    SG_CHECK(rc);
  }
}

/* Wait up to `secs` for records (e.g. the DONE of a rank that just exited). */
static int drain_for(serve_t *s, void *pull, double secs, int want_rank) {
  double until = sg_now() + secs;
  for (;;) {
    SG_CHECK(drain(s, pull));
    if (want_rank >= 0 ? s->ranks[want_rank].done : s->ndone >= s->nprocs) return SG_OK;
    double left = until - sg_now();
    if (left <= 0) return SG_OK;
    zmq_pollitem_t it = {.socket = pull, .events = ZMQ_POLLIN};
    zmq_poll(&it, 1, (long)(left * 1000) + 1);
  }
}

/* "killed by signal 9 (Killed)" / "exited with status 3" */
static void exit_text(int status, char *out, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(out, cap, "exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Fail the run with what mpirun said about the process that ended the job. */
static void fail_from_notice(serve_t *s) {
  const sg_mpirun_notice_t *n = &s->notice;
  if (n->rank < 0 || n->rank >= s->nprocs) return;
  rank_info_t *ri = &s->ranks[n->rank];
  if (!ri->pid && n->pid > 0) ri->pid = n->pid;
  char who[160];
  rank_name(s, n->rank, who, sizeof who);
  if (ri->done && ri->status && ri->msg[0]) fail_run(s, "%s: %s", who, ri->msg);
  else if (n->signal > 0) fail_run(s, "%s: killed by signal %d (%s)", who, n->signal, strsignal(n->signal));
  else if (n->improper) fail_run(s, "%s: exited without finishing MPI (no MPI_Finalize)", who);
  else fail_run(s, "%s: exited with status %d", who, n->exit_code);
}

static void describe_exit(serve_t *s, const sg_exit_t *ex) {
  char who[160];
  if (ex->rank >= 0) {
    rank_info_t *ri = &s->ranks[ex->rank];
    if (!ri->pid) ri->pid = (int)ex->pid;
    ri->exited = 1;
    rank_name(s, ex->rank, who, sizeof who);
  } else {
    snprintf(who, sizeof who, "mpirun (pid %d)", (int)ex->pid);
  }
  if (WIFSIGNALED(ex->status)) {
    char how[96];
    exit_text(ex->status, how, sizeof how);
    fail_run(s, "%s: %s", who, how);
  } else if (WIFEXITED(ex->status) && WEXITSTATUS(ex->status) != 0) {
    if (ex->rank >= 0 && s->ranks[ex->rank].done && s->ranks[ex->rank].msg[0])
      fail_run(s, "%s: %s", who, s->ranks[ex->rank].msg);
    else if (ex->rank < 0) {
      /* mpirun: name the first rank that did not finish */
      for (int r = 0; r < s->nprocs; r++)
        if (!s->ranks[r].done || s->ranks[r].status) {
          char rn[160];
          rank_name(s, r, rn, sizeof rn);
          if (s->ranks[r].done && s->ranks[r].msg[0]) fail_run(s, "%s: %s", rn, s->ranks[r].msg);
          else fail_run(s, "%s: ended without reporting (mpirun exited with status %d)", rn,
                        WEXITSTATUS(ex->status));
          return;
        }
      fail_run(s, "%s: exited with status %d", who, WEXITSTATUS(ex->status));
    } else
      fail_run(s, "%s: exited with status %d", who, WEXITSTATUS(ex->status));
  }
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    char p[4200];
    while ((e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
      }
    closedir(d);
  }
  rmdir(dir);
}

/* Whether a process on this host is gone or a zombie (ranks under mpirun
 * are not our children, so waitpid cannot tell).  *status gets a zombie's
 * wait status (field 52 of /proc/PID/stat), else -1. */
static int proc_dead(int pid, int *status) {
  char buf[1024];
  const char *s = sg_proc_stat(pid, buf, sizeof buf), *code;
  *status = -1;
  if (!s) return 1;
  if (s[0] != 'Z' && s[0] != 'X') return 0;
  if ((code = sg_proc_field(s, 52))) *status = atoi(code);
  return 1;
}

/* Under mpirun: a rank of this host that died without DONE becomes the
 * suspect; mpirun's notice (how it ended) normally follows within
 * milliseconds, and the run fails with it (or, NOTICE_WAIT_S later, with
 * what /proc told). */
static int check_mpirun_ranks(serve_t *s, void *pull) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < s->nprocs && s->suspect < 0; r++) {
    rank_info_t *ri = &s->ranks[r];
    int st;
    if (!ri->hello || ri->done || ri->pid <= 0 || strcmp(ri->host, host) || !proc_dead(ri->pid, &st))
      continue;
    SG_CHECK(drain_for(s, pull, DRAIN_S, r)); /* its DONE may be on the way */
    if (!ri->done) {
      s->suspect = r;
      s->suspect_t = sg_now();
      s->suspect_status = st;
    }
  }
  return SG_OK;
}

static void fail_from_suspect(serve_t *s) {
  if (s->suspect < 0) return;
  char who[160], how[96];
  rank_name(s, s->suspect, who, sizeof who);
  if (s->suspect_status >= 0) {
    exit_text(s->suspect_status, how, sizeof how);
    fail_run(s, "%s: %s", who, how);
  } else {
    fail_run(s, "%s: died without reporting (killed, or exited early)", who);
  }
}

/* Read what mpirun has written to its stderr: parse each line for the
 * notice of the process that ended the job, keep the last TAIL_CAP bytes
 * (stored as run_info mpirun_stderr when the run fails), and forward it to
 * our stderr in verbose mode only, so the terminal shows one summary line
 * per run rather than Open MPI's banners.  Returns 1 at end of file. */
static int mpirun_read(serve_t *s) {
  if (s->err_fd < 0) return 1;
  char buf[2048];
  for (;;) {
    ssize_t n = read(s->err_fd, buf, sizeof buf);
    if (n == 0) return 1;
    if (n < 0) return errno == EAGAIN || errno == EINTR ? 0 : 1;
    if (s->env->verbose) fwrite(buf, 1, (size_t)n, stderr);
    _Static_assert(sizeof buf < TAIL_CAP / 2, "one read fits in half the tail");
    if (s->tail_len + (size_t)n >= TAIL_CAP) { /* keep the newest half */
      size_t drop = s->tail_len + (size_t)n - TAIL_CAP / 2;
      if (drop > s->tail_len) drop = s->tail_len;
      memmove(s->tail, s->tail + drop, s->tail_len - drop);
      s->tail_len -= drop;
    }
    memcpy(s->tail + s->tail_len, buf, (size_t)n);
    s->tail_len += (size_t)n;
    s->tail[s->tail_len] = '\0';
    for (ssize_t i = 0; i < n; i++) {
      if (buf[i] == '\n' || s->line_len + 1 >= sizeof s->line) {
        s->line[s->line_len] = '\0';
        sg_mpirun_notice_line(&s->notice, s->line);
        s->line_len = 0;
        if (buf[i] == '\n') continue;
      }
      s->line[s->line_len++] = buf[i];
    }
  }
}

/* mpirun has exited: read its stderr to the end (bounded). */
static void mpirun_read_to_eof(serve_t *s) {
  double until = sg_now() + EOF_WAIT_S;
  while (!mpirun_read(s) && sg_now() < until) {
    struct pollfd pf = {.fd = s->err_fd, .events = POLLIN};
    poll(&pf, 1, 50);
  }
}

/* A rank that died (no failed DONE): when the engine tolerates its death
 * (local launcher only), record it and let the run go on; returns 1 then. */
static int tolerated_death(serve_t *s, const sg_exit_t *ex, int local) {
  const sg_engine_t *e = s->run->engine;
  rank_info_t *ri = &s->ranks[ex->rank];
  if (!local || !e->tolerates_exit || (ri->done && ri->status) ||
      !e->tolerates_exit(s->run->opts, s->run->workers, ex->rank))
    return 0;
  char who[160], how[96], key[32], text[300];
  if (!ri->pid) ri->pid = (int)ex->pid;
  ri->exited = 1;
  ri->dead = 1;
  rank_name(s, ex->rank, who, sizeof who);
  exit_text(ex->status, how, sizeof how);
  snprintf(key, sizeof key, "dead_rank.%d", ex->rank);
  snprintf(text, sizeof text, "%s: %s", who, how);
  if (sg_recorder_info(s->env->db, s->run_id, key, text) < 0) return 0;
  if (s->env->verbose)
    fprintf(stderr, "%ssgdlab: run %lld: %s; %s tolerates it, the run goes on\n",
            isatty(STDERR_FILENO) ? "\r\033[K" : "", (long long)s->run_id, text, e->name);
  return 1;
}

/* Kill rank processes on this host that are not our children (mpirun's).
 * The pid is what the rank said in HELLO: sg_launch_signal() signals it
 * only when it is a process this run started (mpirun's descendant). */
static void kill_leftovers(serve_t *s) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < s->nprocs; r++) {
    rank_info_t *ri = &s->ranks[r];
    if (ri->hello && ri->pid > 0 && !strcmp(ri->host, host) && !ri->done)
      sg_launch_signal(s->launch, ri->pid, SIGKILL);
  }
}

/* A failed run: SIGKILL its stopped rank processes on this host first (a
 * stopped process holds SIGTERM until continued, so mpirun, which
 * terminates its job with SIGTERM, would otherwise wait on it). */
static void kill_stopped(serve_t *s) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (ri->hello && ri->pid > 0 && !strcmp(ri->host, host) && sg_proc_stopped(ri->pid))
      sg_launch_signal(s->launch, ri->pid, SIGKILL); /* only a process of this run */
  }
}

/* The silence watchdog, the only guard against a rank that hangs inside a
 * call without a deadline (MPI_Allreduce of `allreduce native`): every
 * rank of a training run sends a step record every step, so silence from
 * ALL ranks for WATCHDOG_FACTOR x deadline means the run hangs.  Armed
 * (that tight) from the first step record on; before it, start-up gets
 * deadline + SILENCE_MARGIN_S.  Why 1.5: the engines' own receives give up
 * after 1..1.35 deadlines on a dead peer and report it (the better
 * message), and a step, or the evaluation between two steps, takes far
 * less than a deadline.  The error lists every rank's last step record
 * and which rank has been silent longest (a stopped or dead process of
 * this host is named before it, see blame()):
 *   "no rank reported for 45.0 s (1.5 x deadline 30 s); last records:
 *    rank 0 step 120, rank 1 step 120, rank 2 step 97 (silent longest)" */
static void watchdog(serve_t *s, double deadline) {
  double now = sg_now(), quiet = now - s->last_rec;
  double limit = s->armed ? WATCHDOG_FACTOR * deadline : deadline + SILENCE_MARGIN_S;
  if (s->error[0] || quiet <= limit) return;
  char list[300] = "";
  size_t len = 0;
  int oldest = -1;
  for (int r = 0; r < s->nprocs; r++)
    if (oldest < 0 || s->ranks[r].last_t < s->ranks[oldest].last_t) oldest = r;
  for (int r = 0; r < s->nprocs && len < sizeof list; r++) {
    const rank_info_t *ri = &s->ranks[r];
    const char *sep = r ? ", " : "";
    if (ri->last_step >= 0)
      len += (size_t)snprintf(list + len, sizeof list - len, "%srank %d step %lld", sep, r,
                              (long long)ri->last_step);
    else
      len += (size_t)snprintf(list + len, sizeof list - len, "%srank %d %s", sep, r,
                              ri->last_t > 0 ? "no step" : "nothing");
    if (r == oldest && len < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, " (silent longest)");
  }
  char bound[64];
  if (s->armed) snprintf(bound, sizeof bound, "%.1f x deadline %g s", WATCHDOG_FACTOR, deadline);
  else snprintf(bound, sizeof bound, "deadline %g s + %g s at start-up", deadline, SILENCE_MARGIN_S);
  s->hung = 1;
  fail_run(s, "no rank reported for %.1f s (%s); last records: %s", quiet, bound, list);
}

/* The pid of rank r's process on this host that this run started: the
 * local launcher's child, or (mpirun) the pid the rank sent in HELLO when
 * it descends from our mpirun; 0 when there is none to look at. */
static int rank_pid(serve_t *s, int r) {
  rank_info_t *ri = &s->ranks[r];
  if (strcmp(sg_opts_str_or(s->run->opts, "launcher", "local"), "mpirun"))
    return (int)sg_launch_pid(s->launch, r);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  if (!ri->hello || ri->pid <= 0 || strcmp(ri->host, host)) return 0;
  return sg_launch_owns(s->launch, ri->pid) ? ri->pid : 0;
}

/* Read the process state of every rank still expected to report
 * (rank_info_t.state, .stopped_since); at most every SCAN_S unless
 * `now_too`. */
static void scan_states(serve_t *s, int now_too) {
  double now = sg_now();
  if (!now_too && now - s->scanned < SCAN_S) return;
  s->scanned = now;
  for (int r = 0; r < s->nprocs; r++) {
    rank_info_t *ri = &s->ranks[r];
    int pid = ri->done || ri->exited || ri->dead ? 0 : rank_pid(s, r);
    ri->state = pid > 0 ? sg_proc_state(pid) : -1;
    int stopped = ri->state == 'T' || ri->state == 't';
    if (!stopped) ri->stopped_since = 0;
    else if (!ri->stopped_since) ri->stopped_since = now;
  }
}

/* A stopped process never ends by itself and may be one that nobody
 * waits on (a worker async ps has declared dead and goes on without): a
 * rank of this host stopped for WATCHDOG_FACTOR x deadline fails the run.
 * Peers that wait on it report first (after 1..1.35 deadlines). */
static void stopped_check(serve_t *s, double deadline) {
  if (s->error[0]) return;
  scan_states(s, 0);
  double now = sg_now();
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (!ri->stopped_since || now - ri->stopped_since <= WATCHDOG_FACTOR * deadline) continue;
    char who[160];
    rank_name(s, r, who, sizeof who);
    fail_run(s, "%s is stopped (state %c) for %.1f s (%.1f x deadline %g s)", who, ri->state,
             now - ri->stopped_since, WATCHDOG_FACTOR, deadline);
    return;
  }
}

/* The run just failed: note, before anything is stopped, a rank of this
 * host whose process is stopped (the one stopped longest) or dead without
 * having reported, for blame().  Once. */
static void note_culprit(serve_t *s) {
  if (s->noted) return;
  s->noted = 1;
  scan_states(s, 1);
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (ri->stopped_since &&
        (s->culprit < 0 || !s->ranks[s->culprit].stopped_since ||
         ri->stopped_since < s->ranks[s->culprit].stopped_since))
      s->culprit = r;
    else if (s->culprit < 0 && (ri->state == 0 || ri->state == 'Z' || ri->state == 'X'))
      s->culprit = r;
  }
}

/* A run that failed because a rank timed out waiting on a peer, or that
 * the watchdog failed, names first the process that caused it, when one
 * of this host was stopped or dead at the time:
 *   "rank 2 (worker, vm, pid 4242) is stopped (state T); rank 0 (server,
 *    vm, pid 4240): ps server 0 (rank 0): no PUSH for step 12 from ..."
 * (a healthy peer's message alone would lead with the healthy peer). */
static void blame(serve_t *s) {
  if (s->culprit < 0 || !s->error[0] || (s->first_fail < 0 && !s->hung)) return;
  const rank_info_t *ri = &s->ranks[s->culprit];
  char who[160], what[64], pre[240];
  rank_name(s, s->culprit, who, sizeof who);
  if (!strncmp(s->error, who, strlen(who))) return; /* it is named first already */
  if (ri->stopped_since) snprintf(what, sizeof what, "is stopped (state %c)", ri->state);
  else if (ri->state) snprintf(what, sizeof what, "is dead (state %c)", ri->state);
  else snprintf(what, sizeof what, "is gone (no such process)");
  snprintf(pre, sizeof pre, "%s %s; ", who, what);
  size_t pl = strlen(pre), el = strlen(s->error);
  if (pl + el >= sizeof s->error) el = sizeof s->error - pl - 1;
  memmove(s->error + pl, s->error, el);
  memcpy(s->error, pre, pl);
  s->error[pl + el] = '\0';
}

/* What the progress line calls the run: its label (the engine's,
 * sg_engine_label, plus the swept keys; config.c), with the transport
 * when there are several processes: "allreduce rhd (zmq) workers=4". */
static void variant_label(const sg_run_spec_t *run, char *out, size_t cap) {
  char eng[256];
  sg_engine_label(run->engine, run->opts, eng, sizeof eng);
  size_t head = strlen(eng);
  if (strncmp(run->label, eng, head)) head = strlen(run->label);
  if (run->nprocs > 1)
    snprintf(out, cap, "%.*s (%s)%s", (int)head, run->label,
             sg_opts_str_or(run->opts, "transport", "?"), run->label + head);
  else snprintf(out, cap, "%s", run->label);
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
  void *zctx, *pull;
  sg_rdv_t *rdv;
  sg_keys_t *keys;
  sg_zap_t *zap;
  int tcp;           /* some socket of the run is tcp */
  int keyed_records;
  char rec_ep[256], keys_path[160];
} control_t;

enum { REC_RCVHWM = 100000 }; /* records queued before ranks' sends block */

/* The address to bind with hosts: the one that reaches the first of them
 * that is not this host (all loopback: every host is this one). */
static int control_addr(const char *hosts, char *out, size_t cap) {
  snprintf(out, cap, "127.0.0.1");
  char list[1024];
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

static int control_bind_records(control_t *c, const char *dir, const char *addr) {
  int hwm = REC_RCVHWM;
  int64_t maxmsg = SG_REC_MAX;
  if (!(c->pull = zmq_socket(c->zctx, ZMQ_PULL)))
    return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
  zmq_setsockopt(c->pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(c->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  char ep[256];
  if (addr) snprintf(ep, sizeof ep, "tcp://%s:*", addr);
  else snprintf(ep, sizeof ep, "ipc://%s/rec", dir);
  if (addr && c->keys) {
    SG_CHECK(sg_curve_server(c->pull, c->keys, SG_AUTH_HARNESS));
    c->keyed_records = 1;
  }
  if (zmq_bind(c->pull, ep) < 0)
    return sg_err_set(SG_EIO, "records socket: bind %s: %s", ep, zmq_strerror(errno));
  size_t n = sizeof c->rec_ep;
  if (zmq_getsockopt(c->pull, ZMQ_LAST_ENDPOINT, c->rec_ep, &n) != 0)
    return sg_err_set(SG_EIO, "records socket: %s", zmq_strerror(errno));
  return SG_OK;
}

static int control_open(control_t *c, const sg_run_spec_t *run, const char *dir,
                        const char *hosts, int cluster) {
  const char *scheme = sg_opts_str_or(run->opts, "zmq_scheme", "ipc");
  int zmq_ranks = !strcmp(sg_opts_get(run->opts, "transport"), "zmq") && run->nprocs > 1;
  int remote = hosts[0] != '\0', tcp = remote || (zmq_ranks && !strcmp(scheme, "tcp"));
  int rdv_tcp = tcp && !cluster;
  char addr[64] = "127.0.0.1";
  c->tcp = tcp;
  if (remote) SG_CHECK(control_addr(hosts, addr, sizeof addr));
  if (!(c->zctx = zmq_ctx_new())) return sg_err_set(SG_EIO, "zmq: %s", zmq_strerror(errno));
  if (tcp && strcmp(sg_opts_str_or(run->opts, "zmq_auth", "curve"), "none")) {
    snprintf(c->keys_path, sizeof c->keys_path, "%s/keys", dir);
    SG_CHECK(sg_keys_new(&c->keys, run->nprocs));
    SG_CHECK(sg_keys_save(c->keys, c->keys_path));
    SG_CHECK(sg_zap_start(&c->zap, c->zctx, c->keys));
  }
  SG_CHECK(control_bind_records(c, dir, remote ? addr : NULL));
  if (zmq_ranks) {
    char base[256];
    if (rdv_tcp) snprintf(base, sizeof base, "tcp://%s:*", addr);
    else snprintf(base, sizeof base, "ipc://%s/rdv", dir);
    SG_CHECK(sg_rdv_new(&c->rdv, c->zctx, base, run->nprocs, rdv_tcp ? c->keys : NULL));
  }
  return SG_OK;
}

/* What was refused during the run, in run_info (only when something was). */
static int control_record(const control_t *c, const serve_t *s) {
  const struct { const char *key; unsigned long n; } counts[] = {
      {"records.dropped", s->rec_dropped},
      {"rendezvous.refused", sg_rdv_refused(c->rdv)},
      {"auth.refused", sg_zap_refused(c->zap)},
  };
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
    char v[32];
    snprintf(v, sizeof v, "%lu", counts[i].n);
    if (counts[i].n) SG_CHECK(sg_recorder_info(s->env->db, s->run_id, counts[i].key, v));
  }
  return SG_OK;
}

static void control_close(control_t *c) {
  sg_rdv_destroy(&c->rdv);
  if (c->pull) {
    int zero = 0;
    zmq_setsockopt(c->pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_close(c->pull);
  }
  sg_zap_stop(&c->zap); /* shuts the context down once its sockets are closed */
  if (c->zctx) zmq_ctx_term(c->zctx);
  sg_keys_destroy(&c->keys);
  memset(c, 0, sizeof *c);
}

/* The run's emulated cluster (cluster.hosts > 0), made before anything
 * listens or launches: its name, subnet, hosts and setup time go to
 * run_info.  *out stays NULL for a run without one. */
static int cluster_open(sg_run_cluster_t **out, const sg_run_env_t *env, const sg_run_spec_t *run,
                        int64_t run_id) {
  double t0 = sg_now();
  SG_CHECK(sg_run_cluster_up(out, run, &g_interrupted));
  if (!*out) return SG_OK;
  char v[32];
  snprintf(v, sizeof v, "%.3f", sg_now() - t0);
  SG_CHECK(sg_recorder_info(env->db, run_id, "cluster.setup_s", v));
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
  int maj, min, pat;
  load_text(after, sizeof after);
  snprintf(cores, sizeof cores, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  zmq_version(&maj, &min, &pat);
  snprintf(zmqv, sizeof zmqv, "%d.%d.%d", maj, min, pat);
  mpi_text(mpiv, sizeof mpiv);
  const char *kv[][2] = {{"load.before", load_before}, {"load.after", after}, {"cores", cores},
                         {"zmq", zmqv}, {"mpi", mpiv}, {"compiler", SG_COMPILER},
                         {"revision", SG_REVISION}, {"version", SGDLAB_VERSION}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    SG_CHECK(sg_recorder_info(s->env->db, s->run_id, kv[i][0], kv[i][1]));
  return SG_OK;
}

int sg_run_execute(const sg_run_env_t *env, const sg_run_spec_t *run, size_t index, size_t nruns,
                   sg_run_result_t *res) {
  int rc = SG_OK;
  char dir[] = "/tmp/sgdlab-XXXXXX";
  int have_dir = 0, interrupted = 0, ended = 0;
  char spec_path[128], rank_bin[4096];
  sg_run_cluster_t *rcl = NULL;
  control_t ctl = {0};
  void *pull = NULL;
  sg_rdv_t *rdv = NULL;
  sg_launch_t *launch = NULL;
  sg_opts_t *spec = NULL;
  char *json = NULL;
  serve_t s = {.env = env, .run = run, .nprocs = run->nprocs, .final_acc = NAN, .err_fd = -1,
               .first_fail = -1, .suspect = -1, .suspect_status = -1, .culprit = -1,
               .times = {.first_step = NAN, .data_s = NAN, .eval_s = NAN, .eval_in_s = NAN}};
  char load_before[32];
  sg_mpirun_notice_init(&s.notice);
  memset(res, 0, sizeof *res);
  res->final_acc = NAN;

  if (env->rank_bin) snprintf(rank_bin, sizeof rank_bin, "%s", env->rank_bin);
  else SG_TRY(sg_launch_find_rank_bin(rank_bin, sizeof rank_bin));
  if (!(s.ranks = calloc((size_t)run->nprocs, sizeof *s.ranks))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  for (int r = 0; r < run->nprocs; r++) s.ranks[r].last_step = -1;
  const char *transport = sg_opts_get(run->opts, "transport");
  const char *launcher = sg_opts_get(run->opts, "launcher");
  const char *hosts = sg_opts_str_or(run->opts, "hosts", "");
  int remote = hosts[0] != '\0';
  double deadline = 30;
  SG_TRY(sg_opts_double_or(run->opts, "deadline", 30, &deadline));

  /* the run's row */
  if (!(json = sg_opts_json(run->opts))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  sg_run_row_t row = {.engine = run->engine->name, .options_json = json, .transport = transport,
                      .launcher = launcher, .workers = run->workers, .servers = run->servers,
                      .processes = run->nprocs, .repeat = run->repeat, .seed = run->seed};
  if (env->run_ids && env->run_ids[index]) {
    s.run_id = env->run_ids[index];
    SG_TRY(sg_recorder_run_start(env->db, s.run_id));
  } else {
    SG_TRY(sg_recorder_run_begin(env->db, env->exp_id, &row, &s.run_id));
  }
  res->run_id = s.run_id;
  char shown[256];
  variant_label(run, shown, sizeof shown);
  sg_progress_run_begin(env->progress, index, shown);

  /* sockets */
  if (!mkdtemp(dir)) {
    rc = sg_err_set(SG_EIO, "cannot create a temp dir under /tmp: %s", strerror(errno));
    goto fail;
  }
  have_dir = 1;
  SG_TRY(sg_recorder_run_dir(env->db, s.run_id, dir)); /* removed by reconcile.h if we die */
  SG_TRY(cluster_open(&rcl, env, run, s.run_id));
  s.cluster = rcl;
  SG_TRY(control_open(&ctl, run, dir, hosts, rcl != NULL));
  s.keyed = ctl.keyed_records;
  pull = ctl.pull;
  rdv = ctl.rdv;
  if (!ctl.keys && ctl.tcp && env->verbose)
    fprintf(stderr, "%ssgdlab: run %lld: zmq_auth none: the run's tcp sockets admit anyone "
            "who can reach them\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", (long long)s.run_id);

  /* the spec every rank reads */
  double t0 = sg_wall();
  s.times.t0 = t0;
  if (!(spec = sg_opts_dup(run->opts))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  SG_TRY(sg_opts_setf(spec, "_run_id", "%lld", (long long)s.run_id));
  SG_TRY(sg_opts_set(spec, "_records", ctl.rec_ep));
  SG_TRY(sg_opts_set(spec, "_rendezvous", ctl.rdv ? sg_rdv_endpoint(ctl.rdv) : ""));
  SG_TRY(sg_opts_set(spec, "_keys", ctl.keys_path));
  SG_TRY(sg_opts_setf(spec, "_t0", "%.6f", t0));
  SG_TRY(sg_opts_setf(spec, "_nprocs", "%d", run->nprocs));
  SG_TRY(sg_opts_set(spec, "_rundir", remote ? "" : dir));
  if (rcl) SG_TRY(sg_run_cluster_spec(rcl, spec));
  snprintf(spec_path, sizeof spec_path, "%s/spec", dir);
  SG_TRY(sg_opts_save(spec, spec_path));

  sg_launch_cfg_t lc = {.launcher = launcher, .rank_bin = rank_bin, .spec = spec_path,
                        .nprocs = run->nprocs, .hosts = hosts, .verbose = env->verbose,
                        .cluster = sg_run_cluster_handle(rcl),
                        .host_of = sg_run_cluster_host_of(rcl)};
  load_text(load_before, sizeof load_before);
  double start = sg_now();
  s.last_rec = start;
  sg_fd_limit_raise(); /* before the ranks inherit it; admission kept to the user's limit */
  SG_TRY(sg_launch_start(&launch, &lc));
  s.launch = launch;
  int local = strcmp(launcher, "mpirun") != 0;
  s.err_fd = sg_launch_stderr_fd(launch);

  /* serve until every process has exited, or the run fails */
  zmq_pollitem_t items[3] = {{.socket = pull, .events = ZMQ_POLLIN},
                             {.socket = NULL, .fd = s.err_fd, .events = ZMQ_POLLIN},
                             {.socket = rdv ? sg_rdv_socket(rdv) : NULL, .events = ZMQ_POLLIN}};
  int err_open = s.err_fd >= 0;
  while (sg_launch_alive(launch) && (!s.error[0] || sg_now() < s.settle_until)) {
    if (g_interrupted) {
      interrupted = 1;
      fail_run(&s, "interrupted");
      break;
    }
    /* items: records, [mpirun's stderr], [rendezvous] */
    zmq_pollitem_t *it = items;
    int nit = 1;
    if (err_open) it[nit++] = items[1];
    if (rdv) it[nit++] = items[2];
    zmq_poll(it, nit, POLL_MS);
    SG_TRY(drain(&s, pull));
    if (rdv) SG_TRY(sg_rdv_handle(rdv));
    if (err_open && mpirun_read(&s)) err_open = 0;
    sg_exit_t ex;
    while (sg_launch_poll(launch, &ex)) {
      int bad = !WIFEXITED(ex.status) || WEXITSTATUS(ex.status) != 0;
      /* a rank that failed usually said why in DONE just before exiting */
      if (bad && ex.rank >= 0) SG_TRY(drain_for(&s, pull, DRAIN_S, ex.rank));
      if (ex.rank < 0) { /* mpirun: its last words name the rank that ended the job */
        mpirun_read_to_eof(&s);
        err_open = 0;
        if (bad) SG_TRY(drain_for(&s, pull, DRAIN_S, -1));
        fail_from_notice(&s);
        fail_from_suspect(&s);
      }
      if (bad && ex.rank >= 0 && tolerated_death(&s, &ex, local)) continue;
      describe_exit(&s, &ex);
    }
    if (!local && !s.error[0]) {
      SG_TRY(check_mpirun_ranks(&s, pull));
      fail_from_notice(&s);
      if (s.suspect >= 0 && sg_now() - s.suspect_t > NOTICE_WAIT_S) fail_from_suspect(&s);
    }
    SG_TRY(sg_recorder_tick(env->db));
    watchdog(&s, deadline);
    stopped_check(&s, deadline);
    if (s.error[0]) {
      note_culprit(&s); /* before anything is stopped */
      kill_stopped(&s); /* the run is over: do not let mpirun wait on it */
    }
  }
  if (s.error[0]) {
    kill_stopped(&s);
    if (!local && !interrupted && !s.hung) { /* mpirun aborts the job itself, everywhere */
      double until = sg_now() + MPIRUN_ABORT_S;
      sg_exit_t ex;
      while (sg_launch_alive(launch) && sg_now() < until) {
        if (err_open && mpirun_read(&s)) err_open = 0;
        if (sg_launch_poll(launch, &ex)) break;
        zmq_poll(err_open ? &items[1] : NULL, err_open ? 1 : 0, 20);
      }
      mpirun_read_to_eof(&s);
    }
    sg_launch_stop(launch, STOP_GRACE_S);
    kill_leftovers(&s);
    if (s.tail_len) SG_TRY(sg_recorder_info(env->db, s.run_id, "mpirun_stderr", s.tail));
  }
  double reaped = sg_now();
  SG_TRY(drain_for(&s, pull, s.error[0] ? 0 : DRAIN_S, -1));
  root_cause(&s);
  blame(&s);
  if (!s.error[0])
    for (int r = 0; r < s.nprocs; r++)
      if (!s.ranks[r].done && !s.ranks[r].dead) {
        char who[160];
        rank_name(&s, r, who, sizeof who);
        fail_run(&s, "%s: exited without reporting that it finished", who);
        break;
      }
  if (g_interrupted && !s.error[0]) {
    interrupted = 1;
    fail_run(&s, "interrupted");
  }
  res->wall_s = sg_now() - start;
  res->ok = !s.error[0];
  res->final_acc = s.final_acc;
  snprintf(res->error, sizeof res->error, "%s", s.error);
  SG_TRY(control_record(&ctl, &s));
  SG_TRY(record_times(&s, start, reaped));
  SG_TRY(record_env(&s, load_before));
  if (rcl) SG_TRY(sg_run_cluster_record_links(rcl, env->db, s.run_id));
  const char *status = res->ok ? "ok" : interrupted ? "interrupted" : "failed";
  SG_TRY(sg_recorder_run_end(env->db, s.run_id, status, res->ok ? NULL : s.error, res->wall_s));
  ended = 1;
  sg_progress_run_end(env->progress, shown, status, res->final_acc,
                      res->wall_s, res->ok ? NULL : s.error);
  rc = interrupted ? SG_EINTERRUPTED : SG_OK;
fail:
  if (rc < 0 && !ended && s.run_id) {
    /* the harness itself failed, or a signal stopped the cluster's setup:
     * keep the run's row honest */
    char why[512];
    if (rc == SG_EINTERRUPTED) snprintf(why, sizeof why, "interrupted");
    else snprintf(why, sizeof why, "harness: %s", sg_err_msg());
    sg_launch_stop(launch, STOP_GRACE_S);
    sg_recorder_run_end(env->db, s.run_id, rc == SG_EINTERRUPTED ? "interrupted" : "failed", why,
                        0);
  }
  sg_launch_destroy(&launch); /* every rank reaped: their namespaces can go */
  cluster_close(&rcl, s.run_id);
  control_close(&ctl);
  if (have_dir) remove_dir(dir);
  sg_opts_destroy(&spec);
  free(json);
  free(s.ranks);
  free(s.buf);
  return rc;
}

/* ---- sgdlab run -------------------------------------------------------- */

static void run_usage(FILE *f) {
  fprintf(f,
          "usage: sgdlab run CONFIG [options]\n"
          "\n"
          "Expand the experiment file CONFIG into runs (sweeps x repeats), launch\n"
          "each run's processes, and record timings and convergence into SQLite.\n"
          "\n"
          "options:\n"
          "  --set KEY=VALUE  override a key for every run (value in YAML syntax, so\n"
          "                   --set workers=[2,4] sweeps); KEY may be workload.KEY or\n"
          "                   engines.I.KEY (entry I, 0-based); repeatable\n"
          "  --db PATH        results database (default %s)\n"
          "  -H HOSTS         mpirun host list host:slots,... (same as --set hosts=...)\n"
          "  -n, --dry-run    validate and list the resolved runs; launch nothing\n"
          "  --resume         run only the runs of the latest experiment of this name\n"
          "                   and file text (same --set options) in --db that are not\n"
          "                   ok: pending (never started), interrupted or failed\n"
          "  --force          run even when a run's memory estimate exceeds what this\n"
          "                   host has available (hard process limits still refuse)\n"
          "  -q, --quiet      print nothing but errors (one line per failed run)\n"
          "  -v, --verbose    also print each launch command line, mpirun's own\n"
          "                   output, and the deaths an engine tolerates\n"
          "  -h, --help       this help\n"
          "\n"
          "On a terminal a status line shows the run (i/n, engine and variant),\n"
          "epoch, step/total, last test accuracy and elapsed time; every run ends\n"
          "with one line: ok or failed, final accuracy, wall time, and the reason\n"
          "it failed (the rank, its role, host and pid).  Under mpirun, Open MPI's\n"
          "messages of a failed run are kept in the database (sgdlab show RUN).\n"
          "\n"
          "exit status: 0 every run ok, 1 a run failed (or the harness could not\n"
          "go on), 2 configuration or usage error (nothing launched), 128 + the\n"
          "signal when interrupted (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP).\n",
          SG_DEFAULT_DB);
}

typedef struct runkey {
  char *json;
  size_t i;
} runkey_t;

static int runkey_cmp(const void *a, const void *b) {
  const runkey_t *x = a, *y = b;
  int c = strcmp(x->json, y->json);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* Runs with the same settings (repeat index included: `repeat` is the way
 * to run a point again) measure the same thing twice, which a sweep or a
 * --set over entries that differ in one key easily does by mistake.  They
 * still run (nothing is wrong with them), with one warning line each. */
static void warn_duplicates(const sg_experiment_t *x) {
  runkey_t *k = calloc(x->nruns ? x->nruns : 1, sizeof *k);
  if (!k) return;
  for (size_t i = 0; i < x->nruns; i++) k[i] = (runkey_t){sg_opts_json(x->runs[i].opts), i};
  for (size_t i = 0; i < x->nruns; i++)
    if (!k[i].json) goto out;
  qsort(k, x->nruns, sizeof *k, runkey_cmp);
  for (size_t i = 1, first = 0; i < x->nruns; i++) {
    if (strcmp(k[i].json, k[first].json)) {
      first = i;
      continue;
    }
    fprintf(stderr, "sgdlab run: warning: run %zu (%s) has the same settings as run %zu (%s); "
            "it measures the same thing again (use repeat: to rerun a point)\n", k[i].i + 1,
            x->runs[k[i].i].label, k[first].i + 1, x->runs[k[first].i].label);
  }
out:
  for (size_t i = 0; i < x->nruns; i++) free(k[i].json);
  free(k);
}

/* The row of a run as planned (json: its options as JSON, caller's). */
static sg_run_row_t run_row(const sg_run_spec_t *run, const char *json) {
  return (sg_run_row_t){.engine = run->engine->name, .options_json = json,
                        .transport = sg_opts_get(run->opts, "transport"),
                        .launcher = sg_opts_get(run->opts, "launcher"), .workers = run->workers,
                        .servers = run->servers, .processes = run->nprocs,
                        .repeat = run->repeat, .seed = run->seed};
}

/* ids[i]: run i's row; a row of `have` with its options when one is there
 * (-1 when that row is ok: nothing to do), else a new pending row. */
static int plan_rows(sg_recorder_t *db, int64_t exp_id, const sg_experiment_t *x,
                     sg_run_state_t *have, size_t nhave, int64_t *ids, size_t *todo) {
  *todo = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    char *json = sg_opts_json(x->runs[i].opts);
    if (!json) return SG_ENOMEM;
    size_t j = 0;
    while (j < nhave && (!have[j].options_json || strcmp(have[j].options_json, json))) j++;
    int rc = SG_OK;
    if (j < nhave) { /* each row answers for one run: identical runs take one each */
      ids[i] = strcmp(have[j].status, "ok") ? have[j].id : -1;
      free(have[j].options_json);
      have[j].options_json = NULL;
    } else {
      sg_run_row_t row = run_row(&x->runs[i], json);
      rc = sg_recorder_run_plan(db, exp_id, &row, &ids[i]);
    }
    free(json);
    SG_CHECK(rc);
    if (ids[i] > 0) (*todo)++;
  }
  return SG_OK;
}

/* --resume: the latest experiment of this name and text, its runs that
 * are not ok (pending, interrupted, failed). */
static int resume_rows(sg_recorder_t *db, const sg_experiment_t *x, int64_t *exp_id, int64_t *ids,
                       size_t *todo) {
  sg_run_state_t *have = NULL;
  size_t nhave = 0;
  SG_CHECK(sg_recorder_find_experiment(db, x->name, x->config_text, exp_id));
  SG_CHECK(sg_recorder_run_states(db, *exp_id, &have, &nhave));
  int rc = plan_rows(db, *exp_id, x, have, nhave, ids, todo);
  sg_recorder_rows_free(&have, nhave);
  return rc;
}

int sg_cmd_run(int argc, char **argv) {
  const char *config = NULL, *db_path = SG_DEFAULT_DB;
  int quiet = 0, verbose = 0, dry = 0, force = 0, resume = 0, nsets = 0, code = 0;
  int64_t *ids = NULL;
  size_t todo = 0;
  char **sets = calloc((size_t)argc + 1, sizeof *sets);
  char *hosts_set = NULL;
  sg_experiment_t *x = NULL;
  sg_recorder_t *db = NULL;
  sg_progress_t *prog = NULL;
  if (!sets) return 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      run_usage(stdout);
      goto out;
    } else if (!strcmp(a, "--set") && i + 1 < argc) {
      sets[nsets++] = argv[++i];
    } else if (!strncmp(a, "--set=", 6)) {
      sets[nsets++] = (char *)a + 6;
    } else if (!strcmp(a, "--db") && i + 1 < argc) {
      db_path = argv[++i];
    } else if (!strncmp(a, "--db=", 5)) {
      db_path = a + 5;
    } else if (!strcmp(a, "-H") && i + 1 < argc) {
      free(hosts_set);
      if (!(hosts_set = malloc(strlen(argv[i + 1]) + 8))) {
        code = 1;
        goto out;
      }
      sprintf(hosts_set, "hosts=%s", argv[++i]);
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      quiet = 1;
    } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
      verbose = 1;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--dry-run")) {
      dry = 1;
    } else if (!strcmp(a, "--force")) {
      force = 1;
    } else if (!strcmp(a, "--resume")) {
      resume = 1;
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, "sgdlab run: unknown or incomplete option '%s' (sgdlab run --help)\n", a);
      code = 2;
      goto out;
    } else if (!config) {
      config = a;
    } else {
      fprintf(stderr, "sgdlab run: one experiment file at a time ('%s' and '%s')\n", config, a);
      code = 2;
      goto out;
    }
  }
  if (!config) {
    fprintf(stderr, "sgdlab run: missing CONFIG, the experiment file to run (e.g. sgdlab run "
            "configs/local-softmax.yaml)\n\n");
    run_usage(stderr);
    code = 2;
    goto out;
  }
  if (hosts_set) sets[nsets++] = hosts_set;
  if (sg_config_load(&x, config, sets, nsets) < 0 ||
      sg_admit_experiment(x, force, dry ? stdout : NULL) < 0 ||
      sg_run_cluster_admit(x, config) < 0) {
    fprintf(stderr, "%s\n", sg_err_msg());
    code = 2;
    goto out;
  }
  warn_duplicates(x);
  if (dry) {
    for (size_t i = 0; i < x->nruns; i++) {
      const sg_run_spec_t *r = &x->runs[i];
      printf("[%zu/%zu] %s  processes=%d repeat=%d\n", i + 1, x->nruns, r->label, r->nprocs,
             r->repeat);
      if (verbose) {
        char *j = sg_opts_json(r->opts);
        printf("  %s\n", j ? j : "?");
        free(j);
      }
    }
    goto out;
  }
  char rank_bin[4096];
  if (sg_launch_find_rank_bin(rank_bin, sizeof rank_bin) < 0 || sg_recorder_open(&db, db_path) < 0) {
    fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
    code = 2;
    goto out;
  }
  sg_run_cluster_sweep_leftovers(quiet); /* clusters of a harness that was killed */
  sg_run_env_t env;
  if (!(ids = calloc(x->nruns ? x->nruns : 1, sizeof *ids))) {
    code = 1;
    goto out;
  }
  if (resume) {
    int64_t exp_id = 0;
    if (resume_rows(db, x, &exp_id, ids, &todo) < 0) {
      fprintf(stderr, "sgdlab run: --resume: %s\n", sg_err_msg());
      code = 2;
      goto out;
    }
    if (sg_progress_new(&prog, quiet, x->nruns) < 0) {
      code = 1;
      goto out;
    }
    sg_run_install_signals();
    env = (sg_run_env_t){.db = db, .exp_id = exp_id, .progress = prog, .verbose = verbose,
                         .rank_bin = rank_bin};
    if (!quiet)
      printf("resuming experiment '%s' (id %lld): %zu of %zu runs to do\n", x->name,
             (long long)exp_id, todo, x->nruns);
  } else if (sg_run_begin(db, x, quiet, verbose, rank_bin, &prog, &env) < 0 ||
             plan_rows(db, env.exp_id, x, NULL, 0, ids, &todo) < 0) {
    /* every run recorded up front as pending: an interrupted sweep shows
     * (and --resume finds) the runs it never started */
    fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
    code = 1;
    goto out;
  }
  env.run_ids = ids;
  size_t failed = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    if (ids[i] < 0) continue; /* --resume: ok already */
    sg_run_result_t res;
    int rc = sg_run_execute(&env, &x->runs[i], i, x->nruns, &res);
    if (rc == SG_EINTERRUPTED) {
      int sig = sg_run_signal();
      fprintf(stderr, "sgdlab run: interrupted (%s); run %lld marked interrupted, the runs not "
              "started stay pending (sgdlab run %s --resume runs them)\n",
              sig > 0 ? strsignal(sig) : "signal", (long long)res.run_id, config);
      code = 128 + (sig > 0 ? sig : SIGINT);
      goto out;
    }
    if (rc < 0) {
      fprintf(stderr, "sgdlab run: %s\n", sg_err_msg());
      code = 1;
      goto out;
    }
    if (!res.ok) {
      failed++;
      if (quiet) fprintf(stderr, "sgdlab run: run %lld failed: %s\n", (long long)res.run_id, res.error);
    }
  }
  if (!quiet)
    printf("experiment '%s' (id %lld): %zu run%s, %zu failed; results in %s\n", x->name,
           (long long)env.exp_id, todo, todo == 1 ? "" : "s", failed, db_path);
  code = failed ? 1 : 0;
out:
  sg_progress_destroy(&prog);
  sg_recorder_close(&db);
  sg_experiment_destroy(&x);
  free(ids);
  free(hosts_set);
  free(sets);
  return code;
}
