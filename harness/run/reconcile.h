/* reconcile.h - runs whose harness died.
 *
 * A harness records in its run's row its pid, host, process identity
 * (sg_proc_identity) and per-run temp dir.  A harness killed with
 * SIGKILL, or lost with its machine, cannot mark its run; every sgdlab
 * command that opens the database to write (sg_recorder_open: run,
 * bench) therefore reconciles: a run of this
 * host still 'running' whose harness is gone (no such pid, a zombie, or a
 * live process with another identity: the pid was reused) becomes
 * 'failed' with error "harness died", and its temp dir is removed (only a
 * directory /tmp/sgdlab-XXXXXX, not a symlink, owned by us; the files in
 * it, never what is below a subdirectory).  Runs of other hosts, and rows
 * of schema version 1 (no harness pid), are left as they are.
 */
#ifndef SG_RECONCILE_H
#define SG_RECONCILE_H

#include <stddef.h>

#include "recorder.h"

/* "<start time in clock ticks since boot>@<boot id>" of process pid (from
 * /proc/PID/stat field 22 and /proc/sys/kernel/random/boot_id): the same
 * pid after reuse or a reboot gives another text.  0, or -1 when the
 * process is gone or a zombie. */
int sg_proc_identity(int pid, char *out, size_t cap);

/* Reconcile db's runs (above); how many were marked failed, or a negative
 * SG_E* code.  Prints one line per run on stderr. */
int sg_reconcile(sg_recorder_t *db);

/* (Commands that only read no longer call this: they never write.)
 * When path is an
 * existing, writable sgdlab database, open it (which migrates and
 * reconciles) and close it.  Anything else is left to the command's own
 * open, which reports it. */
void sg_reconcile_path(const char *path);

/* Whether dir names a run temp dir ("/tmp/sgdlab-" and 6 letters or
 * digits); the pattern only, the file system is not looked at. */
int sg_run_dir_pattern(const char *dir);

#endif
