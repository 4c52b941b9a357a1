/* model_embed.c - see model_embed.h. */
#include "model_embed.h"

#include "err.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sg_embed {
  int F, E, H, max_rows;
  int64_t R;
  float *x, *a, *g, *gx; /* n x FE input, n x H hidden, n x H grad, n x FE */
  int64_t *rowof;        /* n x F table row of each (row, field) */
  /* the batch functions' buffers (max_rows rows) */
  uint64_t *keys; /* n x F */
  int64_t *rows;  /* distinct rows, ascending */
  float *rg, *dg; /* rows x E row gradients; dense_len dense gradient */
};

static uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int sg_embed_new(sg_embed_t **out, int F, int64_t R, int E, int H,
                 int max_rows, char *err, size_t errlen) {
  *out = NULL;
  const char *bad = F < 1 || F > 256               ? "fields must be in [1, 256]"
                    : R < 1 || R > (1ll << 30)     ? "table_rows must be in [1, 2^30]"
                    : E < 1 || E > 1024            ? "embed_dim must be in [1, 1024]"
                    : H < 1 || H > 4096            ? "hidden must be in [1, 4096]"
                    : max_rows < 1                 ? "batch rows must be >= 1"
                                                   : NULL;
  if (bad) {
    snprintf(err, errlen, "model embedding: %s", bad);
    return -1;
  }
  sg_embed_t *m = calloc(1, sizeof *m);
  if (!m) return -1;
  m->F = F, m->R = R, m->E = E, m->H = H, m->max_rows = max_rows;
  size_t n = (size_t)max_rows, fe = (size_t)F * (size_t)E;
  m->x = malloc(n * fe * sizeof(float));
  m->gx = malloc(n * fe * sizeof(float));
  m->a = malloc(n * (size_t)H * sizeof(float));
  m->g = malloc(n * (size_t)H * sizeof(float));
  m->rowof = malloc(n * (size_t)F * sizeof(int64_t));
  m->keys = malloc(n * (size_t)F * sizeof(uint64_t));
  m->rows = malloc(n * (size_t)F * sizeof(int64_t));
  m->rg = malloc(n * fe * sizeof(float));
  m->dg = malloc(sg_embed_dense_len(m) * sizeof(float));
  if (!m->x || !m->gx || !m->a || !m->g || !m->rowof || !m->keys || !m->rows || !m->rg ||
      !m->dg) {
    sg_embed_destroy(&m);
    snprintf(err, errlen, "model embedding: out of memory");
    return -1;
  }
  *out = m;
  return 0;
}

void sg_embed_destroy(sg_embed_t **mp) {
  if (!mp || !*mp) return;
  sg_embed_t *m = *mp;
  free(m->x), free(m->gx), free(m->a), free(m->g), free(m->rowof);
  free(m->keys), free(m->rows), free(m->rg), free(m->dg);
  free(m);
  *mp = NULL;
}

size_t sg_embed_dense_len(const sg_embed_t *m) {
  size_t fe = (size_t)m->F * (size_t)m->E, H = (size_t)m->H;
  return H * fe + H + 2 * H + 2;
}

size_t sg_embed_nparams(const sg_embed_t *m) {
  return sg_embed_dense_len(m) + (size_t)m->R * (size_t)m->E;
}

int64_t sg_embed_row(const sg_embed_t *m, int field, uint64_t key) {
  return (int64_t)(mix64(mix64((uint64_t)field) ^ key) % (uint64_t)m->R);
}

static float unif(uint64_t *s) {
  *s = mix64(*s);
  return (float)((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

void sg_embed_init(const sg_embed_t *m, uint64_t seed, float *p) {
  size_t fe = (size_t)m->F * (size_t)m->E, H = (size_t)m->H;
  uint64_t s = seed ^ 0x656d626564ull;
  float l1 = sqrtf(6.0f / (float)fe), l2 = sqrtf(6.0f / (float)H);
  memset(p, 0, sg_embed_dense_len(m) * sizeof(float));
  for (size_t i = 0; i < H * fe; i++) p[i] = l1 * unif(&s);
  float *w2 = p + H * fe + H;
  for (size_t i = 0; i < 2 * H; i++) w2[i] = l2 * unif(&s);
  float *t = p + sg_embed_dense_len(m);
  for (size_t i = 0; i < (size_t)m->R * (size_t)m->E; i++)
    t[i] = 0.05f * unif(&s);
}

/* Forward of one row i: x, a filled; returns the 2 logits in z. */
static void fwd_row(sg_embed_t *m, const float *p, int i, float z[2]) {
  size_t fe = (size_t)m->F * (size_t)m->E, H = (size_t)m->H;
  const float *W1 = p, *b1 = p + H * fe, *W2 = b1 + H, *b2 = W2 + 2 * H;
  const float *tab = p + sg_embed_dense_len(m);
  float *x = m->x + (size_t)i * fe, *a = m->a + (size_t)i * H;
  for (int f = 0; f < m->F; f++)
    memcpy(x + (size_t)f * m->E,
           tab + (size_t)m->rowof[(size_t)i * m->F + f] * m->E,
           (size_t)m->E * sizeof(float));
  for (size_t h = 0; h < H; h++) {
    float s = b1[h];
    for (size_t k = 0; k < fe; k++) s += W1[h * fe + k] * x[k];
    a[h] = s > 0 ? s : 0;
  }
  for (int c = 0; c < 2; c++) {
    float s = b2[c];
    for (size_t h = 0; h < H; h++) s += W2[(size_t)c * H + h] * a[h];
    z[c] = s;
  }
}

/* Backward of one row: dz -> dense grads (accumulated), gx row. */
static void bwd_row(sg_embed_t *m, const float *p, int i, const float dz[2],
                    float *dg) {
  size_t fe = (size_t)m->F * (size_t)m->E, H = (size_t)m->H;
  const float *W1 = p, *W2 = p + H * fe + H;
  float *dW1 = dg, *db1 = dg + H * fe, *dW2 = db1 + H, *db2 = dW2 + 2 * H;
  const float *x = m->x + (size_t)i * fe, *a = m->a + (size_t)i * H;
  float *gx = m->gx + (size_t)i * fe;
  memset(gx, 0, fe * sizeof(float));
  for (int c = 0; c < 2; c++) {
    db2[c] += dz[c];
    for (size_t h = 0; h < H; h++) dW2[(size_t)c * H + h] += dz[c] * a[h];
  }
  for (size_t h = 0; h < H; h++) {
    if (a[h] <= 0) continue;
    float gh = dz[0] * W2[h] + dz[1] * W2[H + h];
    db1[h] += gh;
    for (size_t k = 0; k < fe; k++) {
      dW1[h * fe + k] += gh * x[k];
      gx[k] += gh * W1[h * fe + k];
    }
  }
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Distinct rows, ascending, then each (row, field) embedding gradient
 * added into its row's slot in row order i, field order f. */
static void scatter_rows(sg_embed_t *m, int n, int64_t *rows, size_t *nrows,
                         float *rg) {
  size_t nf = (size_t)n * (size_t)m->F, E = (size_t)m->E, k = 0;
  memcpy(rows, m->rowof, nf * sizeof(int64_t));
  qsort(rows, nf, sizeof(int64_t), cmp_i64);
  for (size_t j = 0; j < nf; j++)
    if (j == 0 || rows[j] != rows[k - 1]) rows[k++] = rows[j];
  *nrows = k;
  memset(rg, 0, k * E * sizeof(float));
  for (size_t j = 0; j < nf; j++) {
    const int64_t *at = bsearch(&m->rowof[j], rows, k, sizeof(int64_t), cmp_i64);
    float *dst = rg + (size_t)(at - rows) * E;
    const float *src = m->gx + j * E;
    for (size_t e = 0; e < E; e++) dst[e] += src[e];
  }
}

int sg_embed_grad(sg_embed_t *m, const float *p, int n, const uint64_t *keys,
                  const int32_t *y, float *dg, int64_t *rows, size_t *nrows,
                  float *rg, double *loss, int64_t *correct) {
  if (n < 1 || n > m->max_rows) return -1;
  for (size_t j = 0; j < (size_t)n * (size_t)m->F; j++)
    m->rowof[j] = sg_embed_row(m, (int)(j % (size_t)m->F), keys[j]);
  memset(dg, 0, sg_embed_dense_len(m) * sizeof(float));
  double sum = 0;
  for (int i = 0; i < n; i++) {
    float z[2];
    fwd_row(m, p, i, z);
    float mx = z[0] > z[1] ? z[0] : z[1];
    double e0 = exp((double)(z[0] - mx)), e1 = exp((double)(z[1] - mx));
    double lse = mx + log(e0 + e1);
    sum += lse - z[y[i] ? 1 : 0];
    if (correct && (z[1] > z[0] ? 1 : 0) == (y[i] ? 1 : 0)) (*correct)++;
    float dz[2] = {(float)(e0 / (e0 + e1)) / (float)n,
                   (float)(e1 / (e0 + e1)) / (float)n};
    dz[y[i] ? 1 : 0] -= 1.0f / (float)n;
    bwd_row(m, p, i, dz, dg);
  }
  scatter_rows(m, n, rows, nrows, rg);
  *loss = sum / n;
  return 0;
}

/* ---- batches (model_embed.h) ------------------------------------------ */

int sg_embed_fields(const sg_embed_t *m) { return m->F; }
int sg_embed_dim(const sg_embed_t *m) { return m->E; }
int64_t sg_embed_table_rows(const sg_embed_t *m) { return m->R; }

/* m->keys and m->rowof from a CSR batch of exactly F entries per row. */
static int batch_keys(sg_embed_t *m, const sg_batch_t *b) {
  if (b->n < 1 || b->n > m->max_rows)
    return sg_err_set(SG_EINVAL, "embedding: batch of %d rows (model sized for %d)", b->n,
                      m->max_rows);
  if (!b->rowptr)
    return sg_err_set(SG_EINVAL, "embedding: needs click data (dataset: clicks)");
  for (int i = 0; i < b->n; i++) {
    int64_t len = b->rowptr[i + 1] - b->rowptr[i];
    if (len != m->F)
      return sg_err_set(SG_EINVAL, "embedding: row %d has %lld keys, the model has %d fields",
                        i, (long long)len, m->F);
    for (int f = 0; f < m->F; f++) {
      uint64_t k = b->col[b->rowptr[i] + f];
      m->keys[(size_t)i * m->F + f] = k;
      m->rowof[(size_t)i * m->F + f] = sg_embed_row(m, f, k);
    }
  }
  return SG_OK;
}

int sg_embed_batch_grad(sg_embed_t *m, const float *p, const sg_batch_t *b, float *grad,
                        double *loss) {
  SG_CHECK(batch_keys(m, b));
  size_t nr = 0, dl = sg_embed_dense_len(m), E = (size_t)m->E;
  if (sg_embed_grad(m, p, b->n, m->keys, b->y, grad, m->rows, &nr, m->rg, loss, NULL))
    return sg_err_set(SG_EINVAL, "embedding: batch of %d rows", b->n);
  memset(grad + dl, 0, (size_t)m->R * E * sizeof(float));
  for (size_t r = 0; r < nr; r++)
    memcpy(grad + dl + (size_t)m->rows[r] * E, m->rg + r * E, E * sizeof(float));
  return SG_OK;
}

int sg_embed_batch_eval(sg_embed_t *m, const float *p, const sg_batch_t *b, double *loss_sum,
                        int64_t *correct) {
  SG_CHECK(batch_keys(m, b));
  for (int i = 0; i < b->n; i++) {
    float z[2];
    fwd_row(m, p, i, z);
    float mx = z[0] > z[1] ? z[0] : z[1];
    double lse = mx + log(exp((double)(z[0] - mx)) + exp((double)(z[1] - mx)));
    *loss_sum += lse - z[b->y[i] ? 1 : 0];
    if (correct && (z[1] > z[0] ? 1 : 0) == (b->y[i] ? 1 : 0)) (*correct)++;
  }
  return SG_OK;
}

/* m->rows[0..*nr): the batch's distinct rows, ascending (after batch_keys). */
static void batch_rows(sg_embed_t *m, int n, size_t *nr) {
  size_t nf = (size_t)n * (size_t)m->F, k = 0;
  memcpy(m->rows, m->rowof, nf * sizeof(int64_t));
  qsort(m->rows, nf, sizeof(int64_t), cmp_i64);
  for (size_t j = 0; j < nf; j++)
    if (j == 0 || m->rows[j] != m->rows[k - 1]) m->rows[k++] = m->rows[j];
  *nr = k;
}

int sg_embed_batch_coords(sg_embed_t *m, const sg_batch_t *b, uint32_t *idx, size_t cap,
                          size_t *n, size_t *nrows) {
  if ((uint64_t)sg_embed_nparams(m) > UINT32_MAX)
    return sg_err_set(SG_EUNSUPPORTED, "embedding: %zu parameters do not fit 32-bit indices",
                      sg_embed_nparams(m));
  SG_CHECK(batch_keys(m, b));
  size_t nr = 0, dl = sg_embed_dense_len(m), E = (size_t)m->E;
  batch_rows(m, b->n, &nr);
  *n = dl + nr * E;
  if (nrows) *nrows = nr;
  if (cap < *n)
    return sg_err_set(SG_ERANGE, "embedding coords: %zu indices, room for %zu", *n, cap);
  for (size_t i = 0; i < dl; i++) idx[i] = (uint32_t)i;
  for (size_t r = 0; r < nr; r++)
    for (size_t e = 0; e < E; e++) idx[dl + r * E + e] = (uint32_t)(dl + (size_t)m->rows[r] * E + e);
  return SG_OK;
}

int sg_embed_batch_grad_at(sg_embed_t *m, const float *p, const sg_batch_t *b,
                           const uint32_t *idx, size_t n, float *gval, double *loss) {
  SG_CHECK(batch_keys(m, b));
  size_t nr = 0, dl = sg_embed_dense_len(m), E = (size_t)m->E, np = sg_embed_nparams(m);
  if (sg_embed_grad(m, p, b->n, m->keys, b->y, m->dg, m->rows, &nr, m->rg, loss, NULL))
    return sg_err_set(SG_EINVAL, "embedding: batch of %d rows", b->n);
  size_t r = 0; /* walks m->rows along idx */
  for (size_t j = 0; j < n; j++) {
    if (j && idx[j] <= idx[j - 1])
      return sg_err_set(SG_EINVAL, "embedding grad: idx[%zu] = %u after %u (not increasing)", j,
                        (unsigned)idx[j], (unsigned)idx[j - 1]);
    if (idx[j] >= np)
      return sg_err_set(SG_ERANGE, "embedding grad: idx[%zu] = %u >= %zu parameters", j,
                        (unsigned)idx[j], np);
    if (idx[j] < dl) {
      gval[j] = m->dg[idx[j]];
      continue;
    }
    int64_t row = (int64_t)((idx[j] - dl) / E);
    while (r < nr && m->rows[r] < row) r++;
    gval[j] = r < nr && m->rows[r] == row ? m->rg[r * E + (idx[j] - dl) % E] : 0.0f;
  }
  return SG_OK;
}
