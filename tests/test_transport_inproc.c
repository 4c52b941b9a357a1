/* test_transport_inproc.c - the conformance suite with ranks as threads
 * over ZeroMQ inproc, N = 1..16; plus the summation kernels. */
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "err.h"
#include "reduce.h"
#include "test.h"
#include "thread_ranks.h"
#include "transport_new.h"
#include "transport_cases.h"

#define MAXN 16

/* One rank: the conformance suite; its message as the rank's error. */
static int conformance_rank(sg_comm_t *c, void *arg) {
  char err[1024];
  if (tc_run_all(c, err, sizeof err) != 0) return sg_err_set(SG_EINVAL, "%s", err);
  return 0;
}

/* Run the suite on n threads; 0 or the first rank's failure in err. */
static int run_group(int n, char *err, size_t errlen) {
  tr_group_t g = {.n = n, .fn = conformance_rank, .what = "conformance"};
  int rc = tr_run(&g);
  snprintf(err, errlen, "%s", g.err);
  return rc;
}

TEST(inproc_conformance_1_to_16) {
  char err[1024];
  for (int n = 1; n <= MAXN; n++) {
    CHECK_MSG(run_group(n, err, sizeof err) == 0, "N=%d: %s", n, err);
    fprintf(stderr, "  N=%d ok\n", n);
  }
}

TEST(inproc_bad_arguments) {
  sg_comm_t *c = NULL;
  void *zctx = zmq_ctx_new();
  sg_zmq_cfg_t cfg = {.rank = 0, .size = 1, .deadline_s = 1.0,
                      .scheme = "inproc", .group = "bad", .zctx = zctx};
  CHECK_OK(sg_comm_zmq_new(&c, &cfg));
  char buf[4];
  CHECK_EQ_INT(sg_send(c, 1, 0, buf, 4), SG_EINVAL);
  CHECK_STR_CONTAINS(sg_err_msg(), "peer 1");
  CHECK_EQ_INT(sg_send(c, 0, SG_TAG_MAX + 1, buf, 4), SG_EINVAL);
  CHECK_EQ_INT(sg_recv(c, 0, -7, buf, 4, NULL), SG_EINVAL);
  sg_comm_destroy(&c);
  CHECK(c == NULL);
  sg_comm_destroy(&c); /* NULL-safe */
  cfg.scheme = "udp";
  CHECK_EQ_INT(sg_comm_zmq_new(&c, &cfg), SG_EINVAL);
  CHECK_STR_CONTAINS(sg_err_msg(), "udp");
  zmq_ctx_term(zctx);
}

/* The kernels on inputs whose sums are exact; lengths cover the vector
 * body and every tail length. */
TEST(sum_kernels_exact) {
  float a[67], b[67], d[67];
  for (size_t n = 0; n <= 67; n++) {
    for (size_t i = 0; i < 67; i++) {
      a[i] = (float)(i % 13) - 6.0f;
      b[i] = (float)(3 * i % 7);
      d[i] = -1000.0f;
    }
    sg_sum3_f32(d, a, b, n);
    for (size_t i = 0; i < 67; i++)
      CHECK_MSG(d[i] == (i < n ? a[i] + b[i] : -1000.0f), "sum3 n=%zu i=%zu",
                n, i);
    sg_sum_f32(a, b, n);
    for (size_t i = 0; i < n; i++) CHECK(a[i] == d[i]);
    sg_scale_f32(a, 0.5f, n);
    for (size_t i = 0; i < n; i++) CHECK(a[i] == d[i] * 0.5f);
  }
}
