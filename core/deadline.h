/* deadline.h - how long each layer waits, from one rule.
 *
 * D is the run's `deadline` (seconds): the longest a single blocking
 * transport call waits for its peer (sg_comm_t.deadline_s, transport.h).
 *
 * The rule.  A rank waiting on a peer that may itself be waiting on a
 * third rank must give up later than that peer, so that the rank nearest
 * the fault reports first and its DONE blames the faulty rank (err.h,
 * sg_err_blame).  Every wait is therefore
 *
 *   D x min(1 + SG_DL_STEP x level + SG_DL_HOP x hops, SG_DL_MAX)
 *
 * level: how many links of a wait chain lie between the waiter and the
 * ranks that wait on nobody (0: it waits on ranks that compute or on its
 * neighbours; 1: on ranks that wait at level 0; ...); hops: forwarding
 * steps down a tree below the first (a binomial broadcast's depth - 1).
 * SG_DL_STEP x D is the head start each level gets to report;
 * SG_DL_HOP x D separates a tree's parent from its child.
 *
 * The harness sees only silence: its watchdog (every rank silent) and the
 * stopped-process check wait SG_DL_WATCHDOG x D, one step past the longest
 * engine wait, so an engine's message, which names the peer, comes first.
 *
 * Where the levels are used:
 *   0  ring / rhd neighbours, allreduce native, the ps server waiting on
 *      workers, the mapreduce driver waiting on DONE, a reduce tree
 *      leader on its children
 *   1  ps workers on their servers; the mapreduce driver on reduce leaders
 *   2  mapreduce executors on the driver (tasks; broadcast, + hops)
 * docs/faults.md describes the same rule for users.
 */
#ifndef SG_DEADLINE_H
#define SG_DEADLINE_H

#include <stdio.h>

#define SG_DL_STEP 0.15 /* per level of a wait chain, in deadlines */
#define SG_DL_HOP 0.05  /* per forwarding hop of a tree, in deadlines */
#define SG_DL_MAX 1.35  /* no engine waits longer than this many deadlines */
#define SG_DL_WATCHDOG (SG_DL_MAX + SG_DL_STEP) /* the harness: 1.5 deadlines */

/* The factor of D a wait at `level` with `hops` gets (the rule above). */
static inline double sg_deadline_factor(int level, int hops) {
  double f = 1.0 + SG_DL_STEP * level + SG_DL_HOP * hops;
  return f < SG_DL_MAX ? f : SG_DL_MAX;
}

/* Seconds for a message: one decimal from 1 s up ("30.0"), two
 * significant digits below ("0.05", not "0.1": a 0.05 s deadline reads as
 * what was set).  buf holds at least 32 bytes; returns buf. */
static inline const char *sg_fmt_secs(char *buf, double s) {
  snprintf(buf, 32, s < 1 ? "%.2g" : "%.1f", s);
  return buf;
}

#endif
