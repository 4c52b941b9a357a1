/* rng.h - the seeded random numbers of the workload (no libc rand()).
 *
 * xoshiro256** (Blackman & Vigna) seeded through splitmix64.  Every use
 * draws from its own stream, a pure function of (seed, stream, index), so
 * the data order of epoch e, the initial parameters and the synthetic data
 * never depend on how many numbers some other part drew before.
 */
#ifndef SG_RNG_H
#define SG_RNG_H

#include <math.h>
#include <stdint.h>

/* Stream identifiers: one per use of randomness. */
enum {
  SG_RNG_SHUFFLE = 1,     /* index = epoch */
  SG_RNG_INIT = 2,        /* index = layer */
  SG_RNG_SYNTH_MODEL = 3, /* class means / class feature sets */
  SG_RNG_SYNTH_TRAIN = 4, /* index = row block */
  SG_RNG_SYNTH_TEST = 5,
  SG_RNG_HOLDOUT = 6,     /* rows held out of a training file as its test set */
  SG_RNG_PARTITION = 7,   /* non-IID shards: 0 = class pools, 1+w = worker w's
                             proportions, 1+N = the fill */
  SG_RNG_SHARD_ORDER = 8, /* index = epoch * 2^20 + worker: a shard's order */
};

typedef struct sg_rng {
  uint64_t s[4];
} sg_rng_t;

static inline uint64_t sg_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* A stateless 64-bit hash (one splitmix64 step of x). */
static inline uint64_t sg_hash64(uint64_t x) { return sg_splitmix64(&x); }

static inline void sg_rng_seed(sg_rng_t *r, uint64_t seed, uint64_t stream,
                               uint64_t index) {
  uint64_t x = sg_hash64(seed) ^ sg_hash64(stream * 0x632be59bd9b4e019ULL) ^
               sg_hash64(index + 0x7f4a7c159e3779b9ULL);
  for (int i = 0; i < 4; i++) r->s[i] = sg_splitmix64(&x);
}

static inline uint64_t sg_rng_rotl_(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

static inline uint64_t sg_rng_next(sg_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t out = sg_rng_rotl_(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = sg_rng_rotl_(s[3], 45);
  return out;
}

/* Uniform in [0, n), unbiased (Lemire's multiply-and-reject). */
static inline uint64_t sg_rng_below(sg_rng_t *r, uint64_t n) {
  unsigned __int128 m = (unsigned __int128)sg_rng_next(r) * n;
  uint64_t lo = (uint64_t)m;
  if (lo < n) {
    uint64_t thresh = -n % n;
    while (lo < thresh) {
      m = (unsigned __int128)sg_rng_next(r) * n;
      lo = (uint64_t)m;
    }
  }
  return (uint64_t)(m >> 64);
}

/* Uniform in [0, 1) with 53 bits. */
static inline double sg_rng_uniform(sg_rng_t *r) {
  return (double)(sg_rng_next(r) >> 11) * 0x1.0p-53;
}

/* Standard normal (Box-Muller, one value per call: simple and stateless). */
static inline double sg_rng_normal(sg_rng_t *r) {
  double u1 = 1.0 - sg_rng_uniform(r); /* (0, 1] */
  double u2 = sg_rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

#endif
