#!/bin/sh
# hostile_checks.sh SGDLAB: hostile numbers in a student's database (for
# `sgdlab lab check` and `sgdlab report`) and in a course repository's
# claim file.  Each command is bounded (a hang is exit 124 here).
#  - a workload of "inf" parameters makes every expectation in K
#    infinite: an exact check within a tolerance, an upper bound and a
#    prediction against an infinite measured value must fail (an older
#    sgdlab passed all three: inf <= inf);
#  - blame.rank_number that is not a plain decimal rank (" 2", "2" and a
#    newline, "-2", "+2", "2e0", 20 digits, "0x2", a fullwidth digit, an
#    escape sequence) never grades as rank 2, and no control byte reaches
#    the grader's terminal; "2" itself does;
#  - the report's Claims table shows the seconds a check took as a short
#    number ("1e+308", not 31 digits cut from 309) and "-" for an
#    infinity, a text or a NULL; a says with markup is escaped;
#  - 200,000 claims rows of one experiment (50,000 claims): the report
#    ends within 120 s and shows each claim's latest row (an older query,
#    a correlated max() per row, ran past 120 s);
#  - claim files with rounds, quiet_load, tol or band of 0, negative,
#    NaN, 1e308 or a very long string: refused in one line naming
#    file:line:col and the key, or (finite extremes) accepted.
set -u
base=$(cat "$(dirname "$0")/hostile_schema.sql") || exit 1
sg=${1:?usage: hostile_checks.sh SGDLAB}
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
out=""
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
command -v sqlite3 >/dev/null || fail "no sqlite3 command"
esc=$(printf '\033')

# $1: database; $2: the workload's text; $3: bytes per step row and rank;
# $4: more SQL
make_db() {
  sqlite3 "$1" "
$base
CREATE TABLE steps(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, step INTEGER,
  epoch INTEGER, t_start REAL, compute_s REAL, comm_s REAL, wait_s REAL, bytes_sent INTEGER,
  bytes_recv INTEGER, loss REAL, staleness INTEGER, t_start_raw REAL, kind TEXT);
CREATE TABLE evals(run_id INTEGER NOT NULL, step INTEGER, epoch INTEGER, wall_s REAL,
  samples INTEGER, train_loss REAL, test_loss REAL, test_acc REAL);
CREATE TABLE bench(id INTEGER PRIMARY KEY, experiment_id INTEGER, collective TEXT, impl TEXT,
  transport TEXT, np INTEGER, bytes INTEGER, iters INTEGER, t_min REAL, t_median REAL,
  t_max REAL, algbw REAL, busbw REAL, wrong INTEGER);
INSERT INTO experiments(id, name) VALUES(1, 'x');
INSERT INTO runs(id, experiment_id, engine, options_json, workers, servers, repeat, status,
  wall_s) VALUES(1, 1, 'allreduce', '{\"model\":\"softmax\",\"algorithm\":\"ring\"}', 2, 0, 0,
  'ok', 1.5);
INSERT INTO run_info VALUES(1, 'workload', '$2');
INSERT INTO steps(run_id, rank, step, t_start, compute_s, comm_s, wait_s, bytes_sent,
  bytes_recv, loss, kind) VALUES(1, 0, 0, 0, 0.1, 0.1, 0, $3, $3, 1, 'worker'),
  (1, 1, 0, 0, 0.1, 0.1, 0, $3, $3, 1, 'worker');
$4" || fail "sqlite3 could not make $1"
}

# ---- infinite expectations and measurements ----------------------------
mkdir "$d/labs"
cat > "$d/labs/lab1.check" <<'EOF'
says: hostile numbers
name: x
checks:
  - what: bytes within 1 %
    measure: bytes
    where: {engine: allreduce}
    expect: 4*K*(N-1)/N
    tol: 0.01
  - what: bytes at most
    measure: bytes
    where: {engine: allreduce}
    expect: 4*K*(N-1)/N
    bound: upper
  - what: the bytes predicted
    measure: bytes
    where: {engine: allreduce}
    predicted: b
    tol: 0.1
EOF
printf 'b: 5\n' > "$d/p.yaml"
# K infinite (bytes finite): the tolerance and the bound admitted any value
make_db "$d/inf.db" "fashion-mnist softmax (inf params)" 31400 ""
# bytes infinite (REAL inf in the file): any prediction was within 10 %
make_db "$d/infm.db" "fashion-mnist softmax (7850 params)" 9e999 ""
for db in inf infm; do
  out=$(timeout 30 "$sg" lab check 1 --dir "$d/labs" --db "$d/$db.db" --predictions "$d/p.yaml" 2>&1)
  echo "$out"
  echo "$out" | grep -q '^score: 0/3$' || fail "$db.db: an infinite expectation or measurement passed"
done
make_db "$d/ok.db" "fashion-mnist softmax (7850 params)" 31400 ""
printf 'b: 62800\n' > "$d/p.yaml"
out=$(timeout 30 "$sg" lab check 1 --dir "$d/labs" --db "$d/ok.db" --predictions "$d/p.yaml" 2>&1)
echo "$out" | grep -q '^score: 3/3$' || fail "the finite database does not pass"
echo "ok: infinite expectations and measurements fail; finite ones pass"

# ---- blame.rank_number ----------------------------------------------------
cat > "$d/labs/lab2.check" <<'EOF'
says: blame
name: x
checks:
  - what: blames rank 2
    measure: blame_rank
    where: {status: failed}
    expect: 2
EOF
n=0
for v in "'2'" "' 2'" "'2' || char(10)" "'-2'" "'+2'" "'2e0'" "'00000000000000000000002' || 'x'" \
         "'99999999999999999999'" "'0x2'" "char(65298)" "'2' || char(27) || ']0;owned' || char(7)"; do
  n=$((n + 1))
  make_db "$d/b$n.db" "w (7850 params)" 1 "UPDATE runs SET status = 'failed';
    INSERT INTO run_info VALUES(1, 'blame.rank_number', $v);
    INSERT INTO run_info VALUES(1, 'blame.rank', 'rank 2 (worker, h, pid 1)');"
  out=$(timeout 30 "$sg" lab check 2 --dir "$d/labs" --db "$d/b$n.db" 2>&1)
  case $out in *"$esc"*) fail "blame.rank_number $v: an escape byte reached the output" ;; esac
  if [ "$v" = "'2'" ]; then
    echo "$out" | grep -q '^score: 1/1$' || fail "blame.rank_number '2' is not rank 2"
  else
    echo "$out" | grep -q '^score: 0/1$' || fail "blame.rank_number $v graded as rank 2"
  fi
done
echo "ok: $((n - 1)) blame.rank_number values that are not a decimal rank are not rank 2"

# ---- the report's Claims table ---------------------------------------------
claims="CREATE TABLE claims(id INTEGER PRIMARY KEY, name TEXT NOT NULL, verdict TEXT NOT NULL,
  says TEXT, measured TEXT, expected TEXT, seconds REAL, experiment_id INTEGER, checked_at TEXT);
INSERT INTO claims(name, verdict, says, seconds, experiment_id) VALUES
  ('big', 'PASS', '<script>x</script>', 1e308, 1), ('neg', 'PASS', 's', -1e308, 1),
  ('inf', 'PASS', 's', 9e999, 1), ('text', 'PASS', 's', 'abc', 1), ('null', 'PASS', 's', NULL, 1),
  ('usual', 'FAIL', 's', 12.345, 1), ('usual', 'PASS', 's', 7.25, 1);"
make_db "$d/c.db" "w (7850 params)" 31400 "$claims"
out=$(timeout 60 "$sg" report x --db "$d/c.db" --out "$d/rep" 2>&1) || fail "report: exit $?"
h=$d/rep/index.html
for want in '<td>big</td><td>PASS</td><td>&lt;script&gt;x&lt;/script&gt;</td>' \
            '<td class="n">1e+308</td>' '<td class="n">-1e+308</td>' \
            '<td>inf</td>.*<td class="n">-</td>' '<td>text</td>.*<td class="n">-</td>' \
            '<td>null</td>.*<td class="n">-</td>' '<td>usual</td><td>PASS</td>.*<td class="n">7.2</td>'; do
  grep -q "$want" "$h" || { out=$(grep -o '<tr><td>[a-z]*</td>.*</tr>' "$h"); fail "no '$want'"; }
done
! grep -q '10000000000000000' "$h" || fail "a number of 17 digits or more in the Claims table"
echo "ok: the Claims table's seconds are short numbers, '-' where none; markup escaped"

sqlite3 "$d/c.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
  INSERT INTO claims(name, verdict, says, seconds, experiment_id)
  SELECT 'c' || (i % 50000), 'PASS', 's', i, 1 FROM n" || fail "sqlite3: claims rows"
t0=$(date +%s)
out=$(timeout 120 "$sg" report x --db "$d/c.db" --out "$d/rep" 2>&1) ||
  fail "report of 200,000 claims rows: exit $? (124: over 120 s)"
t1=$(date +%s)
grep -q '<td>c49999</td><td>PASS</td><td>s</td><td></td><td></td><td class="n">199999.0</td>' "$h" ||
  fail "the latest row of claim c49999 is not the one shown"
echo "ok: the report of 200,000 claims rows took $((t1 - t0)) s (load $(cut -d' ' -f1 /proc/loadavg))"

# ---- claim files ------------------------------------------------------------
long=$(awk 'BEGIN { for (i = 0; i < 600; i++) printf "x" }')
n=0
for t in "rounds: 0|rounds: a whole number, 1 to 9" "rounds: -1|rounds: a whole number, 1 to 9" \
         "rounds: nan|rounds: expected a number" "rounds: 1e308|rounds: a whole number, 1 to 9" \
         "rounds: 2.5|rounds: a whole number, 1 to 9" "quiet_load: -1|quiet_load: 0 to 1000" \
         "quiet_load: nan|quiet_load: expected a number" "quiet_load: 1e308|quiet_load: 0 to 1000" \
         "says: $long|says: too long"; do
  n=$((n + 1))
  printf '%s\nchecks:\n  - what: w\n    same: model\n' "${t%%|*}" > "$d/f$n.claim"
  out=$(timeout 20 "$sg" claims f$n --dir "$d" --list 2>&1)
  rc=$?
  [ $rc -eq 2 ] || fail "'${t%%|*}' (${#t} bytes): exit $rc, not 2"
  [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "f$n.claim:1:[0-9]*: ${t#*|}" ||
    fail "'$(echo "${t%%|*}" | cut -c1-40)': not one line naming file:line:col and the key"
done
for t in "tol: -1|tol: must be >= 0" "tol: nan|tol: expected a number" \
         "band: [nan, 1]|band: expected a number" "band: [2, 1]|band: a ratio needs band" \
         "band: [0, 0]|band: a ratio needs band" "band: [1, inf]|band: expected a number"; do
  n=$((n + 1))
  case $t in tol*) body="    measure: bytes\n    expect: K\n    ${t%%|*}" ;;
             *) body="    measure: step_ms\n    ratio: [{workers: 4}, {workers: 2}]\n    ${t%%|*}" ;;
  esac
  printf "says: s\nchecks:\n  - what: w\n$body\n" > "$d/f$n.claim"
  out=$(timeout 20 "$sg" claims f$n --dir "$d" --list 2>&1)
  rc=$?
  [ $rc -eq 2 ] && [ "$(echo "$out" | wc -l)" -eq 1 ] && echo "$out" | grep -q "f$n.claim:[0-9]*:[0-9]*: ${t#*|}" ||
    fail "'${t%%|*}': exit $rc, not one line naming the key"
done
printf 'says: s\nbench: [allreduce]\nrounds: 9\nquiet_load: 1000\nchecks:\n  - what: w\n    measure: bytes\n    expect: K\n    tol: 1e308\n  - what: r\n    measure: step_ms\n    ratio: [{workers: 4}, {workers: 2}]\n    band: [-1e308, 1e308]\n' > "$d/edge.claim"
out=$(timeout 20 "$sg" claims edge --dir "$d" --list 2>&1) || fail "finite extremes refused: exit $?"
echo "ok: $n hostile claim files refused in one line each; finite extremes accepted"
