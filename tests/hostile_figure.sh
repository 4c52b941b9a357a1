#!/bin/bash
# hostile_figure.sh SRC: scripts/overlap-figure.sh with paths that carry
# gnuplot syntax.  The output prefix and the temporary directory reach
# gnuplot as single-quoted strings; an OUT_PREFIX holding
# `'; system('touch MARK'); print '` ran the command (the quote ended
# the string).  Here the figure must be drawn under that literal name
# with no MARK made, a TMPDIR with a quote must work the same, and a path
# with a newline or a database path with URI syntax (? #) is one line
# and exit 2; a link name with a terminal escape is printed without it,
# and a view that never ends stops at the query bound, one line, exit 1.
# The database is a small hand-made one of the tables the
# script reads (experiments, runs, steps, buckets).
set -u
src=${1:?usage: hostile_figure.sh SRC}
script=$src/scripts/overlap-figure.sh
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v sqlite3 >/dev/null || fail "no sqlite3 command"
command -v gnuplot >/dev/null || fail "no gnuplot command"

db=$d/ov.db
{
  echo "CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE runs(id INTEGER PRIMARY KEY, experiment_id INTEGER, options_json TEXT, status TEXT);
CREATE TABLE steps(run_id INTEGER, rank INTEGER, step INTEGER, compute_s REAL, comm_s REAL,
  wait_s REAL, kind TEXT);
CREATE TABLE buckets(run_id INTEGER, rank INTEGER, step INTEGER, bucket INTEGER,
  nbuckets INTEGER, offset INTEGER, floats INTEGER, ready_s REAL, start_s REAL, end_s REAL);
INSERT INTO experiments VALUES(1, 'overlap-links');"
  id=0
  for v in '"overlap": 0' '"overlap": 1, "bucket": 1048576' '"overlap": 1, "bucket": 16384'; do
    for link in 20mbit 100mbit 1gbit; do
      id=$((id + 1))
      echo "INSERT INTO runs VALUES($id, 1, '{$v, \"cluster.link\": \"$link\"}', 'ok');"
      for s in 5 6 7 8 9 10; do
        echo "INSERT INTO steps VALUES($id, 0, $s, 0.05, 0.0$id, 0.001, 'worker');"
      done
      echo "INSERT INTO buckets VALUES($id, 0, 10, 0, 1, 0, 100, 0.01, 0.02, 0.06);"
    done
  done
} | sqlite3 "$db" || fail "sqlite3 could not make the database"

cd "$d" || exit 1 # gnuplot's system() runs here: MARK is $d/MARK
mark=$d/MARK
evil="$d/fig'; system('touch MARK'); print '"
out=$(timeout 60 bash "$script" "$db" "$evil" 2>&1) || fail "overlap-figure.sh exit $?: $out"
[ ! -e "$mark" ] || fail "the output prefix ran gnuplot's system(): $mark exists"
[ -s "$evil.png" ] && [ -s "$evil.svg" ] || fail "no figure under the literal prefix: $(ls "$d")"
echo "ok: a quote in OUT_PREFIX is part of the file name"

out=$(timeout 60 bash "$script" "$db" "$d/x" "overlap-links'; DROP TABLE runs; --" 2>&1)
rc=$?
[ $rc -eq 2 ] || fail "a quote in EXPERIMENT: exit $rc, not 2: $out"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] || fail "a quote in EXPERIMENT: not one line: $out"
sqlite3 "$db" "SELECT count(*) FROM runs" >/dev/null 2>&1 || fail "the runs table is gone"
echo "ok: an EXPERIMENT with a quote is one line and exit 2"

mkdir "$d/tmp'; system('touch MARK'); print '" || fail "mkdir"
out=$(TMPDIR="$d/tmp'; system('touch MARK'); print '" timeout 60 bash "$script" "$db" "$d/b" 2>&1) ||
  fail "with a quote in TMPDIR: exit $?: $out"
[ ! -e "$mark" ] || fail "the temporary directory's name ran gnuplot's system()"
[ -s "$d/b.png" ] || fail "no figure with a quote in TMPDIR"
echo "ok: a quote in TMPDIR"

nl="$d/c
set output '$d/x'"
out=$(timeout 60 bash "$script" "$db" "$nl" 2>&1)
rc=$?
[ $rc = 2 ] || fail "a newline in OUT_PREFIX: exit $rc, want 2: $out"
[ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "not one line: $out"
ls "$d" | grep -q '^c' && fail "a file was drawn for a prefix with a newline"
echo "ok: a newline in OUT_PREFIX is refused: $out"

out=$(timeout 60 bash "$script" "$db?mode=rwc" "$d/e" 2>&1)
rc=$?
[ $rc = 2 ] || fail "a database path with '?': exit $rc, want 2: $out"
echo "ok: URI syntax in the database path is refused"

out=$(timeout 60 bash "$script" "$d/sub%2Fov.db" "$d/f" 2>&1)
rc=$?
[ $rc = 2 ] || fail "a database path with '%': exit $rc, want 2: $out"
echo "ok: a percent escape in the database path is refused"

# a link name with a terminal escape (ESC ] 0 ; title BEL) reaches the
# bucket table: printed without its control characters
esc=$(printf '\033]0;pwned\007')
sqlite3 "$db" "UPDATE runs SET options_json = json_set(options_json, '$.\"cluster.link\"',
  '20mbit' || char(27) || ']0;pwned' || char(7)) WHERE id = 1" || fail "sqlite3 update"
out=$(timeout 60 bash "$script" "$db" "$d/g" 2>&1) || fail "with an escape in a link: exit $?: $out"
case $out in *"$esc"*|*$'\033'*) fail "a terminal escape from the database reached the output" ;; esac
printf '%s\n' "$out" | grep -q '20mbit\]0;pwned' || fail "the bucket row of that link is missing: $out"
echo "ok: a terminal escape in the database is not printed"

# a view that never ends, where the script reads steps: one line, bounded
cp "$db" "$d/loop.db" || fail "cp"
sqlite3 "$d/loop.db" "DROP TABLE steps; CREATE VIEW steps AS WITH RECURSIVE c(x) AS
  (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT 1 AS run_id, 0 AS rank, x AS step,
  0.05 AS compute_s, 0.01 AS comm_s, 0.0 AS wait_s, 'worker' AS kind FROM c" || fail "view"
out=$(OVERLAP_FIGURE_QUERY_S=2 timeout 60 bash "$script" "$d/loop.db" "$d/h" 2>&1)
rc=$?
[ $rc = 1 ] || fail "a view without end: exit $rc, want 1 (124: the test's own timeout): $out"
printf '%s\n' "$out" | grep -q 'ran past 2 s' || fail "no line naming the bound: $out"
echo "ok: a query that never ends stops at its bound: $out"
echo "PASS"
