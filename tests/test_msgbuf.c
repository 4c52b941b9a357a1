/* test_msgbuf.c - which bytes of a message a deferred send stages under
 * compute: modeled (sg_frames_private, core/msgbuf.h): a framed buffer's
 * headers and its payloads under SG_MSG_FOLD_MIN are the rank's own and
 * must reach the receiver; a folded payload is never read and is not
 * copied.
 *
 *  - a whole folded block: nothing of its own;
 *  - one frame, or one slice of a sliced buffer: its header only;
 *  - two frames: two headers, at their offsets from the message's start;
 *  - a frame whose payload is under SG_MSG_FOLD_MIN: all of it (it was
 *    never folded), and a short last frame too;
 *  - a message starting inside a payload, or running past the buffer,
 *    or with more own parts than the caller has room for: -1 (copy all).
 */
#include "test.h"

#include "msgbuf.h"

enum { HDR = 64, BIG = 100000 + HDR };

TEST(whole_block_has_nothing_of_its_own) {
  size_t at[8];
  CHECK_EQ_INT(sg_frames_private(1 << 20, 0, 0, 4096, 8192, at, 4), 0);
}

TEST(one_frame_is_its_header) {
  size_t at[8];
  CHECK_EQ_INT(sg_frames_private(BIG, BIG, HDR, 0, BIG, at, 4), 1);
  CHECK(at[0] == 0 && at[1] == HDR);
  /* the fourth slice of a sliced buffer */
  CHECK_EQ_INT(sg_frames_private(10 * (size_t)BIG, BIG, HDR, 3 * (size_t)BIG, BIG, at, 4), 1);
  CHECK(at[0] == 0 && at[1] == HDR);
}

TEST(two_frames_are_two_headers) {
  size_t at[8];
  CHECK_EQ_INT(sg_frames_private(4 * (size_t)BIG, BIG, HDR, BIG, 2 * (size_t)BIG, at, 4), 2);
  CHECK(at[0] == 0 && at[1] == HDR && at[2] == BIG && at[3] == BIG + HDR);
}

TEST(small_payloads_are_all_own) {
  size_t at[8], small = HDR + SG_MSG_FOLD_MIN - 1;
  CHECK_EQ_INT(sg_frames_private(3 * small, small, HDR, small, small, at, 4), 1);
  CHECK(at[0] == 0 && at[1] == small);
  /* two small frames merge into one part */
  CHECK_EQ_INT(sg_frames_private(3 * small, small, HDR, 0, 2 * small, at, 4), 1);
  CHECK(at[0] == 0 && at[1] == 2 * small);
  /* a big frame, then a short last one: header, then all of the last */
  size_t bytes = BIG + HDR + 100;
  CHECK_EQ_INT(sg_frames_private(bytes, BIG, HDR, 0, bytes, at, 4), 2);
  CHECK(at[0] == 0 && at[1] == HDR && at[2] == BIG && at[3] == bytes);
}

TEST(inside_a_payload_a_part_of_the_header_is_clipped) {
  size_t at[8];
  /* from byte 10 of the first frame to the end of the second */
  CHECK_EQ_INT(sg_frames_private(2 * (size_t)BIG, BIG, HDR, 10, 2 * (size_t)BIG - 10, at, 4), 2);
  CHECK(at[0] == 0 && at[1] == HDR - 10 && at[2] == BIG - 10 && at[3] == BIG + HDR - 10);
}

TEST(past_the_end_or_too_many_parts_copy_all) {
  size_t at[8];
  CHECK_EQ_INT(sg_frames_private(BIG, BIG, HDR, 1, BIG, at, 4), -1);
  CHECK_EQ_INT(sg_frames_private(8 * (size_t)BIG, BIG, HDR, 0, 8 * (size_t)BIG, at, 4), -1);
  CHECK_EQ_INT(sg_frames_private(8 * (size_t)BIG, BIG, HDR, 0, 4 * (size_t)BIG, at, 4), 4);
}

TEST(outside_a_simulation_nothing_is_folded) {
  size_t at[8];
  char buf[16] = {0};
  CHECK_EQ_INT(sg_fold_private(buf, sizeof buf, at, 4), -1);
}
