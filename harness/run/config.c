/* config.c - experiment files -> resolved runs (see config.h).
 *
 * Two passes.  Parse: walk the libyaml document, check every key against
 * the settings table (or the engine's option table) and every value with
 * sg_setting_check(), and keep each key as a "value set" (one value, or
 * the alternatives of a sweep) with the position of its key.  Resolve:
 * per engine entry, pick each key's value set by priority
 *
 *     --set engines.I.key / engine option   (entry's own --set layer)
 *     --set key, --set workload.key         (global --set layer)
 *     the engine entry                      (entry layer)
 *     top level / workload:                 (top layer)
 *     the table's default
 *
 * and expand the cartesian product of the sets that hold more than one
 * value, then the repetitions.  Finally the engine itself checks each run
 * (layout, check_transport), still before anything launches.
 */
#include "config.h"
#include "launch.h" /* host lists */

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

#include "cluster.h"
#include "simulate.h"
#include "device.h"
#include "err.h"

enum { MAX_RUNS = 100000, MAX_DEPTH = 64, MAX_ERRS = 64 };

typedef struct pos {
  const char *where; /* file name, or "--set k=v" */
  int line, col;     /* 1-based; 0 = no position (--set) */
} pos_t;

typedef struct vset {
  const sg_setting_t *s;
  char **v;
  size_t n;
  pos_t pos; /* of the key */
} vset_t;

typedef struct layer {
  vset_t *a;
  size_t n, cap;
} layer_t;

/* A key's error kept while the rest of the file is checked. */
typedef struct kerr {
  int line, col;
  char *msg;
} kerr_t;

typedef struct entry {
  const sg_engine_t *engine;
  pos_t pos; /* of the entry */
  layer_t own, set;
} entry_t;

typedef struct parser {
  const char *fname;
  const char *dir; /* absolute directory of the file (sg_config_load); NULL: paths as given */
  yaml_document_t *doc;
  char *name;
  pos_t name_pos;
  int64_t repeat;
  layer_t top, setg;
  entry_t *ent;
  size_t nent;
  kerr_t errs[MAX_ERRS]; /* errors of single keys, reported together */
  size_t nerrs;
  char **wheres; /* "--set k=v" names that value sets' positions point to */
  size_t nwheres;
  int wl_used[48]; /* workload rules some run of any entry meets (MAX_NEEDS) */
} parser_t;

/* ---- errors ------------------------------------------------------------ */

static int perr(pos_t p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int perr(pos_t p, const char *key, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (p.line > 0)
    return sg_err_set(SG_ECONFIG, "%s:%d:%d: %s: %s", p.where, p.line, p.col, key, what);
  return sg_err_set(SG_ECONFIG, "%s: %s: %s", p.where, key, what);
}

static pos_t node_pos(const parser_t *p, const yaml_node_t *n) {
  pos_t q = {p->fname, (int)n->start_mark.line + 1, (int)n->start_mark.column + 1};
  return q;
}

/* A key's own mistake (unknown, wrong type, out of range) in the file is
 * kept and the walk goes on, so one run of sgdlab reports all of them;
 * anything else (no memory, --set) stops at once. */
static int keep_error(parser_t *p, int rc, pos_t at) {
  if (rc != SG_ECONFIG || at.line == 0) return rc;
  if (p->nerrs == MAX_ERRS) return rc;
  kerr_t *e = &p->errs[p->nerrs];
  if (!(e->msg = strdup(sg_err_msg()))) return SG_ENOMEM;
  e->line = at.line;
  e->col = at.col;
  p->nerrs++;
  return SG_OK;
}

static int kerr_cmp(const void *a, const void *b) {
  const kerr_t *x = a, *y = b;
  return x->line != y->line ? (x->line > y->line) - (x->line < y->line)
                            : (x->col > y->col) - (x->col < y->col);
}

/* Every kept error, sorted by line, one a line (as many as the message
 * holds, then how many more). */
static int report_errors(parser_t *p) {
  char all[1000];
  size_t len = 0, i;
  qsort(p->errs, p->nerrs, sizeof *p->errs, kerr_cmp);
  for (i = 0; i < p->nerrs; i++) {
    size_t n = strlen(p->errs[i].msg) + 1;
    if (len + n + 40 > sizeof all && i > 0) break;
    len += (size_t)snprintf(all + len, sizeof all - len, "%s%s", i ? "\n" : "", p->errs[i].msg);
  }
  if (i < p->nerrs)
    snprintf(all + len, sizeof all - len, "\n%s: %zu more errors", p->fname, p->nerrs - i);
  return sg_err_set_lines(SG_ECONFIG, all); /* each line was made printable when kept */
}

/* ---- suggestions ------------------------------------------------------- */

static size_t edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return 99;
  size_t d[64][64];
  for (size_t i = 0; i <= la; i++) d[i][0] = i;
  for (size_t j = 0; j <= lb; j++) d[0][j] = j;
  for (size_t i = 1; i <= la; i++)
    for (size_t j = 1; j <= lb; j++) {
      size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      /* a transposition counts as one edit */
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
        c = d[i - 2][j - 2] + 1;
      d[i][j] = c;
    }
  return d[la][lb];
}

static void consider(const char *key, const char *cand, const char **best, size_t *bestd) {
  size_t dd = edit_distance(key, cand);
  /* "batchsize" for "batch": one key the start of the other counts as close */
  size_t lk = strlen(key), lc = strlen(cand), m = lk < lc ? lk : lc;
  if (m >= 3 && strncmp(key, cand, m) == 0 && dd > 1) dd = 1;
  if (dd < *bestd) {
    *bestd = dd;
    *best = cand;
  }
}

/* The closest known key, or NULL when none is close. */
static const char *suggest(const char *key) {
  const char *best = NULL;
  size_t bestd = 99;
  for (const sg_setting_t *s = sg_settings; s->name; s++) consider(key, s->name, &best, &bestd);
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    for (const sg_setting_t *s = (*e)->options; s && s->name; s++)
      consider(key, s->name, &best, &bestd);
  static const char *const extra[] = {"workload", "engines", "engine", "cluster"};
  for (size_t i = 0; i < 4; i++) consider(key, extra[i], &best, &bestd);
  size_t len = strlen(key), limit = len <= 3 ? 1 : len <= 6 ? 2 : 3;
  return bestd <= limit ? best : NULL;
}

static int unknown_key(pos_t p, const char *key) {
  const char *s = suggest(key);
  if (s) return perr(p, key, "unknown key; did you mean '%s'?", s);
  return perr(p, key, "unknown key (sgdlab help config lists them)");
}

/* The engine that declares option `key`, or NULL. */
static const sg_engine_t *engine_with_option(const char *key) {
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    if (sg_setting_find((*e)->options, key)) return *e;
  return NULL;
}

/* ---- value sets -------------------------------------------------------- */

static void vset_free(vset_t *v) {
  for (size_t i = 0; i < v->n; i++) free(v->v[i]);
  free(v->v);
  v->v = NULL;
  v->n = 0;
}

static void layer_free(layer_t *l) {
  for (size_t i = 0; i < l->n; i++) vset_free(&l->a[i]);
  free(l->a);
  memset(l, 0, sizeof *l);
}

static vset_t *layer_find(const layer_t *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (strcmp(l->a[i].s->name, key) == 0) return &l->a[i];
  return NULL;
}

/* Take ownership of v's values; replaces an existing entry for the key. */
static int layer_put(layer_t *l, vset_t *v) {
  vset_t *old = layer_find(l, v->s->name);
  if (old) {
    vset_free(old);
    *old = *v;
    v->v = NULL;
    v->n = 0;
    return SG_OK;
  }
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    vset_t *a = realloc(l->a, cap * sizeof *a);
    if (!a) return SG_ENOMEM;
    l->a = a;
    l->cap = cap;
  }
  l->a[l->n++] = *v;
  v->v = NULL;
  v->n = 0;
  return SG_OK;
}

static int vset_add(vset_t *v, const char *val) {
  char **a = realloc(v->v, (v->n + 1) * sizeof *a);
  if (!a) return SG_ENOMEM;
  v->v = a;
  if (!(v->v[v->n] = strdup(val))) return SG_ENOMEM;
  v->n++;
  return SG_OK;
}

/* Parse an integer with an optional K/M/G suffix (as sg_setting_check). */
static long long parse_int(const char *s) {
  char *end;
  long long x = strtoll(s, &end, 10);
  if (*end == 'K' || *end == 'k') x <<= 10;
  else if (*end == 'M' || *end == 'm') x <<= 20;
  else if (*end == 'G' || *end == 'g') x <<= 30;
  return x;
}

/* What an item of a cluster list means: a link rate, a loss fraction. */
static int cluster_item(const sg_setting_t *s, const char *item, pos_t p) {
  uint64_t bps;
  double f;
  int rc = SG_OK;
  if (!strcmp(s->name, "cluster.link")) rc = sg_cluster_parse_rate(item, "rate", &bps);
  else if (!strcmp(s->name, "cluster.loss")) rc = sg_cluster_parse_loss(item, "loss", &f);
  else if (!strcmp(s->name, "cluster.uplink") && strcmp(item, "0") != 0)
    rc = sg_cluster_parse_rate(item, "uplink", &bps);
  if (rc < 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", sg_err_msg());
    return perr(p, s->name, "%s", why);
  }
  return SG_OK;
}

/* Every item of a stored list value "a,b,c" (cluster_item). */
static int strlist_items(const sg_setting_t *s, const char *v, pos_t p) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", v);
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    SG_CHECK(cluster_item(s, t, p));
  return SG_OK;
}

/* Check one scalar for setting s and write its stored form into out. */
static int check_scalar(const sg_setting_t *s, const char *raw, pos_t p, char *out, size_t cap) {
  char why[256], buf[1024];
  /* a path cut short names another file: refused, never truncated */
  if (strlen(raw) >= sizeof buf || strlen(raw) >= cap)
    return perr(p, s->name, "longer than %zu bytes", (sizeof buf < cap ? sizeof buf : cap) - 1);
  snprintf(buf, sizeof buf, "%s", raw);
  if (s->type == SG_T_BOOL) {
    if (!strcasecmp(buf, "true") || !strcasecmp(buf, "yes") || !strcasecmp(buf, "on"))
      strcpy(buf, "true");
    else if (!strcasecmp(buf, "false") || !strcasecmp(buf, "no") || !strcasecmp(buf, "off"))
      strcpy(buf, "false");
  }
  if (sg_setting_check(s, buf, why, sizeof why) < 0) return perr(p, s->name, "%s", why);
  if (s->type == SG_T_STRLIST) SG_CHECK(strlist_items(s, buf, p));
  if (s->type == SG_T_INT) snprintf(out, cap, "%lld", parse_int(buf));
  else snprintf(out, cap, "%s", buf);
  return SG_OK;
}

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A list-typed value from a sequence of scalars: "256,128". */
static int list_value(parser_t *p, const sg_setting_t *s, yaml_node_t *seq, pos_t at,
                      char *out, size_t cap) {
  size_t len = 0;
  out[0] = '\0';
  yaml_node_item_t *it = seq->data.sequence.items.start;
  if (it == seq->data.sequence.items.top) return perr(at, s->name, "empty list");
  for (; it < seq->data.sequence.items.top; it++) {
    yaml_node_t *c = yaml_document_get_node(p->doc, *it);
    const char *v = scalar(c);
    pos_t cp = p->fname == at.where && at.line ? node_pos(p, c) : at;
    int ints = s->type == SG_T_INTLIST;
    if (!v)
      return perr(cp, s->name, "expected a list of %s, got a nested value", ints ? "integers" : "values");
    char one[256];
    if (!ints && (!*v || strchr(v, ','))) return perr(cp, s->name, "expected one value per item, got '%s'", v);
    const sg_setting_t item = {.name = s->name, .type = ints ? SG_T_INT : SG_T_STRLIST,
                               .min = s->min, .max = s->max};
    SG_CHECK(check_scalar(&item, v, cp, one, sizeof one));
    len += (size_t)snprintf(out + len, cap > len ? cap - len : 0, "%s%s", len ? "," : "", one);
  }
  if (len >= cap) return perr(at, s->name, "list too long");
  return SG_OK;
}

/* The value set of setting s from node n.  `at` positions the messages
 * (the node itself in a file; the --set argument otherwise). */
static int node_values(parser_t *p, const sg_setting_t *s, yaml_node_t *n, pos_t at,
                       int sweepable, vset_t *out) {
  char buf[1024];
  memset(out, 0, sizeof *out);
  out->s = s;
  int rc;
  if (n->type == YAML_MAPPING_NODE) return perr(at, s->name, "expected a value, got a mapping");
  if (n->type == YAML_SCALAR_NODE) {
    SG_CHECK(check_scalar(s, scalar(n), at, buf, sizeof buf));
    return vset_add(out, buf);
  }
  /* a sequence: a list value, or a sweep */
  yaml_node_item_t *b = n->data.sequence.items.start, *e = n->data.sequence.items.top;
  int nested = b < e && yaml_document_get_node(p->doc, *b)->type == YAML_SEQUENCE_NODE;
  int listy = s->type == SG_T_INTLIST || s->type == SG_T_STRLIST;
  if (listy && !nested) {
    SG_CHECK(list_value(p, s, n, at, buf, sizeof buf));
    return vset_add(out, buf);
  }
  if (!sweepable) return perr(at, s->name, "takes one value, not a list");
  if (b == e) return perr(at, s->name, "empty list (a sweep needs at least one value)");
  for (yaml_node_item_t *it = b; it < e; it++) {
    yaml_node_t *c = yaml_document_get_node(p->doc, *it);
    pos_t cp = at.line ? node_pos(p, c) : at;
    if (listy) {
      if (c->type != YAML_SEQUENCE_NODE) {
        rc = perr(cp, s->name, "a sweep of lists needs every item to be a list, e.g. %s",
                  s->type == SG_T_INTLIST ? "[[128], [256, 128]]" : "[[1gbit], [100mbit]]");
        goto fail;
      }
      SG_TRY(list_value(p, s, c, cp, buf, sizeof buf));
    } else {
      if (c->type != YAML_SCALAR_NODE) {
        rc = perr(cp, s->name, "expected a value, got a %s",
                  c->type == YAML_MAPPING_NODE ? "mapping" : "nested list");
        goto fail;
      }
      SG_TRY(check_scalar(s, scalar(c), cp, buf, sizeof buf));
    }
    SG_TRY(vset_add(out, buf));
  }
  return SG_OK;
fail:
  vset_free(out);
  return rc;
}

/* ---- the document ------------------------------------------------------ */

typedef enum { IN_TOP, IN_WORKLOAD, IN_ENTRY } scope_t;

/* Check that `key` may appear in `scope` and return its table entry. */
static int lookup(const char *key, scope_t scope, const sg_engine_t *eng, pos_t kp,
                  const sg_setting_t **out) {
  if (scope == IN_ENTRY && eng) {
    const sg_setting_t *o = sg_setting_find(eng->options, key);
    if (o) {
      *out = o;
      return SG_OK;
    }
  }
  const sg_setting_t *s = sg_setting_find(sg_settings, key);
  if (s && s->section == SG_S_CLUSTER)
    return perr(kp, key, "belongs under cluster: (cluster: {%s: ...})", key + strlen("cluster."));
  if (s && s->section == SG_S_SIMULATE)
    return perr(kp, key, "belongs under simulate: (simulate: {%s: ...})",
                strchr(key, '.') ? strchr(key, '.') + 1 : key);
  if (s) {
    int ok = scope == IN_TOP ? s->section != SG_S_WORKLOAD
             : scope == IN_WORKLOAD ? s->section == SG_S_WORKLOAD
                                    : (s->section != SG_S_EXPERIMENT || !strcmp(key, "workers"));
    if (ok) {
      *out = s;
      return SG_OK;
    }
    if (s->section == SG_S_WORKLOAD) return perr(kp, key, "belongs under workload:");
    if (scope == IN_WORKLOAD) return perr(kp, key, "belongs at the top level, not under workload:");
    return perr(kp, key, "belongs at the top level, not in an engine entry");
  }
  const sg_engine_t *owner = engine_with_option(key);
  if (owner && scope == IN_ENTRY && eng)
    return perr(kp, key, "not an option of engine %s (engine %s has it)", eng->name, owner->name);
  if (owner) return perr(kp, key, "an option of engine %s; set it in its engine entry", owner->name);
  return unknown_key(kp, key);
}

/* Walk a mapping's pairs, rejecting duplicate keys. */
static int check_dups(parser_t *p, yaml_node_t *map) {
  for (yaml_node_pair_t *a = map->data.mapping.pairs.start; a < map->data.mapping.pairs.top; a++) {
    yaml_node_t *ka = yaml_document_get_node(p->doc, a->key);
    if (!scalar(ka)) return perr(node_pos(p, ka), "?", "keys must be plain names");
    for (yaml_node_pair_t *b = map->data.mapping.pairs.start; b < a; b++) {
      yaml_node_t *kb = yaml_document_get_node(p->doc, b->key);
      if (scalar(kb) && !strcmp(scalar(ka), scalar(kb)))
        return perr(node_pos(p, ka), scalar(ka), "duplicate key (first set at line %d)",
                    (int)kb->start_mark.line + 1);
    }
  }
  return SG_OK;
}

static int parse_pairs(parser_t *p, yaml_node_t *map, scope_t scope, const sg_engine_t *eng,
                       layer_t *into);

/* `cluster: {hosts: 4, link: 1gbit}` or `simulate: {link: 10gbit}` (top
 * level or in an engine entry): its keys are the table's SECTION.KEY; a
 * simulate: section also sets `simulate` (true). */
static int parse_section(parser_t *p, yaml_node_t *v, pos_t kp, layer_t *into, const char *sec) {
  int sim = !strcmp(sec, "simulate");
  sg_section_t want = sim ? SG_S_SIMULATE : SG_S_CLUSTER;
  if (v->type != YAML_MAPPING_NODE)
    return perr(kp, sec, "expected a mapping of %s keys, e.g. %s", sec,
                sim ? "{link: 10gbit, latency: 1us}" : "{hosts: 4, link: 1gbit}");
  SG_CHECK(check_dups(p, v));
  if (sim) { /* the section's presence */
    vset_t on = {.s = sg_setting_find(sg_settings, "simulate"), .pos = kp};
    char *t = strdup("true");
    if (!t || !(on.v = malloc(sizeof *on.v))) {
      free(t);
      return sg_err_set(SG_ENOMEM, "no memory");
    }
    on.v[0] = t;
    on.n = 1;
    int rc = layer_put(into, &on);
    vset_free(&on);
    SG_CHECK(rc);
  }
  for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
    yaml_node_t *k = yaml_document_get_node(p->doc, q->key);
    yaml_node_t *val = yaml_document_get_node(p->doc, q->value);
    char full[96];
    snprintf(full, sizeof full, "%s.%s", sec, scalar(k));
    const sg_setting_t *s = sg_setting_find(sg_settings, full);
    if (!s || s->section != want)
      return perr(node_pos(p, k), full, "unknown %s key (%s)", sec,
                  sim ? "hosts, link, latency, topology, racks, oversubscription, fat_tree, torus, "
                        "compute, host_speed"
                      : "hosts, link, loss, placement, racks, uplink");
    vset_t vs;
    SG_CHECK(node_values(p, s, val, node_pos(p, val), 1, &vs));
    vs.pos = node_pos(p, k);
    int rc = layer_put(into, &vs);
    vset_free(&vs);
    SG_CHECK(rc);
  }
  return SG_OK;
}

static int parse_workload(parser_t *p, yaml_node_t *v, pos_t kp) {
  if (v->type != YAML_MAPPING_NODE)
    return perr(kp, "workload", "expected a mapping of workload keys, e.g. {model: mlp, lr: 0.1}");
  return parse_pairs(p, v, IN_WORKLOAD, NULL, &p->top);
}

static int parse_entry(parser_t *p, yaml_node_t *n, entry_t *e) {
  e->pos = node_pos(p, n);
  const char *name = scalar(n);
  if (n->type == YAML_MAPPING_NODE) {
    SG_CHECK(check_dups(p, n));
    for (yaml_node_pair_t *q = n->data.mapping.pairs.start; q < n->data.mapping.pairs.top; q++)
      if (!strcmp(scalar(yaml_document_get_node(p->doc, q->key)), "engine")) {
        yaml_node_t *v = yaml_document_get_node(p->doc, q->value);
        if (!(name = scalar(v)))
          return perr(node_pos(p, v), "engine", "expected one engine name (list several entries to run several)");
        e->pos = node_pos(p, v);
      }
    if (!name) return perr(e->pos, "engine", "missing in this engine entry (e.g. {engine: ps, mode: sync})");
  } else if (!name) {
    return perr(e->pos, "engines", "each entry is an engine name or a mapping with engine:");
  }
  if (!(e->engine = sg_engine_find(name))) {
    char list[512] = "";
    size_t len = 0;
    for (const sg_engine_t *const *x = sg_engines; *x; x++)
      len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%s%s",
                              len ? ", " : "", (*x)->name);
    return perr(e->pos, "engine", "unknown engine '%s' (known: %s)", name, list);
  }
  if (n->type == YAML_MAPPING_NODE) SG_CHECK(parse_pairs(p, n, IN_ENTRY, e->engine, &e->own));
  return SG_OK;
}

static int parse_engines(parser_t *p, yaml_node_t *v, pos_t kp) {
  if (v->type == YAML_SCALAR_NODE) { /* engines: local */
    if (!(p->ent = calloc(1, sizeof *p->ent))) return SG_ENOMEM;
    p->nent = 1;
    return parse_entry(p, v, &p->ent[0]);
  }
  if (v->type != YAML_SEQUENCE_NODE)
    return perr(kp, "engines", "expected a list of engines, e.g. [local, {engine: ps, mode: sync}]");
  size_t n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
  if (n == 0) return perr(kp, "engines", "empty list; name at least one engine");
  if (!(p->ent = calloc(n, sizeof *p->ent))) return SG_ENOMEM;
  for (size_t i = 0; i < n; i++) {
    p->nent = i + 1;
    SG_CHECK(parse_entry(p, yaml_document_get_node(p->doc, v->data.sequence.items.start[i]),
                         &p->ent[i]));
  }
  return SG_OK;
}

static int parse_pairs(parser_t *p, yaml_node_t *map, scope_t scope, const sg_engine_t *eng,
                       layer_t *into) {
  SG_CHECK(check_dups(p, map));
  for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < map->data.mapping.pairs.top; q++) {
    yaml_node_t *k = yaml_document_get_node(p->doc, q->key);
    yaml_node_t *v = yaml_document_get_node(p->doc, q->value);
    const char *key = scalar(k);
    pos_t kp = node_pos(p, k), vp = node_pos(p, v);
    if (scope == IN_TOP && !strcmp(key, "workload")) {
      SG_CHECK(parse_workload(p, v, kp));
      continue;
    }
    if (scope == IN_TOP && !strcmp(key, "engines")) {
      SG_CHECK(parse_engines(p, v, kp));
      continue;
    }
    if (scope == IN_ENTRY && !strcmp(key, "engine")) continue; /* read by parse_entry */
    int section = !strcmp(key, "cluster") || !strcmp(key, "simulate");
    if (scope == IN_WORKLOAD && section)
      return perr(kp, key, "belongs at the top level or in an engine entry, not under workload:");
    if (scope != IN_WORKLOAD && section) {
      SG_CHECK(parse_section(p, v, kp, into, key));
      continue;
    }
    if (scope != IN_TOP && (!strcmp(key, "workload") || !strcmp(key, "engines")))
      return perr(kp, key, "belongs at the top level");
    if (scope != IN_ENTRY && !strcmp(key, "engine"))
      return perr(kp, key, "belongs in an entry of engines:, e.g. engines: [{engine: ps}]");
    const sg_setting_t *s = NULL;
    int rc = lookup(key, scope, eng, kp, &s);
    if (rc < 0) {
      SG_CHECK(keep_error(p, rc, kp));
      continue;
    }
    int sweepable = strcmp(key, "name") && strcmp(key, "repeat");
    vset_t vs;
    if ((rc = node_values(p, s, v, vp, sweepable, &vs)) < 0) {
      SG_CHECK(keep_error(p, rc, vp));
      continue;
    }
    vs.pos = kp;
    if (!strcmp(key, "name")) {
      free(p->name);
      p->name = strdup(vs.v[0]);
      p->name_pos = vp;
    }
    if (!strcmp(key, "repeat")) p->repeat = parse_int(vs.v[0]);
    rc = layer_put(into, &vs);
    vset_free(&vs);
    SG_CHECK(rc);
  }
  return SG_OK;
}

static int yaml_fail(const char *fname, yaml_parser_t *yp) {
  return sg_err_set(SG_ECONFIG, "%s:%d:%d: YAML: %s%s%s", fname, (int)yp->problem_mark.line + 1,
                    (int)yp->problem_mark.column + 1, yp->problem ? yp->problem : "syntax error",
                    yp->context ? " " : "", yp->context ? yp->context : "");
}

/* One pass over the event stream before the document is loaded, bounding
 * the work: libyaml's loader takes time quadratic in the nesting depth (a
 * 100k-deep file took 35 s), and it silently keeps only the first document
 * of a stream.  Stops at the first level deeper than MAX_DEPTH and at the
 * start of a second document. */
static int yaml_prescan(const char *fname, const char *text, size_t len, int with_pos) {
  yaml_parser_t yp;
  yaml_event_t ev;
  int depth = 0, docs = 0, rc = SG_OK;
  yaml_parser_initialize(&yp);
  yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
  for (;;) {
    if (!yaml_parser_parse(&yp, &ev)) {
      rc = yaml_fail(fname, &yp);
      break;
    }
    yaml_event_type_t t = ev.type;
    pos_t at = {fname, (int)ev.start_mark.line + 1, (int)ev.start_mark.column + 1};
    if (!with_pos) at.line = at.col = 0;
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT) break;
    if (t == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
      rc = perr(at, "YAML", "a second document; an experiment file holds one (split it into two files)");
      break;
    }
    if ((t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) && ++depth > MAX_DEPTH) {
      rc = perr(at, "YAML", "nested deeper than %d levels", MAX_DEPTH);
      break;
    }
    if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
  }
  yaml_parser_delete(&yp);
  return rc;
}

/* ---- --set ------------------------------------------------------------- */

/* `--set engines=...` / `--set workload=...`: whole sections are the file's;
 * say how to override inside them instead. */
static int set_section(pos_t at, const char *key) {
  if (!strcmp(key, "cluster"))
    return perr(at, key, "the cluster section cannot be replaced with --set; set one key with "
                "--set cluster.key=value, e.g. cluster.hosts=4");
  if (!strcmp(key, "engines"))
    return perr(at, key, "the engine list cannot be replaced with --set; edit the file, or set a key "
                "of entry I with --set engines.I.key=value (e.g. engines.0.workers=4)");
  return perr(at, key, "the workload section cannot be replaced with --set; set one key with "
              "--set workload.key=value (or --set key=value), e.g. workload.lr=0.1");
}

/* The key of `--set KEY=VALUE` into key[128] (spaces around '=' dropped),
 * and at.where set to a name of the argument that lives as long as the
 * parser. */
static int set_key(parser_t *p, const char *arg, const char *eq, char *key, pos_t *at) {
  /* `--set 'lr = 0.1'`: the spaces around '=' are not part of the key or
   * the value (YAML drops them from the value anyway) */
  const char *k0 = arg, *k1 = eq;
  while (k0 < k1 && (*k0 == ' ' || *k0 == '\t')) k0++;
  while (k1 > k0 && (k1[-1] == ' ' || k1[-1] == '\t')) k1--;
  size_t kl = (size_t)(k1 - k0);
  if (!kl) return perr(*at, "--set", "expected key=value");
  if (kl >= 128) return perr(*at, "--set", "key too long");
  memcpy(key, k0, kl);
  key[kl] = '\0';
  char where[128]; /* messages name the argument, its start when it is long */
  snprintf(where, sizeof where, "--set %.80s%s", arg, strlen(arg) > 80 ? "..." : "");
  /* the value sets keep `at`: the name lives as long as the parser */
  char **w = realloc(p->wheres, (p->nwheres + 1) * sizeof *w);
  if (!w) return SG_ENOMEM;
  p->wheres = w;
  if (!(w[p->nwheres] = strdup(where))) return SG_ENOMEM;
  at->where = w[p->nwheres++];
  if (strpbrk(key, " \t")) return perr(*at, key, "a key has no spaces (expected key=value)");
  return SG_OK;
}

/* What a --set key addresses: "workload.K" (*workload_only), "engines.I.K"
 * (*only = I) or K everywhere; *k is K. */
static int set_scope(const parser_t *p, pos_t at, const char *key, const char **k, long *only,
                     int *workload_only) {
  *k = key;
  *only = -1;
  *workload_only = 0;
  if (!strncmp(key, "workload.", 9)) {
    *k = key + 9;
    *workload_only = 1;
  } else if (!strncmp(key, "engines.", 8)) {
    char *end;
    *only = strtol(key + 8, &end, 10);
    if (end == key + 8 || *end != '.' || *only < 0)
      return perr(at, key, "expected engines.I.key with I in 0..%zu", p->nent ? p->nent - 1 : 0);
    if ((size_t)*only >= p->nent)
      return perr(at, key, "no engine entry %ld: engines: has %zu entr%s (0..%zu)", *only,
                  p->nent, p->nent == 1 ? "y" : "ies", p->nent - 1);
    *k = end + 1;
  }
  return SG_OK;
}

/* A top-level setting s (key k) from --set: the experiment layer. */
static int set_top(parser_t *p, pos_t at, const sg_setting_t *s, const char *k,
                   yaml_node_t *root) {
  vset_t vs;
  SG_CHECK(node_values(p, s, root, at, strcmp(k, "name") && strcmp(k, "repeat"), &vs));
  vs.pos = at;
  if (!strcmp(k, "name")) {
    free(p->name);
    p->name = strdup(vs.v[0]);
  }
  if (!strcmp(k, "repeat")) p->repeat = parse_int(vs.v[0]);
  int rc = layer_put(&p->setg, &vs);
  vset_free(&vs);
  return rc;
}

/* An engine option (or, with only >= 0, any key of that one entry) from
 * --set: every entry whose engine has it; an error when none has. */
static int set_engines(parser_t *p, pos_t at, const sg_setting_t *s, const char *k, long only,
                       yaml_node_t *root) {
  int applied = 0;
  for (size_t i = 0; i < p->nent; i++) {
    if (only >= 0 && (size_t)only != i) continue;
    const sg_setting_t *o = sg_setting_find(p->ent[i].engine->options, k);
    if (!o && only >= 0 && s) {
      if (s->section == SG_S_EXPERIMENT && strcmp(k, "workers"))
        return perr(at, k, "belongs at the top level, not in an engine entry");
      o = s;
    }
    if (!o) continue;
    vset_t vs;
    SG_CHECK(node_values(p, o, root, at, 1, &vs));
    vs.pos = at;
    int rc = layer_put(&p->ent[i].set, &vs);
    vset_free(&vs);
    SG_CHECK(rc);
    applied++;
  }
  if (applied) return SG_OK;
  const sg_engine_t *owner = engine_with_option(k);
  if (owner && only >= 0) { /* that entry runs another engine: say which entries do */
    char which[128] = "";
    size_t len = 0;
    for (size_t i = 0; i < p->nent && len < sizeof which; i++)
      if (p->ent[i].engine == owner)
        len += (size_t)snprintf(which + len, sizeof which - len, "%s%zu", len ? ", " : "", i);
    return perr(at, k, "engines.%ld runs %s; %s is an option of %s (%s%s)", only,
                p->ent[only].engine->name, k, owner->name,
                len ? "entries " : "no entry runs it", which);
  }
  if (owner) return perr(at, k, "no engine entry runs %s, the engine with this option", owner->name);
  if (only >= 0) return perr(at, k, "not an option of engine %s", p->ent[only].engine->name);
  return unknown_key(at, k);
}

/* One key=value (the value parsed by set_top/set_engines from `root`). */
static int set_value(parser_t *p, pos_t at, const char *key, yaml_node_t *root) {
  const char *k;
  long only;
  int workload_only;
  SG_CHECK(set_scope(p, at, key, &k, &only, &workload_only));
  const sg_setting_t *s = sg_setting_find(sg_settings, k);
  if (s && workload_only && s->section != SG_S_WORKLOAD) return perr(at, k, "not a workload key");
  if (s && only < 0) return set_top(p, at, s, k, root);
  if (workload_only) return unknown_key(at, k);
  return set_engines(p, at, s, k, only, root);
}

static int apply_set(parser_t *p, const char *arg) {
  pos_t at = {arg, 0, 0};
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg) return perr(at, "--set", "expected key=value");
  char key[128];
  SG_CHECK(set_key(p, arg, eq, key, &at));
  /* the value, in YAML syntax */
  yaml_parser_t yp;
  yaml_document_t doc;
  int rc = SG_OK;
  const char *val = eq + 1;
  if (!strcmp(key, "engines") || !strcmp(key, "workload") || !strcmp(key, "cluster"))
    return set_section(at, key);

  SG_CHECK(yaml_prescan(at.where, val, strlen(val), 0));
  yaml_parser_initialize(&yp);
  yaml_parser_set_input_string(&yp, (const unsigned char *)val, strlen(val));
  if (!yaml_parser_load(&yp, &doc)) {
    rc = perr(at, key, "value is not valid YAML: %s", yp.problem ? yp.problem : "?");
    yaml_parser_delete(&yp);
    return rc;
  }
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  yaml_node_t empty = {.type = YAML_SCALAR_NODE};
  empty.data.scalar.value = (yaml_char_t *)"";
  if (!root) root = &empty;
  yaml_document_t *saved = p->doc;
  p->doc = &doc;
  rc = set_value(p, at, key, root);
  p->doc = saved;
  yaml_document_delete(&doc);
  yaml_parser_delete(&yp);
  return rc;
}

/* ---- resolve ----------------------------------------------------------- */

typedef struct pick {
  const sg_setting_t *s;
  const vset_t *vs; /* NULL: the default */
} pick_t;

static const vset_t *choose(const parser_t *p, const entry_t *e, const char *key) {
  const vset_t *v;
  if ((v = layer_find(&e->set, key))) return v;
  if ((v = layer_find(&p->setg, key))) return v;
  if ((v = layer_find(&e->own, key))) return v;
  return layer_find(&p->top, key);
}

static const char *pick_value(const pick_t *k, size_t i) {
  return k->vs ? k->vs->v[i] : k->s->def;
}

/* How many items a stored list value "a,b,c" has. */
static int64_t list_len(const char *v) {
  int64_t n = 1;
  for (; *v; v++) n += *v == ',';
  return n;
}

/* Where ranks run on named hosts: hostfile (read now, into hosts: the
 * run records the list it used), hosts (checked), ssh_config (a plain
 * absolute path), and what launcher ssh needs.  Errors name the key. */
static int check_hosts(const parser_t *p, const entry_t *e, sg_opts_t *o, const char *transport,
                       const char *launcher) {
  const char *hf = sg_opts_str_or(o, "hostfile", ""), *hosts = sg_opts_str_or(o, "hosts", "");
  const char *sc = sg_opts_str_or(o, "ssh_config", "");
  const vset_t *v;
#define KEY_POS(k) ((v = choose(p, e, k)) ? v->pos : e->pos)
  if (hf[0] && hosts[0])
    return perr(KEY_POS("hostfile"), "hostfile", "hosts '%s' and a hostfile exclude each other",
                hosts);
  if (hf[0]) {
    char list[8192];
    if (sg_hosts_from_file(hf, list, sizeof list) < 0)
      return perr(KEY_POS("hostfile"), "hostfile", "%s", sg_err_msg());
    SG_CHECK(sg_opts_set(o, "hosts", list));
    hosts = sg_opts_get(o, "hosts");
  }
  if (hosts[0] && sg_hosts_check(hosts, NULL) < 0)
    return perr(KEY_POS(hf[0] ? "hostfile" : "hosts"), hf[0] ? "hostfile" : "hosts", "%s",
                sg_err_msg());
  if (sc[0] && sg_ssh_config_check(sc) < 0)
    return perr(KEY_POS("ssh_config"), "ssh_config", "%s", sg_err_msg());
  if (strcmp(launcher, "ssh")) return SG_OK; /* not an engine: the launcher */
  if (!hosts[0])
    return perr(KEY_POS("launcher"), "launcher", "ssh starts each rank on a host of hosts or "
                "hostfile, and neither is set");
  if (strcmp(transport, "zmq"))
    return perr(KEY_POS("launcher"), "launcher", "ssh starts zmq ranks; transport mpi's ranks are "
                "started by mpirun (launcher mpirun or auto, which reaches hosts over ssh)");
#undef KEY_POS
  return SG_OK;
}

/* A run on an emulated cluster (cluster.hosts > 0): the harness places
 * the ranks (no mpirun host list), tcp between ranks, and per-host lists
 * that fit the hosts.  Under mpirun (launch.c) the hostfile, the rsh
 * agent and the TCP-only BTL come from the cluster. */
static int check_cluster(const parser_t *p, const entry_t *e, sg_opts_t *o) {
  int64_t hosts;
  SG_CHECK(sg_opts_int(o, "cluster.hosts", &hosts));
  if (hosts == 0) return SG_OK;
  const vset_t *hv = choose(p, e, "cluster.hosts");
  pos_t at = hv ? hv->pos : e->pos;
  const char *mh = sg_opts_get(o, "hosts");
  if (mh && *mh)
    return perr(at, "cluster.hosts", "hosts '%s' (an mpirun host list) and a cluster exclude each "
                "other: the cluster places the ranks", mh);
  static const char *const lists[] = {"cluster.link", "cluster.loss"};
  for (size_t i = 0; i < 2; i++) {
    int64_t n = list_len(sg_opts_get(o, lists[i]));
    const vset_t *lv = choose(p, e, lists[i]);
    if (n != 1 && n != hosts)
      return perr(lv ? lv->pos : at, lists[i], "%lld values for %lld hosts (give one for every "
                  "host, or one per host)", (long long)n, (long long)hosts);
  }
  if (list_len(sg_opts_get(o, "cluster.uplink")) != 1) {
    const vset_t *uv = choose(p, e, "cluster.uplink");
    return perr(uv ? uv->pos : at, "cluster.uplink", "one rate for every rack's uplink");
  }
  return sg_opts_set(o, "zmq_scheme", "tcp"); /* ranks talk over the links */
}

/* A simulated run (simulate: section, or a simulate.* key set): the
 * engine's own code over transport mpi under smpirun, on a platform that
 * SMPI can build, within this machine's memory (simulate.h). */
static int check_simulate(const parser_t *p, const entry_t *e, sg_opts_t *o, int nprocs) {
  static const char *const keys[] = {"simulate", "simulate.hosts", "simulate.link",
      "simulate.latency", "simulate.topology", "simulate.racks", "simulate.oversubscription",
      "simulate.fat_tree", "simulate.torus", "simulate.compute", "simulate.host_speed",
      "simulate.eager"};
  const vset_t *first = NULL;
  for (size_t i = 0; i < sizeof keys / sizeof keys[0] && !first; i++) first = choose(p, e, keys[i]);
  if (!first || (first == choose(p, e, "simulate") && !sg_sim_enabled(o))) return SG_OK;
  SG_CHECK(sg_opts_set(o, "simulate", "true"));
  pos_t at = first->pos;
  const char *transport = sg_opts_get(o, "transport");
  if (strcmp(transport, "mpi")) {
    const vset_t *tv = choose(p, e, "transport");
    return perr(tv ? tv->pos : at, "transport", "%s cannot be simulated: SMPI simulates MPI calls "
                "only (ZeroMQ would run outside simulated time); use transport: mpi", transport);
  }
  int64_t ch = 0;
  SG_CHECK(sg_opts_int_or(o, "cluster.hosts", 0, &ch));
  if (ch > 0) return perr(at, "simulate", "a run is simulated or on an emulated cluster, not both");
  const char *mh = sg_opts_get(o, "hosts");
  if (mh && *mh) return perr(at, "simulate", "hosts '%s' (an mpirun host list) and simulate: "
                             "exclude each other", mh);
  sg_sim_cfg_t c;
  if (sg_sim_cfg_read(o, nprocs, &c) < 0 || sg_sim_check_host() < 0) {
    char m[512], key[48]; /* "simulate.torus '4,4': ...": the key, then the rest */
    snprintf(m, sizeof m, "%s", sg_err_msg());
    size_t kl = strcspn(m, " :");
    snprintf(key, sizeof key, "%.*s", kl < sizeof key ? (int)kl : 8, m);
    const char *rest = m + kl + strspn(m + kl, " :");
    const vset_t *kv = choose(p, e, key);
    return perr(kv ? kv->pos : at, key, "%s", rest);
  }
  return sg_opts_set(o, "launcher", "smpirun");
}

static int add_run(const parser_t *p, sg_experiment_t *x, sg_opts_t **o, const entry_t *e,
                   int repeat) {
  int rc = SG_OK;
  sg_run_spec_t *r = &x->runs[x->nruns];
  memset(r, 0, sizeof *r);
  int64_t workers, seed;
  SG_TRY(sg_opts_setf(*o, "repeat", "%d", repeat));
  SG_TRY(sg_opts_int(*o, "workers", &workers));
  SG_TRY(sg_opts_int(*o, "seed", &seed));
  const char *transport = sg_opts_get(*o, "transport");
  const char *launcher = sg_opts_get(*o, "launcher");
  const char *hosts = sg_opts_get(*o, "hosts");
  int64_t on_cluster = 0;
  SG_TRY(sg_opts_int_or(*o, "cluster.hosts", 0, &on_cluster));
  SG_TRY(check_hosts(p, e, *o, transport, launcher));
  hosts = sg_opts_get(*o, "hosts");
  const char *job = getenv("SLURM_JOB_ID");
  if (!strcmp(launcher, "auto") && job && *job && !(hosts && *hosts) && !on_cluster)
    launcher = "slurm"; /* inside an allocation: its nodes */
  else if (!strcmp(launcher, "auto"))
    launcher = !strcmp(transport, "mpi") || (hosts && *hosts) ? "mpirun" : "local"; /* not an engine: the launcher */
  else if (!strcmp(launcher, "slurm") && !(job && *job))
    return perr(e->pos, "launcher", "slurm starts ranks with srun inside an allocation, and "
                "SLURM_JOB_ID is not set: run sgdlab inside sbatch or salloc (sgdlab run --sbatch "
                "writes a batch script)");
  else if (!strcmp(launcher, "slurm") && ((hosts && *hosts) || on_cluster))
    return perr(e->pos, "launcher", "slurm places the ranks on the allocation's nodes; hosts and "
                "cluster: do not apply");
  else if (!strcmp(launcher, "local") && !strcmp(transport, "mpi")) /* not an engine: the launcher */
    return perr(e->pos, "launcher", "local cannot start MPI ranks; transport: mpi needs launcher mpirun (or auto)");
  else if (!strcmp(launcher, "local") && hosts && *hosts) /* not an engine: the launcher */
    return perr(e->pos, "hosts", "needs launcher mpirun (or auto); launcher local starts ranks on this host only");
  SG_TRY(sg_opts_set(*o, "launcher", launcher));
  launcher = sg_opts_get(*o, "launcher"); /* the set freed the value it replaced */
  /* ranks on other nodes or hosts: ipc cannot reach them, and they have
   * no run directory for its socket (the harness's is on this host) */
  if (!strcmp(launcher, "slurm") || !strcmp(launcher, "ssh") || (hosts && *hosts)) /* not an engine: the launcher */
    SG_TRY(sg_opts_set(*o, "zmq_scheme", "tcp"));
  SG_TRY(check_cluster(p, e, *o));
  int nprocs = 0;
  rc = sg_engine_nprocs(e->engine, *o, (int)workers, &nprocs);
  if (rc < 0) return perr(e->pos, "engine", "%s: %s", e->engine->name, sg_err_msg());
  if (nprocs < 1) return perr(e->pos, "engine", "%s: layout gives %d processes", e->engine->name, nprocs);
  if (e->engine->check_transport && (rc = e->engine->check_transport(*o, transport)) < 0)
    return perr(e->pos, "transport", "%s: %s", e->engine->name, sg_err_msg());
  SG_TRY(check_simulate(p, e, *o, nprocs));
  r->servers = 0;
  for (int i = 0; i < nprocs; i++)
    r->servers += sg_engine_role_kind(e->engine, *o, (int)workers, i) == SG_ROLE_HUB;
  r->opts = *o;
  *o = NULL;
  r->engine = e->engine;
  r->workers = (int)workers;
  r->nprocs = nprocs;
  r->repeat = repeat;
  r->seed = seed;
  x->nruns++; /* its variant and label: sg_config_variants, once all are known */
fail:
  return rc;
}

/* A relative train_file/test_file (libsvm) or data_dir (IDX) is relative
 * to the experiment file's directory when it comes from the file, to the current directory
 * when it comes from --set; either way the run stores it absolute. */
static int set_path(const parser_t *p, sg_opts_t *o, const pick_t *k, const char *v) {
  const char *ds = sg_opts_get(o, "dataset"); /* set before these (table order) */
  int libsvm = ds && (!strcmp(ds, "libsvm") || !strcmp(ds, "clicks")), idx = ds && strstr(ds, "mnist");
  int is_path = (libsvm && (!strcmp(k->s->name, "train_file") || !strcmp(k->s->name, "test_file"))) ||
                (idx && !strcmp(k->s->name, "data_dir"));
  if (!is_path || !p->dir || !*v || *v == '/' || !k->vs) return sg_opts_set(o, k->s->name, v);
  char cwd[4096];
  const char *base = p->dir;
  if (k->vs->pos.line == 0) { /* --set */
    if (!getcwd(cwd, sizeof cwd)) return sg_opts_set(o, k->s->name, v);
    base = cwd;
  }
  return sg_opts_setf(o, k->s->name, "%s/%s", base, v);
}

/* Options a variant ignores: set without any run of the entry that uses
 * them, they are an error naming what makes them meaningful.  The
 * engines' rules come from their tables (sg_engine_t.needs); these are
 * the workload's.  A workload key given for the whole experiment (the
 * workload section, a top-level key, --set) must be used by some run of
 * any entry; given in an entry, by some run of that entry. */
static const sg_option_need_t workload_needs[] = {
    {"train_file", "dataset", "|libsvm|clicks|"},
    {"test_file", "dataset", "|libsvm|clicks|"},
    {"holdout", "dataset", "|libsvm|clicks|"},
    {"format", "dataset", "|clicks|"},
    {"keys_per_field", "dataset", "|clicks|"},
    {"zipf", "dataset", "|clicks|"},
    {"fields", "model", "|embedding|"},
    {"table_rows", "model", "|embedding|"},
    {"embed_dim", "model", "|embedding|"},
    {"data_dir", "dataset", "|fashion-mnist|mnist|"},
    {"data_cache", "dataset", "|fashion-mnist|mnist|"},
    {"features", "dataset", "|libsvm|synthetic|synthetic-sparse|"},
    {"classes", "dataset", "|libsvm|synthetic|synthetic-sparse|"},
    {"nnz", "dataset", "|synthetic-sparse|"},
    {"hidden", "model", "|mlp|embedding|"},
    {"lr_gamma", "lr_schedule", "|step|"},
    {"lr_step_epochs", "lr_schedule", "|step|"},
    {"gpus_per_host", "device", "|cuda|"},
    {"partition_alpha", "partition", "|label-skew|"},
    {"partition", "engine", "|ps|allreduce|gossip|"},
    {NULL, NULL, NULL},
};
enum { MAX_NEEDS = 48, N_WL_NEEDS = sizeof workload_needs / sizeof *workload_needs - 1 };

/* Rule i of entry e: the workload's first, then the engine's; NULL past the end. */
static const sg_option_need_t *need_at(const entry_t *e, size_t i) {
  size_t nw = N_WL_NEEDS;
  if (i < nw) return &workload_needs[i];
  const sg_option_need_t *n = e->engine->needs;
  for (size_t j = nw; n && n->key && j < i; j++) n++;
  return n && n->key && i < MAX_NEEDS ? n : NULL;
}

/* The value set of `key` in entry e as the user gave it, or NULL. */
static const vset_t *given(const parser_t *p, const entry_t *e, const char *key) {
  const vset_t *v = layer_find(&e->set, key);
  if (!v) v = layer_find(&e->own, key);
  if (!v && !sg_setting_find(e->engine->options, key)) v = choose(p, e, key);
  return v;
}

/* Mark the rules one run (its options o) makes meaningful. */
static void note_needs(const entry_t *e, const sg_opts_t *o, int *used) {
  char v[128];
  const sg_option_need_t *n;
  for (size_t i = 0; (n = need_at(e, i)); i++) {
    snprintf(v, sizeof v, "|%s|", sg_opts_str_or(o, n->when, ""));
    if (strstr(n->values, v)) used[i] = 1;
  }
}

/* "key: only used with WHEN: a/b" at the key's place. */
static int need_error(const vset_t *v, const sg_option_need_t *n) {
  char vals[64];
  snprintf(vals, sizeof vals, "%s", n->values + 1);
  vals[strlen(vals) - 1] = '\0';
  for (char *c = vals; (c = strchr(c, '|'));) *c = '/'; /* "ring/cuda-ring" */
  return perr(v->pos, n->key, "only used with %s: %s", n->when, vals);
}

/* A workload key given for the whole experiment, not in entry e. */
static int experiment_wide(const entry_t *e, size_t i, const sg_option_need_t *n) {
  return i < N_WL_NEEDS && !layer_find(&e->set, n->key) && !layer_find(&e->own, n->key);
}

static int check_needs(parser_t *p, const entry_t *e, const int *used) {
  const sg_option_need_t *n;
  for (size_t i = 0; (n = need_at(e, i)); i++) {
    const vset_t *v;
    if (i < N_WL_NEEDS && used[i]) p->wl_used[i] = 1;
    if (used[i] || !(v = given(p, e, n->key)) || experiment_wide(e, i, n)) continue;
    return need_error(v, n);
  }
  return SG_OK;
}

/* The experiment-wide workload keys no run of any entry uses. */
static int check_workload_needs(const parser_t *p) {
  for (size_t i = 0; i < N_WL_NEEDS; i++) {
    const vset_t *v = layer_find(&p->setg, workload_needs[i].key);
    if (!v) v = layer_find(&p->top, workload_needs[i].key);
    if (v && !p->wl_used[i]) return need_error(v, &workload_needs[i]);
  }
  return SG_OK;
}

static int expand_entry(parser_t *p, sg_experiment_t *x, const entry_t *e) {
  int rc = SG_OK;
  size_t nk = 0;
  for (const sg_setting_t *s = sg_settings; s->name; s++) nk++;
  for (const sg_setting_t *s = e->engine->options; s && s->name; s++) nk++;
  pick_t *k = calloc(nk, sizeof *k);
  size_t *idx = calloc(nk, sizeof *idx);
  int used[MAX_NEEDS] = {0};
  sg_opts_t *o = NULL;
  if (!k || !idx) {
    rc = SG_ENOMEM;
    goto fail;
  }
  size_t i = 0;
  for (const sg_setting_t *s = sg_settings; s->name; s++, i++) k[i] = (pick_t){s, choose(p, e, s->name)};
  for (const sg_setting_t *s = e->engine->options; s && s->name; s++, i++)
    k[i] = (pick_t){s, layer_find(&e->set, s->name) ? layer_find(&e->set, s->name) : layer_find(&e->own, s->name)};

  for (;;) {
    /* one point of the sweep */
    if (!(o = sg_opts_new())) {
      rc = SG_ENOMEM;
      goto fail;
    }
    for (size_t j = 0; j < nk; j++) {
      const char *v = pick_value(&k[j], idx[j]);
      if (!strcmp(k[j].s->name, "name")) v = x->name;
      SG_TRY(set_path(p, o, &k[j], v));
      if (j == 0) SG_TRY(sg_opts_set(o, "engine", e->engine->name));
    }
    note_needs(e, o, used);
    const char *dev = sg_opts_str_or(o, "device", "");
    if (!sg_engine_runs_on(e->engine, dev)) { /* the engine table says where it runs */
      const vset_t *dv = choose(p, e, "device");
      const char *on = e->engine->devices; /* "|cpu|" */
      rc = perr(dv ? dv->pos : e->pos, "device", "%s: the %s engine runs on %.*s only", dev,
                e->engine->name, (int)strlen(on) - 2, on + 1);
      goto fail;
    }
    if (sg_device_admit(o) < 0) { /* device: cuda needs a device here (device.h) */
      const vset_t *dv = choose(p, e, "device");
      rc = perr(dv ? dv->pos : e->pos, "device", "%s", sg_err_msg());
      goto fail;
    }
    for (int64_t r = 0; r < p->repeat; r++) {
      if (x->nruns >= MAX_RUNS) {
        rc = perr(e->pos, "engine", "the sweep expands to more than %d runs", MAX_RUNS);
        goto fail;
      }
      sg_opts_t *one = sg_opts_dup(o);
      if (!one) {
        rc = SG_ENOMEM;
        goto fail;
      }
      rc = add_run(p, x, &one, e, (int)r);
      sg_opts_destroy(&one);
      SG_TRY(rc);
    }
    sg_opts_destroy(&o);
    /* odometer: the last swept key varies fastest */
    size_t j = nk;
    while (j > 0) {
      j--;
      size_t n = k[j].vs ? k[j].vs->n : 1;
      if (++idx[j] < n) break;
      idx[j] = 0;
      if (j == 0) goto done;
    }
    if (nk == 0) break;
  }
done:
  rc = check_needs(p, e, used);
fail:
  sg_opts_destroy(&o);
  free(k);
  free(idx);
  return rc;
}

/* Upper bound on the runs of an entry (to size the array). */
static size_t count_entry(const parser_t *p, const entry_t *e) {
  double n = (double)p->repeat;
  for (const sg_setting_t *s = sg_settings; s->name; s++) {
    const vset_t *v = choose(p, e, s->name);
    if (v) n *= (double)v->n;
  }
  for (const sg_setting_t *s = e->engine->options; s && s->name; s++) {
    const vset_t *v = layer_find(&e->set, s->name);
    if (!v) v = layer_find(&e->own, s->name);
    if (v) n *= (double)v->n;
  }
  return n > MAX_RUNS ? MAX_RUNS + 1 : (size_t)n;
}

static char *base_name(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  char *s = strdup(b);
  if (!s) return NULL;
  char *dot = strrchr(s, '.');
  if (dot && (!strcmp(dot, ".yaml") || !strcmp(dot, ".yml"))) *dot = '\0';
  return s;
}

void sg_experiment_destroy(sg_experiment_t **px) {
  if (!px || !*px) return;
  sg_experiment_t *x = *px;
  for (size_t i = 0; i < x->nruns; i++) sg_opts_destroy(&x->runs[i].opts);
  free(x->runs);
  free(x->name);
  free(x->path);
  free(x->config_text);
  free(x);
  *px = NULL;
}

/* name, path and config_text (the file, then one "# --set" line per
 * --set) of an experiment. */
static int experiment_fields(sg_experiment_t *x, const char *name, const char *fname,
                             const char *text, size_t len, char *const *sets, int nsets) {
  x->name = name ? strdup(name) : base_name(fname);
  x->path = strdup(fname);
  size_t tl = len + 2;
  for (int i = 0; i < nsets; i++) tl += strlen(sets[i]) + 10;
  if (!x->name || !x->path || !(x->config_text = malloc(tl))) return SG_ENOMEM;
  memcpy(x->config_text, text, len);
  size_t at = len;
  if (nsets && at && text[at - 1] != '\n') x->config_text[at++] = '\n';
  for (int i = 0; i < nsets; i++)
    at += (size_t)snprintf(x->config_text + at, tl - at, "# --set %s\n", sets[i]);
  x->config_text[at] = '\0';
  return SG_OK;
}

/* Every engine entry's sweep expanded into x->runs (at most MAX_RUNS). */
static int expand_runs(parser_t *p, sg_experiment_t *x, pos_t top) {
  size_t total = 0;
  for (size_t i = 0; i < p->nent; i++) total += count_entry(p, &p->ent[i]);
  if (total > MAX_RUNS)
    return perr(top, "engines", "the sweep expands to more than %d runs", MAX_RUNS);
  if (!(x->runs = calloc(total ? total : 1, sizeof *x->runs))) return SG_ENOMEM;
  for (size_t i = 0; i < p->nent; i++) SG_CHECK(expand_entry(p, x, &p->ent[i]));
  SG_CHECK(check_workload_needs(p));
  SG_CHECK(sg_config_variants(x));
  return SG_OK;
}

/* What the parser owns (not the YAML document). */
static void parser_free(parser_t *p) {
  layer_free(&p->top);
  layer_free(&p->setg);
  for (size_t i = 0; i < p->nent; i++) {
    layer_free(&p->ent[i].own);
    layer_free(&p->ent[i].set);
  }
  free(p->ent);
  free(p->name);
  for (size_t i = 0; i < p->nerrs; i++) free(p->errs[i].msg);
  for (size_t i = 0; i < p->nwheres; i++) free(p->wheres[i]);
  free(p->wheres);
}

static int config_parse(sg_experiment_t **out, const char *fname, const char *dir,
                        const char *text, size_t len, char *const *sets, int nsets) {
  int rc = SG_OK;
  yaml_parser_t yp;
  yaml_document_t doc;
  int have_doc = 0;
  parser_t p = {.fname = fname, .dir = dir, .doc = &doc, .repeat = 1};
  sg_experiment_t *x = calloc(1, sizeof *x);
  if (!x) return SG_ENOMEM;
  yaml_parser_initialize(&yp);
  SG_TRY(yaml_prescan(fname, text, len, 1));
  yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
  if (!yaml_parser_load(&yp, &doc)) {
    rc = yaml_fail(fname, &yp);
    goto fail;
  }
  have_doc = 1;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  pos_t top = {fname, 1, 1};
  if (!root) {
    rc = perr(top, "engines", "the experiment file is empty; it needs at least engines: [local]");
    goto fail;
  }
  if (root->type != YAML_MAPPING_NODE) {
    rc = perr(node_pos(&p, root), "(top level)", "expected a mapping of keys (name:, workload:, engines:, ...)");
    goto fail;
  }
  rc = parse_pairs(&p, root, IN_TOP, NULL, &p.top);
  if (rc == SG_ECONFIG && p.nerrs) /* the mistake that stopped the walk goes last */
    SG_TRY(keep_error(&p, rc, (pos_t){fname, INT_MAX, 0}));
  else SG_TRY(rc);
  if (p.nerrs) {
    rc = report_errors(&p);
    goto fail;
  }
  if (!p.nent) {
    rc = perr(top, "engines", "missing; list the engines to run, e.g. engines: [local]");
    goto fail;
  }
  for (int i = 0; i < nsets; i++) SG_TRY(apply_set(&p, sets[i]));

  SG_TRY(experiment_fields(x, p.name, fname, text, len, sets, nsets));
  SG_TRY(expand_runs(&p, x, top));
  *out = x;
  x = NULL;
fail:
  sg_experiment_destroy(&x);
  parser_free(&p);
  if (have_doc) yaml_document_delete(&doc);
  yaml_parser_delete(&yp);
  return rc;
}

int sg_config_parse(sg_experiment_t **out, const char *fname, const char *text, size_t len,
                    char *const *sets, int nsets) {
  return config_parse(out, fname, NULL, text, len, sets, nsets);
}

/* The absolute directory of path (NULL when it cannot be resolved). */
static char *dir_of(const char *path) {
  char *copy = strdup(path), *abs = NULL;
  if (!copy) return NULL;
  char *slash = strrchr(copy, '/');
  if (slash == copy) slash[1] = '\0';
  else if (slash) *slash = '\0';
  abs = realpath(slash ? copy : ".", NULL);
  free(copy);
  return abs;
}

int sg_config_load(sg_experiment_t **out, const char *path, char *const *sets, int nsets) {
  FILE *f = fopen(path, "rb");
  if (!f) return sg_err_set(SG_ECONFIG, "%s: cannot open: %s", path, strerror(errno));
  char *text = NULL, *dir = NULL;
  size_t len = 0, cap = 0;
  int rc;
  for (;;) {
    if (len + 4096 > cap) {
      cap = cap ? 2 * cap : 8192;
      char *t = realloc(text, cap);
      if (!t) {
        rc = SG_ENOMEM;
        goto fail;
      }
      text = t;
    }
    size_t got = fread(text + len, 1, cap - len - 1, f);
    len += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    rc = sg_err_set(SG_ECONFIG, "%s: read error", path);
    goto fail;
  }
  text[len] = '\0';
  dir = dir_of(path);
  rc = config_parse(out, path, dir, text, len, sets, nsets);
fail:
  free(dir);
  free(text);
  fclose(f);
  return rc;
}
