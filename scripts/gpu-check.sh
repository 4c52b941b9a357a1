#!/usr/bin/env bash
# gpu-check.sh - the GPU tests and the device throughput table in one call.
#
#   bash scripts/gpu-check.sh [--bundle DIR]     on a GPU machine
#   bash scripts/gpu-check.sh --dry [--build DIR] on any machine, CPU build
#
# GPU mode: unpacks DIR/bundle.tar.xz (default .gpu/, made by a bundling
# step that packs a CUDA build, its libraries, a relocated Open MPI and the
# Fashion-MNIST IDX files; b/env.sh sets the paths), then:
#   1. interleaved, 3 rounds: PyTorch (scripts/torch_mlp.py, fp32, TF32
#      off) and sgdlab `local` with device: cuda, on the MLP 784-2048-2048-10
#      batch 256 and on 784-128-10 batch 64 (SGD, momentum 0.9);
#   2. `sgdlab bench step --set device=cuda` (the step against its cuBLAS
#      GEMM bound); allreduce training with 2 ranks sharing the GPU
#      (cuda-ring staged and persistent, host-staged ring) and `sgdlab
#      bench allreduce` on device buffers, each without and with MPS
#      (when nvidia-cuda-mps-control exists); the device copy bandwidth;
#   3. the test_cuda* binaries; compute-sanitizer memcheck on the gradient
#      and SGD cases of test_cuda_gpu;
#   2b. the engine's one training loop against local on the device: the
#      parameters after 100 steps of allreduce (host-staged ring, fp16 on
#      the wire, cuda-ring; 2 ranks) against local's, relative L2 distance;
#      the same for ps (1 server on the host, 2 workers with a device
#      replica, float32 and fp16 pushes) and mapreduce (the driver on the
#      host, 2 executors with a device replica), and both engines'
#      samples/s on the big MLP;
#   2b'. overlap with backprop and the sharded update on the device
#      (host-staged ring, 2 ranks): samples/s against the plain ring, and
#      the parameters after 100 steps against the plain ring's (distance
#      0 expected: the same sums and update for 2 ranks);
#   2c. model: cnn on the device: local (samples/s, test accuracy after
#      2,000 steps) and allreduce ring with 2 ranks; 100 steps against
#      local on the CPU and the engine's loop against local on the device
#      (relative L2 distance); compute-sanitizer on test_cuda_cnn_gpu;
#   4. the persistent device ring with a silent neighbour (cuda_ring_rank
#      --dead): the kernel must give up after 2 s and the call fail;
# and prints one Markdown table (medians of the rounds) and the device
# rings' busbw at 64 MiB against the host-staged ring and the copy
# bandwidth.  Every part is bounded by `timeout` and non-fatal: a failing
# part prints "FAIL: part" and the script goes on; the whole stays under
# LIMIT_S (330 s).
# Logs: $OUT/gpu-check-logs.tar.gz (OUT defaults to ./gpu-check-out), the
# table also in $OUT/table.md.
#
# --dry runs the same plumbing with the CPU build in DIR (default build/):
# the parts that need a GPU print "SKIP (dry: no GPU): part"; the
# throughput parts run on device: cpu with a small model and one round,
# so the table's layout and parsing are exercised.
set -u
DRY=0 BUNDLE=.gpu BUILD=build LIMIT_S=${LIMIT_S:-330}
while [ $# -gt 0 ]; do
  case $1 in
    --dry) DRY=1 ;;
    --bundle) BUNDLE=${2:?--bundle DIR}; shift ;;
    --build) BUILD=${2:?--build DIR}; shift ;;
    *) echo "gpu-check: unknown argument '$1' (--dry, --bundle DIR, --build DIR)" >&2; exit 2 ;;
  esac
  shift
done
ROOT=$(pwd)
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT" || exit 2
W=$(mktemp -d /tmp/gpu-check.XXXXXX) || exit 2
trap 'rm -rf "$W"' EXIT
LOGS=$W/logs
mkdir -p "$LOGS" "$W/cfg" "$W/db"
T0=$(date +%s)
NFAIL=0

left() { echo $((LIMIT_S - ($(date +%s) - T0))); }
# part NAME LIMIT CMD...: runs CMD under timeout min(LIMIT, time left),
# output to $LOGS/NAME.log; prints PASS/FAIL; never fails the script.
part() {
  local name=$1 lim=$2 l rc
  shift 2
  l=$(left)
  [ "$l" -lt "$lim" ] && lim=$l
  if [ "$lim" -le 5 ]; then
    echo "FAIL: $name (no time left of the ${LIMIT_S} s)"; NFAIL=$((NFAIL + 1)); return 1
  fi
  local t=$(date +%s)
  timeout -k 5 "$lim" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "PASS: $name ($(($(date +%s) - t)) s)"
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
  DEV=cpu ROUNDS=1 BIG='[64]' BIGB=256 SMALL='[32]' SMALLB=64 EPOCHS=1
  CNNSTEPS=30 CNNTEST=1000
  [ -x "$SG" ] || { echo "gpu-check: $SG: no sgdlab build (cmake --build $BUILD)" >&2; exit 2; }
else
  [ -f "$BUNDLE/bundle.tar.xz" ] || { echo "gpu-check: $BUNDLE/bundle.tar.xz: no bundle" >&2; exit 2; }
  tar xJf "$BUNDLE/bundle.tar.xz" -C "$W" || exit 2
  R=$W/b
  # shellcheck disable=SC1091
  . "$R/env.sh"
  SG=$R/build/harness/sgdlab TESTS=$R/build/tests DATA=$R/data/fashion-mnist
  DEV=cuda ROUNDS=3 BIG='[2048, 2048]' BIGB=256 SMALL='[128]' SMALLB=64 EPOCHS=3
  CNNSTEPS=2000 CNNTEST=10000
fi
echo "gpu-check: $([ $DRY -eq 1 ] && echo dry, CPU build || echo GPU) $SG, logs in $OUT, limit $LIMIT_S s"
{ date -u; uname -a; uptime; nvidia-smi 2>&1 | head -20; "$SG" --version; "$SG" engines 2>&1 | tail -3; env | grep -E '^(OPENBLAS|OMP|CUDA)_' ; } >"$LOGS/machine.log" 2>&1
[ $DRY -eq 0 ] && nvidia-smi -L

cd "$W" || exit 2

# ---- 1. throughput, interleaved -------------------------------------------------
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
# sps DB: the run's samples/s (run_summary)
sps() {
  python3 - "$1" <<'PY' 2>/dev/null || echo FAIL
import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute("SELECT samples_per_s FROM run_summary").fetchall()
print("%.0f" % r[-1][0] if r and r[-1][0] else "FAIL")
PY
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
    part "$name" 30 python3 "$ROOT/scripts/torch_mlp.py" --data "$DATA" --check-data
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
for r in $(seq 1 $ROUNDS); do
  torch torch-big "$r" 2048,2048 256 600
  sgrun local-big "$r" local 1 "$BIG" "$BIGB"
  torch torch-small "$r" 128 64 2000
  sgrun local-small "$r" local 1 "$SMALL" "$SMALLB"
done

# ---- 2. bounds and the allreduce rows ------------------------------------------
part bench-step 90 "$SG" bench step --set device=$DEV --set "data_dir=$DATA" --set "hidden=$BIG" --set batch=$BIGB
BOUND=$(grep -o 'bound: .*, [0-9]* samples/s' "$LOGS/bench-step.log" | grep -o '[0-9]* samples/s' | grep -o '[0-9]*')
BSTEP=$(grep -o 'step (grad+apply): .*, [0-9]* samples/s' "$LOGS/bench-step.log" | grep -o '[0-9]* samples/s' | grep -o '[0-9]*')
# Two ranks sharing one GPU: without MPS the driver time-slices the two
# processes' contexts (a kernel that waits for the other rank's kernel
# waits for a slice); with MPS (nvidia-cuda-mps-control, when the machine
# has it) their kernels run at once, as on one GPU per rank.
MPSC=$(command -v nvidia-cuda-mps-control 2>/dev/null)
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
MODES=off
[ $DRY -eq 0 ] && [ -n "$MPSC" ] && MODES="off on"
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
# ps: 2 workers with a device replica (the gradient staged down for the
# pushes, the pulled parameters up), 1 server on the host; without MPS
sgrun ps-dev 1 "{engine: ps, servers: 1}" 2 "$BIG" $((BIGB / 2))
# mapreduce: 2 executors with a device replica (the parameters up, the
# tasks' sum down), the driver on the host
sgrun mr-dev 1 "{engine: mapreduce}" 2 "$BIG" $((BIGB / 2))
# overlap with backprop and the sharded update on the device (host-staged
# ring, 2 ranks, MPS off): samples/s of 400 steps of the big MLP against
# the plain host-staged ring under the same settings
devopt() { # NAME ENGINE
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
devopt ar-ring-base "{engine: allreduce, algorithm: ring}"
devopt ar-ring-overlap "{engine: allreduce, algorithm: ring, overlap: true}"
devopt ar-ring-sharded "{engine: allreduce, algorithm: ring, update: sharded}"
# ---- 2b. the one training loop against local, on the device ------------------------
# 100 steps of the small MLP with the parameters dumped: local (batch 2b)
# and allreduce with 2 ranks of batch b through the engine's one loop
# (host-staged ring, fp16 on the wire, cuda-ring); the relative L2
# distance of each dump to local's.  float32 sums: ~1e-6; fp16 on the
# wire: rounding of the sums, ~1e-3.
agree() { # KEY ENGINE WORKERS BATCH
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
# (REF: local)
dist() {
  python3 - "$W/agree-$1.bin" "$W/agree-${2:-local}.bin" <<'PY' 2>/dev/null || echo FAIL
import array, math, sys
a, b = array.array("f"), array.array("f")
for x, p in ((a, sys.argv[1]), (b, sys.argv[2])):
    with open(p, "rb") as f:
        x.frombytes(f.read())
assert len(a) == len(b) > 0
d = math.sqrt(sum((u - v) ** 2 for u, v in zip(a, b))) / math.sqrt(sum(v * v for v in b))
print("%.2g" % d)
PY
}
agree local local 2 "$SMALLB" # the global batch of 2 workers, one process
agree ring "{engine: allreduce, algorithm: ring}" 2 "$SMALLB"
agree ringfp16 "{engine: allreduce, algorithm: ring, compress: fp16}" 2 "$SMALLB"
agree ps "{engine: ps, servers: 1}" 2 "$SMALLB"
agree psfp16 "{engine: ps, servers: 2, compress: fp16}" 2 "$SMALLB"
agree mr "{engine: mapreduce}" 2 "$SMALLB"
# overlap (4 KiB buckets: 2 of the small MLP, the last layer and layer 0)
# and the sharded update
# against the plain device ring: for 2 ranks the same sums and the same
# update kernel, so the parameters must be equal (distance 0)
agree ringov "{engine: allreduce, algorithm: ring, overlap: true, bucket: 4K}" 2 "$SMALLB"
agree ringsh "{engine: allreduce, algorithm: ring, update: sharded}" 2 "$SMALLB"
if [ $DRY -eq 1 ]; then
  skip "allreduce cuda-ring against local"
else
  agree cudaring "{engine: allreduce, algorithm: cuda-ring}" 2 "$SMALLB"
fi
# ---- 2c. the CNN on the device ---------------------------------------------------
# model: cnn (LeNet-5-like, 44,426 parameters): `local` for samples/s and the
# test accuracy after a fixed number of steps; allreduce (host-staged ring)
# with 2 ranks for samples/s; and 100 steps with the parameters dumped
# (2 workers of batch 32): local on the device against local on the CPU
# (cuBLAS against OpenBLAS sums: a rounding difference per product, which
# training amplifies where a max-pool or ReLU decision flips), and the
# engine's loop (ring, cuda-ring) against local on the device.
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
  python3 - "$1" <<'PY' 2>/dev/null || echo FAIL
import sqlite3, sys
r = sqlite3.connect(sys.argv[1]).execute("SELECT final_acc FROM run_summary").fetchall()
print("%.4f" % r[-1][0] if r and r[-1][0] is not None else "FAIL")
PY
}
cnnrun cnn-local local 1 64 "$DEV" "$CNNSTEPS" 100 60
cnnrun cnn-ar "{engine: allreduce, algorithm: ring}" 2 64 "$DEV" "$CNNSTEPS" 100 60
cnnrun agree-cnn-cpu local 2 32 cpu 100 100 45
cnnrun agree-cnn-local local 2 32 "$DEV" 100 100 45
cnnrun agree-cnn-ring "{engine: allreduce, algorithm: ring}" 2 32 "$DEV" 100 100 45
# overlap with backprop on the CNN (16 KiB buckets: 3 a step): for 2 ranks
# the same sums as the plain ring, so the same parameters (bound 0)
cnnrun agree-cnn-ringov "{engine: allreduce, algorithm: ring, overlap: true, bucket: 16K}" 2 32 "$DEV" 100 100 45
if [ $DRY -eq 1 ]; then
  skip "the CNN with allreduce cuda-ring against local"
else
  cnnrun agree-cnn-cudaring "{engine: allreduce, algorithm: cuda-ring}" 2 32 "$DEV" 100 100 45
fi
[ $DRY -eq 0 ] && part d2d-copy 30 "$TESTS/cuda_ring_rank" --copy 67108864
# the persistent ring's timeout: rank 1 never calls, rank 0 must fail in ~2 s
if [ $DRY -eq 1 ]; then
  skip "persistent ring with a silent neighbour (cuda_ring_rank --dead)"; DEAD="skipped: dry, no GPU"
else
  part pring-dead-peer 40 mpirun --allow-run-as-root --oversubscribe -np 2 "$TESTS/cuda_ring_rank" --dead
  DEAD=$(grep -m1 -o 'dead-peer: .*' "$LOGS/pring-dead-peer.log" || echo "FAIL (see pring-dead-peer.log)")
fi

# ---- 3. tests (last: the table comes first) ------------------------------------------------------------------
TEST_RESULT=""
for t in "$TESTS"/test_cuda*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  if [ "$n" = test_cuda_refuse ] && [ $DRY -eq 0 ]; then
    continue # it checks the refusal on a machine WITHOUT a device
  fi
  if [ "$n" = test_cuda_replica ] && [ $DRY -eq 0 ]; then
    continue # a CPU twin (simulated device) reading the dataset's system path
  fi
  part "$n" 150 "$t"
  rc=$?
  if [ $rc -eq 77 ] || grep -q '^SKIP' "$LOGS/$n.log"; then r=skip; elif [ $rc -eq 0 ]; then r=pass; else r=FAIL; fi
  TEST_RESULT="$TEST_RESULT $n:$r"
done
SAN=n/a
if [ $DRY -eq 1 ]; then
  skip "compute-sanitizer --tool memcheck test_cuda_gpu grad/sgd, test_cuda_cnn_gpu"
elif CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1) && [ -n "$CS" ]; then
  part sanitizer 100 "$CS" --tool memcheck --error-exitcode 1 "$TESTS/test_cuda_gpu" \
    grad_mlp_matches_cpu grad_softmax_matches_cpu sgd_matches_optim
  SAN=$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors?' "$LOGS/sanitizer.log" | tail -1)
  [ -n "$SAN" ] || SAN="FAIL (see sanitizer.log)"
  part sanitizer-cnn 90 "$CS" --tool memcheck --error-exitcode 1 "$TESTS/test_cuda_cnn_gpu" \
    grad_cnn_matches_cpu
  SANC=$(grep -Eo 'ERROR SUMMARY: [0-9]+ errors?' "$LOGS/sanitizer-cnn.log" | tail -1)
  SAN="$SAN; the CNN: ${SANC:-FAIL (see sanitizer-cnn.log)}"
else
  echo "FAIL: compute-sanitizer not found"; SAN="not found"; NFAIL=$((NFAIL + 1))
fi

# ---- the table -------------------------------------------------------------------
med() { # the median of the numbers in a file (FAIL/dry kept when none)
  [ -f "$1" ] || { echo n/a; return; }
  sort -n "$1" | grep -E '^[0-9]+$' | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]}' | grep . ||
    head -1 "$1"
}
vals() { [ -f "$1" ] && paste -sd/ "$1" || echo n/a; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a+0 > 0 && b+0 > 0) printf "%.2f", a / b; else print "-"}'; }
# bw64 MODE IMPL: busbw (GB/s) at 64 MiB of IMPL's section of a bench log
bw64() {
  awk -v impl="$2" '/^# allreduce / {on = ($3 == impl ",")} on && $1 == 67108864 {print $8; exit}' \
    "$LOGS/bench-allreduce-mps$1.log" 2>/dev/null | grep . || echo n/a
}
COPY=$(grep -ho 'd2d-copy.*' "$LOGS/d2d-copy.log" 2>/dev/null | grep -o '[0-9.]* GB/s' | grep -o '[0-9.]*')
TB=$(med "$W/torch-big.sps") LB=$(med "$W/local-big.sps") TS=$(med "$W/torch-small.sps") LS=$(med "$W/local-small.sps")
{
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
  BASE=$(med "$W/ar-ring-base.sps")
  echo "| sgdlab allreduce ring, host-staged, 2 ranks, 400 steps, MPS off (the next two's base) | $BASE | 1 | $(ratio "$BASE" "$TB") |"
  echo "| same, overlap: true (buckets staged as backward's events pass); vs base $(ratio "$(med "$W/ar-ring-overlap.sps")" "$BASE") | $(med "$W/ar-ring-overlap.sps") | 1 | $(ratio "$(med "$W/ar-ring-overlap.sps")" "$TB") |"
  echo "| same, update: sharded (owner's update on the device); vs base $(ratio "$(med "$W/ar-ring-sharded.sps")" "$BASE") | $(med "$W/ar-ring-sharded.sps") | 1 | $(ratio "$(med "$W/ar-ring-sharded.sps")" "$TB") |"
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
  for k in ring ringfp16 cudaring ps psfp16 mr; do
    [ -f "$W/agree-$k.bin" ] || [ $DRY -eq 0 ] || continue
    d=$(dist $k) tol=1e-4
    case $k in ringfp16 | psfp16) tol=2e-2 ;; esac
    v=$(awk -v d="$d" -v t="$tol" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 <= t + 0) ? "ok" : "FAIL"}')
    case $k in ps*) e=ps u=workers ;; mr) e=mapreduce u=executors ;; *) e=allreduce u=ranks ;; esac
    echo "| $e $k, 2 $u of batch $SMALLB vs local batch $((SMALLB * 2)) | $d | $tol | $v |"
  done
  echo
  echo "| against the plain host-staged ring (hidden $SMALL, 100 steps, device $DEV, 2 ranks) | relative L2 distance of the parameters | bound | verdict |"
  echo "|---|---:|---:|---|"
  for k in ringov:overlap ringsh:sharded; do
    IFS=: read -r a what <<K
$k
K
    d=$(dist "$a" ring)
    v=$(awk -v d="$d" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 == 0) ? "ok" : "FAIL"}')
    echo "| allreduce ring, $what | $d | 0 | $v |"
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
  for k in local:cnn-cpu:1e-2 ring:cnn-local:1e-3 cudaring:cnn-local:1e-3 ringov:cnn-ring:0; do
    IFS=: read -r a b tol <<K
$k
K
    [ -f "$W/agree-cnn-$a.bin" ] || [ $DRY -eq 0 ] || continue
    d=$(dist "cnn-$a" "$b")
    v=$(awk -v d="$d" -v t="$tol" 'BEGIN {print (d ~ /^[0-9.e+-]+$/ && d + 0 <= t + 0) ? "ok" : "FAIL"}')
    case $a in
      local) what="local on $DEV vs local on the CPU" ;;
      ringov) what="allreduce ring with overlap vs the plain ring, on $DEV" ;;
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
  echo "tests:${TEST_RESULT:- none}; compute-sanitizer: $SAN; bench allreduce: see bench-allreduce-mps*.log; failed parts: $NFAIL; $(($(date +%s) - T0)) s"
} >"$OUT/table.md"
cp "$W"/cfg/*.yaml "$LOGS/" 2>/dev/null
tar czf "$OUT/gpu-check-logs.tar.gz" -C "$W" logs
echo
cat "$OUT/table.md"
exit 0
