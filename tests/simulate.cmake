# Simulation (docs/simulate.md): the platform builder against hand-written
# files and the records files' checks (no SimGrid needed); the engines'
# own code under smpirun (test_simulate_run: skipped, exit 77 with a SKIP
# line, only when this build has no sgdlab-rank-smpi, i.e. SimGrid's
# smpicc was not found; scripts/setup.sh installs it).
sg_add_test(test_simulate_platform SOURCES test_simulate_platform.c TIMEOUT 30 LABELS simulate
  LIBS sgrun)
sg_add_test(test_simulate_run SOURCES test_simulate_run.c TIMEOUT 1200 LABELS simulate
  LIBS PkgConfig::SQLITE)
add_dependencies(test_simulate_run sgdlab sgdlab-rank)
set_tests_properties(test_simulate_run PROPERTIES SKIP_RETURN_CODE 77)
# scripts/agreement.sh: its smallest case end to end (ring, N = 16, 32 KB,
# simulated and `sgdlab model --what-if`), the table's shape, and the
# error arithmetic on planted rows (10 % and 40 %: mean 20 %, worst 40 %).
add_test(NAME agreement_script
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/agreement_check.sh ${CMAKE_BINARY_DIR}
          ${CMAKE_SOURCE_DIR})
set_tests_properties(agreement_script PROPERTIES TIMEOUT 240 LABELS simulate
  SKIP_RETURN_CODE 77)
