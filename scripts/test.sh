#!/usr/bin/env bash
# Set up, build and run every test (README command 2; .ci/run runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
