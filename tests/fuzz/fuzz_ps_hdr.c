/* fuzz_ps_hdr.c - the parameter server's message check (ps_proto_check).
 *
 * The input is one message (64-byte header + payload), checked as the
 * servers of a few shard layouts check it, whole and cut in slices of 16
 * floats (ps_proto_check_sliced).  Every message that passes is
 * applied the way a server or a worker applies it, to a buffer of exactly
 * the shard's size: the check promises that a message it accepts needs no
 * further checks, so an index or a length it lets through shows as an
 * ASan report here.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fuzz.h"
#include "ps_proto.h"

static const struct {
  int shard;
  size_t off, cnt;
} layouts[] = {{0, 0, 64}, {1, 64, 0}, {2, 128, 17}, {3, 1u << 20, 4096}};

static float get(const unsigned char *p, uint64_t i) {
  float v;
  memcpy(&v, p + 4 * i, 4);
  return v;
}

static uint32_t idx_at(const unsigned char *p, uint64_t i) {
  uint32_t v;
  memcpy(&v, p + 4 * i, 4);
  return v;
}

static volatile float sink;

/* Apply an accepted message to shard[cnt]; off: the shard's first
 * element (a sliced dense message lands at its offset). */
static void apply(const unsigned char *msg, size_t bytes, float *shard, size_t off, size_t cnt) {
  ps_hdr_t h;
  memcpy(&h, msg, sizeof h);
  const unsigned char *pl = msg + sizeof h;
  int sparse = (h.flags & PS_F_SPARSE) != 0;
  fuzz_require(bytes == sizeof h + ps_payload_bytes(h.type, h.flags, h.count));
  if (h.type == PS_DONE) return;
  if (!sparse) {
    fuzz_require(h.offset >= off && h.count <= cnt && h.offset - off <= cnt - h.count);
    float *at = shard + (h.offset - off);
    if (h.type == PS_PUSH || h.type == PS_PARAMS)
      for (uint64_t i = 0; i < h.count; i++) at[i] += get(pl, i);
    return;
  }
  float sum = 0;
  for (uint64_t i = 0; i < h.count; i++) {
    if (h.type == PS_PUSH) shard[idx_at(pl, i)] += get(pl, h.count + i);
    if (h.type == PS_PULL) sum += shard[idx_at(pl, i)];
    if (h.type == PS_PARAMS) sum += get(pl, i);
  }
  sink = sum; /* keeps the reads */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *msg = malloc(size ? size : 1);
  if (!msg) return 0;
  memcpy(msg, data, size);
  for (size_t k = 0; k < sizeof layouts / sizeof layouts[0]; k++) {
    char why[200];
    why[0] = '\0';
    for (int sliced = 0; sliced < 2; sliced++) {
      why[0] = '\0';
      size_t elems = sliced ? ps_slice_elems(layouts[k].cnt, 64) : layouts[k].cnt;
      int rc = ps_proto_check_sliced(msg, size, layouts[k].shard, layouts[k].off, layouts[k].cnt,
                                     elems, why, sizeof why);
      fuzz_require(rc == SG_OK || (rc == SG_EPROTO && why[0] != '\0'));
      if (rc != SG_OK) continue;
      /* exactly cnt floats: calloc(0) is a zero-byte block to ASan */
      float *shard = calloc(layouts[k].cnt, sizeof *shard);
      if (!shard && layouts[k].cnt) break;
      apply(msg, size, shard, layouts[k].off, layouts[k].cnt);
      free(shard);
    }
  }
  free(msg);
  return 0;
}
