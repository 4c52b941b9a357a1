/* variant.c - a run's variant, decided once when the experiment is
 * expanded (config.h): the structured key that tells it apart from the
 * experiment's other runs, and the name rendered from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "simulate.h"

/* Keys that never make a variant: the experiment's identity, the axes the
 * report lays runs out on (repeats, the worker count), the engine (the
 * head names it) and the spec's internal keys. */
static int not_a_variant_key(const char *k) {
  static const char *const axes[] = {"name", "repeat", "workers", "engine", NULL};
  if (k[0] == '_') return 1;
  for (const char *const *a = axes; *a; a++)
    if (!strcmp(*a, k)) return 1;
  return 0;
}

typedef struct vat {
  const char *v;
  size_t i;
} vat_t;

static int vat_cmp(const void *a, const void *b) {
  const vat_t *x = a, *y = b;
  int c = strcmp(x->v, y->v);
  return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* How key k spreads over the runs: NULL when it does not differ (every
 * run sets it to one value); else the value more than half of the runs
 * share, which their names leave out ("" when there is none: a swept key
 * of two values is named on every run); *all_set: every run sets it.
 * Sorting the values makes it O(n log n) per key. */
static const char *spread(const sg_experiment_t *x, const char *k, vat_t *s, int *all_set) {
  const char *best = NULL;
  size_t n = 0, best_n = 0, best_i = 0, stretches = 0;
  for (size_t i = 0; i < x->nruns; i++) {
    const char *v = sg_opts_get(x->runs[i].opts, k);
    if (v) s[n++] = (vat_t){v, i};
  }
  *all_set = n == x->nruns;
  qsort(s, n, sizeof *s, vat_cmp);
  for (size_t a = 0, b; a < n; a = b, stretches++) {
    for (b = a + 1; b < n && !strcmp(s[a].v, s[b].v); b++) {}
    if (b - a > best_n || (b - a == best_n && s[a].i < best_i))
      best = s[a].v, best_n = b - a, best_i = s[a].i;
  }
  if (*all_set && stretches == 1) return NULL;
  return best && 2 * best_n > x->nruns ? best : "";
}

/* Run i's name from its whole rendering: as it is when it fits, else cut
 * and ended with " [variant J]", J the first run of the experiment with
 * the same whole name, so that cut names stay apart. */
static int name_run(sg_experiment_t *x, size_t i, char *const *whole) {
  sg_run_spec_t *r = &x->runs[i];
  size_t cap = 4 * strlen(whole[i]) + 16, j = 0; /* sg_printable: at most 4 per byte */
  char *shown = malloc(cap);
  if (!shown) return sg_err_set(SG_ENOMEM, "out of memory");
  sg_printable(shown, cap, whole[i]); /* names are printed on terminals */
  if (strlen(shown) < sizeof r->variant - 1) {
    snprintf(r->variant, sizeof r->variant, "%s", shown);
  } else {
    while (strcmp(whole[j], whole[i])) j++;
    snprintf(r->variant, sizeof r->variant, "%.*s... [variant %zu]",
             (int)sizeof r->variant - 40, shown, j + 1);
  }
  free(shown);
  snprintf(r->label, sizeof r->label, "%s workers=%d", r->variant, r->workers);
  return sg_opts_set(r->opts, "_label", r->variant);
}

/* Run i's variant: its engine, the engine's options not at their default,
 * then each key of `keys` (the keys that differ among the runs, with the
 * value most runs share) where run i has a value other than that one, or
 * any value when not every run sets the key.  Two runs that differ in a
 * setting differ in their variants: at most one of them has the shared
 * value, and the other shows its own. */
static int decide_one(sg_run_spec_t *r, const sg_opts_t *keys, const sg_opts_t *all_set,
                      char **whole) {
  sg_opts_t *v = sg_opts_new();
  int rc = SG_OK;
  if (!v) return sg_err_set(SG_ENOMEM, "out of memory");
  SG_TRY(sg_opts_set(v, "engine", r->engine->name));
  for (const sg_setting_t *s = r->engine->options; s && s->name; s++) {
    const char *val = sg_opts_get(r->opts, s->name);
    if (!sg_setting_is_default(s, val)) SG_TRY(sg_opts_set(v, s->name, val));
  }
  for (size_t k = 0; k < sg_opts_count(keys); k++) {
    const char *key = sg_opts_key(keys, k), *val = sg_opts_get(r->opts, key);
    if (!val || sg_setting_find(r->engine->options, key)) continue;
    const char *shared = sg_opts_value(keys, k);
    if (sg_opts_has(all_set, key) && *shared && !strcmp(val, shared)) continue;
    SG_TRY(sg_opts_set(v, key, val));
  }
  r->names_transport = sg_opts_has(v, "transport");
  char *json = sg_opts_json(v);
  rc = json ? sg_opts_set(r->opts, "_variant", json) : SG_ENOMEM;
  free(json);
  if (rc == SG_OK && !(*whole = sg_variant_render(r->engine, r->opts, v, sg_sim_enabled(r->opts))))
    rc = SG_ENOMEM;
fail:
  sg_opts_destroy(&v);
  return rc;
}

/* Every key some run sets, in the settings table's order first, then the
 * engines' keys in the order the runs hold them. */
static int every_key(const sg_experiment_t *x, sg_opts_t *seen) {
  for (const sg_setting_t *s = sg_settings; s->name; s++) SG_CHECK(sg_opts_set(seen, s->name, ""));
  for (size_t i = 0; i < x->nruns; i++)
    for (size_t k = 0; k < sg_opts_count(x->runs[i].opts); k++)
      if (!sg_opts_has(seen, sg_opts_key(x->runs[i].opts, k)))
        SG_CHECK(sg_opts_set(seen, sg_opts_key(x->runs[i].opts, k), ""));
  return SG_OK;
}

int sg_config_variants(sg_experiment_t *x) {
  sg_opts_t *seen = sg_opts_new(), *keys = sg_opts_new(), *all = sg_opts_new();
  vat_t *s = malloc((x->nruns ? x->nruns : 1) * sizeof *s);
  char **whole = calloc(x->nruns ? x->nruns : 1, sizeof *whole);
  int rc = SG_OK;
  if (!seen || !keys || !all || !s || !whole) {
    rc = sg_err_set(SG_ENOMEM, "out of memory");
    goto fail;
  }
  SG_TRY(every_key(x, seen));
  for (size_t k = 0; k < sg_opts_count(seen); k++) {
    const char *key = sg_opts_key(seen, k);
    int all_set;
    if (not_a_variant_key(key)) continue;
    const char *common = spread(x, key, s, &all_set);
    if (!common) continue;
    SG_TRY(sg_opts_set(keys, key, common));
    if (all_set) SG_TRY(sg_opts_set(all, key, "1"));
  }
  for (size_t i = 0; i < x->nruns; i++) SG_TRY(decide_one(&x->runs[i], keys, all, &whole[i]));
  for (size_t i = 0; i < x->nruns; i++) SG_TRY(name_run(x, i, whole));
fail:
  for (size_t i = 0; whole && i < x->nruns; i++) free(whole[i]);
  free(whole);
  free(s);
  sg_opts_destroy(&seen);
  sg_opts_destroy(&keys);
  sg_opts_destroy(&all);
  return rc;
}
