#!/usr/bin/env bash
# gpu-check.sh - the GPU tests and the device throughput table in one call.
#
#   bash scripts/gpu-check.sh [--bundle DIR]      on a GPU machine
#   bash scripts/gpu-check.sh --dry [--build DIR] on any machine, CPU build
#   bash scripts/gpu-check.sh --list              the plan and its time budget
#
# GPU mode: refuses in one line (exit 2) where `nvidia-smi -L` lists no
# GPU; else unpacks DIR/bundle.tar.xz (default .gpu/: a CUDA build, its
# libraries, a relocated Open MPI and the Fashion-MNIST IDX files; b/env.sh
# sets the paths) and runs its parts in this order, the checks first and
# the throughput after, so that a short budget keeps the checks:
#   1. the GPU tests (test_cuda_gpu, test_cuda_cnn_gpu);
#   2. the engines against local on the device: the parameters after 100
#      steps of the small MLP (relative L2 distance, a bound, a verdict):
#      allreduce host-staged ring, fp16 on the wire, cuda-ring, ps (device
#      replica, float32 and fp16 pushes), mapreduce; overlap with backprop
#      and the sharded update (host-staged ring; cuda-ring staged, and
#      persistent with overlap; nccl where the machine has 2 GPUs) against
#      the plain ring of the same kind, bound 0 (2 ranks: the same sums and
#      the same update kernel);
#   3. the CNN: local on the device against local on the CPU, the ring,
#      cuda-ring and overlap against local / the plain ring;
#   4. compute-sanitizer memcheck (test_cuda_gpu's gradient and SGD cases,
#      test_cuda_cnn_gpu);
#   5. the persistent ring with a silent neighbour (cuda_ring_rank --dead:
#      must fail after 2 s naming rank 1) and the device copy bandwidth;
#   6. round 1 of PyTorch (scripts/torch_mlp.py, fp32, TF32 off) against
#      `local` on the device (MLP 784-2048-2048-10 batch 256, 784-128-10
#      batch 64) and `bench step --set device=cuda` (the cuBLAS bound);
#   7. overlap and the sharded update, samples/s of 400 steps of the big
#      MLP (2 ranks) beside the plain ring of the same kind: host-staged
#      ring (MPS off), cuda-ring (MPS on where the machine has
#      nvidia-cuda-mps-control);
#   8. per MPS mode (off, on): 2-rank training rows (cuda-ring staged and
#      persistent, host-staged ring, with fp16) and `bench allreduce` on
#      device buffers;
#   9. ps and mapreduce samples/s (device replicas), the CNN's samples/s
#      and accuracy (local; ring with 2 ranks);
#  10. rounds 2 and 3 of step 6 (the medians of the rounds);
#  11. the CPU twins (test_cuda_sched, _overlap, _devcoll, _pring, _cnn),
#      which need no GPU and run in CI; here only with the time left.
#
# Time: the whole stays under LIMIT_S (default 330 s).  Every part has its
# own timeout and an estimate of its time on an H100/H200 (est below,
# `--list` prints them): a part whose estimate exceeds the time left
# (less RESERVE_S, 12 s, kept for the table) prints "SKIP (time): ..."
# and the script goes on; a failing part prints "FAIL: part" and the
# script goes on.  $OUT/table.md is rewritten after each step, and a
# TERM or INT prints the table so far and the logs before exiting 124, so
# an outer limit that cuts the call still leaves a partial table; run the
# call with at least LIMIT_S + 60 s (the bundle's unpacking, the table).
# Logs: $OUT/gpu-check-logs.tar.gz (OUT defaults to ./gpu-check-out), the
# table also in $OUT/table.md.
#
# --dry runs the same plumbing with the CPU build in DIR (default build/):
# the parts that need a GPU print "SKIP (dry: no GPU): part"; the
# throughput parts run on device: cpu with a small model and one round,
# so the table's layout and parsing are exercised.
set -u
DRY=0 LIST=0 BUNDLE=.gpu BUILD=build LIMIT_S=${LIMIT_S:-330} RESERVE_S=${RESERVE_S:-12}
while [ $# -gt 0 ]; do
  case $1 in
    --dry) DRY=1 ;;
    --list) LIST=1 ;;
    --bundle) BUNDLE=${2:?--bundle DIR}; shift ;;
    --build) BUILD=${2:?--build DIR}; shift ;;
    *) echo "gpu-check: unknown argument '$1' (--dry, --list, --bundle DIR, --build DIR)" >&2; exit 2 ;;
  esac
  shift
done

# ---- the plan: steps in order, each part's estimate -------------------------------
# est PART: seconds on one H100/H200 (GPU mode; in --dry every part's is
# GPU_CHECK_DRY_EST, default 1, so that a test can exercise the budget).
# The basis:
# the one GPU run of this script (docs/cuda.md, "Measured on a GPU": 162 s
# and 168 s for steps 5, 6, 8 and 10 of today's list and three test
# binaries; bench step 9 s, the dead-peer check 2 s) and each newer part's
# work: a `sgdlab run` costs ~3 s to start (mpirun, CUDA contexts, cuBLAS
# loaded, the data set) plus its steps at the measured rates (local on the
# big MLP 566k samples/s, 2-rank rings 37-44k without MPS); ps and
# mapreduce move 27 MB per worker and step through the host (~30 ms a
# step, 700 steps); the CNN's rates are unmeasured (its bias sums are
# serial per channel: ~2 ms a step is assumed).
est() {
  [ $DRY -eq 1 ] && { echo "${GPU_CHECK_DRY_EST:-1}"; return; }
  case $1 in
    test_cuda_gpu) echo 60 ;;
    test_cuda_cnn_gpu) echo 15 ;;
    test_cuda_*) echo 30 ;;
    agree-cnn-*) echo 6 ;;
    agree-*) echo 5 ;;
    sanitizer*) echo 20 ;;
    pring-dead-peer) echo 5 ;;
    d2d-copy) echo 3 ;;
    torch-*) echo 7 ;;
    local-*) echo 4 ;;
    bench-step) echo 10 ;;
    bench-allreduce-*) echo 20 ;;
    dev-*) echo 7 ;;
    ar-cudaring-p-*) echo 8 ;;
    ar-*) echo 7 ;;
    ps-dev* | mr-dev*) echo 25 ;;
    cnn-*) echo 15 ;;
    *) echo 10 ;;
  esac
}
# The steps and their parts (the names est knows), in the order they run.
STEPS="gpu_tests agree agree_cnn sanitizer ring_checks round1 devopt modes replicas_cnn rounds23 twins"
parts_of() {
  case $1 in
    gpu_tests) echo test_cuda_gpu test_cuda_cnn_gpu ;;
    agree) echo agree-local agree-ring agree-ringfp16 agree-cudaring agree-ringov agree-ringsh \
      agree-cudaringov agree-cudaringpov agree-cudaringsh agree-ps agree-psfp16 agree-mr \
      agree-nccl agree-ncclov agree-ncclsh ;;
    agree_cnn) echo agree-cnn-cpu agree-cnn-local agree-cnn-ring agree-cnn-ringov \
      agree-cnn-cudaring agree-cnn-cudaringov ;;
    sanitizer) echo sanitizer sanitizer-cnn ;;
    ring_checks) echo pring-dead-peer d2d-copy ;;
    round1) echo torch-big-1 local-big-1 torch-small-1 local-small-1 bench-step ;;
    devopt) echo dev-ring-base dev-ring-overlap dev-ring-sharded dev-cudaring-base \
      dev-cudaring-overlap dev-cudaring-sharded dev-cudaring-p-overlap ;;
    modes) for m in off on; do
        echo ar-cudaring-mps$m-1 ar-cudaring-p-mps$m-1 ar-ring-mps$m-1 ar-ringfp16-mps$m-1 bench-allreduce-mps$m
      done ;;
    replicas_cnn) echo ps-dev-1 mr-dev-1 cnn-local cnn-ar ;;
    rounds23) for r in 2 3; do echo torch-big-$r local-big-$r torch-small-$r local-small-$r; done ;;
    twins) echo test_cuda_sched test_cuda_overlap test_cuda_devcoll test_cuda_pring test_cuda_cnn ;;
  esac
}
if [ $LIST -eq 1 ]; then
  sum=0
  echo "gpu-check plan (estimates on one H100/H200; nccl parts only with 2 GPUs; limit ${LIMIT_S} s, ${RESERVE_S} s kept for the table):"
  for st in $STEPS; do
    ss=0
    for p in $(parts_of "$st"); do ss=$((ss + $(est "$p"))); done
    sum=$((sum + ss))
    fit=fits
    [ $sum -gt $((LIMIT_S - RESERVE_S)) ] && fit="over the limit: skipped or cut"
    printf '%-13s %4d s  (cumulative %4d s; %s): %s\n' "$st" "$ss" "$sum" "$fit" "$(parts_of "$st" | tr '\n' ' ')"
  done
  echo "total: ~$sum s"
  exit 0
fi

ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
if [ $DRY -eq 0 ]; then
  GPUS="nvidia-smi not found"
  command -v nvidia-smi >/dev/null 2>&1 && GPUS=$(nvidia-smi -L 2>&1)
  if ! printf '%s\n' "$GPUS" | grep -q '^GPU '; then
    echo "gpu-check: no GPU here (nvidia-smi -L: $(printf '%s\n' "${GPUS:-no output}" | head -1)); run it on a GPU machine, or --dry for the CPU plumbing" >&2
    exit 2
  fi
  NGPU=$(printf '%s\n' "$GPUS" | grep -c '^GPU ')
  [ -f "$BUNDLE/bundle.tar.xz" ] || { echo "gpu-check: $BUNDLE/bundle.tar.xz: no bundle" >&2; exit 2; }
fi
mkdir -p "$OUT" || exit 2
W=$(mktemp -d /tmp/gpu-check.XXXXXX) || exit 2
# on every way out (a signal included): the MPS daemon, if this script
# started one, is told to quit before its pipe directory goes
cleanup() {
  if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && [ -n "${MPSC:-}" ]; then mps off; fi
  rm -rf "$W"
}
trap cleanup EXIT
LOGS=$W/logs
mkdir -p "$LOGS" "$W/cfg" "$W/db"
T0=$(date +%s)
NFAIL=0 NSKIP=0 NPART=0 CHILD=

left() { echo $((LIMIT_S - ($(date +%s) - T0))); }
# part NAME LIMIT CMD...: runs CMD under timeout min(LIMIT, time left less
# the reserve), output to $LOGS/NAME.log; prints PASS/FAIL/SKIP; never
# fails the script.  Returns CMD's status (75: skipped for time).
part() {
  local name=$1 lim=$2 l e rc t
  shift 2
  NPART=$((NPART + 1))
  l=$(($(left) - RESERVE_S))
  e=$(est "$name")
  if [ "$l" -le 5 ]; then
    echo "FAIL: $name (no time left of the ${LIMIT_S} s)"; NFAIL=$((NFAIL + 1)); return 1
  fi
  if [ "$e" -gt "$l" ]; then
    echo "SKIP (time): $name needs ~$e s, $l s left of the ${LIMIT_S} s"; NSKIP=$((NSKIP + 1)); return 75
  fi
  [ "$l" -lt "$lim" ] && lim=$l
  t=$(date +%s)
  # in the background, so that a TERM reaches the trap at once
  timeout -k 5 "$lim" "$@" >"$LOGS/$name.log" 2>&1 &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=
  if [ $rc -eq 0 ]; then
    echo "PASS: $name ($(($(date +%s) - t)) s, est ~$e s)"
  elif [ $rc -eq 77 ]; then
    echo "SKIP: $name ($(grep -m1 '^SKIP' "$LOGS/$name.log" || echo 'exit 77'))"
  else
    [ $rc -eq 124 ] && echo "(timed out after $lim s)" >>"$LOGS/$name.log"
    echo "FAIL: $name (rc $rc, $(($(date +%s) - t)) s; log $name.log)"
    tail -n 5 "$LOGS/$name.log" | sed 's/^/    /'
    NFAIL=$((NFAIL + 1))
  fi
  return $rc
}
skip() { echo "SKIP (dry: no GPU): $*"; }

# ---- the binaries ----------------------------------------------------------
if [ $DRY -eq 1 ]; then
  case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
  export SGDLAB_BIN_DIR=$BUILD
  SG=$BUILD/harness/sgdlab TESTS=$BUILD/tests DATA=${DATA:-/usr/share/datasets/fashion-mnist}
  DEV=cpu ROUNDS=1 BIG='[64]' BIGB=256 SMALL='[32]' SMALLB=64 EPOCHS=1 NGPU=0
  CNNSTEPS=30 CNNTEST=1000
  [ -x "$SG" ] || { echo "gpu-check: $SG: no sgdlab build (cmake --build $BUILD)" >&2; exit 2; }
else
  tar xJf "$BUNDLE/bundle.tar.xz" -C "$W" || exit 2
  R=$W/b
  # shellcheck disable=SC1091
  . "$R/env.sh"
  SG=$R/build/harness/sgdlab TESTS=$R/build/tests DATA=$R/data/fashion-mnist
  DEV=cuda ROUNDS=3 BIG='[2048, 2048]' BIGB=256 SMALL='[128]' SMALLB=64 EPOCHS=3
  CNNSTEPS=2000 CNNTEST=10000
fi
echo "gpu-check: $([ $DRY -eq 1 ] && echo dry, CPU build || echo "GPU ($NGPU)") $SG, logs in $OUT, limit $LIMIT_S s"
{ date -u; uname -a; uptime; nvidia-smi 2>&1 | head -20; "$SG" --version; "$SG" engines 2>&1 | tail -3; env | grep -E '^(OPENBLAS|OMP|CUDA)_' ; } >"$LOGS/machine.log" 2>&1
[ $DRY -eq 0 ] && printf '%s\n' "$GPUS"

cd "$W" || exit 2
MPSC=
[ $DRY -eq 0 ] && MPSC=$(command -v nvidia-cuda-mps-control 2>/dev/null)

# ---- helpers: experiment files, runs, values ----------------------------------------
# cfg NAME ENGINE WORKERS HIDDEN BATCH: an experiment file
cfg() {
  cat >"$W/cfg/$1.yaml" <<Y
name: $1
workers: $3
workload: {dataset: fashion-mnist, data_dir: $DATA, model: mlp, hidden: $4, batch: $5,
           lr: 0.05, momentum: 0.9, epochs: $EPOCHS, seed: 1, eval_every: 100, device: $DEV}
engines:
  - $2
Y
}
# cached KEY CMD...: CMD's output, computed once per KEY (the table is
# rewritten after every step; its values do not change once computed)
cached() {
  local f=$W/cache/$1
  shift
  [ -f "$f" ] || { mkdir -p "$W/cache"; "$@" >"$f.tmp" && mv "$f.tmp" "$f"; }
  cat "$f" 2>/dev/null || echo FAIL
}
# sps DB: the run's samples/s (run_summary); FAIL without the database
sps() {
  [ -s "$1" ] || { echo FAIL; return; }
  cached "sps-$(basename "$1")" sps_q "$1"
}
sps_q() { q1 "$1" "SELECT CASE WHEN samples_per_s > 0 THEN printf('%.0f', samples_per_s) END FROM run_summary"; }
# q1 DB SQL: the last row's one value (FAIL when none): the sqlite3
# command where there is one, else Python's sqlite3
q1() {
  local v
  if command -v sqlite3 >/dev/null 2>&1; then
    v=$(sqlite3 -batch -readonly "$1" "$2" 2>/dev/null | tail -n 1)
  else
    v=$(python3 - "$1" "$2" <<'PY' 2>/dev/null
import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()
print(r[-1][0] if r and r[-1][0] is not None else "")
PY
)
  fi
  echo "${v:-FAIL}"
}
# sgrun KEY ROUND ENGINE WORKERS HIDDEN BATCH: samples/s appended to $W/KEY.sps
sgrun() {
  local name=$1-$2
  cfg "$name" "$3" "$4" "$5" "$6"
  part "$name" 90 "$SG" run "$W/cfg/$name.yaml" --db "$W/db/$name.db"
  sps "$W/db/$name.db" >>"$W/$1.sps"
}
# torch KEY ROUND HIDDEN BATCH STEPS: both timing modes appended
torch() {
  local name=$1-$2
  if [ $DRY -eq 1 ]; then
    # the data set is checked once (Python's gunzip of the training
    # images: over a second of CPU a call); every later call only skips
    [ -e "$W/data-checked" ] ||
      { part "$name" 30 python3 "$ROOT/scripts/torch_mlp.py" --data "$DATA" --check-data && : >"$W/data-checked"; }
    skip "PyTorch on cuda ($name)"; echo dry >>"$W/$1.sps"; echo dry >>"$W/$1-sync.sps"
    return
  fi
  part "$name" 60 python3 "$ROOT/scripts/torch_mlp.py" --data "$DATA" --hidden "$3" --batch "$4" \
    --steps "$5" --device cuda --tf32 0
  for m in none step; do
    v=$(grep -o "sync=$m .*samples/s=[0-9]*" "$LOGS/$name.log" | grep -o '[0-9]*$')
    echo "${v:-FAIL}" >>"$W/$1$([ $m = step ] && echo -sync).sps"
  done
}
round() { # R: one round of PyTorch and local, both MLPs
  torch torch-big "$1" 2048,2048 256 600
  sgrun local-big "$1" local 1 "$BIG" "$BIGB"
  torch torch-small "$1" 128 64 2000
  sgrun local-small "$1" local 1 "$SMALL" "$SMALLB"
}
# Two ranks sharing one GPU: without MPS the driver time-slices the two
# processes' contexts (a kernel that waits for the other rank's kernel
# waits for a slice); with MPS (nvidia-cuda-mps-control, when the machine
# has it) their kernels run at once, as on one GPU per rank.
mps() { # mps on|off
  if [ "$1" = on ]; then
    export CUDA_MPS_PIPE_DIRECTORY=$W/mps-pipe CUDA_MPS_LOG_DIRECTORY=$W/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    "$MPSC" -d
  else
    echo quit | "$MPSC"
    # the daemon is gone once its pipe directory holds no control socket
    for _ in $(seq 1 50); do [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ] || break; sleep 0.1; done
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
}
# devopt NAME ENGINE: samples/s of 400 steps of the big MLP, 2 ranks
devopt() {
  cat >"$W/cfg/$1.yaml" <<Y
name: $1
workers: 2
workload: {dataset: fashion-mnist, data_dir: $DATA, model: mlp, hidden: $BIG, batch: $((BIGB / 2)),
           lr: 0.05, momentum: 0.9, max_steps: 400, seed: 1, eval_every: 200, device: $DEV}
engines:
  - $2
Y
  part "$1" 60 "$SG" run "$W/cfg/$1.yaml" --db "$W/db/$1.db"
  sps "$W/db/$1.db" >>"$W/$1.sps"
}
# agree KEY ENGINE WORKERS BATCH: 100 steps of the small MLP, the
# parameters dumped to agree-KEY.bin
agree() {
  cat >"$W/cfg/agree-$1.yaml" <<Y
name: agree-$1
workers: $3
workload: {dataset: fashion-mnist, data_dir: $DATA, model: mlp, hidden: $SMALL, batch: $4,
           lr: 0.05, momentum: 0.9, max_steps: 100, seed: 1, eval_every: 100000, device: $DEV,
           dump_params: $W/agree-$1.bin}
engines:
  - $2
Y
  part "agree-$1" 60 "$SG" run "$W/cfg/agree-$1.yaml" --db "$W/db/agree-$1.db"
}
# dist KEY [REF]: relative L2 distance of agree-KEY.bin to agree-REF.bin
# (REF: local); FAIL while either is missing
dist() {
  [ -s "$W/agree-$1.bin" ] && [ -s "$W/agree-${2:-local}.bin" ] || { echo FAIL; return; }
  cached "dist-$1-${2:-local}" dist_q "$1" "${2:-local}"
}
dist_q() { # the relative L2 distance of two float32 files (od and awk: no
  # interpreter to start, which costs about 0.5 s a call on a slow host)
  local a=$W/agree-$1.bin b=$W/agree-$2.bin
  [ "$(stat -c %s "$a")" = "$(stat -c %s "$b")" ] || { echo FAIL; return; }
  paste <(od -An -v -f -w4 "$a") <(od -An -v -f -w4 "$b") | awk '
    $1 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ || $2 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/ {bad = 1}
    {d += ($1 - $2) ^ 2; n += $2 * $2}
    END {if (bad || NR == 0 || n <= 0) print "FAIL"; else printf "%.2g\n", sqrt(d) / sqrt(n)}'
}
cnnrun() { # NAME ENGINE WORKERS BATCH DEVICE MAX_STEPS EPOCHS LIMIT_S
  cat >"$W/cfg/$1.yaml" <<Y
name: $1
workers: $3
workload: {dataset: fashion-mnist, data_dir: $DATA, model: cnn, batch: $4, lr: 0.05,
           momentum: 0.9, max_steps: $6, epochs: $7, test_samples: $CNNTEST, seed: 1,
           eval_every: 100000, device: $5, dump_params: $W/$1.bin}
engines:
  - $2
Y
  part "$1" "$8" "$SG" run "$W/cfg/$1.yaml" --db "$W/db/$1.db"
}
acc() { # DB: the run's final test accuracy
  [ -s "$1" ] || { echo FAIL; return; }
  cached "acc-$(basename "$1")" acc_q "$1"
}
acc_q() { q1 "$1" "SELECT CASE WHEN final_acc IS NOT NULL THEN printf('%.4f', final_acc) END FROM run_summary"; }
# tests NAMES...: the test binaries, their results into TEST_RESULT
TEST_RESULT=""
tests() {
  local t n rc r
  for n in "$@"; do
    t=$TESTS/$n
    [ -x "$t" ] || continue
    part "$n" 150 "$t"
    rc=$?
    if [ $rc -eq 75 ]; then r=skipped-time
    elif [ $rc -eq 77 ] || grep -q '^SKIP' "$LOGS/$n.log"; then r=skip
    elif [ $rc -eq 0 ]; then r=pass; else r=FAIL; fi
    TEST_RESULT="$TEST_RESULT $n:$r"
  done
}

# ---- the steps ---------------------------------------------------------------------
step_gpu_tests() {
  if [ $DRY -eq 1 ]; then
    tests test_cuda_refuse
  else
    tests test_cuda_gpu test_cuda_cnn_gpu
  fi
}
# The one loop against local (float32 sums: ~1e-6; fp16 on the wire:
# rounding of the sums, ~1e-3), and each option against the plain ring of
# its kind: for 2 ranks the same sums and the same update kernel, so the
# parameters must be equal (distance 0).  Overlap with 4 KiB buckets: 2
# buckets of the small MLP, the last layer and layer 0.
step_agree() {
  agree local local 2 "$SMALLB" # the global batch of 2 workers, one process
  agree ring "{engine: allreduce, algorithm: ring}" 2 "$SMALLB"
  agree ringfp16 "{engine: allreduce, algorithm: ring, compress: fp16}" 2 "$SMALLB"
  if [ $DRY -eq 1 ]; then
    skip "allreduce cuda-ring against local"
    skip "allreduce cuda-ring with overlap and the sharded update against the plain cuda-ring"
  else
    agree cudaring "{engine: allreduce, algorithm: cuda-ring}" 2 "$SMALLB"
  fi
  agree ringov "{engine: allreduce, algorithm: ring, overlap: true, bucket: 4K}" 2 "$SMALLB"
  agree ringsh "{engine: allreduce, algorithm: ring, update: sharded}" 2 "$SMALLB"
  if [ $DRY -eq 0 ]; then
    agree cudaringov "{engine: allreduce, algorithm: cuda-ring, overlap: true, bucket: 4K}" 2 "$SMALLB"
    agree cudaringpov "{engine: allreduce, algorithm: cuda-ring, cuda_ring: persistent, overlap: true, bucket: 4K}" 2 "$SMALLB"
    agree cudaringsh "{engine: allreduce, algorithm: cuda-ring, update: sharded}" 2 "$SMALLB"
  fi
  agree ps "{engine: ps, servers: 1}" 2 "$SMALLB"
  agree psfp16 "{engine: ps, servers: 2, compress: fp16}" 2 "$SMALLB"
  agree mr "{engine: mapreduce}" 2 "$SMALLB"
  if [ "$NGPU" -ge 2 ]; then # NCCL: one GPU per rank
    agree nccl "{engine: allreduce, algorithm: nccl}" 2 "$SMALLB"
    agree ncclov "{engine: allreduce, algorithm: nccl, overlap: true, bucket: 4K}" 2 "$SMALLB"
    agree ncclsh "{engine: allreduce, algorithm: nccl, update: sharded}" 2 "$SMALLB"
  else
    echo "SKIP: allreduce nccl, with overlap and sharded (needs 2 GPUs, this machine has $NGPU)"
  fi
}
# model: cnn (44,426 parameters), 100 steps of 2 workers of batch 32 with
# the parameters dumped: local on the device against local on the CPU
# (cuBLAS against OpenBLAS sums: a rounding difference per product, which
# training amplifies where a max-pool or ReLU decision flips), the
# engine's loop (ring, cuda-ring) against local on the device, overlap
# (16 KiB buckets: 3 a step) against the plain ring of its kind (bound 0).
step_agree_cnn() {
  cnnrun agree-cnn-cpu local 2 32 cpu 100 100 45
  cnnrun agree-cnn-local local 2 32 "$DEV" 100 100 45
  cnnrun agree-cnn-ring "{engine: allreduce, algorithm: ring}" 2 32 "$DEV" 100 100 45
  cnnrun agree-cnn-ringov "{engine: allreduce, algorithm: ring, overlap: true, bucket: 16K}" 2 32 "$DEV" 100 100 45
  if [ $DRY -eq 1 ]; then
    skip "the CNN with allreduce cuda-ring against local"
  else
    cnnrun agree-cnn-cudaring "{engine: allreduce, algorithm: cuda-ring}" 2 32 "$DEV" 100 100 45
    cnnrun agree-cnn-cudaringov "{engine: allreduce, algorithm: cuda-ring, overlap: true, bucket: 16K}" 2 32 "$DEV" 100 100 45
  fi
}
SAN=n/a
step_sanitizer() {
  local cs sanc
  if [ $DRY -eq 1 ]; then
    skip "compute-sanitizer --tool memcheck test_cuda_gpu grad/sgd, test_cuda_cnn_gpu"
  elif cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1) && [ -n "$cs" ]; then
    part sanitizer 100 "$cs" --tool memcheck --error-exitcode 1 "$TESTS/test_cuda_gpu" \
      grad_mlp_matches_cpu grad_softmax_matches_cpu sgd_matches_optim
    SAN=$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors?' "$LOGS/sanitizer.log" 2>/dev/null | tail -1)
    [ -n "$SAN" ] || SAN="FAIL or skipped (see sanitizer.log)"
    part sanitizer-cnn 90 "$cs" --tool memcheck --error-exitcode 1 "$TESTS/test_cuda_cnn_gpu" \
      grad_cnn_matches_cpu
    sanc=$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors?' "$LOGS/sanitizer-cnn.log" 2>/dev/null | tail -1)
    SAN="$SAN; the CNN: ${sanc:-FAIL or skipped (see sanitizer-cnn.log)}"
  else
    echo "FAIL: compute-sanitizer not found"; SAN="not found"; NFAIL=$((NFAIL + 1))
  fi
}
DEAD="not run"
step_ring_checks() {
  if [ $DRY -eq 1 ]; then
    skip "persistent ring with a silent neighbour (cuda_ring_rank --dead)"; DEAD="skipped: dry, no GPU"
    return
  fi
  # the persistent ring's timeout: rank 1 never calls, rank 0 must fail in ~2 s
  part pring-dead-peer 40 mpirun --allow-run-as-root --oversubscribe -np 2 "$TESTS/cuda_ring_rank" --dead
  DEAD=$(grep -m1 -o 'dead-peer: .*' "$LOGS/pring-dead-peer.log" 2>/dev/null || echo "FAIL or skipped (see pring-dead-peer.log)")
  part d2d-copy 30 "$TESTS/cuda_ring_rank" --copy 67108864
}
BOUND= BSTEP=
step_round1() {
  round 1
  part bench-step 90 "$SG" bench step --set device=$DEV --set "data_dir=$DATA" --set "hidden=$BIG" --set batch=$BIGB
  BOUND=$(grep -o 'bound: .*, [0-9]* samples/s' "$LOGS/bench-step.log" 2>/dev/null | grep -o '[0-9]* samples/s' | grep -o '[0-9]*')
  BSTEP=$(grep -o 'step (grad+apply): .*, [0-9]* samples/s' "$LOGS/bench-step.log" 2>/dev/null | grep -o '[0-9]* samples/s' | grep -o '[0-9]*')
}
# overlap with backprop and the sharded update on the device, samples/s
# of 400 steps of the big MLP against the plain ring of the same kind:
# the host-staged ring without MPS, cuda-ring with MPS where there is one
# (without MPS two ranks' kernels on one GPU are time-sliced)
DEVRING_MPS=off
step_devopt() {
  devopt dev-ring-base "{engine: allreduce, algorithm: ring}"
  devopt dev-ring-overlap "{engine: allreduce, algorithm: ring, overlap: true}"
  devopt dev-ring-sharded "{engine: allreduce, algorithm: ring, update: sharded}"
  if [ $DRY -eq 1 ]; then
    skip "cuda-ring with overlap and the sharded update, samples/s"; return
  fi
  [ -n "$MPSC" ] && DEVRING_MPS=on && mps on
  devopt dev-cudaring-base "{engine: allreduce, algorithm: cuda-ring}"
  devopt dev-cudaring-overlap "{engine: allreduce, algorithm: cuda-ring, overlap: true}"
  devopt dev-cudaring-sharded "{engine: allreduce, algorithm: cuda-ring, update: sharded}"
  devopt dev-cudaring-p-overlap "{engine: allreduce, algorithm: cuda-ring, cuda_ring: persistent, overlap: true}"
  [ -n "$MPSC" ] && mps off
}
MODES=off
[ $DRY -eq 0 ] && [ -n "$MPSC" ] && MODES="off on"
step_modes() {
  [ $DRY -eq 0 ] && [ -z "$MPSC" ] && echo "note: no nvidia-cuda-mps-control: the 2-rank rows run without MPS only"
  [ $DRY -eq 1 ] && skip "allreduce cuda-ring training (2 ranks on one GPU)"
  for m in $MODES; do
    [ "$m" = on ] && mps on
    if [ $DRY -eq 0 ]; then
      sgrun ar-cudaring-mps$m 1 "{engine: allreduce, algorithm: cuda-ring}" 2 "$BIG" $((BIGB / 2))
      sgrun ar-cudaring-p-mps$m 1 "{engine: allreduce, algorithm: cuda-ring, cuda_ring: persistent}" 2 "$BIG" $((BIGB / 2))
    fi
    sgrun ar-ring-mps$m 1 "{engine: allreduce, algorithm: ring}" 2 "$BIG" $((BIGB / 2))
    sgrun ar-ringfp16-mps$m 1 "{engine: allreduce, algorithm: ring, compress: fp16}" 2 "$BIG" $((BIGB / 2))
    if [ $DRY -eq 1 ]; then
      skip "sgdlab bench allreduce --set device=cuda --impl cuda-ring,ring"
    else
      part bench-allreduce-mps$m 120 "$SG" bench allreduce --np 2 --set device=cuda \
        --impl ring,cuda-ring,cuda-ring-persistent --sizes 1M:64M --db "$W/db/bench-allreduce-$m.db"
    fi
    [ "$m" = on ] && mps off
  done
}
# ps: 2 workers with a device replica, 1 server on the host; mapreduce: 2
# executors with a device replica, the driver on the host; without MPS.
# The CNN: local (samples/s, the test accuracy after CNNSTEPS steps) and
# allreduce host-staged ring with 2 ranks of batch 64.
step_replicas_cnn() {
  sgrun ps-dev 1 "{engine: ps, servers: 1}" 2 "$BIG" $((BIGB / 2))
  sgrun mr-dev 1 "{engine: mapreduce}" 2 "$BIG" $((BIGB / 2))
  cnnrun cnn-local local 1 64 "$DEV" "$CNNSTEPS" 100 60
  cnnrun cnn-ar "{engine: allreduce, algorithm: ring}" 2 64 "$DEV" "$CNNSTEPS" 100 60
}
step_rounds23() {
  for r in $(seq 2 $ROUNDS); do round "$r"; done
}
step_twins() {
  [ $DRY -eq 1 ] && return # the suite runs them on the CPU
  tests test_cuda_sched test_cuda_overlap test_cuda_devcoll test_cuda_pring test_cuda_cnn
}

# ---- the table (written after every step; printed at the end or on a signal) -----
med() { # the median of the numbers in a file (FAIL/dry kept when none); in
  # bash alone: the table is written after every step, and each process
  # started costs milliseconds on a slow host
  [ -f "$1" ] || { echo n/a; return; }
  local x first= i j t
  local -a v=()
  while IFS= read -r x || [ -n "$x" ]; do
    [ -z "$first" ] && first=$x
    [[ $x =~ ^[0-9]+$ ]] && v+=("$x")
  done <"$1"
  [ ${#v[@]} -eq 0 ] && { [ -n "$first" ] && echo "$first"; return 0; }
  for ((i = 1; i < ${#v[@]}; i++)); do # insertion sort, numerically
    t=${v[i]}
    for ((j = i - 1; j >= 0 && 10#${v[j]} > 10#$t; j--)); do v[j + 1]=${v[j]}; done
    v[j + 1]=$t
  done
  echo "${v[(${#v[@]} + 1) / 2 - 1]}"
}
vals() { [ -f "$1" ] && paste -sd/ "$1" || echo n/a; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else print "-"}'; }
# bw64 MODE IMPL: busbw (GB/s) at 64 MiB of IMPL's section of a bench log
bw64() {
  awk -v impl="$2" '/^# allreduce / {on = ($3 == impl ",")} on && $1 == 67108864 {print $8; exit}' \
    "$LOGS/bench-allreduce-mps$1.log" 2>/dev/null | grep . || echo n/a
}
table() {
  local COPY TB LB TS LS BASE DBASE m H v impl k d tol e u a b what r
  COPY=$(grep -ho 'd2d-copy.*' "$LOGS/d2d-copy.log" 2>/dev/null | grep -o '[0-9.]* GB/s' | grep -o '[0-9.]*')
  TB=$(med "$W/torch-big.sps") LB=$(med "$W/local-big.sps") TS=$(med "$W/torch-small.sps") LS=$(med "$W/local-small.sps")
  echo "| $( [ $DRY -eq 1 ] && echo 'DRY RUN, device: cpu, small models' || echo 'device: cuda') | samples/s (median) | rounds | vs PyTorch |"
  echo "|---|---:|---|---:|"
  echo "| PyTorch fp32 (TF32 off), MLP 784-2048-2048-10, batch 256 | $TB | $(vals "$W/torch-big.sps") | 1.00 |"
  echo "| PyTorch, same, loss.item() every step | $(med "$W/torch-big-sync.sps") | $(vals "$W/torch-big-sync.sps") | $(ratio "$(med "$W/torch-big-sync.sps")" "$TB") |"
  echo "| sgdlab local, device $DEV, hidden $BIG, batch $BIGB | $LB | $(vals "$W/local-big.sps") | $(ratio "$LB" "$TB") |"
  echo "| GEMM bound of one step (bench step, cuBLAS) | ${BOUND:-FAIL} | 1 | $(ratio "${BOUND:-0}" "$TB") |"
  echo "| bench step: the step itself (ratio to bound $(ratio "${BSTEP:-0}" "${BOUND:-0}")) | ${BSTEP:-FAIL} | 1 | $(ratio "${BSTEP:-0}" "$TB") |"
  for m in $MODES; do
    echo "| sgdlab allreduce cuda-ring, 2 ranks sharing the GPU, MPS $m | $(med "$W/ar-cudaring-mps$m.sps") | 1 | $(ratio "$(med "$W/ar-cudaring-mps$m.sps")" "$TB") |"
    echo "| sgdlab allreduce cuda-ring persistent, 2 ranks sharing the GPU, MPS $m | $(med "$W/ar-cudaring-p-mps$m.sps") | 1 | $(ratio "$(med "$W/ar-cudaring-p-mps$m.sps")" "$TB") |"
    echo "| sgdlab allreduce ring, host-staged, 2 ranks, MPS $m | $(med "$W/ar-ring-mps$m.sps") | 1 | $(ratio "$(med "$W/ar-ring-mps$m.sps")" "$TB") |"
    echo "| sgdlab allreduce ring, host-staged, fp16 on the wire, 2 ranks, MPS $m | $(med "$W/ar-ringfp16-mps$m.sps") | 1 | $(ratio "$(med "$W/ar-ringfp16-mps$m.sps")" "$TB") |"
  done
  echo "| sgdlab ps, 1 server (host), 2 workers with a device replica, MPS off | $(med "$W/ps-dev.sps") | 1 | $(ratio "$(med "$W/ps-dev.sps")" "$TB") |"
  echo "| sgdlab mapreduce, driver (host), 2 executors with a device replica, MPS off | $(med "$W/mr-dev.sps") | 1 | $(ratio "$(med "$W/mr-dev.sps")" "$TB") |"
  BASE=$(med "$W/dev-ring-base.sps")
  echo "| sgdlab allreduce ring, host-staged, 2 ranks, 400 steps, MPS off (the next two's base) | $BASE | 1 | $(ratio "$BASE" "$TB") |"
  echo "| same, overlap: true (buckets staged as backward's events pass); vs base $(ratio "$(med "$W/dev-ring-overlap.sps")" "$BASE") | $(med "$W/dev-ring-overlap.sps") | 1 | $(ratio "$(med "$W/dev-ring-overlap.sps")" "$TB") |"
  echo "| same, update: sharded (owner's update on the device); vs base $(ratio "$(med "$W/dev-ring-sharded.sps")" "$BASE") | $(med "$W/dev-ring-sharded.sps") | 1 | $(ratio "$(med "$W/dev-ring-sharded.sps")" "$TB") |"
  if [ $DRY -eq 0 ]; then
    DBASE=$(med "$W/dev-cudaring-base.sps")
    echo "| sgdlab allreduce cuda-ring (staged), 2 ranks sharing the GPU, 400 steps, MPS $DEVRING_MPS (the next three's base) | $DBASE | 1 | $(ratio "$DBASE" "$TB") |"
    echo "| same, overlap: true (each bucket's ring on a second stream after backward's event); vs base $(ratio "$(med "$W/dev-cudaring-overlap.sps")" "$DBASE") | $(med "$W/dev-cudaring-overlap.sps") | 1 | $(ratio "$(med "$W/dev-cudaring-overlap.sps")" "$TB") |"
    echo "| same, update: sharded (the owner's step in the ring); vs base $(ratio "$(med "$W/dev-cudaring-sharded.sps")" "$DBASE") | $(med "$W/dev-cudaring-sharded.sps") | 1 | $(ratio "$(med "$W/dev-cudaring-sharded.sps")" "$TB") |"
    echo "| same, cuda_ring: persistent with overlap (one kernel per bucket); vs base $(ratio "$(med "$W/dev-cudaring-p-overlap.sps")" "$DBASE") | $(med "$W/dev-cudaring-p-overlap.sps") | 1 | $(ratio "$(med "$W/dev-cudaring-p-overlap.sps")" "$TB") |"
  fi
  echo "| PyTorch, MLP 784-128-10, batch 64 | $TS | $(vals "$W/torch-small.sps") | 1.00 |"
  echo "| sgdlab local, device $DEV, hidden $SMALL, batch $SMALLB | $LS | $(vals "$W/local-small.sps") | $(ratio "$LS" "$TS") |"
  echo
  echo "device copy: $(grep -h 'd2d-copy' "$LOGS/d2d-copy.log" 2>/dev/null | head -1)"
  echo
  echo "| busbw at 64 MiB, 2 ranks sharing the GPU | GB/s | % of device copy (${COPY:-n/a} GB/s) | vs host-staged ring |"
  echo "|---|---:|---:|---:|"
  for m in $MODES; do
    H=$(bw64 "$m" ring-staged)
    for impl in ring-staged cuda-ring-staged cuda-ring-persistent; do
      v=$(bw64 "$m" $impl)
      echo "| $impl, MPS $m | $v | $(awk -v a="$v" -v b="${COPY:-0}" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.1f", 100 * a / b; else print "-"}') | $(ratio "$v" "$H") |"
    done
  done
  echo
  echo "| the one loop against local (hidden $SMALL, 100 steps, device $DEV) | relative L2 distance of the parameters | bound | verdict |"
  echo "|---|---:|---:|---|"
  for k in ring ringfp16 cudaring nccl ps psfp16 mr; do
    [ $k = nccl ] && [ "$NGPU" -lt 2 ] && continue
    [ -f "$W/agree-$k.bin" ] || [ $DRY -eq 0 ] || continue
    d=$(dist $k) tol=1e-4
    case $k in ringfp16 | psfp16) tol=2e-2 ;; esac
    v=$(awk -v d="$d" -v t="$tol" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 <= t + 0) ? "ok" : "FAIL"}')
    case $k in ps*) e=ps u=workers ;; mr) e=mapreduce u=executors ;; *) e=allreduce u=ranks ;; esac
    echo "| $e $k, 2 $u of batch $SMALLB vs local batch $((SMALLB * 2)) | $d | $tol | $v |"
  done
  echo
  echo "| against the plain ring of its kind (hidden $SMALL, 100 steps, device $DEV, 2 ranks) | relative L2 distance of the parameters | bound | verdict |"
  echo "|---|---:|---:|---|"
  for k in ringov:ring:"ring, overlap" ringsh:ring:"ring, sharded" \
    cudaringov:cudaring:"cuda-ring, overlap" cudaringsh:cudaring:"cuda-ring, sharded" \
    cudaringpov:cudaring:"cuda-ring persistent with overlap (vs the staged cuda-ring)" \
    ncclov:nccl:"nccl, overlap" ncclsh:nccl:"nccl, sharded"; do
    IFS=: read -r a b what <<K
$k
K
    what=${what#\"} what=${what%\"}
    [ -f "$W/agree-$a.bin" ] || [ $DRY -eq 0 ] || continue
    case $a in nccl*) [ "$NGPU" -lt 2 ] && { echo "| allreduce $what | skipped: needs 2 GPUs | 0 | - |"; continue; } ;; esac
    d=$(dist "$a" "$b")
    v=$(awk -v d="$d" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 == 0) ? "ok" : "FAIL"}')
    echo "| allreduce $what | $d | 0 | $v |"
  done
  echo
  echo "| the CNN (44,426 params), device $DEV | value | rounds |"
  echo "|---|---:|---|"
  echo "| local, batch 64, $CNNSTEPS steps: samples/s | $(sps "$W/db/cnn-local.db") | 1 |"
  echo "| local, batch 64: test accuracy after $CNNSTEPS steps ($CNNTEST test images) | $(acc "$W/db/cnn-local.db") | 1 |"
  echo "| allreduce ring (host-staged), 2 ranks of batch 64, $CNNSTEPS steps: samples/s | $(sps "$W/db/cnn-ar.db") | 1 |"
  echo "| allreduce ring: test accuracy after $CNNSTEPS steps | $(acc "$W/db/cnn-ar.db") | 1 |"
  echo
  echo "| the CNN, 100 steps, 2 workers of batch 32 | relative L2 distance of the parameters | bound | verdict |"
  echo "|---|---:|---:|---|"
  for k in local:cnn-cpu:1e-2 ring:cnn-local:1e-3 cudaring:cnn-local:1e-3 ringov:cnn-ring:0 \
    cudaringov:cnn-cudaring:0; do
    IFS=: read -r a b tol <<K
$k
K
    [ -f "$W/agree-cnn-$a.bin" ] || [ $DRY -eq 0 ] || continue
    d=$(dist "cnn-$a" "$b")
    v=$(awk -v d="$d" -v t="$tol" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 <= t + 0) ? "ok" : "FAIL"}')
    case $a in
      local) what="local on $DEV vs local on the CPU" ;;
      ringov) what="allreduce ring with overlap vs the plain ring, on $DEV" ;;
      cudaringov) what="allreduce cuda-ring with overlap vs the plain cuda-ring, on $DEV" ;;
      *) what="allreduce $a vs local, on $DEV" ;;
    esac
    echo "| $what | $d | $tol | $v |"
  done
  echo
  echo "persistent ring, silent neighbour: $DEAD"
  echo
  for m in $MODES; do
    echo "bench allreduce (device buffers, 2 ranks sharing the GPU, MPS $m):"
    echo '```'
    grep -E '^#|^ +[0-9]' "$LOGS/bench-allreduce-mps$m.log" 2>/dev/null
    echo '```'
  done
  echo "tests:${TEST_RESULT:- none}; compute-sanitizer: $SAN; bench allreduce: see bench-allreduce-mps*.log; failed parts: $NFAIL; skipped for time: $NSKIP; $(($(date +%s) - T0)) s of ${LIMIT_S} s"
}
write_table() { table >"$OUT/table.md" 2>/dev/null; }
logs() {
  cp "$W"/cfg/*.yaml "$LOGS/" 2>/dev/null
  tar czf "$OUT/gpu-check-logs.tar.gz" -C "$W" logs
}
on_signal() {
  [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null
  echo "gpu-check: stopped by a signal after $(($(date +%s) - T0)) s; the table so far:"
  write_table
  logs
  cat "$OUT/table.md"
  exit 124
}
trap on_signal TERM INT

# the table is written again after a step that ran a part (tens of
# processes a write: a dry run skips whole steps) and after the last step
WROTE=-1
for st in $STEPS; do
  "step_$st"
  if [ "$NPART" -ne "$WROTE" ] || [ "$st" = "${STEPS##* }" ]; then write_table; WROTE=$NPART; fi
done
logs
echo
cat "$OUT/table.md"
exit 0
