# mapreduce engine: broadcast/reduce algorithms as threads over inproc
# ZeroMQ; equivalence with `local` and faults as real processes.
sg_add_test(test_mapreduce SOURCES test_mapreduce.c TIMEOUT 120 LABELS mapreduce INTERNALS mapreduce)
sg_add_test(test_mapreduce_train SOURCES test_mapreduce_train.c TIMEOUT 300 LABELS mapreduce INTERNALS mapreduce)
sg_add_test(test_mapreduce_run SOURCES test_mapreduce_run.c TIMEOUT 240 LABELS mapreduce
  LIBS PkgConfig::SQLITE)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_mapreduce_run sgdlab sgdlab-rank)
