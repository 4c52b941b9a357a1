/* admit.c - admission of runs before launch (see admit.h). */
#include "admit.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_method.h"
#include "dataset.h"
#include "dataset_clicks.h"
#include "simulate.h"
#include "err.h"
#include "model.h"
#include "msgbuf.h"
#include "shard.h"
#include "transport_new.h"
#include "workload.h"

enum {
  EVAL_ROWS = 1000,  /* rows per evaluation pass (the model's buffers hold at least this) */
  ZMQ_EXTRA = 2,     /* sockets of a rank besides its PUSH per peer: PULL, records */
  FD_PER_PEER = 3,   /* a PUSH socket's mailbox + its connection + the peer's into our PULL */
  FD_BASE = 32,      /* context, io thread, rendezvous, records, stdio, BLAS */
  CORES_FACTOR = 4,  /* processes per core beyond which a run is mostly waiting */
  MAX_DATASETS = 64, /* distinct datasets remembered per experiment */
  /* compute: modeled (sim_modeled_own): the engines fold their payloads
   * of SG_MSG_FOLD_MIN or more (sg_fold_alloc, core/msgbuf.h) in blocks of
   * SG_SIM_FOLD_BLOCK, one map each; a
   * message whose payload folds keeps a page or two of its own (its header
   * and the partial pages beside it) and splits its buffer into its
   * header's map and one per block of its payload;
   * the simulator itself and each rank's stack and privatized copy of the
   * rank program take some more */
  SIM_FOLD_MIN_B = SG_MSG_FOLD_MIN,
  SIM_FRAME_OWN_B = 8192,
  SIM_MAPS_BASE = 4096,
  SIM_MAPS_RANK = 32,
};

/* ---- the data, as the ranks decode it ---------------------------------- */

typedef struct dsinfo {
  char key[2048]; /* the settings that determine it */
  int64_t ntrain, ntest, d, max_row_nnz;
  double train_b, test_b; /* bytes a rank holds: rows (float32 or CSR) + labels */
  int sparse;
  int classes; /* libsvm: as read (inferred when classes: 0); else 0 */
} dsinfo_t;

typedef struct admit {
  dsinfo_t ds[MAX_DATASETS];
  size_t nds;
  double mem_total, mem_avail; /* bytes; 0 = unknown */
  long cores;
  int zmq_sockets;   /* libzmq's per-context socket limit */
  double nofile;     /* RLIMIT_NOFILE (soft); INFINITY when unlimited */
} admit_t;

static double dense_bytes(int64_t n, int64_t d) { return 4.0 * (double)n * (double)d + 4.0 * (double)n; }
static double csr_bytes(int64_t n, double nnz) { return 8.0 * ((double)n + 1) + 8.0 * nnz + 4.0 * (double)n; }

static int64_t limited(int64_t n, int64_t lim) { return lim > 0 && lim < n ? lim : n; }

static int probe_idx(const sg_opts_t *o, dsinfo_t *di) {
  char dflt[256], ti[1024], ei[1024], lab[1024];
  int64_t ltrain = 0, ltest = 0, dt = 0;
  const char *dir = sg_opts_str_or(o, "data_dir", ""), *ds = sg_opts_str_or(o, "dataset", "");
  int given = *dir != '\0';
  if (!given) {
    snprintf(dflt, sizeof dflt, "/usr/share/datasets/%s", ds);
    dir = dflt;
  }
  SG_CHECK(sg_opts_int(o, "train_samples", &ltrain));
  SG_CHECK(sg_opts_int(o, "test_samples", &ltest));
  /* as the ranks look for them (sg_idx_find) */
  SG_CHECK(sg_idx_find(ti, sizeof ti, dir, "train-images-idx3-ubyte", ds, given));
  SG_CHECK(sg_idx_find(lab, sizeof lab, dir, "train-labels-idx1-ubyte", ds, given));
  SG_CHECK(sg_idx_find(ei, sizeof ei, dir, "t10k-images-idx3-ubyte", ds, given));
  SG_CHECK(sg_idx_find(lab, sizeof lab, dir, "t10k-labels-idx1-ubyte", ds, given));
  SG_CHECK(sg_dataset_probe_idx(ti, &di->ntrain, &di->d));
  SG_CHECK(sg_dataset_probe_idx(ei, &di->ntest, &dt));
  if (dt != di->d)
    return sg_err_set(SG_EFORMAT, "%s: %lld features per image, training set has %lld", ei,
                      (long long)dt, (long long)di->d);
  di->ntrain = limited(di->ntrain, ltrain);
  di->ntest = limited(di->ntest, ltest);
  di->train_b = dense_bytes(di->ntrain, di->d);
  di->test_b = dense_bytes(di->ntest, di->d);
  return SG_OK;
}

/* Bytes of a loaded LIBSVM split once the workload has settled dense vs
 * CSR (it densifies small, mostly-full files: see workload.c). */
static double libsvm_bytes(const sg_dataset_t *ds, int64_t d, int dense) {
  if (!ds) return 0;
  return dense ? dense_bytes(ds->n, d) : csr_bytes(ds->n, (double)ds->rowptr[ds->n]);
}

static int probe_libsvm(const sg_opts_t *o, dsinfo_t *di) {
  int64_t features, classes, ltrain, ltest, seed;
  double holdout;
  sg_dataset_t *tr = NULL, *te = NULL;
  int rc;
  const char *tf = sg_opts_str_or(o, "train_file", ""), *ef = sg_opts_str_or(o, "test_file", "");
  SG_CHECK(sg_opts_int(o, "features", &features));
  SG_CHECK(sg_opts_int(o, "classes", &classes));
  SG_CHECK(sg_opts_int(o, "train_samples", &ltrain));
  SG_CHECK(sg_opts_int(o, "test_samples", &ltest));
  SG_CHECK(sg_opts_int_or(o, "seed", 1, &seed));
  SG_CHECK(sg_opts_double_or(o, "holdout", 0, &holdout));
  if (!*tf) return sg_err_set(SG_ECONFIG, "train_file: required for dataset libsvm");
  if (*ef && holdout > 0)
    return sg_err_set(SG_ECONFIG, "holdout: only used without a test_file (test_file: %s)", ef);
  sg_libsvm_labels_t lab = {SG_LABELS_DECIDE, (int)classes};
  SG_TRY(sg_dataset_load_libsvm_labels(&tr, tf, features, &lab, ltrain));
  if (!*ef && !(holdout > 0)) {
    rc = sg_err_set(SG_ECONFIG, "test_file: required for dataset libsvm, or set holdout: "
                    "FRACTION to hold out part of the training file");
    goto fail;
  }
  if (*ef) SG_TRY(sg_dataset_load_libsvm_labels(&te, ef, features, &lab, ltest));
  else SG_TRY(sg_dataset_holdout(&tr, &te, holdout, (uint64_t)seed));
  di->classes = lab.classes;
  di->d = te && te->d > tr->d ? te->d : tr->d;
  di->ntrain = tr->n;
  di->ntest = te ? te->n : 0;
  int64_t nnz = tr->rowptr[tr->n];
  /* workload.c's rule (in doubles: n x d may pass 2^63 here) */
  double cells = (double)tr->n * (double)di->d;
  int dense = (double)nnz * 4 > cells && cells * 4 <= (double)(1 << 30);
  di->sparse = !dense;
  di->max_row_nnz = dense ? di->d : tr->max_row_nnz;
  di->train_b = libsvm_bytes(tr, di->d, dense);
  di->test_b = libsvm_bytes(te, di->d, dense);
fail:
  sg_dataset_destroy(&tr);
  sg_dataset_destroy(&te);
  return rc;
}

/* dataset: clicks -- a log file is read here, as the ranks will read it,
 * so that a bad line stops the run before anything starts. */
static int probe_clicks(const sg_opts_t *o, dsinfo_t *di) {
  int64_t F, V, ltrain, ltest, seed;
  double holdout;
  const char *tf = sg_opts_str_or(o, "train_file", ""), *ef = sg_opts_str_or(o, "test_file", "");
  SG_CHECK(sg_opts_int_or(o, "fields", 8, &F));
  SG_CHECK(sg_opts_int_or(o, "keys_per_field", 100000, &V));
  SG_CHECK(sg_opts_int_or(o, "train_samples", 0, &ltrain));
  SG_CHECK(sg_opts_int_or(o, "test_samples", 0, &ltest));
  SG_CHECK(sg_opts_int_or(o, "seed", 1, &seed));
  SG_CHECK(sg_opts_double_or(o, "holdout", 0, &holdout));
  di->sparse = 1;
  di->max_row_nnz = F;
  di->classes = 2;
  di->d = V;
  di->ntrain = ltrain > 0 ? ltrain : 60000;
  di->ntest = ltest > 0 ? ltest : 10000;
  if (*tf) {
    int fmt = sg_clicks_format(sg_opts_str_or(o, "format", "libsvm"));
    sg_dataset_t *tr = NULL, *te = NULL;
    int rc = SG_OK;
    if (!*ef && !(holdout > 0))
      return sg_err_set(SG_ECONFIG, "test_file: required for a click log file, or set holdout");
    SG_TRY(sg_dataset_load_clicks(&tr, tf, fmt, (int)F, ltrain));
    if (*ef) SG_TRY(sg_dataset_load_clicks(&te, ef, fmt, (int)F, ltest));
    else SG_TRY(sg_dataset_holdout(&tr, &te, holdout, (uint64_t)seed));
    di->ntrain = tr->n, di->ntest = te->n, di->d = tr->d;
  fail:
    sg_dataset_destroy(&tr);
    sg_dataset_destroy(&te);
    SG_CHECK(rc);
  }
  di->train_b = csr_bytes(di->ntrain, (double)di->ntrain * (double)F);
  di->test_b = csr_bytes(di->ntest, (double)di->ntest * (double)F);
  return SG_OK;
}

static int probe_synth(const sg_opts_t *o, int sparse, dsinfo_t *di) {
  int64_t features, ltrain, ltest, nnz;
  SG_CHECK(sg_opts_int(o, "features", &features));
  SG_CHECK(sg_opts_int(o, "train_samples", &ltrain));
  SG_CHECK(sg_opts_int(o, "test_samples", &ltest));
  SG_CHECK(sg_opts_int(o, "nnz", &nnz));
  di->d = features > 0 ? features : sparse ? (1 << 20) : 784;
  di->ntrain = ltrain > 0 ? ltrain : 60000;
  di->ntest = ltest > 0 ? ltest : 10000;
  di->sparse = sparse;
  if (nnz > di->d) nnz = di->d;
  di->max_row_nnz = sparse ? nnz : di->d;
  di->train_b = sparse ? csr_bytes(di->ntrain, (double)di->ntrain * (double)nnz)
                       : dense_bytes(di->ntrain, di->d);
  di->test_b = sparse ? csr_bytes(di->ntest, (double)di->ntest * (double)nnz)
                      : dense_bytes(di->ntest, di->d);
  return SG_OK;
}

/* The run's dataset, probed once per distinct set of data settings. */
static int dataset_info(admit_t *a, const sg_opts_t *o, const dsinfo_t **out) {
  static const char *const keys[] = {"dataset", "data_dir", "train_file", "test_file", "features",
                                     "classes", "train_samples", "test_samples", "nnz",
                                     "holdout", "seed", "fields", "keys_per_field", "zipf",
                                     "format"};
  char key[sizeof a->ds[0].key];
  size_t len = 0;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    len += (size_t)snprintf(key + len, len < sizeof key ? sizeof key - len : 0, "%s\n",
                            sg_opts_str_or(o, keys[i], ""));
  if (len >= sizeof key) return sg_err_set(SG_ECONFIG, "data_dir: paths too long");
  for (size_t i = 0; i < a->nds; i++)
    if (!strcmp(a->ds[i].key, key)) {
      *out = &a->ds[i];
      return SG_OK;
    }
  dsinfo_t *di = &a->ds[a->nds < MAX_DATASETS ? a->nds : MAX_DATASETS - 1];
  memset(di, 0, sizeof *di);
  const char *name = sg_opts_str_or(o, "dataset", "");
  if (!strcmp(name, "libsvm")) SG_CHECK(probe_libsvm(o, di));
  else if (!strcmp(name, "clicks")) SG_CHECK(probe_clicks(o, di));
  else if (!strncmp(name, "synthetic", 9)) SG_CHECK(probe_synth(o, name[9] == '-', di));
  else SG_CHECK(probe_idx(o, di));
  snprintf(di->key, sizeof di->key, "%s", key);
  if (a->nds < MAX_DATASETS) a->nds++;
  *out = di;
  return SG_OK;
}

/* ---- the model and what each rank holds -------------------------------- */

enum { T_TRAIN, T_TEST, T_PARAMS, T_GRAD, T_OPTIM, T_ACT, T_ENGINE, T_N };
static const char *const term_name[T_N] = {
    "training set", "test set", "parameters", "gradient", "optimizer state", "activations",
    "engine buffers"};

typedef struct need {
  double sum[T_N];  /* bytes over the ranks on this host */
  double rank[T_N]; /* the largest one rank holds */
  int nranks[T_N];  /* ranks holding some of it */
} need_t;

typedef struct shape {
  double params, width; /* parameters; floats per row of activations (all layers) */
  double act_row_in;    /* bytes of one gathered input row */
} shape_t;

static int model_shape(const sg_opts_t *o, const dsinfo_t *di, shape_t *m) {
  int64_t hidden[SG_MODEL_MAX_LAYERS], classes;
  size_t nh = 0;
  SG_CHECK(sg_opts_int(o, "classes", &classes));
  if (!strcmp(sg_opts_str_or(o, "dataset", ""), "fashion-mnist") ||
      !strcmp(sg_opts_str_or(o, "dataset", ""), "mnist"))
    classes = 10;
  if (di->classes > 0) classes = di->classes; /* libsvm: what the file gave */
  if (classes == 0) classes = 10;
  if (!strcmp(sg_opts_str_or(o, "model", "mlp"), "mlp"))
    SG_CHECK(sg_opts_intlist(o, "hidden", hidden, SG_MODEL_MAX_LAYERS - 1, &nh));
  double in = (double)di->d;
  m->params = m->width = 0;
  for (size_t l = 0; l <= nh; l++) {
    double out = l < nh ? (double)hidden[l] : (double)classes;
    m->params += (in + 1) * out;
    m->width += 2 * out; /* activations and their gradients */
    in = out;
  }
  m->act_row_in = di->sparse ? 8.0 * (double)di->max_row_nnz : 4.0 * (double)di->d;
  if (!strcmp(sg_opts_str_or(o, "model", "mlp"), "embedding")) { /* core/model_embed.c */
    int64_t F = 8, R = 262144, E = 16;
    SG_CHECK(sg_opts_int_or(o, "fields", 8, &F));
    SG_CHECK(sg_opts_int_or(o, "table_rows", 262144, &R));
    SG_CHECK(sg_opts_int_or(o, "embed_dim", 16, &E));
    SG_CHECK(sg_opts_intlist(o, "hidden", hidden, SG_MODEL_MAX_LAYERS - 1, &nh));
    const double fe = (double)(F * E), H = nh ? (double)hidden[0] : 128;
    m->params = H * fe + 3 * H + 2 + (double)R * (double)E;
    m->width = 2 * fe + 2 * H + 2 * (double)F * (double)E + 3 * (double)F; /* x, gx, a, g, rows */
  }
  if (!strcmp(sg_opts_str_or(o, "model", "mlp"), "cnn")) { /* core/model_cnn.c's buffers */
    const double s = floor(sqrt((double)di->d) + 0.5), c1 = (s - 4) * (s - 4);
    const double p1 = c1 / 4, c2 = ((s - 4) / 2 - 4) * ((s - 4) / 2 - 4), p2 = c2 / 4;
    m->params = 156 + 2416 + (16 * p2 + 1) * 120 + 121 * 84 + 85 * (double)classes;
    /* conv1: patches 25, z and dz 6 each, pooled + index + grad 6 each;
     * conv2: patches and their grad 150 each, z and dz 16, pooled 3 x 16 */
    m->width = c1 * (25 + 12) + p1 * 18 + c2 * (300 + 32) + p2 * 48 +
               2 * (120 + 84 + (double)classes);
  }
  return SG_OK;
}

static void add(need_t *n, int term, double bytes) {
  if (bytes <= 0) return;
  n->sum[term] += bytes;
  n->nranks[term]++;
  if (bytes > n->rank[term]) n->rank[term] = bytes;
}

static double act_bytes(const shape_t *m, double batch) {
  double rows = batch > EVAL_ROWS ? batch : EVAL_ROWS;
  return rows * (4.0 * m->width + m->act_row_in);
}

/* What rank `r` of a training engine holds: the engine table's plan
 * (sg_engine_t.memory; a replica when it has none) times the model. */
static void rank_need(const sg_run_spec_t *run, int r, const dsinfo_t *di, const shape_t *m,
                      double batch, int momentum, need_t *n) {
  const double P = 4.0 * m->params;
  sg_mem_plan_t plan = {.params = 1, .grad = 1, .optim = 1, .batch_mult = 1, .train = 1,
                        .test = r == 0};
  if (run->engine->memory) run->engine->memory(run->opts, run->workers, r, &plan);
  if (plan.train) add(n, T_TRAIN, di->train_b);
  if (plan.test) add(n, T_TEST, di->test_b);
  add(n, T_PARAMS, plan.params * P);
  add(n, T_GRAD, plan.grad * P);
  add(n, T_OPTIM, momentum ? plan.optim * P : 0);
  add(n, T_ENGINE, plan.engine * P);
  if (plan.batch_mult > 0) add(n, T_ACT, act_bytes(m, batch * plan.batch_mult));
  else if (plan.test) add(n, T_ACT, act_bytes(m, 0)); /* evaluation rows only */
}

/* A benchmark run: message buffers of its largest size. */
static void bench_need(const sg_run_spec_t *run, int r, need_t *n) {
  int64_t hi = 0;
  sg_opts_int_or(run->opts, "_bench_max_bytes", 0, &hi);
  double k = 3;
  if (run->servers > 0 &&
      sg_engine_role_kind(run->engine, run->opts, run->workers, r) == SG_ROLE_WORKER)
    k = 3 + 2.0 * run->servers;
  add(n, T_ENGINE, k * (double)hi);
}

static int trains(const sg_run_spec_t *run) { return !sg_bench_requested(run->opts); }

/* ---- where the ranks go ------------------------------------------------ */

static int is_this_host(const char *h, size_t len) {
  char me[256] = "";
  gethostname(me, sizeof me - 1);
  size_t short_len = strcspn(me, ".");
  return (len == 9 && !strncmp(h, "localhost", 9)) || (len == 9 && !strncmp(h, "127.0.0.1", 9)) ||
         (len == strlen(me) && !strncmp(h, me, len)) || (len == short_len && !strncmp(h, me, len));
}

/* Whether rank r runs on this host: mpirun -H fills each host's slots in
 * list order ("a:2,b:2": ranks 0-1 on a, 2-3 on b), wrapping around when
 * oversubscribed; no host list = every rank here. */
static int rank_here(const char *hosts, int r) {
  if (!hosts || !*hosts) return 1;
  int total = 0;
  for (int pass = 0; pass < 2; pass++) {
    int at = 0;
    for (const char *h = hosts; *h;) {
      size_t len = strcspn(h, ",");
      const char *colon = memchr(h, ':', len);
      long slots = colon ? strtol(colon + 1, NULL, 10) : 1;
      if (slots < 1) slots = 1;
      if (pass == 1 && r % total >= at && r % total < at + slots)
        return is_this_host(h, colon ? (size_t)(colon - h) : len);
      at += (int)slots;
      h += len + (h[len] == ',');
    }
    total = at;
    if (total < 1) return 1;
  }
  return 0;
}

/* ---- the checks -------------------------------------------------------- */

static void fmt_bytes(char *out, size_t cap, double b) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    u++;
  }
  snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", b, unit[u]);
}

/* what may be sg_err_msg() itself: copied before the message is rebuilt */
static int run_err(const sg_experiment_t *x, size_t i, const char *what) {
  char w[1024];
  snprintf(w, sizeof w, "%s", what);
  return sg_err_set(SG_ECONFIG, "%s: run %zu (%s): %s", x->path, i + 1, x->runs[i].label, w);
}

static int check_steps(const sg_run_spec_t *run, const dsinfo_t *di, char *why, size_t cap) {
  int64_t batch, max_steps, total;
  double epochs;
  SG_CHECK(sg_opts_int(run->opts, "batch", &batch));
  SG_CHECK(sg_opts_int(run->opts, "max_steps", &max_steps));
  SG_CHECK(sg_opts_double(run->opts, "epochs", &epochs));
  if (batch < 1 || batch > INT_MAX) return sg_err_set(SG_ECONFIG, "batch: %lld out of range", (long long)batch);
  int64_t spe = sg_shard_steps_per_epoch(di->ntrain, run->workers, (int)batch);
  if (spe < 1)
    return sg_err_set(SG_ECONFIG, "batch: workers x batch = %d x %lld exceeds the %lld training samples",
                      run->workers, (long long)batch, (long long)di->ntrain);
  int rc = sg_workload_plan_steps(epochs, spe, max_steps, &total);
  if (rc < 0) snprintf(why, cap, "%s", sg_err_msg());
  return rc;
}

/* Hard limits a run's process count must fit, whatever --force says: each
 * zmq rank holds a socket and ~FD_PER_PEER descriptors per peer. */
static int check_procs(const admit_t *a, const sg_run_spec_t *run, char *why, size_t cap) {
  if (strcmp(sg_opts_str_or(run->opts, "transport", "zmq"), "zmq") != 0) return SG_OK;
  if (run->nprocs + ZMQ_EXTRA > a->zmq_sockets) {
    snprintf(why, cap, "%d processes over transport zmq: each rank opens a socket per peer "
             "(%d sockets), more than libzmq's %d per process; use transport: mpi or fewer processes",
             run->nprocs, run->nprocs + ZMQ_EXTRA, a->zmq_sockets);
    return SG_ECONFIG;
  }
  double fds = (double)FD_PER_PEER * (run->nprocs - 1) + FD_BASE;
  if (fds > a->nofile) {
    snprintf(why, cap, "%d processes over transport zmq need ~%.0f open files per rank, more "
             "than the limit of %.0f (ulimit -n); raise it, or use transport: mpi",
             run->nprocs, fds, a->nofile);
    return SG_ECONFIG;
  }
  return SG_OK;
}

/* delay_rank names a rank of this run (or -1, -2): a rank beyond the run
 * would slow nothing, and the straggler the experiment describes would
 * never happen.  (delay_ms or delay_prob without a rank stay allowed: a
 * sweep's baseline sets them so.) */
static int check_delay(const sg_run_spec_t *run, char *why, size_t cap) {
  int64_t r = -1;
  if (sg_opts_int_or(run->opts, "delay_rank", -1, &r) < 0 || r < run->nprocs) return SG_OK;
  snprintf(why, cap, "delay_rank: %lld, but the run has %d process%s (ranks 0..%d; -1 none, -2 "
           "every training rank)", (long long)r, run->nprocs, run->nprocs == 1 ? "" : "es",
           run->nprocs - 1);
  return SG_ECONFIG;
}

/* Memory of one run on this host, term by term; *here = its ranks here. */
static int run_need(const sg_run_spec_t *run, const dsinfo_t *di, need_t *n, int *here) {
  shape_t m = {0};
  int64_t batch = 0;
  double mu = 0;
  memset(n, 0, sizeof *n);
  if (trains(run)) {
    SG_CHECK(model_shape(run->opts, di, &m));
    SG_CHECK(sg_opts_int(run->opts, "batch", &batch));
    SG_CHECK(sg_opts_double(run->opts, "momentum", &mu));
  }
  const char *hosts = sg_opts_str_or(run->opts, "hosts", "");
  *here = 0;
  for (int r = 0; r < run->nprocs; r++) {
    if (!rank_here(hosts, r)) continue;
    ++*here;
    if (trains(run)) rank_need(run, r, di, &m, (double)batch, mu > 0, n);
    else bench_need(run, r, n);
  }
  return SG_OK;
}

static double need_total(const need_t *n, int *biggest) {
  double t = 0;
  *biggest = 0;
  for (int k = 0; k < T_N; k++) {
    t += n->sum[k];
    if (n->sum[k] > n->sum[*biggest]) *biggest = k;
  }
  return t;
}

static void describe_need(const admit_t *a, const need_t *n, int here, char *out, size_t cap) {
  int big;
  char need[32], avail[32], total[32], per[32], sum[32];
  fmt_bytes(need, sizeof need, need_total(n, &big));
  fmt_bytes(avail, sizeof avail, a->mem_avail);
  fmt_bytes(total, sizeof total, a->mem_total);
  fmt_bytes(per, sizeof per, n->rank[big]);
  fmt_bytes(sum, sizeof sum, n->sum[big]);
  snprintf(out, cap, "needs ~%s of memory for its %d process%s on this host, this machine has %s "
           "available (%s total); biggest: %s %s x %d rank%s = %s",
           need, here, here == 1 ? "" : "es", avail, total, term_name[big], per, n->nranks[big],
           n->nranks[big] == 1 ? "" : "s", sum);
}

/* ---- the machine ------------------------------------------------------- */

static void machine(admit_t *a) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  unsigned long long kb;
  while (f && fgets(line, sizeof line, f)) {
    if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) a->mem_total = 1024.0 * (double)kb;
    if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) a->mem_avail = 1024.0 * (double)kb;
  }
  if (f) fclose(f);
  a->cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (a->cores < 1) a->cores = 1;
  a->zmq_sockets = sg_zmq_max_sockets();
  struct rlimit rl;
  a->nofile = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                  ? (double)rl.rlim_cur : INFINITY;
}

/* ---- one run, every run ------------------------------------------------- */

/* The kernel's limit on one process's memory maps (vm.max_map_count);
 * 0 when unknown. */
static double max_map_count(void) {
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  double v = 0;
  if (f && fscanf(f, "%lf", &v) != 1) v = 0;
  if (f) fclose(f);
  return v;
}

/* compute: modeled folds the parameters, gradients, optimizer state and
 * the engine's buffers but its message buffers and the buffers it parses
 * (plan.own), each allocated by sg_fold_alloc (core/msgbuf.h; one map per
 * SG_SIM_FOLD_BLOCK block, from SIM_FOLD_MIN_B on); every other allocation
 * stays the rank's own, within the simulator's fixed amount per rank
 * (simulate.c), nothing of which is P-sized.  *own gets what the ranks
 * keep of their own beyond that (whole message buffers, or, where their
 * payloads fold, the pages of each message's header; the parsed
 * buffers; with `defer`, the staged copies of the messages in flight
 * whose payloads do not fold: msg_out), *maps the process's memory maps. */
static int sim_modeled_own(const sg_run_spec_t *run, const dsinfo_t *di, int defer, double *own,
                           double *maps) {
  shape_t m = {0};
  *own = 0;
  *maps = SIM_MAPS_BASE + SIM_MAPS_RANK * (double)run->nprocs;
  if (!trains(run)) return SG_OK;
  SG_CHECK(model_shape(run->opts, di, &m));
  const double P = 4.0 * m.params;
  for (int r = 0; r < run->nprocs; r++) {
    sg_mem_plan_t plan = {.params = 1, .grad = 1, .optim = 1, .in_P = P};
    if (run->engine->memory) run->engine->memory(run->opts, run->workers, r, &plan);
    double folded = (plan.params + plan.grad + plan.optim + plan.engine - plan.msg - plan.own) * P;
    if (P >= SIM_FOLD_MIN_B && folded > 0) *maps += ceil(folded / SG_SIM_FOLD_BLOCK) + 4;
    *own += plan.own * P; /* parsed buffers (sparse indices, topk pairs): never folded */
    /* a frame whose payload is under SIM_FOLD_MIN_B stays whole
     * (sg_msg_malloc_framed): no maps, all of it the rank's own; a
     * folded one takes its header's map and one per SG_SIM_FOLD_BLOCK of
     * its payload, begun (a 61 MiB payload: 5 maps, measured) */
    double frame = plan.msg_frames > 0 ? plan.msg * P / plan.msg_frames : 0;
    if (plan.msg_fold && frame >= SIM_FOLD_MIN_B) {
      *own += plan.msg_frames * SIM_FRAME_OWN_B;
      *maps += plan.msg_frames * (1 + ceil(frame / SG_SIM_FOLD_BLOCK));
    } else *own += (plan.msg + (defer ? plan.msg_out : 0)) * P;
  }
  return SG_OK;
}

/* A simulated run (simulate.h) is one simulator process: its estimate is
 * the simulator's (the data once, a fixed amount per simulated rank, and
 * under compute: modeled what is not folded), not one process per rank;
 * folded message buffers also count against the kernel's maps. */
static int admit_sim(admit_t *a, const sg_experiment_t *x, size_t i, const dsinfo_t *di,
                     int force, double *total, int *here) {
  const sg_run_spec_t *run = &x->runs[i];
  sg_sim_cfg_t c;
  char why[768], need[32], avail[32];
  double own = 0, maps = 0, lim = max_map_count();
  if (sg_sim_cfg_read(run->opts, run->nprocs, &c) < 0) return run_err(x, i, sg_err_msg());
  /* deferred sends (as execute.c decides): a staged copy of each message
   * in flight, all of it where its payload is not folded */
  if (c.modeled && sim_modeled_own(run, di, c.eager > 1, &own, &maps) < 0)
    return run_err(x, i, sg_err_msg());
  double data = c.modeled ? 0 : di->train_b + di->test_b; /* once per process */
  *total = sg_sim_mem_estimate(&c, run->nprocs) + data + own;
  if (!c.modeled) { /* executed: every simulated rank holds its model's state too */
    need_t n;
    int h;
    if (run_need(run, di, &n, &h) < 0) return run_err(x, i, sg_err_msg());
    for (int t = T_PARAMS; t < T_N; t++) *total += n.sum[t];
  }
  *here = 1;
  if (a->mem_avail > 0 && *total > a->mem_avail && !force) {
    fmt_bytes(need, sizeof need, *total);
    fmt_bytes(avail, sizeof avail, a->mem_avail);
    snprintf(why, sizeof why, "simulating %d processes needs ~%s of memory (%s compute; "
             "estimated from measured simulations), this machine has %s available%s "
             "(--force runs it anyway)", run->nprocs, need, c.modeled ? "modeled" : "executed",
             avail, c.modeled ? "" : "; compute: modeled folds the buffers");
    return run_err(x, i, why);
  }
  if (lim > 0 && maps > lim && !force) {
    snprintf(why, sizeof why, "simulating %d processes with compute modeled takes ~%.0f memory "
             "maps (message buffers fold each message's payload apart from its header: a map for "
             "the header and one per 16 MiB of payload), more than vm.max_map_count = %.0f allows; raise it as root (sysctl -w "
             "vm.max_map_count=%.0f) or simulate fewer ranks (--force runs it anyway)",
             run->nprocs, maps, lim, pow(2, ceil(log2(maps * 1.25))));
    return run_err(x, i, why);
  }
  return SG_OK;
}

/* Steps, limits, memory of run i; *total and *here get its estimate. */
static int admit_run(admit_t *a, const sg_experiment_t *x, size_t i, int force, double *total,
                     int *here) {
  const sg_run_spec_t *run = &x->runs[i];
  const dsinfo_t *di = NULL;
  static const dsinfo_t none = {.d = 1};
  char why[768];
  int big;
  need_t n;
  if (check_procs(a, run, why, sizeof why) < 0 || check_delay(run, why, sizeof why) < 0)
    return run_err(x, i, why);
  if (trains(run) && dataset_info(a, run->opts, &di) < 0) return run_err(x, i, sg_err_msg());
  if (!di) di = &none;
  if (trains(run) && check_steps(run, di, why, sizeof why) < 0)
    return run_err(x, i, sg_err_msg());
  if (sg_sim_enabled(run->opts)) return admit_sim(a, x, i, di, force, total, here);
  if (run_need(run, di, &n, here) < 0) return run_err(x, i, sg_err_msg());
  *total = need_total(&n, &big);
  if (a->mem_avail > 0 && *total > a->mem_avail && !force) {
    describe_need(a, &n, *here, why, sizeof why);
    size_t len = strlen(why);
    snprintf(why + len, sizeof why - len, " (--force runs it anyway)");
    return run_err(x, i, why);
  }
  return SG_OK;
}

int sg_admit_experiment(const sg_experiment_t *x, int force, FILE *summary) {
  admit_t *a = calloc(1, sizeof *a);
  if (!a) return SG_ENOMEM;
  machine(a);
  int rc = SG_OK, most = 0;
  size_t imost = 0, ibig = 0;
  double big = -1;
  for (size_t i = 0; i < x->nruns; i++) {
    double total = 0;
    int here = 0;
    SG_TRY(admit_run(a, x, i, force, &total, &here));
    if (here > most) most = here, imost = i;
    if (total > big) big = total, ibig = i;
  }
  if (x->nruns && most > CORES_FACTOR * a->cores)
    fprintf(stderr, "sgdlab run: warning: run %zu (%s) starts %d processes on this host's %ld cores; "
            "timings will mostly measure waiting\n", imost + 1, x->runs[imost].label, most, a->cores);
  FILE *out = summary ? summary : stderr;
  if (x->nruns && (summary || (force && big > a->mem_avail && a->mem_avail > 0))) {
    char need[32], avail[32], tot[32];
    fmt_bytes(need, sizeof need, big);
    fmt_bytes(avail, sizeof avail, a->mem_avail);
    fmt_bytes(tot, sizeof tot, a->mem_total);
    fprintf(out, "memory: run %zu (%s) needs the most, ~%s on this host; this machine has %s "
            "available (%s total)%s\n", ibig + 1, x->runs[ibig].label, need, avail, tot,
            big > a->mem_avail && a->mem_avail > 0 ? "; more than available, admitted by --force" : "");
  }
fail:
  free(a);
  return rc;
}
