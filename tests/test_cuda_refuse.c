/* test_cuda_refuse.c - `device: cuda` where it cannot run is one line
 * and exit 2, before anything launches, never a crash.
 *
 * Here (no GPU, no driver) a CUDA build says "no CUDA device is available
 * (cudaGetDeviceCount: ...)"; a CPU-only build says it has no CUDA.  On a
 * machine with a CUDA device the refusal cannot be shown: the test says
 * so and skips.  Also: cuda-only algorithms without device cuda are
 * refused the same way, `model: cnn` gets the same device refusal as the
 * MLP (no model refusal), and `sgdlab engines` / `help config` name the
 * devices of this build.
 */
#include "test.h"

#include <sys/stat.h>
#include <unistd.h>

#include "cuda/sg_cuda.h"
#include "device.h"
#include "engine.h"
#include "opts.h"
#include "err.h"
#include "run_util.h"

/* Run `sgdlab run FILE --db DB` on text; its merged output into out. */
static int run_text(const char *text, char *out, size_t cap, char *db, size_t dbcap) {
  const char *d = ru_scratch("cudarefuse");
  char cfg[256];
  if (!d) return -1;
  snprintf(cfg, sizeof cfg, "%s/x.yaml", d);
  snprintf(db, dbcap, "%s/x.db", d);
  if (ru_write_file(cfg, text) < 0) return -1;
  char *argv[] = {"sgdlab", "run", "x.yaml", "--db", db, NULL};
  return ru_run(argv, 1, d, out, cap);
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

TEST(device_cuda_without_gpu_is_one_line_exit_2) {
  int count = 0;
  if (sg_device_build_has_cuda() && sg_cuda_probe(&count) == 0) {
    printf("SKIP: %d CUDA device(s) present: the refusal cannot be shown here\n", count);
    fprintf(stderr, "SKIP: %d CUDA device(s) present: the refusal cannot be shown here\n", count);
    return;
  }
  char out[4096], db[256];
  int code = run_text("name: x\nengines: [local]\nworkload:\n  dataset: synthetic\n"
                      "  device: cuda\n", out, sizeof out, db, sizeof db);
  fprintf(stderr, "sgdlab run (exit %d) said: %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_MSG(!strncmp(out, "x.yaml:5:3: device: cuda requested but ", 39), "%s", out);
  CHECK_STR_CONTAINS(out, sg_device_build_has_cuda()
                              ? "no CUDA device is available (cudaGetDeviceCount: "
                              : "this build of sgdlab has no CUDA");
  struct stat st;
  CHECK_MSG(stat(db, &st) != 0, "%s exists: something ran", db);
}

/* model: cnn runs on the device too: without a GPU it gets the device's
 * refusal, the same line as the MLP's, and no model refusal. */
TEST(device_cuda_cnn_gets_the_device_refusal_only) {
  int count = 0;
  if (sg_device_build_has_cuda() && sg_cuda_probe(&count) == 0) return; /* said above */
  char out[4096], db[256];
  int code = run_text("name: x\nengines: [local]\nworkload:\n  dataset: synthetic\n"
                      "  model: cnn\n  device: cuda\n", out, sizeof out, db, sizeof db);
  fprintf(stderr, "cnn (exit %d): %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_MSG(!strncmp(out, "x.yaml:6:3: device: cuda requested but ", 39), "%s", out);
  CHECK_MSG(!strstr(out, "cnn") && !strstr(out, "dense models"), "%s", out);
}

TEST(device_cuda_refused_in_a_sweep_and_an_engine_entry) {
  int count = 0;
  if (sg_device_build_has_cuda() && sg_cuda_probe(&count) == 0) return; /* said above */
  char out[4096], db[256];
  /* the key's own place, in an engine entry, after a cpu point of a sweep */
  int code = run_text("name: x\nworkload: {dataset: synthetic}\nengines:\n"
                      "  - {engine: local, device: [cpu, cuda]}\n", out, sizeof out, db, sizeof db);
  fprintf(stderr, "sweep (exit %d): %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_MSG(!strncmp(out, "x.yaml:4:21: device: cuda requested but ", 40), "%s", out);
}

TEST(cuda_algorithms_need_device_cuda) {
  char out[4096], db[256];
  int code = run_text("name: x\nworkload: {dataset: synthetic}\nworkers: 2\n"
                      "engines: [{engine: allreduce, algorithm: cuda-ring}]\n",
                      out, sizeof out, db, sizeof db);
  fprintf(stderr, "cuda-ring on cpu (exit %d): %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_STR_CONTAINS(out, "algorithm: cuda-ring sums device buffers; it needs device: cuda");
}

TEST(engines_and_help_name_the_devices) {
  char out[65536];
  char *eng[] = {"sgdlab", "engines", NULL};
  CHECK_EQ_INT(ru_run(eng, 1, NULL, out, sizeof out), 0);
  CHECK_MSG(!strncmp(out, "devices (workload key device): cpu", 34), "%.120s", out);
  CHECK_STR_CONTAINS(out, sg_device_build());
  char *help[] = {"sgdlab", "help", "config", NULL};
  CHECK_EQ_INT(ru_run(help, 1, NULL, out, sizeof out), 0);
  CHECK_STR_CONTAINS(out, "devices in this build (workload key device): ");
  CHECK_STR_CONTAINS(out, sg_device_build_has_cuda() ? "cpu, cuda (CUDA " : "cpu (this build has no CUDA)");
}

TEST(bench_step_device_cuda_without_gpu_is_one_line_exit_2) {
  int count = 0;
  if (sg_device_build_has_cuda() && sg_cuda_probe(&count) == 0) return; /* a device: runs */
  char out[4096];
  char *argv[] = {"sgdlab", "bench", "step", "--set", "device=cuda", NULL};
  int code = ru_run(argv, 1, NULL, out, sizeof out);
  fprintf(stderr, "bench step device=cuda (exit %d): %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_MSG(!strncmp(out, "sgdlab bench step: device: cuda requested but ", 46), "%s", out);
}

/* `sgdlab bench allreduce` on device buffers: without a GPU one line and
 * exit 2 before anything launches; the device-only implementations on
 * cpu buffers are refused the same way; cuda_ring without cuda-ring too. */
TEST(bench_allreduce_device_refusals) {
  char out[4096];
  const char *d = ru_scratch("cudabench");
  CHECK(d != NULL);
  if (!d) return;
  int count = 0;
  if (!(sg_device_build_has_cuda() && sg_cuda_probe(&count) == 0)) {
    char *dev[] = {"sgdlab", "bench", "allreduce", "--db", "b.db", "--set", "device=cuda",
                   "--impl", "cuda-ring-persistent,ring", NULL};
    int code = ru_run(dev, 1, d, out, sizeof out);
    fprintf(stderr, "bench on cuda without a GPU (exit %d): %s", code, out);
    CHECK_EQ_INT(code, 2);
    CHECK_EQ_INT(lines(out), 1);
    CHECK_STR_CONTAINS(out, "device: cuda requested but ");
  }
  char *cpu[] = {"sgdlab", "bench", "allreduce", "--db", "c.db", "--impl", "cuda-ring-persistent",
                 NULL};
  int code = ru_run(cpu, 1, d, out, sizeof out);
  fprintf(stderr, "cuda-ring-persistent on cpu buffers (exit %d): %s", code, out);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(out), 1);
  CHECK_STR_CONTAINS(out, "algorithm: cuda-ring sums device buffers; it needs device: cuda");
  char err[4096], dbp[256];
  code = run_text("name: x\nworkload: {dataset: synthetic}\nworkers: 2\n"
                  "engines: [{engine: allreduce, algorithm: ring, cuda_ring: persistent}]\n",
                  err, sizeof err, dbp, sizeof dbp);
  fprintf(stderr, "cuda_ring with ring (exit %d): %s", code, err);
  CHECK_EQ_INT(code, 2);
  CHECK_EQ_INT(lines(err), 1);
  CHECK_STR_CONTAINS(err, "cuda_ring");
}

/* What the allreduce engine does and does not take with device: cuda,
 * asked of its table's check (the harness calls it after the device
 * check, so on a machine without a GPU `sgdlab run` stops at that one).
 * fp16 on the wire goes through the host-staged ring and rhd; overlap
 * with backprop is taken for the host-staged ring, rhd and tree and for
 * cuda-ring (staged and persistent) and nccl; the sharded update for the
 * host-staged ring, cuda-ring staged and nccl.  Overlap on hier or
 * native, the sharded update with overlap, on rhd or on the persistent
 * cuda-ring, topk, and fp16 on a device algorithm are one line each. */
static const char *ar_check(const char *const *kv) {
  static char msg[512];
  sg_opts_t *o = sg_opts_new();
  if (!o) return "no memory";
  int rc = SG_OK;
  for (; kv[0] && rc == SG_OK; kv += 2) rc = sg_opts_set(o, kv[0], kv[1]);
  if (rc == SG_OK) rc = sg_engine_find("allreduce")->check_transport(o, "zmq");
  snprintf(msg, sizeof msg, "%s", rc < 0 ? sg_err_msg() : "");
  sg_err_clear();
  sg_opts_destroy(&o);
  return msg;
}

/* A case naming nccl in a build without NCCL stops at that first (one line). */
static const char *nccl_or(const char *const *kv, const char *want) {
  for (; kv[0]; kv += 2)
    if (!strcmp(kv[0], "algorithm") && !strcmp(kv[1], "nccl") && !sg_device_build_has_nccl())
      return "algorithm: nccl: this build has no NCCL";
  return want;
}

TEST(allreduce_device_options_taken_or_one_line) {
  static const char *const fp16_ring[] = {"device", "cuda", "algorithm", "ring", "compress", "fp16", NULL};
  static const char *const fp16_rhd[] = {"device", "cuda", "algorithm", "rhd", "compress", "fp16", NULL};
  CHECK_MSG(!*ar_check(fp16_ring), "fp16 host-staged ring refused: %s", ar_check(fp16_ring));
  CHECK_MSG(!*ar_check(fp16_rhd), "fp16 host-staged rhd refused: %s", ar_check(fp16_rhd));
  /* overlap with backprop: host-staged algorithms, a dense layer stack */
  static const char *const ov[][11] = {
      {"device", "cuda", "algorithm", "ring", "overlap", "true", NULL},
      {"device", "cuda", "algorithm", "rhd", "overlap", "true", "compress", "fp16", NULL},
      {"device", "cuda", "algorithm", "ring", "overlap", "true", "model", "softmax", NULL},
      {"device", "cuda", "algorithm", "tree", "overlap", "true", "model", "cnn", NULL},
      {"device", "cuda", "algorithm", "ring", "update", "sharded", NULL},
      {"device", "cuda", "algorithm", "cuda-ring", "overlap", "true", NULL},
      {"device", "cuda", "algorithm", "cuda-ring", "overlap", "true", "cuda_ring", "persistent",
       NULL},
      {"device", "cuda", "algorithm", "nccl", "overlap", "true", "model", "cnn", NULL},
      {"device", "cuda", "algorithm", "cuda-ring", "update", "sharded", NULL},
      {"device", "cuda", "algorithm", "nccl", "update", "sharded", NULL},
  };
  for (size_t i = 0; i < sizeof ov / sizeof *ov; i++) {
    const char *want = nccl_or(ov[i], ""), *m = ar_check(ov[i]);
    if (*want)
      CHECK_STR_CONTAINS(m, want);
    else
      CHECK_MSG(!*m, "overlap / sharded on the device refused: %s", m);
  }
  static const struct {
    const char *kv[11];
    const char *want;
  } no[] = {
      {{"device", "cuda", "algorithm", "cuda-ring", "compress", "fp16", NULL},
       "compress: fp16 is implemented for algorithms ring and rhd (host-staged)"},
      {{"device", "cuda", "algorithm", "nccl", "compress", "fp16", NULL},
       "compress: fp16 is implemented for algorithms ring and rhd (host-staged)"},
      {{"device", "cuda", "algorithm", "ring", "compress", "topk", NULL},
       "compress: topk needs device cpu"},
      {{"device", "cuda", "algorithm", "hier", "overlap", "true", NULL},
       "overlap: true with device cuda runs the host-staged ring, rhd and tree, cuda-ring and "
       "nccl; hier has no bucket hand-over"},
      {{"device", "cuda", "algorithm", "native", "overlap", "true", NULL},
       "overlap: true with device cuda runs the host-staged ring, rhd and tree, cuda-ring and "
       "nccl; native has no bucket hand-over"},
      {{"device", "cpu", "algorithm", "ring", "overlap", "true", "compress", "topk", NULL},
       "overlap: true needs compress none or fp16"},
      {{"device", "cuda", "algorithm", "cuda-ring", "update", "sharded", "cuda_ring",
        "persistent", NULL},
       "update: sharded with algorithm cuda-ring needs cuda_ring: staged"},
      {{"device", "cuda", "algorithm", "rhd", "update", "sharded", NULL},
       "update: sharded needs algorithm ring (device cuda: the host-staged ring, cuda-ring or "
       "nccl)"},
      {{"device", "cuda", "algorithm", "nccl", "update", "sharded", "overlap", "true", NULL},
       "update: sharded needs algorithm ring (device cuda: the host-staged ring, cuda-ring or "
       "nccl), compress none and overlap false"},
      {{"device", "cuda", "algorithm", "ring", "update", "sharded", "overlap", "true", NULL},
       "update: sharded needs algorithm ring (device cuda: the host-staged ring, cuda-ring or "
       "nccl), compress none and overlap false"},
  };
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    const char *m = ar_check(no[i].kv);
    fprintf(stderr, "  refused: %s\n", m);
    CHECK_STR_CONTAINS(m, nccl_or(no[i].kv, no[i].want));
    CHECK_MSG(!strchr(m, '\n'), "more than one line: %s", m);
  }
}

/* ps with device: cuda: the workers keep a device replica and push dense
 * gradients (float32 or fp16); the sparse path and topk are one line each
 * (the engine table's check, as above). */
static const char *ps_check(const char *const *kv) {
  static char msg[512];
  sg_opts_t *o = sg_opts_new();
  if (!o) return "no memory";
  int rc = SG_OK;
  for (; kv[0] && rc == SG_OK; kv += 2) rc = sg_opts_set(o, kv[0], kv[1]);
  if (rc == SG_OK) rc = sg_engine_find("ps")->check_transport(o, "zmq");
  snprintf(msg, sizeof msg, "%s", rc < 0 ? sg_err_msg() : "");
  sg_err_clear();
  sg_opts_destroy(&o);
  return msg;
}

TEST(ps_device_options_taken_or_one_line) {
  static const char *const fp16[] = {"device", "cuda", "compress", "fp16", NULL};
  static const char *const plain[] = {"device", "cuda", "servers", "2", NULL};
  static const char *const cpu_sparse[] = {"device", "cpu", "sparse", "true", NULL};
  CHECK_MSG(!*ps_check(fp16), "ps fp16 on the device refused: %s", ps_check(fp16));
  CHECK_MSG(!*ps_check(plain), "ps on the device refused: %s", ps_check(plain));
  CHECK_MSG(!*ps_check(cpu_sparse), "sparse ps on the cpu refused: %s", ps_check(cpu_sparse));
  static const struct {
    const char *kv[5];
    const char *want;
  } no[] = {
      {{"device", "cuda", "sparse", "true", NULL}, "sparse: true needs device cpu"},
      {{"device", "cuda", "compress", "topk", NULL}, "compress: topk needs device cpu"},
  };
  for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
    const char *m = ps_check(no[i].kv);
    fprintf(stderr, "  refused: %s\n", m);
    CHECK_STR_CONTAINS(m, no[i].want);
    CHECK_MSG(!strchr(m, '\n'), "more than one line: %s", m);
  }
}
