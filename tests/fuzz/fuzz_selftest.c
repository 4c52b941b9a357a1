/* fuzz_selftest.c - a target with planted findings, to show that the
 * replay fails on them: an input starting "CRASH" writes through a null
 * pointer, "ABORT" breaks an invariant, "HANG" never returns, "OVERREAD"
 * reads one byte past the input (found under ASan only). */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size >= 5 && !memcmp(data, "CRASH", 5)) {
    volatile int *volatile p = NULL;
    *p = 1;
  }
  if (size >= 5 && !memcmp(data, "ABORT", 5)) fuzz_require(size == 0);
  if (size >= 4 && !memcmp(data, "HANG", 4))
    for (volatile int spin = 1; spin;) {
    }
  if (size >= 8 && !memcmp(data, "OVERREAD", 8)) {
    volatile uint8_t past = data[size];
    (void)past;
  }
  return 0;
}
