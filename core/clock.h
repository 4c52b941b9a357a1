/* clock.h - time sources. */
#ifndef SG_CLOCK_H
#define SG_CLOCK_H

#include <time.h>

/* Monotonic seconds (for durations). */
static inline double sg_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds this process's sg_wall() is shifted by: 0, except in a rank
 * started with the test-only SGDLAB_TEST_CLOCK_SKEW_US naming it
 * (sg_clock_skew_apply, clock.c), which plays a host whose clock is off. */
extern double sg_clock_skew_s;

/* Wall-clock seconds since the epoch (comparable across processes on one
 * host; used for t_start/wall_s relative to the run's start).  Across
 * hosts the clocks differ: each rank measures its offset to the harness
 * (clock_sync.h) and the harness corrects the rank's times. */
static inline double sg_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + sg_clock_skew_s;
}

#endif
