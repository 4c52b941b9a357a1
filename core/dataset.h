/* dataset.h - training and test data in memory.
 *
 * A dataset is n labelled rows of d features, stored either as a dense
 * row-major float matrix (x, n*d) or as CSR (rowptr n+1, col/val); sparse
 * data stays CSR.  Labels are integers 0..classes-1.
 *
 * Loaders:
 *   IDX (MNIST, Fashion-MNIST): gzip or plain, pixels scaled to [0, 1].
 *   LIBSVM text: "label idx:val idx:val ..." with 1-based indices, dense
 *     (every feature listed) or sparse rows; loaded as CSR.
 *   synthetic: seeded Gaussian classes (dense) or seeded sparse rows whose
 *     nonzeros are drawn partly from a per-class feature set (CSR).
 * Errors are SG_EFORMAT with the file and the byte offset (IDX) or file:line
 * (LIBSVM) in sg_err_msg().  Sizes read from a file (IDX header dims,
 * LIBSVM indices) are bounded by what the file can hold or by a fixed
 * maximum before anything is allocated from them.
 */
#ifndef SG_DATASET_H
#define SG_DATASET_H

#include <stddef.h>
#include <stdint.h>

typedef struct sg_dataset {
  int64_t n;       /* rows */
  int64_t d;       /* features */
  int classes;     /* labels are 0..classes-1 */
  float *x;        /* dense: n*d row-major; NULL when sparse */
  int64_t *rowptr; /* CSR: n+1 offsets into col/val; NULL when dense */
  uint32_t *col;   /* CSR: 0-based feature index */
  float *val;
  int32_t *y;      /* n labels */
  int64_t max_row_nnz; /* CSR: longest row (sizes batch buffers) */
} sg_dataset_t;

/* Which split a synthetic generator draws. */
enum { SG_SPLIT_TRAIN = 0, SG_SPLIT_TEST = 1 };

/* IDX image + label files.  `limit` > 0 keeps only the first `limit`
 * rows.  Caller owns the result. */
int sg_dataset_load_idx(sg_dataset_t **out, const char *images,
                        const char *labels, int64_t limit);
/* Header only: rows and features of an IDX image file (no pixels read). */
int sg_dataset_probe_idx(const char *images, int64_t *n, int64_t *d);

/* The largest LIBSVM feature index (and `features`) accepted: the upper
 * bound of the `features` setting, 30x the widest public LIBSVM sets
 * (tens of millions of features).  Indices are sparse, so the loader's
 * memory follows the nonzeros, never the index. */
#define SG_LIBSVM_MAX_INDEX 1000000000LL

/* LIBSVM text file.  features > 0: indices above it are an error;
 * features == 0: d is the largest index seen.  Indices above
 * SG_LIBSVM_MAX_INDEX are an error either way.  Labels must be integers
 * 0..classes-1.  Caller owns the result. */
int sg_dataset_load_libsvm(sg_dataset_t **out, const char *path,
                           int64_t features, int classes, int64_t limit);

/* Seeded synthetic classification data (dense); the class means depend on
 * the seed only, so train and test share them.  Caller owns the result. */
int sg_dataset_synth_dense(sg_dataset_t **out, uint64_t seed, int split,
                           int64_t n, int64_t d, int classes);
/* Seeded sparse data, nnz nonzeros per row, d up to 2^32-1. */
int sg_dataset_synth_sparse(sg_dataset_t **out, uint64_t seed, int split,
                            int64_t n, int64_t d, int classes, int64_t nnz);

/* Convert a CSR dataset to dense in place (models that need dense input). */
int sg_dataset_densify(sg_dataset_t *ds);

static inline int sg_dataset_sparse(const sg_dataset_t *ds) {
  return ds->rowptr != NULL;
}

/* A zeroed dataset (internal to the loaders). */
sg_dataset_t *sg_dataset_alloc_(void);
void sg_dataset_destroy(sg_dataset_t **ds);

#endif
