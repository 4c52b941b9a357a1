/* share.c - the process-wide table of share.h. */
#include "share.h"

#include <pthread.h>
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
