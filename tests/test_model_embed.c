/* test_model_embed.c - hashed embedding + MLP: gradients against finite
 * differences, the table gradient confined to the batch's rows, option
 * errors, determinism. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model_embed.h"
#include "test.h"

enum { F = 3, E = 4, H = 5, N = 6 };
static const int64_t R = 64;

static void batch(uint64_t *keys, int32_t *y) {
  for (int i = 0; i < N; i++) {
    for (int f = 0; f < F; f++) keys[i * F + f] = (uint64_t)(i + 7 * f);
    y[i] = i & 1;
  }
}

/* The full gradient: dense prefix, then the listed rows scattered. */
static double full_grad(sg_embed_t *m, const float *p, float *g) {
  uint64_t keys[N * F];
  int32_t y[N];
  int64_t rows[N * F];
  float rg[N * F * E];
  size_t nr = 0, dl = sg_embed_dense_len(m);
  double loss = 0;
  batch(keys, y);
  memset(g, 0, sg_embed_nparams(m) * sizeof(float));
  if (sg_embed_grad(m, p, N, keys, y, g, rows, &nr, rg, &loss, NULL)) return NAN;
  for (size_t r = 0; r < nr; r++)
    memcpy(g + dl + (size_t)rows[r] * E, rg + r * E, E * sizeof(float));
  return loss;
}

TEST(embed_grad_matches_finite_differences) {
  char err[128];
  sg_embed_t *m = NULL;
  CHECK(sg_embed_new(&m, F, R, E, H, N, err, sizeof err) == 0);
  size_t np = sg_embed_nparams(m);
  float *p = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
  float *g2 = malloc(np * sizeof(float));
  sg_embed_init(m, 11, p);
  double l0 = full_grad(m, p, g);
  CHECK(isfinite(l0));
  int checked = 0, worst = 0;
  for (size_t i = 0; i < np; i += 1) {
    if (g[i] == 0.0f && i >= sg_embed_dense_len(m)) continue;
    float keep = p[i];
    double h = 1e-3;
    p[i] = keep + (float)h;
    double lp = full_grad(m, p, g2);
    p[i] = keep - (float)h;
    double lm = full_grad(m, p, g2);
    p[i] = keep;
    double num = (lp - lm) / (2 * h);
    if (fabs(num - g[i]) > 2e-3 + 2e-2 * fabs(num)) {
      if (!worst) fprintf(stderr, "param %zu: analytic %g numeric %g\n", i, g[i], num);
      worst++;
    }
    checked++;
  }
  CHECK(checked > 20);
  CHECK(worst == 0);
  free(p), free(g), free(g2);
  sg_embed_destroy(&m);
}

TEST(embed_table_gradient_only_on_batch_rows) {
  char err[128];
  sg_embed_t *m = NULL;
  CHECK(sg_embed_new(&m, F, R, E, H, N, err, sizeof err) == 0);
  uint64_t keys[N * F];
  int32_t y[N];
  int64_t rows[N * F];
  float rg[N * F * E];
  size_t nr = 0;
  double loss;
  batch(keys, y);
  float *p = malloc(sg_embed_nparams(m) * sizeof(float));
  float *dg = malloc(sg_embed_dense_len(m) * sizeof(float));
  sg_embed_init(m, 3, p);
  CHECK(sg_embed_grad(m, p, N, keys, y, dg, rows, &nr, rg, &loss, NULL) == 0);
  /* 6 distinct keys in each of 3 fields: at most 18 rows */
  CHECK(nr >= 1 && nr <= 18);
  for (size_t r = 0; r < nr; r++) {
    int found = 0;
    for (int j = 0; j < N * F; j++)
      found |= sg_embed_row(m, j % F, keys[j]) == rows[r];
    CHECK(found);
    if (r) CHECK(rows[r] > rows[r - 1]);
  }
  /* same inputs, same bits */
  float rg2[N * F * E];
  size_t nr2 = 0;
  double loss2;
  CHECK(sg_embed_grad(m, p, N, keys, y, dg, rows, &nr2, rg2, &loss2, NULL) == 0);
  CHECK(nr2 == nr && loss2 == loss);
  CHECK(memcmp(rg, rg2, nr * E * sizeof(float)) == 0);
  free(p), free(dg);
  sg_embed_destroy(&m);
}

TEST(embed_learns_and_rejects_bad_options) {
  char err[128] = "";
  sg_embed_t *m = NULL;
  CHECK(sg_embed_new(&m, 0, R, E, H, N, err, sizeof err) == -1);
  CHECK(strstr(err, "fields") != NULL);
  CHECK(sg_embed_new(&m, F, R, 0, H, N, err, sizeof err) == -1);
  CHECK(strstr(err, "embed_dim") != NULL);
  CHECK(sg_embed_new(&m, F, R, E, H, N, err, sizeof err) == 0);
  size_t np = sg_embed_nparams(m);
  float *p = malloc(np * sizeof(float)), *g = malloc(np * sizeof(float));
  sg_embed_init(m, 5, p);
  double first = full_grad(m, p, g), last = first;
  for (int s = 0; s < 200; s++) {
    last = full_grad(m, p, g);
    for (size_t i = 0; i < np; i++) p[i] -= 0.5f * g[i];
  }
  CHECK(last < 0.5 * first);
  free(p), free(g);
  sg_embed_destroy(&m);
}

/* Synthetic clicks: reproducible, Zipf head, and learnable: after SGD on
 * 4000 rows the model beats the majority class on 2000 held-out rows. */
#include "dataset_clicks.h"

enum { CF = 4, CN = 6000, CTRAIN = 4000, CB = 100 };

TEST(clicks_reproducible_zipf_and_learnable) {
  static uint64_t keys[CN * CF], keys2[CN * CF];
  static int32_t y[CN], y2[CN];
  CHECK(sg_clicks_synth(9, CN, CF, 50, 1.1, 3.0, keys, y) == 0);
  CHECK(sg_clicks_synth(9, CN, CF, 50, 1.1, 3.0, keys2, y2) == 0);
  CHECK(memcmp(keys, keys2, sizeof keys) == 0 && memcmp(y, y2, sizeof y) == 0);
  CHECK(sg_clicks_synth(9, CN, 0, 50, 1.1, 3.0, keys, y) == -1);
  int64_t k0 = 0, k49 = 0, pos = 0;
  for (int j = 0; j < CN * CF; j++) k0 += keys[j] == 0, k49 += keys[j] == 49;
  for (int i = 0; i < CN; i++) pos += y[i];
  CHECK(k0 > 10 * k49); /* Zipf s = 1.1: key 0 ~ 74x key 49 */
  char err[128];
  sg_embed_t *m = NULL;
  CHECK(sg_embed_new(&m, CF, 1 << 10, 8, 16, CB, err, sizeof err) == 0);
  size_t np = sg_embed_nparams(m), dl = sg_embed_dense_len(m);
  float *p = malloc(np * sizeof(float)), *dg = malloc(dl * sizeof(float));
  static int64_t rows[CB * CF];
  static float rg[CB * CF * 8];
  sg_embed_init(m, 1, p);
  double loss;
  for (int ep = 0; ep < 5; ep++)
    for (int b = 0; b < CTRAIN; b += CB) {
      size_t nr = 0;
      CHECK(sg_embed_grad(m, p, CB, keys + b * CF, y + b, dg, rows, &nr, rg,
                          &loss, NULL) == 0);
      for (size_t i = 0; i < dl; i++) p[i] -= 0.5f * dg[i];
      for (size_t r = 0; r < nr; r++)
        for (int e = 0; e < 8; e++) p[dl + (size_t)rows[r] * 8 + (size_t)e] -= 0.5f * rg[r * 8 + (size_t)e];
    }
  int64_t correct = 0, heldpos = 0;
  for (int b = CTRAIN; b < CN; b += CB) {
    size_t nr = 0;
    CHECK(sg_embed_grad(m, p, CB, keys + b * CF, y + b, dg, rows, &nr, rg,
                        &loss, &correct) == 0);
  }
  for (int i = CTRAIN; i < CN; i++) heldpos += y[i];
  int64_t held = CN - CTRAIN, major = heldpos > held - heldpos ? heldpos : held - heldpos;
  fprintf(stderr, "clicks: held-out accuracy %lld/%lld, majority %lld, positives %lld/%d\n",
          (long long)correct, (long long)held, (long long)major, (long long)pos, CN);
  CHECK(correct > major + held / 20);
  free(p), free(dg);
  sg_embed_destroy(&m);
}
