/* blas.c - which BLAS runs the models, and its thread count. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workload.h"

const char *sg_blas_info(void) {
  static _Thread_local char buf[256];
  const char *cfg = openblas_get_config();
  /* the config string starts "OpenBLAS 0.3.21 ..."; keep name and version */
  char ver[64] = "OpenBLAS ?";
  if (cfg && !strncmp(cfg, "OpenBLAS ", 9)) {
    size_t len = strcspn(cfg + 9, " ");
    snprintf(ver, sizeof ver, "OpenBLAS %.*s", (int)(len < 32 ? len : 32), cfg + 9);
  }
  const char *env = getenv("OPENBLAS_CORETYPE");
  const char *core = openblas_get_corename();
  snprintf(buf, sizeof buf, "%s core=%s threads=%d (OPENBLAS_CORETYPE=%s)", ver,
           core ? core : "?", openblas_get_num_threads(), env ? env : "unset");
  return buf;
}

void sg_blas_set_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }
