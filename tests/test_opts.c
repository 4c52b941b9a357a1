/* Options store and settings-table validation. */
#include "deadline.h"
#include "err.h"
#include "opts.h"
#include "settings.h"
#include "test.h"

#include <string.h>
#include <unistd.h>

TEST(opts_typed_getters) {
  sg_opts_t *o = sg_opts_new();
  CHECK_OK(sg_opts_set(o, "batch", "64"));
  CHECK_OK(sg_opts_set(o, "lr", "0.05"));
  CHECK_OK(sg_opts_set(o, "hidden", "256,128"));
  CHECK_OK(sg_opts_set(o, "size", "4M"));
  int64_t b, h[4], sz;
  size_t n;
  double lr;
  CHECK_OK(sg_opts_int(o, "batch", &b));
  CHECK_EQ_INT(b, 64);
  CHECK_OK(sg_opts_double(o, "lr", &lr));
  CHECK(lr == 0.05);
  CHECK_OK(sg_opts_intlist(o, "hidden", h, 4, &n));
  CHECK_EQ_INT(n, 2);
  CHECK_EQ_INT(h[0], 256);
  CHECK_EQ_INT(h[1], 128);
  CHECK_OK(sg_opts_int(o, "size", &sz));
  CHECK_EQ_INT(sz, 4 << 20);
  CHECK(sg_opts_int(o, "lr", &b) == SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "lr");
  CHECK(sg_opts_int(o, "absent", &b) == SG_ECONFIG);
  sg_opts_destroy(&o);
  CHECK(o == NULL);
}

TEST(opts_save_load_roundtrip) {
  sg_opts_t *o = sg_opts_new(), *p = NULL;
  CHECK_OK(sg_opts_set(o, "a", "1"));
  CHECK_OK(sg_opts_set(o, "b", "x y=z"));
  char path[] = "/tmp/sgdlab-opts-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  CHECK_OK(sg_opts_save(o, path));
  CHECK_OK(sg_opts_load(&p, path));
  unlink(path);
  CHECK_EQ_INT(sg_opts_count(p), 2);
  CHECK(strcmp(sg_opts_get(p, "b"), "x y=z") == 0);
  char *json = sg_opts_json(p);
  CHECK(strcmp(json, "{\"a\":1,\"b\":\"x y=z\"}") == 0);
  free(json);
  sg_opts_destroy(&o);
  sg_opts_destroy(&p);
}

/* The spec file is one key=value per line: a value longer than a line
 * buffer must not turn its tail into a key ("_keys=", "dataset="), and
 * nothing that would need a second line is written at all. */
TEST(opts_spec_lines_cannot_carry_another_key) {
  sg_opts_t *o = sg_opts_new(), *p = NULL;
  static char longv[20000];
  memset(longv, 'x', 8181);
  strcpy(longv + 8181, "dataset=mnist");
  CHECK_OK(sg_opts_set(o, "dataset", "fashion-mnist"));
  CHECK_OK(sg_opts_set(o, "test_file", longv));
  char path[] = "/tmp/sgdlab-opts-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  CHECK_OK(sg_opts_save(o, path));
  CHECK_OK(sg_opts_load(&p, path));
  CHECK_EQ_INT(sg_opts_count(p), 2);
  CHECK(strcmp(sg_opts_get(p, "dataset"), "fashion-mnist") == 0);
  CHECK(strcmp(sg_opts_get(p, "test_file"), longv) == 0);
  sg_opts_destroy(&p);
  const char *bad[][2] = {{"name", "a\n_keys=/tmp/k"}, {"_keys=x", "y"}, {"a\nb", "c"}, {"", "v"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    sg_opts_t *b = sg_opts_new();
    CHECK_OK(sg_opts_set(b, bad[i][0], bad[i][1]));
    CHECK_MSG(sg_opts_save(b, path) == SG_EINVAL, "case %zu was written", i);
    sg_opts_destroy(&b);
  }
  unlink(path);
  sg_opts_destroy(&o);
}

/* options_json is read back with SQLite's JSON functions: a control byte
 * or a number JSON does not have ("0x10", ".5", "007") made the object
 * invalid and every query over the database failed. */
TEST(opts_json_is_valid_for_any_value) {
  sg_opts_t *o = sg_opts_new();
  const char *vals[] = {"t\tab\x1b[2J\x7f", "0x10", ".5", "1.", "007", "+1", "inf", "-0.5e-3", "12"};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    char k[8];
    snprintf(k, sizeof k, "k%zu", i);
    CHECK_OK(sg_opts_set(o, k, vals[i]));
  }
  char *json = sg_opts_json(o);
  CHECK(json != NULL);
  CHECK_MSG(!strcmp(json, "{\"k0\":\"t\\u0009ab\\u001b[2J\\u007f\",\"k1\":\"0x10\","
                          "\"k2\":\".5\",\"k3\":\"1.\",\"k4\":\"007\",\"k5\":\"+1\","
                          "\"k6\":\"inf\",\"k7\":-0.5e-3,\"k8\":12}"),
            "%s", json);
  free(json);
  sg_opts_destroy(&o);
}

TEST(settings_check) {
  char why[128];
  const sg_setting_t *s = sg_setting_find(sg_settings, "transport");
  CHECK(s != NULL);
  CHECK_OK(sg_setting_check(s, "mpi", why, sizeof why));
  CHECK(sg_setting_check(s, "mp", why, sizeof why) == SG_ECONFIG);
  CHECK_STR_CONTAINS(why, "zmq|mpi");
  s = sg_setting_find(sg_settings, "workers");
  CHECK(sg_setting_check(s, "0", why, sizeof why) == SG_ECONFIG);
  CHECK(sg_setting_check(s, "two", why, sizeof why) == SG_ECONFIG);
  CHECK_OK(sg_setting_check(s, "4", why, sizeof why));
  s = sg_setting_find(sg_settings, "hidden");
  CHECK_OK(sg_setting_check(s, "256,128", why, sizeof why));
  CHECK(sg_setting_check(s, "256,x", why, sizeof why) == SG_ECONFIG);
  CHECK(sg_setting_find(sg_settings, "no_such_key") == NULL);
}

TEST(error_table_names) {
  CHECK(strcmp(sg_errname(SG_ETIMEOUT), "SG_ETIMEOUT") == 0);
  CHECK(strcmp(sg_strerror(SG_ETIMEOUT), "deadline exceeded") == 0);
  CHECK(sg_err_set(SG_EIO, "file %s offset %d", "f", 16) == SG_EIO);
  CHECK(strcmp(sg_err_msg(), "file f offset 16") == 0);
}

/* sg_printable: what every error message goes through.  C0 and C1
 * controls, DEL and bytes that are not UTF-8 become \xHH; printable UTF-8
 * stays; a full buffer ends at a whole character. */
#define CHECK_PRINTABLE(cap, in, want)                                                 \
  do {                                                                                 \
    char out_[64];                                                                     \
    sg_printable(out_, (cap), (in));                                                   \
    CHECK_MSG(!strcmp(out_, (want)), "got '%s' want '%s'", out_, (want));              \
  } while (0)

TEST(printable_escapes_controls_and_keeps_utf8) {
  CHECK_PRINTABLE(64, "a\x1b[31mb\n\t\r\x7f", "a\\x1b[31mb\\n\\t\\r\\x7f");
  CHECK_PRINTABLE(64, "\xc2\x9b" "2J \xff \xc3\xa9 \xe2\x82\xac",
                  "\\xc2\\x9b2J \\xff \xc3\xa9 \xe2\x82\xac");
  CHECK_PRINTABLE(6, "ab\x1b", "ab");
  CHECK_PRINTABLE(4, "a\xc3\xa9", "a\xc3\xa9");
  CHECK_PRINTABLE(3, "a\xc3\xa9", "a");
}

/* Seconds in messages: a 0.05 s deadline reads "0.05", not "0.1". */
TEST(seconds_below_one_keep_two_significant_digits) {
  char b[32];
  CHECK_MSG(!strcmp(sg_fmt_secs(b, 0.05), "0.05"), "%s", b);
  CHECK_MSG(!strcmp(sg_fmt_secs(b, 0.0513), "0.051"), "%s", b);
  CHECK_MSG(!strcmp(sg_fmt_secs(b, 0.5), "0.5"), "%s", b);
  CHECK_MSG(!strcmp(sg_fmt_secs(b, 30.0), "30.0"), "%s", b);
  CHECK_MSG(!strcmp(sg_fmt_secs(b, 1.5), "1.5"), "%s", b);
}

/* Defaults live in the tables: a key the opts lack reads as its entry's
 * default, the engine's table first, then the global one; a key no table
 * has is an error that names it; a value present wins. */
TEST(setting_defaults_come_from_the_tables) {
  static const sg_setting_t tab[] = {
      {"toy_k", SG_T_INT, "7", "test", NULL, 0, 100, SG_S_ENGINE},
      {"toy_f", SG_T_FLOAT, "0.25", "test", NULL, 0, 1, SG_S_ENGINE},
      {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
  };
  sg_opts_t *o = sg_opts_new();
  CHECK(o);
  int64_t i = 0;
  double d = 0;
  const char *s = NULL;
  CHECK_OK(sg_setting_int(o, tab, "toy_k", &i));
  CHECK_EQ_INT(i, 7);
  CHECK_OK(sg_setting_double(o, tab, "toy_f", &d));
  CHECK(d == 0.25);
  CHECK_OK(sg_setting_int(o, tab, "batch", &i)); /* the global table */
  CHECK_EQ_INT(i, 64);
  CHECK_OK(sg_setting_str(o, NULL, "transport", &s));
  CHECK(!strcmp(s, "zmq"));
  CHECK(sg_setting_int(o, tab, "no_such_key", &i) == SG_ECONFIG);
  CHECK(strstr(sg_err_msg(), "no_such_key"));
  CHECK_OK(sg_opts_set(o, "toy_k", "1K"));
  CHECK_OK(sg_setting_int(o, tab, "toy_k", &i));
  CHECK_EQ_INT(i, 1024);
  CHECK_OK(sg_opts_set(o, "toy_f", "x"));
  CHECK(sg_setting_double(o, tab, "toy_f", &d) == SG_ECONFIG);
  sg_opts_destroy(&o);
}

/* The late-read count: lookups by key while frozen are counted, the first
 * key named; none before or after. */
TEST(lookups_while_frozen_are_counted) {
  sg_opts_t *o = sg_opts_new();
  CHECK(o);
  CHECK_OK(sg_opts_set(o, "a", "1"));
  const char *first = NULL;
  long before = sg_opts_late_reads(&first);
  (void)sg_opts_get(o, "a");
  CHECK_EQ_INT(sg_opts_late_reads(NULL), before);
  sg_opts_freeze(1);
  int64_t v;
  CHECK_OK(sg_opts_int(o, "a", &v));
  (void)sg_opts_has(o, "b");
  sg_opts_freeze(0);
  (void)sg_opts_get(o, "a");
  CHECK_EQ_INT(sg_opts_late_reads(&first), before + 2);
  if (before == 0) CHECK(first && !strcmp(first, "a"));
  sg_opts_destroy(&o);
}
