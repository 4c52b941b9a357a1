# allreduce engine: the collectives as threads over inproc ZeroMQ, then as
# processes (mpirun for mpi, forked ranks with a rendezvous for zmq): the
# exactness matrix (ring/rhd/native x mpi/zmq x N = 1..8 x counts 0 .. 1M+3,
# one launch per N, transport and implementation), the planted bug, and
# training equivalence with `local`.  test_allreduce_run takes ~70 s here
# on a loaded 2-core host (30 bench launches, 18 of them under mpirun).
sg_add_test(test_allreduce SOURCES test_allreduce.c TIMEOUT 60 LABELS allreduce INTERNALS allreduce)
sg_add_test(test_allreduce_run SOURCES test_allreduce_run.c TIMEOUT 300 LABELS allreduce
  LIBS PkgConfig::SQLITE)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_allreduce_run sgdlab sgdlab-rank)
# overlap: true as processes (3 + 2 + 1 launches, ~30 s on a loaded host)
sg_add_test(test_allreduce_overlap SOURCES test_allreduce_overlap.c TIMEOUT 240
  LABELS allreduce LIBS PkgConfig::SQLITE)
add_dependencies(test_allreduce_overlap sgdlab sgdlab-rank)
