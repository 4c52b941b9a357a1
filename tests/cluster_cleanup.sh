#!/bin/sh
# cluster_cleanup.sh SGDLAB - what CTest runs after the cluster tests
# (FIXTURES_CLEANUP sgdlab_cluster, tests/cluster.cmake), even when one of
# them failed or was killed at its timeout: `sgdlab cluster sweep`, which
# removes every cluster whose owner has ended -- the clusters the tests
# make belong to the test process (`cluster up --owner`, tc_up) -- with
# its namespaces, links, state and daemons.  Clusters of running owners
# and persistent ones stay.  test_cluster_cleanup runs this very script.
# Exit 77 (skipped) without root.
if [ "$(id -u)" != 0 ]; then
  echo "SKIP: needs root (the sweep removes network namespaces)"
  exit 77
fi
exec "$1" cluster sweep
