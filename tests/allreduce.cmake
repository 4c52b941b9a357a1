# allreduce engine: the collectives as threads over inproc ZeroMQ, then as
# processes (mpirun for mpi, forked ranks with a rendezvous for zmq), and
# training equivalence with `local`.
sg_add_test(test_allreduce SOURCES test_allreduce.c TIMEOUT 180 LABELS allreduce)
sg_add_test(test_allreduce_run SOURCES test_allreduce_run.c TIMEOUT 600 LABELS allreduce
  LIBS PkgConfig::SQLITE)
