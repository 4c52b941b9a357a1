#!/bin/sh
# tmp_names.sh SRC - no file under a predictable name in /tmp: a string
# literal "/tmp/...%..." (or "ipc:///tmp/...%...") builds a name from a
# pid, a counter or a cluster name that another local user can guess and
# plant first (a symlink a root process follows with O_TRUNC, a file it
# reads as its own output, a socket path it fails to bind).  Names in /tmp
# come from mkdtemp/mkstemp (XXXXXX).  tests/test_teardown.c is left out:
# its attacker plants such names on purpose, and its victim side checks
# the names an older sgdlab used.
src=${1:?usage: tmp_names.sh SRC}
bad=$(cd "$src" && grep -rnE '"(ipc://)?/tmp/[^"]*%' --include='*.c' --include='*.h' \
        core harness rank ps allreduce mapreduce gossip tools tests 2>/dev/null |
      grep -v XXXXXX | grep -v '^tests/test_teardown\.c:')
if [ -n "$bad" ]; then
  printf 'tmp_names: a predictable name in /tmp (use mkdtemp):\n%s\n' "$bad" >&2
  exit 1
fi
echo "tmp_names: no predictable /tmp names"
