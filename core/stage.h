/* stage.h - a run's spec and keys handed to one rank over its standard
 * input: what `launcher: ssh` sends through each rank's ssh connection, so
 * that nothing of the run needs to exist on the rank's host (no shared
 * file system, no run directory there) and no key passes through argv or
 * the environment.
 *
 * The bytes: one line "sgdlab-stage 1 RANK SIZE SPECLEN KEYSLEN\n", then
 * SPECLEN bytes of the spec file's text (key=value lines) and KEYSLEN
 * bytes of the key file's text (auth.h; 0: the run has no keys), in the
 * stage of one rank with every secret key but that rank's own given as
 * "-" (it needs the others' public keys only).  RANK -1: one stage for
 * every rank (srun --input=all, the test-only plain stage), each taking
 * its rank from its launcher's environment (SLURM_PROCID), with every
 * key.
 *
 * Under launcher slurm the same bytes travel inside munge credentials
 * (below).
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
/* The bytes sg_stage_write sends, malloc'd into *buf (*len of them). */
int sg_stage_text(int rank, int size, const char *spec_path, const char *keys_path, char **buf,
                  size_t *len);
/* A stage from memory (len bytes, exactly one stage), as sg_stage_read. */
int sg_stage_parse(const char *buf, size_t len, sg_opts_t **spec, sg_keys_t **keys, int *rank,
                   int *size);

/* Launcher slurm: srun carries its standard input to the nodes over plain
 * TCP, so there the stage goes as munge credentials (munge(7)), one line
 * per rank ("MUNGE:...:\n"), line k the stage of rank k, encrypted with the
 * cluster's munge key and decodable only by this user and group
 * (--restrict-uid/--restrict-gid), once (munged's replay cache).  munge
 * and unmunge run by fork/exec, no shell; SG_STAGE_MUNGE_SOCKET_ENV, when
 * set, names munged's socket (else munge's default). */
#define SG_STAGE_MUNGE_SOCKET_ENV "SGDLAB_MUNGE_SOCKET"
/* A socket named in SG_STAGE_MUNGE_SOCKET_ENV is used only when no one
 * but root, the user or munged's account ("munge") can put another in its
 * place: an absolute path whose directories are all theirs and writable by
 * no one else (trusted_path.h; only its ancestors may be sticky), and the
 * socket, where there is one, a socket (not a link) of theirs.  Whoever
 * answers on it reads the stage munge encodes, and what unmunge decodes is
 * taken as its word.  0, or SG_EINVAL and one line naming the variable,
 * the path and why. */
int sg_stage_munge_socket_check(const char *socket);
/* A credential line can be this long: 4/3 of the largest stage, plus. */
#define SG_STAGE_CRED_MAX ((SG_STAGE_SPEC_MAX + SG_STAGE_KEYS_MAX) / 3 * 4 + 4096)
/* The credential of len bytes of payload, restricted to this uid and
 * gid, time to live munged's maximum (ttl -1), into *cred (malloc'd,
 * one line with its '\n', *clen bytes).  socket NULL: munge's default. */
int sg_stage_munge_encode(const char *payload, size_t len, const char *socket, char **cred,
                          size_t *clen);
/* Each credential is bound to the srun it was made for: the harness
 * draws a fresh run id (32 hex digits) per srun and gives it to the tasks
 * in their environment (SG_STAGE_RUN_ENV, srun --export=ALL), and each
 * credential's payload is "sgdlab-run ID\n" followed by the stage, so a
 * credential of another run (or another job) put into this run's input is
 * refused even where munged has not seen it yet (its replay cache is per
 * node). */
#define SG_STAGE_RUN_ENV "SGDLAB_STAGE_RUN"
#define SG_STAGE_RUN_HEX 32
/* The payload of rank `rank`'s credential for run id `run` (as
 * sg_stage_text, the run line before it), malloc'd into *buf. */
int sg_stage_munge_payload(const char *run, int rank, int size, const char *spec_path,
                           const char *keys_path, char **buf, size_t *len);
/* Rank `rank`'s stage from fd: line `rank` of the input decoded by
 * unmunge, its uid and gid checked against this process's, its run id
 * against SG_STAGE_RUN_ENV's, then parsed (sg_stage_parse; its rank must
 * be `rank`).  Every refusal names the rank; the lines after line `rank`
 * are left unread (beyond what one read took). */
int sg_stage_munge_read(int fd, int rank, const char *socket, sg_opts_t **spec, sg_keys_t **keys,
                        int *size);
/* A thread that reads fd to its end and then ends the process (above). */
int sg_stage_watch(int fd, int rank);

/* Write all n bytes of p to fd (EINTR retried); SG_EPEER naming the
 * error otherwise.  The stage and its munge credentials go out so. */
int sg_stage_write_bytes(int fd, const char *p, size_t n);

#endif
