sg_add_test(test_opts SOURCES test_opts.c TIMEOUT 30)
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
