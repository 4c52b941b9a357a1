/* run_cluster.c - a run on an emulated cluster (see run_cluster.h). */
#include "run_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

struct sg_run_cluster {
  sg_cluster_t *cl;
  int nprocs;
  int *host_of;                                /* [nprocs] */
  char host[SG_RUN_CLUSTER_MAX_HOSTS][16]; /* "h12" */
};

/* ---- placement ------------------------------------------------------------ */

static int dedicated(const sg_run_spec_t *run, int r) {
  return sg_engine_role_kind(run->engine, run->opts, run->workers, r) == SG_ROLE_HUB;
}

int sg_cluster_place(const sg_run_spec_t *run, int hosts, int pack, int *host_of) {
  int n = run->nprocs, used = 0;
  if (hosts < 1) hosts = 1;
  if (pack) {
    int per = (n + hosts - 1) / hosts;
    for (int r = 0; r < n; r++) host_of[r] = r / per;
  } else {
    int ded = 0, w = 0;
    for (int r = 0; r < n; r++)
      if (dedicated(run, r)) host_of[r] = ded++ % hosts;
    int base = ded < hosts ? ded : 0, span = ded < hosts ? hosts - ded : hosts;
    for (int r = 0; r < n; r++)
      if (!dedicated(run, r)) host_of[r] = base + w++ % span;
  }
  for (int r = 0; r < n; r++)
    if (host_of[r] + 1 > used) used = host_of[r] + 1;
  return used;
}

/* ---- what a run line says --------------------------------------------------- */

void sg_run_placement(const sg_run_spec_t *run, char *out, size_t cap) {
  int64_t hosts = 0;
  const char *list = sg_opts_str_or(run->opts, "hosts", "");
  out[0] = '\0';
  if (sg_opts_int_or(run->opts, "cluster.hosts", 0, &hosts) < 0) sg_err_clear();
  if (hosts > 0)
    snprintf(out, cap, " on an emulated cluster of %lld host%s (link %s, %s)", (long long)hosts,
             hosts == 1 ? "" : "s", sg_opts_str_or(run->opts, "cluster.link", "1gbit"),
             sg_opts_str_or(run->opts, "cluster.placement", "spread"));
  else if (*list)
    snprintf(out, cap, " on hosts %s", list);
}

int sg_run_placement_ranks(const sg_run_spec_t *run, char *out, size_t cap) {
  int host_of[SG_RUN_CLUSTER_MAX_RANKS];
  int64_t hosts = 0;
  size_t at = 0;
  out[0] = '\0';
  if (sg_opts_int_or(run->opts, "cluster.hosts", 0, &hosts) < 0 || hosts <= 0 ||
      run->nprocs > SG_RUN_CLUSTER_MAX_RANKS) {
    sg_err_clear();
    return 0;
  }
  int pack = !strcmp(sg_opts_str_or(run->opts, "cluster.placement", "spread"), "pack");
  sg_cluster_place(run, (int)hosts, pack, host_of);
  for (int r = 0; r < run->nprocs && at + 1 < cap; r++)
    at += (size_t)snprintf(out + at, cap - at, "%sh%d: rank %d %s", r ? ", " : "", host_of[r], r,
                           sg_engine_role(run->engine, run->opts, run->workers, r));
  return 1;
}

/* ---- up and down ------------------------------------------------------------ */

/* The first n items of a per-host list (a single item stays as it is). */
static void first_items(const char *list, int n, char *out, size_t cap) {
  snprintf(out, cap, "%s", list);
  if (!strchr(out, ',')) return;
  char *p = out;
  for (int i = 0; i < n && p; i++)
    if ((p = strchr(p, ',')) && i + 1 < n) p++;
  if (p) *p = '\0';
}

static int describe(sg_cluster_desc_t *d, const sg_run_spec_t *run, int used) {
  char link[1024], loss[1024];
  first_items(sg_opts_str_or(run->opts, "cluster.link", "1gbit"), used, link, sizeof link);
  first_items(sg_opts_str_or(run->opts, "cluster.loss", "0"), used, loss, sizeof loss);
  SG_CHECK(sg_cluster_desc_parse(d, used, link, loss));
  int64_t rack = 0; /* two levels: cluster.racks hosts per rack (of those used) */
  int64_t queue = SG_CLUSTER_TBF_LATENCY_MS;
  const char *uplink = sg_opts_str_or(run->opts, "cluster.uplink", "0");
  SG_CHECK(sg_opts_int_or(run->opts, "cluster.racks", 0, &rack));
  SG_CHECK(sg_opts_int_or(run->opts, "cluster.queue", SG_CLUSTER_TBF_LATENCY_MS, &queue));
  d->queue_ms = (int)queue; /* 1 .. 1000: the settings table's range */
  d->rack = rack > used ? used : (int)rack;
  if (d->rack > 0 && strcmp(uplink, "0") != 0)
    SG_CHECK(sg_cluster_parse_rate(uplink, "cluster.uplink", &d->uplink_bps));
  return SG_OK;
}

int sg_run_cluster_up(sg_run_cluster_t **out, const sg_run_spec_t *run,
                      volatile sig_atomic_t *stop) {
  int rc = SG_OK;
  int64_t hosts = 0;
  sg_cluster_desc_t *d = NULL;
  *out = NULL;
  SG_CHECK(sg_opts_int_or(run->opts, "cluster.hosts", 0, &hosts));
  if (hosts <= 0) return SG_OK;
  if (hosts > SG_RUN_CLUSTER_MAX_HOSTS)
    return sg_err_set(SG_ERANGE, "cluster.hosts %lld: at most %d", (long long)hosts,
                      SG_RUN_CLUSTER_MAX_HOSTS);
  sg_run_cluster_t *c = calloc(1, sizeof *c);
  if (!c || !(c->host_of = calloc((size_t)run->nprocs, sizeof *c->host_of)) ||
      !(d = calloc(1, sizeof *d))) {
    rc = SG_ENOMEM;
    goto fail;
  }
  c->nprocs = run->nprocs;
  int pack = !strcmp(sg_opts_str_or(run->opts, "cluster.placement", "spread"), "pack");
  int used = sg_cluster_place(run, (int)hosts, pack, c->host_of);
  for (int h = 0; h < used; h++) snprintf(c->host[h], sizeof c->host[h], "h%d", h);
  SG_TRY(describe(d, run, used));
  d->stop = stop;
  SG_TRY(sg_cluster_up(&c->cl, d));
  free(d);
  *out = c;
  return SG_OK;
fail:
  free(d);
  sg_run_cluster_down(&c);
  return rc;
}

int sg_run_cluster_down(sg_run_cluster_t **pc) {
  if (!pc || !*pc) return SG_OK;
  sg_run_cluster_t *c = *pc;
  int rc = c->cl ? sg_cluster_down(&c->cl) : SG_OK;
  free(c->host_of);
  free(c);
  *pc = NULL;
  return rc;
}

/* ---- what the ranks and the launcher are told ------------------------------ */

const char *sg_run_cluster_host(const sg_run_cluster_t *c, int rank) {
  return c && rank >= 0 && rank < c->nprocs ? c->host[c->host_of[rank]] : NULL;
}

const char *sg_run_cluster_addr(const sg_run_cluster_t *c, int rank) {
  return c && rank >= 0 && rank < c->nprocs ? sg_cluster_host_addr(c->cl, c->host_of[rank]) : NULL;
}

const sg_cluster_t *sg_run_cluster_handle(const sg_run_cluster_t *c) { return c ? c->cl : NULL; }

const int *sg_run_cluster_host_of(const sg_run_cluster_t *c) { return c ? c->host_of : NULL; }

int sg_run_cluster_spec(const sg_run_cluster_t *c, sg_opts_t *spec) {
  size_t cap = (size_t)c->nprocs * 24 + 1, len = 0;
  char *list = malloc(cap);
  if (!list) return SG_ENOMEM;
  list[0] = '\0';
  for (int r = 0; r < c->nprocs; r++)
    len += (size_t)snprintf(list + len, cap - len, "%s%s", r ? "," : "", sg_run_cluster_addr(c, r));
  int rc = sg_opts_set(spec, "_rank_addrs", list);
  free(list);
  return rc;
}

/* ---- run_info ---------------------------------------------------------------- */

static int info_u64(sg_recorder_t *db, int64_t run_id, const char *key, uint64_t v) {
  char val[32];
  snprintf(val, sizeof val, "%llu", (unsigned long long)v);
  return sg_recorder_info(db, run_id, key, val);
}

int sg_run_cluster_record_start(const sg_run_cluster_t *c, sg_recorder_t *db, int64_t run_id) {
  SG_CHECK(sg_recorder_info(db, run_id, "cluster.name", sg_cluster_name(c->cl)));
  SG_CHECK(sg_recorder_info(db, run_id, "cluster.subnet", sg_cluster_subnet(c->cl)));
  return info_u64(db, run_id, "cluster.hosts", (uint64_t)sg_cluster_nhosts(c->cl));
}

int sg_run_cluster_record_links(const sg_run_cluster_t *c, sg_recorder_t *db, int64_t run_id) {
  uint64_t total = 0;
  for (int h = 0; h < sg_cluster_nhosts(c->cl); h++) {
    sg_cluster_link_t l;
    char key[64];
    SG_CHECK(sg_cluster_link_stats(c->cl, h, &l));
    snprintf(key, sizeof key, "cluster.h%d.tx_bytes", h);
    SG_CHECK(info_u64(db, run_id, key, l.host_tx));
    snprintf(key, sizeof key, "cluster.h%d.rx_bytes", h);
    SG_CHECK(info_u64(db, run_id, key, l.bridge_tx));
    snprintf(key, sizeof key, "cluster.h%d.drops", h);
    if (l.host_drops + l.bridge_drops)
      SG_CHECK(info_u64(db, run_id, key, l.host_drops + l.bridge_drops));
    total += l.host_tx;
  }
  return info_u64(db, run_id, "cluster.tx_bytes", total);
}

/* ---- before and around runs ------------------------------------------------- */

int sg_run_cluster_admit(const sg_experiment_t *x, const char *file) {
  for (size_t i = 0; i < x->nruns; i++) {
    int64_t hosts = 0;
    SG_CHECK(sg_opts_int_or(x->runs[i].opts, "cluster.hosts", 0, &hosts));
    if (hosts <= 0) continue;
    if (sg_cluster_check_privilege() < 0) {
      char why[512];
      snprintf(why, sizeof why, "%s", sg_err_msg());
      return sg_err_set(SG_EUNSUPPORTED, "%s: cluster (run %zu, %s): the emulated cluster %s", file,
                        i + 1, x->runs[i].label, why);
    }
    return SG_OK; /* one check covers every run */
  }
  return SG_OK;
}

void sg_run_cluster_sweep_leftovers(int quiet) {
  int n = 0;
  if (access(SG_CLUSTER_RUN_DIR, F_OK) < 0 || sg_cluster_check_privilege() < 0) {
    sg_err_clear(); /* no cluster was ever made here, or we may not remove one */
    return;
  }
  if (sg_cluster_sweep(&n) < 0) {
    if (!quiet) fprintf(stderr, "sgdlab: sweeping leftover clusters: %s\n", sg_err_msg());
    sg_err_clear();
    return;
  }
  if (n && !quiet)
    fprintf(stderr, "sgdlab: removed %d network namespace%s of clusters whose harness is gone\n", n,
            n == 1 ? "" : "s");
}
