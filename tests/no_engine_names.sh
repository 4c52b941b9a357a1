#!/bin/sh
# no_engine_names.sh SGDLAB FILE...: fails (exit 1, naming each hit) when a
# file spells an engine's name, one of its algorithms' names or a bench
# engine's (bench-NAME) as a string literal.  The names come from the
# registry itself (`SGDLAB engines`: each engine's name, and the choices of
# its `algorithm` option), so a new engine is guarded without editing this
# file.  The harness knows engines only through the engine table
# (core/engine.h); a literal "ps" there is engine knowledge in the wrong
# place.  A line that spells the same word for something else (the "local"
# launcher, the "allreduce" collective of `sgdlab bench`) says so with a
# comment holding "not an engine".  Exit 2 when the list is empty or a file
# is missing (no silent pass).
set -u
sgdlab=${1:?usage: no_engine_names.sh SGDLAB FILE...}
shift
list=$("$sgdlab" engines) || { echo "no_engine_names: $sgdlab engines failed"; exit 2; }
# engine names: the lines in column 0 after the devices line; algorithms:
# the {a|b|c} choices of an `algorithm` option
names=$(printf '%s\n' "$list" | awk 'NR > 1 && /^[a-z][a-z0-9_-]*$/ { print; print "bench-" $0 }
  $1 == "algorithm" && match($0, /\{[^}]*\}$/) {
    n = split(substr($0, RSTART + 1, RLENGTH - 2), a, "|"); for (i = 1; i <= n; i++) print a[i] }')
[ -n "$names" ] || { echo "no_engine_names: no engine names from $sgdlab engines"; exit 2; }
re=$(printf '%s\n' "$names" | sort -u | paste -sd '|' -)
status=0
for f in "$@"; do
  [ -r "$f" ] || { echo "no_engine_names: cannot read $f"; exit 2; }
  if grep -nE "\"($re)\"" "$f" | grep -v 'not an engine'; then
    echo "no_engine_names: $f names an engine (use the engine table)"
    status=1
  fi
done
exit $status
