#!/bin/sh
# claims_check.sh SGDLAB SRC MODE: `sgdlab claims` end to end on the cheap
# exact claims (byte counts) in a private directory.
#   exact    ring-bytes and ps-bytes PASS, exit 0, both recorded in the
#            database's claims table, and `sgdlab report` of the claim's
#            experiment shows its row (a says with markup, escaped)
#   planted  ring-bytes with a wrong expectation (2K(N-1)/N, the bytes of
#            one direction, where sent + received is counted) FAILs, exit 1,
#            naming the wrong rows
#   badfile  a claim file with an unknown key: one line file:line:col,
#            exit 2, nothing run (no database made)
#   loaded   a claim of two rounds with an exact check and a timing check
#            that cannot pass, on a host kept busy by 2 x nproc bounded busy
#            loops: INCONCLUSIVE with the load named, exit 3; the same
#            rounds re-checked with quiet_load 1000 FAIL (exit 1), and a
#            wrong exact check FAILs at any load
set -u
sg=${1:?usage: claims_check.sh SGDLAB SRC MODE}
src=${2:?}
mode=${3:?}
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
cp "$src"/configs/claims/ring-bytes.* "$src"/configs/claims/ps-bytes.* "$d"/
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
case $mode in
exact)
  out=$("$sg" claims --dir "$d" --db "$d/c.db" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 0 ] || fail "exit $rc"
  echo "$out" | grep -q '^PASS  ring-bytes' || fail "ring-bytes did not pass"
  echo "$out" | grep -q '^PASS  ps-bytes' || fail "ps-bytes did not pass"
  n=$(sqlite3 "$d/c.db" "SELECT count(*) FROM claims WHERE verdict = 'PASS'")
  [ "$n" = 2 ] || fail "claims table holds $n PASS rows, not 2"
  # the report of a claim's experiment shows its verdict, markup escaped
  sqlite3 "$d/c.db" "UPDATE claims SET says = '<b>x</b>' WHERE name = 'ring-bytes'"
  "$sg" report claim-ring-bytes --db "$d/c.db" --out "$d/rep" >/dev/null 2>&1 || fail "report"
  grep -q '<td>ring-bytes</td><td>PASS</td><td>&lt;b&gt;x&lt;/b&gt;</td>' "$d/rep/index.html" ||
    fail "no claims row in the report"
  ;;
planted)
  sed -i '0,/expect: 4\*K\*(N-1)\/N/s//expect: 2*K*(N-1)\/N/' "$d/ring-bytes.claim"
  grep -q 'expect: 2\*K' "$d/ring-bytes.claim" || fail "could not plant"
  out=$("$sg" claims ring-bytes --dir "$d" --db "$d/c.db" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 1 ] || fail "exit $rc, not 1"
  echo "$out" | grep -q '^FAIL  ring-bytes' || fail "no FAIL line"
  echo "$out" | grep -q 'allreduce ring N=2 216320 != 108160' || fail "the wrong row is not named"
  v=$(sqlite3 "$d/c.db" "SELECT verdict FROM claims WHERE name = 'ring-bytes'")
  [ "$v" = FAIL ] || fail "recorded verdict '$v'"
  ;;
badfile)
  printf 'says: x\nchecks:\n  - what: y\n    measure: bytes\n    expect: K\n    tolerance: 0\n' > "$d/bad.claim"
  out=$("$sg" claims bad ring-bytes --dir "$d" --db "$d/c.db" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 2 ] || fail "exit $rc, not 2"
  echo "$out" | grep -q "bad.claim:6:5: tolerance: unknown key" || fail "no file:line:col line"
  [ "$(echo "$out" | wc -l)" -eq 1 ] || fail "more than one line"
  [ ! -e "$d/c.db" ] || fail "something ran"
  ;;
loaded)
  cat > "$d/t.yaml" <<'EOF2'
name: claim-t
workers: [2, 4]
workload: {dataset: fashion-mnist, model: mlp, hidden: [34], batch: 32, lr: 0.05,
           max_steps: 6, epochs: 1, eval_every: 1000000, seed: 1,
           train_samples: 6000, test_samples: 500}
engines:
  - {engine: allreduce, algorithm: ring, transport: zmq}
EOF2
  cat > "$d/t.claim" <<'EOF2'
says: a timing that cannot hold
experiment: t.yaml
rounds: 2
quiet_load: 1
checks:
  - what: bytes
    measure: bytes
    where: {engine: allreduce}
    expect: 4*K*(N-1)/N
    tol: 0
  - what: step time N=4 over N=2, 1000x
    measure: step_ms
    ratio: [{workers: 4}, {workers: 2}]
    band: [1000, 2000]
EOF2
  pids=""
  trap 'for p in $pids; do kill $p 2>/dev/null; done; rm -rf "$d"' EXIT
  for i in $(seq $((2 * $(nproc)))); do
    timeout 170 sh -c 'while :; do :; done' & pids="$pids $!"
  done
  out=$("$sg" claims t --dir "$d" --db "$d/c.db" 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 3 ] || fail "loaded: exit $rc, not 3"
  echo "$out" | grep -q '^INCONCLUSIVE  t ' || fail "no INCONCLUSIVE line"
  echo "$out" | grep -q 'inconclusive (load [0-9]* > [0-9]*)' || fail "the load is not named"
  echo "$out" | grep -q 'median of 2 rounds' || fail "not the median of the rounds' ratios"
  v=$(sqlite3 "$d/c.db" "SELECT verdict FROM claims WHERE name = 't'")
  [ "$v" = INCONCLUSIVE ] || fail "recorded verdict '$v'"
  sed -i 's/^quiet_load: 1$/quiet_load: 1000/' "$d/t.claim"
  out=$("$sg" claims t --dir "$d" --db "$d/c.db" --no-run 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 1 ] && echo "$out" | grep -q '^FAIL  t ' || fail "quiet_load 1000: exit $rc, not a FAIL"
  sed -i 's/^quiet_load: 1000$/quiet_load: 1/; s/expect: 4\*K/expect: 2*K/' "$d/t.claim"
  out=$("$sg" claims t --dir "$d" --db "$d/c.db" --no-run 2>&1); rc=$?
  echo "$out"
  [ $rc -eq 1 ] && echo "$out" | grep -q '^FAIL  t ' || fail "a wrong exact check: exit $rc, not a FAIL"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
exit 0
