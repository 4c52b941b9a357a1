#!/bin/sh
# exact_jobs.sh SRC: scripts/exact-kernels.sh refuses a bad EXACT_JOBS
# (not a whole number from 1) in one line, exit 2, before any case runs;
# a good value (and none) runs every case.  The cases are stubs in a
# scratch build folder that print ok and leave a mark, so no real kernel
# runs here.
set -u
SRC=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "exact_jobs: $*"; cat "$T/out.txt"; exit 1; }
mkdir -p "$T/b/tests"
for t in test_model test_optim test_workload test_workload_slice test_ps_sparse \
  test_one_worker test_allreduce_overlap test_allreduce_run test_ps_train; do
  printf '#!/bin/sh\necho ran >>"%s/marks"\n' "$T" >"$T/b/tests/$t"
  chmod +x "$T/b/tests/$t"
done
for bad in x 0 -1 2x " 2" 1.5; do
  rm -f "$T/marks"
  EXACT_JOBS=$bad bash "$SRC/scripts/exact-kernels.sh" "$T/b" >"$T/out.txt" 2>&1
  rc=$?
  [ "$rc" = 2 ] || fail "EXACT_JOBS='$bad': exit $rc, want 2"
  [ "$(wc -l <"$T/out.txt")" = 1 ] || fail "EXACT_JOBS='$bad': not one line"
  grep -q "^exact-kernels.sh: EXACT_JOBS '$bad': not a whole number of jobs from 1$" "$T/out.txt" ||
    fail "EXACT_JOBS='$bad': not the refusal line"
  [ -e "$T/marks" ] && fail "EXACT_JOBS='$bad': a case ran"
done
for good in 1 2 08 ""; do
  rm -f "$T/marks"
  EXACT_JOBS=$good bash "$SRC/scripts/exact-kernels.sh" "$T/b" >"$T/out.txt" 2>&1 ||
    fail "EXACT_JOBS='$good': exit $?"
  grep -q ': FAILED' "$T/out.txt" && fail "EXACT_JOBS='$good': a stub case failed"
  [ -s "$T/marks" ] || fail "EXACT_JOBS='$good': no case ran"
done
echo "exact_jobs: 6 bad values refused (exit 2, one line), 4 good ones ran the cases"
