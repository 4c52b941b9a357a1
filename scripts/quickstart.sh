#!/usr/bin/env bash
# Set up, build, run configs/quickstart.yaml and draw its report
# (README command 1).  Results: results/sgdlab.db, results/quickstart/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/harness/sgdlab run configs/quickstart.yaml --db results/sgdlab.db
./build/harness/sgdlab report quickstart --db results/sgdlab.db --out results/quickstart
echo "report: results/quickstart/summary.md"
