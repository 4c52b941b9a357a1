# Benchmarks across architectures and the allreduce fault matrix, as real
# processes through sgdlab (zmq forked ranks, mpirun).
sg_add_test(test_bench_impls SOURCES test_bench_impls.c TIMEOUT 180 LABELS bench
  LIBS PkgConfig::SQLITE)
add_dependencies(test_bench_impls sgdlab sgdlab-rank)
sg_add_test(test_faults SOURCES test_faults.c TIMEOUT 240 LABELS bench
  LIBS sgrun PkgConfig::SQLITE)
add_dependencies(test_faults sgdlab sgdlab-rank)
