/* share.h - objects shared by every simulated rank of one process.
 *
 * Under SMPI (SG_SMPI) every rank is an actor of one smpirun process and
 * the rank program's globals are privatized: one copy per rank.  This
 * small shared library (libsgshare.so, built by the smpicc build only) is
 * not privatized, so what it holds is the process's: the workload keeps
 * its data sets here, loaded by the first rank and read by all
 * (workload.c).  Objects put here live as long as the process; they must
 * not be written once shared.  Actors run one at a time; a mutex guards
 * the table anyway.
 */
#ifndef SG_SHARE_H
#define SG_SHARE_H

/* The object put under key, or NULL. */
void *sg_share_get(const char *key);
/* Keep obj under key (a copy of key is made); 0, or -1 when full or out
 * of memory (the caller then keeps its own object). */
int sg_share_put(const char *key, void *obj);

#endif
