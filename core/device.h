/* device.h - where a rank's workload runs: the workload key `device`.
 *
 *   device: cpu   (default) OpenBLAS on the host, as ever
 *   device: cuda  the workload's data, parameters and gradient on a CUDA
 *                 device (core/cuda/, docs/cuda.md); needs a build with
 *                 CUDA and a device on every host that runs a rank
 *
 * A rank's device is picked by its local rank (its place among the ranks
 * on its host): local_rank mod G, G = gpus_per_host when > 0, else every
 * device the process sees (CUDA_VISIBLE_DEVICES applies).
 */
#ifndef SG_DEVICE_H
#define SG_DEVICE_H

#include <stdint.h>

#include "opts.h"
#include "transport.h"

/* 1 when this build has the CUDA parts, 0 for a CPU-only build. */
int sg_device_build_has_cuda(void);
/* 1 when this build found NCCL (allreduce algorithm nccl). */
int sg_device_build_has_nccl(void);
/* The devices this build supports, one line: "cpu, cuda (CUDA 13.0,
 * archs 75;80;90, NCCL 2.28.9)" or "cpu (this build has no CUDA)". */
const char *sg_device_build(void);

/* Whether the settings' device is usable here, checked by the harness
 * before anything launches.  SG_ECONFIG with one line (no key prefix:
 * the caller adds file:line:col and `device`) when device is cuda and
 * this build has no CUDA, or no CUDA device is available, or gpus_per_host
 * asks for more devices than there are.  Ranks placed on other hosts
 * (`hosts` set) are not checked here; they fail on their own host with
 * the same line. */
int sg_device_admit(const sg_opts_t *o);

/* The device index of local rank `local_rank` (pure: tested on CPU). */
int sg_device_pick(int local_rank, int visible, int64_t gpus_per_host);

/* This rank's place among the ranks whose host name equals its own. */
void sg_device_local_rank(const sg_comm_t *c, int *local_rank, int *local_size);

/* Rank side, once the comm is up: with device cuda, select this rank's
 * device (sg_device_pick) for every later CUDA call of the process. */
int sg_device_bind(const sg_comm_t *c, const sg_opts_t *o);

/* The device index sg_device_bind chose (0 before it ran). */
int sg_device_current(void);

#endif
