/* simulate.h - a run in simulation: SimGrid SMPI runs the engine's own
 * rank code (sgdlab-rank-smpi, built with smpicc) as simulated processes
 * of one smpirun process on a platform described by the run's simulate:
 * keys (docs/simulate.md).
 *
 * Hosts are named host0 .. host(H-1); rank r runs on host r mod H.  The
 * topologies are SMPI's cluster topologies:
 *   flat       one <cluster>: every host its own full-duplex link (rate,
 *              latency) to a non-blocking switch
 *   two-level  racks under one top switch: SMPI's FAT_TREE with two
 *              levels, "2;H/R,R;1,1;1,U", U = (H/R) / oversubscription
 *              uplinks per rack, each at the link rate
 *   fat-tree   FAT_TREE with the given topo_parameters
 *   torus      TORUS with the given dimensions
 */
#ifndef SG_SIMULATE_H
#define SG_SIMULATE_H

/* compute: modeled: SMPI folds a folded allocation (sg_fold_alloc and
 * the payloads of sg_msg_malloc_framed, core/msgbuf.h) in blocks of this
 * many bytes (smpi/shared-malloc-blocksize), one memory map each (a part
 * below a block, one map too).  SimGrid's default, 1 MiB, put a ring of 256 ranks
 * at 64 MB over Linux's default vm.max_map_count (about 4 maps of 64 per
 * rank and buffer); its only cost is one such block of memory per
 * simulation. */
#define SG_SIM_FOLD_BLOCK ((size_t)16 << 20)

#include <stdint.h>
#include <stdio.h>

#include "opts.h"

typedef enum { SG_SIM_FLAT, SG_SIM_TWO_LEVEL, SG_SIM_FAT_TREE, SG_SIM_TORUS } sg_sim_topo_t;

/* simulate.eager's largest value (SimGrid's thresholds are ints) */
#define SG_SIM_EAGER_MAX (1 << 30)

typedef struct sg_sim_cfg {
  int hosts;          /* resolved: simulate.hosts, or one per process */
  uint64_t bps;       /* link rate, bits/s */
  double lat_s;       /* link latency, seconds */
  sg_sim_topo_t topo;
  int racks, oversub; /* two-level */
  char topo_params[128]; /* SMPI's topo_parameters ("" for flat) */
  int modeled;        /* compute: modeled */
  double host_speed;  /* flop/s; 0 = to be measured */
  /* simulate.eager: a message below this many bytes is sent without
   * waiting for its receiver and moves at once (SMPI's
   * smpi/send-is-detached-thresh and smpi/async-small-thresh, both);
   * -1 = `simgrid`: neither passed, SimGrid's own (64 KiB and 0) */
  int eager;
} sg_sim_cfg_t;

/* Whether the run is simulated (its `simulate` key). */
int sg_sim_enabled(const sg_opts_t *o);

/* "1us", "50us", "0.5ms", "2e-6s", "100ns" into seconds (>= 0, <= 10 s). */
int sg_sim_parse_latency(const char *s, double *out);

/* The run's simulate.* keys for nprocs processes into c, checked: a
 * topology SMPI cannot build is SG_ECONFIG with one line naming the key
 * ("simulate.torus: 4,4 makes 16 hosts, the platform has 8"). */
int sg_sim_cfg_read(const sg_opts_t *o, int nprocs, sg_sim_cfg_t *c);

/* The platform (SimGrid XML, version 4.1) and the hostfile (one line per
 * rank: its host).  Deterministic text, tested against files. */
int sg_sim_platform_write(const sg_sim_cfg_t *c, FILE *f);
int sg_sim_hostfile_write(const sg_sim_cfg_t *c, int nprocs, FILE *f);

/* Bytes of memory the simulator needs for nprocs ranks, about (from
 * measured runs: a base plus a fixed amount per rank, executed or
 * modeled compute; the data, loaded once, is the caller's to add).
 * admit.c holds it against the memory available before launch. */
double sg_sim_mem_estimate(const sg_sim_cfg_t *c, int nprocs);

/* The step-calibration cache (simulated.c, where its format and checks
 * are described): its path, "" when there is no cache directory; the key
 * of a run's workload on this CPU (from the run's settings); and one line
 * appended, "KEY<TAB>step_s<TAB>flop/s<TAB>load<TAB>cores", its directory
 * and file made as the harness makes them (nothing written where they are
 * not the user's own, said on stderr). */
void sg_sim_cache_path(char *out, size_t cap);
void sg_sim_cache_key(const sg_opts_t *o, char *out, size_t cap);
void sg_sim_cache_put(const char *path, const char *key, double step_s, double speed, double load,
                      int cores);

/* Refuse, with one line, a build or machine that cannot simulate:
 * sgdlab-rank-smpi not next to sgdlab (SimGrid's smpicc was not found
 * when the build was configured) or smpirun not on PATH. */
int sg_sim_check_host(void);

#endif
