# Workload library: datasets, sharding, models, optimizer, evaluation.
sg_add_test(test_dataset SOURCES test_dataset.c TIMEOUT 60)
sg_add_test(test_shard SOURCES test_shard.c TIMEOUT 60)
sg_add_test(test_partition SOURCES test_partition.c TIMEOUT 60)
# Every rank draws its label-skew shard itself: no inexact libm call.
add_test(NAME shard_draw_uses_no_inexact_libm
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/shard_libm.sh $<TARGET_FILE:sgcore>)
set_tests_properties(shard_draw_uses_no_inexact_libm PROPERTIES TIMEOUT 30)
sg_add_test(test_model SOURCES test_model.c TIMEOUT 60)
sg_add_test(test_model_cnn SOURCES test_model_cnn.c TIMEOUT 120)
sg_add_test(test_model_embed SOURCES test_model_embed.c TIMEOUT 60)
sg_add_test(test_clicks SOURCES test_clicks.c TIMEOUT 60)
sg_add_test(test_optim SOURCES test_optim.c TIMEOUT 30)
sg_add_test(test_workload SOURCES test_workload.c TIMEOUT 120)
sg_add_test(test_workload_slice SOURCES test_workload_slice.c TIMEOUT 60)
sg_add_test(test_bench_step SOURCES test_bench_step.c TIMEOUT 90)
