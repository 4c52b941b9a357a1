/* test.h - a minimal test runner: every check can fail, and says where.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ_INT(a, b); ... }
 *   (main() comes from test_main.c, linked into every test binary)
 *
 * Each binary runs all its tests (or those named on the command line) and
 * prints "N passed, N failed".  CTest adds the timeout.
 */
#ifndef SG_TEST_H
#define SG_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*test_fn)(void);
struct test_case {
  const char *name;
  test_fn fn;
};
#define TEST_MAX 256
extern struct test_case test_cases_[TEST_MAX];
extern int test_count_, test_failed_now_;

#define TEST(tname)                                                    \
  static void test_##tname(void);                                      \
  __attribute__((constructor)) static void test_reg_##tname(void) {    \
    test_cases_[test_count_].name = #tname;                            \
    test_cases_[test_count_++].fn = test_##tname;                      \
  }                                                                    \
  static void test_##tname(void)

#define CHECK(cond)                                                    \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
              #cond);                                                  \
      test_failed_now_ = 1;                                            \
      return;                                                          \
    }                                                                  \
  } while (0)

#define CHECK_MSG(cond, ...)                                           \
  do {                                                                 \
    if (!(cond)) {                                                     \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, \
              #cond);                                                  \
      fprintf(stderr, __VA_ARGS__);                                    \
      fputc('\n', stderr);                                             \
      test_failed_now_ = 1;                                            \
      return;                                                          \
    }                                                                  \
  } while (0)

#define CHECK_EQ_INT(a, b)                                             \
  do {                                                                 \
    long long a_ = (long long)(a), b_ = (long long)(b);                \
    CHECK_MSG(a_ == b_, "%lld != %lld", a_, b_);                       \
  } while (0)

#define CHECK_OK(expr)                                                 \
  do {                                                                 \
    int rc_ = (expr);                                                  \
    CHECK_MSG(rc_ == 0, "returned %d (%s)", rc_, sg_err_msg());        \
  } while (0)

#define CHECK_NEAR(a, b, tol)                                          \
  do {                                                                 \
    double a_ = (a), b_ = (b);                                         \
    CHECK_MSG(fabs(a_ - b_) <= (tol), "%.9g vs %.9g (tol %g)", a_, b_, \
              (double)(tol));                                          \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                \
  do {                                                                 \
    const char *h_ = (hay);                                            \
    CHECK_MSG(h_ && strstr(h_, (needle)), "'%s' does not contain '%s'", \
              h_ ? h_ : "(null)", (needle));                           \
  } while (0)

int test_main(int argc, char **argv);

#ifdef TEST_IMPLEMENTATION
struct test_case test_cases_[TEST_MAX];
int test_count_, test_failed_now_;
int test_main(int argc, char **argv) {
  int passed = 0, failed = 0;
  /* a case named on the command line must exist: a misspelt name would
   * run nothing and pass */
  for (int a = 1; a < argc; a++) {
    int known = 0;
    for (int i = 0; i < test_count_; i++) known |= strcmp(argv[a], test_cases_[i].name) == 0;
    if (!known) {
      fprintf(stderr, "no test case named '%s'\n", argv[a]);
      failed++;
    }
  }
  for (int i = 0; i < test_count_; i++) {
    int selected = argc <= 1;
    for (int a = 1; a < argc; a++)
      if (strcmp(argv[a], test_cases_[i].name) == 0) selected = 1;
    if (!selected) continue;
    test_failed_now_ = 0;
    fprintf(stderr, "[ RUN  ] %s\n", test_cases_[i].name);
    struct timespec t0_, t1_;
    clock_gettime(CLOCK_MONOTONIC, &t0_);
    test_cases_[i].fn();
    clock_gettime(CLOCK_MONOTONIC, &t1_);
    /* each case's wall time, for the suite's time budget (never checked) */
    double s_ = (double)(t1_.tv_sec - t0_.tv_sec) + 1e-9 * (double)(t1_.tv_nsec - t0_.tv_nsec);
    if (test_failed_now_) {
      failed++;
      fprintf(stderr, "[ FAIL ] %s (%.1f s)\n", test_cases_[i].name, s_);
    } else {
      passed++;
      fprintf(stderr, "[  OK  ] %s (%.1f s)\n", test_cases_[i].name, s_);
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
#endif

#endif
