#!/usr/bin/env bash
# Run every emulated-cluster experiment (configs/cluster/*.yaml, docs/cluster.md)
# and redraw its figures into docs/img/cluster-*.png with `sgdlab model`.
# Needs root (the cluster's namespaces) and a build (scripts/build.sh).
#   scripts/cluster-figures.sh            run everything, then draw
#   scripts/cluster-figures.sh run|draw   only one half
#   scripts/cluster-figures.sh run scaling sparse   only these experiments
# DB (default results/cluster-figures.db) holds the runs; each step prints
# how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
SG=./build/harness/sgdlab
DB=${DB:-results/cluster-figures.db}
IMG=docs/img
what=${1:-all}
[ $# -gt 0 ] && shift

timed() { # NAME CMD...: run CMD, print its wall-clock seconds
  local name=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  printf '== %s: %.0f s\n' "$name" "$(echo "$t1 - $t0" | bc)" >&2
}

# The fit of alpha, beta and kappa: ring rows at np 2, 4, 8 on 1 Gbit/s
# and 100 Mbit/s links, so a run of P processes is predicted with the constants measured
# under P processes on the same cores (docs/model.md).  Run again before
# each experiment: `sgdlab model` takes the latest rows recorded before the
# experiment, so a load that drifts meets the runs it was measured with.
bench() {
  local np
  for np in 2 4 8; do
    timed "bench ring np $np 1gbit" $SG bench allreduce --np "$np" --transport zmq --launcher local \
      --impl ring --sizes 4K:16M --iters 5 --warmup 2 --set cluster.hosts="$np" \
      --set cluster.link=1gbit --db "$DB" -q
    # the same over MPI, for the runs with transport: mpi
    timed "bench ring np $np 1gbit mpi" $SG bench allreduce --np "$np" --transport mpi \
      --impl ring --sizes 4K:16M --iters 5 --warmup 2 --set cluster.hosts="$np" \
      --set cluster.link=1gbit --db "$DB" -q
    # the 100 Mbit/s runs' own alpha and beta (kappa: the least of the links')
    timed "bench ring np $np 100mbit" $SG bench allreduce --np "$np" --transport zmq \
      --launcher local --impl ring --sizes 1M:4M --iters 5 --warmup 2 --set cluster.hosts="$np" \
      --set cluster.link=100mbit --db "$DB" -q
  done
}

EXPS="scaling ps-servers link-rate slow-host sparse small-gradient"

run_all() {
  mkdir -p "$(dirname "$DB")"
  for e in "$@"; do
    bench
    timed "run $e" $SG run "configs/cluster/$e.yaml" --db "$DB"
  done
}

# Figures: measured (points) and predicted (lines) ms/step of each engine
# and variant, against N or the slowest link's rate.
# Each figure's script and data stay in results/cluster-figures; its PNG
# goes to docs/img.
draw_all() {
  local out=results/cluster-figures
  mkdir -p "$IMG" "$out"
  local m="$SG model --db $DB --plot-dir $out"
  timed "draw cluster-scaling" $m cluster-scaling --plot cluster-time-vs-n --x workers
  timed "draw cluster-ps-servers" $m cluster-ps-servers --plot cluster-ps-servers --x workers
  timed "draw cluster-link-rate" $m cluster-link-rate --plot cluster-link-rate --x rate
  timed "draw cluster-slow-host" $m cluster-slow-host --plot cluster-slow-host --x rate
  timed "draw cluster-sparse" $m cluster-sparse --plot cluster-sparse --x workers
  # 31 KB messages: alpha and beta from the bench rows of 4-32 KiB
  timed "draw cluster-small-gradient" $m cluster-small-gradient --plot cluster-small-gradient --x workers --fit-min 4096 --fit-max 32768
  cp "$out"/cluster-*.png "$IMG"/
}

case $what in
  run) if [ $# -gt 0 ]; then run_all "$@"; else run_all $EXPS; fi ;;
  draw) draw_all ;;
  all) run_all $EXPS && draw_all ;;
  *) echo "usage: $0 [run|draw]" >&2; exit 2 ;;
esac
