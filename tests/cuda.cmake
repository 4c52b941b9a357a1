# CUDA (docs/cuda.md).  The schedules of the device communication run on
# the CPU in every build (test_cuda_sched); `device: cuda` without a GPU
# (or in a CPU-only build) must be one line and exit 2 (test_cuda_refuse);
# the GPU tests skip, visibly, when no CUDA device is present.
sg_add_test(test_cuda_sched SOURCES test_cuda_sched.c TIMEOUT 120 LABELS cuda INTERNALS allreduce)
# overlap with backprop on the device: the bucket plan against the host
# overlap (real overlap.c, N = 2..4 threads), the staged pieces on a lazy
# simulated device (test_cuda_overlap.c).
sg_add_test(test_cuda_overlap SOURCES test_cuda_overlap.c TIMEOUT 240 LABELS cuda INTERNALS allreduce)
# overlap with backprop and the sharded update for cuda-ring and nccl: the
# shared schedules (coll_plan.h, the ring's owner's step) on a simulated
# device with the collectives' host twins (test_cuda_devcoll.c).
sg_add_test(test_cuda_devcoll SOURCES test_cuda_devcoll.c TIMEOUT 300 LABELS cuda INTERNALS allreduce)
sg_add_test(test_cuda_pring SOURCES test_cuda_pring.c TIMEOUT 240 LABELS cuda INTERNALS allreduce)
sg_add_test(test_cuda_replica SOURCES test_cuda_replica.c TIMEOUT 480 LABELS cuda INTERNALS ps mapreduce)
# model: cnn on the device: its step and per-thread bodies run by a CPU twin
# against model_cnn.c, bit for bit (test_cuda_cnn.c).
sg_add_test(test_cuda_cnn SOURCES test_cuda_cnn.c TIMEOUT 240 LABELS cuda)
sg_add_test(test_cuda_refuse SOURCES test_cuda_refuse.c TIMEOUT 60 LABELS cuda)
add_dependencies(test_cuda_refuse sgdlab sgdlab-rank)
# GPU tests: exit 77 (Skipped) with "SKIP: no CUDA device: <why>" when the
# machine has none.  Built in CUDA builds only.
if(SG_HAVE_CUDA)
  add_executable(cuda_ring_rank cuda_ring_rank.c)
  target_link_libraries(cuda_ring_rank PRIVATE sgcore)
  sg_add_test(test_cuda_gpu SOURCES test_cuda_gpu.c TIMEOUT 300 LABELS cuda gpu)
  add_dependencies(test_cuda_gpu cuda_ring_rank sgdlab sgdlab-rank)
  set_tests_properties(test_cuda_gpu PROPERTIES SKIP_RETURN_CODE 77)
  sg_add_test(test_cuda_cnn_gpu SOURCES test_cuda_cnn_gpu.c TIMEOUT 120 LABELS cuda gpu)
  set_tests_properties(test_cuda_cnn_gpu PROPERTIES SKIP_RETURN_CODE 77)
endif()
# scripts/gpu-check.sh --dry: the device check's plumbing on the CPU (its
# GPU parts SKIP), its parts non-fatal under a 1-second limit.
add_test(NAME test_gpu_check_dry
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_check_dry.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
set_tests_properties(test_gpu_check_dry PROPERTIES TIMEOUT 500 LABELS cuda)
