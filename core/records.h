/* records.h - what a rank reports to the harness while it runs.
 *
 * Each rank opens a ZeroMQ PUSH socket to the harness's PULL endpoint and
 * streams fixed-size binary records (all ranks of a run share one host
 * architecture).  In a simulated run (every rank an actor of one smpirun
 * process) the endpoint is "file://PATH": each rank appends the same
 * messages, each behind its uint32_t length, to its own file PATH.RANK in
 * the run's private directory, and the harness reads them as they grow.
 * The harness commits them to SQLite in batched
 * transactions while the run goes on (harness/run/recorder.c), so a crashed run
 * keeps everything sent before the crash.
 *
 * Columns map one-to-one onto the tables steps(...), evals(...), and
 * bench(...).  NaN stands for SQL NULL in double fields, -1 in staleness.
 */
#ifndef SG_RECORDS_H
#define SG_RECORDS_H

#include <stddef.h>
#include <stdint.h>

struct sg_keys;

enum {
  SG_REC_MAGIC = 0x53474442, /* "SGDB" */
  SG_REC_HELLO = 1,          /* rank is up: role, host, pid */
  SG_REC_STEP = 2,
  SG_REC_EVAL = 3,
  SG_REC_BENCH = 4,
  SG_REC_DONE = 5, /* rank finished: ok, or failed with a message */
  SG_REC_INFO = 6, /* key=value about the run (blas, workload, ...) */
  SG_REC_STEPS = 7, /* 1..SG_REC_STEPS_MAX STEP records of one rank, in order */
  SG_REC_STEPS_MAX = 64,
  SG_REC_BUCKET = 8, /* one bucket of a sampled step's gradient (sg_bucket_rec_t) */
};

typedef struct sg_step_rec {
  int64_t step;
  int32_t epoch;
  int32_t pad_;
  double t_start;   /* seconds since the run's start */
  double compute_s; /* gradient / optimizer time */
  double comm_s;    /* time in transport calls */
  double wait_s;    /* time blocked on a barrier / staleness bound */
  uint64_t bytes_sent, bytes_recv; /* this step's payload bytes */
  double loss;      /* this rank's minibatch mean; NaN = NULL (servers) */
  int64_t staleness; /* -1 = NULL */
} sg_step_rec_t;

typedef struct sg_eval_rec {
  int64_t step;
  int32_t epoch;
  int32_t pad_;
  double wall_s;  /* seconds since training began on the evaluating rank,
                     time spent evaluating excluded */
  int64_t samples; /* training samples consumed so far (all workers) */
  double train_loss, test_loss, test_acc;
} sg_eval_rec_t;

/* One bucket of one step's gradient, on the allreduce engine's sampled
 * steps (setting bucket_every): which floats it holds and when, in
 * seconds after the step began on this rank (its step record's t_start,
 * the same clock), backward handed it over (ready_s) and its allreduce
 * started and finished.  Buckets are numbered in the order they are
 * reduced; without overlap the whole gradient is bucket 0. */
typedef struct sg_bucket_rec {
  int64_t step;
  int32_t bucket, nbuckets;
  uint64_t offset, floats;
  double ready_s, start_s, end_s;
} sg_bucket_rec_t;

typedef struct sg_bench_rec {
  char collective[32];
  char impl[32];
  char transport[16];
  int32_t np;
  int32_t iters;
  uint64_t bytes;
  double t_min, t_median, t_max; /* seconds */
  double algbw, busbw;           /* GB/s */
  int64_t wrong;
} sg_bench_rec_t;

typedef struct sg_records sg_records_t;

/* Connect rank `rank` (role e.g. "worker", "server", "driver") to the
 * harness at `endpoint`; NULL endpoint gives a records object that drops
 * everything (unit tests).  keys: a tcp endpoint is reached over CURVE as
 * this rank (auth.h); NULL for ipc.  t0 = the run's start (sg_wall()).  Sends HELLO.
 * Caller owns the result. */
int sg_records_open(sg_records_t **out, const char *endpoint, int rank,
                    const char *role, double t0, const struct sg_keys *keys);
/* Step records are sent in batches (one SG_REC_STEPS message): when
 * SG_REC_STEPS_MAX are waiting or SG_REC_STEPS_FLUSH_S has passed since
 * the last batch left, and before any other record, so the harness sees
 * every record in the order it was made.  A step slower than the flush
 * interval is therefore sent at its end, as before; at ~1000 steps/s one
 * message per 50 ms replaces 50, which spares the rank's ZeroMQ I/O thread
 * and the harness a wake-up per step (they share the cores the ranks
 * compute on).  A rank killed by SIGKILL loses at most the last interval's
 * step rows; every other end sends DONE, which flushes. */
#define SG_REC_STEPS_FLUSH_S 0.05
int sg_records_step(sg_records_t *r, const sg_step_rec_t *s);
int sg_records_eval(sg_records_t *r, const sg_eval_rec_t *e);
int sg_records_bench(sg_records_t *r, const sg_bench_rec_t *b);
int sg_records_bucket(sg_records_t *r, const sg_bucket_rec_t *b);
int sg_records_info(sg_records_t *r, const char *key, const char *value);
/* Final record: status 0 = ok, else the error message is sent with the
 * rank it blames and why (err.h, sg_err_blamed(); blamed < 0 or
 * SG_BLAME_NONE on a failure: the rank blames itself, SG_BLAME_SELF). */
int sg_records_done(sg_records_t *r, int status, const char *message, int blamed, int reason);
/* Seconds since t0. */
double sg_records_elapsed(const sg_records_t *r);
void sg_records_close(sg_records_t **r);

/* ---- wire format (shared with harness/run/recorder.c) -------------------- */
typedef struct sg_rec_header {
  uint32_t magic;
  uint32_t type;
  int32_t rank;
  uint32_t len; /* bytes of payload after the header */
} sg_rec_header_t;

typedef struct sg_rec_hello {
  char role[16];
  char host[64];
  int32_t pid;
  int32_t pad_;
} sg_rec_hello_t;
/* DONE payload: sg_rec_done_t, then a NUL-terminated message.
 * INFO payload: "key\0value\0". */
typedef struct sg_rec_done {
  int32_t status; /* 0: finished ok */
  int32_t blamed; /* the rank the failure is blamed on, -1: none (ok) */
  int32_t reason; /* enum sg_blame_reason (err.h) */
  int32_t pad_;
} sg_rec_done_t;

/* The largest record (header included); the harness's socket refuses
 * longer messages (ZMQ_MAXMSGSIZE) and the sender shortens INFO values
 * and DONE messages to fit. */
#define SG_REC_MAX (64 * 1024)

/* Check one record as it arrived, trusting nothing: magic, a known type,
 * a rank in 0..nprocs-1, the declared length equal to what came, and the
 * payload's size and termination right for its type (a DONE's reason
 * known; its blamed rank is checked by whoever acts on it).  Fills *h and
 * *payload; returns 0, or SG_EFORMAT for a record to drop. */
int sg_rec_decode(const void *msg, size_t len, int nprocs, sg_rec_header_t *h,
                  const unsigned char **payload);

#endif
