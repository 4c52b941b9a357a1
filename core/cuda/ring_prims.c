/* ring_prims.c - the ring primitive schedule and its flow control (see
 * ring_prims.h); the data movement is the caller's (ops). */
#include "ring_prims.h"

#include "err.h"

static int mod(int a, int n) { return ((a % n) + n) % n; }

static size_t chunk_off(size_t count, int n, int c) { return sg_prim_chunk_off(count, n, c); }
static size_t chunk_len(size_t count, int n, int c) { return sg_prim_chunk_len(count, n, c); }

sg_prim_t sg_ring_prim(int n, int r, int k, int plant_bug) {
  sg_prim_t p;
  sg_ring_prim_at(n, r, k, &p.op, &p.chunk);
  /* Planted bug (tests only): the first copy step stores the final sum
   * into the neighbouring chunk. */
  if (plant_bug && k == n && p.op == SG_PRIM_RECV_COPY_SEND) p.chunk = mod(p.chunk + 1, n);
  return p;
}

const char *sg_prim_name(int op) {
  static const char *const names[] = {"send",         "recvReduceSend", "recvReduceCopySend",
                                      "recvCopySend", "recv",           "recvReduceCopy",
                                      "owner"};
  return op >= 0 && op <= SG_PRIM_OWNER ? names[op] : "?";
}

size_t sg_dring_floats_owned(int n, int r, size_t count, size_t seg) {
  if (n < 1 || count == 0 || seg == 0) return 0;
  size_t block = (size_t)n * seg, own = 0;
  for (size_t b = 0; b < count; b += block)
    own += chunk_len(count - b < block ? count - b : block, n, r);
  return own;
}

size_t sg_dring_floats_sent(int n, int r, size_t count, size_t seg) {
  if (n < 2 || count == 0 || seg == 0) return 0;
  size_t block = (size_t)n * seg, sent = 0;
  for (size_t b = 0; b < count; b += block) {
    size_t bl = count - b < block ? count - b : block;
    for (int k = 0; k < 2 * n - 2; k++) sent += chunk_len(bl, n, sg_ring_prim(n, r, k, 0).chunk);
  }
  return sent;
}

typedef struct flow {
  sg_comm_t *c;
  int left, right;
  uint64_t nsend, nrecv, acked; /* sends done, receives done, ACKs taken */
  size_t soff;                  /* sharded: owned floats so far (the packed momentum) */
  int plant;                    /* the plan's plant_bug */
} flow_t;

static int take(flow_t *f, int src, int tag, uint64_t want, const char *what) {
  uint64_t got = 0;
  SG_CHECK(sg_recv(f->c, src, tag, &got, sizeof got, NULL));
  if (got != want)
    return sg_err_set(SG_EPROTO, "device ring: rank %d got %s %llu from rank %d, expected %llu",
                      f->c->rank, what, (unsigned long long)got, src, (unsigned long long)want);
  return SG_OK;
}

/* One primitive with its flow control. */
static int step(flow_t *f, const sg_dring_ops_t *ops, sg_prim_t p, size_t off, size_t len) {
  const int rx = sg_prim_recvs(p.op), tx = sg_prim_sends(p.op);
  if (rx) SG_CHECK(take(f, f->left, SG_DRING_TAG_READY, f->nrecv, "READY"));
  if (tx && f->nsend >= 2) {
    SG_CHECK(take(f, f->right, SG_DRING_TAG_ACK, f->acked, "ACK"));
    f->acked++;
  }
  const int in = (int)(f->nrecv & 1), out = (int)(f->nsend & 1);
  if (p.op == SG_PRIM_OWNER) {
    /* planted (tests): the owned range updated one float short */
    const size_t upd = f->plant == 2 && len ? len - 1 : len;
    SG_CHECK(ops->owner(ops->ctx, off, len, upd, f->soff, in, out));
    f->soff += len;
  } else {
    SG_CHECK(ops->apply(ops->ctx, p.op, off, len, in, out));
  }
  if (tx) {
    SG_CHECK(sg_send(f->c, f->right, SG_DRING_TAG_READY, &f->nsend, sizeof f->nsend));
    f->nsend++;
  }
  if (rx) {
    SG_CHECK(sg_send(f->c, f->left, SG_DRING_TAG_ACK, &f->nrecv, sizeof f->nrecv));
    f->nrecv++;
  }
  return SG_OK;
}

int sg_dring_run(sg_comm_t *c, const sg_dring_plan_t *p, const sg_dring_ops_t *ops) {
  const int n = c->size, r = c->rank;
  if (n == 1 || p->count == 0) return SG_OK;
  if (p->seg == 0) return sg_err_set(SG_EINVAL, "device ring: segment of 0 floats");
  if (p->sharded && !ops->owner)
    return sg_err_set(SG_EINVAL, "device ring: update: sharded without an owner's step");
  flow_t f = {.c = c, .left = mod(r - 1, n), .right = mod(r + 1, n), .plant = p->plant_bug};
  const size_t block = (size_t)n * p->seg;
  for (size_t b = 0; b < p->count; b += block) {
    const size_t bl = p->count - b < block ? p->count - b : block;
    for (int k = 0; k < sg_ring_nprims(n); k++) {
      sg_prim_t pr = sg_ring_prim(n, r, k, p->plant_bug == 1);
      if (p->sharded && pr.op == SG_PRIM_RECV_REDUCE_COPY_SEND) pr.op = SG_PRIM_OWNER;
      size_t off = chunk_off(bl, n, pr.chunk), len = chunk_len(bl, n, pr.chunk);
      /* an empty chunk still takes its turn on both sides: the flow
       * control stays in step (no rank waits for a READY never sent) */
      SG_CHECK(step(&f, ops, pr, b + off, len));
    }
  }
  while (f.acked < f.nsend) { /* the right neighbour's last ACKs */
    SG_CHECK(take(&f, f.right, SG_DRING_TAG_ACK, f.acked, "ACK"));
    f.acked++;
  }
  return SG_OK;
}

int sg_dring_exchange(sg_comm_t *c, const void *mine, void *right, size_t len) {
  const int n = c->size, r = c->rank;
  if (n == 1) return SG_OK;
  return sg_sendrecv(c, mod(r - 1, n), SG_DRING_TAG_HANDLE, mine, len, mod(r + 1, n),
                     SG_DRING_TAG_HANDLE, right, len, NULL);
}
