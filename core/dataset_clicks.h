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

/* keys: n x F (row-major), y: n.  V >= 1, s >= 0, F >= 1.  Returns -1 on
 * bad arguments or no memory. */
int sg_clicks_synth(uint64_t seed, int64_t n, int F, int64_t V, double s,
                    double scale, uint64_t *keys, int32_t *y);

#endif
