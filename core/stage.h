/* stage.h - a run's spec and keys handed to one rank over its standard
 * input: what `launcher: ssh` sends through each rank's ssh connection, so
 * that nothing of the run needs to exist on the rank's host (no shared
 * file system, no run directory there) and no key passes through argv or
 * the environment.
 *
 * The bytes: one line "sgdlab-stage 1 RANK SIZE SPECLEN KEYSLEN\n", then
 * SPECLEN bytes of the spec file's text (key=value lines) and KEYSLEN
 * bytes of the key file's text (auth.h; 0: the run has no keys).  RANK
 * -1: one stage for every rank (srun --input=all), each taking its rank
 * from its launcher's environment (SLURM_PROCID).
 *
 * The rank keeps reading its standard input afterwards: end of file
 * means its launcher is gone (the ssh connection closed, the harness
 * died), and the rank exits at once with SG_LIFELINE_EXIT, as it does
 * when its records connection closes (lifeline.h). */
#ifndef SG_STAGE_H
#define SG_STAGE_H

#include <stddef.h>

#include "auth.h"
#include "opts.h"

#define SG_STAGE_SPEC_MAX (1 << 20)
#define SG_STAGE_KEYS_MAX (8 << 20)

/* Write the stage for `rank` of `size` to fd: the text of spec_path and
 * of keys_path ("" or NULL: none).  SG_EPEER when fd's reader is gone
 * (the launcher exited: it reports that itself), else SG_EIO. */
int sg_stage_write(int fd, int rank, int size, const char *spec_path, const char *keys_path);
/* Read a stage from fd (bounded by the limits above): the spec, the keys
 * (NULL when the run has none), the rank and the size.  Errors say what
 * was wrong and at which byte. */
int sg_stage_read(int fd, sg_opts_t **spec, sg_keys_t **keys, int *rank, int *size);
/* A thread that reads fd to its end and then ends the process (above). */
int sg_stage_watch(int fd, int rank);

#endif
