/* ps wire protocol and shard layout: pure functions, no processes. */
#include <stdint.h>
#include <string.h>

#include "err.h"
#include "ps_proto.h"
#include "test.h"

TEST(shards_cover_the_vector_balanced_and_aligned) {
  size_t ns[] = {0, 1, 15, 16, 17, 100, 101770, 4194304, 4194305};
  for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
    for (int S = 1; S <= 9; S++) {
      size_t n = ns[a], next = 0, maxc = 0, minc = (size_t)-1;
      for (int k = 0; k < S; k++) {
        size_t off, cnt;
        ps_shard_range(n, S, k, &off, &cnt);
        CHECK_MSG(off == next, "n=%zu S=%d k=%d: off %zu, expected %zu", n, S, k, off, next);
        CHECK_MSG(off % PS_SHARD_ALIGN == 0 || cnt == 0, "n=%zu S=%d k=%d off %zu unaligned", n, S, k, off);
        next = off + cnt;
        if (cnt > maxc) maxc = cnt;
        if (cnt < minc && off + cnt < n) minc = cnt; /* all but the last are full */
      }
      CHECK_MSG(next == n, "n=%zu S=%d: shards cover %zu", n, S, next);
      /* Balanced by bytes: no shard is more than one alignment unit above n/S. */
      CHECK_MSG(maxc <= (n + S - 1) / S + PS_SHARD_ALIGN, "n=%zu S=%d max %zu", n, S, maxc);
    }
}

static size_t make(unsigned char *buf, int type, int shard, uint32_t flags, uint64_t off,
                   uint64_t count, size_t payload) {
  ps_hdr_t h;
  ps_hdr_init(&h, type, shard, flags, 3, 2, off, count);
  memcpy(buf, &h, sizeof h);
  memset(buf + sizeof h, 0, payload);
  return sizeof h + payload;
}

TEST(valid_messages_pass) {
  static unsigned char b[4096];
  char why[200];
  /* shard 1 of a 100-element vector over 2 servers: 64..100 */
  size_t off, cnt;
  ps_shard_range(100, 2, 1, &off, &cnt);
  CHECK_EQ_INT(off, 64);
  CHECK_EQ_INT(cnt, 36);
  size_t len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
  len = make(b, PS_PULL, 1, 0, off, cnt, 0);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
  len = make(b, PS_DONE, 1, 0, 0, 0, 0);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
  len = make(b, PS_PUSH, 1, PS_F_SPARSE, off, 2, 16);
  uint32_t idx[2] = {0, 35};
  memcpy(b + sizeof(ps_hdr_t), idx, sizeof idx);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
}

/* Each corruption must be rejected, with a reason that says what. */
TEST(malformed_messages_are_rejected_with_a_reason) {
  static unsigned char b[4096];
  char why[200];
  size_t off = 64, cnt = 36, len;
  ps_hdr_t *h = (ps_hdr_t *)b;

  CHECK(ps_proto_check(b, 10, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "shorter");

  len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4);
  h->magic ^= 1;
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "magic");

  len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4);
  h->proto = 9;
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "version");

  len = make(b, 77, 1, 0, off, cnt, 0);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "type");

  len = make(b, PS_PUSH, 0, 0, off, cnt, cnt * 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "this is shard 1");

  len = make(b, PS_PUSH, 1, 0, off + 1, cnt, cnt * 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "elements 65..101");

  len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4 - 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "payload");

  len = make(b, PS_PUSH, 1, PS_F_SPARSE, off, cnt + 1, (cnt + 1) * 8);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "nonzeros");

  len = make(b, PS_PUSH, 1, PS_F_SPARSE, off, 2, 16);
  uint32_t idx[2] = {0, 36};
  memcpy(b + sizeof(ps_hdr_t), idx, sizeof idx);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "sparse index 36");

  /* a repeated index: the server sums both values into acc[3], then
   * apply_at moves params[3] once per listed index, i.e. twice */
  len = make(b, PS_PUSH, 1, PS_F_SPARSE, off, 3, 24);
  uint32_t dup[3] = {1, 3, 3};
  memcpy(b + sizeof(ps_hdr_t), dup, sizeof dup);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "sparse index 3 after 3 at position 2");
  /* out of order, on a sparse PULL too */
  len = make(b, PS_PULL, 1, PS_F_SPARSE, off, 2, 8);
  uint32_t down[2] = {5, 4};
  memcpy(b + sizeof(ps_hdr_t), down, sizeof down);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "indices must increase");

  len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4);
  h->clock = -5;
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "negative");

  len = make(b, PS_PUSH, 1, 0x80, off, cnt, cnt * 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "flags");

  /* STOP belongs on PARAMS only, FINAL on a dense PULL only */
  len = make(b, PS_PUSH, 1, PS_F_STOP, off, cnt, cnt * 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "STOP");
  len = make(b, PS_PARAMS, 1, PS_F_STOP, off, cnt, cnt * 4);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
  len = make(b, PS_PUSH, 1, PS_F_FINAL, off, cnt, cnt * 4);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "FINAL");
  len = make(b, PS_PULL, 1, PS_F_FINAL, off, cnt, 0);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
}

TEST(every_single_byte_flip_of_the_header_is_caught_or_harmless) {
  /* Flip each header byte of a valid PUSH: either the check rejects it,
   * or the message still describes a legal PUSH to this shard (clock,
   * version, held_s, staleness are the server's business). */
  static unsigned char b[4096];
  char why[200];
  size_t off = 64, cnt = 36;
  for (size_t i = 0; i < sizeof(ps_hdr_t); i++) {
    size_t len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4);
    b[i] ^= 0x40;
    int rc = ps_proto_check(b, len, 1, off, cnt, why, sizeof why);
    ps_hdr_t h;
    memcpy(&h, b, sizeof h);
    if (rc == 0)
      CHECK_MSG(h.magic == PS_MAGIC && h.type == PS_PUSH && h.shard == 1 && h.offset == off &&
                    h.count == cnt && h.flags == 0,
                "byte %zu flipped, still accepted", i);
  }
}

/* compress: fp16 pushes carry 2 B per element; the flag belongs on a
 * dense PUSH only, and the payload must be the halves' length. */
TEST(fp16_push_form_is_checked) {
  static unsigned char b[4096];
  char why[200];
  size_t off, cnt;
  ps_shard_range(100, 2, 1, &off, &cnt);
  size_t len = make(b, PS_PUSH, 1, PS_F_FP16, off, cnt, cnt * 2);
  CHECK_OK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why));
  len = make(b, PS_PUSH, 1, PS_F_FP16, off, cnt, cnt * 4); /* float32 length */
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "payload");
  len = make(b, PS_PULL, 1, PS_F_FP16, off, cnt, 0);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "FP16 flag on a PULL");
  len = make(b, PS_PUSH, 1, PS_F_FP16 | PS_F_SPARSE, off, 1, 8);
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "FP16 flag on a sparse PUSH");
}

/* Slices: whole multiples of 16 floats, the last one shorter; 0 bytes or
 * a slice at least the shard is one slice. */
TEST(slices_cover_the_shard_aligned) {
  CHECK_EQ_INT(ps_slice_elems(25450, 16384), 4096);
  CHECK_EQ_INT(ps_slice_count(25450, 4096), 7);
  CHECK_EQ_INT(ps_slice_elems(25450, 0), 25450);
  CHECK_EQ_INT(ps_slice_elems(25450, 1 << 20), 25450);
  CHECK_EQ_INT(ps_slice_count(25450, 25450), 1);
  CHECK_EQ_INT(ps_slice_elems(1000, 10), PS_SHARD_ALIGN); /* never below 64 B */
  CHECK_EQ_INT(ps_slice_elems(1000, 100), 16);            /* 25 floats, down to 16 */
  CHECK_EQ_INT(ps_slice_count(0, 0), 1);                  /* an empty shard: one empty slice */
}

/* A sliced shard takes exactly its slices as dense PUSH/PARAMS, and the
 * whole shard only as a PULL. */
/* Pushes go slice-major over the shards (every server's link starts at
 * once), uneven shards included; push j waits for the reply window * S
 * pushes back. */
TEST(push_order_interleaves_shards_and_window_lags) {
  const int nsl[3] = {3, 1, 2};
  int k[6] = {0}, sl[6] = {0};
  CHECK_EQ_INT(ps_push_order(3, nsl, k, sl), 6);
  const int wk[6] = {0, 1, 2, 0, 2, 0}, wsl[6] = {0, 0, 0, 1, 1, 2};
  for (int j = 0; j < 6; j++) {
    CHECK_MSG(k[j] == wk[j] && sl[j] == wsl[j], "push %d: shard %d slice %d, expected %d %d", j,
              k[j], sl[j], wk[j], wsl[j]);
  }
  CHECK_EQ_INT(ps_window_lag(2, 1, 3), -1); /* the first S pushes go at once */
  CHECK_EQ_INT(ps_window_lag(3, 1, 3), 0);
  CHECK_EQ_INT(ps_window_lag(5, 1, 3), 2);
  CHECK_EQ_INT(ps_window_lag(5, 2, 3), -1);
  CHECK_EQ_INT(ps_window_lag(7, 2, 3), 1);
  CHECK_EQ_INT(ps_window_lag(100, 0, 3), -1); /* 0: no limit */
}

TEST(sliced_check_takes_slices_only) {
  static unsigned char b[4096];
  char why[200];
  size_t off = 64, cnt = 100, el = 32; /* slices 64..96, 96..128, 128..160, 160..164 */
  size_t len = make(b, PS_PUSH, 1, 0, off + 32, 32, 128);
  CHECK_OK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why));
  len = make(b, PS_PARAMS, 1, 0, off + 96, 4, 16);
  CHECK_OK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why));
  len = make(b, PS_PULL, 1, 0, off, cnt, 0);
  CHECK_OK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why));
  len = make(b, PS_PUSH, 1, 0, off + 16, 32, 128); /* not on a slice boundary */
  CHECK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why) == SG_EPROTO);
  CHECK_STR_CONTAINS(why, "in slices of 32");
  len = make(b, PS_PUSH, 1, 0, off + 32, 16, 64); /* half a slice */
  CHECK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why) == SG_EPROTO);
  len = make(b, PS_PUSH, 1, 0, off + 96, 32, 128); /* the short last slice, too long */
  CHECK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why) == SG_EPROTO);
  len = make(b, PS_PUSH, 1, 0, off + 128, 0, 0); /* past the shard */
  CHECK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why) == SG_EPROTO);
  len = make(b, PS_PUSH, 1, 0, off, cnt, cnt * 4); /* the whole shard at once */
  CHECK(ps_proto_check_sliced(b, len, 1, off, cnt, el, why, sizeof why) == SG_EPROTO);
  len = make(b, PS_PUSH, 1, 0, off, 32, 128); /* a slice to an unsliced shard */
  CHECK(ps_proto_check(b, len, 1, off, cnt, why, sizeof why) == SG_EPROTO);
}
