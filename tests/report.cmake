# Reports, list and show over fixture databases (real SQLite, real gnuplot).
# The report sources are compiled into the test so it calls the commands
# directly (in forked children, to capture output and exit codes).
set(SG_REPORT_SRCS
  ${CMAKE_SOURCE_DIR}/harness/report.c ${CMAKE_SOURCE_DIR}/harness/report_data.c
  ${CMAKE_SOURCE_DIR}/harness/report_summary.c ${CMAKE_SOURCE_DIR}/harness/plot.c
  ${CMAKE_SOURCE_DIR}/harness/show.c ${CMAKE_SOURCE_DIR}/harness/report_html.c
  ${CMAKE_SOURCE_DIR}/harness/report_files.c ${CMAKE_SOURCE_DIR}/harness/escape.c
  ${CMAKE_SOURCE_DIR}/harness/views.c ${CMAKE_SOURCE_DIR}/harness/trace.c
  ${CMAKE_SOURCE_DIR}/harness/export.c
  ${CMAKE_SOURCE_DIR}/harness/cost_model.c ${CMAKE_SOURCE_DIR}/harness/cost_model_cmd.c
  ${CMAKE_SOURCE_DIR}/harness/cost_model_plot.c)
sg_add_test(test_report SOURCES test_report.c ${SG_REPORT_SRCS}
  TIMEOUT 120 LIBS PkgConfig::SQLITE)
target_include_directories(test_report PRIVATE ${CMAKE_SOURCE_DIR}/harness)

# End to end: `sgdlab run` on Fashion-MNIST, then report/list/show on the
# database it wrote (needs the CLI and the rank binary built).
sg_add_test(test_report_e2e SOURCES test_report_e2e.c TIMEOUT 180
  LIBS PkgConfig::SQLITE LABELS integration)
add_dependencies(test_report_e2e sgdlab sgdlab-rank)

# Attack strings in every label source (a real `sgdlab run` plus forged
# database rows): report and every redraw of its gnuplot scripts run no
# code from the data, and output stays under results/; the quoting
# functions (plot.c, compiled in) round-trip through gnuplot's parser.
sg_add_test(test_report_inject SOURCES test_report_inject.c
  ${CMAKE_SOURCE_DIR}/harness/plot.c TIMEOUT 240 LIBS PkgConfig::SQLITE
  LABELS integration)
target_include_directories(test_report_inject PRIVATE ${CMAKE_SOURCE_DIR}/harness)
add_dependencies(test_report_inject sgdlab sgdlab-rank)

# index.html (escaping of planted markup, sections), stale report files,
# several experiments, the run_summary views, export, trace, list --json
# over a fixture database.
sg_add_test(test_results SOURCES test_results.c json_check.c ${SG_REPORT_SRCS}
  TIMEOUT 120 LIBS PkgConfig::SQLITE)
target_include_directories(test_results PRIVATE ${CMAKE_SOURCE_DIR}/harness)

# A real run, its trace, and its index.html in headless Chromium
# (screenshot not blank, the sorting script runs, planted markup inert).
# Chromium missing: skipped with the reason, a failure when
# SGDLAB_REQUIRE_CHROMIUM=1 (scripts/test.sh).
sg_add_test(test_results_e2e SOURCES test_results_e2e.c json_check.c TIMEOUT 300
  LIBS PkgConfig::SQLITE ZLIB::ZLIB LABELS integration)
add_dependencies(test_results_e2e sgdlab sgdlab-rank)
