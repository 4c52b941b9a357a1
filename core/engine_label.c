/* engine_label.c - what a run is called (sg_engine_label, engine.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/* Run and workload keys a label spells when they differ from the
 * default: they change what the run measures, not where it keeps files. */
const char *const sg_engine_label_overrides[] = {"transport", "momentum", "lr_schedule",
                                                 "zmq_cma",   "denormals", NULL};
#define OVERRIDES sg_engine_label_overrides

/* "1M" and "1048576" are the same value: numbers with a K/M/G suffix
 * compare as numbers, everything else as text. */
static int as_number(const char *s, double *v) {
  char *end;
  *v = strtod(s, &end);
  if (end == s) return 0;
  if (*end == 'K' || *end == 'k') *v *= 1024, end++;
  else if (*end == 'M' || *end == 'm') *v *= 1024 * 1024, end++;
  else if (*end == 'G' || *end == 'g') *v *= 1024.0 * 1024 * 1024, end++;
  return *end == '\0';
}

int sg_setting_is_default(const sg_setting_t *s, const char *value) {
  double a, b;
  const char *def = s->def ? s->def : "";
  if (!value || !strcmp(value, def)) return 1;
  return as_number(value, &a) && as_number(def, &b) && a == b;
}

static size_t add(char *out, size_t cap, size_t len, const char *fmt, const char *k,
                  const char *v) {
  if (len >= cap) return len;
  int n = snprintf(out + len, cap - len, fmt, k, v);
  return n < 0 ? len : len + (size_t)n;
}

size_t sg_engine_label_options(const sg_engine_t *e, const sg_opts_t *o, const char *const *skip,
                               char *out, size_t cap, size_t len) {
  for (const sg_setting_t *s = e->options; s && s->name; s++) {
    int skipped = 0;
    for (const char *const *k = skip; k && *k && !skipped; k++) skipped = !strcmp(*k, s->name);
    const char *v = sg_opts_get(o, s->name);
    if (!skipped && !sg_setting_is_default(s, v)) len = add(out, cap, len, " %s=%s", s->name, v);
  }
  return len;
}

/* The default short name: the engine, then the value of its one enum
 * option ("allreduce rhd"), or, with several, those not at their default
 * ("mapreduce aggregate=tree"); then every other option not at its
 * default ("servers=2"). */
static size_t default_label(const sg_engine_t *e, const sg_opts_t *o, char *out, size_t cap) {
  int nenum = 0;
  const char *skip[2] = {NULL, NULL};
  for (const sg_setting_t *s = e->options; s && s->name; s++) nenum += s->type == SG_T_ENUM;
  size_t len = add(out, cap, 0, "%s%s", e->name, "");
  for (const sg_setting_t *s = e->options; nenum == 1 && s && s->name; s++)
    if (s->type == SG_T_ENUM) {
      const char *v = sg_opts_get(o, s->name);
      len = add(out, cap, len, " %s%s", v ? v : s->def, "");
      skip[0] = s->name;
    }
  return sg_engine_label_options(e, o, skip, out, cap, len);
}

void sg_engine_label_head(const sg_engine_t *e, const sg_opts_t *o, char *out, size_t cap) {
  if (!cap) return;
  out[0] = '\0';
  if (e->label) e->label(o, out, cap);
  else default_label(e, o, out, cap);
}

void sg_engine_label(const sg_engine_t *e, const sg_opts_t *o, char *out, size_t cap) {
  if (!cap) return;
  sg_engine_label_head(e, o, out, cap);
  size_t len = strlen(out);
  for (const char *const *k = OVERRIDES; *k; k++) {
    const sg_setting_t *s = sg_setting_find(sg_settings, *k);
    const char *v = sg_opts_get(o, *k);
    if (s && !sg_setting_is_default(s, v)) len = add(out, cap, len, " %s=%s", *k, v);
  }
}

int sg_engine_label_spells(const sg_engine_t *e, const char *key) {
  for (const char *const *k = OVERRIDES; *k; k++)
    if (!strcmp(*k, key)) return 1;
  return e->options && sg_setting_find(e->options, key) != NULL;
}

/* " key=value", the value quoted when it is empty or holds a space, '=',
 * a quote or a backslash, so that different pairs never read alike. */
static void render_pair(FILE *f, const char *k, const char *v) {
  if (*v && !strpbrk(v, " =\"'\\\t")) {
    fprintf(f, " %s=%s", k, v);
    return;
  }
  fprintf(f, " %s=\"", k);
  for (const char *c = v; *c; c++) {
    if (*c == '"' || *c == '\\') fputc('\\', f);
    fputc(*c, f);
  }
  fputc('"', f);
}

char *sg_variant_render(const sg_engine_t *e, const sg_opts_t *opts, const sg_opts_t *v,
                        int sim) {
  char head[256], *name = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&name, &len);
  if (!f) return NULL;
  sg_engine_label_head(e, opts, head, sizeof head);
  fputs(head, f);
  for (size_t i = 0; i < sg_opts_count(v); i++) {
    const char *k = sg_opts_key(v, i);
    if (strcmp(k, "engine") && !sg_setting_find(e->options, k))
      render_pair(f, k, sg_opts_value(v, i));
  }
  if (sim) fputs(" [sim]", f);
  if (fclose(f)) {
    free(name);
    return NULL;
  }
  return name;
}
