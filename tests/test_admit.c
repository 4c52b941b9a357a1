/* test_admit.c - admission through the real `sgdlab run -n`: runs the
 * machine cannot hold are refused with one line and exit 2 before
 * anything launches; --force admits a run over the memory estimate (only
 * ever dry here: such a run would exhaust the host).
 *
 * Only the CLI is used, so the same checks can be pointed at any build
 * (SGDLAB_BIN_DIR). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "run_util.h"
#include "test.h"

static char out[8192];

/* `sgdlab run -n [--force] FILE` on `text`; stdout and stderr in out. */
static int dry(const char *text, int force) {
  const char *dir = ru_scratch("admit");
  char path[512];
  if (!dir) return -1;
  snprintf(path, sizeof path, "%s/x.yaml", dir);
  if (ru_write_file(path, text) < 0) return -1;
  char *argv[] = {"sgdlab", "run", "-n", path, force ? "--force" : NULL, NULL};
  return ru_run(argv, 1, dir, out, sizeof out);
}

/* Exactly one line of output. */
static int one_line(void) {
  char *nl = strchr(out, '\n');
  return nl && nl[1] == '\0';
}

TEST(thousand_workers_over_zmq_are_refused) {
  /* a full mesh of 1024 ranks: 1026 sockets per rank, libzmq allows 1023 */
  CHECK_EQ_INT(dry("workers: 1024\nengines: [allreduce]\n", 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "x.yaml: run 1 (allreduce ring workers=1024): 1024 processes over transport zmq");
  CHECK_STR_CONTAINS(out, "more than libzmq's 1023 per process");
  CHECK_EQ_INT(dry("workers: 1024\nengines: [{engine: ps, servers: 1024}]\n", 0), 2);
  CHECK_STR_CONTAINS(out, "2048 processes over transport zmq");
  /* --force is about memory; a limit the run would hit is never forced */
  CHECK_EQ_INT(dry("workers: 1024\nengines: [allreduce]\n", 1), 2);
  CHECK_STR_CONTAINS(out, "more than libzmq's 1023 per process");
}

TEST(open_file_limit_is_checked) {
  /* 100 zmq ranks need ~3 descriptors per peer: more than 256 */
  struct rlimit old, low;
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  low.rlim_cur = 256;
  if (old.rlim_cur < 256) low.rlim_cur = old.rlim_cur;
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  int rc = dry("workers: 100\nworkload: {dataset: synthetic, features: 4, train_samples: 10000}\n"
               "engines: [allreduce]\n", 0);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK_EQ_INT(rc, 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "open files per rank, more than the limit of 256 (ulimit -n)");
  /* the same run over MPI has no full zmq mesh */
  CHECK_EQ_INT(dry("workers: 100\ntransport: mpi\nworkload: {dataset: synthetic, features: 4, "
                   "train_samples: 10000}\nengines: [allreduce]\n", 0), 0);
}

TEST(tiny_libsvm_file_with_a_huge_index_is_refused_for_memory) {
  /* 14 bytes declare 1e8 features: an MLP of 4096 hidden units on them is
   * 4e11 parameters, 1.6 TB per copy */
  char dir[256], svm[512], text[2048];
  CHECK(ru_mkdtemp(dir, sizeof dir, "admit-svm") == 0); /* dry() takes ru_scratch */
  snprintf(svm, sizeof svm, "%s/tiny.svm", dir);
  CHECK(ru_write_file(svm, "0 100000000:1\n") == 0);
  snprintf(text, sizeof text, "workload: {dataset: libsvm, train_file: %s, test_file: %s, "
           "classes: 2, batch: 1, hidden: [4096]}\nengines: [local]\n", svm, svm);
  CHECK_EQ_INT(dry(text, 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "x.yaml: run 1 (local workers=1): needs ~");
  CHECK_STR_CONTAINS(out, " TiB of memory for its 1 process on this host, this machine has ");
  CHECK_STR_CONTAINS(out, "biggest: parameters 1.5 TiB x 1 rank = 1.5 TiB (--force runs it anyway)");
  /* --force admits it (dry: nothing is started) and says what it admitted */
  CHECK_EQ_INT(dry(text, 1), 0);
  CHECK_STR_CONTAINS(out, "more than available, admitted by --force");
  CHECK_STR_CONTAINS(out, "[1/1] local workers=1  processes=1 repeat=0");
  ru_rm_rf(dir);
}

TEST(every_worker_holding_the_training_set_is_counted) {
  /* Fashion-MNIST decoded as float32 is 180 MiB: 64 workers hold 64 copies */
  CHECK_EQ_INT(dry("workers: 64\ntransport: mpi\nengines: [allreduce]\n", 1), 0);
  const char *at = strstr(out, "memory: run 1 (allreduce ring workers=64) needs the most, ~");
  double gib = 0;
  char unit[8] = "";
  CHECK_MSG(at && sscanf(strchr(at, '~') + 1, "%lf %7s", &gib, unit) == 2, "%s", out);
  CHECK_MSG(!strcmp(unit, "GiB") && gib >= 64 * 179.7 / 1024 && gib < 14, "%s", out);
  CHECK_EQ_INT(dry("workers: 4\ntransport: mpi\nengines: [allreduce]\n", 0), 0);
  CHECK_STR_CONTAINS(out, "needs the most, ~");
  CHECK_STR_CONTAINS(out, " MiB on this host");
}

TEST(steps_are_counted_from_the_real_data) {
  CHECK_EQ_INT(dry("workload: {epochs: 0}\nengines: [local]\n", 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "run 1 (local workers=1): epochs: 0 x 937 steps per epoch gives 0 steps");
  CHECK_EQ_INT(dry("workload: {epochs: 1000000, batch: 1, dataset: synthetic-sparse, nnz: 1, "
                   "train_samples: 1000000000}\nengines: [local]\n", 0), 2);
  CHECK_STR_CONTAINS(out, "1e+15 steps, more than the 1000000000000 one run may take");
  CHECK_EQ_INT(dry("workers: 1000\nworkload: {batch: 64}\ntransport: mpi\nengines: [allreduce]\n", 0), 2);
  CHECK_STR_CONTAINS(out, "batch: workers x batch = 1000 x 64 exceeds the 60000 training samples");
}

TEST(data_that_cannot_be_opened_is_an_error_before_launch) {
  CHECK_EQ_INT(dry("workload: {data_dir: /nonexistent-sgdlab}\nengines: [local]\n", 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "run 1 (local workers=1): /nonexistent-sgdlab: no train-images-idx3-ubyte");
  CHECK_EQ_INT(dry("workload: {dataset: libsvm, train_file: /nonexistent-sgdlab.svm}\n"
                   "engines: [local]\n", 0), 2);
  CHECK_STR_CONTAINS(out, "/nonexistent-sgdlab.svm");
}

/* A LIBSVM training file with neither test_file nor holdout has nothing to
 * evaluate on: refused before launch, naming both ways out. */
TEST(libsvm_without_a_test_set_is_an_error_before_launch) {
  char dir[256], svm[512], text[1024];
  CHECK(ru_mkdtemp(dir, sizeof dir, "admit-hold") == 0);
  snprintf(svm, sizeof svm, "%s/pm.svm", dir);
  CHECK(ru_write_file(svm, "-1 1:1\n+1 2:1\n-1 1:2\n+1 2:2\n") == 0);
  snprintf(text, sizeof text, "workload: {dataset: libsvm, train_file: %s, batch: 1, "
           "model: softmax}\nengines: [local]\n", svm);
  CHECK_EQ_INT(dry(text, 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "test_file: required for dataset libsvm, or set holdout: FRACTION");
  /* -1/+1 labels and a holdout: admitted */
  snprintf(text, sizeof text, "workload: {dataset: libsvm, train_file: %s, batch: 1, "
           "model: softmax, holdout: 0.25}\nengines: [local]\n", svm);
  CHECK_EQ_INT(dry(text, 0), 0);
  ru_rm_rf(dir);
}

TEST(more_processes_than_cores_warn_once) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  char text[512];
  snprintf(text, sizeof text, "workers: [2, %ld]\ntransport: mpi\nworkload: {dataset: synthetic, "
           "features: 4, train_samples: 100000, batch: 1}\nengines: [allreduce]\n", 4 * cores + 1);
  CHECK_EQ_INT(dry(text, 0), 0);
  CHECK_STR_CONTAINS(out, "sgdlab run: warning: run 2 (allreduce ring workers=");
  CHECK_STR_CONTAINS(out, "timings will mostly measure waiting");
  CHECK(strstr(strstr(out, "warning:") + 1, "warning:") == NULL); /* one line, not one per run */
}

/* Two runs with the same settings: each later one is named once, with the
 * run it repeats; the experiment still runs (exit 0). */
TEST(identical_runs_are_warned_once_each) {
  CHECK_EQ_INT(dry("workload: {dataset: synthetic, features: 4, train_samples: 100}\n"
                   "engines:\n  - {engine: ps, servers: 2}\n  - {engine: ps, servers: 2}\n"
                   "  - {engine: ps, servers: 3}\n  - local\n", 0), 0);
  CHECK_STR_CONTAINS(out, "sgdlab run: warning: run 2 (ps sync servers=2 workers=1) has the same settings as "
                          "run 1 (ps sync servers=2 workers=1)");
  CHECK(strstr(strstr(out, "warning:") + 1, "warning:") == NULL);
  /* repeat: is not a duplicate */
  CHECK_EQ_INT(dry("repeat: 2\nworkload: {dataset: synthetic, features: 4, train_samples: 100}\n"
                   "engines: [local]\n", 0), 0);
  CHECK(strstr(out, "warning:") == NULL);
}

/* A straggler on a rank the run does not have would slow nothing: refused
 * in one line; the run's last rank (ps: 1 server + 2 workers = rank 2),
 * -1 and -2 are admitted. */
TEST(delay_rank_beyond_the_run_is_refused) {
  static const char *const base = "workers: 2\nworkload: {dataset: synthetic, features: 4, "
                                  "train_samples: 1000}\ndelay_ms: 50\n";
  char text[512];
  snprintf(text, sizeof text, "%sdelay_rank: 99\nengines: [allreduce]\n", base);
  CHECK_EQ_INT(dry(text, 0), 2);
  CHECK_MSG(one_line(), "%s", out);
  CHECK_STR_CONTAINS(out, "delay_rank: 99, but the run has 2 processes (ranks 0..1");
  snprintf(text, sizeof text, "%sdelay_rank: 3\nengines: [ps]\n", base);
  CHECK_EQ_INT(dry(text, 0), 2);
  CHECK_STR_CONTAINS(out, "delay_rank: 3, but the run has 3 processes");
  const char *ok[] = {"2\nengines: [ps]", "-1\nengines: [allreduce]", "-2\nengines: [allreduce]"};
  for (int i = 0; i < 3; i++) {
    snprintf(text, sizeof text, "%sdelay_rank: %s\n", base, ok[i]);
    CHECK_MSG(dry(text, 0) == 0, "delay_rank: %s refused: %s", ok[i], out);
  }
}

/* The memory `sgdlab run -n` estimates for run 1, in GiB (its summary
 * line, printed with one decimal); -1 when there is none. */
static double estimate_gib(void) {
  const char *at = strstr(out, "memory: run 1 (");
  double v = -1;
  char unit[8] = "";
  if (!at || !(at = strstr(at, "needs the most, ~")) || sscanf(at + 17, "%lf %7s", &v, unit) != 2)
    return -1;
  return !strcmp(unit, "GiB") ? v : !strcmp(unit, "MiB") ? v / 1024 : -1;
}

/* A simulated run with compute: modeled folds the ranks' parameters,
 * gradients and dense buffers (core/msgbuf.h), but not what the engine
 * parses: ps's topk pairs (a worker's selected pairs, 8 bytes per element
 * of its largest shard: 2P/S) and a sparse server's requested indices
 * (P/S per worker) and reply (P/S), nor a sparse worker's pulls (P).
 * The estimate is the simulator's (256 MiB and 2 MiB per rank,
 * harness/run/simulate.c) plus what the ranks keep of their own:
 *  - topk, S = 1, N = 4, mlp 784-40000-10 (P = 127,200,040 B): the
 *    server's messages (2 + N) P and the staged copies of its N replies
 *    in flight (deferred sends, core/transport_mpi.c) N P, each worker's
 *    push and reply 2P and pairs 2P: 26P + 266 MiB = 3.35 GiB (without
 *    the pairs 2.40, without the staged replies 2.87);
 *  - sparse, S = 1, N = 16, softmax on 2^20 features (P = 41,943,080 B):
 *    the server's messages (2 + N) P, indices N P and reply P, each
 *    worker's push and reply 2P and pulls P: 83P + 290 MiB = 3.53 GiB
 *    (without the indices, reply and pulls 2.24).
 * Checked only where this build simulates (sgdlab-rank-smpi). */
TEST(simulated_modeled_counts_parsed_buffers) {
  char smpi[1024];
  const char *bin = getenv("SGDLAB_BIN_DIR");
  snprintf(smpi, sizeof smpi, "%s/harness/sgdlab-rank-smpi", bin ? bin : ".");
  if (access(smpi, X_OK) != 0) {
    fprintf(stderr, "parsed buffers not checked: no %s\n", smpi);
    return;
  }
  const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
  const double p_topk = 4.0 * (785.0 * 40000 + 40001.0 * 10);
  CHECK_EQ_INT(dry("workers: 4\ntransport: mpi\nsimulate: {compute: modeled}\n"
                   "workload: {dataset: synthetic, features: 784, model: mlp, hidden: [40000],\n"
                   "           batch: 1, max_steps: 2}\n"
                   "engines: [{engine: ps, compress: topk}]\n", 1), 0);
  double got = estimate_gib(), want = (26 * p_topk + 266 * mib) / gib;
  fprintf(stderr, "ps topk, modeled: estimate %.2f GiB, expected %.2f\n", got, want);
  CHECK_MSG(got > want - 0.06 && got < want + 0.06, "%s", out);
  const double p_sparse = 4.0 * (1048577.0 * 10);
  CHECK_EQ_INT(dry("workers: 16\ntransport: mpi\nsimulate: {compute: modeled}\n"
                   "workload: {dataset: synthetic-sparse, features: 1048576, model: softmax,\n"
                   "           batch: 1, max_steps: 2}\n"
                   "engines: [{engine: ps, sparse: true}]\n", 1), 0);
  got = estimate_gib(), want = (83 * p_sparse + 290 * mib) / gib;
  fprintf(stderr, "ps sparse, modeled: estimate %.2f GiB, expected %.2f\n", got, want);
  CHECK_MSG(got > want - 0.06 && got < want + 0.06, "%s", out);
}
