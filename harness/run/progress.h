/* progress.h - what `sgdlab run` shows while it works.
 *
 * On a terminal (stdout is a TTY): one status line rewritten in place
 * (run i/n, engine, epoch, step/total, last test accuracy, elapsed), and a
 * summary line per finished run.  Not on a terminal: only the summary line
 * per finished run.  Quiet: nothing.  Redraws are limited to 10 per second.
 */
#ifndef SG_PROGRESS_H
#define SG_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sg_progress sg_progress_t;

/* Caller owns the result. */
int sg_progress_new(sg_progress_t **out, int quiet, size_t nruns);
void sg_progress_destroy(sg_progress_t **p);

void sg_progress_run_begin(sg_progress_t *p, size_t index, const char *label);
void sg_progress_step(sg_progress_t *p, int64_t step, int epoch);
void sg_progress_total(sg_progress_t *p, int64_t total_steps);
void sg_progress_eval(sg_progress_t *p, double test_acc);
/* One line on stderr for a run that shows little for long (a large
 * simulation): "sgdlab: [i/n] LABEL: TEXT", the run's planned steps
 * appended when known; nothing when quiet.  The status line is redrawn. */
void sg_progress_note(sg_progress_t *p, const char *text);
/* status "ok"/"failed"; final_acc NaN when none; error NULL when ok. */
void sg_progress_run_end(sg_progress_t *p, const char *label, const char *status,
                         double final_acc, double wall_s, const char *error);

#endif
