/* sshd.c - ssh hosts on an emulated cluster (see cluster.h): one sshd per
 * host, in the host's network namespace and a UTS namespace named hI,
 * listening only on the host's address, with a host key and a user key
 * made for the cluster (ssh-keygen, files 0600 in the cluster's 0700
 * daemons directory), public-key login of root only, from the cluster's
 * own subnet only, nothing but commands (no tty, no forwarding, no
 * environment from the client).  Clients use the ssh_config written
 * beside them (the key, known_hosts with every host's address, strict
 * host key checking); the hostfile lists the hosts. */
#define _GNU_SOURCE
#include "cluster_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define PRIVSEP_DIR "/run/sshd" /* OpenSSH's compiled-in privilege separation directory */

void sg_cluster_ssh_config(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/daemons-%s/ssh_config", SG_CLUSTER_RUN_DIR, name);
}

void sg_cluster_ssh_hostfile(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s/daemons-%s/hostfile", SG_CLUSTER_RUN_DIR, name);
}

int sg_cluster_has_ssh(const char *name) {
  char conf[256];
  sg_cluster_ssh_config(name, conf, sizeof conf);
  return access(conf, R_OK) == 0;
}

/* sshd refuses to start without it; Debian's ssh service makes it at
 * start.  Made (root, 0755) when missing, and left: it stays empty. */
static int privsep_dir(void) {
  struct stat st;
  if (mkdir(PRIVSEP_DIR, 0755) < 0 && errno != EEXIST)
    return sg_err_set(SG_EIO, "ssh: %s: %s", PRIVSEP_DIR, strerror(errno));
  if (lstat(PRIVSEP_DIR, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
      (st.st_mode & 022))
    return sg_err_set(SG_EIO, "ssh: %s is not a directory of root's that only root may write "
                      "(sshd would refuse it)", PRIVSEP_DIR);
  return SG_OK;
}

/* A fresh ed25519 key pair DIR/LEAF (0600) and DIR/LEAF.pub; the public
 * key's "type base64" into pub. */
static int make_key(const char *dir, const char *leaf, const char *comment, char *pub,
                    size_t cap) {
  char path[512], pubpath[520], out[2048];
  snprintf(path, sizeof path, "%s/%s", dir, leaf);
  char *argv[] = {"ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", (char *)comment,
                  "-f", path, NULL};
  SG_CHECK(sgc_run(argv, -1, out, sizeof out));
  snprintf(pubpath, sizeof pubpath, "%s.pub", path);
  FILE *f = fopen(pubpath, "re");
  char type[64], b64[512];
  int ok = f && fscanf(f, "%63s %511s", type, b64) == 2;
  if (f) fclose(f);
  if (!ok) return sg_err_set(SG_EIO, "ssh: %s: no public key", pubpath);
  snprintf(pub, cap, "%s %s", type, b64);
  return SG_OK;
}

/* "198.18.S." of the cluster's addresses (cap >= 16). */
static void addr_prefix(const sg_cluster_t *cl, char *out, size_t cap) {
  snprintf(out, cap, "%s", cl->addr[0]);
  char *dot = strrchr(out, '.');
  if (dot) dot[1] = '\0';
}

/* Close the memory stream f (which sets *text and *len), write the text
 * as DIR/LEAF (0600) and free it. */
static int write_text(const char *dir, const char *leaf, char **text, size_t *len, FILE *f) {
  int bad = ferror(f);
  bad |= fclose(f) != 0;
  int rc = bad ? sg_err_set(SG_EIO, "ssh: %s: cannot format", leaf)
               : sgc_write_file(dir, leaf, *text, *len, 0600);
  free(*text);
  *text = NULL;
  return rc;
}

/* The daemons' configuration: everything but public-key command
 * execution as root is off. */
static int write_sshd_config(const char *dir) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return SG_ENOMEM;
  fprintf(f,
          "# made by sgdlab cluster up --ssh; removed by sgdlab cluster down\n"
          "Port 22\nAddressFamily inet\nHostKey %s/ssh_host_key\nPidFile none\n"
          "AuthorizedKeysFile %s/authorized_keys\nAuthenticationMethods publickey\n"
          "PubkeyAuthentication yes\nPasswordAuthentication no\nPermitEmptyPasswords no\n"
          "KbdInteractiveAuthentication no\nHostbasedAuthentication no\nIgnoreRhosts yes\n"
          "GSSAPIAuthentication no\nKerberosAuthentication no\nUsePAM no\n"
          "PermitRootLogin prohibit-password\nAllowUsers root\nStrictModes yes\n"
          "MaxAuthTries 2\nLoginGraceTime 10\nMaxStartups 64:30:256\nMaxSessions 16\n"
          "PermitTTY no\nPermitTunnel no\nAllowTcpForwarding no\nAllowStreamLocalForwarding no\n"
          "AllowAgentForwarding no\nX11Forwarding no\nGatewayPorts no\nPermitListen none\n"
          "PermitOpen none\nPermitUserEnvironment no\nPermitUserRC no\n"
          "ClientAliveInterval 5\nClientAliveCountMax 3\nPrintMotd no\nPrintLastLog no\n"
          "UseDNS no\nCompression no\nLogLevel INFO\n",
          dir, dir);
  return write_text(dir, "sshd_config", &text, &len, f);
}

/* authorized_keys (the user key, from the cluster's subnet, restricted),
 * known_hosts (the host key at every host's address), the clients'
 * ssh_config and the hostfile. */
static int write_client_files(const sg_cluster_t *cl, const char *dir, const char *host_pub,
                              const char *user_pub) {
  char prefix[32], line[1024], *text = NULL;
  size_t len = 0;
  addr_prefix(cl, prefix, sizeof prefix);
  snprintf(line, sizeof line, "from=\"%s\",restrict %s sgdlab-cluster-%s\n", cl->subnet_str,
           user_pub, cl->d.name);
  SG_CHECK(sgc_write_file(dir, "authorized_keys", line, strlen(line), 0600));
  FILE *f = open_memstream(&text, &len);
  if (!f) return SG_ENOMEM;
  for (int h = 0; h < cl->d.nhosts; h++) fprintf(f, "%s %s\n", cl->addr[h], host_pub);
  SG_CHECK(write_text(dir, "known_hosts", &text, &len, f));
  if (!(f = open_memstream(&text, &len))) return SG_ENOMEM;
  fprintf(f,
          "# made by sgdlab cluster up --ssh (ssh -F this file); removed by sgdlab cluster down\n"
          "Host %s*\n  User root\n  IdentityFile %s/ssh_user_key\n  IdentitiesOnly yes\n"
          "  UserKnownHostsFile %s/known_hosts\n  GlobalKnownHostsFile /dev/null\n"
          "  StrictHostKeyChecking yes\n  CheckHostIP no\n  UpdateHostKeys no\n"
          "  BatchMode yes\n  PasswordAuthentication no\n  KbdInteractiveAuthentication no\n"
          "  HostbasedAuthentication no\n  GSSAPIAuthentication no\n  ForwardAgent no\n"
          "  ForwardX11 no\n  ClearAllForwardings yes\n  RequestTTY no\n  ControlMaster no\n"
          "  ControlPath none\n  ConnectTimeout 10\n  ServerAliveInterval 5\n"
          "  ServerAliveCountMax 3\n  AddressFamily inet\n  LogLevel ERROR\n",
          prefix, dir, dir);
  SG_CHECK(write_text(dir, "ssh_config", &text, &len, f));
  if (!(f = open_memstream(&text, &len))) return SG_ENOMEM;
  for (int h = 0; h < cl->d.nhosts; h++) fprintf(f, "%s slots=1\n", cl->addr[h]);
  return write_text(dir, "hostfile", &text, &len, f);
}

/* sshd -t first (the configuration and the host key, as the daemons
 * will read them), then one daemon per host. */
static int start_sshds(const sg_cluster_t *cl, const char *dir) {
  char conf[512], listen[64], env[600], tag[24], out[2048];
  snprintf(conf, sizeof conf, "%s/sshd_config", dir);
  char *test[] = {"sshd", "-t", "-f", conf, NULL};
  SG_CHECK(sgc_run(test, -1, out, sizeof out));
  for (int h = 0; h < cl->d.nhosts; h++) {
    snprintf(listen, sizeof listen, "ListenAddress=%s:22", cl->addr[h]);
    /* each host's own temporary directory, as on separate machines */
    snprintf(env, sizeof env, "SetEnv=TMPDIR=%s/tmp/h%d", dir, h);
    snprintf(tag, sizeof tag, "sshd-h%d", h);
    char *argv[] = {"sshd", "-D", "-e", "-f", conf, "-o", listen, "-o", env, NULL};
    SG_CHECK(sgc_start_daemon(cl, dir, tag, h, 0, argv));
  }
  return SG_OK;
}

/* `ssh -F ssh_config ADDR true` from h0 to every host: the daemon listens,
 * and the key, known_hosts and the configuration work.  Polled until the
 * deadline. */
static int wait_logins(const sg_cluster_t *cl, const char *dir, double deadline) {
  char conf[512], out[2048];
  snprintf(conf, sizeof conf, "%s/ssh_config", dir);
  for (int h = 0; h < cl->d.nhosts; h++)
    for (int tries = 1;; tries++) {
      char *argv[] = {"ssh", "-F", conf, "--", (char *)cl->addr[h], "true", NULL};
      if (sgc_run(argv, cl->ns_fd[0], out, sizeof out) == SG_OK) break;
      if (sg_now() > deadline)
        return sg_err_set(SG_ETIMEOUT, "ssh: host h%d (%s) refused the cluster's key after %d "
                          "tries: %s (see %s/sshd-h%d.out)", h, cl->addr[h], tries, sg_err_msg(),
                          dir, h);
      struct timespec ts = {0, 50 * 1000 * 1000}; /* poll period, not a synchronization */
      nanosleep(&ts, NULL);
    }
  sg_err_clear();
  return SG_OK;
}

int sg_cluster_ssh_up(const sg_cluster_t *cl, double timeout_s) {
  char dir[256], host_pub[600], user_pub[600], comment[64];
  sg_cluster_daemons_dir(cl->d.name, dir, sizeof dir);
  SG_CHECK(sgc_daemons_prepare(cl, "ssh"));
  SG_CHECK(privsep_dir());
  snprintf(comment, sizeof comment, "sgdlab cluster %s", cl->d.name);
  SG_CHECK(make_key(dir, "ssh_host_key", comment, host_pub, sizeof host_pub));
  SG_CHECK(make_key(dir, "ssh_user_key", comment, user_pub, sizeof user_pub));
  SG_CHECK(write_sshd_config(dir));
  SG_CHECK(write_client_files(cl, dir, host_pub, user_pub));
  SG_CHECK(start_sshds(cl, dir));
  return wait_logins(cl, dir, sg_now() + timeout_s);
}
