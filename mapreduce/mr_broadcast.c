/* mr_broadcast.c - the driver's parameters to every executor, flat or as
 * a binomial tree (the schedule is drawn in mapreduce.h).
 *
 * flat: the driver sends K bytes N times; its link carries N*K.
 * tree: rank r receives from r minus its lowest set bit, then forwards to
 *       r + 2^k for every 2^k below that bit (MPICH's binomial bcast).
 *       The driver sends ceil(log2(N+1)) copies; the whole broadcast takes
 *       ceil(log2(N+1)) rounds instead of N sends in a row.
 */
#include "mapreduce.h"

#include "err.h"

int mr_recv_dl(sg_comm_t *c, double factor, int src, int tag, void *buf,
               size_t cap, sg_status_t *st) {
  return sg_recv_within(c, c->deadline_s * factor, src, tag, buf, cap, st);
}

int mr_probe_dl(sg_comm_t *c, double factor, int src, int tag, sg_status_t *st) {
  return sg_probe_within(c, c->deadline_s * factor, src, tag, st);
}

int mr_bcast_parent(const mr_config_t *cfg, int rank, int size) {
  (void)size;
  if (rank == 0) return -1;
  if (!cfg->tree_broadcast) return 0;
  return rank - (rank & -rank); /* clear the lowest set bit */
}

int mr_bcast_level(const mr_config_t *cfg, int rank) {
  if (rank == 0) return 0;
  if (!cfg->tree_broadcast) return 1;
  return __builtin_popcount((unsigned)rank);
}

/* Executors at tree level L wait at level 2 with L - 1 hops (deadline.h):
 * a child must outlast its parent, which is itself waiting on the driver. */
static double bcast_factor(const mr_config_t *cfg, int rank) {
  return sg_deadline_factor(2, mr_bcast_level(cfg, rank) - 1);
}

static int bcast_flat(sg_comm_t *c, const mr_config_t *cfg, float *buf, size_t n) {
  size_t len = n * sizeof *buf;
  if (c->rank == 0) {
    for (int r = 1; r < c->size; r++) SG_CHECK(sg_send(c, r, MR_TAG_PARAMS, buf, len));
    return SG_OK;
  }
  sg_status_t st;
  SG_CHECK(mr_recv_dl(c, bcast_factor(cfg, c->rank), 0, MR_TAG_PARAMS, buf, len, &st));
  if (st.bytes != len)
    return sg_err_set(SG_EPROTO, "mapreduce: rank %d got %zu parameter bytes from the driver, expected %zu",
                      c->rank, st.bytes, len);
  return SG_OK;
}

static int bcast_tree(sg_comm_t *c, const mr_config_t *cfg, float *buf, size_t n) {
  size_t len = n * sizeof *buf;
  int rank = c->rank, size = c->size;
  unsigned mask = 1;
  /* receive from the parent: the rank with our lowest set bit cleared */
  while ((int)mask < size) {
    if ((unsigned)rank & mask) {
      sg_status_t st;
      int src = rank - (int)mask;
      SG_CHECK(mr_recv_dl(c, bcast_factor(cfg, rank), src, MR_TAG_PARAMS, buf, len, &st));
      if (st.bytes != len)
        return sg_err_blame(sg_err_set(SG_EPROTO, "mapreduce: rank %d got %zu parameter bytes from "
                                       "rank %d, expected %zu", rank, st.bytes, src, len),
                            src, SG_BLAME_BAD_MESSAGE);
      break;
    }
    mask <<= 1;
  }
  /* forward to the children, largest subtree first */
  for (mask >>= 1; mask > 0; mask >>= 1)
    if (rank + (int)mask < size) SG_CHECK(sg_send(c, rank + (int)mask, MR_TAG_PARAMS, buf, len));
  return SG_OK;
}

int mr_broadcast(sg_comm_t *c, const mr_config_t *cfg, float *buf, size_t n) {
  return cfg->tree_broadcast ? bcast_tree(c, cfg, buf, n) : bcast_flat(c, cfg, buf, n);
}
