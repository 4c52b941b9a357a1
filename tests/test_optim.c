/* Optimizer: schedule values at chosen steps, the update rule, and that a
 * shard's update equals the same slice of the whole vector's. */
#include <math.h>
#include <string.h>

#include "err.h"
#include "opts.h"
#include "test.h"
#include "workload.h"

static sg_opts_t *opts(const char *sched, const char *warmup) {
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "lr", "0.4");
  sg_opts_set(o, "lr_schedule", sched);
  sg_opts_set(o, "warmup_steps", warmup);
  sg_opts_set(o, "lr_step_epochs", "2");
  sg_opts_set(o, "lr_gamma", "0.5");
  return o;
}

TEST(schedule_warmup_and_constant) {
  sg_opts_t *o = opts("constant", "4");
  sg_optim_t *opt = NULL;
  CHECK_OK(sg_optim_new(&opt, o, 3, 10, 100));
  CHECK_NEAR(sg_optim_lr(opt, 0), 0.1, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 1), 0.2, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 3), 0.4, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 4), 0.4, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 99), 0.4, 1e-12);
  sg_optim_destroy(&opt);
  CHECK(opt == NULL);
  sg_opts_destroy(&o);
}

TEST(schedule_step_decay) {
  sg_opts_t *o = opts("step", "0");
  sg_optim_t *opt = NULL;
  CHECK_OK(sg_optim_new(&opt, o, 3, 10, 100)); /* decay every 2 epochs = 20 steps */
  CHECK_NEAR(sg_optim_lr(opt, 0), 0.4, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 19), 0.4, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 20), 0.2, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 45), 0.1, 1e-12);
  sg_optim_destroy(&opt);
  sg_opts_destroy(&o);
}

TEST(schedule_cosine_with_warmup) {
  sg_opts_t *o = opts("cosine", "10");
  sg_optim_t *opt = NULL;
  CHECK_OK(sg_optim_new(&opt, o, 3, 10, 110));
  CHECK_NEAR(sg_optim_lr(opt, 4), 0.2, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 10), 0.4, 1e-12);
  CHECK_NEAR(sg_optim_lr(opt, 60), 0.2, 1e-12); /* halfway */
  CHECK_NEAR(sg_optim_lr(opt, 110), 0.0, 1e-12); /* end */
  CHECK(sg_optim_lr(opt, 109) > 0.0 && sg_optim_lr(opt, 109) < 1e-3);
  sg_optim_destroy(&opt);
  sg_opts_set(o, "lr_schedule", "linear");
  CHECK_EQ_INT(sg_optim_new(&opt, o, 3, 10, 110), SG_ECONFIG);
  CHECK_STR_CONTAINS(sg_err_msg(), "lr_schedule");
  sg_opts_destroy(&o);
}

TEST(update_rule_momentum_weight_decay) {
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "lr", "0.5");
  sg_opts_set(o, "momentum", "0.5");
  sg_opts_set(o, "weight_decay", "0.25");
  sg_optim_t *opt = NULL;
  CHECK_OK(sg_optim_new(&opt, o, 2, 10, 100));
  float p[2] = {1.0f, -2.0f}, g[2] = {0.5f, 1.0f};
  /* step 0: v = g + wd p = {0.75, 0.5}; p -= 0.5 v -> {0.625, -2.25} */
  sg_optim_apply(opt, p, g, 0);
  CHECK(p[0] == 0.625f && p[1] == -2.25f);
  /* step 1: v = 0.5 v + g + wd p = {0.375+0.5+0.15625, 0.25+1-0.5625} */
  sg_optim_apply(opt, p, g, 1);
  CHECK_NEAR(p[0], 0.625 - 0.5 * 1.03125, 1e-7);
  CHECK_NEAR(p[1], -2.25 - 0.5 * 0.6875, 1e-7);
  sg_optim_destroy(&opt);
  /* plain SGD */
  sg_opts_set(o, "momentum", "0");
  sg_opts_set(o, "weight_decay", "0");
  CHECK_OK(sg_optim_new(&opt, o, 2, 10, 100));
  float q[2] = {1.0f, 1.0f};
  sg_optim_apply(opt, q, g, 0);
  CHECK(q[0] == 0.75f && q[1] == 0.5f);
  sg_optim_destroy(&opt);
  sg_opts_destroy(&o);
}

TEST(shard_update_equals_slice) {
  enum { n = 1003, cut = 400 };
  sg_opts_t *o = sg_opts_new();
  sg_opts_set(o, "lr", "0.1");
  sg_opts_set(o, "momentum", "0.9");
  sg_opts_set(o, "weight_decay", "0.001");
  sg_opts_set(o, "warmup_steps", "3");
  sg_optim_t *whole = NULL, *lo = NULL, *hi = NULL;
  CHECK_OK(sg_optim_new(&whole, o, n, 10, 100));
  CHECK_OK(sg_optim_new(&lo, o, cut, 10, 100));
  CHECK_OK(sg_optim_new(&hi, o, n - cut, 10, 100));
  float a[n], b[n], g[n];
  for (int i = 0; i < n; i++) {
    a[i] = b[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    g[i] = (float)((i * 13) % 29) / 14.0f - 1.0f;
  }
  for (int step = 0; step < 5; step++) {
    sg_optim_apply(whole, a, g, step);
    sg_optim_apply(lo, b, g, step);
    sg_optim_apply(hi, b + cut, g + cut, step);
  }
  CHECK(memcmp(a, b, sizeof a) == 0);
  sg_optim_destroy(&whole);
  sg_optim_destroy(&lo);
  sg_optim_destroy(&hi);
  sg_opts_destroy(&o);
}

/* The PS server's sparse path: with plain SGD, the update at the nonzero
 * coordinates alone is bit-equal to the whole update (a planted change of
 * one coordinate's arithmetic would show in the memcmp); with momentum or
 * weight decay the optimizer says it is not exact. */
TEST(update_at_nonzero_coordinates_equals_whole_update) {
  enum { n = 500 };
  sg_opts_t *o = opts("cosine", "2");
  sg_optim_t *whole = NULL, *at = NULL, *mom = NULL;
  CHECK_OK(sg_optim_new(&whole, o, n, 10, 100));
  CHECK_OK(sg_optim_new(&at, o, n, 10, 100));
  CHECK(sg_optim_sparse_exact(at));
  float a[n], b[n], g[n];
  uint32_t idx[n];
  size_t m = 0;
  for (int i = 0; i < n; i++) {
    a[i] = b[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    g[i] = i % 7 ? 0.0f : (float)((i * 13) % 29) / 14.0f - 1.0f;
    if (g[i] != 0.0f) idx[m++] = (uint32_t)i;
  }
  for (int step = 0; step < 5; step++) {
    sg_optim_apply(whole, a, g, step);
    sg_optim_apply_at(at, b, g, idx, m, step);
  }
  CHECK(memcmp(a, b, sizeof a) == 0);
  sg_opts_set(o, "momentum", "0.5");
  CHECK_OK(sg_optim_new(&mom, o, n, 10, 100));
  CHECK(!sg_optim_sparse_exact(mom));
  sg_optim_destroy(&mom);
  sg_opts_set(o, "momentum", "0");
  sg_opts_set(o, "weight_decay", "0.01");
  CHECK_OK(sg_optim_new(&mom, o, n, 10, 100));
  CHECK(!sg_optim_sparse_exact(mom));
  sg_optim_destroy(&mom);
  sg_optim_destroy(&whole);
  sg_optim_destroy(&at);
  sg_opts_destroy(&o);
}
