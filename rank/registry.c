/* registry.c - every engine, by name.  Adding an engine to the tree = one
 * line here (docs/design.md, "Adding an engine"); a program that links an
 * engine of its own (a test's) adds it with sg_engine_register(). */
#include <string.h>

#include "engine.h"

extern const sg_engine_t sg_engine_local;
extern const sg_engine_t sg_engine_ps;
extern const sg_engine_t sg_engine_mapreduce;
extern const sg_engine_t sg_engine_allreduce;
extern const sg_engine_t sg_engine_gossip;

/* The tree's five, then room for SG_ENGINES_EXTRA registered ones; always
 * NULL-terminated (the last slot is never filled). */
#define SG_ENGINES_BUILTIN 5
#define SG_ENGINES_EXTRA 4
const sg_engine_t *sg_engines[SG_ENGINES_BUILTIN + SG_ENGINES_EXTRA + 1] = {
    &sg_engine_local,
    &sg_engine_ps,
    &sg_engine_mapreduce,
    &sg_engine_allreduce,
    &sg_engine_gossip,
    NULL,
};

int sg_engine_register(const sg_engine_t *e) {
  size_t i = 0;
  while (sg_engines[i]) {
    if (!strcmp(sg_engines[i]->name, e->name)) return -1; /* a name is one engine */
    i++;
  }
  if (i + 1 >= sizeof sg_engines / sizeof *sg_engines) return -1;
  sg_engines[i] = e;
  return 0;
}

const sg_engine_t *sg_engine_find(const char *name) {
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    if (strcmp((*e)->name, name) == 0) return *e;
  return NULL;
}

const char *sg_engine_role(const sg_engine_t *e, const sg_opts_t *o, int workers, int rank) {
  return e->role ? e->role(o, workers, rank) : "worker";
}

sg_role_kind_t sg_engine_role_kind(const sg_engine_t *e, const sg_opts_t *o, int workers,
                                   int rank) {
  const char *role = sg_engine_role(e, o, workers, rank);
  for (const sg_role_info_t *r = e->roles; r && r->name; r++)
    if (!strcmp(r->name, role)) return r->kind;
  return SG_ROLE_WORKER;
}

int sg_engine_runs_on(const sg_engine_t *e, const char *device) {
  if (!e->devices) return 1;
  const char *list = e->devices;
  size_t n = strlen(device);
  for (const char *p = strstr(list, device); p; p = strstr(p + 1, device))
    if (p > list && p[-1] == '|' && p[n] == '|') return 1;
  return 0;
}

int sg_engine_nprocs(const sg_engine_t *e, const sg_opts_t *o, int workers, int *nprocs) {
  if (e->layout) return e->layout(o, workers, nprocs);
  *nprocs = workers;
  return 0;
}
