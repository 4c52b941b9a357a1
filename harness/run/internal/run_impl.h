/* run_impl.h - what the files of harness/run/ share: one run's state
 * while it is served (serve_t) and the functions each file gives the
 * others.  The files, by job:
 *   command.c    `sgdlab run`: arguments, planning rows, --resume
 *   execute.c    one run: row, sockets, spec, launch, record, clean up
 *   supervise.c  the poll loop, process exits, the watchdog, stopping
 *   mpirun.c     mpirun's own notices, ranks found dead under mpirun
 *   blame.c      the one-line reason and whom it names
 *   rows.c       records (from the records server) into rows
 * (run.h describes the behaviour.) */
#ifndef SG_RUN_IMPL_H
#define SG_RUN_IMPL_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "deadline.h"
#include "launch.h"
#include "records_server.h"
#include "run.h"
#include "run_cluster.h"
#include "rendezvous.h"
#include "simulate.h"
#include "transport_new.h"

enum { POLL_MS = 100 };
/* Silence watchdog (see run_watchdog()): the run fails when no rank has sent
 * any record for WATCHDOG_FACTOR x deadline once a step record has come,
 * and before that for deadline + SILENCE_MARGIN_S (start-up: data loading,
 * mpirun's launch). */
#define WATCHDOG_FACTOR SG_DL_WATCHDOG /* 1.5: past every engine's wait (deadline.h) */
#define SILENCE_MARGIN_S 30.0
#define EXIT_GRACE_S 30.0 /* after every rank's DONE, for their processes to exit */
#define SIM_WATCHDOG_RANKS 64 /* a simulated run's bounds scale with nprocs / this */
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


/* A simulated run's launch (simulated.c, simulate.h). */
typedef struct run_sim {
  sg_sim_cfg_t cfg;
  double step_s; /* compute modeled: one step's time, measured before launch */
  int cached;    /* step_s and the host speed came from the calibration cache */
  char platform[4200], hostfile[4200], tmpdir[4200], rank_bin[4096];
  char records[200]; /* file://DIR/rec (records.h) */
  char np[16], cfgs[16][96];
  const char *argv[32]; /* smpirun's, before the program (launch.h sim_argv) */
  double told;          /* sg_now() of the last progress line (run_sim_progress) */
} run_sim_t;

/* simulated.c: the platform and hostfile in dir, measured speeds,
 * smpirun's arguments; then what run_info says about it. */
int run_sim_prepare(run_sim_t *m, const sg_run_spec_t *run, const char *dir);
int run_sim_record(const run_sim_t *m, sg_recorder_t *db, int64_t run_id);

typedef struct rank_info {
  int hello, done, status, exited;
  int blamed, reason; /* from its failed DONE: the rank it blames (-1: none) and why */
  int dead; /* died, and the engine tolerates it (run_info dead_rank.R) */
  char role[16], host[64], msg[400];
  int pid;
  int kind; /* its sg_role_kind_t + 1 once looked up (rows.c), 0: not yet */
  int64_t last_step; /* step of its last step record, -1: none yet */
  double last_t;     /* sg_now() of its last record of any kind, 0: none */
  int state;         /* its process state when last read (scan_states), 0: gone,
                        -1: not known (another host, no pid yet) */
  double stopped_since; /* sg_now() when first seen stopped (state T/t), 0: not */
  int clocked, clocked_end; /* its clock.start / clock.end came (clock_sync.h) */
  double clk_off, clk_at;   /* the start's offset and its time on the rank */
} rank_info_t;

/* Where a run's wall time went (run_info time.*, see record_times). */
typedef struct run_times {
  double t0;            /* sg_wall() the ranks' t_start counts from */
  int nhello;
  double last_hello;    /* sg_now() when the last HELLO came */
  double first_step;    /* latest first-step start of a rank, seconds since t0; NAN: none */
  double last_step_end; /* latest step end on the ranks' clocks, seconds since t0 */
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
  sg_rec_server_t *rec; /* the records stream (checked records only) */
  /* mpirun launcher: its stderr, parsed and kept (see mpirun_read) */
  int err_fd;
  sg_mpirun_notice_t notice;
  char line[1024];
  size_t line_len;
  char agent[512];      /* sgdlab-nsexec's first refusal ("host ADDRESS: why"), or "" */
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
  int cause;            /* the rank whose failed DONE is the run's reason (root_cause), or -1 */
  run_times_t times;
  /* the loop's own state (run_serve, run_stop) */
  sg_rdv_t *rdv;        /* the rendezvous to serve, or NULL */
  int local;            /* launcher local: the ranks are our children */
  int err_open;         /* mpirun's stderr still open */
  int interrupted;      /* a signal stopped the run */
  double deadline;      /* the run's receive deadline, seconds */
  run_sim_t *sim;       /* a simulated run's launch, or NULL */
  /* a simulation's silence (run_watchdog): the simulator's CPU seconds at
   * the last record (sim_rec_at: that record's sg_now()), its last CPU
   * seconds read and when they last moved */
  double sim_rec_at, sim_cpu_at_rec, sim_cpu, sim_cpu_moved;
  double sim_disk_since; /* since when it waits on a disk (state D); 0 when not */
  int sim_pid; /* the process those were read from (sim_pid()) */
} serve_t;

/* simulated.c: every SIM_TELL_S of a simulated run, one line on stderr
 * (ranks started, steps reached, simulated time): a simulation of many
 * ranks may take minutes before its first step. */
void run_sim_progress(serve_t *s);

/* blame.c */
/* "rank 2 (worker, host, pid 123)", or "rank 2 (worker)" before its HELLO. */
void run_rank_name(const serve_t *s, int r, char *out, size_t cap);
/* Fail the run with this reason unless it failed already (the first cause wins). */
void run_fail(serve_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void run_root_cause(serve_t *s);
void run_note_culprit(serve_t *s);
void run_blame(serve_t *s);
int run_record_blame(const serve_t *s);

/* rows.c */
int run_drain(serve_t *s);
int run_drain_for(serve_t *s, double secs, int want_rank);

/* mpirun.c */
void run_fail_from_notice(serve_t *s);
int run_check_mpirun_ranks(serve_t *s);
void run_fail_from_suspect(serve_t *s);
int run_mpirun_read(serve_t *s);
void run_mpirun_read_to_eof(serve_t *s);

/* supervise.c */
void run_exit_text(int status, char *out, size_t cap);
void run_describe_exit(serve_t *s, const sg_exit_t *ex);
int run_tolerated_death(serve_t *s, const sg_exit_t *ex, int local);
void run_kill_leftovers(serve_t *s);
void run_kill_stopped(serve_t *s);
void run_watchdog(serve_t *s, double deadline);
void run_scan_states(serve_t *s, int now_too);
void run_stopped_check(serve_t *s, double deadline);
/* Serve until every process has exited or the run failed (then stop the
 * rest), and judge it: s->error is the reason, "" when ok. */
int run_serve(serve_t *s, double *reaped);

/* execute.c: the signal the handler saw (0: none) */
extern volatile sig_atomic_t sg_run_interrupted_;

#endif
