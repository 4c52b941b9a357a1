#!/bin/sh
# scripts/agreement.sh end to end on its smallest case, and its error
# arithmetic on planted rows.  Usage: agreement_check.sh BUILD_DIR SOURCE_DIR
# Exit 77 (skip) when the build has no sgdlab-rank-smpi (no SimGrid).
set -u
build=$1 src=$2
[ -x "$build/harness/sgdlab-rank-smpi" ] || { echo "SKIP: no sgdlab-rank-smpi"; exit 77; }
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; echo "--- output:"; cat "$d/out"; exit 1; }
export SGDLAB="$build/harness/sgdlab" AGREE_TIMEOUT=200

# 1. The smallest case: (b), ring, N = 16, 32 KB, simulated and modelled.
sh "$src/scripts/agreement.sh" --quick --db "$d/q.db" > "$d/out" 2>&1 ||
  fail "agreement.sh --quick exited $?"
rows=$(grep -c '^| ring | 16 | 31.4 KB | ' "$d/out")
[ "$rows" = 1 ] || fail "expected one row 'ring | 16 | 31.4 KB', got $rows"
grep -q '^| case | N | size | predicted (ms) | measured (ms) | error |$' "$d/out" ||
  fail "no table header"
grep -q '^| \*\*geometric mean\*\* (1 cases) |' "$d/out" || fail "no geometric mean over 1 case"
grep -q '^| \*\*worst\*\*: ring | 16 | 31.4 KB |' "$d/out" || fail "no worst row"
# the row's error is |p - m| / m of its own printed columns (to rounding)
grep '^| ring | 16 |' "$d/out" | awk -F'|' '{
    p = $5 + 0; m = $6 + 0; e = $7 + 0
    if (!(p > 0 && m > 0)) { print "bad p/m: " $0; exit 1 }
    x = (p > m ? p - m : m - p) / m * 100
    # p and m are printed to 0.0005 ms, e to 0.05 %: what that rounding allows
    tol = 0.05 + 100 * 0.0005 * (1 / m + p / (m * m)) + 0.001
    if (x - e > tol || e - x > tol) { print "error " e " % but |p-m|/m = " x " %"; exit 1 }
  }' || fail "the ring row's error is not |p - m| / m"

# 2. Planted rows of part (a): 1.1 ms predicted against 1.0 measured is
# 10.0 %, 0.6 against 1.0 is 40.0 %: geometric mean 20.0 %, worst 40.0 %.
sqlite3 "$d/q.db" "INSERT INTO agreement(part, case_name, ord, n, size, size_bytes,
    predicted_s, measured_s) VALUES ('a', 'planted-x', 1, 2, '1 MB', 1e6, 0.0011, 0.0010),
    ('a', 'planted-y', 2, 4, '1 MB', 1e6, 0.0006, 0.0010)" || fail "could not plant rows"
sh "$src/scripts/agreement.sh" --report --part a --db "$d/q.db" > "$d/out" 2>&1 ||
  fail "agreement.sh --report exited $?"
# (a)'s table: the emulated runs behind each row and their range (none here)
grep -q '^| planted-x | 2 | 1 MB | 1.100 | 1.000 | - | - | 10.0 % |$' "$d/out" || fail "planted 10 % row"
grep -q '^| planted-y | 4 | 1 MB | 0.600 | 1.000 | - | - | 40.0 % |$' "$d/out" || fail "planted 40 % row"
grep -q '^| \*\*geometric mean\*\* (2 cases) |  |  |  |  |  |  | \*\*20.0 %\*\* |$' "$d/out" ||
  fail "geometric mean of 10 % and 40 % is not 20.0 %"
grep -q '^| \*\*worst\*\*: planted-y | 4 | 1 MB |  |  |  |  | \*\*40.0 %\*\* |$' "$d/out" ||
  fail "worst is not planted-y's 40.0 %"

# the (a) table holds only (a): the ring row of (b) is not in it
grep -q '^| ring |' "$d/out" && fail "(b)'s row in (a)'s table"

# 2b. (a)'s measured side is the median of the latest AGREE_REPEATS (3)
# emulated runs of a case: planted runs of ring N = 2 with step periods
# 100 ms (the oldest, left out), 1, 1.5 and 3 ms (the latest); simulated
# 1.65 ms.  The median is 1.5 ms (10 %), not the mean (1.83 ms) nor the
# latest run (3 ms, what one repeat takes).
sqlite3 "$d/q.db" "DELETE FROM agreement WHERE part = 'a';
  INSERT INTO experiments(id, name) VALUES (9001, 'agreement-emulated'), (9002, 'agreement-simulated');
  INSERT INTO runs(id, experiment_id, engine, options_json, workers, status) VALUES
    (9010, 9001, 'allreduce', '{\"algorithm\": \"ring\"}', 2, 'ok'),
    (9011, 9001, 'allreduce', '{\"algorithm\": \"ring\"}', 2, 'ok'),
    (9012, 9001, 'allreduce', '{\"algorithm\": \"ring\"}', 2, 'ok'),
    (9013, 9001, 'allreduce', '{\"algorithm\": \"ring\"}', 2, 'ok'),
    (9014, 9002, 'allreduce', '{\"algorithm\": \"ring\"}', 2, 'ok');
  INSERT INTO run_info(run_id, key, value) SELECT id, 'workload', 'mlp (100000 params)'
    FROM runs WHERE id BETWEEN 9010 AND 9014;
  WITH p(run, d) AS (VALUES (9010, 0.1), (9011, 0.001), (9012, 0.0015), (9013, 0.003), (9014, 0.00165)),
       k(step) AS (VALUES (5), (6), (7)), r(rank) AS (VALUES (0), (1))
  INSERT INTO steps(run_id, rank, role, step, t_start) SELECT run, rank, 'worker', step, step * d
    FROM p, k, r;" || fail "could not plant the emulated runs"
sh "$src/scripts/agreement.sh" --report --part a --db "$d/q.db" > "$d/out" 2>&1 ||
  fail "agreement.sh --report (planted runs) exited $?"
grep -q '^| ring | 2 | 0.40 MB | 1.650 | 1.500 | 3 | 1.0-3.0 | 10.0 % |$' "$d/out" ||
  { cat "$d/out"; fail "(a)'s measured side is not the median of the latest 3 emulated runs"; }
AGREE_REPEATS=1 sh "$src/scripts/agreement.sh" --report --part a --db "$d/q.db" > "$d/out" 2>&1
grep -q '^| ring | 2 | 0.40 MB | 1.650 | 3.000 | 1 | 3.0-3.0 | 45.0 % |$' "$d/out" ||
  fail "AGREE_REPEATS=1: not the latest emulated run alone"
AGREE_REPEATS=4 sh "$src/scripts/agreement.sh" --report --part a --db "$d/q.db" > "$d/out" 2>&1
grep -q '^| ring | 2 | 0.40 MB | 1.650 | 2.250 | 4 | 1.0-100.0 | 26.7 % |$' "$d/out" ||
  fail "AGREE_REPEATS=4: not the median of all four"

# 3. Bad input: one line, exit 2, nothing run.
sh "$src/scripts/agreement.sh" --sizes 3k --db "$d/x.db" > "$d/out" 2>&1
[ $? = 2 ] && [ "$(wc -l < "$d/out")" = 1 ] && [ ! -e "$d/x.db" ] || fail "--sizes 3k: not one line and exit 2"
echo "agreement_check: ok"
