/* fuzz_replay.c - run a fuzz target over files, without libFuzzer.
 *
 *   fuzz_<name>_replay PATH...   (a PATH that is a directory: its files)
 *
 * Every file is read into a buffer of exactly its size (so an overread is
 * an ASan report) and passed once to LLVMFuzzerTestOneInput; allocations
 * are capped near 1 GiB (limit_memory).  Exit 0 when
 * all ran; a crash, a sanitizer report or an input running longer than
 * FUZZ_REPLAY_TIMEOUT seconds (default 10) fails, naming the input.  No
 * input at all fails too: an empty corpus would otherwise pass.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"

/* The input being run, for the messages of the crash paths. */
static const char *current = "(none)";
static unsigned timeout_s = 10;

/* Present when a sanitizer runtime is linked: it then reports crashes
 * itself and calls back before it exits. */
extern void __sanitizer_set_death_callback(void (*cb)(void)) __attribute__((weak));
extern int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* A UBSan report stops the run (UBSan goes on by default) with abort(),
 * which on_signal turns into the input's name: GCC's UBSan runtime does
 * not call the death callback.  Read by the runtime when one is linked. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) {
  return "halt_on_error=1:abort_on_error=1:print_stacktrace=1";
}

/* An allocation sized from a header rather than from the data is a
 * finding: ASan refuses single allocations over 1 GiB (as libFuzzer's
 * -malloc_limit_mb does), and without ASan limit_memory() caps the address
 * space.  No corpus input needs anywhere near that much. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=1024"; }

static void limit_memory(void) {
  long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return;
  int ok = fscanf(f, "%ld", &pages) == 1;
  fclose(f);
  rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)1 << 30);
  struct rlimit rl = {lim, lim};
  if (ok) setrlimit(RLIMIT_AS, &rl);
}

static void say(const char *a, const char *b) {
  /* async-signal-safe */
  if (write(2, a, strlen(a)) < 0 || write(2, b, strlen(b)) < 0 || write(2, "\n", 1) < 0) return;
}

static void on_death(void) { say("fuzz_replay: sanitizer report on ", current); }

static void on_signal(int sig) {
  switch (sig) {
  case SIGALRM: say("fuzz_replay: timed out (FUZZ_REPLAY_TIMEOUT) on ", current); break;
  case SIGABRT: say("fuzz_replay: SIGABRT on ", current); break;
  case SIGSEGV: say("fuzz_replay: SIGSEGV on ", current); break;
  case SIGBUS: say("fuzz_replay: SIGBUS on ", current); break;
  case SIGFPE: say("fuzz_replay: SIGFPE on ", current); break;
  default: say("fuzz_replay: SIGILL on ", current); break;
  }
  _exit(128 + sig); /* a status, as a shell reports it, so a test can read the message */
}

static void install_handlers(void) {
  const char *t = getenv("FUZZ_REPLAY_TIMEOUT");
  if (t && atoi(t) > 0) timeout_s = (unsigned)atoi(t);
  signal(SIGALRM, on_signal);
  signal(SIGABRT, on_signal);
  if (__sanitizer_set_death_callback) {
    __sanitizer_set_death_callback(on_death);
    return;
  }
  limit_memory(); /* ASan reserves terabytes of address space up front */
  signal(SIGSEGV, on_signal);
  signal(SIGBUS, on_signal);
  signal(SIGFPE, on_signal);
  signal(SIGILL, on_signal);
}

/* Run one file; 0, or -1 when it cannot be read. */
static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (!f || fstat(fileno(f), &st) < 0) {
    fprintf(stderr, "fuzz_replay: %s: cannot open\n", path);
    if (f) fclose(f);
    return -1;
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n ? n : 1);
  if (!buf || fread(buf, 1, n, f) != n) {
    fprintf(stderr, "fuzz_replay: %s: cannot read\n", path);
    free(buf);
    fclose(f);
    return -1;
  }
  fclose(f);
  current = path;
  alarm(timeout_s);
  LLVMFuzzerTestOneInput(buf, n);
  alarm(0);
  current = "(none)";
  free(buf);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
  return strcmp((*a)->d_name, (*b)->d_name);
}

/* Every regular file of a directory, in name order; returns how many ran. */
static long run_dir(const char *dir) {
  struct dirent **ents;
  int n = scandir(dir, &ents, NULL, by_name);
  if (n < 0) {
    fprintf(stderr, "fuzz_replay: %s: cannot list\n", dir);
    return -1;
  }
  long ran = 0;
  for (int i = 0; i < n; i++) {
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
    if (ran >= 0 && ents[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
      ran = run_file(path) < 0 ? -1 : ran + 1;
    free(ents[i]);
  }
  free(ents);
  return ran;
}

int main(int argc, char **argv) {
  long total = 0;
  install_handlers();
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  for (int i = 1; i < argc; i++) {
    struct stat st;
    long ran = stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode) ? run_dir(argv[i])
                                                              : (run_file(argv[i]) < 0 ? -1 : 1);
    if (ran < 0) return 2;
    total += ran;
  }
  if (total == 0) {
    fprintf(stderr, "fuzz_replay: no inputs (usage: %s FILE|DIR...)\n", argv[0]);
    return 2;
  }
  printf("fuzz_replay: %ld inputs, no findings\n", total);
  return 0;
}
