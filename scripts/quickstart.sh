#!/usr/bin/env bash
# Set up, build, install, run configs/quickstart.yaml and draw its report
# (README command 1).  Results: results/sgdlab.db, results/quickstart/.
#
# sgdlab is installed so that `sgdlab ...` works from any directory:
# as root into /usr/local (bin/sgdlab, share/sgdlab/configs,
# share/doc/sgdlab), otherwise into ~/.local; SGDLAB_PREFIX=DIR installs
# into DIR instead, SGDLAB_PREFIX=none not at all.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
prefix=${SGDLAB_PREFIX:-}
if [ -z "$prefix" ]; then
  if [ "$(id -u)" = 0 ]; then prefix=/usr/local; else prefix=$HOME/.local; fi
fi
if [ "$prefix" != none ]; then
  cmake --install build --prefix "$prefix" >/dev/null
  echo "installed: $prefix/bin/sgdlab (experiment files in $prefix/share/sgdlab/configs)"
fi
./build/harness/sgdlab run configs/quickstart.yaml --db results/sgdlab.db
./build/harness/sgdlab report quickstart --db results/sgdlab.db --out results/quickstart
echo "report: results/quickstart/index.html and results/quickstart/summary.md"
if [ "$prefix" != none ]; then
  if [ "$(command -v sgdlab || true)" = "$prefix/bin/sgdlab" ]; then
    echo "sgdlab is on your PATH: try 'sgdlab list' here"
  else
    echo "$prefix/bin is not on your PATH: run"
    echo "  export PATH=\"$prefix/bin:\$PATH\""
    echo "(add that line to ~/.profile to keep it), or call $prefix/bin/sgdlab"
  fi
fi
