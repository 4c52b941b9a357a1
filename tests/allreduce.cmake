# allreduce engine: the collectives as threads over inproc ZeroMQ, then as
# processes (mpirun for mpi, forked ranks with a rendezvous for zmq): the
# exactness matrix (ring/rhd/native x mpi/zmq x N = 1..8 x counts 0 .. 1M+3,
# one launch per N and transport), the planted bug, and training
# equivalence with `local`.  test_allreduce_run takes ~16 s here.
sg_add_test(test_allreduce SOURCES test_allreduce.c TIMEOUT 60 LABELS allreduce)
sg_add_test(test_allreduce_run SOURCES test_allreduce_run.c TIMEOUT 150 LABELS allreduce
  LIBS PkgConfig::SQLITE)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_allreduce_run sgdlab sgdlab-rank)
