/* share.c - the process-wide table of share.h. */
#include "share.h"

#include <pthread.h>
#include <smpi/smpi.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { SHARE_MAX = 64 };

static struct {
  char *key;
  void *obj;
} table[SHARE_MAX];
static int used;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *sg_share_get(const char *key) {
  void *obj = NULL;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < used && !obj; i++)
    if (!strcmp(table[i].key, key)) obj = table[i].obj;
  pthread_mutex_unlock(&lock);
  return obj;
}

int sg_share_put(const char *key, void *obj) {
  int rc = -1;
  pthread_mutex_lock(&lock);
  if (used < SHARE_MAX && (table[used].key = strdup(key))) {
    table[used++].obj = obj;
    rc = 0;
  }
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Staged copies: one malloc each, a header and then the message.  A
 * hash of the message's address picks one of STAGE_BUCKETS chains of the
 * copies SMPI has not copied yet, so the copy callback finds whether a
 * source buffer is one by reading only staged copies. */
enum { STAGE_BUCKETS = 1 << 18 };
typedef struct stage {
  struct stage *next;
  int *delivered; /* the sender's count, +1 once copied */
  int done;
  max_align_t data[]; /* the message */
} stage_t;
static stage_t *stages[STAGE_BUCKETS];

static size_t stage_bucket(const void *p) {
  return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 46) & (STAGE_BUCKETS - 1);
}

static stage_t *stage_of(void *copy) { return (stage_t *)((char *)copy - offsetof(stage_t, data)); }

void *sg_share_stage(const void *buf, size_t n, const size_t *own, int nown, int *delivered) {
  stage_t *s = malloc(sizeof *s + n);
  if (!s) return NULL;
  char *to = (char *)s->data; /* own[] counts bytes, not max_align_t */
  if (nown < 0) memcpy(to, buf, n);
  for (int i = 0; i < nown; i++) /* the rest: folded, never read (msgbuf.h) */
    memcpy(to + own[2 * i], (const char *)buf + own[2 * i], own[2 * i + 1] - own[2 * i]);
  s->delivered = delivered;
  s->done = 0;
  pthread_mutex_lock(&lock);
  size_t b = stage_bucket(s->data);
  s->next = stages[b];
  stages[b] = s;
  pthread_mutex_unlock(&lock);
  return s->data;
}

int sg_share_stage_done(void *copy) { return stage_of(copy)->done; }

void sg_share_stage_free(void *copy) {
  if (copy && sg_share_stage_done(copy)) free(stage_of(copy));
}

/* SMPI's copy of a message (SimGrid 3.32 exports it as C++ only) */
extern void smpi_copy_buffer(smx_activity_t comm, void *buff, size_t n) __asm__(
    "_Z30smpi_comm_copy_buffer_callbackPN7simgrid6kernel8activity8CommImplEPvm");

static void stage_copy(smx_activity_t comm, void *buff, size_t n) {
  smpi_copy_buffer(comm, buff, n);
  pthread_mutex_lock(&lock);
  for (stage_t **q = &stages[stage_bucket(buff)]; *q; q = &(*q)->next)
    if ((void *)(*q)->data == buff) {
      stage_t *s = *q;
      *q = s->next;
      s->done = 1;
      ++*s->delivered;
      break;
    }
  pthread_mutex_unlock(&lock);
}
void sg_share_stage_hook(void) {
  static int hooked;
  pthread_mutex_lock(&lock);
  if (!hooked) smpi_comm_set_copy_data_callback(stage_copy);
  hooked = 1;
  pthread_mutex_unlock(&lock);
}
