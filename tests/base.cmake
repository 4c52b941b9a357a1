# The straggler's slowed steps: sg_delay_hit (delay_rank, delay_prob, seed).
sg_add_test(test_delay SOURCES test_delay.c TIMEOUT 30)
sg_add_test(test_opts SOURCES test_opts.c TIMEOUT 30)
# The bytes a deferred simulated send stages: a framed buffer's own parts.
sg_add_test(test_msgbuf SOURCES test_msgbuf.c TIMEOUT 30)
# The simulated side of msgbuf.c (SG_SMPI, SMPI's partial shared malloc
# replaced in the test): what it folds against the own parts it reports,
# and its table of folded allocations.
sg_add_test(test_msgbuf_fold SOURCES test_msgbuf_fold.c TIMEOUT 30)
# The staged copies of deferred simulated sends (core/share.c, built into
# the test against SimGrid's headers, its two SimGrid calls replaced).
find_file(SG_SMPI_HEADER smpi/smpi.h)
if(SG_SMPI_HEADER)
  get_filename_component(_sg_smpi_inc ${SG_SMPI_HEADER} DIRECTORY)
  get_filename_component(_sg_smpi_inc ${_sg_smpi_inc} DIRECTORY)
  sg_add_test(test_share SOURCES test_share.c TIMEOUT 30)
  target_include_directories(test_share SYSTEM PRIVATE ${_sg_smpi_inc})
  target_compile_definitions(test_share PRIVATE SMPI_NO_OVERRIDE_MALLOC)
endif()
# Blame as data: sg_err_blame and the DONE record's fields over a real ipc socket.
sg_add_test(test_blame SOURCES test_blame.c TIMEOUT 30)
# Step records in batches, their order, and malformed batches refused.
sg_add_test(test_records_batch SOURCES test_records_batch.c TIMEOUT 30)
sg_add_test(test_one_worker SOURCES test_one_worker.c TIMEOUT 240)

# docs/config.md is `sgdlab help config --markdown`: fail when the settings
# tables change and the committed reference was not regenerated.
add_test(NAME docs_config_current
  COMMAND sh -c "$<TARGET_FILE:sgdlab> help config --markdown | diff -u ${CMAKE_SOURCE_DIR}/docs/config.md - || { echo 'docs/config.md is stale: regenerate it with: sgdlab help config --markdown > docs/config.md'; exit 1; }")
set_tests_properties(docs_config_current PROPERTIES TIMEOUT 30)

# No file refers to notes or checkouts outside the repository.
sg_add_test(test_self_contained SOURCES test_self_contained.c TIMEOUT 30)

# cmake --install into a scratch prefix: PREFIX/bin/sgdlab --help runs, the
# experiment files and docs are there, every relative link of the installed
# README and docs resolves, the installed sgdlab reads an installed config.
add_test(NAME install_into_a_prefix
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh ${CMAKE_BINARY_DIR}
          ${CMAKE_BINARY_DIR}/install-check-prefix)
set_tests_properties(install_into_a_prefix PROPERTIES TIMEOUT 120)
# ... and the link check can fail: a Markdown file with a broken link.
add_test(NAME install_check_catches_a_broken_link
  COMMAND sh -c "d=$(mktemp -d) && printf 'see [x](gone/missing.md) and [y](https://e.x)\\n' > \"$d/R.md\" && sh ${CMAKE_CURRENT_SOURCE_DIR}/install_check.sh --links \"$d\"; rc=$?; rm -rf \"$d\"; test $rc -eq 1")
set_tests_properties(install_check_catches_a_broken_link PROPERTIES TIMEOUT 30)

# The shipped seeds experiments (configs/seeds/, docs/seeds.md) validate and
# run simulated only; and the check can fail: a copy with an unknown key,
# and one that is not simulated.
add_test(NAME seeds_configs_validate
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/seeds_configs.sh $<TARGET_FILE:sgdlab>
          ${CMAKE_SOURCE_DIR}/configs/seeds)
set_tests_properties(seeds_configs_validate PROPERTIES TIMEOUT 30 SKIP_RETURN_CODE 77)
add_test(NAME seeds_configs_check_can_fail
  COMMAND sh -c "d=$(mktemp -d) && for k in a b; do cp ${CMAKE_SOURCE_DIR}/configs/seeds/pfn.yaml \"$d/$k.yaml\"; done && printf 'no_such_key: 1\\n' >> \"$d/a.yaml\" && sed -i '/^simulate:/d' \"$d/b.yaml\" && out=$(sh ${CMAKE_CURRENT_SOURCE_DIR}/seeds_configs.sh $<TARGET_FILE:sgdlab> \"$d\"); rc=$?; rm -rf \"$d\"; echo \"$out\"; test $rc -eq 77 || { test $rc -eq 1 && echo \"$out\" | grep -q 'a.yaml: sgdlab run -n exit 2' && echo \"$out\" | grep -q 'b.yaml: 3 runs listed, 0 of them simulated'; }")
set_tests_properties(seeds_configs_check_can_fail PROPERTIES TIMEOUT 30)
