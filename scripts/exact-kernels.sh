#!/usr/bin/env bash
# The exact-equality tests under every x86-64 BLAS kernel family this CPU
# can run (scripts/test.sh's second pass).
#
# sgdlab is built for the baseline x86-64 target (no -march: no AVX, no
# FMA in its own code), but OpenBLAS (DYNAMIC_ARCH) picks its kernels by
# the CPU at run time, and a kernel's results can depend on the shape of
# the call: a check that two computations give the same bits passes on one
# CPU by luck and fails on another (an AMD EPYC gets the Haswell kernels,
# an Intel Xeon with AVX-512 the SkylakeX ones).  OPENBLAS_CORETYPE forces
# a family; each of Haswell (AVX2 + FMA), Sandybridge (AVX) and Prescott
# (SSE3) that the CPU supports runs the cases below (test_workload's
# blas_info fails if the forced kernels are not the ones in use).
#
# usage: scripts/exact-kernels.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
# EXACT_JOBS: a whole number from 1 (default: the number of cores); any
# other value is one line and exit 2 before a case runs
jobs=${EXACT_JOBS:-$(nproc)}
if ! [[ $jobs =~ ^[0-9]+$ ]] || ((10#$jobs < 1)); then
  echo "exact-kernels.sh: EXACT_JOBS '$jobs': not a whole number of jobs from 1" >&2
  exit 2
fi
jobs=$((10#$jobs))
build=$(cd "${1:-build}" && pwd)
export SGDLAB_BIN_DIR="$build" SGDLAB_SOURCE_DIR="$PWD"
flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ $flags == *" $f "* ]] || return 1; done; }

# binary and test cases (none: all of them); each line claims equal bits
cases=(
  "test_model"           # dW blocks with and without the backward hook
  "test_optim"           # a range update against the whole-vector one
  "test_workload"        # same seed, same losses; the forced kernels in use
  "test_workload_slice"  # the whole slice against the batch gradient
  "test_ps_sparse"       # the sparse step against the dense gradient
  "test_one_worker"      # every engine with one worker against local
  "test_allreduce_overlap bit_equal_to_no_overlap"
  "test_allreduce_run training_matches_local"   # sharded against replicated
  "test_ps_train sliced_sync_is_bit_equal_to_unsliced sliced_fp16_push_is_bit_equal_to_unsliced"
)

cores=()
has avx2 fma && cores+=(Haswell)
has avx && cores+=(Sandybridge)
has pni && cores+=(Prescott)
# family CORE: every case under OPENBLAS_CORETYPE=CORE, its report lines
# on stdout; exit 1 if a case failed
family() {
  local core=$1 t0=$SECONDS rc=0 c log
  for c in "${cases[@]}"; do
    read -r -a argv <<<"$c"
    log="$build/Testing/exact-$core-${argv[0]}.log"
    if (cd "$build" && OPENBLAS_CORETYPE=$core timeout 600 "tests/${argv[0]}" "${argv[@]:1}") \
      >"$log" 2>&1; then
      echo "exact [$core] ${c}: ok"
    else
      echo "exact [$core] ${c}: FAILED ($log):"
      grep -E 'CHECK failed|FAIL|distance' "$log" | head -20 || true
      rc=1
    fi
  done
  echo "exact [$core]: $((SECONDS - t0)) s"
  return "$rc"
}
# The families are independent processes (each case's scratch folder is
# its own): up to EXACT_JOBS (default: the number of cores) run at once,
# each family's lines printed whole, in the order above.
mkdir -p "$build/Testing"
t0=$SECONDS
pids=()
for i in "${!cores[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  family "${cores[$i]}" >"$build/Testing/exact-${cores[$i]}.out" 2>&1 &
  pids[$i]=$!
done
rc=0
for i in "${!cores[@]}"; do
  wait "${pids[$i]}" || rc=1
  cat "$build/Testing/exact-${cores[$i]}.out"
  # a family that failed a case, or stopped before its last line, fails
  if grep -q ': FAILED' "$build/Testing/exact-${cores[$i]}.out" ||
    ! grep -q '^exact \[.*\]: [0-9]* s$' "$build/Testing/exact-${cores[$i]}.out"; then
    rc=1
  fi
done
echo "exact: ${#cores[@]} kernel families, $jobs at a time: $((SECONDS - t0)) s"
exit "$rc"
