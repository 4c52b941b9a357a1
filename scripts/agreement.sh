#!/bin/sh
# Agreement of the three views (docs/simulate.md and docs/model.md,
# "Agreement"): runs the cases of configs/agreement/, then computes from
# the results database, in SQL, two error tables in the style of
# published simulator validations (per case predicted, measured,
# |p - m| / m; then the geometric mean and the worst) and prints them in
# Markdown:
#
#   (a) simulated vs emulated: configs/agreement/simulated.yaml (predicted)
#       against emulated.yaml (measured, needs root), N = 2, 4, 8; the
#       emulated sweep runs $AGREE_REPEATS times (default 3), so each case's
#       runs are interleaved with the others', and the measured side is the
#       median of each case's latest AGREE_REPEATS runs;
#   (b) model vs simulated: `sgdlab model --what-if` (predicted) against
#       configs/agreement/model-*.yaml simulated (measured), N = 16 ... 256.
#
# Measured and simulated time per step: the median over the workers
# (mapreduce: executors) of the step period, t_start to the rank's next
# t_start, steps before --warmup left out (sgdlab model's "measured").
#
#   scripts/agreement.sh [--quick] [--db DB] [--part a|b|ab] [--report]
#                        [--ns 16,32,64,128,256] [--sizes 32k,1m,64m]
#
#   --quick   the smallest case only: (b) at N = 16, 32 KB, ring (seconds)
#   --report  run nothing: the tables from what DB holds
#   --ns      (b): the worker counts; --sizes (b): model-SIZE.yaml files
#
# Simulations of 256 ranks, or 128 at 64 MB (gigabytes, minutes), should run
# alone; where $SGDLAB_HEAVY_LOCK names a lock file, they run under flock on it,
# one at a time; every run under timeout ($AGREE_TIMEOUT s, default 900; killed
# 30 s after: the step calibration before a run does not stop on TERM).
# SGDLAB: the sgdlab binary (default build/harness/sgdlab).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
sgdlab=${SGDLAB:-$here/build/harness/sgdlab}
db=results/agreement.db
part=ab
quick=0
report=0
ns=16,32,64,128,256
sizes=32k,1m,64m
warmup=${AGREE_WARMUP:-}
lock=${SGDLAB_HEAVY_LOCK:-}
tmo=${AGREE_TIMEOUT:-900}
reps=${AGREE_REPEATS:-3}

die() { echo "agreement.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --report) report=1 ;;
    --db) [ $# -ge 2 ] || die "--db needs a path"; db=$2; shift ;;
    --part) [ $# -ge 2 ] || die "--part needs a, b or ab"; part=$2; shift ;;
    --ns) [ $# -ge 2 ] || die "--ns needs a list"; ns=$2; shift ;;
    --sizes) [ $# -ge 2 ] || die "--sizes needs a list"; sizes=$2; shift ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
case $part in a|b|ab) ;; *) die "--part '$part': a, b or ab" ;; esac
echo "$ns" | grep -Eq '^[0-9]+(,[0-9]+)*$' || die "--ns '$ns': a list of numbers"
echo "$sizes" | grep -Eq '^(32k|1m|64m)(,(32k|1m|64m))*$' || die "--sizes '$sizes': of 32k, 1m, 64m"
[ -x "$sgdlab" ] || die "no sgdlab at $sgdlab (build first, or set SGDLAB)"
command -v sqlite3 >/dev/null || die "sqlite3 (the command) is not installed"
echo "$reps" | grep -Eq '^[1-9][0-9]?$' || die "AGREE_REPEATS '$reps': a number from 1 to 99"
if [ $quick = 1 ]; then part=b; ns=16; fi

heavy() { # N SIZE CMD...: at N >= 256, or 64 MB at N >= 128, one heavy run
  n=$1 size=$2; shift 2 # at a time (gigabytes, minutes); every run bounded
  if { [ "$n" -ge 256 ] || { [ "$n" -ge 128 ] && [ "$size" = 64m ]; }; } && [ -n "$lock" ] && [ -e "$lock" ]; then
    flock "$lock" timeout -k 30 "$tmo" "$@"
  else timeout -k 30 "$tmo" "$@"; fi
}
stamp() { date +%s; }

t0=$(stamp)
mkdir -p "$(dirname "$db")"
if [ $report = 0 ]; then
  echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  case $part in *a*)
    ta=$(stamp)
    heavy 8 1m "$sgdlab" run "$here/configs/agreement/simulated.yaml" --db "$db" ||
      echo "# (a) simulated: exit $? (its failed runs are missing below)"
    i=1
    while [ $i -le "$reps" ]; do
      timeout -k 30 "$tmo" "$sgdlab" run "$here/configs/agreement/emulated.yaml" --db "$db" ||
        echo "# (a) emulated, repeat $i: exit $? (its failed runs are missing below)"
      i=$((i + 1))
    done
    echo "# (a) runs: $(( $(stamp) - ta )) s, load after: $(cut -d' ' -f1-3 /proc/loadavg)" ;;
  esac
  case $part in *b*)
    tb=$(stamp)
    if [ $quick = 1 ]; then
      heavy 16 32k "$sgdlab" run "$here/configs/agreement/quick.yaml" --db "$db"
    else
      for s in $(echo "$sizes" | tr , ' '); do
        for f in model-$s model-$s-ps; do
          [ -f "$here/configs/agreement/$f.yaml" ] || continue
          for n in $(echo "$ns" | tr , ' '); do
            heavy "$n" "$s" "$sgdlab" run "$here/configs/agreement/$f.yaml" --set "workers=$n" \
              --db "$db" || echo "# (b) $f N=$n: exit $? (its failed runs are missing below)"
          done
        done
      done
    fi
    echo "# (b) runs: $(( $(stamp) - tb )) s, load after: $(cut -d' ' -f1-3 /proc/loadavg)" ;;
  esac
fi
[ -f "$db" ] || die "no database $db"

export AGREE_SQL_DIR="$here/scripts"
sql() { sqlite3 -batch -bail "$db" "$@"; }
sql < "$here/scripts/agreement-schema.sql"
sql "INSERT OR REPLACE INTO agreement_opts(key, value) VALUES('reps', $reps)"

# (b)'s predictions: sgdlab model --what-if for each simulated run of a
# model-* experiment, evaluated again every time (the formulas of the
# sgdlab it is given, not those of an earlier run); its JSON goes into the
# database as it is, and SQL reads the step out of it.
sql "DELETE FROM agreement_whatif"
sql -separator ' ' "SELECT run_id, k_bytes, n, servers, wcase, link, alpha_s, compute_s, hub_s,
                    slice, gamma FROM agreement_b_runs" |
while read -r run k n s wcase link alpha compute hub slice gamma; do
  # gamma 0: the hub's own compute, in $hub, holds the reduction; eager:
  # SimGrid's own thresholds (smpi/send-is-detached-thresh, 64 KiB, and
  # bytes that move once received), which the model-*.yaml runs keep:
  # they pin simulate.eager: simgrid
  set -- --gamma "$gamma"
  json=$("$sgdlab" model --what-if --bytes "$k" --link "$link" --latency "$alpha" "$@" \
           --compute "$compute" --hub-compute "$hub" --workers "$n" --servers "$s" --group 8 --depth 2 \
           --segment 1Mi --slice "$slice" --eager simgrid --engines "$wcase" --json) ||
    die "sgdlab model --what-if failed for run $run"
  json=$(printf '%s' "$json" | sed "s/'/''/g")
  sql "INSERT OR REPLACE INTO agreement_whatif(run_id, json) VALUES($run, '$json')"
done
sql < "$here/scripts/agreement-fill.sql"

table() { # PART TITLE
  echo
  echo "$2"
  echo
  if [ "$1" = a ]; then # the emulated side: median of R runs, their range
    sql -separator ' | ' "SELECT '| case | N | size | predicted (ms) | measured (ms, median) | runs | measured range (ms) | error |';
    SELECT '|---|---:|---:|---:|---:|---:|---:|---:|';
    SELECT '| ' || e.case_name, e.n, e.size, printf('%.3f', e.predicted_s * 1e3),
           printf('%.3f', e.measured_s * 1e3), coalesce(m.runs, '-'),
           CASE WHEN m.runs IS NULL THEN '-' ELSE printf('%.1f-%.1f', m.lo_s * 1e3, m.hi_s * 1e3) END,
           printf('%.1f %% |', e.err * 100)
      FROM agreement_err e LEFT JOIN agreement_a_measured m ON m.case_name = e.case_name AND m.n = e.n
      WHERE e.part = 'a' ORDER BY e.ord, e.n;
    SELECT '| **geometric mean** (' || cases || ' cases)', '', '', '', '', '', '',
           printf('**%.1f %%** |', gmean * 100) FROM agreement_summary WHERE part = 'a';
    SELECT '| **worst**: ' || worst_case, worst_n, worst_size, '', '', '', '',
           printf('**%.1f %%** |', worst * 100) FROM agreement_summary WHERE part = 'a';"
  else
  sql -separator ' | ' "SELECT '| case | N | size | predicted (ms) | measured (ms) | error |';
    SELECT '|---|---:|---:|---:|---:|---:|';
    SELECT '| ' || case_name, n, size, printf('%.3f', predicted_s * 1e3),
           printf('%.3f', measured_s * 1e3), printf('%.1f %% |', err * 100)
      FROM agreement_err WHERE part = '$1' ORDER BY ord, n, size_bytes;
    SELECT '| **geometric mean** (' || cases || ' cases)', '', '', '', '',
           printf('**%.1f %%** |', gmean * 100) FROM agreement_summary WHERE part = '$1';
    SELECT '| **worst**: ' || worst_case, worst_n, worst_size, '', '',
           printf('**%.1f %%** |', worst * 100) FROM agreement_summary WHERE part = '$1';"
  fi
  echo
  sql "SELECT printf('# (%s): %d runs, %.0f s of their wall time (runs.wall_s: the runs alone,'
                     || ' not the step calibration before them)', '$1', count(*), sum(r.wall_s))
       FROM runs r WHERE r.id IN (SELECT pred_run FROM agreement_err WHERE part = '$1'
                                  UNION SELECT meas_run FROM agreement_err WHERE part = '$1')"
}
case $part in *a*) table a "(a) simulated (predicted) vs emulated cluster (measured), 100 Mbit/s" ;; esac
case $part in *b*) table b "(b) sgdlab model --what-if (predicted) vs simulated (measured), 10 Gbit/s, 1 us" ;; esac
echo
echo "# tables in $(( $(stamp) - t0 )) s; load now: $(cut -d' ' -f1-3 /proc/loadavg)"
