/* test_attack.c - a run's sockets against an outsider, as real processes
 * on loopback.
 *
 * A real `sgdlab run` (ps sync, 1 server + 2 workers, zmq over tcp, and
 * `hosts:` so that the records stream and the rendezvous are tcp too) is
 * attacked while it trains, by this test process acting as another local
 * user or a host on the network.  It finds every port the run's processes
 * listen on (/proc/net/tcp, matched to their socket inodes) and, bounded
 * in count:
 *   1. forges records without keys: a HELLO carrying the pid of an
 *      unrelated process (the victim), an evaluation at step 99999 with
 *      accuracy 0.9999, and a failing DONE, to every port;
 *   2. registers at every port as "rank k-1 of k" for k = 2..8 (the
 *      rendezvous hijack);
 *   3. sends raw garbage and a frame announcing 1.5 GB;
 *   4. completes a CURVE handshake with a key of its own, knowing the
 *      servers' public keys (as if they had leaked);
 *   5. with a stolen key of rank 1 (the insider case: authenticated, but
 *      lying about who it is): a record that claims to be rank 0 and a
 *      data message whose header claims source 2.
 *   6. opens hundreds of idle connections to every port, with the run
 *      started under a soft descriptor limit of 256 (1024 is usual):
 *      each costs a descriptor before any handshake can refuse it.
 * With CURVE (the default) the run must end ok with nothing forged in the
 * database, the victim alive, no socket on the wildcard address, the
 * harness's memory bounded, and the refusals counted in run_info.  The
 * same attack with `zmq_auth: none` must plant its forged evaluation: the
 * proof that the attack is real and that this test could fail.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "auth.h"
#include "err.h"
#include "records.h"
#include "run_util.h"
#include "test.h"

enum { NPROCS = 3, MAXPORTS = 64 };

typedef struct port {
  int port;
  int owner; /* rank, SG_AUTH_HARNESS, or SG_AUTH_UNKNOWN */
  int wildcard;
} port_t;

/* Socket inodes held by pid ("socket:[N]" links in /proc/PID/fd). */
static int socket_inodes(pid_t pid, unsigned long *ino, int max) {
  char path[64], link[64];
  snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
  DIR *d = opendir(path);
  int n = 0;
  struct dirent *e;
  while (d && n < max && (e = readdir(d))) {
    char fd[320];
    snprintf(fd, sizeof fd, "%s/%s", path, e->d_name);
    ssize_t l = readlink(fd, link, sizeof link - 1);
    if (l <= 0) continue;
    link[l] = '\0';
    if (sscanf(link, "socket:[%lu]", &ino[n]) == 1) n++;
  }
  if (d) closedir(d);
  return n;
}

/* Listening tcp ports of pid, appended to ports[] as owned by `owner`. */
static int listening_ports(pid_t pid, int owner, port_t *ports, int n) {
  unsigned long ino[512];
  int ni = socket_inodes(pid, ino, 512);
  FILE *f = fopen("/proc/net/tcp", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned addr, port, st;
    unsigned long inode;
    if (sscanf(line, " %*d: %x:%x %*x:%*x %x %*s %*s %*s %*s %*s %lu", &addr, &port, &st,
               &inode) != 4 || st != 0x0A)
      continue;
    for (int i = 0; i < ni && n < MAXPORTS; i++)
      if (ino[i] == inode) ports[n++] = (port_t){(int)port, owner, addr == 0};
  }
  if (f) fclose(f);
  return n;
}

/* ---- the attacks --------------------------------------------------------- */

static void *g_zctx;

static void *attacker_socket(int type, int port, const sg_keys_t *k, int as, int server) {
  void *s = zmq_socket(g_zctx, type);
  int zero = 0, tmo = 200;
  zmq_setsockopt(s, ZMQ_LINGER, &tmo, sizeof tmo);
  zmq_setsockopt(s, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
  zmq_setsockopt(s, ZMQ_RCVTIMEO, &zero, sizeof zero);
  if (k && server != SG_AUTH_UNKNOWN) sg_curve_client(s, k, as, server);
  char ep[64];
  snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", port);
  zmq_connect(s, ep);
  return s;
}

static size_t record(unsigned char *buf, uint32_t type, int rank, const void *p, size_t n) {
  sg_rec_header_t h = {.magic = SG_REC_MAGIC, .type = type, .rank = rank, .len = (uint32_t)n};
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, p, n);
  return sizeof h + n;
}

/* 1: forged records (HELLO with the victim's pid, EVAL, failing DONE). */
static void forge_records(void *s, pid_t victim, int rank) {
  unsigned char buf[512];
  sg_rec_hello_t hello = {.role = "worker", .host = "evil", .pid = (int32_t)victim};
  sg_eval_rec_t ev = {.step = 99999, .test_acc = 0.9999, .samples = 1};
  unsigned char done[40] = {0};
  sg_rec_done_t d = {.status = 1, .blamed = -1, .reason = SG_BLAME_SELF};
  memcpy(done, &d, sizeof d);
  memcpy(done + sizeof d, "forged failure", 15);
  zmq_send(s, buf, record(buf, SG_REC_HELLO, rank, &hello, sizeof hello), ZMQ_DONTWAIT);
  zmq_send(s, buf, record(buf, SG_REC_EVAL, rank, &ev, sizeof ev), ZMQ_DONTWAIT);
  zmq_send(s, buf, record(buf, SG_REC_DONE, rank, done, sizeof d + 15), ZMQ_DONTWAIT);
}

/* 6: a compromised rank's own step batch (its key, its rank): steps far
 * past the run's end, a NaN and a negative start, numbers going back.
 * The harness's clock bounds them (rows.c): time.train_s must stay
 * inside wall_s, where it used to take the rank's word (~1e9 s). */
static void forge_steps(void *s, int rank) {
  sg_step_rec_t st[4] = {{.step = 100000, .t_start = 1e9, .compute_s = 1e9, .loss = 1},
                         {.step = 3, .t_start = NAN, .compute_s = INFINITY, .loss = 1},
                         {.step = 2, .t_start = -5, .comm_s = 1e12, .loss = 1},
                         {.step = 1, .t_start = 1e300, .wait_s = NAN, .loss = 1}};
  unsigned char buf[64 + sizeof st];
  zmq_send(s, buf, record(buf, SG_REC_STEPS, rank, st, sizeof st), ZMQ_DONTWAIT);
}

/* 3: raw bytes: garbage, then a ZMTP greeting and a 1.5 GB frame header. */
static void raw_bytes(int port) {
  for (int round = 0; round < 2; round++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0) return;
    struct timeval tv = {0, 200000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
      unsigned char b[4096];
      if (round == 0) {
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(i * 131 + 7);
        (void)!send(fd, b, sizeof b, MSG_NOSIGNAL);
      } else { /* greeting: signature, version 3.0, mechanism NULL */
        unsigned char g[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
        unsigned char big[9] = {0x02, 0, 0, 0, 0, 0x59, 0x68, 0x2f, 0x00}; /* 1.5e9 */
        (void)!send(fd, g, sizeof g, MSG_NOSIGNAL);
        (void)!send(fd, big, sizeof big, MSG_NOSIGNAL);
        (void)!send(fd, b, sizeof b, MSG_NOSIGNAL);
      }
    }
    close(fd);
  }
}

/* The run's key file: the spec path is the rank's last argument. */
static sg_keys_t *steal_keys(pid_t rank_pid) {
  char path[64], cmd[4096];
  snprintf(path, sizeof path, "/proc/%d/cmdline", (int)rank_pid);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
  if (f) fclose(f);
  cmd[n] = '\0';
  const char *spec = cmd + strlen(cmd) + 1; /* argv[1] */
  char keys[4200];
  snprintf(keys, sizeof keys, "%.*s/keys", (int)(strrchr(spec, '/') - spec), spec);
  sg_keys_t *k = NULL;
  return sg_keys_load(&k, keys, NPROCS) == 0 ? k : NULL;
}

/* Malformed data messages to a rank: a lone 100-byte frame, a header
 * naming rank 99, a payload shorter than announced, a third frame. */
static void bad_frames(int port, int owner) {
  void *s = attacker_socket(ZMQ_PUSH, port, NULL, 0, SG_AUTH_UNKNOWN);
  char junk[100] = {0};
  int32_t h99[6] = {99, 5, 4, 0, 0, 0}, hshort[6] = {(owner + 1) % NPROCS, 5, 64, 0, 0, 0};
  int32_t hok[6] = {(owner + 1) % NPROCS, 5, 4, 0, 0, 0};
  zmq_send(s, junk, sizeof junk, 0);
  zmq_send(s, h99, sizeof h99, ZMQ_SNDMORE);
  zmq_send(s, junk, 4, 0);
  zmq_send(s, hshort, sizeof hshort, ZMQ_SNDMORE);
  zmq_send(s, junk, 4, 0);
  zmq_send(s, hok, sizeof hok, ZMQ_SNDMORE);
  zmq_send(s, junk, 4, ZMQ_SNDMORE);
  zmq_send(s, junk, 4, 0);
  /* the ipc memory-read path's frames over tcp: a 1 MiB descriptor (flag
   * 2) and an acknowledgement (flag 4, the last internal tag), each with a
   * 16-byte {address, id}; tcp ranks know no peer's pid and must drop both */
  int32_t hcma[6] = {(owner + 1) % NPROCS, 5, 1 << 20, 0, 2, 0};
  int32_t hack[6] = {(owner + 1) % NPROCS, 32767 + 64, 16, 0, 4, 0};
  uint64_t desc[2] = {(uint64_t)(uintptr_t)junk, 1};
  zmq_send(s, hcma, sizeof hcma, ZMQ_SNDMORE);
  zmq_send(s, desc, sizeof desc, 0);
  zmq_send(s, hack, sizeof hack, ZMQ_SNDMORE);
  zmq_send(s, desc, sizeof desc, 0);
  zmq_close(s);
  raw_bytes(port);
}

/* A 256 MiB message to each of the harness's own sockets (records,
 * rendezvous): their ZMQ_MAXMSGSIZE must drop it unbuffered. */
static void huge_messages(const port_t *ports, int np) {
  size_t n = (size_t)256 << 20;
  char *big = calloc(1, n);
  for (int i = 0; big && i < np; i++) {
    if (ports[i].owner != SG_AUTH_HARNESS) continue;
    void *s = attacker_socket(ZMQ_DEALER, ports[i].port, NULL, 0, SG_AUTH_UNKNOWN);
    int linger = 2000;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    zmq_send(s, big, n, ZMQ_DONTWAIT);
    zmq_close(s);
  }
  free(big);
}

static void attack(const port_t *ports, int np, pid_t victim, const sg_keys_t *stolen,
                   int data_only) {
  for (int i = 0; data_only && i < np; i++)
    if (ports[i].owner >= 0) bad_frames(ports[i].port, ports[i].owner);
  if (!stolen && !data_only) huge_messages(ports, np);
  for (int i = 0; !data_only && i < np; i++) {
    void *s = attacker_socket(ZMQ_PUSH, ports[i].port, NULL, 0, SG_AUTH_UNKNOWN);
    forge_records(s, victim, 0);
    zmq_close(s);
    void *d = attacker_socket(ZMQ_DEALER, ports[i].port, NULL, 0, SG_AUTH_UNKNOWN);
    for (int k = 2; k <= 8; k++) {
      char reg[128];
      snprintf(reg, sizeof reg, "SGRDV1 %d %d evil tcp://127.0.0.1:9", k - 1, k);
      zmq_send(d, reg, strlen(reg), ZMQ_DONTWAIT);
    }
    zmq_close(d);
    raw_bytes(ports[i].port);
  }
  if (!stolen || data_only) return;
  sg_keys_t *mine = NULL; /* 4: a key of our own, the servers' public keys known */
  if (sg_keys_new(&mine, NPROCS) == 0)
    for (int i = 0; i < np; i++) {
      void *s = zmq_socket(g_zctx, ZMQ_PUSH);
      int tmo = 200;
      zmq_setsockopt(s, ZMQ_LINGER, &tmo, sizeof tmo);
      zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, sg_keys_public(stolen, ports[i].owner), 40);
      zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, sg_keys_public(mine, 0), 40);
      zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sg_keys_secret(mine, 0), 40);
      char ep[64];
      snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", ports[i].port);
      zmq_connect(s, ep);
      forge_records(s, victim, 0);
      zmq_close(s);
    }
  sg_keys_destroy(&mine);
  for (int i = 0; i < np; i++) { /* 5: rank 1's key, claiming to be others */
    if (ports[i].owner == 1) continue;
    void *s = attacker_socket(ZMQ_PUSH, ports[i].port, stolen, 1, ports[i].owner);
    if (ports[i].owner == SG_AUTH_HARNESS) {
      forge_records(s, victim, 0);
      forge_steps(s, 1);
      /* and, on the same ports, register as rank 2 (the hijack, keyed) */
      void *d = attacker_socket(ZMQ_DEALER, ports[i].port, stolen, 1, SG_AUTH_HARNESS);
      const char reg[] = "SGRDV1 2 3 evil tcp://127.0.0.1:9";
      zmq_send(d, reg, sizeof reg - 1, ZMQ_DONTWAIT);
      zmq_close(d);
    } else {
      int32_t hdr[6] = {2, 5, 4, 0, 0, 0}; /* src 2, tag 5, len 4 */
      float nan_ = NAN;
      zmq_send(s, hdr, sizeof hdr, ZMQ_SNDMORE);
      zmq_send(s, &nan_, sizeof nan_, 0);
    }
    zmq_close(s);
  }
}

/* ---- the case ------------------------------------------------------------ */

static long vm_hwm_kb(pid_t pid) {
  char path[64], line[256];
  long kb = -1;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %ld", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

typedef struct outcome {
  int exit_code, victim_alive, wildcard, nports;
  long harness_kb;
  long long forged_evals, ranks_rows, records_dropped, transport_dropped, zap_refused;
  long long rdv_refused;
  double train_s, wall_s; /* run_info time.train_s, runs.wall_s (-1: none) */
} outcome_t;

static void attack_case_steps(const char *auth, int data_only, long steps, outcome_t *o) {
  memset(o, 0, sizeof *o);
  o->exit_code = -1;
  const char *dir = ru_scratch("attack");
  char cfg[512], db[512], extra[256];
  if (!dir) return;
  snprintf(cfg, sizeof cfg, "%s/attack.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  snprintf(extra, sizeof extra,
           "zmq_scheme: tcp\nzmq_auth: %s\nhosts: \"localhost:%d\"\ndelay_rank: 1\n"
           "delay_ms: 4\ndeadline: 10\n", auth, NPROCS);
  if (ru_write_train_config(cfg, "attack", "{engine: ps, mode: sync, servers: 1}", extra, "", 2,
                            steps) < 0)
    return;
  pid_t victim = fork();
  if (victim == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
    pause();
    _exit(0);
  }
  pid_t h = ru_spawn_sgdlab_run(cfg, db);
  g_zctx = zmq_ctx_new();
  if (h > 0 && ru_db_wait(db, "SELECT count(*) FROM steps", 20, 60, h, NULL) == 0) {
    port_t ports[MAXPORTS];
    int np = listening_ports(h, SG_AUTH_HARNESS, ports, 0);
    for (int r = 0; r < NPROCS; r++) np = listening_ports(ru_find_rank(h, r), r, ports, np);
    for (int i = 0; i < np; i++) o->wildcard += ports[i].wildcard;
    o->nports = np;
    sg_keys_t *stolen = strcmp(auth, "none") ? steal_keys(ru_find_rank(h, 0)) : NULL;
    attack(ports, np, victim, stolen, data_only);
    sg_keys_destroy(&stolen);
    zmq_ctx_term(g_zctx); /* every attack message has left (or lingered out) */
    g_zctx = NULL;
    o->harness_kb = vm_hwm_kb(h);
  }
  if (g_zctx) zmq_ctx_term(g_zctx);
  o->exit_code = h > 0 ? ru_wait_exit_code(h, 120) : -1;
  o->victim_alive = kill(victim, 0) == 0 && waitpid(victim, NULL, WNOHANG) == 0;
  kill(victim, SIGKILL);
  waitpid(victim, NULL, 0);
  o->forged_evals = ru_db_int(db, "SELECT count(*) FROM evals WHERE step >= 99999");
  o->ranks_rows = ru_db_int(db, "SELECT count(*) FROM ranks");
  o->records_dropped = ru_db_int(db, "SELECT coalesce(sum(value), 0) FROM run_info "
                                     "WHERE key = 'records.dropped'");
  o->transport_dropped = ru_db_int(db, "SELECT coalesce(sum(value), 0) FROM run_info "
                                       "WHERE key LIKE 'transport.dropped.%'");
  o->rdv_refused = ru_db_int(db, "SELECT coalesce(sum(value), 0) FROM run_info "
                                 "WHERE key = 'rendezvous.refused'");
  char v[64];
  ru_db_text_into(db, "SELECT value FROM run_info WHERE key = 'time.train_s'", v, sizeof v);
  o->train_s = v[0] ? atof(v) : -1;
  o->wall_s = (double)ru_db_int(db, "SELECT coalesce(wall_s * 1000, -1000) FROM runs") / 1000;
  o->zap_refused = ru_db_int(db, "SELECT coalesce(sum(value), 0) FROM run_info "
                                 "WHERE key = 'auth.refused'");
}

/* The attack must end while the run still goes: the forged records and
 * the huge messages need a live harness to land in, and its peak memory
 * is read after them.  600 steps (rank 1 delayed 4 ms a step: 2.4 s at
 * least) were enough on one machine and not on a faster one (the run had
 * ended, harness peak -1 kB, 0 forged evals); a run that ended first is
 * tried again four times longer, twice at most. */
static void attack_case(const char *auth, int data_only, outcome_t *o) {
  long steps = 600;
  for (int tries = 0; tries < 3; tries++, steps *= 4) {
    attack_case_steps(auth, data_only, steps, o);
    if (o->harness_kb > 0) return;
    fprintf(stderr, "%s: the run (%ld steps) ended before the attack did\n", auth, steps);
  }
}

TEST(curve_keeps_outsiders_and_liars_out) {
  outcome_t o;
  attack_case("curve", 0, &o);
  fprintf(stderr, "curve: exit %d, %d ports (%d wildcard), victim %s, harness peak %ld kB, "
          "forged evals %lld, ranks rows %lld, records dropped %lld, data dropped %lld, "
          "foreign keys refused by the harness %lld, registrations refused %lld\n",
          o.exit_code, o.nports, o.wildcard, o.victim_alive ? "alive" : "KILLED", o.harness_kb,
          o.forged_evals, o.ranks_rows, o.records_dropped, o.transport_dropped, o.zap_refused, o.rdv_refused);
  CHECK_MSG(o.nports >= NPROCS + 1, "found %d listening ports", o.nports);
  CHECK_EQ_INT(o.wildcard, 0);
  CHECK_EQ_INT(o.exit_code, 0);
  CHECK(o.victim_alive);
  CHECK_EQ_INT(o.forged_evals, 0);
  CHECK_EQ_INT(o.ranks_rows, NPROCS);
  CHECK_MSG(o.harness_kb > 0 && o.harness_kb < 300 * 1024, "harness peak %ld kB", o.harness_kb);
  CHECK_MSG(o.records_dropped >= 1, "the lying rank-1 records were not counted");
  CHECK_MSG(o.transport_dropped >= 1, "the spoofed data header was not counted");
  CHECK_MSG(o.zap_refused >= 1, "the foreign key was not refused by the allow-list");
  CHECK_MSG(o.rdv_refused >= 1, "rank 1's key registered as rank 2 unnoticed");
  fprintf(stderr, "curve: time.train_s %.3f, wall_s %.3f\n", o.train_s, o.wall_s);
  CHECK_MSG(o.train_s > 0 && o.train_s < o.wall_s, "rank 1's forged steps: time.train_s %.3f, "
            "wall_s %.3f", o.train_s, o.wall_s);
}

TEST(without_curve_the_same_attack_plants_records) {
  outcome_t o;
  attack_case("none", 0, &o);
  fprintf(stderr, "none: exit %d, %d ports, victim %s, forged evals %lld, ranks rows %lld, "
          "harness peak %ld kB\n", o.exit_code, o.nports, o.victim_alive ? "alive" : "KILLED",
          o.forged_evals, o.ranks_rows, o.harness_kb);
  CHECK_MSG(o.forged_evals >= 1, "the attack is not effective: this test could not fail");
  /* without CURVE the 256 MiB messages reach the sockets: the size caps
   * alone must keep them out of the harness's memory */
  CHECK_MSG(o.harness_kb > 0 && o.harness_kb < 100 * 1024, "harness peak %ld kB", o.harness_kb);
}

/* Without CURVE anyone on the host reaches the ranks' data sockets: what
 * they send must be dropped and counted, never end the run (it used to:
 * "malformed message header" was fatal). */
TEST(garbage_on_the_data_path_is_dropped_not_fatal) {
  outcome_t o;
  attack_case("none", 1, &o);
  fprintf(stderr, "data path: exit %d, %d ports, data dropped %lld\n", o.exit_code, o.nports,
          o.transport_dropped);
  CHECK_EQ_INT(o.exit_code, 0);
  CHECK_MSG(o.transport_dropped >= 5 * NPROCS, "dropped %lld", o.transport_dropped);
}

/* 6: `n` idle connections to port (non-blocking connects: a full accept
 * queue must not stall the attacker); their descriptors into fds. */
static int idle_connections(int port, int n, int *fds) {
  int k = 0;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < n; i++) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) break;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 || errno == EINPROGRESS) fds[k++] = fd;
    else close(fd);
  }
  return k;
}

/* Every process of the run accepts each connection and holds a descriptor
 * for it until the handshake times out; at the soft limit the run used to
 * fail ("rank 0 (server) died without reporting", or no record for 1.5 x
 * the deadline).  The run raises its soft limit to the hard one. */
TEST(idle_connections_do_not_exhaust_descriptors) {
  enum { PER_PORT = 400 };
  const char *dir = ru_scratch("attack-fds");
  char cfg[512], db[512];
  struct rlimit old, low;
  CHECK(dir && getrlimit(RLIMIT_NOFILE, &old) == 0);
  snprintf(cfg, sizeof cfg, "%s/fds.yaml", dir);
  snprintf(db, sizeof db, "%s/r.db", dir);
  CHECK(ru_write_train_config(cfg, "fds", "{engine: ps, mode: sync, servers: 1}",
                              "zmq_scheme: tcp\nhosts: \"localhost:3\"\ndelay_rank: 1\n"
                              "delay_ms: 4\ndeadline: 4\n", "", 2, 1200) == 0);
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 256 + 8 * PER_PORT) {
    fprintf(stderr, "SKIP: hard descriptor limit %lu too low for the attack\n",
            (unsigned long)old.rlim_max);
    return;
  }
  low = old;
  low.rlim_cur = 256; /* the run inherits it; the attacker keeps its own */
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  pid_t h = ru_spawn_sgdlab_run(cfg, db);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(h > 0);
  static int fds[MAXPORTS * PER_PORT];
  int nfd = 0, np = 0;
  if (ru_db_wait(db, "SELECT count(*) FROM steps", 20, 60, h, NULL) == 0) {
    port_t ports[MAXPORTS];
    np = listening_ports(h, SG_AUTH_HARNESS, ports, 0);
    for (int r = 0; r < NPROCS; r++) np = listening_ports(ru_find_rank(h, r), r, ports, np);
    for (int i = 0; i < np; i++) nfd += idle_connections(ports[i].port, PER_PORT, fds + nfd);
  }
  int code = ru_wait_exit_code(h, 120);
  for (int i = 0; i < nfd; i++) close(fds[i]);
  char err[512];
  ru_db_text_into(db, "SELECT coalesce(error, status) FROM runs", err, sizeof err);
  fprintf(stderr, "fds: %d ports, %d idle connections, exit %d: %s\n", np, nfd, code, err);
  CHECK_MSG(np >= NPROCS + 1, "found %d listening ports", np);
  CHECK_MSG(nfd >= (NPROCS + 1) * PER_PORT, "only %d connections", nfd);
  CHECK_EQ_INT(code, 0);
}
