# Reports, list and show over fixture databases (real SQLite, real gnuplot).
# The report commands come from the CLI's own library (sgreport); the
# test calls them directly (in forked children, to capture output and
# exit codes).
sg_add_test(test_report SOURCES test_report.c TIMEOUT 300 LIBS sgreport)

# End to end: `sgdlab run` on Fashion-MNIST, then report/list/show on the
# database it wrote (needs the CLI and the rank binary built).
sg_add_test(test_report_e2e SOURCES test_report_e2e.c TIMEOUT 180
  LIBS PkgConfig::SQLITE LABELS integration)
add_dependencies(test_report_e2e sgdlab sgdlab-rank)

# Attack strings in every label source (a real `sgdlab run` plus forged
# database rows): report and every redraw of its gnuplot scripts run no
# code from the data, and output stays under results/; the quoting
# functions (plot.c, from sgreport) round-trip through gnuplot's parser.
sg_add_test(test_report_inject SOURCES test_report_inject.c TIMEOUT 240
  LIBS sgreport LABELS integration)
add_dependencies(test_report_inject sgdlab sgdlab-rank)

# index.html (escaping of planted markup, sections), stale report files,
# several experiments, the run_summary views, export, trace, list --json
# over a fixture database.
sg_add_test(test_results SOURCES test_results.c json_check.c TIMEOUT 120
  LIBS sgreport)

# A real run, its trace, and its index.html in headless Chromium
# (screenshot not blank, the sorting script runs, planted markup inert).
# Chromium missing: skipped with the reason, a failure when
# SGDLAB_REQUIRE_CHROMIUM=1 (scripts/test.sh).
sg_add_test(test_results_e2e SOURCES test_results_e2e.c json_check.c TIMEOUT 300
  LIBS PkgConfig::SQLITE ZLIB::ZLIB LABELS integration)
add_dependencies(test_results_e2e sgdlab sgdlab-rank)
# The harness rooms and the rank program know engines only through the
# engine table: no engine name (as the registry lists them: `sgdlab
# engines`) as a string literal there.  Every harness source and header,
# the cost model's included (an engine's formulas, how a run's options
# make its case, its labels and what-if cases live with the engine:
# core/cost.h, docs/model.md).
file(GLOB_RECURSE SG_HARNESS_SRCS ${CMAKE_SOURCE_DIR}/harness/*.[ch] ${CMAKE_SOURCE_DIR}/rank/*.[ch])
add_test(NAME no_engine_names_in_harness
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/no_engine_names.sh $<TARGET_FILE:sgdlab> ${SG_HARNESS_SRCS})
set_tests_properties(no_engine_names_in_harness PROPERTIES TIMEOUT 30)
# ... and the check can fail: a source with an engine literal is a hit,
# also for names only the registry knows (an algorithm, a bench engine).
foreach(lit ps cuda-ring bench-gossip)
  add_test(NAME no_engine_names_catches_${lit}
    COMMAND sh -c "f=$(mktemp) && printf 'if (!strcmp(e, \"${lit}\")) x();\\n' > \"$f\" && sh ${CMAKE_CURRENT_SOURCE_DIR}/no_engine_names.sh $<TARGET_FILE:sgdlab> \"$f\"; rc=$?; rm -f \"$f\"; test $rc -eq 1")
  set_tests_properties(no_engine_names_catches_${lit} PROPERTIES TIMEOUT 30)
endforeach()
# The cost model is covered: the list holds it, the file as it is passes,
# and the same file with one planted engine literal (the old way of
# counting a ps run's hubs) fails.
list(FIND SG_HARNESS_SRCS ${CMAKE_SOURCE_DIR}/harness/report/cost_model_cmd.c SG_CMD_AT)
if(SG_CMD_AT LESS 0)
  message(FATAL_ERROR "no_engine_names_in_harness: harness/report/cost_model_cmd.c not in the list")
endif()
add_test(NAME no_engine_names_catches_cost_model
  COMMAND sh -c "f=$(mktemp) && cp \"$1\" \"$f\" && sh \"$2\" \"$3\" \"$f\" >/dev/null && printf 'int hubs = !strcmp(r->engine, \"ps\");\\n' >> \"$f\" && sh \"$2\" \"$3\" \"$f\"; rc=$?; rm -f \"$f\"; test $rc -eq 1"
    sh ${CMAKE_SOURCE_DIR}/harness/report/cost_model_cmd.c ${CMAKE_CURRENT_SOURCE_DIR}/no_engine_names.sh $<TARGET_FILE:sgdlab>)
set_tests_properties(no_engine_names_catches_cost_model PROPERTIES TIMEOUT 30)
# Two ps runs that differ only in servers read differently in the run
# line, `list` and the report's key (the engine table names runs).
sg_add_test(test_labels SOURCES test_labels.c TIMEOUT 120 LIBS sgrun)
add_dependencies(test_labels sgdlab sgdlab-rank)

# The quickstart's ten variants (fixture rows) reported and read at
# 1400 px in headless Chromium: no table, figure or the page wider than
# its room; the figures' scripts use keys, panels, zoomed axes and
# horizontal bars.  Chromium missing: skipped, a failure when
# SGDLAB_REQUIRE_CHROMIUM=1 (scripts/test.sh).
sg_add_test(test_report_screen SOURCES test_report_screen.c TIMEOUT 180 LIBS sgreport)

# Hubs and workers by the recorded kind, not by role names: a renamed hub
# and a worker named "server" (views, report numbers, hub figure), and an
# old read-only database (its hub roles of the time).
sg_add_test(test_role_kind SOURCES test_role_kind.c TIMEOUT 120 LIBS sgreport sgrun)
