#!/usr/bin/env bash
# Set up, build and run every test (README command 2; .ci/run runs this).
#
# Three passes:
#  1. the whole suite on the normal build (build/);
#  2. the tests that claim exact equality of floats computed two ways,
#     once per BLAS kernel family this CPU can run (scripts/exact-kernels.sh),
#     so that a claim that holds only on one CPU fails on any machine;
#  3. ASan + UBSan (build-asan/) over the tests that feed untrusted or
#     malformed input to sgdlab's own code (the fuzz corpus replay of every
#     parser, configs, datasets, records, the attacks on a real run, the
#     report and terminal output), the transport and collectives as thread
#     ranks (their error paths), and the harness-death cases.  The training
#     and fault tests with deadlines run in pass 1 only: under ASan on 2
#     cores their deadlines measure the sanitizer's slowdown, not sgdlab.
#     LeakSanitizer is on; Open MPI's own allocations are suppressed
#     (tests/lsan.supp).  The grader's malformed-input cases run here
#     (lab_check_badpred, lab_check_blame); the whole labs (lab_check_N,
#     a minute or more each under the sanitizers) and test_inputs' listing
#     of a 100,000-run sweep (test_inputs_sweep, about 45 s of CPU under
#     the sanitizers; smaller sweeps run here) in pass 1 only, to keep CI
#     within its time.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
# setup.sh installed chromium: the browser test must run, not skip
export SGDLAB_REQUIRE_CHROMIUM=1
rc=0
ctest --test-dir build --output-on-failure -j2 "$@" || rc=$?
# Skipped tests (CTest: "***Skipped") say why on a line starting with
# SKIP; CTest keeps that output in its log only, so show it here.
grep -h '^SKIP' build/Testing/Temporary/LastTest*.log 2>/dev/null | sort -u || true
[ "$rc" -eq 0 ] || exit "$rc"

bash scripts/exact-kernels.sh build

# The ASan pass builds only what its tests run (target sg_selected,
# tests/CMakeLists.txt).
asan_tests='^(fuzz_|test_opts|test_stage|test_slurm_stage|test_config|test_admit|test_dataset|test_recorder|test_report|test_results$|test_transport_inproc|test_attack|test_show_text|test_ps_proto|test_cost_model|test_rdv_auth|test_ps_sparse|test_allreduce$|test_mapreduce$|test_model|test_cuda_cnn$|test_clicks|test_shard|test_optim|test_workload|test_harness_death|test_outputs|test_inputs$|test_simulate_platform|docs_config|claims_badfile|claims_planted|lab_check_badpred|lab_check_blame|hostile_db|hostile_checks|checks_input)'
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSGDLAB_SANITIZE=ON -DSGDLAB_CUDA=OFF \
  -DSGDLAB_TEST_SELECT="$asan_tests" >/dev/null
cmake --build build-asan -j"$(nproc)" --target sg_selected
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp"
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export OMPI_MCA_mca_base_component_disable_dlclose=1 # symbolizable leak stacks
ctest --test-dir build-asan --output-on-failure -j2 -R "$asan_tests"
