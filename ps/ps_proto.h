/* ps_proto.h - the parameter server's wire protocol and shard layout.
 *
 * Every message between a worker and a server is ONE transport message:
 * a fixed 64-byte header followed by a payload.  All ranks of a run share
 * one host architecture (as the records do), so fields are native-endian.
 *
 *   type      sender  clock                      payload
 *   PUSH      worker  step t of the gradient     dense: float g[count]
 *                                                dense, FP16: uint16 half g[count]
 *                                                sparse: uint32 idx[count], float g[count]
 *   PULL      worker  step the worker computes   dense: none (the whole shard)
 *                     next                       sparse: uint32 idx[count]
 *   PARAMS    server  echo of the PULL's clock   dense: float p[count]
 *                                                sparse: float p[count], in idx order
 *   DONE      worker  steps it pushed            none
 *
 * Flags: SPARSE (above; also a compress: topk push, whose count is at
 * most the shard's k); FP16, on a dense PUSH only: the gradient as IEEE
 * halves (compress: fp16), widened to float32 by the server; STOP, on PARAMS only: the server has stopped
 * training (ssp/async: the target of applied updates was reached or the
 * time budget spent), push no more; FINAL, on a dense PULL only: the
 * evaluating worker's last message, which counts as its DONE and is
 * answered once every worker is done, with the final parameters.
 *
 * Sparse indices are relative to the shard's first element and strictly
 * increasing (sparse PARAMS carry values in the order of the pull's
 * indices, so their flag matches the pull's).  `version` is
 * the number of updates the shard had applied: in PARAMS, when the reply
 * was made; in PUSH, when the params the gradient was computed on were
 * read (so staleness = server version at apply - push.version).
 *
 * A server checks every header against its shard (ps_proto_check) before
 * it touches the payload; what fails is rejected, counted and reported,
 * and the server keeps serving.
 */
#ifndef PS_PROTO_H
#define PS_PROTO_H

#include <stddef.h>
#include <stdint.h>

enum {
  PS_MAGIC = 0x50534731,  /* "PSG1" */
  PS_PROTO_VERSION = 1,
  PS_TAG_REQ = 101,       /* worker -> server: PUSH, PULL, DONE */
  PS_TAG_REPLY = 102,     /* server -> worker: PARAMS */
  PS_SHARD_ALIGN = 16,    /* shard boundaries fall on multiples of 16 floats (64 B) */
};

typedef enum { PS_PUSH = 1, PS_PULL = 2, PS_PARAMS = 3, PS_DONE = 4 } ps_type_t;

enum { PS_F_SPARSE = 1, PS_F_STOP = 2, PS_F_FINAL = 4, PS_F_FP16 = 8 };

typedef struct ps_hdr {
  uint32_t magic;    /* PS_MAGIC */
  uint16_t proto;    /* PS_PROTO_VERSION */
  uint16_t type;     /* ps_type_t */
  int32_t shard;     /* the server's shard index */
  uint32_t flags;    /* PS_F_SPARSE, PS_F_STOP, PS_F_FINAL, PS_F_FP16 */
  int64_t clock;     /* see the table above */
  int64_t version;   /* updates applied to the shard (see above) */
  uint64_t offset;   /* dense: first element, absolute index in the flat vector */
  uint64_t count;    /* dense: elements; sparse: nonzeros */
  double held_s;     /* PARAMS: seconds the pull was held by the barrier/bound */
  int64_t staleness; /* PARAMS: staleness of this worker's last push, -1 none */
} ps_hdr_t;

_Static_assert(sizeof(ps_hdr_t) == 64, "ps_hdr_t is 64 bytes on the wire");

/* The shard of server k among s for a vector of n floats: equal element
 * counts (so equal bytes) rounded up to PS_SHARD_ALIGN; the last shards
 * may be short or empty when n is small (an empty shard still serves:
 * every message to it has count 0). */
void ps_shard_range(size_t n, int s, int k, size_t *offset, size_t *count);

/* Slices (sync, dense: docs/engines/ps.md "Slices"): a shard of cnt
 * floats is cut into slices of ps_slice_elems(cnt, slice_bytes) floats,
 * the last one shorter; slice_bytes 0 means one slice, the whole shard.
 * A sliced PUSH or PARAMS carries one slice: its offset is the shard's
 * first element plus c * elems, its count that slice's length. */
size_t ps_slice_elems(size_t cnt, uint64_t slice_bytes);
/* Number of slices of a shard of cnt floats cut every elems (at least 1:
 * an empty shard is one empty slice). */
int ps_slice_count(size_t cnt, size_t elems);
/* A sliced exchange's pushes in the order a worker sends them: slice 0
 * of every shard, then slice 1 of every shard, and so on, so every
 * server's link starts at once.  Push j is slice sl[j] of shard k[j]
 * (both arrays hold the sum of nsl[0..S)); returns that count.  With a
 * window of W slices per server, push j goes only once the PARAMS of
 * push j - W*S are in (ps_window_lag): no worker runs more than W slices
 * ahead of the slowest, so the server completes slices early and steadily
 * and its link carries parameters out while pushes come in. */
int ps_push_order(int S, const int *nsl, int *k, int *sl);
/* The push whose PARAMS must be in before push j goes (-1: none). */
static inline int ps_window_lag(int j, int window, int S) {
  return window > 0 && j >= window * S ? j - window * S : -1;
}

/* Bytes of payload a message of this type/flags/count carries. */
size_t ps_payload_bytes(int type, uint32_t flags, uint64_t count);

/* Fill a header. */
void ps_hdr_init(ps_hdr_t *h, int type, int shard, uint32_t flags,
                 int64_t clock, int64_t version, uint64_t offset,
                 uint64_t count);

/* Validate a message of `bytes` bytes received by the server of `shard`
 * (elements [off, off+cnt)).  Returns 0, or SG_EPROTO with a one-line
 * reason in why ("bad magic 0x12345678", "shard 3, this is shard 0",
 * "elements 100..200 outside shard 0..64", "payload 12 B, header says 40 B",
 * "sparse index 99 >= shard size 64").  Checks the sparse indices too, so
 * a message that passes can be applied without further checks. */
int ps_proto_check(const void *msg, size_t bytes, int shard, size_t off,
                   size_t cnt, char *why, size_t whylen);
/* The same for a sliced shard: a dense PUSH or PARAMS must then cover
 * exactly one slice of `elems` floats (ps_slice_elems); elems = cnt is
 * ps_proto_check. */
int ps_proto_check_sliced(const void *msg, size_t bytes, int shard, size_t off, size_t cnt,
                          size_t elems, char *why, size_t whylen);

const char *ps_type_name(int type);

#endif
