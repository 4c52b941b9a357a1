/* err.h - the one error convention of sgdlab.
 *
 * Functions return 0 (SG_OK) or a negative SG_E* code.  The codes, their
 * names and messages come from one X-macro table (libuv's UV_ERRNO_MAP).
 * The detail a user needs (file and offset, config key and line, rank and
 * host) goes into a thread-local message with sg_err_set(); SG_CHECK and
 * SG_TRY leave a file:line trail as the error propagates up.  Only main()
 * exits.
 */
#ifndef SG_ERR_H
#define SG_ERR_H

#include <stddef.h>

#define SG_ERRNO_MAP(X)                                          \
  X(NOMEM, "out of memory")                                      \
  X(INVAL, "invalid argument")                                   \
  X(IO, "input/output error")                                    \
  X(FORMAT, "malformed input")                                   \
  X(RANGE, "value out of range")                                 \
  X(CONFIG, "invalid configuration")                             \
  X(TIMEOUT, "deadline exceeded")                                \
  X(PEER, "peer failed")                                         \
  X(PROTO, "protocol error")                                     \
  X(TRUNC, "message truncated")                                  \
  X(UNSUPPORTED, "not supported")                                \
  X(NOTFOUND, "not found")                                       \
  X(INTERRUPTED, "interrupted")                                  \
  X(INTERNAL, "internal error")

enum {
  SG_OK = 0,
  SG_E_BASE_ = -1000,
#define SG_ERR_ENUM_(name, msg) SG_E##name,
  SG_ERRNO_MAP(SG_ERR_ENUM_)
#undef SG_ERR_ENUM_
  SG_E_END_
};

/* "SG_ETIMEOUT" for SG_ETIMEOUT; "unknown error" for anything else. */
const char *sg_errname(int code);
/* "deadline exceeded" for SG_ETIMEOUT. */
const char *sg_strerror(int code);

/* Set the detail message for the error being returned (printf-style).
 * Returns `code` so callers can write `return sg_err_set(SG_EIO, ...)`.
 * Messages quote data (a token of a data file, a config value, a path),
 * so the message is made printable (sg_printable): a terminal escape in
 * a data file never reaches the terminal raw. */
int sg_err_set(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Set the message to lines that were each made printable already (each
 * the message of an sg_err_set), joined by newlines: a parser's report of
 * every error of a file at once.  Returns `code`. */
int sg_err_set_lines(int code, const char *lines);

/* in as one printable line into out (cap > 0, always terminated): control
 * characters (C0, DEL, C1) and bytes that are not UTF-8 become \xHH
 * (newline \n, tab \t, carriage return \r); printable UTF-8 is kept and
 * a backslash stays as is.  Stops at whole characters when out is full.
 * Returns out. */
char *sg_printable(char *out, size_t cap, const char *in);

/* The current thread's detail message ("" if none). */
const char *sg_err_msg(void);
/* The file:line trail appended by SG_CHECK/SG_TRY ("" if none). */
const char *sg_err_trace(void);
void sg_err_clear(void);
void sg_err_trace_push(const char *file, int line);

/* The current thread's error (message, trail, blame), kept across
 * clean-up code that sets and clears errors of its own (a failed run's
 * waits on requests still in flight), so the error that ended the run is
 * the one reported: sg_err_save() at the clean-up's start,
 * sg_err_restore() at its end. */
typedef struct sg_err_saved {
  char msg[1024], trace[512];
  int blame_rank, blame_reason;
} sg_err_saved_t;
void sg_err_save(sg_err_saved_t *e);
void sg_err_restore(const sg_err_saved_t *e);

/* Blame as data: why a failure happened and which rank caused it, next to
 * the message.  A rank's DONE record carries both (records.h), and the
 * harness follows them to the root cause instead of reading the message.
 * sg_err_set() and sg_err_clear() reset the blame, so a blame belongs to
 * the message it was set with and never outlives it. */
enum sg_blame_reason {
  SG_BLAME_NONE = 0,         /* nobody named (no failure, or unknown) */
  SG_BLAME_SELF = 1,         /* the reporting rank's own failure */
  SG_BLAME_PEER_TIMEOUT = 2, /* the peer sent / accepted nothing within the deadline */
  SG_BLAME_PEER_CLOSED = 3,  /* the peer is gone (given up on, connection lost) */
  SG_BLAME_BAD_MESSAGE = 4,  /* the peer sent something malformed or out of protocol */
  SG_BLAME_END_
};

/* Blame `rank` for the error just set, for `reason`; returns `code`, so a
 * failure path reads `return sg_err_blame(sg_err_set(...), peer, why)`. */
int sg_err_blame(int code, int rank, int reason);
/* The blamed rank (-1: none) and, in *reason, why (SG_BLAME_NONE: none). */
int sg_err_blamed(int *reason);
/* "peer_timeout" for SG_BLAME_PEER_TIMEOUT, "?" for an unknown reason. */
const char *sg_blame_name(int reason);

/* Return the error of `expr` to the caller, leaving a file:line trail. */
#define SG_CHECK(expr)                                 \
  do {                                                 \
    int sg_rc_ = (expr);                               \
    if (sg_rc_ < 0) {                                  \
      sg_err_trace_push(__FILE__, __LINE__);           \
      return sg_rc_;                                   \
    }                                                  \
  } while (0)

/* Store the error of `expr` in the local `rc` and jump to `fail`. */
#define SG_TRY(expr)                                   \
  do {                                                 \
    rc = (expr);                                       \
    if (rc < 0) {                                      \
      sg_err_trace_push(__FILE__, __LINE__);           \
      goto fail;                                       \
    }                                                  \
  } while (0)

#endif
