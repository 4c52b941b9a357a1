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

/* Wall-clock seconds since the epoch (comparable across processes on one
 * host; used for t_start/wall_s relative to the run's start). */
static inline double sg_wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
