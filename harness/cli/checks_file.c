/* checks_file.c - reading a checks file and a predictions file (checks.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "checks.h"
#include "err.h"

typedef struct doc {
  yaml_document_t d;
  const char *path;
} doc_t;

static int at(const doc_t *x, const yaml_node_t *n, const char *key, const char *what) {
  return sg_err_set(SG_ECONFIG, "%s:%zu:%zu: %s: %s", x->path, n->start_mark.line + 1,
                    n->start_mark.column + 1, key, what);
}

static yaml_node_t *node(doc_t *x, int id) { return yaml_document_get_node(&x->d, id); }

static const char *scalar(const yaml_node_t *n) {
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int copy(doc_t *x, yaml_node_t *v, const char *key, char *dst, size_t cap) {
  const char *s = scalar(v);
  if (!s) return at(x, v, key, "expected a scalar");
  if (strlen(s) >= cap) return at(x, v, key, "too long");
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) /* printed on a terminal */
    if (*c < 0x20 || *c == 0x7f) return at(x, v, key, "a control character");
  memcpy(dst, s, strlen(s) + 1);
  return SG_OK;
}

static int number(doc_t *x, yaml_node_t *v, const char *key, double *out) {
  const char *s = scalar(v);
  char *end = NULL;
  if (!s) return at(x, v, key, "expected a number");
  errno = 0;
  *out = strtod(s, &end);
  if (end == s || *end || errno || !isfinite(*out)) return at(x, v, key, "expected a number");
  return SG_OK;
}

static int name_ok(const char *k) {
  if (!*k) return 0;
  for (; *k; k++)
    if (!isalnum((unsigned char)*k) && *k != '_' && *k != '.' && *k != '-') return 0;
  return 1;
}

/* {key: value, ...} into w.  Booleans become 1 / 0 (as the runs'
 * options record them). */
static int where_load(doc_t *x, yaml_node_t *m, const char *key, ck_where_t *w) {
  if (m->type != YAML_MAPPING_NODE) return at(x, m, key, "expected a mapping {key: value}");
  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    yaml_node_t *k = node(x, p->key), *v = node(x, p->value);
    if (w->n == CK_MAX_WHERE) return at(x, k, key, "too many keys");
    ck_kv_t *kv = &w->kv[w->n++];
    SG_CHECK(copy(x, k, key, kv->key, sizeof kv->key));
    if (!name_ok(kv->key)) return at(x, k, key, "a key is letters, digits, '_', '.', '-'");
    SG_CHECK(copy(x, v, kv->key, kv->val, sizeof kv->val));
    if (!strcmp(kv->val, "true")) strcpy(kv->val, "1");
    if (!strcmp(kv->val, "false")) strcpy(kv->val, "0");
  }
  return SG_OK;
}

static int pair_load(doc_t *x, yaml_node_t *v, const char *key, double *a, double *b) {
  if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.top - v->data.sequence.items.start != 2)
    return at(x, v, key, "expected two items [A, B]");
  yaml_node_item_t *it = v->data.sequence.items.start;
  SG_CHECK(number(x, node(x, it[0]), key, a));
  return number(x, node(x, it[1]), key, b);
}

static int ratio_load(doc_t *x, yaml_node_t *v, ck_check_t *c) {
  if (v->type != YAML_SEQUENCE_NODE || v->data.sequence.items.top - v->data.sequence.items.start != 2)
    return at(x, v, "ratio", "expected [{numerator}, {denominator}]");
  yaml_node_item_t *it = v->data.sequence.items.start;
  SG_CHECK(where_load(x, node(x, it[0]), "ratio", &c->where));
  c->kind = CK_RATIO;
  return where_load(x, node(x, it[1]), "ratio", &c->other);
}

/* One key of a check. */
static int check_key(doc_t *x, const char *k, yaml_node_t *kn, yaml_node_t *v, ck_check_t *c) {
  double d = 0;
  if (!strcmp(k, "what")) return copy(x, v, k, c->what, sizeof c->what);
  if (!strcmp(k, "measure")) return copy(x, v, k, c->measure, sizeof c->measure);
  if (!strcmp(k, "where")) return where_load(x, v, k, &c->where);
  if (!strcmp(k, "ratio")) return ratio_load(x, v, c);
  if (!strcmp(k, "band")) return pair_load(x, v, k, &c->lo, &c->hi);
  if (!strcmp(k, "expect")) {
    if (c->kind != CK_PREDICTED) c->kind = CK_EXPECT;
    return copy(x, v, k, c->expr, sizeof c->expr);
  }
  if (!strcmp(k, "bound")) {
    const char *s = scalar(v);
    if (!s || strcmp(s, "upper")) return at(x, v, k, "upper (the value at most the expression)");
    c->upper = 1;
    return SG_OK;
  }
  if (!strcmp(k, "tol")) {
    SG_CHECK(number(x, v, k, &c->tol));
    return c->tol < 0 ? at(x, v, k, "must be >= 0") : SG_OK;
  }
  if (!strcmp(k, "experiment")) return copy(x, v, k, c->exp, sizeof c->exp);
  if (!strcmp(k, "count")) return c->kind = CK_COUNT, where_load(x, v, k, &c->where);
  if (!strcmp(k, "same")) return c->kind = CK_SAME, copy(x, v, k, c->key, sizeof c->key);
  if (!strcmp(k, "predicted")) return c->kind = CK_PREDICTED, copy(x, v, k, c->key, sizeof c->key);
  if (!strcmp(k, "min") || !strcmp(k, "points")) {
    SG_CHECK(number(x, v, k, &d));
    if (d < 0 || d > 1000 || d != floor(d)) return at(x, v, k, "expected an integer 0..1000");
    *(!strcmp(k, "min") ? &c->min : &c->points) = (int)d;
    return SG_OK;
  }
  return at(x, kn, k, "unknown key (what, measure, where, expect, tol, ratio, band, count, "
                      "min, same, predicted, points, experiment, bound)");
}

static const char *const MEASURES[] = {"bytes",     "worker_bytes", "step_ms", "comm_ms",
                                       "wait_ms",   "comm_share", "samples_per_s", "final_acc",
                                       "max_staleness", "params", "wall_s", "steps",
                                       "blame_rank", "bench_us", "wrong", NULL};

static int check_done(doc_t *x, yaml_node_t *m, ck_check_t *c) {
  int known = 0, needs_measure = c->kind == CK_EXPECT || c->kind == CK_RATIO ||
                                 (c->kind == CK_PREDICTED && !c->expr[0]);
  for (const char *const *s = MEASURES; *s; s++) known |= !strcmp(*s, c->measure);
  if (needs_measure && !known)
    return at(x, m, "measure", "one of bytes, worker_bytes, step_ms, comm_ms, wait_ms, comm_share, "
                               "samples_per_s, final_acc, max_staleness, params, wall_s, steps, "
                               "blame_rank, bench_us, wrong");
  if (c->kind == CK_RATIO && !(c->lo <= c->hi && c->hi > 0))
    return at(x, m, "band", "a ratio needs band: [lo, hi] with lo <= hi");
  if (c->kind == CK_EXPECT || (c->kind == CK_PREDICTED && c->expr[0])) {
    double v;
    if (ck_expr(c->expr, 4, 2, 1, &v) < 0) return at(x, m, "expect", sg_err_msg());
  }
  if (c->kind == CK_SAME && !name_ok(c->key)) return at(x, m, "same", "not an option name");
  if (!c->what[0]) return at(x, m, "what", "every check says what it checks");
  c->line = (int)m->start_mark.line + 1;
  return SG_OK;
}

static int checks_load(doc_t *x, yaml_node_t *seq, ck_file_t *f) {
  if (seq->type != YAML_SEQUENCE_NODE) return at(x, seq, "checks", "expected a list");
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    yaml_node_t *m = node(x, *it);
    if (f->nchecks == CK_MAX_CHECKS) return at(x, m, "checks", "too many checks");
    if (m->type != YAML_MAPPING_NODE) return at(x, m, "checks", "each check is a mapping");
    ck_check_t *c = &f->checks[f->nchecks++];
    *c = (ck_check_t){.kind = CK_EXPECT, .points = 1, .lo = 1, .hi = 0, .min = 1};
    c->kind = (ck_kind_t)-1;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
      yaml_node_t *kn = node(x, p->key);
      const char *k = scalar(kn);
      if (!k) return at(x, kn, "checks", "keys are scalars");
      SG_CHECK(check_key(x, k, kn, node(x, p->value), c));
    }
    if ((int)c->kind == -1)
      return at(x, m, "checks", "a check has one of expect, ratio, count, same, predicted");
    SG_CHECK(check_done(x, m, c));
  }
  return SG_OK;
}

static int bench_load(doc_t *x, yaml_node_t *seq, ck_file_t *f) {
  if (seq->type != YAML_SEQUENCE_NODE) return at(x, seq, "bench", "expected a list of arguments");
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    const char *s = scalar(node(x, *it));
    if (!s) return at(x, node(x, *it), "bench", "arguments are scalars");
    if (f->nbench == CK_MAX_ARGS - 1) return at(x, node(x, *it), "bench", "too many arguments");
    if (!(f->bench[f->nbench++] = strdup(s))) return sg_err_set(SG_ENOMEM, "out of memory");
  }
  return SG_OK;
}

static int top_key(doc_t *x, const char *k, yaml_node_t *kn, yaml_node_t *v, ck_file_t *f) {
  if (!strcmp(k, "says")) return copy(x, v, k, f->says, sizeof f->says);
  if (!strcmp(k, "source")) return SG_OK; /* for the reader */
  if (!strcmp(k, "experiment")) {
    SG_CHECK(copy(x, v, k, f->experiment, sizeof f->experiment));
    return strchr(f->experiment, '/') || f->experiment[0] == '.'
               ? at(x, v, k, "a file name next to this file")
               : SG_OK;
  }
  if (!strcmp(k, "name")) return copy(x, v, k, f->name, sizeof f->name);
  if (!strcmp(k, "root")) {
    const char *s = scalar(v);
    if (!s || (strcmp(s, "true") && strcmp(s, "false"))) return at(x, v, k, "true or false");
    f->root = !strcmp(s, "true");
    return SG_OK;
  }
  if (!strcmp(k, "bench")) return bench_load(x, v, f);
  if (!strcmp(k, "checks")) return checks_load(x, v, f);
  if (!strcmp(k, "rounds")) {
    double d = 0;
    SG_CHECK(number(x, v, k, &d));
    if (d != floor(d) || d < 1 || d > CK_MAX_ROUNDS) return at(x, v, k, "a whole number, 1 to 9");
    f->rounds = (int)d;
    return SG_OK;
  }
  if (!strcmp(k, "quiet_load")) {
    SG_CHECK(number(x, v, k, &f->quiet_load));
    return f->quiet_load >= 0 && f->quiet_load <= 1000 ? SG_OK : at(x, v, k, "0 to 1000");
  }
  return at(x, kn, k,
            "unknown key (says, source, experiment, name, root, bench, rounds, quiet_load,"
            " checks)");
}

/* The whole file, read from a regular file of at most 1 MiB (a FIFO
 * would block the open, /dev/zero never ends): *text malloc'ed. */
static int slurp(const char *path, char **text, size_t *len) {
  struct stat sb;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), rc = SG_OK;
  ssize_t got = 0;
  *text = NULL;
  if (fd < 0) return sg_err_set(SG_ENOTFOUND, "%s: %s", path, strerror(errno));
  if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > (1 << 20))
    rc = sg_err_set(SG_ECONFIG, "%s:1:1: not a regular file of at most 1 MiB", path);
  else if (!(*text = malloc((size_t)sb.st_size + 1)))
    rc = sg_err_set(SG_ENOMEM, "out of memory");
  else if ((got = read(fd, *text, (size_t)sb.st_size)) != sb.st_size)
    rc = sg_err_set(SG_EIO, "%s: %s", path, got < 0 ? strerror(errno) : "short read");
  close(fd);
  if (rc < 0) free(*text), *text = NULL;
  *len = (size_t)got;
  return rc;
}

static int yaml_err(const char *path, const yaml_parser_t *yp) {
  return sg_err_set(SG_ECONFIG, "%s:%zu:%zu: %s", path, yp->problem_mark.line + 1,
                    yp->problem_mark.column + 1, yp->problem ? yp->problem : "not YAML");
}

/* libyaml's loader takes time quadratic in the nesting depth (a 100 KB
 * file of '[' took minutes): one pass over the events first, stopping
 * at the first level deeper than 32. */
static int prescan(const char *path, const char *text, size_t len) {
  yaml_parser_t yp;
  yaml_event_t ev;
  int depth = 0, rc = SG_OK;
  yaml_parser_initialize(&yp);
  yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
  for (;;) {
    if (!yaml_parser_parse(&yp, &ev)) {
      rc = yaml_err(path, &yp);
      break;
    }
    yaml_event_type_t t = ev.type;
    size_t line = ev.start_mark.line + 1, col = ev.start_mark.column + 1;
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT) break;
    if ((t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) && ++depth > 32) {
      rc = sg_err_set(SG_ECONFIG, "%s:%zu:%zu: nested deeper than 32 levels", path, line, col);
      break;
    }
    if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) depth--;
  }
  yaml_parser_delete(&yp);
  return rc;
}

static int load_doc(doc_t *x, const char *path, yaml_node_t **root) {
  yaml_parser_t yp;
  char *text = NULL;
  size_t len = 0;
  int rc = slurp(path, &text, &len);
  if (rc == SG_OK) rc = prescan(path, text, len);
  if (rc < 0) return free(text), rc;
  yaml_parser_initialize(&yp);
  yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
  if (!yaml_parser_load(&yp, &x->d)) rc = yaml_err(path, &yp);
  yaml_parser_delete(&yp);
  free(text);
  if (rc < 0) return rc;
  x->path = path;
  *root = yaml_document_get_root_node(&x->d);
  if (!*root || (*root)->type != YAML_MAPPING_NODE) {
    yaml_document_delete(&x->d);
    return sg_err_set(SG_ECONFIG, "%s:1:1: expected a mapping", path);
  }
  return SG_OK;
}

int ck_file_load(ck_file_t *f, const char *path) {
  doc_t x = {0};
  yaml_node_t *root;
  int rc = SG_OK;
  memset(f, 0, sizeof *f);
  f->rounds = 1;
  f->quiet_load = CK_QUIET_LOAD;
  snprintf(f->path, sizeof f->path, "%s", path);
  SG_CHECK(load_doc(&x, path, &root));
  for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
       p++) {
    yaml_node_t *kn = node(&x, p->key);
    const char *k = scalar(kn);
    if (!k) {
      rc = at(&x, kn, "(top)", "keys are scalars");
      goto fail;
    }
    SG_TRY(top_key(&x, k, kn, node(&x, p->value), f));
  }
  if (!f->nchecks) rc = sg_err_set(SG_ECONFIG, "%s:1:1: checks: none", path);
fail:
  yaml_document_delete(&x.d);
  if (rc < 0) ck_file_free(f);
  return rc;
}

void ck_file_free(ck_file_t *f) {
  for (int i = 0; i < f->nbench; i++) free(f->bench[i]);
  f->nbench = 0;
}

int ck_preds_load(ck_preds_t *p, const char *path) {
  doc_t x = {0};
  yaml_node_t *root;
  int rc = SG_OK;
  memset(p, 0, sizeof *p);
  snprintf(p->path, sizeof p->path, "%s", path);
  SG_CHECK(load_doc(&x, path, &root));
  for (yaml_node_pair_t *q = root->data.mapping.pairs.start; q < root->data.mapping.pairs.top;
       q++) {
    yaml_node_t *kn = node(&x, q->key);
    if (p->n == CK_MAX_PRED) {
      rc = at(&x, kn, "(top)", "too many predictions");
      goto fail;
    }
    SG_TRY(copy(&x, kn, "(top)", p->name[p->n], sizeof p->name[p->n]));
    SG_TRY(number(&x, node(&x, q->value), p->name[p->n], &p->val[p->n]));
    p->n++;
  }
fail:
  yaml_document_delete(&x.d);
  return rc;
}
