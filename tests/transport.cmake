# Transport conformance: the same cases (transport_cases.c) on ZeroMQ
# inproc threads, ZeroMQ ipc/tcp processes and MPI processes.
sg_add_test(test_transport_inproc
  SOURCES test_transport_inproc.c transport_cases.c
  TIMEOUT 240)
