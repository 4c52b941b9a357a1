#!/bin/sh
# doc_paths.sh SRC [FILE...]: every repository path that the documentation
# (README.md, docs/*.md) and the sources (comments included) cite exists
# under SRC.  A cited path is a word that starts with a top-level folder of
# the repository (core/, harness/, rank/, ps/, ...), not preceded by a path
# character (so build/harness/sgdlab and $SRC/tests/x are not citations);
# results/ is left out (it holds what runs write).  Only file names with an
# extension and folders written with a trailing / count (rank/size is
# prose); placeholders are skipped: a name in capitals (configs/labs/LAB.yaml)
# and the example engine of the add-an-engine recipe (myeng).  FILEs default to the
# whole tree's docs and sources.  Exit 1 naming each missing path
# (file:line: path), 2 on bad use.
set -u
src=${1:?usage: doc_paths.sh SRC [FILE...]}
shift
cd "$src" || exit 2
if [ $# -eq 0 ]; then
  set -- README.md docs/*.md docs/*/*.md $(git ls-files '*.c' '*.h' '*.cu' '*.sh' '*.cmake' \
    '*CMakeLists.txt' '*.awk' '*.py' '*.yaml' 2>/dev/null)
fi
dirs='core|harness|rank|ps|allreduce|mapreduce|gossip|tests|docs|scripts|configs|cmake|tools'
status=0
hits=$(mktemp) || exit 2
trap 'rm -f "$hits"' EXIT
for f in "$@"; do
  [ -r "$f" ] || { echo "doc_paths: cannot read $f"; exit 2; }
  grep -noE "(^|[^A-Za-z0-9_./~\$%-])($dirs)/[A-Za-z0-9_./-]*" "$f" |
    sed -E 's/^([0-9]+):[^a-z]?/\1 /; s/[.]+$//' > "$hits"
  while read -r line path; do
    case $path in
      */) ;;
      *myeng*|*/[A-Z][A-Z]*.*) continue ;;
      */*.*) case ${path##*/} in *.*) ;; *) continue ;; esac ;;
      *) continue ;;
    esac
    [ -e "$path" ] || { echo "$f:$line: $path does not exist"; status=1; }
  done < "$hits"
done
exit $status
