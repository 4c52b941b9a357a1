/* test_cluster_net.c - traffic through the emulated cluster, between
 * processes placed on its hosts with sg_cluster_enter():
 *
 *   shaping   a bounded TCP transfer (16 MB at 200mbit) achieves 50-110 %
 *             of the link rate in both directions; tc's byte counters of
 *             the sender's end and of the receiver's bridge-side end grow
 *             by at least the bytes sent and a bystander's do not; with
 *             the tbf of the sender's end removed the receiver's
 *             bridge-side end still holds the rate, and with both removed
 *             the same check fails (rate far above 110 %): it catches an
 *             unshaped link.
 *   short     a message after idle (64 KiB at 100mbit, 256 KiB at 1gbit)
 *             takes at least 0.9 x its time at the rate, and the old
 *             64 KiB tbf bucket, planted back, fails that check.
 *   rtt       TCP round trips of one byte between two hosts (no netem in
 *             this kernel: the latency is the veths' and the bridge's).
 *   loss      UDP through a host with --loss 0.2 arrives at 80 % +- 5 %
 *             in both directions; between two other hosts at >= 99 %.
 *   racks     two levels: traffic between racks crosses the shaped uplinks
 *             (their counters, at most their rate), traffic inside a rack
 *             does not.
 *
 * SGDLAB_CLUSTER_RATE (default 200mbit) and SGDLAB_CLUSTER_BYTES (default
 * 16000000) change the shaping case's rate and transfer size for
 * measuring by hand.  Needs root (skipped with the reason otherwise).
 */
#include "test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "test_cluster_util.h"

/* ---- processes on hosts ------------------------------------------------------- */

typedef struct peer {
  const char *addr; /* the receiver's address */
  int port;         /* set once the receiver listens */
  long long bytes;  /* to send */
  int count;        /* datagrams / round trips */
  int udp;
} peer_t;

static int listen_on(const char *addr, int type, int *port) {
  struct sockaddr_in sa = {.sin_family = AF_INET};
  socklen_t len = sizeof sa;
  int one = 1, s = socket(AF_INET, type, 0);
  if (s < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return -1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(s, (struct sockaddr *)&sa, sizeof sa) < 0) return -1;
  if (type == SOCK_STREAM && listen(s, 1) < 0) return -1;
  if (getsockname(s, (struct sockaddr *)&sa, &len) < 0) return -1;
  *port = ntohs(sa.sin_port);
  return s;
}

static int accept_within(int ls, double secs) {
  struct pollfd p = {ls, POLLIN, 0};
  if (poll(&p, 1, (int)(secs * 1000)) != 1) return -1;
  return accept(ls, NULL, NULL);
}

static int connect_to(const char *addr, int port, int type) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  int s = socket(AF_INET, type, 0);
  if (s < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1) return -1;
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) return -1;
  return s;
}

/* TCP sink: port, then {bytes, seconds from the first byte to EOF}. */
static int sink_main(void *arg, int wfd) {
  peer_t *p = arg;
  static char buf[1 << 20];
  int ls = listen_on(p->addr, SOCK_STREAM, &p->port);
  if (ls < 0 || write(wfd, &p->port, sizeof p->port) != sizeof p->port) return 1;
  int c = accept_within(ls, 30);
  if (c < 0) return 1;
  double res[2] = {0, 0}, t0 = 0;
  for (ssize_t r; (r = read(c, buf, sizeof buf)) != 0;) {
    if (r < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (res[0] == 0) t0 = sg_now();
    res[0] += (double)r;
  }
  res[1] = sg_now() - t0;
  close(c);
  return write(wfd, res, sizeof res) != sizeof res;
}

static int source_main(void *arg, int wfd) {
  peer_t *p = arg;
  static char buf[1 << 16];
  (void)wfd;
  int s = connect_to(p->addr, p->port, SOCK_STREAM);
  if (s < 0) return 1;
  for (long long left = p->bytes; left > 0;) {
    ssize_t w = write(s, buf, left < (long long)sizeof buf ? (size_t)left : sizeof buf);
    if (w < 0 && errno != EINTR) return 1;
    if (w > 0) left -= w;
  }
  shutdown(s, SHUT_WR);
  char c;
  while (read(s, &c, 1) > 0) { /* until the sink has read everything and closed */
  }
  return 0;
}

/* Start the receiving fn on host `to`, then the sending fn on host
 * `from`; results (rcap bytes) from the receiver, or from the sender when
 * from_sender. */
static int pair(const sg_cluster_t *cl, int from, int to, peer_t *p, int (*recv_fn)(void *, int),
                int (*send_fn)(void *, int), void *res, size_t rcap, int from_sender) {
  int rfd, sfd;
  p->addr = sg_cluster_host_addr(cl, to);
  pid_t rp = tc_spawn_on(cl, to, recv_fn, p, &rfd);
  if (rp < 0) return -1;
  int ok = tc_read_full(rfd, &p->port, sizeof p->port, 20) == 0;
  pid_t sp = ok ? tc_spawn_on(cl, from, send_fn, p, &sfd) : -1;
  if (sp > 0 && from_sender) ok = tc_read_full(sfd, res, rcap, 50) == 0;
  if (sp > 0 && !from_sender) ok = tc_read_full(rfd, res, rcap, 50) == 0;
  int sc = sp > 0 ? tc_wait(sp, ok ? 20 : 0.1) : -1, rc = tc_wait(rp, ok ? 20 : 0.1);
  close(rfd);
  if (sp > 0) close(sfd);
  if (!ok || sc != 0 || rc != 0) {
    fprintf(stderr, "pair %d -> %d: results %s, sender exit %d, receiver exit %d\n", from, to,
            ok ? "read" : "missing", sc, rc);
    return -1;
  }
  return 0;
}

/* TCP transfer of `bytes` from host `from` to host `to`: goodput, bits/s. */
static double transfer(const sg_cluster_t *cl, int from, int to, long long bytes) {
  peer_t p = {.bytes = bytes};
  double res[2];
  if (pair(cl, from, to, &p, sink_main, source_main, res, sizeof res, 0) < 0) return -1;
  if (res[0] != (double)bytes || res[1] <= 0) {
    fprintf(stderr, "transfer %d -> %d: %.0f of %lld bytes in %.3f s\n", from, to, res[0], bytes,
            res[1]);
    return -1;
  }
  return res[0] * 8 / res[1];
}

/* ---- shaping ------------------------------------------------------------------ */

static int del_tbf(const sg_cluster_t *cl, int host, int bridge_end) {
  char dev[32], out[1024];
  snprintf(dev, sizeof dev, SG_CLUSTER_IF_PREFIX "%s%c%d", sg_cluster_name(cl),
           bridge_end ? 'p' : 'e', host);
  char ns[64];
  snprintf(ns, sizeof ns, "%s", bridge_end ? sg_cluster_bridge_ns(cl) : sg_cluster_host_ns(cl, host));
  char *argv[] = {"tc", "-n", ns, "qdisc", "del", "dev", dev, "root", NULL};
  return tc_run(argv, -1, out, sizeof out);
}

static void print_rate(const char *what, double r, uint64_t bps) {
  fprintf(stderr, "%-44s %9.1f Mbit/s = %5.1f %% of %.0f Mbit/s\n", what, r / 1e6,
          100 * r / (double)bps, (double)bps / 1e6);
}

static void shaping_checks(sg_cluster_t *cl, uint64_t bps, long long bytes) {
  sg_cluster_link_t b[3], a[3];
  for (int h = 0; h < 3; h++) CHECK_OK(sg_cluster_link_stats(cl, h, &b[h]));
  double r = transfer(cl, 0, 1, bytes);
  print_rate("h0 -> h1, tbf on every end", r, bps);
  CHECK_MSG(r >= 0.5 * (double)bps && r <= 1.1 * (double)bps, "%.1f Mbit/s", r / 1e6);
  for (int h = 0; h < 3; h++) CHECK_OK(sg_cluster_link_stats(cl, h, &a[h]));
  fprintf(stderr, "tc bytes: h0 end +%llu, h1 bridge end +%llu, h2 ends +%llu +%llu (sent %lld)\n",
          (unsigned long long)(a[0].host_tx - b[0].host_tx),
          (unsigned long long)(a[1].bridge_tx - b[1].bridge_tx),
          (unsigned long long)(a[2].host_tx - b[2].host_tx),
          (unsigned long long)(a[2].bridge_tx - b[2].bridge_tx), bytes);
  CHECK(a[0].host_tx - b[0].host_tx >= (uint64_t)bytes);
  CHECK(a[1].bridge_tx - b[1].bridge_tx >= (uint64_t)bytes);
  CHECK(a[2].host_tx - b[2].host_tx < (uint64_t)bytes / 100);
  CHECK(a[2].bridge_tx - b[2].bridge_tx < (uint64_t)bytes / 100);
  r = transfer(cl, 1, 0, bytes);
  print_rate("h1 -> h0, tbf on every end", r, bps);
  CHECK_MSG(r >= 0.5 * (double)bps && r <= 1.1 * (double)bps, "%.1f Mbit/s", r / 1e6);
  CHECK_EQ_INT(del_tbf(cl, 0, 0), 0);
  r = transfer(cl, 0, 1, bytes);
  print_rate("h0 -> h1, h0's end unshaped", r, bps);
  CHECK_MSG(r >= 0.5 * (double)bps && r <= 1.1 * (double)bps, "%.1f Mbit/s", r / 1e6);
  CHECK_EQ_INT(del_tbf(cl, 1, 1), 0);
  r = transfer(cl, 0, 1, bytes);
  print_rate("h0 -> h1, unshaped (the check must fail)", r, bps);
  if (bps <= 1000000000ULL) CHECK_MSG(r > 1.1 * (double)bps, "unshaped: %.1f Mbit/s", r / 1e6);
}

TEST(shaping_holds_the_rate_and_counts_bytes) {
  if (!tc_root_or_skip("shaping_holds_the_rate_and_counts_bytes")) return;
  const char *rate = getenv("SGDLAB_CLUSTER_RATE"), *nb = getenv("SGDLAB_CLUSTER_BYTES");
  long long bytes = nb ? atoll(nb) : 16000000;
  static sg_cluster_desc_t d;
  CHECK_OK(sg_cluster_desc_parse(&d, 3, rate ? rate : "200mbit", NULL));
  CHECK(bytes > 0);
  sg_cluster_t *cl = NULL;
  CHECK_OK(tc_up(&cl, &d));
  fprintf(stderr, "cluster %s: tbf burst %llu B, latency %d ms, peakrate %llu bit/s, mtu %llu B, "
          "gso_max_segs %u\n", sg_cluster_name(cl),
          (unsigned long long)sg_cluster_tbf_burst(d.rate_bps[0]), SG_CLUSTER_TBF_LATENCY_MS,
          (unsigned long long)sg_cluster_tbf_peakrate(d.rate_bps[0]),
          (unsigned long long)sg_cluster_tbf_mtu(d.rate_bps[0]), sg_cluster_gso_max_segs(d.rate_bps[0]));
  shaping_checks(cl, d.rate_bps[0], bytes);
  CHECK_OK(tc_down(&cl));
}

/* ---- short messages after idle ------------------------------------------------- */

/* Message sink: port, then reads exactly p->bytes and answers, over the
 * connection, the time (sg_now) the last byte arrived. */
static int msg_sink_main(void *arg, int wfd) {
  peer_t *p = arg;
  static char buf[1 << 16];
  int ls = listen_on(p->addr, SOCK_STREAM, &p->port);
  if (ls < 0 || write(wfd, &p->port, sizeof p->port) != sizeof p->port) return 1;
  int c = accept_within(ls, 30);
  if (c < 0) return 1;
  for (long long got = 0; got < p->bytes;) {
    ssize_t r = read(c, buf, sizeof buf);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 1;
    got += r;
  }
  double t1 = sg_now();
  return write(c, &t1, sizeof t1) != sizeof t1;
}

/* Connects, leaves the link idle for p->count ms (the condition measured:
 * the shaper's buckets fill up again; nothing waits on another process by
 * it), then sends the message with one write; results {t0: just before the
 * write, t1: the sink's last byte}, both CLOCK_MONOTONIC of this machine. */
static int msg_source_main(void *arg, int wfd) {
  peer_t *p = arg;
  static char buf[1 << 20];
  int s = connect_to(p->addr, p->port, SOCK_STREAM);
  if (s < 0 || p->bytes > (long long)sizeof buf) return 1;
  struct timespec idle = {p->count / 1000, (long)(p->count % 1000) * 1000000L};
  while (nanosleep(&idle, &idle) < 0 && errno == EINTR) {
  }
  double res[2] = {sg_now(), 0};
  for (long long off = 0; off < p->bytes;) {
    ssize_t w = write(s, buf + off, (size_t)(p->bytes - off));
    if (w < 0 && errno != EINTR) return 1;
    if (w > 0) off += w;
  }
  if (tc_read_full(s, &res[1], sizeof res[1], 20) != 0) return 1;
  close(s);
  return write(wfd, res, sizeof res) != sizeof res;
}

/* Seconds from the write of `bytes` on host `from`, after 50 ms of idle
 * link, to their last byte on host `to`; -1 on failure. */
static double message_time(const sg_cluster_t *cl, int from, int to, long long bytes) {
  peer_t p = {.bytes = bytes, .count = 50};
  double res[2];
  if (pair(cl, from, to, &p, msg_sink_main, msg_source_main, res, sizeof res, 1) < 0) return -1;
  return res[1] - res[0];
}

/* Put the earlier link shaping back on h0's end and h1's bridge end: tbf
 * with a 64 KiB bucket and no peak rate, which let a message of up to
 * 64 KiB through at memory speed after idle. */
static int plant_old_tbf(const sg_cluster_t *cl, uint64_t bps) {
  char rate[32], out[1024];
  snprintf(rate, sizeof rate, "%llubit", (unsigned long long)bps);
  for (int bridge_end = 0; bridge_end < 2; bridge_end++) {
    char dev[32], ns[64];
    snprintf(dev, sizeof dev, SG_CLUSTER_IF_PREFIX "%s%c%d", sg_cluster_name(cl),
             bridge_end ? 'p' : 'e', bridge_end);
    snprintf(ns, sizeof ns, "%s", bridge_end ? sg_cluster_bridge_ns(cl) : sg_cluster_host_ns(cl, 0));
    char *argv[] = {"tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                    "burst", "65536", "latency", "20ms", NULL};
    if (tc_run(argv, -1, out, sizeof out) != 0) return -1;
  }
  return 0;
}

/* A real link gives every frame its serialization time, so a message
 * takes at least bytes / rate however idle the link was.  After 50 ms
 * idle, 3 times each: 64 KiB at 100mbit and 256 KiB at 1gbit (5.2 and
 * 2.1 ms at the rate) take at least 0.9 x that.  A lower bound by
 * construction: the shaper holds a message's last frame until its peak
 * bucket (4542 B at 100mbit, 10 kB at 1gbit) and its peak rate (rate +
 * 3 %) allow it, at 0.95 (64 KiB: 68.6 kB in 46 frames with headers) and
 * 0.98 x the time at the rate at the earliest; load only adds time.  With
 * the old 64 KiB bucket planted back (100mbit) the same message takes
 * about a tenth of that: the fastest of 3 must fall below the bound, or
 * the check caught nothing. */
TEST(short_message_after_idle_takes_its_serialization_time) {
  if (!tc_root_or_skip("short_message_after_idle_takes_its_serialization_time")) return;
  static const char *const rates[] = {"100mbit", "1gbit"};
  static const long long sizes[] = {65536, 262144};
  for (int i = 0; i < 2; i++) {
    static sg_cluster_desc_t d;
    CHECK_OK(sg_cluster_desc_parse(&d, 2, rates[i], NULL));
    sg_cluster_t *cl = NULL;
    CHECK_OK(tc_up(&cl, &d));
    if (!cl) return;
    const long long bytes = sizes[i];
    double ser = (double)bytes * 8 / (double)d.rate_bps[0], fastest = 1e9;
    for (int k = 0; k < 3; k++) {
      double t = message_time(cl, 0, 1, bytes);
      fprintf(stderr, "%s: %lld B after idle in %.3f ms (%.2f x its %.3f ms at the rate)\n",
              rates[i], bytes, t * 1e3, t / ser, ser * 1e3);
      CHECK_MSG(t >= 0.9 * ser, "%s: %lld B in %.3f ms, under 0.9 x %.3f ms", rates[i], bytes,
                t * 1e3, ser * 1e3);
    }
    if (i == 0) {
      CHECK_EQ_INT(plant_old_tbf(cl, d.rate_bps[0]), 0);
      for (int k = 0; k < 3; k++) {
        double t = message_time(cl, 0, 1, bytes);
        fprintf(stderr, "%s, old 64 KiB bucket planted: %.3f ms (%.2f x)\n", rates[i], t * 1e3,
                t / ser);
        if (t > 0 && t < fastest) fastest = t;
      }
      CHECK_MSG(fastest < 0.9 * ser, "old bucket: fastest %.3f ms, not under 0.9 x %.3f ms",
                fastest * 1e3, ser * 1e3);
    }
    CHECK_OK(tc_down(&cl));
  }
}

/* ---- two levels: racks ------------------------------------------------------------ */

/* 4 hosts at 200mbit in racks of 2 under a 50mbit uplink: a transfer from
 * h0 to h2 crosses rack 0's uplink outwards and rack 1's inwards (their tc
 * byte counters grow by at least the bytes sent) and is held to the
 * uplink's rate (at most 110 %); one from h0 to h1 stays in rack 0 (no
 * uplink counter grows by a hundredth of it).  A flat cluster (one bridge)
 * would pass neither: its transfer runs at the host link's 200mbit. */
TEST(racks_send_cross_rack_traffic_through_the_shaped_uplink) {
  if (!tc_root_or_skip("racks_send_cross_rack_traffic_through_the_shaped_uplink")) return;
  const long long bytes = 3000000;
  static sg_cluster_desc_t d;
  CHECK_OK(sg_cluster_desc_parse(&d, 4, "200mbit", NULL));
  d.rack = 2;
  CHECK_OK(sg_cluster_parse_rate("50mbit", "uplink", &d.uplink_bps));
  sg_cluster_t *cl = NULL;
  CHECK_OK(tc_up(&cl, &d));
  if (!cl) return;
  CHECK_EQ_INT(sg_cluster_nracks(cl), 2);
  uint64_t o0, i0, o1, i1, o0b, i0b, o1b, i1b;
  CHECK_OK(sg_cluster_uplink_stats(cl, 0, &o0, &i0));
  CHECK_OK(sg_cluster_uplink_stats(cl, 1, &o1, &i1));
  double r = transfer(cl, 0, 2, bytes);
  print_rate("h0 -> h2, across racks", r, d.uplink_bps);
  CHECK_MSG(r > 0 && r <= 1.1 * (double)d.uplink_bps, "%.1f Mbit/s", r / 1e6);
  CHECK_OK(sg_cluster_uplink_stats(cl, 0, &o0b, &i0b));
  CHECK_OK(sg_cluster_uplink_stats(cl, 1, &o1b, &i1b));
  fprintf(stderr, "uplinks: rack 0 out +%llu, rack 1 in +%llu (sent %lld)\n",
          (unsigned long long)(o0b - o0), (unsigned long long)(i1b - i1), bytes);
  CHECK(o0b - o0 >= (uint64_t)bytes);
  CHECK(i1b - i1 >= (uint64_t)bytes);
  r = transfer(cl, 0, 1, bytes);
  print_rate("h0 -> h1, inside rack 0", r, d.rate_bps[0]);
  CHECK(r > 0);
  CHECK_OK(sg_cluster_uplink_stats(cl, 0, &o0, &i0));
  CHECK_OK(sg_cluster_uplink_stats(cl, 1, &o1, &i1));
  CHECK_MSG(o0 - o0b < (uint64_t)bytes / 100 && i0 - i0b < (uint64_t)bytes / 100,
            "rack 0's uplink carried %llu / %llu B of an in-rack transfer",
            (unsigned long long)(o0 - o0b), (unsigned long long)(i0 - i0b));
  CHECK_OK(tc_down(&cl));
}

/* ---- round trips ----------------------------------------------------------------- */

static int echo_main(void *arg, int wfd) {
  peer_t *p = arg;
  int one = 1, ls = listen_on(p->addr, SOCK_STREAM, &p->port);
  if (ls < 0 || write(wfd, &p->port, sizeof p->port) != sizeof p->port) return 1;
  int c = accept_within(ls, 30);
  if (c < 0) return 1;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char b;
  while (read(c, &b, 1) == 1)
    if (write(c, &b, 1) != 1) return 1;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Round trips; writes {min, median, p99} in microseconds. */
static int ping_main(void *arg, int wfd) {
  peer_t *p = arg;
  static double t[10000];
  int one = 1, s = connect_to(p->addr, p->port, SOCK_STREAM);
  if (s < 0 || p->count > 10000) return 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char b = 'x';
  for (int i = 0; i < p->count; i++) {
    double t0 = sg_now();
    if (write(s, &b, 1) != 1 || read(s, &b, 1) != 1) return 1;
    t[i] = (sg_now() - t0) * 1e6;
  }
  close(s);
  qsort(t, (size_t)p->count, sizeof t[0], cmp_double);
  double res[3] = {t[0], t[p->count / 2], t[p->count * 99 / 100]};
  return write(wfd, res, sizeof res) != sizeof res;
}

TEST(rtt_between_hosts) {
  if (!tc_root_or_skip("rtt_between_hosts")) return;
  static sg_cluster_desc_t d;
  CHECK_OK(sg_cluster_desc_parse(&d, 2, "1gbit", NULL));
  sg_cluster_t *cl = NULL;
  CHECK_OK(tc_up(&cl, &d));
  peer_t p = {.count = 2000};
  double res[3] = {0, 0, 0};
  int rc = pair(cl, 0, 1, &p, echo_main, ping_main, res, sizeof res, 1);
  peer_t q = {.count = 2000};
  double lo[3] = {0, 0, 0};
  int rc2 = rc == 0 ? pair(cl, 0, 0, &q, echo_main, ping_main, lo, sizeof lo, 1) : -1;
  CHECK_OK(tc_down(&cl));
  CHECK_EQ_INT(rc, 0);
  CHECK_EQ_INT(rc2, 0);
  fprintf(stderr, "TCP 1-byte round trip h0 <-> h1 over 1gbit links: min %.1f us, median %.1f us, "
                  "p99 %.1f us\n", res[0], res[1], res[2]);
  fprintf(stderr, "the same within h0 (its own address):            min %.1f us, median %.1f us, "
                  "p99 %.1f us\n", lo[0], lo[1], lo[2]);
  CHECK_MSG(res[1] > 0 && res[1] < 5000, "median %.1f us", res[1]);
}

/* ---- loss ----------------------------------------------------------------------- */

/* UDP: port, then the number of data datagrams ('D') received; the
 * stream ends when count have arrived or none for 1 s after the first
 * (bounded to 20 s).  A hello ('H') is answered ('A') and not counted: the
 * source sends data only once a hello was answered, so the hosts' ARP
 * entries exist and no datagram is lost waiting for them (the neighbour
 * queue drops while ARP resolves, and ARP itself crosses the lossy link). */
static int udp_sink_main(void *arg, int wfd) {
  peer_t *p = arg;
  int big = 8 << 20, n = 0, s = listen_on(p->addr, SOCK_DGRAM, &p->port);
  if (s < 0) return 1;
  setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
  if (write(wfd, &p->port, sizeof p->port) != sizeof p->port) return 1;
  char buf[2048];
  double end = sg_now() + 20;
  while (n < p->count && sg_now() < end) {
    struct pollfd pf = {s, POLLIN, 0};
    if (poll(&pf, 1, n ? 1000 : 20000) <= 0) break;
    struct sockaddr_storage from;
    socklen_t fl = sizeof from;
    ssize_t got = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
    if (got > 0 && buf[0] == 'H') sendto(s, "A", 1, 0, (struct sockaddr *)&from, fl);
    else if (got > 0 && buf[0] == 'D') n++;
  }
  return write(wfd, &n, sizeof n) != sizeof n;
}

/* Hello until answered (at most 400 tries of 50 ms), then count data. */
static int udp_source_main(void *arg, int wfd) {
  peer_t *p = arg;
  char buf[100] = {'D'}, ack;
  int answered = 0;
  (void)wfd;
  int s = connect_to(p->addr, p->port, SOCK_DGRAM);
  if (s < 0) return 1;
  for (int t = 0; t < 400 && !answered; t++) {
    struct pollfd pf = {s, POLLIN, 0};
    if (send(s, "H", 1, 0) != 1) return 1;
    answered = poll(&pf, 1, 50) == 1 && recv(s, &ack, 1, 0) == 1 && ack == 'A';
  }
  if (!answered) return 1;
  for (int i = 0; i < p->count; i++)
    if (send(s, buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 1;
  return 0;
}

static double delivered(const sg_cluster_t *cl, int from, int to, int count) {
  peer_t p = {.count = count, .udp = 1};
  int n = -1;
  if (pair(cl, from, to, &p, udp_sink_main, udp_source_main, &n, sizeof n, 0) < 0) return -1;
  fprintf(stderr, "UDP h%d -> h%d: %d of %d datagrams arrived (%.1f %%)\n", from, to, n, count,
          100.0 * n / count);
  return (double)n / count;
}

TEST(loss_drops_that_fraction) {
  if (!tc_root_or_skip("loss_drops_that_fraction")) return;
  static sg_cluster_desc_t d;
  CHECK_OK(sg_cluster_desc_parse(&d, 3, "1gbit", "0.2,0,0"));
  sg_cluster_t *cl = NULL;
  CHECK_OK(tc_up(&cl, &d));
  double out = delivered(cl, 0, 1, 4000);
  double in = out >= 0 ? delivered(cl, 1, 0, 4000) : -1;
  double clean = in >= 0 ? delivered(cl, 1, 2, 4000) : -1;
  CHECK_OK(tc_down(&cl));
  CHECK_MSG(out > 0.75 && out < 0.85, "h0 sending: %.3f delivered", out);
  CHECK_MSG(in > 0.75 && in < 0.85, "h0 receiving: %.3f delivered", in);
  CHECK_MSG(clean >= 0.99, "no loss configured: %.3f delivered", clean);
}
