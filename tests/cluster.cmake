# The emulated cluster (harness/cluster/cluster.c): network namespaces and
# rate-limited links.  Needs root; the tests skip with the reason
# otherwise.  RESOURCE_LOCK: the shaping and timing checks do not run next
# to each other (the machine may have 2 cores).
add_library(sgtestcluster STATIC test_cluster_util.c)
target_link_libraries(sgtestcluster PUBLIC sgtest sgrun)
sg_add_test(test_cluster SOURCES test_cluster.c TIMEOUT 120 LIBS sgtestcluster sgrun)
add_dependencies(test_cluster sgdlab)
sg_add_test(test_cluster_net SOURCES test_cluster_net.c TIMEOUT 120 LIBS sgtestcluster sgrun)
set_tests_properties(test_cluster test_cluster_net PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# `sgdlab run` on a cluster: placement, every engine equal to local over
# the links, the links' byte counters, cleanup after a killed rank and a
# killed harness, refusal without CAP_NET_ADMIN (~25 s here).
sg_add_test(test_cluster_run SOURCES test_cluster_run.c TIMEOUT 300
  LIBS sgtestcluster sgrun PkgConfig::SQLITE)
add_dependencies(test_cluster_run sgdlab sgdlab-rank sgdlab-nsexec)
set_tests_properties(test_cluster_run PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# What a run or a cluster leaves on disk is removed through checked
# descriptors, and only when proven the user's (harness/base/safedir.h,
# harness/run/rundir.h): the
# remover, its race with a symlink-swapping attacker (nobody), a
# cluster's teardown against planted per-host directories, mpirun cluster
# runs, a killed harness, a forged database.  Root and network namespaces
# for most cases (they skip with the reason otherwise).
sg_add_test(test_teardown SOURCES test_teardown.c TIMEOUT 600
  LIBS sgtestcluster sgrun PkgConfig::SQLITE)
add_dependencies(test_teardown sgdlab sgdlab-rank sgdlab-nsexec)
set_tests_properties(test_teardown PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# Slurm on the cluster (`cluster up --slurm`): ring (mpi, zmq) and ps
# through salloc, ring through sbatch of `sgdlab run --sbatch`'s script,
# each equal to local with its ranks on 4 hosts; a killed rank; nothing
# left after down.  Skips without root or Slurm.
sg_add_test(test_cluster_slurm SOURCES test_cluster_slurm.c TIMEOUT 420
  LIBS sgtestcluster sgrun PkgConfig::SQLITE)
add_dependencies(test_cluster_slurm sgdlab sgdlab-rank sgdlab-nsexec)
set_tests_properties(test_cluster_slurm PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# ssh hosts on the cluster (`cluster up --ssh`): ring over mpirun's ssh
# launch and ring/ps over launcher ssh on 4 hosts equal local; no key in
# any argv or environment; a killed rank, a killed harness, a host that
# does not see the run's directory; nothing left after down.  Skips
# without root or sshd.
sg_add_test(test_cluster_ssh SOURCES test_cluster_ssh.c TIMEOUT 300
  LIBS sgtestcluster sgrun PkgConfig::SQLITE)
add_dependencies(test_cluster_ssh sgdlab sgdlab-rank sgdlab-nsexec)
set_tests_properties(test_cluster_ssh PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# cluster down signals only what the cluster started: a pid reused
# between a daemon's or a session's check and its signal (in a pid
# namespace of the test's own) gets nothing; a recorded mount namespace is
# trusted by inode and device.  Root; a tmpfs /run of its own.
sg_add_test(test_teardown_signals SOURCES test_teardown_signals.c TIMEOUT 120 LIBS sgcluster sgbase)
# its daemons' directory in /run/sgdlab has no cluster state, so a sweep
# beside it (any `cluster up`, the cleanup below) would take it
set_tests_properties(test_teardown_signals PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# A cluster test killed between `cluster up` and `down` leaves nothing
# once the cleanup below ran: a stand-in that made a cluster with sshds
# (`cluster up --owner`, as the tests do) is SIGKILLed, then
# cluster_cleanup.sh runs; and the cleanup keeps a live owner's cluster
# and a persistent one.  Root; skips otherwise.
sg_add_test(test_cluster_cleanup SOURCES test_cluster_cleanup.c TIMEOUT 180
  LIBS sgtestcluster sgrun)
add_dependencies(test_cluster_cleanup sgdlab)
set_tests_properties(test_cluster_cleanup PROPERTIES RESOURCE_LOCK sgdlab_cluster)
# The cleanup after the cluster tests, run by CTest after the last of them
# even when one failed or was killed at its timeout: `sgdlab cluster
# sweep` (cluster_cleanup.sh) removes every cluster whose owner has ended
# -- the tests' clusters belong to the test process (tc_up, `cluster up
# --owner`) -- with its namespaces, state and daemons, and the daemons'
# directories of no cluster (test_teardown_signals').  Skips without root.
add_test(NAME cluster_cleanup
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cluster_cleanup.sh $<TARGET_FILE:sgdlab>)
set_tests_properties(cluster_cleanup PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77
  FIXTURES_CLEANUP sgdlab_cluster RESOURCE_LOCK sgdlab_cluster)
set_tests_properties(test_cluster test_cluster_net test_cluster_run test_teardown
  test_cluster_slurm test_cluster_ssh test_teardown_signals test_cluster_cleanup
  PROPERTIES FIXTURES_REQUIRED sgdlab_cluster)
