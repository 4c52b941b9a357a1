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

#include <stddef.h>

/* The object put under key, or NULL. */
void *sg_share_get(const char *key);
/* Keep obj under key (a copy of key is made); 0, or -1 when full or out
 * of memory (the caller then keeps its own object). */
int sg_share_put(const char *key, void *obj);

/* Staged sends (core/transport_mpi.c, "Deferred sends"): a copy of a
 * message that a simulated send moves from, made when the send is
 * posted.  SMPI copies a send that is not detached into the receiver's
 * buffer only once the receive has matched it, which may be long after
 * the sender goes on and reuses its own buffer; until then SMPI also
 * reads the sender's request, which the sender must not complete.
 *
 * sg_share_stage(buf, n, own, nown, delivered): the copy (malloc), or
 * NULL when out of memory; once SMPI has copied it to the receiver, the
 * copy is done and *delivered (the sender's) grows by one.  nown < 0:
 * all n bytes are copied; else only the nown ranges [own[2i], own[2i+1])
 * (offsets, sg_fold_private, core/msgbuf.h): the rest of buf is a folded
 * payload whose values nobody reads, and its pages in the copy stay
 * untouched, so a staged message costs the sender its header's pages,
 * not its length.  SMPI's own copy to the receiver takes only the bytes
 * that are private at both ends: where the receiver folds its payload
 * too (a framed buffer), the untouched bytes are never read; where it
 * keeps them its own, it gets whatever the copy holds there, as it would
 * have got a folded block's: a value nobody reads.
 * sg_share_stage_done(copy): whether SMPI has copied it.
 * sg_share_stage_free(copy): frees a done copy (others: nothing).
 * sg_share_stage_hook(): installs, once per process, the simulator's copy
 * callback that marks a staged copy done after SMPI's own copy
 * (smpi_comm_set_copy_data_callback). */
void *sg_share_stage(const void *buf, size_t n, const size_t *own, int nown, int *delivered);
int sg_share_stage_done(void *copy);
void sg_share_stage_free(void *copy);
void sg_share_stage_hook(void);

#endif
