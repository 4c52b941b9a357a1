# Simulation (docs/simulate.md): the platform builder against hand-written
# files and the records files' checks (no SimGrid needed); the engines'
# own code under smpirun (test_simulate_run: skipped, exit 77 with a SKIP
# line, only when this build has no sgdlab-rank-smpi, i.e. SimGrid's
# smpicc was not found; scripts/setup.sh installs it).
sg_add_test(test_simulate_platform SOURCES test_simulate_platform.c TIMEOUT 30 LABELS simulate
  LIBS sgrun)
sg_add_test(test_simulate_run SOURCES test_simulate_run.c TIMEOUT 400 LABELS simulate
  LIBS PkgConfig::SQLITE)
add_dependencies(test_simulate_run sgdlab sgdlab-rank)
set_tests_properties(test_simulate_run PROPERTIES SKIP_RETURN_CODE 77)
