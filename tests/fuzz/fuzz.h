/* fuzz.h - what every fuzz target shares.
 *
 * A target is one file, fuzz_<name>.c, defining the libFuzzer entry point
 *
 *   int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
 *
 * that feeds `data` to one reader and returns 0.  A crash, a sanitizer
 * report, a leak or a broken invariant (fuzz_require) is a finding.  The
 * same file links either with fuzz_replay.c (CTest: every file of
 * tests/fuzz/corpus/<name>/ once) or with libFuzzer (-DSGDLAB_FUZZ=ON).
 * tests/fuzz.cmake lists the targets; docs/fuzzing.md says how to run them.
 */
#ifndef SG_FUZZ_H
#define SG_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path that names a file holding `data` (gzip-compressed when gz).
 * Slot k (0..3) is one in-memory file, rewritten by each call; nothing
 * touches the disk and nothing is left behind. */
const char *fuzz_file(int slot, const void *data, size_t size, int gz);

/* A broken invariant: print what and where, then abort (a finding). */
#define fuzz_require(cond)                                                        \
  do {                                                                            \
    if (!(cond)) fuzz_fail_(__FILE__, __LINE__, #cond);                           \
  } while (0)
_Noreturn void fuzz_fail_(const char *file, int line, const char *what);

#endif
