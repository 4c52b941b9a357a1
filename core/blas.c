/* blas.c - which BLAS runs the models, and its thread count. */
#include <cblas.h>
#if defined(__SSE2__)
#include <pmmintrin.h>
#include <xmmintrin.h>
#endif
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
  const char *l2 = getenv("OPENBLAS_L2_SIZE");
  snprintf(buf, sizeof buf,
           "%s core=%s threads=%d (OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s) denormals=%s",
           ver, core ? core : "?", openblas_get_num_threads(), env ? env : "unset",
           l2 ? l2 : "unset", sg_denormals_flushed() ? "flush" : "keep");
  return buf;
}

void sg_blas_set_threads(int n) { openblas_set_num_threads(n < 1 ? 1 : n); }

/* The calling thread's SSE modes: flush-to-zero (results below the
 * smallest normal float become 0) and denormals-are-zero (such inputs
 * read as 0).  Threads started later inherit them; BLAS threads started
 * before (threads > 1) keep the IEEE default. */
#if defined(__SSE2__)
void sg_denormals_flush(int on) {
  _MM_SET_FLUSH_ZERO_MODE(on ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
  _MM_SET_DENORMALS_ZERO_MODE(on ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
}

int sg_denormals_flushed(void) {
  return _MM_GET_FLUSH_ZERO_MODE() == _MM_FLUSH_ZERO_ON &&
         _MM_GET_DENORMALS_ZERO_MODE() == _MM_DENORMALS_ZERO_ON;
}
#else
void sg_denormals_flush(int on) { (void)on; }
int sg_denormals_flushed(void) { return 0; }
#endif
