# Fuzz targets (tests/fuzz/fuzz.h, docs/fuzzing.md).  Adding one: write
# tests/fuzz/fuzz_<name>.c, add a sg_fuzz_target line below and seed
# tests/fuzz/corpus/<name>/.
#
# Every build links each target with the replay driver and CTest runs it
# over its checked-in corpus (fuzz_<name>: under ASan+UBSan when the build
# has them).  -DSGDLAB_FUZZ=ON (clang) also builds fuzz/fuzz_<name>, the
# target linked with libFuzzer, for fuzzing by hand.
add_library(sgfuzz STATIC fuzz/fuzz_util.c)
target_include_directories(sgfuzz PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)
target_link_libraries(sgfuzz PUBLIC ZLIB::ZLIB)

# sg_fuzz_target(NAME LIBS ... [TIMEOUT s] [NO_CORPUS] [INTERNALS folder...]):
# NO_CORPUS builds the replay binary only (its tests are added by hand);
# INTERNALS as in sg_add_test (an engine's own headers).
function(sg_fuzz_target name)
  cmake_parse_arguments(F "NO_CORPUS" "TIMEOUT" "LIBS;INTERNALS" ${ARGN})
  list(TRANSFORM F_INTERNALS PREPEND ${CMAKE_SOURCE_DIR}/)
  if(NOT F_TIMEOUT)
    set(F_TIMEOUT 60)
  endif()
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_${name}.c)
  add_executable(fuzz_${name}_replay ${src} fuzz/fuzz_replay.c)
  target_link_libraries(fuzz_${name}_replay PRIVATE sgfuzz ${F_LIBS})
  target_include_directories(fuzz_${name}_replay PRIVATE ${F_INTERNALS})
  if(F_NO_CORPUS)
    return()
  endif()
  add_test(NAME fuzz_${name}
    COMMAND fuzz_${name}_replay ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  set_tests_properties(fuzz_${name} PROPERTIES TIMEOUT ${F_TIMEOUT} LABELS fuzz)
  if(SGDLAB_FUZZ)
    add_executable(fuzz_${name} ${src})
    target_link_libraries(fuzz_${name} PRIVATE sgfuzz ${F_LIBS})
    target_include_directories(fuzz_${name} PRIVATE ${F_INTERNALS})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    set_target_properties(fuzz_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  endif()
endfunction()

sg_fuzz_target(idx LIBS sgcore)
sg_fuzz_target(libsvm LIBS sgcore)
sg_fuzz_target(clicks LIBS sgcore)
sg_fuzz_target(config LIBS sgrun)
sg_fuzz_target(ps_hdr LIBS sgengines INTERNALS ps)
sg_fuzz_target(records LIBS sgcore)
sg_fuzz_target(rendezvous LIBS sgcore)

# The replay itself must fail on a finding: a target with planted ones.
sg_fuzz_target(selftest NO_CORPUS)
set(st ${CMAKE_CURRENT_BINARY_DIR}/fuzz_selftest)
file(WRITE ${st}/ok/plain "fine")
file(WRITE ${st}/crash/crash "CRASH")
file(WRITE ${st}/abort/abort "ABORT")
file(WRITE ${st}/hang/hang "HANG")
file(MAKE_DIRECTORY ${st}/empty)
foreach(case ok crash abort hang empty)
  add_test(NAME fuzz_replay_${case} COMMAND fuzz_selftest_replay ${st}/${case})
  set_tests_properties(fuzz_replay_${case} PROPERTIES TIMEOUT 30 LABELS fuzz
    ENVIRONMENT FUZZ_REPLAY_TIMEOUT=1)
endforeach()
set_tests_properties(fuzz_replay_ok PROPERTIES
  PASS_REGULAR_EXPRESSION "fuzz_replay: 1 inputs, no findings")
set_tests_properties(fuzz_replay_crash PROPERTIES
  PASS_REGULAR_EXPRESSION "fuzz_replay: (SIGSEGV|SIGABRT|sanitizer report) on [^\n]*/crash/crash")
set_tests_properties(fuzz_replay_abort PROPERTIES
  PASS_REGULAR_EXPRESSION "invariant broken: size == 0[^$]*SIGABRT on [^\n]*/abort/abort")
set_tests_properties(fuzz_replay_hang PROPERTIES
  PASS_REGULAR_EXPRESSION "timed out \\(FUZZ_REPLAY_TIMEOUT\\) on [^\n]*/hang/hang")
set_tests_properties(fuzz_replay_empty PROPERTIES
  PASS_REGULAR_EXPRESSION "fuzz_replay: no inputs")
if(SGDLAB_SANITIZE OR SGDLAB_FUZZ)
  # the replay's buffers are exactly the input's size: ASan sees an overread
  file(WRITE ${st}/overread/overread "OVERREAD")
  add_test(NAME fuzz_replay_overread COMMAND fuzz_selftest_replay ${st}/overread)
  set_tests_properties(fuzz_replay_overread PROPERTIES TIMEOUT 30 LABELS fuzz
    PASS_REGULAR_EXPRESSION "heap-buffer-overflow[^$]*sanitizer report on [^\n]*/overread/overread")
endif()
