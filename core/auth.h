/* auth.h - who may talk to a run: the run's keys, CURVE, and the ZAP
 * allow-list.
 *
 * Threat model (docs/security.md): the user who runs sgdlab is trusted;
 * other local users and the network are not.  Every run gets fresh keys:
 * one CurveZMQ key pair per rank and one for the harness, made from the
 * kernel's random source by the harness and handed to the ranks in a file
 * of mode 0600 inside the run's 0700 directory (never argv, never the
 * environment).
 *
 *   tcp sockets   (rank data, rendezvous, records, when the run uses tcp):
 *                 CURVE.  The binding side is the CURVE server with its own
 *                 key; a ZAP handler in the same process admits a client
 *                 only if its public key is one of the run's, and names it
 *                 (User-Id "r<rank>" or "h" for the harness).  A receiver
 *                 takes the sender's identity from that, never from a
 *                 header field.  A peer without the run's keys cannot even
 *                 finish the handshake, so it can send nothing.
 *   ipc sockets   live in the run's 0700 directory: only the user can
 *                 connect (the kernel checks it); no CURVE needed.
 *   inproc        threads of one process (tests): nothing to check.
 *
 * `zmq_auth: none` turns CURVE off on tcp, to measure its cost on a host
 * where no one else can reach the ports.
 */
#ifndef SG_AUTH_H
#define SG_AUTH_H

#include <stddef.h>

#define SG_KEY_Z85 41          /* 40 Z85 characters + NUL */
#define SG_AUTH_HARNESS (-2)   /* the harness's identity */
#define SG_AUTH_NONE (-3)      /* the connection was not authenticated */
#define SG_AUTH_UNKNOWN (-4)   /* a key that is not the run's */

typedef struct sg_keys sg_keys_t;

/* Fresh key pairs for `nranks` ranks and the harness.  Caller owns. */
int sg_keys_new(sg_keys_t **out, int nranks);
/* Write them to `path`, created anew with mode 0600 (never follows or
 * reuses an existing file). */
int sg_keys_save(const sg_keys_t *k, const char *path);
/* Read a key file written by sg_keys_save for a run of `nranks` ranks;
 * the file must belong to this user and be readable by no one else. */
int sg_keys_load(sg_keys_t **out, const char *path, int nranks);
/* The same from the text of such a file in memory (received over a
 * launcher's private channel, stage.h); `what` names it in errors. */
int sg_keys_load_text(sg_keys_t **out, const char *text, size_t len, const char *what,
                      int nranks);
void sg_keys_destroy(sg_keys_t **k);
int sg_keys_nranks(const sg_keys_t *k);
/* Z85 keys of `who` (a rank, or SG_AUTH_HARNESS).  The secret is NULL
 * where the key text gave "-" for it: a rank's stage carries only that
 * rank's own secret (stage.h). */
const char *sg_keys_public(const sg_keys_t *k, int who);
const char *sg_keys_secret(const sg_keys_t *k, int who);
/* Which identity a Z85 public key belongs to, or SG_AUTH_UNKNOWN. */
int sg_keys_who(const sg_keys_t *k, const char *public_z85);

/* Make `sock` (about to bind) a CURVE server with `self`'s key. */
int sg_curve_server(void *sock, const sg_keys_t *k, int self);
/* Make `sock` (about to connect to `server`) a CURVE client as `self`. */
int sg_curve_client(void *sock, const sg_keys_t *k, int self, int server);

/* The ZAP handler of one zmq context: a thread that answers the context's
 * authentication requests, admitting only the run's public keys.  Start
 * it before any CURVE server socket of the context binds.  Stop it after
 * every other socket of the context is closed: sg_zap_stop shuts the
 * context down (zmq_ctx_shutdown) and joins the thread; the caller then
 * terms the context.  Refused handshakes are counted. */
typedef struct sg_zap sg_zap_t;
int sg_zap_start(sg_zap_t **out, void *zctx, const sg_keys_t *k);
unsigned long sg_zap_refused(const sg_zap_t *z);
void sg_zap_stop(sg_zap_t **z);

/* The authenticated sender of a message received on a CURVE socket: a
 * rank, SG_AUTH_HARNESS, or SG_AUTH_NONE when the message carries no
 * User-Id (ipc, inproc, or CURVE off).  `msg` is a zmq_msg_t *. */
int sg_auth_sender(void *msg);

/* Parse a User-Id as the ZAP handler writes it ("r12", "h"); for tests
 * and fuzzing.  Returns the identity or SG_AUTH_UNKNOWN. */
int sg_auth_parse_user(const char *user_id);

#endif
