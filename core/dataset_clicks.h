/* dataset_clicks.h - a seeded synthetic click log for the embedding model.
 *
 * Each of F fields draws its key from V keys with Zipf popularity
 * P(key = k) ~ 1 / (k + 1)^s (k = 0 is the most popular).  A hidden
 * ground truth gives every (field, key) a weight w in [-1, 1] (hash of
 * seed, field, key); a row clicks (y = 1) with probability
 * sigmoid(scale * sum of its F weights).  Same arguments, same rows.
 */
#ifndef SG_DATASET_CLICKS_H
#define SG_DATASET_CLICKS_H

#include <stddef.h>
#include <stdint.h>

#include "dataset.h"

/* keys: n x F (row-major), y: n.  V >= 1, s >= 0, F >= 1.  Returns -1 on
 * bad arguments or no memory. */
int sg_clicks_synth(uint64_t seed, int64_t n, int F, int64_t V, double s,
                    double scale, uint64_t *keys, int32_t *y);

/* ---- click logs as datasets (model: embedding) -----------------------
 * A click dataset is CSR with exactly F entries per row, in field order:
 * col = the key of field f (uint32), val = 1; y in {0, 1}, classes 2,
 * d = the largest key + 1, max_row_nnz = F. */

/* The synthetic log: split SG_SPLIT_TRAIN or SG_SPLIT_TEST draws its own
 * rows from the same ground truth (the seed's); keys < V; scale 3. */
int sg_dataset_clicks_synth(sg_dataset_t **out, uint64_t seed, int split, int64_t n, int F,
                            int64_t V, double zipf);

/* A click log file, treated as untrusted input (dataset_clicks_file.c).
 *   libsvm: "label key:value ..." -- label 0, 1, -1 or +1 (-1 is no
 *     click), exactly F key:value pairs, entry f the key of field f: a
 *     decimal integer 0..4294967295; value a finite number (ignored: a
 *     key is present or not).
 *   csv: "label,tok,...,tok" -- label 0 or 1, exactly F tokens, each 0..64
 *     of [A-Za-z0-9_.:-] (empty = missing, a key of its own); the key is
 *     the token's 32-bit FNV-1a hash (Criteo's hex categories and plain
 *     integers alike).
 * Both: '#' starts a comment, blank lines are skipped, a line ends with
 * LF or CRLF.  Any other byte, a missing or extra field, an overlong line
 * (64 KiB), a NUL, a file over SG_LIBSVM_MAX_BYTES or no row at all is
 * one SG_EFORMAT "path:line:col: what" (col 1-based, in bytes); rows
 * that need more memory (8 F + 12 bytes each) than the process may
 * allocate (sg_data_mem_available) are one SG_EFORMAT naming the file,
 * found by counting them before anything is allocated.
 * limit > 0 keeps the first `limit` rows. */
enum { SG_CLICKS_LIBSVM = 0, SG_CLICKS_CSV = 1 };
#define SG_CLICKS_MAX_LINE ((size_t)64 << 10)
int sg_dataset_load_clicks(sg_dataset_t **out, const char *path, int format, int F,
                           int64_t limit);
/* "libsvm" | "csv" -> SG_CLICKS_*; -1 otherwise. */
int sg_clicks_format(const char *name);

#endif
