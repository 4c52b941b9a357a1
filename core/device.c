/* device.c - the `device` key: what this build supports, the check before
 * launch, and which device a rank uses (see device.h).  Compiled in every
 * build; the CUDA calls go through core/cuda/sg_cuda.h, whose CPU-only
 * stand-in (cuda/cuda_none.c) says that this build has no CUDA. */
#include "device.h"

#include <stdio.h>
#include <string.h>

#include "cuda/sg_cuda.h"
#include "err.h"

static int g_device; /* chosen by sg_device_bind */

int sg_device_build_has_cuda(void) {
#ifdef SG_HAVE_CUDA
  return 1;
#else
  return 0;
#endif
}

int sg_device_build_has_nccl(void) {
#ifdef SG_HAVE_NCCL
  return 1;
#else
  return 0;
#endif
}

const char *sg_device_build(void) {
#ifdef SG_HAVE_CUDA
  static char line[160];
  snprintf(line, sizeof line, "cpu, cuda (CUDA %s, archs %s, %s)", SG_CUDA_VERSION,
           SG_CUDA_ARCHS, sg_cuda_nccl_version());
  return line;
#else
  return "cpu (this build has no CUDA)";
#endif
}

static int wants_cuda(const sg_opts_t *o) {
  return strcmp(sg_opts_str_or(o, "device", "cpu"), "cuda") == 0;
}

int sg_device_admit(const sg_opts_t *o) {
  if (!wants_cuda(o)) return SG_OK;
  if (!sg_device_build_has_cuda())
    return sg_err_set(SG_ECONFIG, "cuda requested but this build of sgdlab has no CUDA "
                      "(rebuild with a CUDA toolkit present, or SGDLAB_CUDA=ON; docs/cuda.md)");
  const char *hosts = sg_opts_str_or(o, "hosts", "");
  if (hosts[0]) return SG_OK; /* ranks elsewhere: each checks its own host */
  int count = 0;
  if (sg_cuda_probe(&count) < 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return sg_err_set(SG_ECONFIG, "cuda requested but no CUDA device is available (%s)", why);
  }
  int64_t g = 0;
  SG_CHECK(sg_opts_int_or(o, "gpus_per_host", 0, &g));
  if (g > count)
    return sg_err_set(SG_ECONFIG, "cuda with gpus_per_host %lld, but this host has %d CUDA "
                      "device%s", (long long)g, count, count == 1 ? "" : "s");
  return SG_OK;
}

int sg_device_pick(int local_rank, int visible, int64_t gpus_per_host) {
  int g = gpus_per_host > 0 && gpus_per_host < visible ? (int)gpus_per_host : visible;
  if (g < 1 || local_rank < 0) return 0;
  return local_rank % g;
}

void sg_device_local_rank(const sg_comm_t *c, int *local_rank, int *local_size) {
  int before = 0, same = 0;
  for (int r = 0; r < c->size; r++) {
    if (strncmp(c->hosts[r], c->hosts[c->rank], sizeof c->hosts[r]) != 0) continue;
    same++;
    if (r < c->rank) before++;
  }
  *local_rank = before;
  *local_size = same;
}

int sg_device_bind(const sg_comm_t *c, const sg_opts_t *o) {
  if (!wants_cuda(o)) return SG_OK;
  int count = 0, lr = 0, ls = 0;
  int64_t g = 0;
  SG_CHECK(sg_opts_int_or(o, "gpus_per_host", 0, &g));
  if (sg_cuda_probe(&count) < 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return sg_err_set(SG_ECONFIG, "device: cuda requested but host %s has no CUDA device "
                      "available (%s)", c->hosts[c->rank], why);
  }
  sg_device_local_rank(c, &lr, &ls);
  g_device = sg_device_pick(lr, count, g);
  return sg_cuda_use(g_device);
}

int sg_device_current(void) { return g_device; }
