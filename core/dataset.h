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
  void *map_;          /* shared cache mapping holding x and y (read-only), or NULL */
  size_t map_len_;
} sg_dataset_t;

/* Which split a synthetic generator draws. */
enum { SG_SPLIT_TRAIN = 0, SG_SPLIT_TEST = 1 };

/* Open a data file for reading; the descriptor, or a negative SG_E*.  It
 * must be a regular file: it is opened non-blocking (a FIFO's open would
 * wait for a writer) and checked with fstat before a byte is read, so a
 * FIFO, a device (/dev/zero) or a directory is one error that names it
 * ("PATH: not a regular file (a FIFO)"); the descriptor is then made
 * blocking again.  Symlinks are followed: a data file is only read, and
 * whatever a link names must itself be a regular file.  *size (may be
 * NULL) gets the file's size. */
int sg_data_open(const char *path, uint64_t *size);
/* The bytes this process may still allocate: the machine's MemAvailable,
 * or less where an address-space or data limit (RLIMIT_AS, RLIMIT_DATA)
 * is lower; -1 when unknown.  Loaders whose memory can be many times
 * their file's size check what they will need against it first. */
double sg_data_mem_available(void);

/* IDX image + label files.  `limit` > 0 keeps only the first `limit`
 * rows.  Caller owns the result. */
int sg_dataset_load_idx(sg_dataset_t **out, const char *images,
                        const char *labels, int64_t limit);
/* The same through a per-host cache in `dir` (dataset_cache.c): the
 * decoded rows are mapped read-only and shared by every process that
 * loads the same files; x and y must not be written. */
int sg_dataset_load_idx_shared(sg_dataset_t **out, const char *images, const char *labels,
                               int64_t limit, const char *dir);
uint64_t sg_dataset_checksum_(const void *p, size_t n);
/* Tests only: called by sg_dataset_load_idx_shared between the check of
 * the cache directory and the write into it, so a test can change the
 * directory at that exact moment (NULL: nothing). */
extern void (*sg_dataset_cache_race_hook_)(void);
/* <dir>/<base>.gz, else <dir>/<base>, into out; SG_ENOTFOUND when neither
 * is readable, with a message that says what to do: which four files
 * `dataset` (mnist, fashion-mnist) needs and where they go, that MNIST
 * has no Debian package while Fashion-MNIST has (dataset-fashion-mnist);
 * dir_given: the directory came from data_dir. */
int sg_idx_find(char *out, size_t cap, const char *dir, const char *base, const char *dataset,
                int dir_given);

/* Header only: rows and features of an IDX image file (no pixels read). */
int sg_dataset_probe_idx(const char *images, int64_t *n, int64_t *d);

/* The largest LIBSVM feature index (and `features`) accepted: the upper
 * bound of the `features` setting, 30x the widest public LIBSVM sets
 * (tens of millions of features).  Indices are sparse, so the loader's
 * memory follows the nonzeros, never the index. */
#define SG_LIBSVM_MAX_INDEX 1000000000LL

/* The longest LIBSVM line accepted (16 MiB: a million nonzeros at
 * typical widths; the widest public sets have rows of thousands) and the
 * largest LIBSVM file (64 GiB: the loader holds up to about 3 bytes per
 * byte of text).  A longer line is one "file:line: line longer than"
 * error, read no further than the cap; a larger file is refused from its
 * size before reading, and one that grows while read stops at the cap. */
#define SG_LIBSVM_MAX_LINE ((size_t)16 << 20)
#define SG_LIBSVM_MAX_BYTES ((uint64_t)64 << 30)

/* How LIBSVM labels become 0..classes-1.  SG_LABELS_DECIDE picks from the
 * set of labels in the file (the training file; its test file then uses
 * the same rule):
 *   only -1 and +1 (with at least one -1)   -> -1 to 0, +1 to 1
 *   smallest label 1 (so no 0)              -> subtract 1 (1..C to 0..C-1)
 *   anything else                           -> as is (0..C-1)
 * A label the rule cannot map into 0..classes-1 is an error at its line. */
enum { SG_LABELS_DECIDE = 0, SG_LABELS_AS_IS = 1, SG_LABELS_PM1 = 2, SG_LABELS_ONE_BASED = 3 };

typedef struct sg_libsvm_labels {
  int rule;    /* in: SG_LABELS_*; out: the rule applied (never DECIDE) */
  int classes; /* in: 0 = infer (largest mapped label + 1); out: classes */
} sg_libsvm_labels_t;

/* LIBSVM text file.  features > 0: indices above it are an error;
 * features == 0: d is the largest index seen.  Indices above
 * SG_LIBSVM_MAX_INDEX are an error either way.  Labels are mapped by
 * lab->rule and checked against lab->classes, both updated.  Caller owns
 * the result. */
int sg_dataset_load_libsvm_labels(sg_dataset_t **out, const char *path, int64_t features,
                                  sg_libsvm_labels_t *lab, int64_t limit);
/* The same with labels taken as is and checked against 0..classes-1. */
int sg_dataset_load_libsvm(sg_dataset_t **out, const char *path,
                           int64_t features, int classes, int64_t limit);
/* The rule in words, for messages ("-1/+1 mapped to 0/1"). */
const char *sg_libsvm_rule_name(int rule);

/* Move a seeded `frac` of *train's rows (at least one, and at least one
 * left) into a new *test, both keeping the file's row order.  The same
 * (seed, rows, frac) always picks the same rows. */
int sg_dataset_holdout(sg_dataset_t **train, sg_dataset_t **test, double frac, uint64_t seed);

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
