# Simulation (docs/simulate.md): the platform builder against hand-written
# files and the records files' checks (no SimGrid needed); the engines'
# own code under smpirun (test_simulate_run: skipped, exit 77 with a SKIP
# line, only when this build has no sgdlab-rank-smpi, i.e. SimGrid's
# smpicc was not found; scripts/setup.sh installs it).
sg_add_test(test_simulate_platform SOURCES test_simulate_platform.c TIMEOUT 30 LABELS simulate
  LIBS sgrun)
add_executable(test_simulate_run test_simulate_run.c)
target_link_libraries(test_simulate_run PRIVATE sgtest sgengines sgrun PkgConfig::SQLITE)
add_dependencies(test_simulate_run sgdlab sgdlab-rank)
# Its cases in three tests, dealt round-robin in the order of the file,
# so that `ctest -j2` runs two at once and each has its own time limit
# (every case in one test took 20 min at a load of 10): test_simulate_run
# runs the first third; test_simulate_run_2 and _3 the others.  A case
# named on the command line must exist (tests/test.h).
file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/test_simulate_run.c sim_cases REGEX "^TEST\\(")
# (read at configure time: a case added or renamed reconfigures the build)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/test_simulate_run.c)
set(sim_part_1 "")
set(sim_part_2 "")
set(sim_part_3 "")
set(sim_i 0)
foreach(line IN LISTS sim_cases)
  string(REGEX REPLACE "^TEST\\(([a-z0-9_]+)\\).*" "\\1" case "${line}")
  math(EXPR sim_part "${sim_i} % 3 + 1")
  list(APPEND sim_part_${sim_part} ${case})
  math(EXPR sim_i "${sim_i} + 1")
endforeach()
add_test(NAME test_simulate_run COMMAND test_simulate_run ${sim_part_1})
foreach(part 2 3)
  add_test(NAME test_simulate_run_${part} COMMAND test_simulate_run ${sim_part_${part}})
endforeach()
set_tests_properties(test_simulate_run test_simulate_run_2 test_simulate_run_3 PROPERTIES
  TIMEOUT 900 LABELS simulate SKIP_RETURN_CODE 77
  ENVIRONMENT "SGDLAB_BIN_DIR=${CMAKE_BINARY_DIR};SGDLAB_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
# scripts/agreement.sh: its smallest case end to end (ring, N = 16, 32 KB,
# simulated and `sgdlab model --what-if`), the table's shape, and the
# error arithmetic on planted rows (10 % and 40 %: mean 20 %, worst 40 %).
add_test(NAME agreement_script
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/agreement_check.sh ${CMAKE_BINARY_DIR}
          ${CMAKE_SOURCE_DIR})
set_tests_properties(agreement_script PROPERTIES TIMEOUT 240 LABELS simulate
  SKIP_RETURN_CODE 77)
