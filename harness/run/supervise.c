/* supervise.c - the poll loop of one run: records, rendezvous, mpirun's
 * stderr and process exits; the silence watchdog and stopped processes;
 * stopping what is left of a failed run (run.h). */
#include "run_impl.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "proc.h"

/* "killed by signal 9 (Killed)" / "exited with status 3" */
void run_exit_text(int status, char *out, size_t cap) {
  if (WIFSIGNALED(status))
    snprintf(out, cap, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(out, cap, "exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

void run_describe_exit(serve_t *s, const sg_exit_t *ex) {
  char who[160];
  if (ex->rank >= 0) {
    rank_info_t *ri = &s->ranks[ex->rank];
    if (!ri->pid) ri->pid = (int)ex->pid;
    ri->exited = 1;
    run_rank_name(s, ex->rank, who, sizeof who);
  } else {
    snprintf(who, sizeof who, "mpirun (pid %d)", (int)ex->pid);
  }
  if (WIFSIGNALED(ex->status)) {
    char how[96];
    run_exit_text(ex->status, how, sizeof how);
    run_fail(s, "%s: %s", who, how);
  } else if (WIFEXITED(ex->status) && WEXITSTATUS(ex->status) != 0) {
    if (ex->rank >= 0 && s->ranks[ex->rank].done && s->ranks[ex->rank].msg[0])
      run_fail(s, "%s: %s", who, s->ranks[ex->rank].msg);
    else if (ex->rank < 0) {
      run_mpirun_read(s); /* the agent's refusal, when that is why */
      if (s->agent[0]) {
        run_fail(s, "mpirun could not start its daemon on a cluster host: %s", s->agent);
        return;
      }
      /* mpirun: name the first rank that did not finish */
      for (int r = 0; r < s->nprocs; r++)
        if (!s->ranks[r].done || s->ranks[r].status) {
          char rn[160];
          run_rank_name(s, r, rn, sizeof rn);
          if (s->ranks[r].done && s->ranks[r].msg[0]) run_fail(s, "%s: %s", rn, s->ranks[r].msg);
          else run_fail(s, "%s: ended without reporting (mpirun exited with status %d)", rn,
                        WEXITSTATUS(ex->status));
          return;
        }
      run_fail(s, "%s: exited with status %d", who, WEXITSTATUS(ex->status));
    } else if (ex->rank >= 0 && WEXITSTATUS(ex->status) == 255 &&
               !strcmp(sg_opts_str_or(s->run->opts, "launcher", ""), "ssh")) /* the launcher */
      run_fail(s, "%s: its ssh ended with status 255 (the rank was killed by a signal, or ssh "
               "could not reach the host or log in)", who);
    else
      run_fail(s, "%s: exited with status %d", who, WEXITSTATUS(ex->status));
  }
}

/* A rank that died (no failed DONE): when the engine tolerates its death
 * (local launcher only), record it and let the run go on; returns 1 then. */
int run_tolerated_death(serve_t *s, const sg_exit_t *ex, int local) {
  const sg_engine_t *e = s->run->engine;
  rank_info_t *ri = &s->ranks[ex->rank];
  if (!local || !e->tolerates_exit || (ri->done && ri->status) ||
      !e->tolerates_exit(s->run->opts, s->run->workers, ex->rank))
    return 0;
  char who[160], how[96], key[32], text[300];
  if (!ri->pid) ri->pid = (int)ex->pid;
  ri->exited = 1;
  ri->dead = 1;
  run_rank_name(s, ex->rank, who, sizeof who);
  run_exit_text(ex->status, how, sizeof how);
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
void run_kill_leftovers(serve_t *s) {
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
void run_kill_stopped(serve_t *s) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (ri->hello && ri->pid > 0 && !strcmp(ri->host, host) && sg_proc_stopped(ri->pid))
      sg_launch_signal(s->launch, ri->pid, SIGKILL); /* only a process of this run */
  }
}

/* CPU seconds (user + system) process pid has used, -1 when it is gone;
 * its state letter into *state (0 when gone), from the same read. */
static double proc_cpu_s(int pid, int *state) {
  char buf[1024];
  const char *st = sg_proc_stat(pid, buf, sizeof buf);
  *state = st ? st[0] : 0;
  const char *u = sg_proc_field(st, 14), *k = sg_proc_field(st, 15);
  long tick = sysconf(_SC_CLK_TCK);
  if (!u || !k || tick <= 0) return -1;
  return (strtod(u, NULL) + strtod(k, NULL)) / (double)tick;
}

/* The simulator's pid: the one the ranks' HELLO gave, else (start-up,
 * before any HELLO) smpirun's first child, smpimain; 0 when neither. */
static int sim_pid(serve_t *s) {
  for (int r = 0; r < s->nprocs; r++)
    if (s->ranks[r].hello && s->ranks[r].pid > 0) return s->ranks[r].pid;
  int l = (int)sg_launch_pid(s->launch, 0), c = 0;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", l, l);
  FILE *f = l > 0 ? fopen(path, "r") : NULL;
  if (f && fscanf(f, "%d", &c) != 1) c = 0;
  if (f) fclose(f);
  return c;
}

/* A simulation's silence.  Every rank is an actor of one simulator
 * process, which computes every rank's step in turn: its wall time per
 * simulated step grows with the simulated work (ranks, messages, bytes
 * copied) and with the host's load, and a slow host is not a hang.  SMPI
 * itself ends a simulation whose ranks all block (a deadlock); what is left
 * to catch is a simulator that works without any rank recording (its CPU
 * time grows) or one blocked outside the simulation (its CPU time stands).
 * So the silence is the simulator's CPU time since the last record, or the
 * wall time since it was last seen runnable, waiting on a disk (state D,
 * for at most SILENCE_MARGIN_S: a loaded disk, not a hang) or its CPU time
 * moved, whichever is longer (and never more than the wall time since the
 * last record); the wall time alone while the simulator's pid is not known
 * (sim_pid), and once the simulator has ended (gone, or a zombie smpirun
 * has not reaped yet), the wall time less SILENCE_MARGIN_S for smpirun's
 * own exit (its clean-up). */
static double sim_quiet(serve_t *s, double now, double quiet_wall, int *by_cpu) {
  int pid = sim_pid(s);
  int state = 0;
  double cpu = pid > 0 ? proc_cpu_s(pid, &state) : -1;
  *by_cpu = 0;
  if (state == 'Z' || state == 'X') cpu = -1; /* it has ended, not yet reaped */
  if (cpu >= 0 && pid != s->sim_pid) /* a new process: count from now */
    s->sim_pid = pid, s->sim_rec_at = s->last_rec, s->sim_cpu_at_rec = s->sim_cpu = cpu,
    s->sim_cpu_moved = now, s->sim_disk_since = 0;
  if (cpu < 0 && s->sim_cpu_moved > 0) /* it has ended: smpirun's own exit is left */
    return fmin(quiet_wall, now - s->sim_cpu_moved - SILENCE_MARGIN_S);
  if (cpu < 0) return quiet_wall;
  if (s->sim_rec_at != s->last_rec) s->sim_rec_at = s->last_rec, s->sim_cpu_at_rec = cpu;
  if (state != 'D') s->sim_disk_since = 0;
  else if (!s->sim_disk_since) s->sim_disk_since = now;
  int disk = state == 'D' && now - s->sim_disk_since <= SILENCE_MARGIN_S;
  /* runnable ('R', also while it waits for a core or its CPU quota) is not blocked */
  if (cpu != s->sim_cpu || s->sim_cpu_moved <= 0 || state == 'R' || disk)
    s->sim_cpu = cpu, s->sim_cpu_moved = now;
  double busy = cpu - s->sim_cpu_at_rec, idle = now - s->sim_cpu_moved;
  *by_cpu = busy >= idle;
  return fmin(quiet_wall, fmax(busy, idle));
}

/* Every rank has said DONE: the run's records are all in, and what is
 * left is its processes' exit (MPI_Finalize, a simulator unmapping its
 * ranks' memory, smpirun's or mpirun's clean-up), which waits on the disk
 * and the host's load, not on the ranks; so no silence bound, but a bound
 * of its own, EXIT_GRACE_S (or the silence bound, when longer).  Before
 * it, a simulator's exit (state D, under a loaded disk for 0.2 s) failed
 * a run with a bound of 0.15 s as "no rank reported". */
static int run_rank_pid(serve_t *s, int r);
static void exit_watchdog(serve_t *s, double deadline) {
  double grace = fmax(EXIT_GRACE_S, WATCHDOG_FACTOR * deadline), after = sg_now() - s->last_rec;
  if (s->error[0] || after <= grace) return;
  char ws[32], gs[32], who[200] = "their processes have not all exited";
  for (int r = 0; r < s->nprocs; r++) { /* the first rank whose process is still there */
    int pid = run_rank_pid(s, r), st = pid > 0 ? sg_proc_state(pid) : 0;
    if (pid <= 0 || !st || st == 'Z' || st == 'X') continue;
    if (s->sim) snprintf(who, sizeof who, "the simulator (pid %d) has not exited", pid);
    else run_rank_name(s, r, who, sizeof who - 20), strcat(who, " has not exited");
    break;
  }
  s->hung = 1;
  run_fail(s, "every rank reported that it finished, but %s %s s later (bound %s s)", who,
           sg_fmt_secs(ws, after), sg_fmt_secs(gs, grace));
}

/* The silence watchdog, the only guard against a rank that hangs inside a
 * call without a deadline (MPI_Allreduce of `allreduce native`): every
 * rank of a training run sends a step record every step, so silence from
 * ALL ranks for WATCHDOG_FACTOR x deadline means the run hangs.  Armed
 * (that tight) from the first step record on; before it, start-up gets
 * deadline + SILENCE_MARGIN_S.  Why 1.5: the engines' own receives give up
 * after 1..1.35 deadlines on a dead peer and report it (the better
 * message; the rule is in core/deadline.h), and a step, or the evaluation between two steps, takes far
 * less than a deadline.  Once every rank has said DONE, exit_watchdog()
 * bounds the rest.  A simulation's silence is counted in the
 * simulator's CPU time (sim_quiet).  The error lists every rank's last step record
 * and which rank has been silent longest (a stopped or dead process of
 * this host is named before it, see run_blame()):
 *   "no rank reported for 45.0 s (1.5 x deadline 30 s); last records:
 *    rank 0 step 120, rank 1 step 120, rank 2 step 97 (silent longest)" */
void run_watchdog(serve_t *s, double deadline) {
  if (s->nprocs > 0 && s->ndone >= s->nprocs) {
    exit_watchdog(s, deadline);
    return;
  }
  double now = sg_now(), quiet = now - s->last_rec;
  double limit = s->armed ? WATCHDOG_FACTOR * deadline : deadline + SILENCE_MARGIN_S;
  int by_cpu = 0;
  /* a simulation computes every rank's step in this one process: its
   * silences grow with the ranks (SIM_WATCHDOG_RANKS per bound) */
  if (s->sim && s->nprocs > SIM_WATCHDOG_RANKS) limit *= (double)s->nprocs / SIM_WATCHDOG_RANKS;
  if (s->sim) quiet = sim_quiet(s, now, quiet, &by_cpu);
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
  run_fail(s, "no rank reported for %.1f s%s (%s); last records: %s", quiet,
           by_cpu ? " of the simulator's CPU time" : "", bound, list);
}

/* The pid of rank r's process on this host that this run started: the
 * local launcher's child, or (mpirun) the pid the rank sent in HELLO when
 * it descends from our mpirun; 0 when there is none to look at. */
static int run_rank_pid(serve_t *s, int r) {
  rank_info_t *ri = &s->ranks[r];
  const char *launcher = sg_opts_str_or(s->run->opts, "launcher", "local"); /* the launcher, not an engine */
  if (!strcmp(launcher, "slurm") || !strcmp(launcher, "ssh")) /* the launcher, not an engine */
    return 0; /* slurmstepd's children, or on another host: not ours to look at */
  if (strcmp(launcher, "mpirun")) /* not an engine: the launcher */
    return (int)sg_launch_pid(s->launch, r);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  if (!ri->hello || ri->pid <= 0 || strcmp(ri->host, host)) return 0;
  return sg_launch_owns(s->launch, ri->pid) ? ri->pid : 0;
}

/* Read the process state of every rank still expected to report
 * (rank_info_t.state, .stopped_since); at most every SCAN_S unless
 * `now_too`. */
void run_scan_states(serve_t *s, int now_too) {
  double now = sg_now();
  if (!now_too && now - s->scanned < SCAN_S) return;
  s->scanned = now;
  int last_pid = 0, last_state = -1; /* a simulation's ranks share one process */
  for (int r = 0; r < s->nprocs; r++) {
    rank_info_t *ri = &s->ranks[r];
    int pid = ri->done || ri->exited || ri->dead ? 0 : run_rank_pid(s, r);
    if (pid > 0 && pid != last_pid) last_state = sg_proc_state(last_pid = pid);
    ri->state = pid > 0 ? last_state : -1;
    int stopped = ri->state == 'T' || ri->state == 't';
    if (!stopped) ri->stopped_since = 0;
    else if (!ri->stopped_since) ri->stopped_since = now;
  }
}

/* A stopped process never ends by itself and may be one that nobody
 * waits on (a worker async ps has declared dead and goes on without): a
 * rank of this host stopped for WATCHDOG_FACTOR x deadline fails the run.
 * Peers that wait on it report first (after 1..1.35 deadlines). */
void run_stopped_check(serve_t *s, double deadline) {
  if (s->error[0]) return;
  run_scan_states(s, 0);
  double now = sg_now();
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    if (!ri->stopped_since || now - ri->stopped_since <= WATCHDOG_FACTOR * deadline) continue;
    char who[160], ws[32];
    run_rank_name(s, r, who, sizeof who);
    run_fail(s, "%s is stopped (state %c) for %s s (%.1f x deadline %g s)", who, ri->state,
             sg_fmt_secs(ws, now - ri->stopped_since), WATCHDOG_FACTOR, deadline);
    return;
  }
}

/* Every exit the launcher reports: a rank that failed usually said why in
 * DONE just before exiting; mpirun's last words name the rank that ended
 * the job. */
static int on_exits(serve_t *s) {
  sg_exit_t ex;
  while (sg_launch_poll(s->launch, &ex)) {
    int bad = !WIFEXITED(ex.status) || WEXITSTATUS(ex.status) != 0;
    if (bad && ex.rank >= 0) SG_CHECK(run_drain_for(s, DRAIN_S, ex.rank));
    if (ex.rank < 0) {
      run_mpirun_read_to_eof(s);
      s->err_open = 0;
      if (bad) SG_CHECK(run_drain_for(s, DRAIN_S, -1));
      run_fail_from_notice(s);
      run_fail_from_suspect(s);
    }
    if (bad && ex.rank >= 0 && run_tolerated_death(s, &ex, s->local)) continue;
    run_describe_exit(s, &ex);
  }
  return SG_OK;
}

/* One turn of the loop: wait up to POLL_MS, then handle what came. */
static int serve_once(serve_t *s) {
  sg_rec_server_wait(s->rec, s->err_open ? s->err_fd : -1, s->rdv ? sg_rdv_socket(s->rdv) : NULL,
                     POLL_MS);
  SG_CHECK(run_drain(s));
  if (s->rdv) SG_CHECK(sg_rdv_handle(s->rdv));
  if (s->err_open && run_mpirun_read(s)) s->err_open = 0;
  SG_CHECK(on_exits(s));
  if (!s->local && !s->error[0]) {
    SG_CHECK(run_check_mpirun_ranks(s));
    const sg_mpirun_notice_t *n = &s->notice;
    /* a rank that exited (not killed) may have sent its DONE, with the
     * peer it blames, just before: srun's line about it can come first */
    if (n->rank >= 0 && n->rank < s->nprocs && n->signal <= 0 && !s->ranks[n->rank].done)
      SG_CHECK(run_drain_for(s, DRAIN_S, n->rank));
    run_fail_from_notice(s);
    if (s->suspect >= 0 && sg_now() - s->suspect_t > NOTICE_WAIT_S) run_fail_from_suspect(s);
  }
  SG_CHECK(sg_recorder_tick(s->env->db));
  run_watchdog(s, s->deadline);
  run_stopped_check(s, s->deadline);
  if (s->sim) run_sim_progress(s);
  if (s->error[0]) {
    run_note_culprit(s); /* before anything is stopped */
    run_kill_stopped(s); /* the run is over: do not let mpirun wait on it */
  }
  return SG_OK;
}

/* Under srun (launcher slurm): how long a failed run waits for srun to
 * end its step itself (--kill-on-bad-exit, which reaches every live node
 * at once) before it is signalled, and srun's grace between SIGTERM and
 * SIGKILL.  srun waits on every node of the step, also one that is lost,
 * until Slurm declares the node down (SlurmdTimeout, minutes): past the
 * blame nothing it could say matters, and the ranks on live nodes end
 * anyway (srun's kill, their records connection closing with the
 * harness, the allocation's end). */
#define SRUN_ABORT_S 1.0
#define SRUN_GRACE_S 0.5

/* Wait up to wait_s for mpirun (srun) to end the job itself, reading its
 * stderr; then signal what is left (SIGTERM, SIGKILL after grace_s), and
 * read the rest of its stderr once it has exited.  Measured with a node
 * lost under srun (deadline 5 s): 3 s of waiting, 1 s for the stderr of a
 * srun still running and 2 s of grace made the harness end 11.7 s after
 * the kill; with 1 s, no early read and 0.5 s, under 2 deadlines. */
static void stop_launcher(serve_t *s, double wait_s, double grace_s) {
  double t0 = sg_now(), until = t0 + wait_s, t_sig = 0;
  sg_exit_t ex;
  int by_itself = 0;
  while (sg_launch_alive(s->launch) && sg_now() < until) {
    if (s->err_open && run_mpirun_read(s)) s->err_open = 0;
    if (sg_launch_poll(s->launch, &ex)) {
      by_itself = 1;
      break;
    }
    struct pollfd pf = {.fd = s->err_fd, .events = POLLIN};
    poll(&pf, s->err_open ? 1 : 0, 20);
  }
  if (sg_launch_alive(s->launch)) t_sig = sg_now();
  sg_launch_stop(s->launch, grace_s);
  run_mpirun_read_to_eof(s); /* it has exited now: no wait on a live writer */
  if (s->env->verbose) /* where a failed run's end goes */
    fprintf(stderr, "sgdlab: run %lld: stop from monotonic %.3f s: launcher %s after %.2f s%s; "
            "all reaped at +%.2f s\n", (long long)s->run_id, t0, by_itself ? "ended the job itself" : "signalled",
            (t_sig ? t_sig : sg_now()) - t0, t_sig ? " (SIGTERM, then SIGKILL after the grace)" : "",
            sg_now() - t0);
}

/* A failed run: let mpirun abort its job itself first (it reaches every
 * host), then signal what is left; keep the end of mpirun's stderr. */
static int stop_failed(serve_t *s) {
  run_kill_stopped(s);
  int srun = !strcmp(sg_opts_str_or(s->run->opts, "launcher", ""), "slurm"); /* the launcher */
  if (!s->local && !s->interrupted && !s->hung)
    stop_launcher(s, srun ? SRUN_ABORT_S : MPIRUN_ABORT_S, srun ? SRUN_GRACE_S : STOP_GRACE_S);
  else
    sg_launch_stop(s->launch, STOP_GRACE_S);
  run_kill_leftovers(s);
  if (s->tail_len) SG_CHECK(sg_recorder_info(s->env->db, s->run_id, "mpirun_stderr", s->tail));
  return SG_OK;
}

/* Every process is gone: the last records, then the reason. */
static int judge(serve_t *s) {
  SG_CHECK(run_drain_for(s, s->error[0] ? 0 : DRAIN_S, -1));
  run_root_cause(s);
  run_blame(s);
  for (int r = 0; r < s->nprocs && !s->error[0]; r++)
    if (!s->ranks[r].done && !s->ranks[r].dead) {
      char who[160];
      run_rank_name(s, r, who, sizeof who);
      run_fail(s, "%s: exited without reporting that it finished", who);
    }
  if (sg_run_interrupted_ && !s->error[0]) {
    s->interrupted = 1;
    run_fail(s, "interrupted");
  }
  return SG_OK;
}

int run_serve(serve_t *s, double *reaped) {
  while (sg_launch_alive(s->launch) && (!s->error[0] || sg_now() < s->settle_until)) {
    if (sg_run_interrupted_) {
      s->interrupted = 1;
      run_fail(s, "interrupted");
      break;
    }
    SG_CHECK(serve_once(s));
  }
  if (s->error[0]) SG_CHECK(stop_failed(s));
  *reaped = sg_now();
  return judge(s);
}
