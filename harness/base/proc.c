/* proc.c - /proc/PID/stat, read in one place (proc.h). */
#include "proc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sg_proc_stat(pid_t pid, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = pid > 0 ? fopen(path, "r") : NULL;
  if (!f) return NULL;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && rp[2] ? rp + 2 : NULL;
}

const char *sg_proc_field(const char *p, int k) {
  for (int field = 3; p && field < k; field++)
    if ((p = strchr(p, ' '))) p++;
  return p && *p ? p : NULL;
}

int sg_proc_state(pid_t pid) {
  char buf[512];
  const char *s = sg_proc_stat(pid, buf, sizeof buf);
  return s ? s[0] : 0;
}

int sg_proc_stopped(pid_t pid) {
  int c = sg_proc_state(pid);
  return c == 'T' || c == 't';
}

unsigned long long sg_proc_start(pid_t pid) {
  char buf[1024];
  const char *p = sg_proc_field(sg_proc_stat(pid, buf, sizeof buf), 22);
  return p ? strtoull(p, NULL, 10) : 0;
}
