/* Options store and settings-table validation. */
#include "err.h"
#include "opts.h"
#include "settings.h"
#include "test.h"

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
