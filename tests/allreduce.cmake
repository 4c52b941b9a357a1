# allreduce engine: the collectives as threads over inproc ZeroMQ, then as
# processes (mpirun for mpi, forked ranks with a rendezvous for zmq), and
# training equivalence with `local`.
sg_add_test(test_allreduce SOURCES test_allreduce.c TIMEOUT 60 LABELS allreduce)
sg_add_test(test_allreduce_run SOURCES test_allreduce_run.c TIMEOUT 200 LABELS allreduce
  LIBS PkgConfig::SQLITE)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_allreduce_run sgdlab sgdlab-rank)
