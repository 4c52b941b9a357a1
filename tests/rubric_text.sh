#!/bin/sh
# rubric_text.sh SGDLAB SRC: a rubric or claim file from a course
# repository is printed on the grader's terminal (says, what, ...): a
# control character in any of its strings (an escape sequence that sets
# the window title or clears the screen) is one line and exit 2, and no
# escape byte reaches the output.
set -u
sg=${1:?usage: rubric_text.sh SGDLAB SRC}
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
out=$("$sg" claims --dir "$src/configs/claims" --list 2>&1) || fail "the shipped claims"
for l in 1 2 3 4 5; do
  "$sg" lab check $l --dir "$src/configs/labs" --db "$d/none.db" 2>&1 | grep -q 'cannot open' ||
    fail "lab$l.check does not load"
done
echo "ok: control characters in rubrics and claims refused; the shipped ones load"
