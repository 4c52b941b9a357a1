#!/bin/sh
# gpu_check_dry.sh SRC BUILD: scripts/gpu-check.sh --dry with the CPU
# plumbing of the GPU check: it completes, prints the one table with a
# measured sgdlab local row, the CNN's rows (samples/s, accuracy, the
# distances with their verdicts), marks every GPU part SKIP, and leaves the
# table and the log archive in $OUT.  Then with a 1-second limit every
# part must FAIL visibly while the script still completes with its table
# (the parts are non-fatal), and an unknown argument is one line, exit 2.
# --list prints the plan with its estimates; without a GPU the GPU mode
# is one line, exit 2; parts whose estimate exceeds the time left are
# skipped in one line each and the table still comes; a TERM prints the
# table so far and exits 124.
set -u
SRC=$1 BUILD=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "gpu_check_dry: $*"; cat "$T/out.txt"; exit 1; }
cd "$SRC" || exit 1
OUT=$T/o sh -c "bash scripts/gpu-check.sh --dry --build '$BUILD'" >"$T/out.txt" 2>&1 || fail "rc $?"
grep -q '^SKIP (dry: no GPU): compute-sanitizer' "$T/out.txt" || fail "no SKIP line for the sanitizer"
grep -q '^SKIP (dry: no GPU): allreduce cuda-ring' "$T/out.txt" || fail "no SKIP line for cuda-ring"
grep -q '^FAIL' "$T/out.txt" && fail "a part failed in the dry run"
grep -Eq '^\| sgdlab local, device cpu, hidden \[64\], batch 256 \| [0-9]+ \|' "$T/out.txt" ||
  fail "no measured local row"
grep -Eq '^\| GEMM bound of one step .*\| [0-9]+ \|' "$T/out.txt" || fail "no bench step bound"
grep -Eq '^\| sgdlab allreduce ring, host-staged, 2 ranks, MPS off \| [0-9]+ \|' "$T/out.txt" ||
  fail "no allreduce ring row"
grep -Eq '^\| allreduce ring, 2 ranks of batch 64 vs local batch 128 \| [0-9.e+-]+ \| 1e-4 \| ok \|' "$T/out.txt" ||
  fail "the one loop's ring row does not agree with local"
grep -Eq '^\| allreduce ringfp16, .*\| ok \|' "$T/out.txt" || fail "no fp16 agreement row"
grep -Eq '^\| ps ps, 2 workers of batch 64 vs local batch 128 \| [0-9.e+-]+ \| 1e-4 \| ok \|' "$T/out.txt" ||
  fail "the ps row does not agree with local"
grep -Eq '^\| ps psfp16, .*\| ok \|' "$T/out.txt" || fail "no ps fp16 agreement row"
grep -Eq '^\| sgdlab ps, 1 server .*\| [0-9]+ \|' "$T/out.txt" || fail "no ps samples/s row"
grep -Eq '^\| mapreduce mr, 2 executors of batch 64 vs local batch 128 \| [0-9.e+-]+ \| 1e-4 \| ok \|' "$T/out.txt" ||
  fail "the mapreduce row does not agree with local"
grep -Eq '^\| sgdlab mapreduce, driver .*\| [0-9]+ \|' "$T/out.txt" || fail "no mapreduce samples/s row"
grep -q '^SKIP (dry: no GPU): allreduce cuda-ring against local' "$T/out.txt" || fail "no SKIP line for cuda-ring against local"
grep -Eq '^\| allreduce ring, overlap \| 0 \| 0 \| ok \|' "$T/out.txt" ||
  fail "overlap is not equal to the plain ring"
grep -Eq '^\| allreduce ring, sharded \| 0 \| 0 \| ok \|' "$T/out.txt" ||
  fail "the sharded update is not equal to the plain ring"
grep -Eq '^\| same, overlap: true .*\| [0-9]+ \|' "$T/out.txt" || fail "no overlap samples/s row"
grep -Eq '^\| same, update: sharded .*\| [0-9]+ \|' "$T/out.txt" || fail "no sharded samples/s row"
grep -Eq '^\| local, batch 64, 30 steps: samples/s \| [0-9]+ \|' "$T/out.txt" || fail "no CNN samples/s row"
grep -Eq '^\| local, batch 64: test accuracy after 30 steps .*\| 0\.[0-9]+ \|' "$T/out.txt" ||
  fail "no CNN accuracy row"
grep -Eq '^\| allreduce ring \(host-staged\), 2 ranks of batch 64, 30 steps: samples/s \| [0-9]+ \|' "$T/out.txt" ||
  fail "no CNN allreduce row"
grep -Eq '^\| local on cpu vs local on the CPU \| 0 \| 1e-2 \| ok \|' "$T/out.txt" ||
  fail "the CNN's cpu-vs-cpu distance is not 0"
grep -Eq '^\| allreduce ring vs local, on cpu \| [0-9.e+-]+ \| 1e-3 \| ok \|' "$T/out.txt" ||
  fail "the CNN's ring does not agree with local"
grep -q '^SKIP (dry: no GPU): the CNN with allreduce cuda-ring' "$T/out.txt" || fail "no SKIP line for the CNN's cuda-ring"
grep -Eq '^\| allreduce ring with overlap vs the plain ring, on cpu \| 0 \| 0 \| ok \|' "$T/out.txt" ||
  fail "the CNN with overlap is not equal to the plain ring"
[ -s "$T/o/table.md" ] || fail "no table.md"
tar tzf "$T/o/gpu-check-logs.tar.gz" >"$T/list" || fail "no log archive"
for f in logs/machine.log logs/local-big-1.log logs/bench-step.log logs/ar-ring-mpsoff-1.log; do
  grep -qx "$f" "$T/list" || fail "$f missing from the log archive"
done
# non-fatal parts: no time at all, yet the table comes out
LIMIT_S=1 OUT=$T/p bash scripts/gpu-check.sh --dry --build "$BUILD" >"$T/out.txt" 2>&1 ||
  fail "limit 1 s: rc $?"
grep -q '^FAIL: local-big-1 (no time left' "$T/out.txt" || fail "limit 1 s: no FAIL line"
grep -Eq '^\| sgdlab local, device cpu, .*\| FAIL \|' "$T/out.txt" || fail "limit 1 s: no FAIL cell"
bash scripts/gpu-check.sh --bogus >"$T/out.txt" 2>&1
[ $? -eq 2 ] || fail "unknown argument: not exit 2"
[ "$(wc -l <"$T/out.txt")" -eq 1 ] || fail "unknown argument: not one line"
# the plan: every step with its estimate, the total, what a limit cuts
LIMIT_S=330 bash scripts/gpu-check.sh --list >"$T/out.txt" 2>&1 || fail "--list: rc $?"
for st in gpu_tests agree agree_cnn sanitizer ring_checks round1 devopt modes replicas_cnn rounds23 twins; do
  grep -Eq "^$st +[0-9]+ s " "$T/out.txt" || fail "--list: no step $st"
done
grep -Eq '^total: ~[0-9]+ s$' "$T/out.txt" || fail "--list: no total"
sum=$(awk '$2 ~ /^[0-9]+$/ && $3 == "s" {s += $2} END {print s}' "$T/out.txt")
grep -q "^total: ~$sum s$" "$T/out.txt" || fail "--list: the total is not the sum of the steps ($sum)"
grep -q '^devopt .*fits' "$T/out.txt" || fail "--list: the checks and devopt do not fit 330 s"
grep -q '^modes .*over the limit' "$T/out.txt" || fail "--list: nothing marked over the limit"
# GPU mode on a machine without one: one line, exit 2, before anything runs
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  OUT=$T/g bash scripts/gpu-check.sh >"$T/out.txt" 2>&1
  [ $? -eq 2 ] || fail "no GPU: not exit 2"
  [ "$(wc -l <"$T/out.txt")" -eq 1 ] || fail "no GPU: not one line"
  grep -q '^gpu-check: no GPU here' "$T/out.txt" || fail "no GPU: no reason"
  [ -e "$T/g" ] && fail "no GPU: made its output folder"
fi
# the budget: parts estimated at 20 s under a 30 s limit run while they
# fit (the first 10 s), then each is skipped in one line (from 20 s left
# down to 5, a window wider than any part or table write here, loaded);
# the script ends with its table well before an outer limit would cut it
t0=$(date +%s)
GPU_CHECK_DRY_EST=20 LIMIT_S=30 RESERVE_S=0 OUT=$T/b bash scripts/gpu-check.sh --dry --build "$BUILD" \
  >"$T/out.txt" 2>&1 || fail "budget: rc $?"
el=$(($(date +%s) - t0))
grep -q '^PASS: ' "$T/out.txt" || fail "budget: nothing ran"
grep -q '^SKIP (time): .* needs ~20 s, [0-9-]* s left of the 30 s' "$T/out.txt" || fail "budget: no SKIP (time) line"
grep -Eq '^\| PyTorch fp32 ' "$T/out.txt" || fail "budget: no table"
grep -Eq 'skipped for time: [1-9][0-9]*; ' "$T/out.txt" || fail "budget: the table does not count the skipped parts"
[ "$el" -le 55 ] || fail "budget: took $el s under a 30 s limit"
# a TERM while a part runs: the part is stopped, the table so far printed, exit 124
mkfifo "$T/fifo"
OUT=$T/s bash scripts/gpu-check.sh --dry --build "$BUILD" >"$T/fifo" 2>&1 &
pid=$!
sent=0
while IFS= read -r line; do
  printf '%s\n' "$line" >>"$T/sig.txt"
  case $line in PASS:*) [ $sent -eq 0 ] && kill -TERM $pid && sent=1 ;; esac
done <"$T/fifo"
wait $pid
rc=$?
cp "$T/sig.txt" "$T/out.txt"
[ $rc -eq 124 ] || fail "TERM: rc $rc, not 124"
grep -q '^gpu-check: stopped by a signal after' "$T/out.txt" || fail "TERM: no line"
grep -Eq '^\| PyTorch fp32 ' "$T/out.txt" || fail "TERM: no table"
[ -s "$T/s/table.md" ] && [ -s "$T/s/gpu-check-logs.tar.gz" ] || fail "TERM: no table.md or logs"
echo "gpu_check_dry: ok"
