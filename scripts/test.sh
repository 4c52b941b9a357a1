#!/usr/bin/env bash
# Set up, build and run every test (README command 2; .ci/run runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
# setup.sh installed chromium: the browser test must run, not skip
export SGDLAB_REQUIRE_CHROMIUM=1
ctest --test-dir build --output-on-failure -j2 "$@"
