#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_msg[1024];
static _Thread_local char err_trace[512];
static _Thread_local int blame_rank = -1, blame_reason = SG_BLAME_NONE;

const char *sg_errname(int code) {
  switch (code) {
  case SG_OK: return "SG_OK";
#define SG_ERR_NAME_(name, msg) case SG_E##name: return "SG_E" #name;
  SG_ERRNO_MAP(SG_ERR_NAME_)
#undef SG_ERR_NAME_
  default: return "unknown error";
  }
}

const char *sg_strerror(int code) {
  switch (code) {
  case SG_OK: return "success";
#define SG_ERR_STR_(name, msg) case SG_E##name: return msg;
  SG_ERRNO_MAP(SG_ERR_STR_)
#undef SG_ERR_STR_
  default: return "unknown error";
  }
}

/* Length of the UTF-8 sequence at p that is a printable character (2..4
 * bytes, C1 controls U+0080..U+009F excluded), else 0. */
static size_t utf8_printable(const unsigned char *p) {
  size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (!n || p[0] > 0xf4) return 0;
  for (size_t i = 1; i < n; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0) return 0;          /* C1 control */
  if (n == 3 && p[0] == 0xe0 && p[1] < 0xa0) return 0;          /* overlong */
  if (n == 3 && p[0] == 0xed && p[1] >= 0xa0) return 0;         /* surrogate */
  if (n == 4 && ((p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))) return 0;
  return n;
}

char *sg_printable(char *out, size_t cap, const char *in) {
  const unsigned char *p = (const unsigned char *)in;
  size_t len = 0;
  while (*p) {
    char piece[8];
    size_t n = 1;
    if (*p >= 0x20 && *p < 0x7f) piece[0] = (char)*p;
    else if (*p >= 0x80 && (n = utf8_printable(p))) memcpy(piece, p, n);
    else if (*p == '\n' || *p == '\t' || *p == '\r')
      n = (size_t)snprintf(piece, sizeof piece, "\\%c", *p == '\n' ? 'n' : *p == '\t' ? 't' : 'r');
    else n = (size_t)snprintf(piece, sizeof piece, "\\x%02x", *p);
    if (len + n >= cap) break;
    memcpy(out + len, piece, n);
    len += n;
    p += *p >= 0x80 && utf8_printable(p) ? n : 1;
  }
  out[len] = '\0';
  return out;
}

int sg_err_set(int code, const char *fmt, ...) {
  char raw[sizeof err_msg];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  sg_printable(err_msg, sizeof err_msg, raw);
  err_trace[0] = '\0';
  blame_rank = -1; /* a new message: the old blame was about the old one */
  blame_reason = SG_BLAME_NONE;
  return code;
}

int sg_err_set_lines(int code, const char *lines) {
  snprintf(err_msg, sizeof err_msg, "%s", lines);
  err_trace[0] = '\0';
  blame_rank = -1;
  blame_reason = SG_BLAME_NONE;
  return code;
}

const char *sg_err_msg(void) { return err_msg; }
const char *sg_err_trace(void) { return err_trace; }

void sg_err_clear(void) {
  err_msg[0] = '\0';
  err_trace[0] = '\0';
  blame_rank = -1;
  blame_reason = SG_BLAME_NONE;
}

void sg_err_save(sg_err_saved_t *e) {
  _Static_assert(sizeof e->msg == sizeof err_msg && sizeof e->trace == sizeof err_trace,
                 "sg_err_saved_t holds the whole error");
  memcpy(e->msg, err_msg, sizeof err_msg);
  memcpy(e->trace, err_trace, sizeof err_trace);
  e->blame_rank = blame_rank;
  e->blame_reason = blame_reason;
}

void sg_err_restore(const sg_err_saved_t *e) {
  memcpy(err_msg, e->msg, sizeof err_msg);
  memcpy(err_trace, e->trace, sizeof err_trace);
  blame_rank = e->blame_rank;
  blame_reason = e->blame_reason;
}

int sg_err_blame(int code, int rank, int reason) {
  int known = rank >= 0 && reason > SG_BLAME_NONE && reason < SG_BLAME_END_;
  blame_rank = known ? rank : -1;
  blame_reason = known ? reason : SG_BLAME_NONE;
  return code;
}

int sg_err_blamed(int *reason) {
  if (reason) *reason = blame_reason;
  return blame_rank;
}

const char *sg_blame_name(int reason) {
  static const char *const names[SG_BLAME_END_] = {"none", "self", "peer_timeout", "peer_closed",
                                                   "bad_message"};
  return reason >= 0 && reason < SG_BLAME_END_ ? names[reason] : "?";
}

void sg_err_trace_push(const char *file, int line) {
  const char *base = strrchr(file, '/');
  size_t len = strlen(err_trace);
  if (len + 40 >= sizeof err_trace) return;
  snprintf(err_trace + len, sizeof err_trace - len, "%s%s:%d",
           len ? " <- " : "", base ? base + 1 : file, line);
}
