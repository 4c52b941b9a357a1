/* auth.c - the run's keys, CURVE options and the ZAP handler (auth.h).
 *
 * Key file (mode 0600, one line per identity, Z85 has no blanks):
 *   sgdlab-keys 1 <nranks>
 *   h <public> <secret>
 *   0 <public> <secret>
 *   ...
 * (a secret of "-": not given; a rank's stage has only its own, stage.h)
 * ZAP (ZeroMQ RFC 27): libzmq sends each CURVE handshake's request to
 * inproc://zeromq.zap.01 of the socket's context as 7 frames (version,
 * request id, domain, address, routing id, mechanism, client public key)
 * and waits for 6 (version, request id, status code, status text, user
 * id, metadata).  Without a handler bound there, libzmq 4.3 would admit
 * every client that knows the server's public key, so sg_zap_start must
 * succeed before a CURVE server socket binds.
 */
#define _GNU_SOURCE
#include "auth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "err.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

typedef struct sg_keypair {
  char pub[SG_KEY_Z85], sec[SG_KEY_Z85];
} sg_keypair_t;

struct sg_keys {
  int nranks;
  sg_keypair_t *kp; /* [nranks + 1]; the harness's is kp[nranks] */
};

static sg_keypair_t *kp_of(const sg_keys_t *k, int who) {
  if (who == SG_AUTH_HARNESS) return &k->kp[k->nranks];
  if (who < 0 || who >= k->nranks) return NULL;
  return &k->kp[who];
}

static int keys_alloc(sg_keys_t **out, int nranks) {
  *out = NULL;
  if (nranks < 1 || nranks > 1 << 20)
    return sg_err_set(SG_EINVAL, "keys: %d ranks", nranks);
  sg_keys_t *k = calloc(1, sizeof *k);
  if (!k || !(k->kp = calloc((size_t)nranks + 1, sizeof *k->kp))) {
    free(k);
    return sg_err_set(SG_ENOMEM, "keys: no memory");
  }
  k->nranks = nranks;
  *out = k;
  return 0;
}

int sg_keys_new(sg_keys_t **out, int nranks) {
  SG_CHECK(keys_alloc(out, nranks));
  sg_keys_t *k = *out;
  for (int i = 0; i <= nranks; i++)
    if (zmq_curve_keypair(k->kp[i].pub, k->kp[i].sec) != 0) {
      sg_keys_destroy(out);
      return sg_err_set(SG_EIO, "keys: zmq_curve_keypair: %s (libzmq without CURVE?)",
                        zmq_strerror(zmq_errno()));
    }
  return 0;
}

void sg_keys_destroy(sg_keys_t **pk) {
  if (!pk || !*pk) return;
  sg_keys_t *k = *pk;
  if (k->kp) memset(k->kp, 0, ((size_t)k->nranks + 1) * sizeof *k->kp);
  free(k->kp);
  free(k);
  *pk = NULL;
}

int sg_keys_nranks(const sg_keys_t *k) { return k ? k->nranks : 0; }

const char *sg_keys_public(const sg_keys_t *k, int who) {
  sg_keypair_t *p = kp_of(k, who);
  return p ? p->pub : NULL;
}

const char *sg_keys_secret(const sg_keys_t *k, int who) {
  sg_keypair_t *p = kp_of(k, who);
  return p && p->sec[0] ? p->sec : NULL;
}

int sg_keys_who(const sg_keys_t *k, const char *pub) {
  for (int i = 0; i <= k->nranks; i++)
    if (!strcmp(k->kp[i].pub, pub)) return i == k->nranks ? SG_AUTH_HARNESS : i;
  return SG_AUTH_UNKNOWN;
}

int sg_keys_save(const sg_keys_t *k, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return sg_err_set(SG_EIO, "%s: cannot create the key file: %s", path, strerror(errno));
  FILE *f = fdopen(fd, "w");
  if (!f) {
    close(fd);
    return sg_err_set(SG_EIO, "%s: %s", path, strerror(errno));
  }
  fprintf(f, "sgdlab-keys 1 %d\n", k->nranks);
  fprintf(f, "h %s %s\n", k->kp[k->nranks].pub, k->kp[k->nranks].sec);
  for (int i = 0; i < k->nranks; i++) fprintf(f, "%d %s %s\n", i, k->kp[i].pub, k->kp[i].sec);
  if (fclose(f) != 0) return sg_err_set(SG_EIO, "%s: write: %s", path, strerror(errno));
  return 0;
}

/* One "who public secret" line; who is "h" or the next rank; secret "-":
 * not given (a rank's stage holds only its own, stage.h). */
static int keys_line(sg_keys_t *k, FILE *f, const char *path, int line, int want) {
  char who[16], pub[64], sec[64];
  if (fscanf(f, "%15s %63s %63s", who, pub, sec) != 3 || strlen(pub) != 40 ||
      (strlen(sec) != 40 && strcmp(sec, "-")))
    return sg_err_set(SG_EPROTO, "%s:%d: malformed key line", path, line);
  if (want == SG_AUTH_HARNESS ? strcmp(who, "h") != 0 : atoi(who) != want)
    return sg_err_set(SG_EPROTO, "%s:%d: keys out of order", path, line);
  sg_keypair_t *p = kp_of(k, want);
  memcpy(p->pub, pub, SG_KEY_Z85);
  if (strcmp(sec, "-")) memcpy(p->sec, sec, SG_KEY_Z85);
  explicit_bzero(sec, sizeof sec);
  return 0;
}

/* The key file's text from f (the ownership checks done by the caller);
 * `what` names it in errors. */
static int keys_read(sg_keys_t **out, FILE *f, const char *what, int nranks) {
  int rc = 0, n = 0;
  if (fscanf(f, "sgdlab-keys 1 %d", &n) != 1 || n != nranks)
    return sg_err_set(SG_EPROTO, "%s:1: not a key file for %d ranks", what, nranks);
  SG_TRY(keys_alloc(out, nranks));
  SG_TRY(keys_line(*out, f, what, 2, SG_AUTH_HARNESS));
  for (int i = 0; i < nranks; i++) SG_TRY(keys_line(*out, f, what, i + 3, i));
fail:
  if (rc < 0) sg_keys_destroy(out);
  return rc;
}

int sg_keys_load(sg_keys_t **out, const char *path, int nranks) {
  int rc = 0;
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (!f) return sg_err_set(SG_EIO, "%s: cannot open the key file: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & 077))
    rc = sg_err_set(SG_EIO, "%s: the key file must be this user's and mode 0600", path);
  else rc = keys_read(out, f, path, nranks);
  fclose(f);
  return rc;
}

int sg_keys_load_text(sg_keys_t **out, const char *text, size_t len, const char *what,
                      int nranks) {
  *out = NULL;
  FILE *f = len ? fmemopen((void *)text, len, "r") : NULL;
  if (!f) return sg_err_set(SG_EPROTO, "%s: no keys", what);
  int rc = keys_read(out, f, what, nranks);
  fclose(f);
  return rc;
}

/* ---- CURVE on a socket -------------------------------------------------- */

int sg_curve_server(void *sock, const sg_keys_t *k, int self) {
  int one = 1;
  const char *sec = sg_keys_secret(k, self);
  if (!sec || zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof one) != 0 ||
      zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40) != 0 ||
      zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, "sgdlab", 6) != 0)
    return sg_err_set(SG_EIO, "CURVE server options: %s", zmq_strerror(zmq_errno()));
  return 0;
}

int sg_curve_client(void *sock, const sg_keys_t *k, int self, int server) {
  const char *pub = sg_keys_public(k, self), *sec = sg_keys_secret(k, self);
  const char *srv = sg_keys_public(k, server);
  if (!pub || !sec || !srv || zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, srv, 40) != 0 ||
      zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
      zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40) != 0)
    return sg_err_set(SG_EIO, "CURVE client options: %s", zmq_strerror(zmq_errno()));
  return 0;
}

/* ---- the ZAP handler ----------------------------------------------------- */

struct sg_zap {
  void *ctx, *rep;
  const sg_keys_t *keys;
  pthread_t thread;
  int running;
  atomic_ulong refused;
};

int sg_auth_parse_user(const char *u) {
  if (!u) return SG_AUTH_UNKNOWN;
  if (!strcmp(u, "h")) return SG_AUTH_HARNESS;
  if (u[0] != 'r' || u[1] < '0' || u[1] > '9' || strlen(u) > 9) return SG_AUTH_UNKNOWN;
  char *end;
  long r = strtol(u + 1, &end, 10);
  return *end ? SG_AUTH_UNKNOWN : (int)r;
}

int sg_auth_sender(void *msg) {
  const char *u = zmq_msg_gets((zmq_msg_t *)msg, "User-Id");
  if (!u || !*u) return SG_AUTH_NONE;
  return sg_auth_parse_user(u);
}

static int zap_send(void *s, const void *data, size_t len, int more) {
  return zmq_send(s, data, len, more ? ZMQ_SNDMORE : 0) < 0 ? -1 : 0;
}

/* Answer one request (frames already read into f[]/fl[]). */
static void zap_answer(sg_zap_t *z, zmq_msg_t *f, int nf) {
  const char *code = "400", *text = "not a key of this run";
  char user[16] = "";
  int ok = nf == 7 && zmq_msg_size(&f[0]) == 3 && !memcmp(zmq_msg_data(&f[0]), "1.0", 3) &&
           zmq_msg_size(&f[5]) == 5 && !memcmp(zmq_msg_data(&f[5]), "CURVE", 5) &&
           zmq_msg_size(&f[6]) == 32;
  if (ok) {
    char pub[SG_KEY_Z85];
    zmq_z85_encode(pub, zmq_msg_data(&f[6]), 32);
    int who = sg_keys_who(z->keys, pub);
    if (who == SG_AUTH_HARNESS) snprintf(user, sizeof user, "h");
    else if (who >= 0) snprintf(user, sizeof user, "r%d", who);
    if (user[0]) code = "200", text = "OK";
  }
  if (!user[0]) atomic_fetch_add(&z->refused, 1);
  const void *rid = nf > 1 ? zmq_msg_data(&f[1]) : "";
  size_t rlen = nf > 1 ? zmq_msg_size(&f[1]) : 0;
  if (zap_send(z->rep, "1.0", 3, 1) || zap_send(z->rep, rid, rlen, 1) ||
      zap_send(z->rep, code, 3, 1) || zap_send(z->rep, text, strlen(text), 1) ||
      zap_send(z->rep, user, strlen(user), 1) || zap_send(z->rep, "", 0, 0))
    return; /* the context is going away */
}

static void *zap_main(void *arg) {
  sg_zap_t *z = arg;
  for (;;) {
    zmq_msg_t f[8];
    int nf = 0, more = 1, err = 0;
    while (more) { /* read one request; keep at most 8 frames */
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, z->rep, 0) < 0) {
        zmq_msg_close(&m);
        if (zmq_errno() == EINTR) continue;
        err = 1;
        break;
      }
      more = zmq_msg_more(&m);
      if (nf < 8) f[nf++] = m;
      else zmq_msg_close(&m);
    }
    if (!err) zap_answer(z, f, nf);
    for (int i = 0; i < nf; i++) zmq_msg_close(&f[i]);
    if (err) break; /* ETERM: the context is shutting down */
  }
  int zero = 0;
  zmq_setsockopt(z->rep, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(z->rep);
  return NULL;
}

int sg_zap_start(sg_zap_t **out, void *zctx, const sg_keys_t *k) {
  *out = NULL;
  sg_zap_t *z = calloc(1, sizeof *z);
  if (!z) return sg_err_set(SG_ENOMEM, "zap: no memory");
  z->ctx = zctx;
  z->keys = k;
  if (!(z->rep = zmq_socket(zctx, ZMQ_REP)) || zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
    int rc = sg_err_set(SG_EIO, "zap: cannot bind %s: %s", ZAP_ENDPOINT, zmq_strerror(zmq_errno()));
    if (z->rep) zmq_close(z->rep);
    free(z);
    return rc;
  }
  if (pthread_create(&z->thread, NULL, zap_main, z) != 0) {
    zmq_close(z->rep);
    free(z);
    return sg_err_set(SG_EIO, "zap: cannot start its thread");
  }
  z->running = 1;
  *out = z;
  return 0;
}

unsigned long sg_zap_refused(const sg_zap_t *z) { return z ? atomic_load(&z->refused) : 0; }

void sg_zap_stop(sg_zap_t **pz) {
  if (!pz || !*pz) return;
  sg_zap_t *z = *pz;
  if (z->running) {
    zmq_ctx_shutdown(z->ctx); /* the thread's blocking receive returns ETERM */
    pthread_join(z->thread, NULL);
  }
  free(z);
  *pz = NULL;
}
