#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"

#define NOB 1, 0 /* no bounds */

/* clang-format off */
const sg_setting_t sg_settings[] = {
  /* experiment */
  {"name", SG_T_STR, "experiment", "experiment name (reports select by it)", NULL, NOB, SG_S_EXPERIMENT},
  {"workers", SG_T_INT, "1", "number of worker processes N (a list sweeps)", NULL, 1, 1024, SG_S_EXPERIMENT},
  {"repeat", SG_T_INT, "1", "run every point of the sweep this many times", NULL, 1, 1000, SG_S_EXPERIMENT},

  /* workload: data */
  {"dataset", SG_T_ENUM, "fashion-mnist", "training data", "fashion-mnist|mnist|libsvm|synthetic|synthetic-sparse|clicks", NOB, SG_S_WORKLOAD},
  {"data_cache", SG_T_STR, "", "IDX training set: directory of the per-host decoded cache, mapped read-only and shared by the ranks (default: $XDG_CACHE_HOME/sgdlab or ~/.cache/sgdlab; 'off': each rank decodes its own copy)", NULL, NOB, SG_S_WORKLOAD},
  {"data_dir", SG_T_STR, "", "directory of the IDX files train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte (each .gz or plain; default: /usr/share/datasets/<dataset>, where Debian's dataset-fashion-mnist puts Fashion-MNIST; MNIST has no Debian package: put its four files from the MNIST distribution in /usr/share/datasets/mnist or here; relative: to the experiment file's directory)", NULL, NOB, SG_S_WORKLOAD},
  {"train_file", SG_T_STR, "", "libsvm, clicks: training file (relative: to the experiment file's directory). libsvm labels: -1/+1 become 0/1; labels from 1 with no 0 become 0..C-1; others are taken as is", NULL, NOB, SG_S_WORKLOAD},
  {"test_file", SG_T_STR, "", "libsvm, clicks: test file (relative: to the experiment file's directory; --set: to the current one)", NULL, NOB, SG_S_WORKLOAD},
  {"features", SG_T_INT, "0", "input dimension (synthetic; libsvm: 0 = infer from the files)", NULL, 0, 1e9, SG_S_WORKLOAD},
  {"classes", SG_T_INT, "0", "number of classes; 0 = infer (libsvm: from the training file's labels; synthetic: 10)", NULL, 0, 100000, SG_S_WORKLOAD},
  {"holdout", SG_T_FLOAT, "0", "libsvm or a clicks train_file without test_file: this fraction of the training file (a seeded choice of rows) becomes the test set", NULL, 0, 0.9, SG_S_WORKLOAD},
  {"train_samples", SG_T_INT, "0", "training samples to use (0 = all; synthetic: 60000)", NULL, 0, 1e9, SG_S_WORKLOAD},
  {"test_samples", SG_T_INT, "0", "test samples to use (0 = all; synthetic: 10000)", NULL, 0, 1e9, SG_S_WORKLOAD},
  {"nnz", SG_T_INT, "100", "synthetic-sparse: nonzeros per row", NULL, 1, 1e7, SG_S_WORKLOAD},
  {"keys_per_field", SG_T_INT, "100000", "clicks without train_file: distinct keys of each field in the synthetic click log", NULL, 1, 1e7, SG_S_WORKLOAD},
  {"zipf", SG_T_FLOAT, "1.05", "clicks without train_file: Zipf exponent s of key popularity, P(key k) ~ 1/(k+1)^s (0 = uniform; larger = a hotter head, fewer distinct rows per batch)", NULL, 0, 10, SG_S_WORKLOAD},
  {"format", SG_T_ENUM, "libsvm", "clicks with train_file: libsvm = 'label key:value ...' (label 0/1 or -1/+1, exactly `fields` pairs, pair f the key of field f), csv = 'label,tok,...' (label 0/1, exactly `fields` tokens of [A-Za-z0-9_.:-], hashed); a bad line stops the run before launch at file:line:col", "libsvm|csv", NOB, SG_S_WORKLOAD},
  /* workload: model */
  {"model", SG_T_ENUM, "mlp", "model (embedding: with dataset clicks)", "softmax|mlp|cnn|embedding", NOB, SG_S_WORKLOAD},
  {"hidden", SG_T_INTLIST, "128", "mlp: hidden layer sizes (ReLU), e.g. [256, 128]; embedding: its one hidden layer, e.g. [32]", NULL, 1, 1e6, SG_S_WORKLOAD},
  {"fields", SG_T_INT, "8", "embedding: categorical fields per row (each a key hashed into the table; their rows are concatenated into the MLP's input)", NULL, 1, 256, SG_S_WORKLOAD},
  {"table_rows", SG_T_INT, "262144", "embedding: rows of the one hashed embedding table all fields share (2^18 = 16 MiB at embed_dim 16; up to 2^26 while the model has < 2^32 parameters for the sparse ps)", NULL, 1, 67108864, SG_S_WORKLOAD},
  {"embed_dim", SG_T_INT, "16", "embedding: floats per table row", NULL, 1, 1024, SG_S_WORKLOAD},
  /* workload: optimizer */
  {"batch", SG_T_INT, "64", "minibatch per worker (local: the whole batch; compare with N*batch)", NULL, 1, 1e7, SG_S_WORKLOAD},
  {"lr", SG_T_FLOAT, "0.05", "learning rate", NULL, 0, 1e6, SG_S_WORKLOAD},
  {"momentum", SG_T_FLOAT, "0", "SGD momentum (0 = plain SGD)", NULL, 0, 0.9999, SG_S_WORKLOAD},
  {"weight_decay", SG_T_FLOAT, "0", "L2 weight decay", NULL, 0, 1, SG_S_WORKLOAD},
  {"lr_schedule", SG_T_ENUM, "constant", "learning-rate schedule", "constant|step|cosine", NOB, SG_S_WORKLOAD},
  {"lr_step_epochs", SG_T_FLOAT, "1", "step schedule: multiply lr by lr_gamma every this many epochs", NULL, 1e-9, 1e9, SG_S_WORKLOAD},
  {"lr_gamma", SG_T_FLOAT, "0.1", "step schedule: decay factor", NULL, 0, 1, SG_S_WORKLOAD},
  {"warmup_steps", SG_T_INT, "0", "linear learning-rate warm-up over this many steps", NULL, 0, 1e12, SG_S_WORKLOAD},
  {"epochs", SG_T_FLOAT, "1", "passes over the training set (fractions allowed)", NULL, 0, 1e6, SG_S_WORKLOAD},
  {"max_steps", SG_T_INT, "0", "stop after this many steps (0 = no limit)", NULL, 0, 1e12, SG_S_WORKLOAD},
  {"partition", SG_T_ENUM, "iid", "how the training set is split among the N workers: iid = every epoch one seeded shuffle dealt round-robin; label-skew = each worker a fixed shard whose class mix is drawn from Dirichlet(partition_alpha); by-class = the samples sorted by class and cut into N equal pieces (each worker a contiguous range of classes). Shards differ in size by at most one sample. Engines whose workers own data: ps, allreduce, gossip (local and mapreduce's executors draw every batch from the whole set); docs/engines/gossip.md", "iid|label-skew|by-class", NOB, SG_S_WORKLOAD},
  {"partition_alpha", SG_T_FLOAT, "0.5", "label-skew: Dirichlet concentration (small: a worker sees few classes; large: close to iid)", NULL, 1e-3, 1e6, SG_S_WORKLOAD},
  {"seed", SG_T_INT, "1", "seed for data order, initial parameters, synthetic data", NULL, 0, 4294967295.0, SG_S_WORKLOAD},
  {"init", SG_T_ENUM, "consistent", "initial parameters: consistent = every replica starts from the one set the seed makes (allreduce: rank 0 makes it and broadcasts it; gossip: every rank makes the same one; ps and mapreduce: the servers or the driver hold the one copy); per-rank = a TEACHING FAULT (docs/labs/lab6-consistent-init.md): worker w > 0 makes its own from the seed and w, and allreduce skips its broadcast, so the replicas of allreduce and gossip start apart (worker 0 where consistent starts); ps and mapreduce, one copy, are unaffected", "consistent|per-rank", NOB, SG_S_WORKLOAD},
  {"eval_every", SG_T_INT, "0", "evaluate on the test set every this many steps (0 = once per epoch)", NULL, 0, 1e12, SG_S_WORKLOAD},
  {"dump_params", SG_T_STR, "", "write the final parameters (raw float32) to this file (equivalence checks)", NULL, NOB, SG_S_WORKLOAD},
  {"threads", SG_T_INT, "1", "BLAS threads per rank", NULL, 1, 256, SG_S_WORKLOAD},
  {"denormals", SG_T_ENUM, "flush", "float32 values below 1.2e-38 in the model's arithmetic: flush = treated as zero (the CPU's flush-to-zero and denormals-are-zero modes; keeps a step's time from growing as gradients shrink: without it late MLP steps run up to 3x slower), keep = IEEE gradual underflow", "flush|keep", NOB, SG_S_WORKLOAD},
  {"device", SG_T_ENUM, "cpu", "where each rank's step runs: cpu (OpenBLAS) or cuda (a GPU per rank: GPU local-rank mod gpus_per_host; docs/cuda.md; `sgdlab engines` lists this build's devices)", "cpu|cuda", NOB, SG_S_WORKLOAD},
  {"tf32", SG_T_BOOL, "false", "device cuda: matrix products on TF32 tensor cores (faster, about 1e-3 relative error) instead of fp32; the default false keeps results equal to the CPU's to the tested tolerance. Ignored with device cpu", NULL, NOB, SG_S_WORKLOAD},
  {"gpus_per_host", SG_T_INT, "0", "device cuda: GPUs a host's ranks share (0 = every visible one)", NULL, 0, 1024, SG_S_WORKLOAD},

  /* run: how processes are started and talk */
  {"transport", SG_T_ENUM, "zmq", "point-to-point transport between ranks", "zmq|mpi", NOB, SG_S_RUN},
  {"launcher", SG_T_ENUM, "auto", "how ranks are started (auto: slurm inside a Slurm allocation, else mpirun for mpi or hosts, local otherwise; ssh: zmq ranks each started by ssh on a host of hosts/hostfile, spec and keys over ssh's stdin)", "auto|local|mpirun|slurm|ssh", NOB, SG_S_RUN},
  {"zmq_scheme", SG_T_ENUM, "ipc", "ZeroMQ endpoint kind between processes (ipc: sockets in the run's private directory; with hosts, a cluster or launcher slurm or ssh always tcp)", "ipc|tcp", NOB, SG_S_RUN},
  {"zmq_auth", SG_T_ENUM, "curve", "tcp sockets of a run (ranks, rendezvous, records): curve = CurveZMQ with fresh keys per run, only the run's own processes admitted; none = no authentication (only to measure what curve costs, on a host no one else can reach)", "curve|none", NOB, SG_S_RUN},
  {"zmq_cma", SG_T_ENUM, "auto", "zmq over ipc: auto = an isend of 1 MiB or more is read by the receiver straight from the sender's memory (process_vm_readv, one copy, as Open MPI's shared-memory transport does; where the kernel allows it); off = every byte through ZeroMQ's sockets (what libzmq alone costs: three copies)", "auto|off", NOB, SG_S_RUN},
  {"hosts", SG_T_STR, "", "mpirun -H list (host:slots,...); empty = this host", NULL, NOB, SG_S_RUN},
  {"hostfile", SG_T_STR, "", "a hostfile (lines 'host [slots=N]', # comments, as mpirun reads it) instead of hosts; read when the experiment is checked", NULL, NOB, SG_S_RUN},
  {"ssh_config", SG_T_STR, "", "an ssh client configuration (absolute path) for runs on hosts: launcher ssh runs ssh -F PATH, mpirun gets plm_rsh_agent 'ssh -F PATH'; empty = ssh's own (~/.ssh/config)", NULL, NOB, SG_S_RUN},
  {"deadline", SG_T_FLOAT, "30", "seconds any receive may wait before its peer is declared dead", NULL, 0.01, 86400, SG_S_RUN},
  {"delay_rank", SG_T_INT, "-1", "rank to slow down on purpose, one of the run's ranks (-1 = none, -2 = every rank that trains, each drawing its own slowed steps); a rank beyond the run is refused before launch", NULL, -2, 1e6, SG_S_RUN},
  {"delay_ms", SG_T_FLOAT, "0", "milliseconds added to each slowed step of delay_rank", NULL, 0, 1e6, SG_S_RUN},
  {"delay_prob", SG_T_FLOAT, "1", "chance that a step of delay_rank is slowed, drawn per rank and step from seed (1 = every step; below 1 a straggler that comes and goes)", NULL, 0, 1, SG_S_RUN},

  /* cluster: an emulated cluster for the run (harness/cluster/cluster.h) */
  {"cluster.hosts", SG_T_INT, "0", "hosts of an emulated cluster the run's ranks are placed on (network namespaces on rate-limited links; needs root); 0 = no cluster, the ranks share this host. Hosts no rank is placed on are not created", NULL, 0, 64, SG_S_CLUSTER},
  {"cluster.link", SG_T_STRLIST, "1gbit", "rate of each host's link in both directions: one for every host, or a list with one per host (bit, kbit, mbit, gbit, tbit; 1mbit .. 100gbit)", NULL, NOB, SG_S_CLUSTER},
  {"cluster.loss", SG_T_STRLIST, "0", "fraction of the packets each host's link drops in each direction (0.01 or 1%), one for every host or one per host", NULL, NOB, SG_S_CLUSTER},
  /* simulate: the run's ranks as simulated processes on a SimGrid SMPI platform (docs/simulate.md) */
  {"simulate", SG_T_BOOL, "false", "run the ranks in simulation (SimGrid SMPI, sgdlab-rank-smpi): set by a simulate: section, not by hand", NULL, NOB, SG_S_SIMULATE},
  {"simulate.hosts", SG_T_INT, "0", "hosts of the simulated platform; rank r runs on host r mod hosts; 0 = one host per process", NULL, 0, 1048576, SG_S_SIMULATE},
  {"simulate.link", SG_T_STR, "10gbit", "rate of each host's link (and of every link of a fat-tree or torus), both directions (bit, kbit, mbit, gbit, tbit)", NULL, NOB, SG_S_SIMULATE},
  {"simulate.latency", SG_T_STR, "1us", "latency of each link (s, ms, us, ns), e.g. 1us, 50us", NULL, NOB, SG_S_SIMULATE},
  {"simulate.topology", SG_T_ENUM, "flat", "flat: every host on its own link to one non-blocking switch; two-level: racks of hosts, each rack switch linked to one top switch (racks, oversubscription); fat-tree: SMPI's FAT_TREE (fat_tree); torus: SMPI's TORUS (torus)", "flat|two-level|fat-tree|torus", NOB, SG_S_SIMULATE},
  {"simulate.racks", SG_T_INT, "2", "two-level: racks (hosts divide evenly among them)", NULL, 1, 65536, SG_S_SIMULATE},
  {"simulate.oversubscription", SG_T_INT, "1", "two-level: a rack's hosts per uplink (its uplinks = hosts per rack / this, which must divide evenly); 1 = full bisection", NULL, 1, 65536, SG_S_SIMULATE},
  {"simulate.fat_tree", SG_T_STR, "", "fat-tree: SMPI's topo_parameters LEVELS;DOWN,...;UP,...;PARALLEL,... (e.g. 2;4,4;1,2;1,2); the DOWN counts multiply to hosts; at most 65,536 links between the levels", NULL, NOB, SG_S_SIMULATE},
  {"simulate.torus", SG_T_STR, "", "torus: dimensions D1,D2,... (e.g. 4,4,4) that multiply to hosts", NULL, NOB, SG_S_SIMULATE},
  {"simulate.compute", SG_T_ENUM, "executed", "executed: every rank computes its real gradients, each step's computation charged at the host speed (1 s of this core = 1 s simulated); modeled: each step charged the step time measured for this model and batch before launch, nothing computed, large buffers folded across ranks (timing studies at scale; losses and accuracies are not real)", "executed|modeled", NOB, SG_S_SIMULATE},
  {"simulate.eager", SG_T_STR, "1114112", "bytes: a message below this size is sent without waiting for its receiver and moves at once, as an MPI library's eager protocol sends it (SMPI's smpi/send-is-detached-thresh and smpi/async-small-thresh, both set to it); the default is the emulated cluster's Open MPI eager limit (btl_tcp_eager_limit, 1 MiB + 64 KiB), so simulated runs send as the emulated ones do; simgrid = SimGrid's own thresholds (detached below 64 KiB, and a message's bytes move only once a receive matches it); K/M/G allowed, 0 .. 1G", NULL, NOB, SG_S_SIMULATE},
  {"simulate.host_speed", SG_T_FLOAT, "0", "flop/s of a simulated host (smpi/host-speed and the platform's speed, equal, so that 1 s here is 1 s simulated); 0 = the sgemm rate of one core of this machine, measured before launch", NULL, 0, 1e18, SG_S_SIMULATE},
  {"cluster.racks", SG_T_INT, "0", "two levels: hosts per rack (consecutive hosts, each rack under a bridge of its own, joined to the core bridge by an uplink); 0 = one bridge for every host", NULL, 0, 64, SG_S_CLUSTER},
  {"cluster.uplink", SG_T_STRLIST, "0", "cluster.racks: rate of each rack's uplink in both directions (as cluster.link); 0 = not shaped", NULL, NOB, SG_S_CLUSTER},
  {"cluster.queue", SG_T_INT, "20", "how long a packet may wait in each link's queue, in ms (tbf latency: the queue holds rate x queue + the 64 KiB bucket); a shallow queue drops packets when many hosts send to one at once (incast) and TCP then waits for its retransmission timeout, as behind a switch with shallow buffers; a deep one (e.g. 200) does not drop, like the simulation's network", NULL, 1, 1000, SG_S_CLUSTER},
  {"cluster.placement", SG_T_ENUM, "spread", "spread: ps servers and the mapreduce driver get hosts of their own first, then workers round-robin over the other hosts; pack: fill hosts in order, ceil(processes / hosts) ranks per host", "spread|pack", NOB, SG_S_CLUSTER},
  {NULL, 0, NULL, NULL, NULL, 0, 0, 0},
};
/* clang-format on */

const sg_setting_t *sg_setting_find(const sg_setting_t *table, const char *name) {
  if (!table) return NULL;
  for (const sg_setting_t *s = table; s->name; s++)
    if (strcmp(s->name, name) == 0) return s;
  return NULL;
}

const char *sg_type_name(sg_type_t t) {
  switch (t) {
  case SG_T_INT: return "int";
  case SG_T_FLOAT: return "float";
  case SG_T_BOOL: return "bool";
  case SG_T_STR: return "string";
  case SG_T_ENUM: return "enum";
  case SG_T_INTLIST: return "int list";
  case SG_T_STRLIST: return "list";
  }
  return "?";
}

/* YAML's spellings of the non-finite floats (.nan, .inf, -.Inf, ...). */
static int yaml_nonfinite(const char *v) {
  if (*v == '+' || *v == '-') v++;
  return !strcasecmp(v, ".nan") || !strcasecmp(v, ".inf");
}

/* x * 2^shift without overflow; -1 when it would not fit. */
static int shift_checked(long long x, int shift, long long *out) {
  if (x > (LLONG_MAX >> shift) || x < (LLONG_MIN >> shift)) return -1;
  *out = x * (1LL << shift);
  return 0;
}

/* parse_num's results: *out is set on NUM_OK only; NUM_RANGE is an integer
 * (with its K/M/G suffix) beyond 64 bits or a double overflow. */
enum { NUM_OK = 0, NUM_SYNTAX = -1, NUM_RANGE = -2, NUM_NONFINITE = -3 };

static int parse_num(const char *v, int integer, double *out) {
  char *end;
  errno = 0;
  double d;
  if (integer) {
    long long x = strtoll(v, &end, 10);
    if (end == v) return NUM_SYNTAX;
    if (errno == ERANGE) return NUM_RANGE;
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    else if (*end == 'M' || *end == 'm') shift = 20;
    else if (*end == 'G' || *end == 'g') shift = 30;
    if (shift) {
      end++;
      if (!*end && shift_checked(x, shift, &x) < 0) return NUM_RANGE;
    }
    d = (double)x;
  } else {
    if (yaml_nonfinite(v)) return NUM_NONFINITE;
    d = strtod(v, &end);
    if (end == v) return NUM_SYNTAX;
    if (!*end && !isfinite(d)) return NUM_NONFINITE;
    if (errno == ERANGE && fabs(d) > 1) return NUM_RANGE; /* underflow to ~0 is fine */
  }
  if (*end) return NUM_SYNTAX;
  *out = d;
  return NUM_OK;
}

/* A bound as people write it: an integer key's in full (4294967295, not
 * 4.29497e+09); a real-valued key's short (1e+06). */
static void bound_text(const sg_setting_t *s, double b, char *out, size_t n) {
  if (s->type != SG_T_FLOAT && b == floor(b) && fabs(b) < 9e15) snprintf(out, n, "%.0f", b);
  else snprintf(out, n, "%g", b);
}

static int check_bounds(const sg_setting_t *s, double d, char *why, size_t n) {
  char b[64];
  if (s->min > s->max) return SG_OK;
  if (!(d >= s->min)) {
    bound_text(s, s->min, b, sizeof b);
    snprintf(why, n, "must be >= %s", b);
    return SG_ECONFIG;
  }
  if (!(d <= s->max)) {
    bound_text(s, s->max, b, sizeof b);
    snprintf(why, n, "must be <= %s", b);
    return SG_ECONFIG;
  }
  return SG_OK;
}

/* The reason a number did not parse, into why. */
static int num_error(const sg_setting_t *s, int how, const char *v, char *why, size_t n) {
  int integer = s->type != SG_T_FLOAT;
  if (how == NUM_NONFINITE) snprintf(why, n, "must be a finite number, got '%s'", v);
  else if (how == NUM_RANGE)
    snprintf(why, n, "'%s' is out of range for %s", v, integer ? "a 64-bit integer" : "a double");
  else snprintf(why, n, "expected %s, got '%s'", integer ? "an integer" : "a number", v);
  return SG_ECONFIG;
}

/* "a,b,c": one line, no empty item. */
static int strlist_check(const char *v, char *why, size_t n) {
  size_t len = strlen(v);
  if (!len || strchr(v, '\n') || v[0] == ',' || v[len - 1] == ',' || strstr(v, ",,")) {
    snprintf(why, n, "expected a value or a list of values, got '%s'", v);
    return SG_ECONFIG;
  }
  return SG_OK;
}

int sg_setting_check(const sg_setting_t *s, const char *v, char *why, size_t n) {
  double d;
  switch (s->type) {
  case SG_T_INT:
  case SG_T_FLOAT: {
    int how = parse_num(v, s->type == SG_T_INT, &d);
    if (how < 0) return num_error(s, how, v, why, n);
    return check_bounds(s, d, why, n);
  }
  case SG_T_BOOL:
    if (!strcmp(v, "true") || !strcmp(v, "false")) return SG_OK;
    snprintf(why, n, "expected true or false, got '%s'", v);
    return SG_ECONFIG;
  case SG_T_STR:
    if (strchr(v, '\n')) {
      snprintf(why, n, "must be a single line");
      return SG_ECONFIG;
    }
    return SG_OK;
  case SG_T_ENUM: {
    size_t len = strlen(v);
    for (const char *c = s->choices; c && *c;) {
      const char *bar = strchr(c, '|');
      size_t cl = bar ? (size_t)(bar - c) : strlen(c);
      if (cl == len && strncmp(c, v, len) == 0) return SG_OK;
      c += cl + (bar ? 1 : 0);
    }
    snprintf(why, n, "'%s' is not one of %s", v, s->choices);
    return SG_ECONFIG;
  }
  case SG_T_INTLIST: {
    char buf[64];
    const char *p = v;
    if (!*p) {
      snprintf(why, n, "expected a list of integers");
      return SG_ECONFIG;
    }
    while (*p) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      if (len == 0 || len >= sizeof buf) {
        snprintf(why, n, "expected a list of integers, got '%s'", v);
        return SG_ECONFIG;
      }
      memcpy(buf, p, len);
      buf[len] = '\0';
      int how = parse_num(buf, 1, &d);
      if (how == NUM_SYNTAX) {
        snprintf(why, n, "expected integers, got '%s'", buf);
        return SG_ECONFIG;
      }
      if (how < 0) return num_error(s, how, buf, why, n);
      SG_CHECK(check_bounds(s, d, why, n));
      p += len + (comma ? 1 : 0);
    }
    return SG_OK;
  }
  case SG_T_STRLIST:
    return strlist_check(v, why, n);
  }
  return SG_ECONFIG;
}

int sg_settings_defaults(const sg_setting_t *table, sg_opts_t *o) {
  for (const sg_setting_t *s = table; s && s->name; s++)
    if (!sg_opts_has(o, s->name)) SG_CHECK(sg_opts_set(o, s->name, s->def));
  return SG_OK;
}

/* ---- reading a setting with the table's default ------------------------ */

int sg_setting_str(const sg_opts_t *o, const sg_setting_t *table, const char *key,
                   const char **out) {
  const char *v = o ? sg_opts_get(o, key) : NULL;
  if (!v) {
    const sg_setting_t *s = sg_setting_find(table, key);
    if (!s) s = sg_setting_find(sg_settings, key);
    if (!s || !s->def) return sg_err_set(SG_ECONFIG, "%s: not set and no default", key);
    v = s->def;
  }
  *out = v;
  return SG_OK;
}

const char *sg_setting_or(const sg_opts_t *o, const sg_setting_t *table, const char *key) {
  const char *v = o ? sg_opts_get(o, key) : NULL;
  const sg_setting_t *s = v ? NULL : sg_setting_find(table, key);
  if (!v && !s) s = sg_setting_find(sg_settings, key);
  return v ? v : s && s->def ? s->def : "";
}

int64_t sg_setting_int_or(const sg_opts_t *o, const sg_setting_t *table, const char *key) {
  int64_t v = 0; /* a value that does not parse also leaves sg_parse_int's message */
  return sg_parse_int(key, sg_setting_or(o, table, key), &v) == SG_OK ? v : 0;
}

int sg_setting_int(const sg_opts_t *o, const sg_setting_t *table, const char *key, int64_t *out) {
  const char *v;
  SG_CHECK(sg_setting_str(o, table, key, &v));
  return sg_parse_int(key, v, out);
}

int sg_setting_double(const sg_opts_t *o, const sg_setting_t *table, const char *key,
                      double *out) {
  const char *v;
  SG_CHECK(sg_setting_str(o, table, key, &v));
  char *end;
  errno = 0;
  double d = strtod(v, &end);
  if (end == v || *end || errno == ERANGE || !isfinite(d))
    return sg_err_set(SG_ECONFIG, "%s: expected a number, got '%s'", key, v);
  *out = d;
  return SG_OK;
}
