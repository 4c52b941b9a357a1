/* run_cluster.h - a run on an emulated cluster (cluster.h; the experiment
 * keys cluster.hosts, cluster.link, cluster.loss, cluster.placement).
 *
 * For such a run the harness
 *   - places every rank on a host (sg_cluster_place),
 *   - creates a cluster of its own for the run (a random name, owned by
 *     the harness process, so a sweep removes it if the harness is killed),
 *   - starts each rank inside its host's network namespace (launch.h) and
 *     tells it the host's address to bind (_rank_addrs in the spec), so
 *     rank-to-rank traffic is tcp between host addresses, through the
 *     rate-limited links; records and rendezvous stay on ipc sockets in
 *     the run's directory, which every namespace reaches (they live in the
 *     file system, not in a network namespace),
 *   - records where each rank ran (ranks.cluster_host, ranks.address) and
 *     what the links counted (run_info cluster.*),
 *   - removes the cluster once every rank is gone, however the run ended.
 */
#ifndef SG_RUN_CLUSTER_H
#define SG_RUN_CLUSTER_H

#include <signal.h>
#include <stdint.h>

#include "cluster.h"
#include "config.h"
#include "recorder.h"

/* Hosts of a cluster run (cluster.hosts' upper bound in the settings). */
#define SG_RUN_CLUSTER_MAX_HOSTS 64

typedef struct sg_run_cluster sg_run_cluster_t;

/* Where each of run->nprocs ranks goes among `hosts` hosts, into
 * host_of[]:
 *   spread  ranks whose role is server (ps) or driver (mapreduce) get a
 *           host each first, in rank order; the others round-robin over
 *           the hosts left (over all hosts when none is left);
 *   pack    fill hosts in order, ceil(nprocs / hosts) ranks per host.
 * The hosts used are always 0 .. k-1; returns k. */
int sg_cluster_place(const sg_run_spec_t *run, int hosts, int pack, int *host_of);

/* Where a run runs, for its run line (`sgdlab run`, `run -n`): " on an
 * emulated cluster of 4 hosts (link 1gbit, spread)", " on hosts a,b"
 * (an mpirun host list), "" on this host alone. */
void sg_run_placement(const sg_run_spec_t *run, char *out, size_t cap);

/* A cluster run's placement, rank by rank ("h0: rank 0 server, h1: rank 1
 * worker, ..."), as sg_cluster_place() will make it; 0 (out "") for a
 * run without a cluster. */
#define SG_RUN_CLUSTER_MAX_RANKS 4096
int sg_run_placement_ranks(const sg_run_spec_t *run, char *out, size_t cap);

/* A run with cluster.hosts > 0: place its ranks, then create the cluster
 * (the hosts used only).  *out is NULL for a run without a cluster.
 * `stop` (the harness's signal flag) interrupts the setup cleanly
 * (SG_EINTERRUPTED, nothing left). */
int sg_run_cluster_up(sg_run_cluster_t **out, const sg_run_spec_t *run,
                      volatile sig_atomic_t *stop);

/* The rank's host ("h1") and its address; NULL when c is NULL. */
const char *sg_run_cluster_host(const sg_run_cluster_t *c, int rank);
const char *sg_run_cluster_addr(const sg_run_cluster_t *c, int rank);
/* For the launcher (launch.h): the cluster and every rank's host. */
const sg_cluster_t *sg_run_cluster_handle(const sg_run_cluster_t *c);
const int *sg_run_cluster_host_of(const sg_run_cluster_t *c);

/* Every rank's address, comma-separated, as _rank_addrs in the spec. */
int sg_run_cluster_spec(const sg_run_cluster_t *c, sg_opts_t *spec);

/* run_info: cluster.name, cluster.subnet, cluster.hosts (at the start). */
int sg_run_cluster_record_start(const sg_run_cluster_t *c, sg_recorder_t *db, int64_t run_id);
/* run_info, read from tc before the cluster goes: per host I
 * cluster.hI.tx_bytes (what it sent), cluster.hI.rx_bytes (what was sent
 * to it), cluster.hI.drops (tbf drops, when any), and cluster.tx_bytes
 * (the sum of what the hosts sent). */
int sg_run_cluster_record_links(const sg_run_cluster_t *c, sg_recorder_t *db, int64_t run_id);

/* Remove the cluster (call it once every rank has been reaped: a process
 * still inside a namespace keeps that namespace alive) and free c. */
int sg_run_cluster_down(sg_run_cluster_t **c);

/* Before launching: a run with a cluster needs root (one line naming the
 * file and what is missing, SG_EUNSUPPORTED). */
int sg_run_cluster_admit(const sg_experiment_t *x, const char *file);

/* At the start of `sgdlab run`: remove the namespaces of clusters whose
 * harness died (kill -9), when /run/sgdlab exists and we may.  Prints one
 * line when it removed something (unless quiet). */
void sg_run_cluster_sweep_leftovers(int quiet);

#endif
