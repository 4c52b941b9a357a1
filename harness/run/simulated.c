/* simulated.c - a simulated run's side of the launch (simulate.h): the
 * host speed and a modeled step's time measured before launch, the
 * platform and hostfile in the run's directory, smpirun's arguments, and
 * what run_info says about the simulation (simulate.*). */
#define _GNU_SOURCE
#include "run_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_step.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "outfile.h"

/* How often a simulated run says how far it got (run_sim_progress). */
#define SIM_TELL_S 10.0

/* The calibration cache: $XDG_CACHE_HOME/sgdlab (or ~/.cache/sgdlab)
 * /simulate-calibration, one line per measurement, "KEY<TAB>step_s<TAB>
 * sgemm flop/s<TAB>load<TAB>cores": the workload and CPU, what was
 * measured, and the 1-minute load average and online cores when it was,
 * so a sweep measures once.  A line taken at a load above its cores (the
 * step then timed long, shared with other work) or without a load (older
 * lines) is not reused: the step is measured again.  "" when there is no
 * cache directory.
 *
 * What it says becomes the simulated compute time of every run that reads
 * it, so it is read and written only as the user's own: its directory
 * passes sg_out_dir_open (the user's, writable by no one else, reached
 * through directories no one else can change; made 0700 in such a parent
 * when missing) and the file is opened without following a link and must
 * be a regular file of the user with one link that group and others may
 * not write, every line of it one of the above.  Anything else is one
 * line on stderr, and the cache is neither read nor written: the step is
 * measured. */
#define CAL_NAME "simulate-calibration"
#define CAL_LINE_MAX 4096

void sg_sim_cache_path(char *out, size_t cap) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  out[0] = '\0';
  if (xdg && *xdg == '/') snprintf(out, cap, "%s/sgdlab/" CAL_NAME, xdg);
  else if (home && *home == '/') snprintf(out, cap, "%s/.cache/sgdlab/" CAL_NAME, home);
}

/* One line on stderr: the cache is not used, and why. */
static void cache_refused(const char *path, const char *why) {
  fprintf(stderr, "sgdlab: simulate: the calibration cache %s: %s; not used (the step is "
          "measured)\n", path, why);
}

enum { CAL_NONE = -1, CAL_REFUSED = -2 };

/* The checked descriptor of the directory of path (outfile.h), made 0700
 * in its checked parent first when `create`; CAL_NONE when there is none,
 * CAL_REFUSED when it is not used (said on stderr).  outfile.c keeps both
 * directories' descriptors for the process's life and hands the same ones
 * out on every call: never closed here. */
static int cache_dir(const char *path, int create) {
  char dir[4200], parent[4200];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!path[0] || !slash || slash == dir) return CAL_NONE;
  *slash = '\0';
  snprintf(parent, sizeof parent, "%s", dir);
  char *leaf = strrchr(parent, '/');
  if (create && leaf && leaf != parent) {
    *leaf++ = '\0';
    int pfd = sg_out_dir_open(parent, 0, "the calibration cache's parent");
    if (pfd >= 0 && mkdirat(pfd, leaf, 0700) < 0 && errno != EEXIST)
      fprintf(stderr, "sgdlab: simulate: cannot make %s: %s\n", dir, strerror(errno));
    else if (pfd < 0 && pfd != SG_ENOTFOUND)
      fprintf(stderr, "sgdlab: simulate: %s; no calibration cache\n", sg_err_msg());
    sg_err_clear();
    if (pfd < 0) return pfd == SG_ENOTFOUND ? CAL_NONE : CAL_REFUSED;
  }
  int fd = sg_out_dir_open(dir, 0, "the calibration cache's directory");
  if (fd >= 0) return fd;
  if (fd != SG_ENOTFOUND)
    fprintf(stderr, "sgdlab: simulate: %s; not used (the step is measured)\n", sg_err_msg());
  sg_err_clear();
  return fd == SG_ENOTFOUND ? CAL_NONE : CAL_REFUSED;
}

/* The cache file (path) in directory dfd, to read or to append to (made
 * 0600 when missing): a regular file of this user with one link that
 * group and others may not write, never through a link; else CAL_NONE
 * (missing) or CAL_REFUSED (said on stderr). */
static int cache_file(int dfd, const char *path, int append) {
  int fd = openat(dfd, CAL_NAME, O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                                     (append ? O_WRONLY | O_APPEND | O_CREAT : O_RDONLY), 0600);
  struct stat st;
  if (fd < 0 && errno == ENOENT) return CAL_NONE;
  if (fd < 0) {
    cache_refused(path, errno == ELOOP ? "a symbolic link" : strerror(errno));
    return CAL_REFUSED;
  }
  const char *why = fstat(fd, &st) < 0              ? strerror(errno)
                    : !S_ISREG(st.st_mode)          ? "not a regular file"
                    : st.st_uid != geteuid()        ? "not this user's file"
                    : (st.st_mode & 022)            ? "writable by group or others"
                    : st.st_nlink != 1              ? "a file of more than one link"
                                                    : NULL;
  if (why) {
    close(fd);
    cache_refused(path, why);
    return CAL_REFUSED;
  }
  return fd;
}

/* One cache line (its '\n' included) into key (cut at its tab), step,
 * speed and, on a line that has them, load and cores (else load -1; a
 * load of -1 is one that could not be read): 0, or -1 when the line is
 * not one of the cache's. */
static int cache_parse(char *line, char **key, double *st, double *sp, double *load, int *cores) {
  size_t len = strlen(line);
  char *tab = strchr(line, '\t'), *e = NULL;
  if (!len || line[len - 1] != '\n' || !tab || tab == line) return -1;
  line[len - 1] = *tab = '\0';
  *key = line;
  *st = strtod(tab + 1, &e);
  if (e == tab + 1 || *e != '\t' || !(*st > 0 && *st < 1e3)) return -1;
  char *p = e + 1;
  *sp = strtod(p, &e);
  if (e == p || !(*sp > 0 && *sp < 1e18)) return -1;
  *load = -1, *cores = 0;
  if (!*e) return 0; /* an older line, without load and cores */
  p = e + 1;
  if (*e != '\t' || (*load = strtod(p, &e), e == p) || *e != '\t' || !(*load >= -1 && *load < 1e9))
    return -1;
  p = e + 1;
  long c = strtol(p, &e, 10);
  if (e == p || *e || c < 1 || c > 1 << 20) return -1;
  *cores = (int)c;
  return 0;
}

/* 1 when the cache has the key on a line taken at a load within its
 * cores, or at any load when any_load (the last such line); *busy: the
 * load of the last line of the key that was not reused (-1: none; 1e9:
 * an older line).  *refused: the file is there and not used (said). */
static int cache_get(const char *path, const char *key, int any_load, double *step_s,
                     double *speed, double *busy, int *refused) {
  int dfd = cache_dir(path, 0), fd = dfd >= 0 ? cache_file(dfd, path, 0) : CAL_NONE, found = 0;
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  char *line = NULL, *k;
  size_t cap = 0;
  double st, sp, load;
  int cores, no = 0;
  ssize_t n;
  *busy = -1;
  *refused = dfd == CAL_REFUSED || fd == CAL_REFUSED;
  if (fd >= 0 && !f) close(fd);
  while (f && (n = getline(&line, &cap, f)) > 0) {
    no++;
    if (n > CAL_LINE_MAX || cache_parse(line, &k, &st, &sp, &load, &cores) < 0) {
      char where[64];
      snprintf(where, sizeof where, "line %d is not KEY, step_s, flop/s[, load, cores]", no);
      cache_refused(path, where);
      *refused = 1, found = 0;
      break;
    }
    if (strcmp(k, key)) continue;
    if (load < 0 || (load > cores && !any_load)) {
      *busy = load >= 0 ? load : 1e9;
      continue;
    }
    *step_s = st, *speed = sp, found = 1;
  }
  free(line);
  if (f) fclose(f);
  return found;
}

void sg_sim_cache_put(const char *path, const char *key, double step_s, double speed,
                      double load, int cores) {
  int dfd = cache_dir(path, 1), fd = dfd >= 0 ? cache_file(dfd, path, 1) : CAL_NONE;
  if (fd < 0) return;
  dprintf(fd, "%s\t%.9g\t%.9g\t%.2f\t%d\n", key, step_s, speed, load, cores);
  close(fd);
}

/* What the measurement depends on: the step's shapes and this CPU. */
void sg_sim_cache_key(const sg_opts_t *o, char *out, size_t cap) {
  char cpu[128] = "?", line[256];
  FILE *f = fopen("/proc/cpuinfo", "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "model name : %127[^\n]", cpu) == 1) break;
  if (f) fclose(f);
  snprintf(out, cap, "%s %s %s %s %s %s %s|%s", sg_opts_str_or(o, "dataset", ""),
           sg_opts_str_or(o, "model", ""), sg_opts_str_or(o, "hidden", ""),
           sg_opts_str_or(o, "batch", ""), sg_opts_str_or(o, "features", ""),
           sg_opts_str_or(o, "classes", ""), sg_opts_str_or(o, "nnz", ""), cpu);
  for (char *p = out; *p; p++)
    if (*p == '\t' || *p == '\n') *p = ' ';
}

/* This machine's 1-minute load average (-1 when unknown) and cores. */
static void load_now(double *load, int *cores) {
  double l[1];
  long c = sysconf(_SC_NPROCESSORS_ONLN);
  *load = getloadavg(l, 1) == 1 ? l[0] : -1;
  *cores = c > 0 ? (int)c : 1;
}

/* The sgemm rate of one core of this machine and the time of one step of
 * this workload (sgdlab bench step's method: median of blocks after a
 * warm-up, one BLAS thread), unless host_speed is given and compute is
 * executed; from the cache when this workload was measured before at a
 * load within the cores (executed compute: at any load, since there the
 * speed is only the unit, smpi/host-speed and the hosts' speed being the
 * same number, so a burst's simulated time is its measured time whatever
 * the value); and always from this process's own last measurement of the
 * workload, so the rows of one sweep (one `sgdlab run`) are charged the
 * same step whatever the load did meanwhile.  One line on stderr when a
 * cached measurement is passed over or this one is taken at a load above
 * the cores. */
static int sim_measure(run_sim_t *m, const sg_opts_t *o) {
  if (m->cfg.host_speed > 0 && !m->cfg.modeled) return SG_OK;
  /* this process's own last measurement: the rows of one sweep share it */
  static struct { char key[1024]; double step_s, speed; } last;
  char path[4200], key[1024];
  double step_s = 0, speed = 0, busy = -1, load;
  int cores, refused = 0;
  sg_sim_cache_path(path, sizeof path);
  sg_sim_cache_key(o, key, sizeof key);
  int mine = last.key[0] && !strcmp(last.key, key);
  if (mine || cache_get(path, key, !m->cfg.modeled, &step_s, &speed, &busy, &refused)) {
    m->step_s = mine ? last.step_s : step_s;
    if (m->cfg.host_speed <= 0) m->cfg.host_speed = mine ? last.speed : speed;
    m->cached = 1;
    return SG_OK;
  }
  load_now(&load, &cores);
  if (busy >= 0 || load > cores)
    fprintf(stderr, "sgdlab: simulate: measuring the step time at load %.2f on %d cores%s\n",
            load, cores, busy >= 0 ? " (the cached one, taken at a load above its cores, "
                                     "is not reused)" : " (above the cores: it may time long)");
  sg_bench_step_result_t r;
  sg_opts_t *b = sg_opts_dup(o);
  if (!b) return SG_ENOMEM;
  int rc = sg_opts_set(b, "threads", "1");
  if (rc == SG_OK) rc = sg_opts_set(b, "device", "cpu");
  if (rc == SG_OK) rc = sg_bench_step_run(b, NULL, &r);
  sg_opts_destroy(&b);
  SG_CHECK(rc);
  m->step_s = r.step_s;
  speed = r.gemm_s > 0 ? r.gemm_flops / r.gemm_s : 1e10;
  if (m->cfg.host_speed <= 0) m->cfg.host_speed = speed;
  load_now(&load, &cores); /* the load over the measurement's last minute */
  if (!refused) sg_sim_cache_put(path, key, r.step_s, speed, load, cores);
  snprintf(last.key, sizeof last.key, "%s", key);
  last.step_s = r.step_s, last.speed = speed;
  return SG_OK;
}

static int write_file(const char *path, const run_sim_t *m, int nprocs, int platform) {
  FILE *f = fopen(path, "w");
  if (!f) return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  int rc = platform ? sg_sim_platform_write(&m->cfg, f) : sg_sim_hostfile_write(&m->cfg, nprocs, f);
  if (fclose(f) != 0 && rc == SG_OK) rc = sg_err_set(SG_EIO, "%s: write failed", path);
  return rc;
}

/* smpirun's arguments (launch.h, sim_argv). */
static void sim_args(run_sim_t *m, int nprocs) {
  size_t a = 0, c = 0;
  snprintf(m->np, sizeof m->np, "%d", nprocs);
  const char *fixed[] = {"-np", m->np, "-platform", m->platform, "-hostfile", m->hostfile};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) m->argv[a++] = fixed[i];
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/host-speed:%.17gf", m->cfg.host_speed);
  /* the network as the platform says: no InfiniBand message-size factors */
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/bw-factor:0:1");
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/lat-factor:0:1");
  /* and no acknowledgement flows against each transfer (SimGrid's
   * cross-traffic takes 5 % of the reverse direction) */
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=network/crosstraffic:0");
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/privatization:dlopen");
  /* collectives (MPI_Allgather at setup, allreduce native) as Open MPI
   * chooses them: SMPI's default allgather posts N receives and waits on
   * them one by one, O(N^2) per rank (256 ranks took minutes to start) */
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/coll-selector:ompi");
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--log=root.thres:warning");
  /* MPI_Probe is a loop of MPI_Iprobe under SMPI, each call advancing the
   * rank's clock by smpi/iprobe (default 100 us): a ps or mapreduce wait
   * then ended up to that late, per probe.  A probe costs ~nothing here. */
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/iprobe:1e-9");
  /* A clock read (clock_gettime, which smpicc routes to SMPI) costs no
   * simulated time.  SimGrid's default sleeps 10 ns in each (smpi/wtime),
   * and the ranks read the clock around every message (sg_now): each
   * read was an event of its own, 10 ns after the last, and each event
   * solved the network's bandwidth sharing again over every flow in
   * flight.  ps S = N/8 at N = 128 solved it 18,000 times a step, 102
   * times in the whole run without the sleeps (docs/simulate.md). */
  snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/wtime:0");
  /* simulate.eager: a message below it is sent without waiting for its
   * receiver (detached) and its bytes move at once (async-small), as an
   * MPI library's eager protocol sends it; by default the emulated
   * cluster's eager limit.  simgrid (-1): SimGrid's own, 64 KiB detached
   * and 0, a message's bytes moving only once a receive matches it
   * (docs/simulate.md, "The platform").  Under compute: modeled the
   * ranks then detach only empty messages and defer the wait of the
   * others themselves (_sim_defer, core/transport_mpi.c, "Deferred
   * sends"): SimGrid 3.32 scans one list of all detached sends for each
   * one that ends. */
  if (m->cfg.eager >= 0) {
    snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/send-is-detached-thresh:%d",
             m->cfg.eager);
    snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/async-small-thresh:%d", m->cfg.eager);
  }
  if (m->cfg.modeled) { /* only the injected step time counts; payloads folded (core/msgbuf.h) */
    snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/simulate-computation:no");
    snprintf(m->cfgs[c++], sizeof m->cfgs[0], "--cfg=smpi/shared-malloc-blocksize:%zu",
             SG_SIM_FOLD_BLOCK);
  }
  for (size_t i = 0; i < c; i++) m->argv[a++] = m->cfgs[i];
  m->argv[a] = NULL;
}

int run_sim_prepare(run_sim_t *m, const sg_run_spec_t *run, const char *dir) {
  SG_CHECK(sg_sim_cfg_read(run->opts, run->nprocs, &m->cfg));
  SG_CHECK(sg_sim_check_host());
  SG_CHECK(sim_measure(m, run->opts));
  snprintf(m->platform, sizeof m->platform, "%s/platform.xml", dir);
  snprintf(m->hostfile, sizeof m->hostfile, "%s/hostfile", dir);
  snprintf(m->records, sizeof m->records, "file://%s/rec", dir);
  snprintf(m->tmpdir, sizeof m->tmpdir, "%s", dir);
  SG_CHECK(write_file(m->platform, m, run->nprocs, 1));
  SG_CHECK(write_file(m->hostfile, m, run->nprocs, 0));
  sim_args(m, run->nprocs);
  return sg_launch_find_bin("sgdlab-rank-smpi", m->rank_bin, sizeof m->rank_bin);
}

int run_sim_record(const run_sim_t *m, sg_recorder_t *db, int64_t run_id) {
  static const char *const topo[] = {"flat", "two-level", "fat-tree", "torus"};
  char v[8][160];
  snprintf(v[0], sizeof v[0], "%d", m->cfg.hosts);
  sg_cluster_format_rate(m->cfg.bps, v[1], sizeof v[1]);
  snprintf(v[2], sizeof v[2], "%.9g", m->cfg.lat_s);
  snprintf(v[3], sizeof v[3], "%s", m->cfg.topo_params);
  snprintf(v[4], sizeof v[4], "%.6g", m->cfg.host_speed);
  snprintf(v[5], sizeof v[5], "%.9g", m->step_s);
  if (m->cfg.eager >= 0) snprintf(v[6], sizeof v[6], "%d", m->cfg.eager);
  else snprintf(v[6], sizeof v[6], "simgrid");
  const char *kv[][2] = {{"simulate", "smpi"}, {"simulate.hosts", v[0]}, {"simulate.link", v[1]},
                         {"simulate.latency_s", v[2]}, {"simulate.topology", topo[m->cfg.topo]},
                         {"simulate.topo_parameters", v[3]}, {"simulate.host_speed", v[4]},
                         {"simulate.compute", m->cfg.modeled ? "modeled" : "executed"},
                         {"simulate.step_s", m->cfg.modeled ? v[5] : ""},
                         {"simulate.calibration", m->cached ? "cached" : "measured"},
                         {"simulate.eager", v[6]}};
  for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
    if (kv[i][1][0]) SG_CHECK(sg_recorder_info(db, run_id, kv[i][0], kv[i][1]));
  /* the platform itself, for whoever reads the run later */
  FILE *f = fopen(m->platform, "r");
  char xml[4096];
  size_t n = f ? fread(xml, 1, sizeof xml - 1, f) : 0;
  if (f) fclose(f);
  xml[n] = '\0';
  return n ? sg_recorder_info(db, run_id, "simulate.platform", xml) : SG_OK;
}

void run_sim_progress(serve_t *s) {
  run_sim_t *m = s->sim;
  double now = sg_now();
  if (!m->told) m->told = now; /* the first line after SIM_TELL_S */
  if (now - m->told < SIM_TELL_S) return;
  m->told = now;
  int started = 0;
  int64_t lo = INT64_MAX, hi = -1;
  for (int r = 0; r < s->nprocs; r++) {
    const rank_info_t *ri = &s->ranks[r];
    started += ri->hello != 0;
    if (ri->last_step < lo) lo = ri->last_step;
    if (ri->last_step > hi) hi = ri->last_step;
  }
  char text[200];
  if (hi < 0)
    snprintf(text, sizeof text, "simulating: %d/%d ranks started, no step yet", started,
             s->nprocs);
  else
    snprintf(text, sizeof text, "simulating: steps %lld..%lld done (slowest..fastest rank), "
             "%.6g s simulated", (long long)(lo + 1), (long long)(hi + 1),
             s->times.last_step_end);
  sg_progress_note(s->env->progress, text);
}
