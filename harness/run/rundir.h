/* rundir.h - the run's private directory, and removing what sgdlab made.
 *
 * Everything a run or a cluster writes on this host lives in the run's
 * directory: /tmp/sgdlab-XXXXXX, made by mkdtemp (an unpredictable name,
 * mode 0700), held open from then on as a descriptor checked to be a
 * directory of the user that no one else may enter.  In it: the spec, the
 * keys, the ipc sockets, Open MPI's shared-memory segments (mpirun on this
 * host), mpirun's hostfile and, on an emulated cluster,
 * one temporary directory per host for mpirun's daemons (hN, made by
 * sgdlab-nsexec).  Nothing of a run is made anywhere else, so no other
 * user can name, pre-create or replace any of it.
 *
 * Removal never goes by path (base/safedir.h): through the descriptor,
 * with unlinkat, never following a link.
 *
 * Proof of ownership: the run directory holds a file `owner` (0600):
 * a random secret and the identity of the harness that made it
 * (sg_proc_identity).  The run's row records the file's SHA-256
 * (run_info key tmp_dir.proof).  Reconciliation (reconcile.h) removes a
 * directory only when the file is there, is the user's, hashes to the
 * row's proof, and the harness IT names is gone: a row someone else wrote
 * (a forged or received database) proves nothing and touches nothing.
 */
#ifndef SG_RUNDIR_H
#define SG_RUNDIR_H

#include <stddef.h>

enum { SG_RUNDIR_PROOF_LEN = 64 }; /* hex SHA-256 */

typedef struct sg_rundir {
  int fd;                                 /* the checked directory, or -1 */
  char path[64];                          /* /tmp/sgdlab-XXXXXX */
  char proof[SG_RUNDIR_PROOF_LEN + 1];    /* SHA-256 of its owner file */
} sg_rundir_t;

/* Make a run directory (above) with its owner file naming this process
 * as the harness.  SG_OK, or an SG_E* code with the message set (nothing
 * left behind). */
int sg_rundir_create(sg_rundir_t *rd);

/* Empty and remove rd's directory through its descriptor; rd->fd is
 * closed.  SG_OK, or the first error (what could not go is left). */
int sg_rundir_remove(sg_rundir_t *rd);

/* Whether the run directory `dir` of a row whose proof is `proof` is
 * ours and its harness gone (above): then 1, and, unless removed is
 * NULL, the directory is removed (*removed: all of it).  0 touches nothing: not a run
 * directory's name, gone, not the user's private directory, no owner
 * file, a proof that does not match, or its harness still runs. */
int sg_rundir_reclaim(const char *dir, const char *proof, int *removed);

/* SHA-256 of n bytes, as 64 lower-case hex digits and a NUL. */
void sg_sha256_hex(const void *p, size_t n, char out[SG_RUNDIR_PROOF_LEN + 1]);

#endif
