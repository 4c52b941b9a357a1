/* mpirun.c - under mpirun the ranks are not our children: what mpirun
 * itself says on its stderr about the process that ended the job, and a
 * rank of this host found dead in /proc without DONE (run.h). */
#include "run_impl.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "proc.h"

/* Fail the run with what mpirun said about the process that ended the job. */
void run_fail_from_notice(serve_t *s) {
  const sg_mpirun_notice_t *n = &s->notice;
  if (n->rank < 0 || n->rank >= s->nprocs) return;
  rank_info_t *ri = &s->ranks[n->rank];
  if (!ri->pid && n->pid > 0) ri->pid = n->pid;
  char who[160];
  run_rank_name(s, n->rank, who, sizeof who);
  if (ri->done && ri->status && ri->msg[0]) run_fail(s, "%s: %s", who, ri->msg);
  else if (n->signal > 0) run_fail(s, "%s: killed by signal %d (%s)", who, n->signal, strsignal(n->signal));
  else if (n->improper) run_fail(s, "%s: exited without finishing MPI (no MPI_Finalize)", who);
  else run_fail(s, "%s: exited with status %d", who, n->exit_code);
}

/* Whether a process on this host is gone or a zombie (ranks under mpirun
 * are not our children, so waitpid cannot tell).  *status gets a zombie's
 * wait status (field 52 of /proc/PID/stat), else -1. */
static int run_proc_dead(int pid, int *status) {
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
int run_check_mpirun_ranks(serve_t *s) {
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  for (int r = 0; r < s->nprocs && s->suspect < 0; r++) {
    rank_info_t *ri = &s->ranks[r];
    int st;
    if (!ri->hello || ri->done || ri->pid <= 0 || strcmp(ri->host, host) || !run_proc_dead(ri->pid, &st))
      continue;
    SG_CHECK(run_drain_for(s, DRAIN_S, r)); /* its DONE may be on the way */
    if (!ri->done) {
      s->suspect = r;
      s->suspect_t = sg_now();
      s->suspect_status = st;
    }
  }
  return SG_OK;
}

void run_fail_from_suspect(serve_t *s) {
  if (s->suspect < 0) return;
  char who[160], how[96];
  run_rank_name(s, s->suspect, who, sizeof who);
  if (s->suspect_status >= 0) {
    run_exit_text(s->suspect_status, how, sizeof how);
    run_fail(s, "%s: %s", who, how);
  } else {
    run_fail(s, "%s: died without reporting (killed, or exited early)", who);
  }
}

/* What the rsh agent of an emulated cluster (sgdlab-nsexec) prefixes its
 * refusals with: such a line says why mpirun could not start a daemon. */
#define AGENT_PREFIX "sgdlab-nsexec: "

/* Read what mpirun has written to its stderr: parse each line for the
 * notice of the process that ended the job and for the agent's refusal, keep the last TAIL_CAP bytes
 * (stored as run_info mpirun_stderr when the run fails), and forward it to
 * our stderr in verbose mode only, so the terminal shows one summary line
 * per run rather than Open MPI's banners.  Returns 1 at end of file. */
int run_mpirun_read(serve_t *s) {
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
        if (!s->agent[0] && !strncmp(s->line, AGENT_PREFIX, strlen(AGENT_PREFIX)))
          snprintf(s->agent, sizeof s->agent, "%s", s->line + strlen(AGENT_PREFIX));
        s->line_len = 0;
        if (buf[i] == '\n') continue;
      }
      s->line[s->line_len++] = buf[i];
    }
  }
}

/* mpirun has exited: read its stderr to the end (bounded). */
void run_mpirun_read_to_eof(serve_t *s) {
  double until = sg_now() + EOF_WAIT_S;
  while (!run_mpirun_read(s) && sg_now() < until) {
    struct pollfd pf = {.fd = s->err_fd, .events = POLLIN};
    poll(&pf, 1, 50);
  }
}
