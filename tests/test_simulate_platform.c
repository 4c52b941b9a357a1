/* test_simulate_platform.c - the simulated platform (harness/run/simulate.h)
 * and the records files a simulation writes (core/records_server.h).
 *
 *  - the platform builder against hand-written files in tests/data/sim:
 *    flat, two-level (racks, oversubscription), fat-tree and torus, with
 *    the hostfile (rank r on host r mod hosts);
 *  - what SMPI cannot build is refused with one line naming the key: a
 *    torus or fat-tree whose hosts are not the platform's, racks or an
 *    oversubscription that do not divide, a bad latency or rate, an
 *    eager size that is not bytes or simgrid;
 *  - simulate.eager: bytes or simgrid, by default the emulated cluster's
 *    Open MPI eager limit (launch.h), the settings table's default too;
 *  - the records files: a record naming another rank than its file's is
 *    dropped, a length out of bounds stops that file (one drop) without
 *    stopping the others, and a message cut short waits for the rest;
 *  - the step-calibration cache: lines appended (sg_sim_cache_put) into
 *    the directory it makes, each through the same kept descriptors.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "launch.h"
#include "opts.h"
#include "records.h"
#include "records_server.h"
#include "run_util.h"
#include "settings.h"
#include "simulate.h"
#include "test.h"

/* The platform for these keys ("k=v|k=v") and nprocs, into a string. */
static char *platform_of(const char *kv, int nprocs, double speed, int *rc) {
  sg_opts_t *o = sg_opts_new();
  char buf[512];
  snprintf(buf, sizeof buf, "%s", kv);
  for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
    char *eq = strchr(t, '=');
    *eq = '\0';
    sg_opts_set(o, t, eq + 1);
  }
  sg_sim_cfg_t c;
  char *text = NULL;
  size_t len = 0;
  *rc = sg_sim_cfg_read(o, nprocs, &c);
  sg_opts_destroy(&o);
  if (*rc < 0) return NULL;
  c.host_speed = speed;
  FILE *f = open_memstream(&text, &len);
  sg_sim_platform_write(&c, f);
  fclose(f);
  return text;
}

static void expect_file(const char *kv, int nprocs, double speed, const char *name) {
  int rc;
  char path[512];
  snprintf(path, sizeof path, "%s/tests/data/sim/%s", getenv("SGDLAB_SOURCE_DIR"), name);
  char *got = platform_of(kv, nprocs, speed, &rc), *want = ru_slurp(path, 1 << 16);
  CHECK_MSG(got && rc == 0, "%s: %s", kv, sg_err_msg());
  CHECK_MSG(want && want[0], "%s: cannot read", path);
  CHECK_MSG(!strcmp(got, want), "%s:\n got: %s\nwant: %s", name, got, want);
  free(got);
  free(want);
}

TEST(platforms_match_the_hand_written_files) {
  CHECK(getenv("SGDLAB_SOURCE_DIR"));
  expect_file("simulate.link=10gbit|simulate.latency=1us", 4, 1e10, "flat.xml");
  expect_file("simulate.topology=two-level|simulate.racks=2|simulate.oversubscription=4|"
              "simulate.link=1gbit|simulate.latency=50us", 16, 2e9, "two-level.xml");
  expect_file("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1,2;1,2|simulate.link=56gbit",
              16, 1e10, "fat-tree.xml");
  expect_file("simulate.topology=torus|simulate.torus=4,4,4|simulate.hosts=64|"
              "simulate.latency=250ns", 8, 1e10, "torus.xml");
}

TEST(hostfile_places_rank_r_on_host_r_mod_hosts) {
  sg_sim_cfg_t c = {.hosts = 3};
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CHECK_EQ_INT(sg_sim_hostfile_write(&c, 5, f), 0);
  fclose(f);
  CHECK_MSG(!strcmp(text, "host0\nhost1\nhost2\nhost0\nhost1\n"), "got %s", text);
  free(text);
}

static void expect_refusal(const char *kv, int nprocs, const char *key) {
  int rc;
  char *got = platform_of(kv, nprocs, 1e10, &rc);
  free(got);
  CHECK_MSG(rc == SG_ECONFIG, "%s: accepted (rc %d)", kv, rc);
  CHECK_MSG(!strncmp(sg_err_msg(), key, strlen(key)), "%s: message '%s' does not start with %s",
            kv, sg_err_msg(), key);
  CHECK_MSG(!strchr(sg_err_msg(), '\n'), "more than one line: %s", sg_err_msg());
  fprintf(stderr, "refused as expected: %s\n", sg_err_msg());
}

TEST(what_smpi_cannot_build_is_refused_naming_the_key) {
  expect_refusal("simulate.topology=torus|simulate.torus=4,4", 8, "simulate.torus");
  expect_refusal("simulate.topology=torus|simulate.torus=4,x", 16, "simulate.torus");
  expect_refusal("simulate.topology=torus", 16, "simulate.torus");
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1,2", 16, "simulate.fat_tree");
  /* UP and PARALLEL multiply the switches and links: 4 M switches at
   * level 1 were admitted and grew the simulator until it aborted */
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1048576,1048576;1048576,1048576",
                 16, "simulate.fat_tree");
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1,2;65536,1", 16,
                 "simulate.fat_tree");
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,2;1,2;1,2", 16,
                 "simulate.fat_tree");
  /* text after the fourth part would reach the platform file: markup, or
   * a value longer than the platform's field */
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1,2;1,2;\"/><zone id=\"x\" "
                 "routing=\"Full\"/><!--", 16, "simulate.fat_tree");
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=2;4,4;1,2;1,2;", 16,
                 "simulate.fat_tree");
  expect_refusal("simulate.topology=fat-tree|simulate.fat_tree=8;1,1,1,1,1,1,4,4;"
                 "1000001,1000001,1000001,1000001,1000001,1000001,1000001,1000001;"
                 "1000001,1000001,1000001,1000001,1000001,1000001,1000001,1000001", 16,
                 "simulate.fat_tree");
  expect_refusal("simulate.topology=two-level|simulate.racks=3", 16, "simulate.racks");
  expect_refusal("simulate.topology=two-level|simulate.racks=2|simulate.oversubscription=3", 16,
                 "simulate.oversubscription");
  expect_refusal("simulate.topology=ring", 4, "simulate.topology");
  expect_refusal("simulate.latency=5", 4, "simulate.latency");
  expect_refusal("simulate.latency=-1us", 4, "simulate.latency");
  expect_refusal("simulate.link=fast", 4, "simulate.link");
  expect_refusal("simulate.eager=lots", 4, "simulate.eager");
  expect_refusal("simulate.eager=-1", 4, "simulate.eager");
  expect_refusal("simulate.eager=2G", 4, "simulate.eager");
  expect_refusal("simulate.eager=64KB", 4, "simulate.eager");
}

/* simulate.eager: bytes (K/M/G powers of two) or simgrid (-1: SimGrid's
 * own thresholds); unset, the emulated cluster's Open MPI eager limit,
 * which is also the key's default in the settings table. */
TEST(eager_reads_bytes_or_simgrid) {
  static const struct {
    const char *v;
    int want;
  } cases[] = {{"simgrid", -1}, {"0", 0}, {"64K", 65536}, {"1M", 1 << 20}, {"1114112", 1114112},
               {"1G", 1 << 30}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    sg_opts_t *o = sg_opts_new();
    sg_opts_set(o, "simulate.eager", cases[i].v);
    sg_sim_cfg_t c;
    int rc = sg_sim_cfg_read(o, 4, &c);
    sg_opts_destroy(&o);
    CHECK_MSG(rc == SG_OK && c.eager == cases[i].want, "eager '%s': rc %d, %d (want %d)",
              cases[i].v, rc, c.eager, cases[i].want);
  }
  sg_opts_t *o = sg_opts_new();
  sg_sim_cfg_t c;
  CHECK_OK(sg_sim_cfg_read(o, 4, &c));
  sg_opts_destroy(&o);
  CHECK_EQ_INT(c.eager, SG_CLUSTER_EAGER_BYTES);
  const sg_setting_t *s = sg_setting_find(sg_settings, "simulate.eager");
  CHECK(s && !strcmp(s->def, SG_CLUSTER_EAGER_STR(SG_CLUSTER_EAGER_BYTES)));
}

/* One framed record (records.c's file form) into fd. */
static void put(int fd, uint32_t type, int rank, const void *p, uint32_t n, uint32_t frame) {
  unsigned char buf[512];
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = type, .rank = rank, .len = n};
  memcpy(buf, &frame, 4);
  memcpy(buf + 4, &h, sizeof h);
  memcpy(buf + 4 + sizeof h, p, n);
  if (write(fd, buf, 4 + sizeof h + n) < 0) perror("write");
}

static int drain(sg_rec_server_t *s, int *per_rank) {
  sg_rec_in_t in;
  int n = 0;
  while (sg_rec_server_recv(s, &in) == 1) per_rank[in.h.rank]++, n++;
  return n;
}

TEST(records_files_drop_what_is_not_their_ranks) {
  const char *dir = ru_scratch("simrec");
  CHECK(dir);
  char ep[256], path[300];
  snprintf(ep, sizeof ep, "file://%s/rec", dir);
  sg_rec_server_t *s = NULL;
  CHECK_EQ_INT(sg_rec_server_open(&s, ep, 3, NULL), 0);
  int fd[3];
  for (int r = 0; r < 3; r++) {
    snprintf(path, sizeof path, "%s/rec.%d", dir, r);
    fd[r] = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd[r] >= 0);
  }
  sg_eval_rec_t e = {.step = 1};
  uint32_t whole = (uint32_t)(sizeof(sg_rec_header_t) + sizeof e);
  put(fd[0], SG_REC_EVAL, 0, &e, sizeof e, whole);  /* fine */
  put(fd[1], SG_REC_EVAL, 2, &e, sizeof e, whole);  /* names rank 2: dropped */
  put(fd[1], SG_REC_EVAL, 1, &e, sizeof e, whole);  /* fine */
  put(fd[2], SG_REC_EVAL, 2, &e, sizeof e, 1u << 30); /* length out of bounds */
  put(fd[2], SG_REC_EVAL, 2, &e, sizeof e, whole);  /* never reached */
  int per[3] = {0};
  CHECK_EQ_INT(drain(s, per), 2);
  CHECK_EQ_INT(per[0], 1);
  CHECK_EQ_INT(per[1], 1);
  CHECK_EQ_INT(per[2], 0);
  CHECK_EQ_INT((int)sg_rec_server_dropped(s), 2);
  /* half a message: nothing yet; the rest: the record */
  unsigned char buf[512];
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = SG_REC_EVAL, .rank = 0, .len = sizeof e};
  memcpy(buf, &whole, 4);
  memcpy(buf + 4, &h, sizeof h);
  memcpy(buf + 4 + sizeof h, &e, sizeof e);
  CHECK(write(fd[0], buf, 10) == 10);
  CHECK_EQ_INT(drain(s, per), 0);
  CHECK(write(fd[0], buf + 10, 4 + whole - 10) == (ssize_t)(4 + whole - 10));
  CHECK_EQ_INT(drain(s, per), 1);
  for (int r = 0; r < 3; r++) close(fd[r]);
  sg_rec_server_close(&s);
}


/* The descriptors this process holds. */
static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* sg_sim_cache_put makes the cache's directory (first line) and appends
 * to its file: three lines.  The directory and its parent are opened by
 * sg_out_dir_open, which keeps their descriptors for the process's life
 * and hands the same ones out again (outfile.h): the first line opens
 * them, the next two open nothing more and find them still open (closed
 * by hand after each line, the second line's append failed: "Bad file
 * descriptor", one line written). */
TEST(calibration_cache_put_appends_through_the_kept_descriptors) {
  const char *dir = ru_scratch("simcache");
  CHECK(dir);
  const char *old = getenv("XDG_CACHE_HOME");
  char *saved = old ? strdup(old) : NULL, path[4200], file[4200];
  setenv("XDG_CACHE_HOME", dir, 1);
  sg_sim_cache_path(path, sizeof path);
  snprintf(file, sizeof file, "%s/sgdlab/simulate-calibration", dir);
  sg_sim_cache_put(path, "k", 0.001, 1e9, 0.5, 2);
  int before = open_fds();
  for (int i = 0; i < 2; i++) sg_sim_cache_put(path, "k", 0.001, 1e9, 0.5, 2);
  int after = open_fds();
  if (saved) setenv("XDG_CACHE_HOME", saved, 1);
  else unsetenv("XDG_CACHE_HOME");
  free(saved);
  CHECK_MSG(!strcmp(path, file), "cache path %s, expected %s", path, file);
  char *text = ru_slurp(file, 4096);
  CHECK_MSG(text && !strcmp(text, "k\t0.001\t1e+09\t0.50\t2\nk\t0.001\t1e+09\t0.50\t2\n"
                                  "k\t0.001\t1e+09\t0.50\t2\n"),
            "the cache file holds: %s", text ? text : "(none)");
  free(text);
  CHECK_MSG(before > 0 && after == before, "%d descriptors after one line, %d after three", before,
            after);
}
