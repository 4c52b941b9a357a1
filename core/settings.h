/* settings.h - every experiment-file key, declared once.
 *
 * One table entry per key (name, type, default, help, bounds) drives the
 * YAML parser's validation, `sgdlab help config`, and what is stored with
 * each run (runs.options_json).  Engines declare their own keys with the
 * same struct in their sg_engine_t.options table.
 */
#ifndef SG_SETTINGS_H
#define SG_SETTINGS_H

#include <stddef.h>

#include "opts.h"

typedef enum {
  SG_T_INT,     /* integer; K/M/G suffixes allowed */
  SG_T_FLOAT,   /* real number */
  SG_T_BOOL,    /* true/false */
  SG_T_STR,     /* free text */
  SG_T_ENUM,    /* one of `choices` ("a|b|c") */
  SG_T_INTLIST, /* list of integers, stored "1,2,3" */
  SG_T_STRLIST, /* list of words (no commas, one line), stored "a,b,c" */
} sg_type_t;

typedef enum {
  SG_S_EXPERIMENT, /* top level: name, workers, repeat, ... */
  SG_S_WORKLOAD,   /* under `workload:` (dataset, model, optimizer) */
  SG_S_RUN,        /* top level or per engine entry: transport, launcher */
  SG_S_ENGINE,     /* per engine entry, declared by the engine */
  SG_S_CLUSTER,    /* under `cluster:` (top level or per engine entry);
                      names are "cluster.KEY" */
  SG_S_SIMULATE,   /* under `simulate:` (top level or per engine entry);
                      names are "simulate.KEY"; the section itself sets
                      `simulate` true */
} sg_section_t;

typedef struct sg_setting {
  const char *name;
  sg_type_t type;
  const char *def;     /* default as text; "" means empty / unset */
  const char *help;    /* one line */
  const char *choices; /* SG_T_ENUM: "a|b|c"; NULL otherwise */
  double min, max;     /* numeric bounds, inclusive; ignored when min > max */
  sg_section_t section;
} sg_setting_t;

/* The global table: experiment, workload and run keys; terminated by an
 * entry with name == NULL. */
extern const sg_setting_t sg_settings[];

/* Entry named `name` in a NULL-terminated table, or NULL. */
const sg_setting_t *sg_setting_find(const sg_setting_t *table, const char *name);

/* Check `value` against the entry's type, choices and bounds.  On failure
 * returns SG_ECONFIG and writes a short reason ("expected an integer, got
 * 'abc'", "must be one of zmq|mpi", "must be >= 1") into why. */
int sg_setting_check(const sg_setting_t *s, const char *value, char *why,
                     size_t whylen);

/* Put every default of `table` not already present into `o`. */
int sg_settings_defaults(const sg_setting_t *table, sg_opts_t *o);

const char *sg_type_name(sg_type_t t);

/* A setting's value: o's (o may be NULL), or when o lacks the key the
 * default of its entry in table (an engine's options; may be NULL) or in
 * sg_settings.  Defaults live in the tables only: an engine fills its
 * configuration with these, never with a literal fallback of its own.
 * SG_ECONFIG naming the key when no table has it or it does not parse.
 * *out of sg_setting_str points into o or the table. */
int sg_setting_str(const sg_opts_t *o, const sg_setting_t *table, const char *key,
                   const char **out);
int sg_setting_int(const sg_opts_t *o, const sg_setting_t *table, const char *key, int64_t *out);
int sg_setting_double(const sg_opts_t *o, const sg_setting_t *table, const char *key,
                      double *out);
/* The same for what cannot fail on a validated run (labels, memory plans,
 * benchmark names): the value or the table's default, "" (0) when no
 * table has the key or it does not parse (then with sg_parse_int's
 * message set). */
const char *sg_setting_or(const sg_opts_t *o, const sg_setting_t *table, const char *key);
int64_t sg_setting_int_or(const sg_opts_t *o, const sg_setting_t *table, const char *key);

#endif
