#!/usr/bin/env bash
# Set up, build and run every test (README command 2; .ci/run runs this).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
rc=0
ctest --test-dir build --output-on-failure -j2 "$@" || rc=$?
# Skipped tests (CTest: "***Skipped") say why on a line starting with
# SKIP; CTest keeps that output in its log only, so show it here.
grep -h '^SKIP' build/Testing/Temporary/LastTest*.log 2>/dev/null | sort -u || true
exit "$rc"
