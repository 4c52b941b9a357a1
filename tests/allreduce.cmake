# allreduce engine: the collectives as threads over inproc ZeroMQ, then as
# processes (mpirun for mpi, forked ranks with a rendezvous for zmq): the
# exactness matrix (ring/rhd/tree/hier/native x mpi/zmq x N = 1..8 x counts
# 0 .. 1M+3, one launch per N, transport and implementation), the planted
# bug, and training equivalence with `local`.  test_allreduce_run took ~70 s
# here on a loaded 2-core host with 30 bench launches (18 under mpirun); it
# has 54 now (30 under mpirun).  test_allreduce: 35 s here, 114 s under
# ASan + UBSan (scripts/test.sh's second pass), load average 22.
sg_add_test(test_allreduce SOURCES test_allreduce.c TIMEOUT 240 LABELS allreduce INTERNALS allreduce)
sg_add_test(test_allreduce_run SOURCES test_allreduce_run.c TIMEOUT 500 LABELS allreduce
  LIBS PkgConfig::SQLITE)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_allreduce_run sgdlab sgdlab-rank)
# overlap: true as processes (3 + 2 + 1 launches, ~30 s on a loaded host)
sg_add_test(test_allreduce_overlap SOURCES test_allreduce_overlap.c TIMEOUT 240
  LABELS allreduce LIBS PkgConfig::SQLITE)
add_dependencies(test_allreduce_overlap sgdlab sgdlab-rank)
# the gradient's buckets recorded (table buckets) and drawn (sgdlab trace):
# two N = 2 cnn runs of 21 steps (~10 s on a loaded host)
sg_add_test(test_bucket_timeline SOURCES test_bucket_timeline.c json_check.c TIMEOUT 180
  LABELS allreduce LIBS PkgConfig::SQLITE)
add_dependencies(test_bucket_timeline sgdlab sgdlab-rank)
