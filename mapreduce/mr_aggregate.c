/* mr_aggregate.c - executors' gradient accumulators summed to the driver,
 * flat or as Spark's treeAggregate (the schedule is drawn in mapreduce.h).
 *
 * Executor index i = rank - 1 of N, depth d, fan-in f (f^d >= N, f >= 2).
 * Round l = 1..d-1, stride s = f^(l-1): ranks with i % s == 0 still hold a
 * partial sum; among them, i % (s*f) == 0 is a leader that receives from
 * i + s, i + 2s, ..., i + (f-1)s and adds; the others send to their leader
 * and are done.  After the last round the remaining leaders
 * (i % f^(d-1) == 0) send to the driver, which adds them in rank order.
 * d = 1: every executor sends to the driver (flat).
 *
 * Bytes: the driver receives ceil(N / f^(d-1)) * K (flat: N*K); a leader
 * receives (f-1)*K per round it leads; everyone sends K once.
 *
 * Every message is a full K-float partial sum, so the sum is associative
 * plain addition whatever the tree: an executor that ran no task sends
 * zeros rather than a special "empty" message (Spark's zeroValue).
 * The driver adds in a fixed rank order (not arrival order), so with
 * P = N a run is reproducible bit for bit.
 */
#include "mapreduce.h"

#include "err.h"
#include "reduce.h"

int mr_fanin(int executors, int depth) {
  if (depth <= 1) return executors > 1 ? executors : 1;
  int f = 2;
  for (;;) {
    long long p = 1;
    for (int k = 0; k < depth && p < executors; k++) p *= f;
    if (p >= executors) return f;
    f++;
  }
}

static int recv_sum(sg_comm_t *c, double factor, int src, int tag, float *acc,
                    float *tmp, size_t n) {
  size_t len = n * sizeof *tmp;
  sg_status_t st;
  SG_CHECK(mr_recv_dl(c, factor, src, tag, tmp, len, &st));
  if (st.bytes != len)
    return sg_err_blame(sg_err_set(SG_EPROTO, "mapreduce: rank %d got %zu gradient bytes from rank "
                                   "%d, expected %zu", c->rank, st.bytes, src, len),
                        src, SG_BLAME_BAD_MESSAGE);
  sg_sum_f32(acc, tmp, n);
  return SG_OK;
}

int mr_aggregate(sg_comm_t *c, const mr_config_t *cfg, float *acc, float *tmp,
                 size_t n) {
  int N = cfg->executors, d = cfg->depth < 1 ? 1 : cfg->depth;
  int f = mr_fanin(N, d);
  long long top = 1; /* f^(d-1): stride of the leaders that reach the driver */
  for (int k = 1; k < d && top < N; k++) top *= f;
  size_t len = n * sizeof *acc;

  if (c->rank == 0) {
    for (size_t k = 0; k < n; k++) acc[k] = 0.0f;
    for (int i = 0; i < N; i += (int)top) {
      SG_CHECK(recv_sum(c, MR_DL_REDUCE, i + 1, MR_TAG_AGG, acc, tmp, n));
      if (i + 1 == cfg->plant_double_rank) sg_sum_f32(acc, tmp, n); /* tests: planted bug */
    }
    return SG_OK;
  }

  int i = c->rank - 1;
  long long s = 1;
  for (int l = 1; l < d && s < N; l++, s *= f) {
    long long group = s * f;
    if (i % group != 0) { /* not a leader this round: hand the partial sum up */
      int leader = (int)(i - i % group);
      return sg_send(c, leader + 1, MR_TAG_AGG + l, acc, len);
    }
    for (int k = 1; k < f; k++) {
      long long j = i + k * s;
      if (j >= N) break;
      SG_CHECK(recv_sum(c, 1.0, (int)j + 1, MR_TAG_AGG + l, acc, tmp, n));
    }
  }
  return sg_send(c, 0, MR_TAG_AGG, acc, len);
}
