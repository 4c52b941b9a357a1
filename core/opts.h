/* opts.h - a resolved run's settings as key -> string, with typed getters.
 *
 * The harness resolves an experiment file into one sg_opts_t per run (every
 * key of the settings table present, engine options included), writes it to
 * a spec file with sg_opts_save(), and each rank reads it back with
 * sg_opts_load().  Values are stored as text exactly as they will appear in
 * runs.options_json; typed getters parse on demand and name the key when a
 * value does not parse.
 *
 * Lists (e.g. hidden: [256, 128]) are stored comma-separated: "256,128".
 */
#ifndef SG_OPTS_H
#define SG_OPTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sg_opts sg_opts_t;

/* Caller owns the result; free with sg_opts_destroy(). */
sg_opts_t *sg_opts_new(void);
sg_opts_t *sg_opts_dup(const sg_opts_t *o);
void sg_opts_destroy(sg_opts_t **o);

/* Set (copying key and value); replaces an existing key. */
int sg_opts_set(sg_opts_t *o, const char *key, const char *value);
int sg_opts_setf(sg_opts_t *o, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* NULL when absent. */
const char *sg_opts_get(const sg_opts_t *o, const char *key);
int sg_opts_has(const sg_opts_t *o, const char *key);
size_t sg_opts_count(const sg_opts_t *o);
/* i-th entry in insertion order. */
const char *sg_opts_key(const sg_opts_t *o, size_t i);
const char *sg_opts_value(const sg_opts_t *o, size_t i);

/* Typed getters: return 0, or SG_ECONFIG (message names the key) when the
 * key is absent or its value does not parse. */
/* An integer setting's text ("1M", "131072") as sg_opts_int reads it:
 * K/M/G are powers of two; key names it in the error. */
int sg_parse_int(const char *key, const char *s, int64_t *out);
int sg_opts_int(const sg_opts_t *o, const char *key, int64_t *out);
int sg_opts_double(const sg_opts_t *o, const char *key, double *out);
int sg_opts_bool(const sg_opts_t *o, const char *key, int *out);
int sg_opts_str(const sg_opts_t *o, const char *key, const char **out);
/* Comma-separated integers; *n gets the count (at most cap). */
int sg_opts_intlist(const sg_opts_t *o, const char *key, int64_t *out,
                    size_t cap, size_t *n);

/* Getters with a fallback when the key is absent (still SG_ECONFIG when
 * present but malformed). */
int sg_opts_int_or(const sg_opts_t *o, const char *key, int64_t def,
                   int64_t *out);
int sg_opts_double_or(const sg_opts_t *o, const char *key, double def,
                      double *out);
const char *sg_opts_str_or(const sg_opts_t *o, const char *key,
                           const char *def);

/* Options are parsed once: an engine fills its typed configuration from
 * these getters before its training loop, never inside it.  Training
 * starts (sg_trainlog_begin, and the first step record of a rank without
 * a trainlog, e.g. a ps server) with sg_opts_freeze(1); from then on every
 * lookup by key (sg_opts_get, _has and the typed getters) is counted, in
 * this process, until sg_opts_freeze(0) after the engine returns.  The
 * rank records a nonzero count as run_info opts.late_reads.rankR ("N,
 * first KEY"), and the training tests require none.  Returns the count;
 * *first_key (may be NULL) the first key read late, or NULL. */
void sg_opts_freeze(int on);
long sg_opts_late_reads(const char **first_key);

/* "key=value\n" lines of any length; SG_EINVAL (nothing written) for a
 * value with a newline or a key with '=' or a newline, which would read
 * back as another key. */
int sg_opts_save(const sg_opts_t *o, const char *path);
int sg_opts_load(sg_opts_t **out, const char *path);
/* JSON object of all keys (numbers unquoted when they are JSON numbers;
 * control bytes escaped).
 * Caller frees the result with free(). */
char *sg_opts_json(const sg_opts_t *o);

#endif
