# The alpha-beta-gamma cost model: formulas, fit, `sgdlab model` on a
# fixture database (no cluster, no ranks).
sg_add_test(test_cost_model SOURCES test_cost_model.c json_check.c TIMEOUT 60 LIBS sgreport sgrun PkgConfig::SQLITE)
add_dependencies(test_cost_model sgdlab)
