/* admit.h - admission: is there room on this host for every run?
 *
 * Before `sgdlab run` launches anything (and for `run -n` too) every
 * resolved run is checked against this machine:
 *
 *   steps     ceil(epochs x steps per epoch), capped by max_steps, from the
 *             data's real row count: 0 steps, or more than
 *             SG_MAX_TOTAL_STEPS, is refused;
 *   limits    processes on this host against hard limits: with transport
 *             zmq every rank opens one socket per peer (a full mesh), so
 *             nprocs + 2 sockets must fit libzmq's per-context limit and
 *             about 3 descriptors per peer must fit RLIMIT_NOFILE;
 *             more processes than 4 x the cores is one warning line;
 *   memory    per rank: the training and test sets as the ranks decode
 *             them (float32 rows, or CSR for sparse data; every worker
 *             holds the whole training set), the parameters, gradient,
 *             optimizer state, activations and the engine's buffers (a ps
 *             server's shard and per-worker slots, a ring's scratch, ...),
 *             summed over the ranks placed on this host, against
 *             /proc/meminfo MemAvailable (MemTotal is shown as well).
 *
 * The data's dimensions come from the files themselves, read the way the
 * ranks read them (IDX headers; LIBSVM files are loaded), once per
 * distinct dataset of the experiment; a dataset that cannot be opened is
 * an error here, before launch.
 */
#ifndef SG_ADMIT_H
#define SG_ADMIT_H

#include <stdio.h>

#include "config.h"

/* Check every run of x.  Returns 0, or SG_ECONFIG with one line in
 * sg_err_msg() ("FILE: run I (LABEL): what is wrong"; for memory: what is
 * needed, what the machine has, the biggest term).  force: a run that
 * needs more memory than is available passes, with one line on stderr
 * (hard limits never pass).  Too many processes for the cores is one
 * warning line on stderr.  summary (or NULL): one line there with the
 * largest estimate (`run -n` prints it). */
int sg_admit_experiment(const sg_experiment_t *x, int force, FILE *summary);

#endif
