#!/bin/sh
# shard_libm.sh LIBSGCORE - fail when core/shard.c calls a libm function
# whose last bit may differ between CPUs or libm builds.  Every rank draws
# its label-skew shard itself, so that draw must be the same everywhere;
# sqrt, floor, frexp and ldexp are exact or correctly rounded, log, exp,
# pow and the like are not (glibc's FMA and SSE2 variants differ).
lib=$1
syms=$(nm -A "$lib") || { echo "nm $lib failed"; exit 1; }
echo "$syms" | grep -q 'shard\.c\.o:.* T sg_shard_owners$' ||
  { echo "no shard.c.o defining sg_shard_owners in $lib"; exit 1; }
bad=$(echo "$syms" | grep 'shard\.c\.o:.* U ' |
  grep -wE 'log|log2|log10|log1p|exp|exp2|expm1|pow|cbrt|hypot|sin|cos|tan|atan|atan2|lgamma|tgamma|erf|erfc')
if [ -n "$bad" ]; then
  echo "$bad"
  echo "core/shard.c calls the libm functions above: ranks on other CPUs or libms could draw other shards"
  exit 1
fi
echo "core/shard.c: no inexact libm call"
