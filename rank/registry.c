/* registry.c - every engine, by name.  Adding an engine = one line here. */
#include <string.h>

#include "engine.h"

extern const sg_engine_t sg_engine_local;
extern const sg_engine_t sg_engine_ps;
extern const sg_engine_t sg_engine_mapreduce;
extern const sg_engine_t sg_engine_allreduce;
extern const sg_engine_t sg_engine_gossip;

const sg_engine_t *const sg_engines[] = {
    &sg_engine_local,
    &sg_engine_ps,
    &sg_engine_mapreduce,
    &sg_engine_allreduce,
    &sg_engine_gossip,
    NULL,
};

const sg_engine_t *sg_engine_find(const char *name) {
  for (const sg_engine_t *const *e = sg_engines; *e; e++)
    if (strcmp((*e)->name, name) == 0) return *e;
  return NULL;
}

const char *sg_engine_role(const sg_engine_t *e, const sg_opts_t *o, int workers, int rank) {
  return e->role ? e->role(o, workers, rank) : "worker";
}

int sg_engine_nprocs(const sg_engine_t *e, const sg_opts_t *o, int workers, int *nprocs) {
  if (e->layout) return e->layout(o, workers, nprocs);
  *nprocs = workers;
  return 0;
}
