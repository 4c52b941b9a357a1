/* reconcile.h - runs whose harness died.
 *
 * A harness records in its run's row its pid, host, process identity
 * (sg_proc_identity) and run directory, and in run_info the hash of the
 * directory's owner file (rundir.h).  A harness killed with SIGKILL, or
 * lost with its machine, cannot mark its run; the commands that open the
 * database to write (run, bench allreduce) therefore reconcile: a run of
 * this host still 'running' whose run directory proves it ours (the
 * owner file is there, the user's, in a private directory of the user,
 * and hashes to the row's proof) and whose harness, as the owner file
 * names it, is gone (no such pid, a zombie, or a live process with another
 * identity: the pid was reused) becomes 'failed' with error "harness
 * died", and its directory is removed through descriptors (rundir.h).  A
 * row without that proof (written elsewhere, forged, of another host, of
 * schema version 1, or of a directory already gone) is left as it is.
 * Commands that only read (list, show, report) reconcile nothing.
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

/* Whether dir names a run temp dir ("/tmp/sgdlab-" and 6 letters or
 * digits); the pattern only, the file system is not looked at. */
int sg_run_dir_pattern(const char *dir);

#endif
