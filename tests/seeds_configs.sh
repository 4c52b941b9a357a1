#!/bin/sh
# seeds_configs.sh SGDLAB DIR: every experiment file in DIR (the shipped
# configs/seeds/*.yaml, docs/seeds.md) validates with `sgdlab run -n`
# (exit 0) and expands to simulated runs only (each listed run's label
# ends in [sim]).  Exit 77 (skip) when this build has no
# sgdlab-rank-smpi (SimGrid not installed), 1 naming the failing file.
set -u
sg=${1:?usage: seeds_configs.sh SGDLAB DIR}
dir=${2:?usage: seeds_configs.sh SGDLAB DIR}
[ -x "$(dirname "$sg")/sgdlab-rank-smpi" ] || { echo "SKIP: no sgdlab-rank-smpi"; exit 77; }
n=0
fail=0
for f in "$dir"/*.yaml; do
  [ -e "$f" ] || continue
  n=$((n + 1))
  out=$("$sg" run -n "$f" 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "$f: sgdlab run -n exit $rc: $out"
    fail=1
    continue
  fi
  runs=$(printf '%s\n' "$out" | grep -c '^\[[0-9]*/[0-9]*\] ')
  sim=$(printf '%s\n' "$out" | grep '^\[[0-9]*/[0-9]*\] ' | grep -c ' \[sim\] ')
  if [ "$runs" -eq 0 ] || [ "$runs" -ne "$sim" ]; then
    echo "$f: $runs runs listed, $sim of them simulated"
    fail=1
  fi
done
[ $n -gt 0 ] || { echo "no experiment files in $dir"; exit 1; }
exit $fail
