/* test_run_cli.c - the real `sgdlab` binary: configuration errors (exit 2,
 * one line, nothing launched), real runs of the `local` engine on
 * Fashion-MNIST recorded in SQLite, determinism, and a rank killed with
 * SIGKILL mid-run / the harness interrupted with SIGINT.
 *
 * Faults and process handling:
 *  - Open MPI 4.1's messages parsed into the rank that ended the job;
 *  - under mpirun, a rank killed with SIGKILL: the run's error names that
 *    rank (role, host, pid) and the signal, sgdlab exits 1 within 10 s,
 *    and no rank nor mpirun is left;
 *  - a rank stopped with SIGSTOP (a silent peer) under the local launcher:
 *    the run fails within two deadlines, its error names the stopped rank
 *    first ("is stopped (state T)") and then gives the message of the rank
 *    that noticed (naming the stopped one), and the stopped process is
 *    killed;
 *  - async ps rides out a worker killed mid-run (run ok, run_info
 *    dead_rank.R), where sync ps fails: the engine's tolerates_exit. */
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "launch.h"
#include "run_util.h"
#include "test.h"

/* ---- configuration errors ---------------------------------------------- */

static const struct {
  const char *text, *set, *want; /* want: stderr after "<file>" */
} BAD[] = {
    {"name: t\nworkload:\n  model: mlp\n  momentun: 0.9\nengines: [local]\n", NULL,
     ":4:3: momentun: unknown key; did you mean 'momentum'?\n"},
    {"name: t\nworkload: {btch: 64}\nengines: [local]\n", NULL,
     ":2:12: btch: unknown key; did you mean 'batch'?\n"},
    {"name: t\nworkers: four\nengines: [local]\n", NULL,
     ":2:10: workers: expected an integer, got 'four'\n"},
    {"name: t\nworkload:\n  momentum: 2\nengines: [local]\n", NULL,
     ":3:13: momentum: must be <= 0.9999\n"},
    {"name: t\nengines:\n  - local\n  - paramserver\n", NULL,
     ":4:5: engine: unknown engine 'paramserver' (known: %s)\n"},
    {"name: t\nworkload:\n  lr: 0.1\n  lr: 0.2\nengines: [local]\n", NULL,
     ":4:3: lr: duplicate key (first set at line 3)\n"},
    {"name: t\nengines: [local]\n", "batch=-1", NULL},
};

TEST(config_errors_exit_2_with_one_line_and_launch_nothing) {
  char dir[64], cfg[128], db[128], err[4096], want[1024];
  ru_mkdtemp(dir, sizeof dir, "cli");
  CHECK(dir[0]);
  snprintf(cfg, sizeof cfg, "%s/bad.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  for (size_t i = 0; i < sizeof BAD / sizeof BAD[0]; i++) {
    ru_write_file(cfg, BAD[i].text);
    char *argv[] = {NULL, "run", cfg, "--db", db, BAD[i].set ? "--set" : NULL,
                    (char *)BAD[i].set, NULL};
    int code = ru_run(argv, 0, NULL, err, sizeof err);
    CHECK_MSG(code == 2, "case %zu: exit %d, stderr %s", i, code, err);
    if (BAD[i].want) {
      snprintf(want, sizeof want, "%s", cfg);
      size_t l = strlen(want);
      snprintf(want + l, sizeof want - l, BAD[i].want, ru_known_engines());
    }
    else snprintf(want, sizeof want, "--set %s: batch: must be >= 1\n", BAD[i].set);
    CHECK_MSG(!strcmp(err, want), "case %zu: got '%s' want '%s'", i, err, want);
    struct stat sb;
    CHECK_MSG(stat(db, &sb) < 0, "case %zu: the database was created", i);
  }
  ru_rm_rf(dir);
}

TEST(unwritable_db_is_one_line_before_launch) {
  char dir[64], cfg[128], err[4096];
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(cfg, sizeof cfg, "%s/ok.yaml", dir);
  ru_write_file(cfg, "name: t\nworkload: {max_steps: 5}\nengines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", "/etc/passwd/x.db", NULL};
  int code = ru_run(argv, 0, NULL, err, sizeof err);
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(err, "/etc/passwd/x.db");
  char *nl = strchr(err, '\n');
  CHECK_MSG(nl && nl[1] == '\0', "more than one line: %s", err);
  ru_rm_rf(dir);
}

/* ---- real runs ----------------------------------------------------------- */

TEST(local_run_is_recorded_and_repeats_are_bitwise_identical) {
  char dir[64], cfg[128], db[128], err[8192], txt[512];
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(cfg, sizeof cfg, "%s/tiny.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  ru_write_file(cfg, "name: tiny\nrepeat: 2\n"
                  "workload: {dataset: fashion-mnist, model: mlp, hidden: [32], batch: 32,\n"
                  "           lr: 0.1, momentum: 0.9, max_steps: 40, eval_every: 20, seed: 3}\n"
                  "engines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL};
  int code = ru_run(argv, 0, NULL, err, sizeof err);
  CHECK_MSG(code == 0, "exit %d: %s", code, err);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status='ok' AND error IS NULL "
                         "AND wall_s > 0 AND finished_at IS NOT NULL"), 2);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=1"), 40);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=2"), 40);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE loss IS NULL OR loss <= 0"), 0);
  /* evaluations at steps 0, 20, 40 */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM evals WHERE run_id=1"), 3);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM evals WHERE run_id=1 AND test_acc > 0.5 AND step=40"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM ranks WHERE run_id=1 AND rank=0 AND role='worker' AND pid > 0"), 1);
  ru_db_text_into(db, "SELECT value FROM run_info WHERE run_id=1 AND key='blas'", txt, sizeof txt);
  CHECK_STR_CONTAINS(txt, "OpenBLAS");
  ru_db_text_into(db, "SELECT name || '|' || config_text FROM experiments", txt, sizeof txt);
  CHECK_STR_CONTAINS(txt, "tiny|name: tiny");
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE repeat=1 AND seed=3 AND engine='local' "
                         "AND options_json LIKE '%\"max_steps\":40%'"), 1);
  /* same seed: the same loss sequence, bit for bit */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps a JOIN steps b ON a.step=b.step "
                         "WHERE a.run_id=1 AND b.run_id=2 AND a.loss = b.loss"), 40);
  ru_rm_rf(dir);
}

/* Start a long local run and wait until the database shows some steps;
 * returns the harness pid and the rank's pid. */
static int start_long_run_seeds(const char *dir, char *db, size_t dbcap, pid_t *harness,
                                int *rank_pid, const char *seeds) {
  char cfg[128], errpath[128], text[512];
  snprintf(cfg, sizeof cfg, "%s/long.yaml", dir);
  snprintf(db, dbcap, "%s/r.db", dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", dir);
  snprintf(text, sizeof text, "name: long\n"
           "workload: {model: mlp, hidden: [64], batch: 16, epochs: 100, eval_every: 100000,\n"
           "  seed: %s}\nengines: [local]\n", seeds);
  ru_write_file(cfg, text);
  char *argv[] = {NULL, "run", cfg, "--db", (char *)db, NULL};
  *harness = ru_start(argv, errpath, 0, NULL);
  *rank_pid = 0;
  if (ru_db_wait(db, "SELECT (SELECT count(*) FROM steps) >= 5 AND "
                     "(SELECT pid FROM ranks WHERE run_id=1 AND rank=0) > 0",
                 1, 60, *harness, NULL) < 0)
    return -1;
  *rank_pid = (int)ru_db_int(db, "SELECT pid FROM ranks WHERE run_id=1 AND rank=0");
  return *rank_pid > 0 ? 0 : -1;
}

static int start_long_run(const char *dir, char *db, size_t dbcap, pid_t *harness, int *rank_pid) {
  return start_long_run_seeds(dir, db, dbcap, harness, rank_pid, "1");
}

TEST(rank_killed_with_sigkill_fails_the_run_quickly) {
  char dir[64], db[128], err[512], want[128];
  ru_mkdtemp(dir, sizeof dir, "cli");
  pid_t h;
  int rp;
  CHECK_MSG(start_long_run(dir, db, sizeof db, &h, &rp) == 0, "no steps recorded within 60 s");
  long long before = ru_db_int(db, "SELECT count(*) FROM steps");
  CHECK_MSG(before >= 5, "%lld steps recorded before the kill", before);
  CHECK(kill(rp, SIGKILL) == 0);
  int code = ru_wait_exit_code(h, 10.0);
  CHECK_MSG(code == 1, "harness exit %d (-1: still running 10 s after the kill)", code);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  snprintf(want, sizeof want, "failed: rank 0 (worker, ");
  CHECK_STR_CONTAINS(err, want);
  snprintf(want, sizeof want, "pid %d): killed by signal 9", rp);
  CHECK_STR_CONTAINS(err, want);
  /* the failed run keeps the steps it recorded */
  CHECK(ru_db_int(db, "SELECT count(*) FROM steps") >= before);
  CHECK(kill(rp, 0) < 0 && errno == ESRCH);
  ru_rm_rf(dir);
}

TEST(sigint_interrupts_the_run) {
  char dir[64], db[128], err[512];
  ru_mkdtemp(dir, sizeof dir, "cli");
  pid_t h;
  int rp;
  CHECK_MSG(start_long_run(dir, db, sizeof db, &h, &rp) == 0, "no steps recorded within 60 s");
  CHECK(kill(h, SIGINT) == 0);
  int code = ru_wait_exit_code(h, 10.0);
  CHECK_EQ_INT(code, 130);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  CHECK_MSG(!strcmp(err, "interrupted: interrupted"), "%s", err);
  CHECK(kill(rp, 0) < 0 && errno == ESRCH);
  ru_rm_rf(dir);
}

/* SIGTERM in the first run of a 3-run sweep: exit 143 (128 + 15), the run
 * interrupted with its steps, the two never started recorded as pending. */
TEST(sigterm_leaves_the_sweep_interrupted_and_pending) {
  char dir[64], db[128];
  ru_mkdtemp(dir, sizeof dir, "cli");
  pid_t h;
  int rp;
  CHECK_MSG(start_long_run_seeds(dir, db, sizeof db, &h, &rp, "[1, 2, 3]") == 0,
            "no steps recorded within 60 s");
  long long before = ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=1");
  CHECK(kill(h, SIGTERM) == 0);
  CHECK_EQ_INT(ru_wait_exit_code(h, 10.0), 143);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs"), 3);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE id=1 AND status='interrupted'"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE id>1 AND status='pending' AND "
                         "started_at IS NULL"), 2);
  CHECK(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=1") >= before);
  CHECK(before >= 5);
  ru_rm_rf(dir);
}

/* --resume runs only what is not ok, in the same experiment and rows; an
 * edited file (another text) has nothing to resume. */
TEST(resume_runs_only_the_runs_not_ok) {
  char dir[64], cfg[128], db[128], out[8192];
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(cfg, sizeof cfg, "%s/r.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  const char *text = "name: res\nworkload: {dataset: synthetic, features: 8, train_samples: 256,"
                     " test_samples: 64, model: softmax, batch: 16, max_steps: 4,"
                     " seed: [1, 2, 3]}\nengines: [local]\n";
  ru_write_file(cfg, text);
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL, NULL};
  int code = ru_run(argv, 1, NULL, out, sizeof out);
  CHECK_MSG(code == 0, "exit %d: %s", code, out);
  char *t1 = ru_db_text(db, "SELECT started_at FROM runs WHERE id=1");
  /* as an interrupted sweep leaves it: run 2 interrupted, run 3 pending */
  sqlite3 *h = NULL;
  CHECK(sqlite3_open(db, &h) == SQLITE_OK);
  CHECK(sqlite3_exec(h, "UPDATE runs SET status='interrupted' WHERE id=2; "
                        "UPDATE runs SET status='pending', started_at=NULL WHERE id=3; "
                        "DELETE FROM steps WHERE run_id=3", NULL, NULL, NULL) == SQLITE_OK);
  sqlite3_close(h);
  argv[5] = "--resume";
  code = ru_run(argv, 1, NULL, out, sizeof out);
  CHECK_MSG(code == 0, "exit %d: %s", code, out);
  CHECK_STR_CONTAINS(out, "resuming experiment 'res' (id 1): 2 of 3 runs to do");
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM experiments"), 1);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs"), 3);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status='ok'"), 3);
  char *t1b = ru_db_text(db, "SELECT started_at FROM runs WHERE id=1");
  CHECK_MSG(t1 && t1b && !strcmp(t1, t1b), "run 1 (ok) was run again: %s / %s", t1, t1b);
  /* the resumed runs' steps once each, not the interrupted attempt's too */
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=2"), 4);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=3"), 4);
  free(t1);
  free(t1b);
  /* show rounds the run's seconds: "wall_s  0.123", not 17 digits */
  char *show[] = {NULL, "show", "2", "--db", db, NULL};
  code = ru_run(show, 1, NULL, out, sizeof out);
  CHECK_MSG(code == 0, "show: exit %d: %s", code, out);
  const char *w = strstr(out, "\n  wall_s ");
  double secs = -1;
  int chars = 0;
  CHECK_MSG(w && sscanf(w + 10, " %lf%n", &secs, &chars) == 1 && secs > 0, "%s", out);
  const char *dot = w ? strchr(w + 10, '.') : NULL;
  CHECK_MSG(dot && strspn(dot + 1, "0123456789") == 3, "wall_s not rounded to ms: %.40s", w);
  /* all ok: nothing to do */
  code = ru_run(argv, 1, NULL, out, sizeof out);
  CHECK_MSG(code == 0, "exit %d: %s", code, out);
  CHECK_STR_CONTAINS(out, "0 of 3 runs to do");
  /* another text: refused, exit 2 */
  ru_write_file(cfg, "# edited\n");
  FILE *f = fopen(cfg, "a");
  fputs(text, f);
  fclose(f);
  code = ru_run(argv, 1, NULL, out, sizeof out);
  CHECK_EQ_INT(code, 2);
  CHECK_STR_CONTAINS(out, "--resume: no experiment 'res' with this experiment file's text");
  ru_rm_rf(dir);
}

TEST(mpirun_launcher_runs_ranks) {
  char dir[64], cfg[128], db[128], err[8192];
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(cfg, sizeof cfg, "%s/mpi.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  ru_write_file(cfg, "name: mpi\nworkers: 2\ntransport: mpi\n"
                  "workload: {hidden: [16], batch: 16, max_steps: 10, eval_every: 10}\n"
                  "engines: [local, {engine: allreduce, algorithm: ring}]\n");
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL};
  int code = ru_run(argv, 0, NULL, err, sizeof err);
  CHECK_MSG(code == 0, "exit %d: %s", code, err);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM runs WHERE status='ok' AND launcher='mpirun' "
                         "AND transport='mpi'"), 2);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM ranks WHERE run_id=2"), 2);
  CHECK_EQ_INT(ru_db_int(db, "SELECT count(*) FROM steps WHERE run_id=2"), 20);
  ru_rm_rf(dir);
}

/* ---- faults and process handling ---------------------------------------- */

TEST(mpirun_notices_name_the_rank) {
  sg_mpirun_notice_t n;
  /* killed by a signal (Open MPI often prints PID 0) */
  sg_mpirun_notice_init(&n);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "Primary job  terminated normally, but 1 process returned"), 0);
  CHECK_EQ_INT(n.rank, -1);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "mpirun noticed that process rank 2 with PID 12345 on node vm "
                                         "exited on signal 9 (Killed)."), 1);
  CHECK_EQ_INT(n.rank, 2);
  CHECK_EQ_INT(n.pid, 12345);
  CHECK_EQ_INT(n.signal, 9);
  /* the first notice wins */
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "mpirun noticed that process rank 0 with PID 0 on node vm "
                                         "exited on signal 15 (Terminated)."), 0);
  CHECK_EQ_INT(n.rank, 2);
  /* non-zero exit: two lines */
  sg_mpirun_notice_init(&n);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "  Process name: [[20388,1],1]"), 0);
  CHECK_EQ_INT(n.rank, -1);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "  Exit code:    3"), 1);
  CHECK_EQ_INT(n.rank, 1);
  CHECK_EQ_INT(n.exit_code, 3);
  CHECK_EQ_INT(n.signal, 0);
  /* an exit code without its process name says nothing */
  sg_mpirun_notice_init(&n);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "  Exit code:    3"), 0);
  CHECK_EQ_INT(n.rank, -1);
  /* exit without MPI_Finalize */
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "mpirun has exited due to process rank 3 with PID 0 on"), 1);
  CHECK_EQ_INT(n.rank, 3);
  CHECK(n.improper);
  /* srun: the task's own line; a range of tasks names no one */
  sg_mpirun_notice_init(&n);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "srun: error: h1: tasks 0,3: Terminated"), 0);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "srun: error: h1: task 1-3: Terminated"), 0);
  CHECK_EQ_INT(n.rank, -1);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "srun: error: h2: task 2: Killed"), 1);
  CHECK_EQ_INT(n.rank, 2);
  CHECK_EQ_INT(n.signal, 9);
  sg_mpirun_notice_init(&n);
  CHECK_EQ_INT(sg_mpirun_notice_line(&n, "srun: error: h3: task 3: Exited with exit code 4"), 1);
  CHECK_EQ_INT(n.rank, 3);
  CHECK_EQ_INT(n.exit_code, 4);
}

/* Start `sgdlab run` on the config text and wait until every one of the
 * run's nprocs ranks has said hello and rank `rank` has recorded steps;
 * the ranks' pids go to pids[]. */
static int start_run_until_steps(const char *dir, const char *text, int nprocs, int rank, char *db,
                                 size_t dbcap, pid_t *harness, int *pids) {
  char cfg[128], errpath[128], sql[256];
  snprintf(cfg, sizeof cfg, "%s/run.yaml", dir);
  snprintf(db, dbcap, "%s/r.db", dir);
  snprintf(errpath, sizeof errpath, "%s/stderr", dir);
  ru_write_file(cfg, text);
  char *argv[] = {NULL, "run", cfg, "--db", (char *)db, NULL};
  *harness = ru_start(argv, errpath, 0, NULL);
  snprintf(sql, sizeof sql,
           "SELECT (SELECT count(*) FROM ranks WHERE pid > 0) = %d AND "
           "(SELECT count(*) FROM steps WHERE rank=%d) >= 5",
           nprocs, rank);
  if (ru_db_wait(db, sql, 1, 60, *harness, NULL) < 0) return -1;
  for (int r = 0; r < nprocs; r++) {
    char q[96];
    snprintf(q, sizeof q, "SELECT pid FROM ranks WHERE run_id=1 AND rank=%d", r);
    pids[r] = (int)ru_db_int(db, q);
  }
  return 0;
}

TEST(mpirun_rank_killed_is_named_and_nothing_is_left) {
  char dir[64], db[128], err[1024], want[160];
  int pids[3];
  pid_t h;
  ru_mkdtemp(dir, sizeof dir, "cli");
  CHECK_MSG(start_run_until_steps(dir,
                                  "name: mpikill\nworkers: 3\ntransport: mpi\ndeadline: 5\n"
                                  "workload: {hidden: [16], batch: 16, epochs: 100, eval_every: 100000}\n"
                                  "engines: [{engine: allreduce, algorithm: ring}]\n",
                                  3, 2, db, sizeof db, &h, pids) == 0,
            "the mpirun run did not get going within 60 s");
  int mpirun = ru_child_named(h, "mpirun");
  CHECK_MSG(mpirun > 0, "no mpirun child of sgdlab (pid %d)", (int)h);
  CHECK(kill(pids[2], SIGKILL) == 0);
  int code = ru_wait_exit_code(h, 10.0);
  CHECK_MSG(code == 1, "harness exit %d (-1: still running 10 s after the kill)", code);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(want, sizeof want, "failed: rank 2 (worker, %s, pid %d): killed by signal 9", host, pids[2]);
  CHECK_STR_CONTAINS(err, want);
  /* Open MPI's own words are kept with the failed run */
  ru_db_text_into(db, "SELECT value FROM run_info WHERE run_id=1 AND key='mpirun_stderr'", err, sizeof err);
  CHECK_STR_CONTAINS(err, "rank 2");
  for (int r = 0; r < 3; r++)
    CHECK_MSG(ru_wait_gone(pids[r], 5.0, 0), "rank %d (pid %d) still there", r, pids[r]);
  CHECK_MSG(ru_wait_gone(mpirun, 5.0, 0), "mpirun (pid %d) still there", mpirun);
  ru_rm_rf(dir);
}

TEST(silent_rank_fails_the_run_with_the_noticing_rank_message) {
  char dir[64], db[128], err[1024], errpath[128], out[4096];
  int pids[3];
  pid_t h;
  const double deadline = 2.0;
  ru_mkdtemp(dir, sizeof dir, "cli");
  CHECK_MSG(start_run_until_steps(dir,
                                  "name: stop\nworkers: 3\ntransport: zmq\ndeadline: 2\n"
                                  "workload: {hidden: [16], batch: 16, epochs: 100, eval_every: 100000}\n"
                                  "engines: [{engine: allreduce, algorithm: ring}]\n",
                                  3, 1, db, sizeof db, &h, pids) == 0,
            "the run did not get going within 60 s");
  CHECK(kill(pids[1], SIGSTOP) == 0);
  double t = sg_now();
  int code = ru_wait_exit_code(h, 2 * deadline + 1.0);
  double took = sg_now() - t;
  if (code < 0) kill(pids[1], SIGKILL); /* never leave it stopped */
  CHECK_MSG(code == 1, "harness exit %d (-1: still running %.0f s after the SIGSTOP)", code,
            2 * deadline + 1.0);
  CHECK_MSG(took <= 2 * deadline, "took %.2f s after the SIGSTOP (deadline %.0f s)", took,
            deadline);
  ru_db_text_into(db, "SELECT status || ': ' || error FROM runs WHERE id=1", err, sizeof err);
  /* the stopped rank first, with its state, then the first meaningful
   * error: another rank's, naming the silent rank 1, never a signal the
   * harness itself sent while stopping the run */
  CHECK_MSG(!strncmp(err, "failed: rank 1 (worker, ", 24), "%s", err);
  CHECK_STR_CONTAINS(err, ") is stopped (state T); rank ");
  const char *noticed = strstr(err, "; rank ");
  CHECK_MSG(noticed && strncmp(noticed, "; rank 1 (", 10), "%s", err);
  CHECK_STR_CONTAINS(noticed, ": rank 1 (");
  CHECK_MSG(!strstr(err, "killed by signal"), "%s", err);
  CHECK_MSG(ru_wait_gone(pids[1], 2.0, 0), "the stopped rank (pid %d) is still there", pids[1]);
  for (int r = 0; r < 3; r++) CHECK_MSG(ru_wait_gone(pids[r], 2.0, 0), "rank %d still there", r);
  /* one summary line on stdout is the harness's; stderr has the rank's line */
  snprintf(errpath, sizeof errpath, "%s/stderr", dir);
  FILE *f = fopen(errpath, "r");
  size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[n] = '\0';
  if (f) fclose(f);
  CHECK_STR_CONTAINS(out, "rank 1 (");
  ru_rm_rf(dir);
}

/* ---- the exit after every DONE ------------------------------------------ */

/* The run of the exit tests: 2 workers over zmq, 5 steps, deadline 1 s
 * (a silence bound of 1.5 s); rank 1 stays SGDLAB_TEST_EXIT_DELAY_S
 * seconds after its DONE before it exits.  The harness's exit code; its
 * pid and rank 1's in *h and *r1 (0 when not seen); the run's error into
 * err (status first). */
static int linger_run(const char *tag, const char *secs, double wait_s, double *took, pid_t *r1,
                      char *err, size_t cap) {
  char dir[64], cfg[128], db[128], delay[32];
  ru_mkdtemp(dir, sizeof dir, tag);
  snprintf(cfg, sizeof cfg, "%s/linger.yaml", dir);
  snprintf(db, sizeof db, "%s/linger.db", dir);
  if (ru_write_file(cfg, "name: linger\nworkers: 2\ntransport: zmq\ndeadline: 1\n"
                         "workload: {hidden: [16], batch: 16, max_steps: 5, eval_every: 100000}\n"
                         "engines: [{engine: allreduce, algorithm: ring}]\n") != 0)
    return -2;
  snprintf(delay, sizeof delay, "1:%s", secs);
  setenv("SGDLAB_TEST_EXIT_DELAY_S", delay, 1);
  double t0 = sg_now();
  pid_t h = ru_spawn_sgdlab_run(cfg, db);
  unsetenv("SGDLAB_TEST_EXIT_DELAY_S");
  *r1 = 0;
  while (h > 0 && !*r1 && sg_now() - t0 < 30 && kill(h, 0) == 0) *r1 = ru_find_rank(h, 1);
  int code = h > 0 ? ru_wait_exit_code(h, wait_s) : -2;
  *took = sg_now() - t0;
  ru_db_text_into(db, "SELECT status || ': ' || coalesce(error, '') FROM runs WHERE id=1", err,
                  cap);
  fprintf(stderr, "  rank 1 stays %s s after DONE: exit %d after %.1f s: %s\n", secs, code, *took,
          err);
  ru_rm_rf(dir);
  return code;
}

/* Every rank has said DONE: what is left (MPI_Finalize, a simulator
 * unmapping its ranks, a disk under load) is no silence.  Rank 1 exits
 * 4 s after its DONE, over two silence bounds: the run ends ok.  Before
 * the rule (the silence bound applied to the exit too) it failed: "no
 * rank reported for 1.6 s (1.5 x deadline 1 s)". */
TEST(slow_exit_after_done_is_not_silence) {
  char err[1024];
  double took;
  pid_t r1;
  int code = linger_run("exit-slow", "4", 60, &took, &r1, err, sizeof err);
  CHECK_MSG(r1 > 0, "rank 1 was never seen");
  CHECK_MSG(code == 0, "harness exit %d: %s", code, err);
  CHECK_MSG(!strcmp(err, "ok: "), "%s", err);
}

/* ... but the exit is bounded (EXIT_GRACE_S, 30 s): rank 1 staying 90 s
 * fails the run with its own message, and the rank is gone after. */
TEST(exit_that_never_comes_is_bounded) {
  char err[1024];
  double took;
  pid_t r1;
  int code = linger_run("exit-never", "90", 80, &took, &r1, err, sizeof err);
  CHECK_MSG(r1 > 0, "rank 1 was never seen");
  CHECK_MSG(code == 1, "harness exit %d (-1: still running after 80 s): %s", code, err);
  char want[160];
  snprintf(want, sizeof want, "failed: every rank reported that it finished, but rank 1 (worker, ");
  CHECK_STR_CONTAINS(err, want);
  snprintf(want, sizeof want, "pid %d) has not exited 30", (int)r1);
  CHECK_STR_CONTAINS(err, want);
  CHECK_MSG(took >= 30, "ended after %.1f s, before the 30 s bound", took);
  CHECK_MSG(ru_wait_gone(r1, 5.0, 0), "rank 1 (pid %d) is still there", r1);
}

/* A ps run with one server and three workers on zmq; worker rank 2 is
 * killed once it has done 5 steps. */
static void ps_kill_worker(const char *mode, int *code, char *err, size_t errcap, char *dead,
                           size_t deadcap, int *killed_pid, long long *done_ok) {
  char dir[64], db[128], text[512];
  int pids[4];
  pid_t h;
  *code = -2;
  err[0] = dead[0] = '\0';
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(text, sizeof text,
           "name: ps-%s\nworkers: 3\ntransport: zmq\ndeadline: 3\n"
           "workload: {hidden: [16], batch: 16, max_steps: 300, eval_every: 100}\n"
           "engines: [{engine: ps, mode: %s, servers: 1}]\n",
           mode, mode);
  if (start_run_until_steps(dir, text, 4, 2, db, sizeof db, &h, pids) < 0) {
    kill(h, SIGKILL), waitpid(h, NULL, 0);
    ru_rm_rf(dir);
    return;
  }
  *killed_pid = pids[2];
  kill(pids[2], SIGKILL);
  *code = ru_wait_exit_code(h, 60.0);
  ru_db_text_into(db, "SELECT status || ': ' || coalesce(error, '') FROM runs WHERE id=1", err, errcap);
  ru_db_text_into(db, "SELECT value FROM run_info WHERE run_id=1 AND key='dead_rank.2'", dead, deadcap);
  /* async: the other workers (ranks 1 and 3; rank 0 is the server) made up
   * the dead one's share, so the server applied its whole target of
   * updates (3 x 300) before it stopped them */
  *done_ok = ru_db_int(db, "SELECT count(*) FROM run_info WHERE run_id=1 AND key='ps.stop'"
                       " AND value LIKE '% target reached;%'");
  for (int r = 0; r < 4; r++) ru_wait_gone(pids[r], 5.0, 0);
  ru_rm_rf(dir);
}

TEST(async_ps_survives_a_dead_worker_and_sync_does_not) {
  const sg_engine_t *ps = sg_engine_find("ps");
  CHECK_MSG(ps && ps->tolerates_exit, "the ps engine %s",
            ps ? "declares no tolerates_exit" : "is not registered");
  char err[1024], dead[512], want[160], host[64] = "";
  int code, pid = 0;
  long long finished = 0;
  gethostname(host, sizeof host - 1);
  ps_kill_worker("async", &code, err, sizeof err, dead, sizeof dead, &pid, &finished);
  CHECK_MSG(code == 0, "async: exit %d, run '%s'", code, err);
  CHECK_MSG(!strcmp(err, "ok: "), "async: run '%s'", err);
  snprintf(want, sizeof want, "rank 2 (worker, %s, pid %d): killed by signal 9", host, pid);
  CHECK_STR_CONTAINS(dead, want);
  CHECK_EQ_INT(finished, 1); /* the target of updates reached without rank 2 */
  /* the same death under sync fails the run, naming the dead worker */
  ps_kill_worker("sync", &code, err, sizeof err, dead, sizeof dead, &pid, &finished);
  CHECK_MSG(code == 1, "sync: exit %d, run '%s'", code, err);
  CHECK_STR_CONTAINS(err, "failed: ");
  CHECK_STR_CONTAINS(err, "rank 2");
  CHECK_MSG(dead[0] == '\0', "sync recorded a tolerated death: %s", dead);
}

/* `sgdlab run` alone says what is missing before the usage. */
TEST(run_without_config_says_it_is_missing) {
  char out[8192];
  char *argv[] = {NULL, "run", NULL};
  CHECK_EQ_INT(ru_run(argv, 1, NULL, out, sizeof out), 2);
  CHECK_MSG(!strncmp(out, "sgdlab run: missing CONFIG, the experiment file to run", 54), "%s", out);
  CHECK_STR_CONTAINS(out, "usage: sgdlab run CONFIG");
}

/* A LIBSVM experiment as a student writes it: -1/+1 labels, no classes,
 * no test file but a holdout, the data next to the experiment file, and
 * sgdlab started from another directory. */
TEST(libsvm_pm1_with_holdout_runs_from_another_directory) {
  char dir[64], cfg[160], svm[160], db[128], out[8192], want[256];
  ru_mkdtemp(dir, sizeof dir, "cli");
  snprintf(cfg, sizeof cfg, "%s/x.yaml", dir);
  snprintf(svm, sizeof svm, "%s/pm.svm", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  FILE *f = fopen(svm, "w");
  CHECK(f);
  for (int i = 0; i < 400; i++) /* feature 1 or 2 says the class */
    fprintf(f, "%s %d:1 3:%.2f\n", i % 2 ? "+1" : "-1", i % 2 ? 2 : 1, (i % 7) / 7.0);
  fclose(f);
  ru_write_file(cfg, "name: pm\nworkload: {dataset: libsvm, train_file: pm.svm, holdout: 0.25,\n"
                     "  model: softmax, batch: 10, lr: 0.5, epochs: 2}\nengines: [local]\n");
  char *argv[] = {NULL, "run", cfg, "--db", db, NULL};
  int code = ru_run(argv, 1, "/", out, sizeof out);
  CHECK_MSG(code == 0, "exit %d: %s", code, out);
  snprintf(want, sizeof want, "\"train_file\":\"%s\"", svm);
  char *opts = ru_db_text(db, "SELECT options_json FROM runs WHERE id=1");
  CHECK_MSG(opts && strstr(opts, want), "%s", opts ? opts : "(none)");
  free(opts);
  CHECK(ru_db_int(db, "SELECT count(*) FROM evals WHERE run_id=1 AND test_acc >= 0.99") >= 1);
  ru_rm_rf(dir);
}

/* `sgdlab help COMMAND [SUB]` prints that command's --help; `help config`
 * the keys; an unknown topic is one line and exit 2. */
TEST(help_command_is_the_commands_help) {
  char out[65536];
  char *run[] = {NULL, "help", "run", NULL};
  CHECK_EQ_INT(ru_run(run, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "usage: sgdlab run CONFIG");
  CHECK_STR_CONTAINS(out, "SGDLAB_DB");
  char *bench[] = {NULL, "help", "bench", "step", NULL};
  CHECK_EQ_INT(ru_run(bench, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "usage: sgdlab bench step");
  char *config[] = {NULL, "help", "config", NULL};
  CHECK_EQ_INT(ru_run(config, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "An experiment file is YAML.");
  char *nope[] = {NULL, "help", "nope", NULL};
  CHECK_EQ_INT(ru_run(nope, 1, NULL, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "sgdlab help: no command or topic 'nope'");
}

/* `bench step --set` takes a list as `run --set` does: [32, 16] is one
 * value of a list setting; a sweep is one line and exit 2. */
TEST(bench_step_takes_the_run_list_syntax) {
  char out[65536];
  char *list[] = {NULL, "bench", "step", "--set", "dataset=synthetic", "--set", "features=64",
                  "--set", "train_samples=2000", "--set", "model=mlp", "--set",
                  "hidden=[32, 16]", "--set", "batch=16", NULL};
  CHECK_EQ_INT(ru_run(list, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "mlp 64-32-16-10");
  char *sweep[] = {NULL, "bench", "step", "--set", "lr=[0.1,0.2]", NULL};
  CHECK_EQ_INT(ru_run(sweep, 1, NULL, out, sizeof out), 2);
  CHECK_STR_CONTAINS(out, "lr: '[0.1,0.2]' is a sweep; bench step measures one value");
}

/* `run --sbatch`: every argument of the script's command is one shell
 * word, whatever quotes, $(...), backquotes and newlines the paths and
 * --set values hold (the script is run by sh with its program replaced by
 * printf, which must print the arguments back unchanged and create no
 * file); and the script never replaces the experiment file or the
 * database (exit 2, both left as they were). */
TEST(sbatch_script_quotes_every_argument_and_keeps_its_inputs) {
  char dir[64], sub[256], cfg[512], db[512], script[512], cmd[1200], *out = NULL;
  CHECK(ru_mkdtemp(dir, sizeof dir, "cli") == 0);
  snprintf(sub, sizeof sub, "%s/q'd $(touch PWNED)\n#SBATCH --uid=0", dir);
  CHECK(mkdir(sub, 0700) == 0);
  snprintf(cfg, sizeof cfg, "%s/e`touch PWNED`'\"x.yaml", sub);
  snprintf(db, sizeof db, "%s/d'$(touch PWNED).db", sub);
  snprintf(script, sizeof script, "%s/job.sh", sub);
  CHECK(ru_write_file(cfg, "name: q\nworkers: 2\nengines: [allreduce]\n") == 0);
  const char *set = "name=x'; touch PWNED; '\n#SBATCH --uid=0";
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "--set", set, "--sbatch", script,
                            NULL), 0);
  free(out);
  /* exec 'SGDLAB' run ... -> exec printf '[%s]\n' run ... */
  snprintf(cmd, sizeof cmd, "cd '%s' && for f in q*/job.sh; do sed \"s|^exec '[^']*' |exec printf "
           "'[%%s]\\\\\\\\n' |\" \"$f\" > p.sh; done && sh p.sh > args.txt", dir);
  CHECK_EQ_INT(ru_sh(cmd), 0);
  char path[512], want[2048];
  snprintf(path, sizeof path, "%s/args.txt", dir);
  char *got = ru_slurp(path, 8192);
  snprintf(want, sizeof want, "[run]\n[%s]\n[--db]\n[%s]\n[--set]\n[%s]\n", cfg, db, set);
  CHECK_MSG(got && !strcmp(got, want), "the script's arguments:\n%s\nwanted:\n%s", got, want);
  free(got);
  snprintf(path, sizeof path, "%s/PWNED", dir);
  CHECK(access(path, F_OK) < 0);
  snprintf(path, sizeof path, "%s/PWNED", sub);
  CHECK(access(path, F_OK) < 0);
  /* the experiment file and the database are never the script */
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "--sbatch", cfg, NULL), 2);
  CHECK_STR_CONTAINS(out, "is the experiment file");
  free(out);
  CHECK(ru_write_file(db, "not a script") == 0);
  CHECK_EQ_INT(ru_sgdlab_in(NULL, &out, "run", cfg, "--db", db, "--sbatch", db, NULL), 2);
  CHECK_STR_CONTAINS(out, "is the results database");
  free(out);
  char *text = ru_slurp(cfg, 256);
  CHECK_STR_CONTAINS(text, "name: q\n");
  free(text);
  text = ru_slurp(db, 256);
  CHECK(text && !strcmp(text, "not a script"));
  free(text);
  ru_rm_rf(dir);
}
