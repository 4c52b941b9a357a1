#!/bin/sh
# install_check.sh BUILD_DIR PREFIX: `cmake --install BUILD_DIR --prefix
# PREFIX`, then what a user gets there: PREFIX/bin/sgdlab runs (--help),
# the experiment files are in PREFIX/share/sgdlab/configs, the README and
# docs in PREFIX/share/doc/sgdlab, and every relative link of the
# installed Markdown resolves to a file there.  Exit 0, or 1 with a line
# per problem.
#
# install_check.sh --links DIR: only the link check, over DIR's *.md (the
# test that the check can fail feeds it a broken link).
set -u

# Every relative link target ](path) or ](path#anchor) of the *.md files
# under $1 must exist, relative to the file that links it.
check_links() {
  bad=0
  for md in $(find "$1" -name '*.md'); do
    dir=$(dirname "$md")
    # ](target): not http(s)/mailto, not a bare #anchor
    for t in $(grep -o '](\([^)#][^)]*\))' "$md" | sed 's/^](//; s/)$//; s/#.*//' |
               grep -v '^[a-z]*:' | sort -u); do
      [ -n "$t" ] || continue
      if [ ! -e "$dir/$t" ]; then
        echo "broken link in ${md#$1/}: $t"
        bad=1
      fi
    done
  done
  return $bad
}

if [ "$1" = "--links" ]; then
  check_links "$2"
  exit $?
fi

build=$1 prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null || { echo "cmake --install failed"; exit 1; }
fail=0
out=$("$prefix/bin/sgdlab" --help 2>&1) || { echo "$prefix/bin/sgdlab --help failed: $out"; fail=1; }
echo "$out" | grep -q '^usage: sgdlab' || { echo "sgdlab --help: no usage line"; fail=1; }
for f in bin/sgdlab-rank bin/sgdlab-nsexec share/sgdlab/configs/quickstart.yaml \
         share/sgdlab/configs/labs share/doc/sgdlab/README.md share/doc/sgdlab/docs/config.md \
         share/doc/sgdlab/docs/img/report-index.png; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; fail=1; }
done
# the installed experiment files are the source tree's
src=$(dirname "$0")/..
for y in $(cd "$src/configs" && find . -name '*.yaml'); do
  cmp -s "$src/configs/$y" "$prefix/share/sgdlab/configs/$y" || { echo "configs/$y differs or is missing"; fail=1; }
done
check_links "$prefix/share/doc/sgdlab" || fail=1
# an installed sgdlab reads an installed experiment file (dry run)
"$prefix/bin/sgdlab" run "$prefix/share/sgdlab/configs/quickstart.yaml" -n >/dev/null 2>&1 ||
  { echo "sgdlab run -n of the installed quickstart.yaml failed"; fail=1; }
rm -rf "$prefix"
exit $fail
