#!/bin/sh
# no_engine_names.sh FILE...: fails (exit 1, naming each hit) when a file
# spells an engine name as a string literal.  The harness's command,
# benchmark, registry and report sources know engines only through the
# engine table (core/engine.h); a literal "ps" there is engine knowledge
# in the wrong place.  Exit 2 when a file is missing (no silent pass).
status=0
for f in "$@"; do
  [ -r "$f" ] || { echo "no_engine_names: cannot read $f"; exit 2; }
  if grep -nE '"(ps|allreduce|mapreduce|local|ring|rhd|native|bench-[a-z]+)"' "$f"; then
    echo "no_engine_names: $f names an engine (use the engine table)"
    status=1
  fi
done
exit $status
