#!/bin/sh
# checks_input.sh SGDLAB SRC: the files `lab check` and `claims` read
# that others write.  A rubric or claim file from a course repository is
# printed on the grader's terminal (says, what, ...): a control character
# in any of its strings (an escape sequence that sets the window title or
# clears the screen) is one line and exit 2, and no escape byte reaches
# the output.  A student's predictions file that is a FIFO, /dev/zero,
# over 1 MiB or nested 100,000 deep (libyaml's loader is quadratic in the
# depth: minutes) is one line and exit 2 at once (each call bounded: a
# hang is exit 124 here).
set -u
sg=${1:?usage: checks_input.sh SGDLAB SRC}
src=${2:?}
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
esc=$(printf '\033')
printf 'says: "title\\e]0;owned\\a\\e[2J"\nname: x\nchecks:\n  - what: w\n    same: model\n' \
  > "$d/lab7.check"
printf 'says: s\nname: x\nchecks:\n  - what: "red\\e[31m"\n    same: model\n' > "$d/lab8.check"
printf 'says: s\nbench: [allreduce]\nchecks:\n  - what: "a\\nb"\n    same: model\n' > "$d/c.claim"
for t in "lab check 7 --dir $d --db $d/none.db:lab7.check:1:7: says" \
         "lab check 8 --dir $d --db $d/none.db:lab8.check:4:11: what" \
         "claims --dir $d --list:c.claim:4:11: what"; do
  cmd=${t%%:*} want=${t#*:}
  # shellcheck disable=SC2086
  out=$("$sg" $cmd 2>&1)
  rc=$?
  [ $rc -eq 2 ] || fail "sgdlab $cmd: exit $rc, not 2"
  [ "$out" = "$d/$want: a control character" ] || fail "sgdlab $cmd: not the one line"
  case $out in *"$esc"*) fail "sgdlab $cmd: an escape byte reached the output" ;; esac
done
mkfifo "$d/fifo.yaml" || fail "mkfifo"
awk 'BEGIN { printf "a: "; for (i = 0; i < 100000; i++) printf "["; print "" }' > "$d/deep.yaml"
awk 'BEGIN { for (i = 0; i < 100000; i++) printf "p%d: %d\n", i, i }' > "$d/big.yaml"
for t in "fifo.yaml:$d/fifo.yaml:1:1: not a regular file of at most 1 MiB" \
         "zero:/dev/zero:1:1: not a regular file of at most 1 MiB" \
         "big.yaml:$d/big.yaml:1:1: not a regular file of at most 1 MiB" \
         "deep.yaml:$d/deep.yaml:1:35: nested deeper than 32 levels"; do
  f=${t%%:*} want=${t#*:}
  [ "$f" = zero ] && p=/dev/zero || p=$d/$f
  out=$(timeout 20 "$sg" lab check 1 --dir "$src/configs/labs" --db "$d/none.db" \
        --predictions "$p" 2>&1 </dev/null)
  rc=$?
  [ $rc -eq 2 ] || fail "predictions $f: exit $rc, not 2"
  [ "$out" = "$want" ] || fail "predictions $f: not the one line"
done
out=$("$sg" claims --dir "$src/configs/claims" --list 2>&1) || fail "the shipped claims"
for l in 1 2 3 4 5; do
  "$sg" lab check $l --dir "$src/configs/labs" --db "$d/none.db" 2>&1 | grep -q 'cannot open' ||
    fail "lab$l.check does not load"
done
echo "ok: control characters in rubrics and claims, and FIFO, endless, big and deep predictions refused; the shipped files load"
