/* clock_sync.h - a rank's clock offset to the harness, measured as NTP
 * does, and the test-only clock skew.
 *
 * Every rank asks the harness for its time SG_CLOCK_PINGS times over the
 * run's control socket (the rendezvous server, rendezvous.h: CURVE over
 * tcp, so only the run's ranks are answered, each only as itself):
 *
 *   rank                                  harness
 *   t1 = sg_wall()   "SGCLK1 <rank> <seq>" ->
 *                                      <- "CLK <seq> <h>"   h = its sg_wall()
 *   t2 = sg_wall()
 *
 * The ping with the smallest round trip t2 - t1 gives offset = h - (t1 +
 * t2) / 2 and uncertainty = (t2 - t1) / 2: h was read between t1 and t2
 * on the harness's clock, so the rank's clock plus the offset is the
 * harness's within the uncertainty, whatever the two directions' delays.
 * A rank does this before its engine starts and again after it ends, and
 * sends both as INFO clock.start / clock.end ("offset unc at", seconds;
 * at = the rank's time of the measurement since the run's start); the
 * harness corrects the rank's step times with them (harness/run/rows.c).
 */
#ifndef SG_CLOCK_SYNC_H
#define SG_CLOCK_SYNC_H

struct sg_keys;

#define SG_CLOCK_PINGS 8
/* The most pings the harness answers per rank and run (two measurements
 * and slack); more are refused and counted. */
#define SG_CLOCK_PINGS_MAX (4 * SG_CLOCK_PINGS)

typedef struct sg_clock_est {
  double offset_s; /* harness clock - this rank's clock */
  double unc_s;    /* half the smallest round trip */
  double at_s;     /* this rank's sg_wall() at that ping's midpoint */
} sg_clock_est_t;

/* Measure this rank's offset to the harness at endpoint (the run's
 * rendezvous); keys: over tcp, CURVE as this rank (NULL for ipc).  Each
 * answer is awaited at most deadline_s.  0, or an error naming the
 * endpoint. */
int sg_clock_sync(const char *endpoint, int rank, const struct sg_keys *keys, double deadline_s,
                  sg_clock_est_t *est);

/* Parse "rank:us[,rank:us...]" (microseconds, signed, |us| <= 3.6e9) and
 * give the shift of `rank` (0 when it is not named).  0, or SG_ECONFIG
 * with a message naming the entry and its offset in the text. */
int sg_clock_skew_parse(const char *text, int rank, double *skew_s);

/* TEST ONLY: shift this process's sg_wall() by what the environment's
 * SGDLAB_TEST_CLOCK_SKEW_US gives `rank` (the rank program calls it; the
 * harness never does, so its clock is the reference).  It moves only the
 * timestamps this rank makes of itself, as a host with a wrong clock
 * would; the harness measures and removes the shift like any other
 * offset.  0, or SG_ECONFIG. */
int sg_clock_skew_apply(int rank);

#endif
