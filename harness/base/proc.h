/* proc.h - what the harness reads of a process from /proc/PID/stat: one
 * reader for the state, the parent, the start time and a zombie's exit
 * status (proc(5) numbers the fields from 1: pid, comm, state, ppid, ...,
 * starttime 22, exit_code 52).  comm may hold spaces and ')', so fields are
 * counted from the last ')'. */
#ifndef SG_PROC_H
#define SG_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* /proc/PID/stat into buf; the text from field 3 on ("S 1234 ..."), or
 * NULL when the process is gone. */
const char *sg_proc_stat(pid_t pid, char *buf, size_t cap);
/* Field k (k >= 3) of the text sg_proc_stat returned, or NULL. */
const char *sg_proc_field(const char *from3, int k);
/* The state letter ('R', 'S', 'T', 'Z', ...), 0 when the process is gone. */
int sg_proc_state(pid_t pid);
/* Stopped (SIGSTOP or traced: 'T', 't'). */
int sg_proc_stopped(pid_t pid);
/* Start time in clock ticks since boot (field 22), 0 when gone. */
unsigned long long sg_proc_start(pid_t pid);

#endif
