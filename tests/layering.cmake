# The include rules fail the build (docs/design.md, "The house"): for each
# library, a planted file compiled with that library's own include
# directories and definitions (as its sources get them) may include what
# the library's folder and the libraries it links export, and nothing
# else.  tests/layering.sh compiles each plant.
set(SG_LAYER_DIR ${CMAKE_BINARY_DIR}/layering)
# sg_layering(TARGET CASE...): one CTest, layering_TARGET.
function(sg_layering target)
  set(inc "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(def "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  file(GENERATE OUTPUT ${SG_LAYER_DIR}/${target}.flags
    CONTENT "$<$<BOOL:${inc}>:-I$<JOIN:${inc},\n-I>>\n$<$<BOOL:${def}>:-D$<JOIN:${def},\n-D>>\n")
  add_test(NAME layering_${target}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/layering.sh ${CMAKE_C_COMPILER}
            ${SG_LAYER_DIR}/${target}.flags ${ARGN})
  set_tests_properties(layering_${target} PROPERTIES TIMEOUT 60 LABELS layering)
endfunction()

# core: itself only; no engine, no harness room.
sg_layering(sgcore ok:err.h ok:transport.h ok:engine.h
  no:run.h no:config.h no:cluster.h no:report.h no:ps.h no:allreduce.h)
# engines: core and their own folder; never another engine's, never the harness.
sg_layering(sgallreduce ok:allreduce.h ok:transport.h
  no:ps_proto.h no:mapreduce.h no:gossip.h no:config.h no:recorder.h)
sg_layering(sgps ok:ps_proto.h no:allreduce.h no:topk.h no:gossip.h no:run.h)
sg_layering(sgmapreduce ok:mapreduce.h no:ps.h no:allreduce.h no:config.h)
sg_layering(sggossip ok:gossip.h no:ps.h no:mapreduce.h no:launch.h)
# the registry and the rank program: engines by their table, never their headers.
sg_layering(sgengines ok:engine.h no:ps.h no:allreduce.h no:config.h)
sg_layering(sgdlab-rank ok:engine.h ok:transport_new.h no:ps.h no:run.h no:config.h no:report.h)
# harness rooms: base < cluster < run; model < report; cli on top.
sg_layering(sgbase ok:proc.h no:cluster.h no:run.h)
sg_layering(sgcluster ok:cluster_impl.h ok:proc.h no:run_impl.h no:run.h no:config.h no:report.h no:ps.h)
sg_layering(sgmodel ok:cost_model.h ok:reduce.h no:report.h no:plot.h no:run.h no:allreduce.h)
sg_layering(sgrun ok:cluster.h ok:proc.h ok:run_impl.h no:cluster_impl.h
  no:report.h no:escape.h no:cost_model.h no:commands.h no:ps_proto.h)
sg_layering(sgreport ok:cost_model.h ok:views.h ok:db_path.h
  no:run.h no:run_impl.h no:config.h no:recorder.h no:cluster.h no:commands.h no:mapreduce.h)
sg_layering(sgdlab ok:commands.h ok:run.h ok:report.h ok:cluster.h no:ps.h no:run_impl.h)

# ... and the check can fail: a forbidden include claimed allowed, and an
# allowed one claimed forbidden, each fail the script.
add_test(NAME layering_catches_a_forbidden_include
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/layering.sh ${CMAKE_C_COMPILER}
          ${SG_LAYER_DIR}/sgreport.flags ok:run_impl.h)
add_test(NAME layering_catches_a_refused_allowed_include
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/layering.sh ${CMAKE_C_COMPILER}
          ${SG_LAYER_DIR}/sgcore.flags no:err.h)
set_tests_properties(layering_catches_a_forbidden_include
  layering_catches_a_refused_allowed_include PROPERTIES TIMEOUT 60 WILL_FAIL TRUE LABELS layering)
