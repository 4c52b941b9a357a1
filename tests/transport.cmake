# Transport conformance: the same cases (transport_cases.c) on ZeroMQ
# inproc threads, ZeroMQ ipc/tcp processes and MPI processes.
sg_add_test(test_transport_inproc
  SOURCES test_transport_inproc.c transport_cases.c
  TIMEOUT 240)

# One rank of a process test (started by test_transport_proc or mpirun).
add_executable(transport_rank transport_rank.c transport_cases.c)
target_link_libraries(transport_rank PRIVATE sgcore)

# The process tests, one CTest entry per case so each has its own timeout.
add_executable(test_transport_proc test_transport_proc.c)
target_link_libraries(test_transport_proc PRIVATE sgtest sgcore)
add_dependencies(test_transport_proc transport_rank)
foreach(case_timeout
    zmq_ipc_processes_1_to_5:180 zmq_tcp_processes_1_to_5:180
    mpi_processes_1_to_5:180 zmq_fault_stop_and_kill:60
    mpi_fault_stop:60 mpi_fault_kill:60)
  string(REPLACE ":" ";" ct ${case_timeout})
  list(GET ct 0 case)
  list(GET ct 1 timeout)
  add_test(NAME test_transport_${case} COMMAND test_transport_proc ${case})
  set_tests_properties(test_transport_${case} PROPERTIES TIMEOUT ${timeout}
    LABELS transport
    ENVIRONMENT "SGDLAB_BIN_DIR=${CMAKE_BINARY_DIR};SGDLAB_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
endforeach()
# The rendezvous over CURVE: a rank registers only as itself.
sg_add_test(test_rdv_auth SOURCES test_rdv_auth.c TIMEOUT 30)
# ipc isends read from the sender's memory: both receive paths, and a read
# that fails fails both ranks at once.
sg_add_test(test_zmq_cma SOURCES test_zmq_cma.c TIMEOUT 90 LABELS transport)
# The same path under forged frames from a local process: a descriptor
# longer than the receive, one that wraps the address space, one of 0 bytes,
# acknowledgements never asked for; another user cannot reach the socket.
sg_add_test(test_zmq_cma_attack SOURCES test_zmq_cma_attack.c TIMEOUT 60 LABELS transport)
