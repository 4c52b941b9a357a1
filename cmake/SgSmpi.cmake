# The rank program for simulated runs: a second build of core/, the
# engines and rank/rank_main.c with SimGrid's smpicc, nested in
# build/smpi/ (SGDLAB_SMPI_RANK, see the top CMakeLists.txt), its program
# sgdlab-rank-smpi written next to sgdlab.  CUDA is off there.  Skipped,
# with one line, when smpicc is not found (scripts/setup.sh installs
# libsimgrid-dev); `sgdlab run` then refuses simulate: before launch.
find_program(SG_SMPICC smpicc)
find_program(SG_SMPIRUN smpirun)
if(NOT SG_SMPICC OR NOT SG_SMPIRUN)
  message(STATUS "SimGrid SMPI: not found (smpicc/smpirun; libsimgrid-dev): simulate: unavailable")
  return()
endif()
message(STATUS "SimGrid SMPI: ${SG_SMPICC}: building sgdlab-rank-smpi (simulate:)")
include(ExternalProject)
set(_sg_smpi_args -DCMAKE_C_COMPILER=${SG_SMPICC} -DSGDLAB_SMPI_RANK=ON -DSGDLAB_CUDA=OFF
  -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE}
  -DSGDLAB_WERROR=${SGDLAB_WERROR} -DSG_SMPI_OUT=${SG_BIN_DIR})
ExternalProject_Add(sgdlab_rank_smpi
  SOURCE_DIR ${CMAKE_SOURCE_DIR}
  BINARY_DIR ${CMAKE_BINARY_DIR}/smpi
  CMAKE_ARGS ${_sg_smpi_args}
  BUILD_ALWAYS ON
  INSTALL_COMMAND ""
  BUILD_BYPRODUCTS ${SG_BIN_DIR}/sgdlab-rank-smpi)
add_dependencies(sgdlab sgdlab_rank_smpi)
