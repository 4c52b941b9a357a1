/* tree.c - pipelined binary-tree allreduce: reduce to the root, then
 * broadcast from it, both cut into segments that stream through the
 * tree (the shape of NCCL's tree, with one tree instead of its two).
 *
 * The tree is the heap on ranks 0 .. N-1: rank r's parent is (r-1)/2,
 * its children 2r+1 and 2r+2 (those < N); rank 0 is the root, the depth
 * D = floor(log2 N).  The vector is cut into S = ceil(count / seg)
 * segments of o->segment_bytes.
 *
 *   up (tag SG_AR_TAG_TREE):  for segment j = 0 .. S-1, every rank waits
 *     for segment j of each child (receives posted o->depth segments
 *     ahead into receive slots), adds it into its own buffer (children in
 *     order: own + child 2r+1 + child 2r+2), and sends the partial sum of
 *     segment j to its parent.  A rank works on segment j while its parent
 *     adds segment j-1: the segments move up as a pipeline, D + S - 1
 *     stages in all.  The root ends with the total.
 *   down (tag + 1): the root sends each segment to its children; every
 *     other rank receives segment j from its parent straight into its
 *     buffer (receives posted o->depth ahead) and sends it on to its
 *     children.  D + S - 1 stages again.
 *
 * Worked example, N = 5 (a..e = ranks 0..4), one segment:
 *
 *            0            up: 1 gets d, e: b+d+e -> 0;  2 sends c -> 0;
 *          /   \              0: a + (b+d+e) + c
 *         1     2         down: 0 -> 1, 2;  1 -> 3, 4
 *        / \
 *       3   4
 *
 * Bytes per rank: a rank with c children receives c K and sends K up
 * (the root sends nothing), receives K and sends c K down: an inner node's
 * link carries 2K in each direction per phase's busiest side (c = 2),
 * twice the ring's 2(N-1)/N K, in 2(D + S - 1) pipeline stages of one
 * segment instead of the ring's 2(N-1) steps: fewer latencies on a small
 * vector at large N, more bytes on a large one (docs/engines/allreduce.md).
 *
 * Every rank ends with the root's bits (the broadcast copies them), so the
 * replicas are identical whatever the summation order.  Empty vectors do
 * nothing; the last segment may be short, and both sides compute every
 * segment's length from count alone.  A received segment of another length
 * is an error naming the sender.
 *
 * Deadlock freedom: in each phase all messages go one way (up: to the
 * parent; down: to the children), each rank handles segments in order,
 * and a rank waits for its send of segment j - q only after the receiver
 * has had every earlier segment posted or handled.
 */
#include <stdint.h>

#include "compose.h"
#include "err.h"
#include "reduce.h"

/* Sends in flight before the oldest is waited for (per stream). */
#define TREE_SENDS(d) (2 * (d) + 2)

void sg_ar_tree_needs(size_t count, const sg_ar_opts_t *o, size_t *scratch, size_t *reqs) {
  size_t d = sg_ar_depth(o), seg = sg_ar_seg_floats(o);
  *scratch = *reqs = 0;
  if (count == 0) return;
  if (seg > count) seg = count;
  *scratch = 2 * d * seg; /* d receive slots per child */
  *reqs = 2 * d + TREE_SENDS(d);
}

typedef struct tree_run {
  sg_comm_t *c;
  const sg_ar_tree_node_t *t;
  float *buf;
  size_t count, seg, nseg, d, q;
  float *slot;     /* [child][d] slots of seg floats */
  sg_req_t **rreq; /* [child][d] */
  sg_req_t **sreq; /* [q] */
  size_t posted_send, sent_done;
} tree_run_t;

static int tree_setup(tree_run_t *k, sg_comm_t *c, const sg_ar_tree_node_t *t, float *buf,
                      size_t count, const sg_ar_opts_t *o) {
  size_t need_s, need_r;
  sg_ar_tree_needs(count, o, &need_s, &need_r);
  if (!o || !o->scratch || o->scratch_count < need_s || !o->reqs || o->reqs_count < need_r)
    return sg_err_set(SG_EINVAL, "tree of %zu floats needs %zu scratch floats and %zu request "
                      "slots (context sized too small)", count, need_s, need_r);
  *k = (tree_run_t){.c = c, .t = t, .buf = buf, .count = count, .d = sg_ar_depth(o)};
  k->seg = need_s / (2 * k->d);
  k->nseg = (count + k->seg - 1) / k->seg;
  k->q = TREE_SENDS(k->d);
  k->slot = o->scratch;
  k->rreq = (sg_req_t **)o->reqs;
  k->sreq = (sg_req_t **)o->reqs + 2 * k->d;
  return SG_OK;
}

static size_t seg_len(const tree_run_t *k, size_t j) {
  size_t lo = j * k->seg;
  return k->count - lo < k->seg ? k->count - lo : k->seg;
}

static int post_send(tree_run_t *k, int dst, int tag, size_t j) {
  while (k->sent_done + k->q <= k->posted_send) {
    sg_req_t **rq = &k->sreq[k->sent_done % k->q];
    if (*rq) SG_CHECK(sg_wait(k->c, rq, NULL));
    k->sent_done++;
  }
  sg_req_t **rq = &k->sreq[k->posted_send++ % k->q];
  *rq = NULL;
  return sg_isend(k->c, dst, tag, k->buf + j * k->seg, seg_len(k, j) * sizeof(float), rq);
}

static int wait_sends(tree_run_t *k) {
  for (; k->sent_done < k->posted_send; k->sent_done++) {
    sg_req_t **rq = &k->sreq[k->sent_done % k->q];
    if (*rq) SG_CHECK(sg_wait(k->c, rq, NULL));
  }
  return SG_OK;
}

static int wait_recv(tree_run_t *k, sg_req_t **rq, int src, size_t len) {
  sg_status_t st;
  SG_CHECK(sg_wait(k->c, rq, &st));
  if (st.bytes != len * sizeof(float))
    return sg_err_set(SG_EPROTO, "tree: %zu B from rank %d, tag %d, where the segment is %zu B",
                      st.bytes, src, st.tag, len * sizeof(float));
  return SG_OK;
}

/* Receive slot of child i for segment j, and its request. */
static float *slot(tree_run_t *k, int i, size_t j) {
  return k->slot + ((size_t)i * k->d + j % k->d) * k->seg;
}
static sg_req_t **rreq(tree_run_t *k, int i, size_t j) {
  return &k->rreq[(size_t)i * k->d + j % k->d];
}

/* Add segment j of each child into buf (children in order). */
static int add_children(tree_run_t *k, size_t j, int plant) {
  size_t len = seg_len(k, j);
  for (int i = 0; i < 2; i++) {
    if (k->t->child[i] < 0) continue;
    SG_CHECK(wait_recv(k, rreq(k, i, j), k->t->child[i], len));
    /* Planted bug (tests only): the root leaves out the last child's
     * first segment, so the total misses that subtree there. */
    int last = i == 1 || k->t->child[1] < 0;
    if (plant && j == 0 && last && k->t->parent < 0) continue;
    sg_sum_f32(k->buf + j * k->seg, slot(k, i, j), len);
  }
  return SG_OK;
}

int sg_ar_tree_up(sg_comm_t *c, const sg_ar_tree_node_t *t, float *buf, size_t count,
                  const sg_ar_opts_t *o) {
  tree_run_t k;
  if (count == 0) return SG_OK;
  SG_CHECK(tree_setup(&k, c, t, buf, count, o));
  size_t posted = 0;
  for (size_t j = 0; j < k.nseg; j++) {
    /* segment j+d-1 lands in the slot segment j-1 was added from */
    for (; posted < k.nseg && posted < j + k.d; posted++)
      for (int i = 0; i < 2; i++)
        if (t->child[i] >= 0)
          SG_CHECK(sg_irecv(c, t->child[i], t->tag, slot(&k, i, posted),
                            seg_len(&k, posted) * sizeof(float), rreq(&k, i, posted)));
    SG_CHECK(add_children(&k, j, o->plant_bug));
    if (t->parent >= 0) SG_CHECK(post_send(&k, t->parent, t->tag, j));
  }
  /* The broadcast that follows receives into what these sends read. */
  return wait_sends(&k);
}

int sg_ar_tree_down(sg_comm_t *c, const sg_ar_tree_node_t *t, float *buf, size_t count,
                    const sg_ar_opts_t *o) {
  tree_run_t k;
  if (count == 0) return SG_OK;
  SG_CHECK(tree_setup(&k, c, t, buf, count, o));
  size_t posted = 0;
  const int tag = t->tag + 1;
  for (size_t j = 0; j < k.nseg; j++) {
    for (; t->parent >= 0 && posted < k.nseg && posted < j + k.d; posted++)
      SG_CHECK(sg_irecv(c, t->parent, tag, buf + posted * k.seg,
                        seg_len(&k, posted) * sizeof(float), rreq(&k, 0, posted)));
    if (t->parent >= 0) SG_CHECK(wait_recv(&k, rreq(&k, 0, j), t->parent, seg_len(&k, j)));
    for (int i = 0; i < 2; i++)
      if (t->child[i] >= 0) SG_CHECK(post_send(&k, t->child[i], tag, j));
  }
  return wait_sends(&k);
}

/* ---- the algorithm --------------------------------------------------- */

static void tree_needs(int n, size_t count, const sg_ar_opts_t *o, size_t *scratch,
                       size_t *reqs) {
  *scratch = *reqs = 0;
  if (n > 1) sg_ar_tree_needs(count, o, scratch, reqs);
}

int sg_allreduce_tree(sg_comm_t *c, float *buf, size_t count, const sg_ar_opts_t *o) {
  int n = c->size, r = c->rank;
  if (n == 1 || count == 0) return SG_OK;
  sg_ar_tree_node_t t = {.parent = r ? (r - 1) / 2 : -1,
                         .child = {2 * r + 1 < n ? 2 * r + 1 : -1, 2 * r + 2 < n ? 2 * r + 2 : -1},
                         .tag = SG_AR_TAG_TREE};
  SG_CHECK(sg_ar_tree_up(c, &t, buf, count, o));
  return sg_ar_tree_down(c, &t, buf, count, o);
}

const sg_ar_algo_t sg_ar_tree = {
    .name = "tree",
    .summary = "pipelined binary tree: segments reduced up to rank 0, then broadcast down",
    .allreduce = sg_allreduce_tree,
    .needs = tree_needs,
    .needs_mpi = 0,
};
