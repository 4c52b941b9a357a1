#!/bin/sh
# func_lengths.sh SRC - no function of the harness (harness/*.c,
# harness/*/*.c) over 80 lines (func_lengths.awk), and the check itself
# shown to work: a planted 81-line function fails it, an 80-line one not.
set -u
src=$1
awk=$src/tests/func_lengths.awk
tmp=$(mktemp -d /tmp/sgdlab-funclen-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
# plant(N): a function of N lines (signature and closing brace included)
plant() {
  { printf 'static int planted(int x) {\n'
    i=2; while [ "$i" -lt "$1" ]; do printf '  x += %d;\n' "$i"; i=$((i + 1)); done
    printf '}\n'; } > "$tmp/planted.c"
}
plant 81
if awk -v LIMIT=80 -f "$awk" "$tmp/planted.c" > "$tmp/out"; then
  echo "FAIL: an 81-line function passed the check"; cat "$tmp/out"; exit 1
fi
grep -q 'planted.c:1: planted: 81 lines' "$tmp/out" || { echo "FAIL: not named:"; cat "$tmp/out"; exit 1; }
plant 80
awk -v LIMIT=80 -f "$awk" "$tmp/planted.c" > "$tmp/out" || { echo "FAIL: 80 lines refused"; cat "$tmp/out"; exit 1; }
awk -v LIMIT=80 -f "$awk" "$src"/harness/*/*.c "$src"/rank/*.c
