/* dataset.c - what every loader shares: allocation, release, densify. */
#include "dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "rng.h"

static const char *file_kind(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISSOCK(m)) return "a socket";
  return "not a plain file";
}

int sg_data_open(const char *path, uint64_t *size) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(errno));
  if (fstat(fd, &st) < 0) {
    int e = errno;
    close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return sg_err_set(SG_EIO, "%s: not a regular file (%s); data files must be regular files",
                      path, file_kind(st.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
    int e = errno;
    close(fd);
    return sg_err_set(SG_EIO, "%s: cannot open: %s", path, strerror(e));
  }
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}

/* A "Key:   N kB" line of a /proc file, in bytes; -1 when absent. */
static double proc_kb(const char *path, const char *key) {
  char line[256];
  double v = -1;
  size_t kl = strlen(key);
  FILE *f = fopen(path, "re");
  unsigned long long kb;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, key, kl) && sscanf(line + kl, ": %llu kB", &kb) == 1) v = 1024.0 * (double)kb;
  if (f) fclose(f);
  return v;
}

double sg_data_mem_available(void) {
  double have = proc_kb("/proc/meminfo", "MemAvailable");
  static const struct { int res; const char *used; } lims[] = {{RLIMIT_AS, "VmSize"},
                                                                {RLIMIT_DATA, "VmData"}};
  for (size_t i = 0; i < sizeof lims / sizeof lims[0]; i++) {
    struct rlimit rl;
    if (getrlimit(lims[i].res, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
    double used = proc_kb("/proc/self/status", lims[i].used), left = (double)rl.rlim_cur;
    left -= used > 0 ? used : 0;
    if (left < 0) left = 0;
    if (have < 0 || left < have) have = left;
  }
  return have;
}

sg_dataset_t *sg_dataset_alloc_(void) { return calloc(1, sizeof(sg_dataset_t)); }

void sg_dataset_destroy(sg_dataset_t **pds) {
  if (!pds || !*pds) return;
  sg_dataset_t *ds = *pds;
  if (ds->map_) {
    munmap(ds->map_, ds->map_len_);
    ds->x = NULL;
    ds->y = NULL;
  }
  free(ds->x);
  free(ds->rowptr);
  free(ds->col);
  free(ds->val);
  free(ds->y);
  free(ds);
  *pds = NULL;
}

int sg_dataset_densify(sg_dataset_t *ds) {
  if (!sg_dataset_sparse(ds)) return SG_OK;
  if (ds->d > 0 && (uint64_t)ds->n > (SIZE_MAX / sizeof(float)) / (uint64_t)ds->d)
    return sg_err_set(SG_ENOMEM, "dense copy of %lld x %lld is too large",
                      (long long)ds->n, (long long)ds->d);
  float *x = calloc((size_t)ds->n * (size_t)ds->d + 1, sizeof(float));
  if (!x)
    return sg_err_set(SG_ENOMEM, "dense copy of %lld x %lld: out of memory",
                      (long long)ds->n, (long long)ds->d);
  for (int64_t i = 0; i < ds->n; i++) {
    float *row = x + (size_t)i * (size_t)ds->d;
    for (int64_t k = ds->rowptr[i]; k < ds->rowptr[i + 1]; k++)
      row[ds->col[k]] += ds->val[k];
  }
  free(ds->rowptr);
  free(ds->col);
  free(ds->val);
  ds->rowptr = NULL;
  ds->col = NULL;
  ds->val = NULL;
  ds->max_row_nnz = 0;
  ds->x = x;
  return SG_OK;
}

/* A CSR dataset of the rows of src where pick[i] == want, in order. */
static int csr_subset(sg_dataset_t **out, const sg_dataset_t *src, const unsigned char *pick,
                      int want, int64_t rows) {
  int64_t nnz = 0, r = 0;
  for (int64_t i = 0; i < src->n; i++)
    if (pick[i] == want) nnz += src->rowptr[i + 1] - src->rowptr[i];
  sg_dataset_t *ds = sg_dataset_alloc_();
  if (!ds) return SG_ENOMEM;
  ds->n = rows;
  ds->d = src->d;
  ds->classes = src->classes;
  ds->rowptr = malloc((size_t)(rows + 1) * sizeof *ds->rowptr);
  ds->col = malloc((size_t)(nnz + 1) * sizeof *ds->col);
  ds->val = malloc((size_t)(nnz + 1) * sizeof *ds->val);
  ds->y = malloc((size_t)rows * sizeof *ds->y);
  if (!ds->rowptr || !ds->col || !ds->val || !ds->y) {
    sg_dataset_destroy(&ds);
    return sg_err_set(SG_ENOMEM, "holdout: %lld rows", (long long)rows);
  }
  ds->rowptr[0] = 0;
  for (int64_t i = 0; i < src->n; i++) {
    if (pick[i] != want) continue;
    int64_t a = src->rowptr[i], len = src->rowptr[i + 1] - a, at = ds->rowptr[r];
    memcpy(ds->col + at, src->col + a, (size_t)len * sizeof *ds->col);
    memcpy(ds->val + at, src->val + a, (size_t)len * sizeof *ds->val);
    if (len > ds->max_row_nnz) ds->max_row_nnz = len;
    ds->y[r] = src->y[i];
    ds->rowptr[++r] = at + len;
  }
  *out = ds;
  return SG_OK;
}

int sg_dataset_holdout(sg_dataset_t **train, sg_dataset_t **test, double frac, uint64_t seed) {
  sg_dataset_t *src = *train, *tr = NULL, *te = NULL;
  int rc = SG_OK;
  if (!sg_dataset_sparse(src)) return sg_err_set(SG_EINVAL, "holdout: needs the CSR rows");
  if (src->n < 2 || !(frac > 0 && frac < 1))
    return sg_err_set(SG_ECONFIG, "holdout: %g of %lld rows leaves no training or no test row",
                      frac, (long long)src->n);
  int64_t k = (int64_t)llround(frac * (double)src->n);
  if (k < 1) k = 1;
  if (k > src->n - 1) k = src->n - 1;
  uint32_t *perm = malloc((size_t)src->n * sizeof *perm);
  unsigned char *pick = calloc((size_t)src->n, 1);
  if (!perm || !pick) {
    rc = sg_err_set(SG_ENOMEM, "holdout: %lld rows", (long long)src->n);
    goto fail;
  }
  for (int64_t i = 0; i < src->n; i++) perm[i] = (uint32_t)i;
  sg_rng_t r;
  sg_rng_seed(&r, seed, SG_RNG_HOLDOUT, (uint64_t)src->n);
  for (int64_t i = 0; i < k; i++) { /* partial Fisher-Yates: the first k are the test rows */
    int64_t j = i + (int64_t)sg_rng_below(&r, (uint64_t)(src->n - i));
    uint32_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
    pick[perm[i]] = 1;
  }
  SG_TRY(csr_subset(&tr, src, pick, 0, src->n - k));
  SG_TRY(csr_subset(&te, src, pick, 1, k));
  sg_dataset_destroy(train);
  *train = tr;
  *test = te;
  tr = te = NULL;
fail:
  free(perm);
  free(pick);
  sg_dataset_destroy(&tr);
  sg_dataset_destroy(&te);
  return rc;
}
