/* fuzz_records.c - the harness's record decoder (sg_rec_decode).
 *
 * The input is one message as it arrives on the harness's record socket.
 * A record the decoder accepts must be safe to use the way the harness
 * uses it: a fixed-size struct copied out, or NUL-terminated strings
 * within the payload; the checks below read exactly that and nothing more
 * (an over-read shows as an ASan report).
 */
#include <string.h>

#include "fuzz.h"
#include "records.h"

static volatile size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  sg_rec_header_t h;
  const unsigned char *p;
  for (int nprocs = 1; nprocs <= 1024; nprocs *= 32) {
    if (sg_rec_decode(data, size, nprocs, &h, &p) < 0) continue;
    fuzz_require(h.rank >= 0 && h.rank < nprocs);
    fuzz_require(size == sizeof h + h.len && p == data + sizeof h);
    switch (h.type) {
    case SG_REC_INFO: {
      size_t kl = strlen((const char *)p);
      fuzz_require(kl < h.len);
      sink += strlen((const char *)p + kl + 1);
      fuzz_require(kl + 1 + strlen((const char *)p + kl + 1) + 1 == h.len);
      break;
    }
    case SG_REC_DONE:
      fuzz_require(h.len >= sizeof(sg_rec_done_t));
      sink += strlen((const char *)p + sizeof(sg_rec_done_t));
      break;
    case SG_REC_HELLO:
    case SG_REC_STEP:
    case SG_REC_EVAL:
    case SG_REC_BENCH:
    case SG_REC_BUCKET: {
      fuzz_require(h.type != SG_REC_BUCKET || h.len == sizeof(sg_bucket_rec_t));
      unsigned char copy[512];
      fuzz_require(h.len <= sizeof copy);
      memcpy(copy, p, h.len);
      sink += copy[0];
      break;
    }
    default:
      fuzz_require(!"an unknown record type was accepted");
    }
  }
  return 0;
}
