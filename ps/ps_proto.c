/* ps_proto.c - header building, validation and the shard layout. */
#include "ps_proto.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

void ps_shard_range(size_t n, int s, int k, size_t *offset, size_t *count) {
  /* Rounding each shard up to 64 B keeps the boundaries cache-line
   * aligned; the price is that with n < s*16 the last servers own nothing. */
  size_t chunk = (n + (size_t)s - 1) / (size_t)s;
  chunk = (chunk + PS_SHARD_ALIGN - 1) / PS_SHARD_ALIGN * PS_SHARD_ALIGN;
  size_t off = chunk * (size_t)k;
  if (off > n) off = n;
  *offset = off;
  *count = n - off < chunk ? n - off : chunk;
}

size_t ps_slice_elems(size_t cnt, uint64_t slice_bytes) {
  /* Whole multiples of PS_SHARD_ALIGN floats keep every slice 64-B aligned. */
  uint64_t e = slice_bytes / 4 / PS_SHARD_ALIGN * PS_SHARD_ALIGN;
  if (slice_bytes == 0 || e >= cnt) return cnt;
  return e < PS_SHARD_ALIGN ? PS_SHARD_ALIGN : (size_t)e;
}

int ps_slice_count(size_t cnt, size_t elems) {
  if (cnt == 0 || elems == 0) return 1;
  return (int)((cnt + elems - 1) / elems);
}

int ps_push_order(int S, const int *nsl, int *k, int *sl) {
  int most = 0, j = 0;
  for (int x = 0; x < S; x++)
    if (nsl[x] > most) most = nsl[x];
  for (int c = 0; c < most; c++)
    for (int x = 0; x < S; x++)
      if (c < nsl[x]) k[j] = x, sl[j++] = c;
  return j;
}

size_t ps_payload_bytes(int type, uint32_t flags, uint64_t count) {
  int sparse = (flags & PS_F_SPARSE) != 0;
  switch (type) {
  case PS_PUSH: return (size_t)count * (sparse ? 8 : (flags & PS_F_FP16) ? 2 : 4);
  case PS_PULL: return sparse ? (size_t)count * 4 : 0;
  case PS_PARAMS: return (size_t)count * 4;
  default: return 0;
  }
}

void ps_hdr_init(ps_hdr_t *h, int type, int shard, uint32_t flags, int64_t clock,
                 int64_t version, uint64_t offset, uint64_t count) {
  memset(h, 0, sizeof *h);
  h->magic = PS_MAGIC;
  h->proto = PS_PROTO_VERSION;
  h->type = (uint16_t)type;
  h->shard = shard;
  h->flags = flags;
  h->clock = clock;
  h->version = version;
  h->offset = offset;
  h->count = count;
  h->held_s = 0;
  h->staleness = -1;
}

const char *ps_type_name(int type) {
  switch (type) {
  case PS_PUSH: return "PUSH";
  case PS_PULL: return "PULL";
  case PS_PARAMS: return "PARAMS";
  case PS_DONE: return "DONE";
  default: return "?";
  }
}

#define REJECT(...)                    \
  do {                                 \
    snprintf(why, whylen, __VA_ARGS__); \
    return SG_EPROTO;                  \
  } while (0)

int ps_proto_check(const void *msg, size_t bytes, int shard, size_t off, size_t cnt,
                   char *why, size_t whylen) {
  return ps_proto_check_sliced(msg, bytes, shard, off, cnt, cnt, why, whylen);
}

/* Whether a dense message of elements [o, o+n) is a whole slice of the
 * shard [off, off+cnt) cut every elems floats (a PULL asks for the whole
 * shard: sliced servers answer it slice by slice). */
static int is_slice(int type, uint64_t o, uint64_t n, size_t off, size_t cnt, size_t elems) {
  if (type == PS_PULL || elems == 0 || elems >= cnt) return o == off && n == cnt;
  if (o < off || (o - off) % elems || o - off >= cnt) return 0;
  uint64_t rest = cnt - (o - off);
  return n == (rest < elems ? rest : elems);
}

int ps_proto_check_sliced(const void *msg, size_t bytes, int shard, size_t off, size_t cnt,
                          size_t elems, char *why, size_t whylen) {
  ps_hdr_t h;
  if (bytes < sizeof h) REJECT("%zu B, shorter than the %zu-B header", bytes, sizeof h);
  memcpy(&h, msg, sizeof h);
  if (h.magic != PS_MAGIC) REJECT("bad magic 0x%08x", (unsigned)h.magic);
  if (h.proto != PS_PROTO_VERSION)
    REJECT("protocol version %u, expected %u", (unsigned)h.proto, (unsigned)PS_PROTO_VERSION);
  if (h.type < PS_PUSH || h.type > PS_DONE) REJECT("unknown message type %u", (unsigned)h.type);
  if (h.shard != shard) REJECT("%s for shard %d, this is shard %d", ps_type_name(h.type),
                               (int)h.shard, shard);
  if (h.flags & ~(uint32_t)(PS_F_SPARSE | PS_F_STOP | PS_F_FINAL | PS_F_FP16))
    REJECT("unknown flags 0x%x", (unsigned)h.flags);
  if ((h.flags & PS_F_FP16) && (h.type != PS_PUSH || (h.flags & PS_F_SPARSE)))
    REJECT("FP16 flag on a %s%s", (h.flags & PS_F_SPARSE) ? "sparse " : "", ps_type_name(h.type));
  if ((h.flags & PS_F_STOP) && h.type != PS_PARAMS) REJECT("STOP flag on a %s", ps_type_name(h.type));
  if ((h.flags & PS_F_FINAL) && (h.type != PS_PULL || (h.flags & PS_F_SPARSE)))
    REJECT("FINAL flag on a %s%s", (h.flags & PS_F_SPARSE) ? "sparse " : "", ps_type_name(h.type));
  if (h.clock < 0 || h.version < 0)
    REJECT("negative clock %lld / version %lld", (long long)h.clock, (long long)h.version);
  int sparse = (h.flags & PS_F_SPARSE) != 0;
  if (h.type == PS_DONE) {
    if (h.count != 0) REJECT("DONE with count %llu", (unsigned long long)h.count);
  } else if (!sparse) {
    if (!is_slice(h.type, h.offset, h.count, off, cnt, elems) && (elems >= cnt || h.type == PS_PULL))
      REJECT("%s of elements %llu..%llu, shard %d is %zu..%zu", ps_type_name(h.type),
             (unsigned long long)h.offset, (unsigned long long)(h.offset + h.count), shard,
             off, off + cnt);
    if (!is_slice(h.type, h.offset, h.count, off, cnt, elems))
      REJECT("%s of elements %llu..%llu, shard %d is %zu..%zu in slices of %zu",
             ps_type_name(h.type), (unsigned long long)h.offset,
             (unsigned long long)(h.offset + h.count), shard, off, off + cnt, elems);
  } else if (h.count > cnt) {
    REJECT("%s of %llu nonzeros, shard %d has %zu elements", ps_type_name(h.type),
           (unsigned long long)h.count, shard, cnt);
  }
  size_t want = ps_payload_bytes(h.type, h.flags, h.count);
  if (bytes - sizeof h != want)
    REJECT("%s payload %zu B, header says %zu B", ps_type_name(h.type), bytes - sizeof h, want);
  if (sparse && (h.type == PS_PUSH || h.type == PS_PULL)) {
    /* Strictly increasing, as workers send them: a repeated index would be
     * summed into acc once but applied once per repeat (apply_at). */
    const unsigned char *p = (const unsigned char *)msg + sizeof h;
    uint32_t prev = 0;
    for (uint64_t i = 0; i < h.count; i++) {
      uint32_t idx;
      memcpy(&idx, p + 4 * i, 4);
      if (idx >= cnt) REJECT("sparse index %u >= shard %d size %zu", (unsigned)idx, shard, cnt);
      if (i && idx <= prev)
        REJECT("sparse index %u after %u at position %llu (indices must increase)", (unsigned)idx,
               (unsigned)prev, (unsigned long long)i);
      prev = idx;
    }
  }
  return SG_OK;
}
