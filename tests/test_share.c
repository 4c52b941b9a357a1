/* test_share.c - staged copies of deferred simulated sends (core/share.c,
 * sg_share_stage), outside a simulation.
 *
 * share.c is built into the test itself, against SimGrid's headers, with
 * SimGrid's two entry points replaced here: smpi_comm_set_copy_data_callback
 * keeps the callback it is given, and SMPI's own copy (the C++
 * smpi_comm_copy_buffer_callback) copies the staged message into the
 * receive buffer named by the test.  The test then plays SMPI: it stages
 * a message, copies it through the callback and checks what arrived.
 *
 *  - the own parts (offsets from the message's start, sg_fold_private)
 *    land at those offsets of the copy: parts at 0 and 200 of 4 KiB, and
 *    the two headers of a message of two folded frames (sg_frames_private),
 *    which then survive the sender rewriting its buffer;
 *  - nown < 0: all of it; nown 0: none of it;
 *  - a copy is done, and the sender's count grows, only once SMPI has
 *    copied it; another buffer's copy marks nothing;
 *  - sg_share_stage_free frees a done copy only.
 */
#include "test.h"

#include "../core/share.c"
#include "msgbuf.h"

static void (*copy_cb)(smx_activity_t, void *, size_t);
static unsigned char *copy_to; /* where SMPI's copy writes (the receiver) */

void smpi_comm_set_copy_data_callback(void (*callback)(smx_activity_t, void *, size_t)) {
  copy_cb = callback;
}

/* share.c's smpi_copy_buffer (SMPI's copy): into copy_to */
void smpi_copy_buffer(smx_activity_t comm, void *buff, size_t n) {
  (void)comm;
  if (copy_to) memcpy(copy_to, buff, n);
}

/* Fill buf[0, n) with a pattern no stretch of the heap holds by chance. */
static void pattern(unsigned char *buf, size_t n) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(i * 7 + 1);
}

/* Where the copy differs from the message in own[] parts: the offset, or
 * -1 when every own byte arrived. */
static long long first_wrong(const unsigned char *copy, const unsigned char *buf,
                             const size_t *own, int nown) {
  for (int p = 0; p < nown; p++)
    for (size_t i = own[2 * p]; i < own[2 * p + 1]; i++)
      if (copy[i] != buf[i]) return (long long)i;
  return -1;
}

/* Parts at offsets 0 and 200 of a 4 KiB message. */
TEST(own_parts_land_at_their_offsets) {
  unsigned char buf[4096];
  pattern(buf, sizeof buf);
  const size_t own[4] = {0, 16, 200, 264};
  int delivered = 0;
  unsigned char *copy = sg_share_stage(buf, sizeof buf, own, 2, &delivered);
  CHECK(copy);
  long long at = first_wrong(copy, buf, own, 2);
  free(stage_of(copy));
  CHECK_MSG(at < 0, "byte %lld of the staged copy is not the message's", at);
}

/* The parts sg_fold_private finds for a message of two folded frames from
 * 40 bytes into the first: the rest of the first header and the whole
 * second one, at 99,960; the sender then rewrites its buffer. */
TEST(two_frames_headers_staged) {
  enum { HDR = 64, FRAME = HDR + 100000 };
  const size_t bytes = 2 * (size_t)FRAME, n = bytes - 40;
  size_t own[8];
  int nown = sg_frames_private(bytes, FRAME, HDR, 40, n, own, 4);
  CHECK_EQ_INT(nown, 2);
  CHECK(own[2] == FRAME - 40 && own[3] == FRAME - 40 + HDR);
  unsigned char *buf = malloc(bytes);
  CHECK(buf);
  pattern(buf, bytes);
  int delivered = 0;
  unsigned char *copy = sg_share_stage(buf + 40, n, own, nown, &delivered);
  CHECK(copy);
  long long at = first_wrong(copy, buf + 40, own, nown);
  memset(buf, 0, bytes); /* rewritten: the copy keeps the message */
  CHECK_MSG(at < 0, "byte %lld of the staged copy is not the message's", at);
  CHECK(copy[FRAME - 40] == (unsigned char)(FRAME * 7 + 1));
  free(buf);
  CHECK(sg_share_stage_done(copy) == 0);
  sg_share_stage_free(copy); /* not done: kept */
  CHECK(sg_share_stage_done(copy) == 0);
  free(stage_of(copy));
}

TEST(all_or_nothing) {
  unsigned char buf[300], *copy;
  for (int i = 0; i < 300; i++) buf[i] = (unsigned char)(i + 3);
  int delivered = 0;
  CHECK((copy = sg_share_stage(buf, sizeof buf, NULL, -1, &delivered)));
  CHECK(!memcmp(copy, buf, sizeof buf));
  free(stage_of(copy));
  /* nown 0: a folded block's bytes, never read: a copy to stage, nothing in it */
  CHECK((copy = sg_share_stage(buf, sizeof buf, NULL, 0, &delivered)));
  free(stage_of(copy));
}

TEST(done_once_smpi_has_copied_it) {
  sg_share_stage_hook();
  CHECK(copy_cb);
  unsigned char msg[64], other[64], recv[64];
  memset(msg, 0xab, sizeof msg);
  memset(recv, 0, sizeof recv);
  int delivered = 0;
  const size_t own[2] = {0, sizeof msg};
  void *a = sg_share_stage(msg, sizeof msg, own, 1, &delivered);
  void *b = sg_share_stage(msg, sizeof msg, own, 1, &delivered);
  CHECK(a && b && a != b);
  /* SMPI copies a buffer that is no staged copy: nothing is marked */
  copy_to = recv;
  copy_cb(NULL, other, sizeof other);
  CHECK_EQ_INT(delivered, 0);
  CHECK(!sg_share_stage_done(a) && !sg_share_stage_done(b));
  /* then b's: b alone is done, and the message reached the receiver */
  copy_cb(NULL, b, sizeof msg);
  copy_to = NULL;
  CHECK_EQ_INT(delivered, 1);
  CHECK(sg_share_stage_done(b) && !sg_share_stage_done(a));
  CHECK(!memcmp(recv, msg, sizeof msg));
  sg_share_stage_free(b);
  /* a copied twice would count twice: it is out of the table once done */
  copy_cb(NULL, a, sizeof msg);
  copy_cb(NULL, a, sizeof msg);
  CHECK_EQ_INT(delivered, 2);
  sg_share_stage_free(a);
}
