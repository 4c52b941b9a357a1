#!/bin/sh
# no_engine_names.sh FILE...: fails (exit 1, naming each hit) when a file
# spells an engine name as a string literal.  The harness's command,
# benchmark, registry and report sources know engines only through the
# engine table (core/engine.h); a literal "ps" there is engine knowledge
# in the wrong place.  A line that spells the same word for something
# else (the "local" launcher, the "allreduce" collective of `sgdlab bench`)
# says so with a comment holding "not an engine".  Exit 2 when a file is
# missing (no silent pass).
status=0
for f in "$@"; do
  [ -r "$f" ] || { echo "no_engine_names: cannot read $f"; exit 2; }
  if grep -nE '"(ps|allreduce|mapreduce|local|gossip|ring|rhd|native|bench-[a-z]+)"' "$f" | grep -v 'not an engine'; then
    echo "no_engine_names: $f names an engine (use the engine table)"
    status=1
  fi
done
exit $status
