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
