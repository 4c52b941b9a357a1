#!/usr/bin/env bash
# Run the seeds' experiments at their scale (configs/seeds/*.yaml,
# docs/seeds.md), simulated with SimGrid SMPI, and copy their figures into
# docs/img/seeds-*.png.  Needs a build with sgdlab-rank-smpi
# (docs/simulate.md).  Each run is a heavy job: on a shared machine wrap
# this script in `flock /path/to/lock`.
#   scripts/seeds-figures.sh               run everything, then draw
#   scripts/seeds-figures.sh run|draw      only one half
#   scripts/seeds-figures.sh run pfn async  only these experiments
# (scale-1024, scale-1024-hubs and eager run only when named:
# scripts/seeds-figures.sh run scale-1024 scale-1024-hubs eager; with both
# scale-1024s in the database, scale's figure goes on to N = 1024: one
# `sgdlab report ... --join` of the three)
# DB (default results/seeds.db) holds the runs; each step prints how long
# it took.
set -euo pipefail
cd "$(dirname "$0")/.."
SG=${SG:-./build/harness/sgdlab}
DB=${DB:-results/seeds.db}
IMG=docs/img
what=${1:-all}
[ $# -gt 0 ] && shift
EXPS=${*:-scale gibiansky pfn async}

load1() { cut -d' ' -f1 /proc/loadavg; }

timed() { # NAME CMD...: run CMD; print its wall-clock seconds, its peak
  # resident set (GNU time, when installed) and the 1-minute load average
  # before and after
  local name=$1 t0 t1 l0 rss="" out
  shift
  l0=$(load1)
  t0=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    out=$(mktemp)
    /usr/bin/time -f %M -o "$out" "$@"
    rss=$(awk 'END { printf ", peak RSS %.2f GiB", $1 / 1048576 }' "$out")
    rm -f "$out"
  else
    "$@"
  fi
  t1=$(date +%s.%N)
  printf '== %s: %.0f s%s, load %s before, %s after\n' "$name" "$(echo "$t1 - $t0" | bc)" \
    "$rss" "$l0" "$(load1)" >&2
}

# figures each experiment's report draws that docs/seeds.md shows
figs() {
  case $1 in
    scale) echo "step_time" ;;
    gibiansky) echo "time_breakdown" ;;
    pfn) echo "time_breakdown" ;;
    async) echo "staleness_vs_workers acc_vs_workers" ;;
  esac
}

if [ "$what" = all ] || [ "$what" = run ]; then
  for e in $EXPS; do
    timed "run $e" $SG run "configs/seeds/$e.yaml" --db "$DB" -q
  done
fi
# whether the database holds an experiment named exactly $1
has_exp() {
  $SG list "$1" --limit 0 --db "$DB" 2>/dev/null | grep -q "^experiment [0-9]*  $1  "
}

# the experiments a report of e joins: scale's sweep goes on to 1024 in
# scale-1024 and scale-1024-hubs when the database has them
sels() {
  if [ "$1" = scale ] && has_exp seeds-scale-1024 && has_exp seeds-scale-1024-hubs; then
    echo "seeds-scale seeds-scale-1024 seeds-scale-1024-hubs --join"
  else
    echo "seeds-$1"
  fi
}

if [ "$what" = all ] || [ "$what" = draw ]; then
  for e in $EXPS; do
    out=results/seeds-report/$e
    # shellcheck disable=SC2046 # sels prints words
    timed "report $e" $SG report $(sels "$e") --db "$DB" --out "$out" >/dev/null
    for f in $(figs "$e"); do
      cp "$out/$f.png" "$IMG/seeds-$e-$f.png"
    done
  done
fi
