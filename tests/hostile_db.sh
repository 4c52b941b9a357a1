#!/bin/sh
# hostile_db.sh SGDLAB SRC: results databases someone else made (a student's
# hand-in, a file sent to you) whose schema runs its own SQL on read.
# A recursive view named steps never ends and fills the temp directory; a
# generated column or a virtual table under a results table's name runs the
# file's code on every read.  Every reader (lab check, show, report, export,
# trace) must refuse such a file with one line naming the table, at
# once (each command is bounded: a hang is exit 124 here); a main-schema
# run_summary view that forges numbers is ignored (sgdlab's own TEMP views
# are read); an ordinary database made the same way still reads.
set -u
base=$(cat "$(dirname "$0")/hostile_schema.sql") || exit 1
sg=${1:?usage: hostile_db.sh SGDLAB SRC}
labs=${2:?}/configs/labs
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v sqlite3 >/dev/null || fail "no sqlite3 command"

# $1: database; $2: how steps, evals are made
make_db() {
  sqlite3 "$1" "
$base
$2
INSERT INTO experiments(id, name) VALUES(1, 'lab1-ring-vs-ps');
INSERT INTO runs(id, experiment_id, engine, options_json, workers, servers, repeat, status)
  VALUES(1, 1, 'allreduce', '{\"model\":\"softmax\",\"batch\":64,\"algorithm\":\"ring\"}',
  2, 0, 0, 'ok');
INSERT INTO run_info VALUES(1, 'workload', 'fashion-mnist softmax (7850 params)');
" || fail "sqlite3 could not make $1"
}

STEPS='CREATE TABLE steps(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, step INTEGER,
  epoch INTEGER, t_start REAL, compute_s REAL, comm_s REAL, wait_s REAL, bytes_sent INTEGER,
  bytes_recv INTEGER, loss REAL, staleness INTEGER, t_start_raw REAL, kind TEXT'
EVALS='CREATE TABLE evals(run_id INTEGER NOT NULL, step INTEGER, epoch INTEGER, wall_s REAL,
  samples INTEGER, train_loss REAL, test_loss REAL, test_acc REAL);'
ROWS="INSERT INTO steps(run_id, rank, step, t_start, compute_s, comm_s, wait_s, bytes_sent,
  bytes_recv, loss, kind) VALUES(1, 0, 0, 0, 0.1, 0.1, 0, 31400, 31400, 1, 'worker'),
  (1, 1, 0, 0, 0.1, 0.1, 0, 31400, 31400, 1, 'worker');"

make_db "$d/loop.db" "CREATE VIEW steps AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL
  SELECT x + 1 FROM c) SELECT 1 AS run_id, 0 AS rank, 'worker' AS role, x AS step, 0 AS epoch,
  0.0 AS t_start, 0.0 AS compute_s, 0.0 AS comm_s, 0.0 AS wait_s, 0 AS bytes_sent,
  0 AS bytes_recv, 1.0 AS loss, 0 AS staleness, 0.0 AS t_start_raw, 'worker' AS kind FROM c;
  $EVALS"
make_db "$d/gen.db" "$STEPS, g TEXT GENERATED ALWAYS AS (printf('%.*c', 60000000, 'x')));
  $EVALS $ROWS"
make_db "$d/vtab.db" "$STEPS); CREATE VIRTUAL TABLE evals USING fts5(run_id, step); $ROWS"
make_db "$d/forged_view.db" "$STEPS); $EVALS $ROWS
  CREATE VIEW run_summary AS SELECT 1 AS run_id, 1 AS experiment_id, 'ring' AS variant,
  'ok' AS status, 2 AS workers, 0 AS servers, 0 AS repeat, 'allreduce' AS engine,
  '{}' AS options_json, 'zmq' AS transport, 999999 AS bytes_per_step;"
make_db "$d/plain.db" "$STEPS); $EVALS $ROWS"

# $1 file, $2 table named in the refusal
refused() {
  for cmd in "lab check 1 --dir $labs --db $d/$1" "show 1 --db $d/$1" "list --db $d/$1" \
             "report lab1-ring-vs-ps --db $d/$1 --out $d/rep" \
             "export lab1-ring-vs-ps --format csv --db $d/$1" "trace 1 --db $d/$1 --out $d/t.json"; do
    # shellcheck disable=SC2086
    out=$(timeout 30 "$sg" $cmd 2>&1 </dev/null)
    rc=$?
    [ $rc -eq 124 ] && fail "$1: sgdlab $cmd ran for 30 s (the file's SQL ran)"
    [ $rc -ne 0 ] || fail "$1: sgdlab $cmd: exit 0: $out"
    [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "$1: sgdlab $cmd: not one line: $out"
    echo "$out" | grep -q "'$2' is a .*not a plain table" || fail "$1: sgdlab $cmd: $out"
  done
  echo "ok: $1 refused by every reader ($out)"
}
refused loop.db steps
refused gen.db steps
refused vtab.db evals

# the file's own run_summary view is not what sgdlab reads
out=$(timeout 30 "$sg" lab check 1 --dir "$labs" --db "$d/forged_view.db" 2>&1)
echo "$out" | grep -q 'N=2 62800' || fail "forged run_summary: $out"
! echo "$out" | grep -q 999999 || fail "the file's run_summary view was read: $out"
echo "ok: a forged run_summary view is ignored"
out=$(timeout 30 "$sg" lab check 1 --dir "$labs" --db "$d/plain.db" 2>&1)
echo "$out" | grep -q '^score: ' || fail "plain database: $out"
echo "ok: the plain database reads"
