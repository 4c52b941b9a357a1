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

int sg_err_set(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_msg, sizeof err_msg, fmt, ap);
  va_end(ap);
  err_trace[0] = '\0';
  blame_rank = -1; /* a new message: the old blame was about the old one */
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
