#!/bin/sh
# layering.sh CC FLAGSFILE CASE...: the include rules (docs/design.md, "The
# house") as the compiler sees them.  FLAGSFILE holds one library's include
# directories and definitions, as its own sources are compiled
# (tests/layering.cmake writes it at generate time); each CASE is ok:HEADER
# (a file of that library may include HEADER: it must compile) or
# no:HEADER (a forbidden include: the compile must fail, and fail because
# HEADER is not found, not for some other reason).  Exit 1 naming each
# case that went the other way, 2 on bad use.
set -u
[ $# -ge 3 ] || { echo "usage: layering.sh CC FLAGSFILE CASE..."; exit 2; }
cc=$1 flags=$2
shift 2
[ -r "$flags" ] || { echo "layering: cannot read $flags"; exit 2; }
tmp=$(mktemp -d /tmp/sgdlab-layering-XXXXXX) || exit 2
trap 'rm -rf "$tmp"' EXIT
status=0
for c in "$@"; do
  want=${c%%:*} header=${c#*:}
  printf '#include "%s"\nint sg_layering_plant;\n' "$header" > "$tmp/plant.c"
  if "$cc" -fsyntax-only "@$flags" "$tmp/plant.c" > "$tmp/out" 2>&1; then
    got=ok
  elif grep -q "$header: No such file or directory" "$tmp/out"; then
    got=no
  else
    got=error
  fi
  printf '%s: #include "%s": %s\n' "$(basename "$flags" .flags)" "$header" "$got"
  if [ "$got" != "$want" ]; then
    echo "layering: expected $want"; sed 's/^/  /' "$tmp/out"
    status=1
  elif [ "$got" = no ]; then
    grep -m1 'No such file' "$tmp/out" | sed "s#$tmp/##; s/^/  /"
  fi
done
exit $status
