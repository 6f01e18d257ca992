# Builds the CPU runtime as a static library `autoddl_cpu_runtime` from copies of its sources, for
# projects outside the autoddl tree (generated programs; tests/unit/runtime/standalone). Needs only
# a C++17 compiler, MPI and a CBLAS. Set AUTODDL_RUNTIME_ROOT to the directory holding backends/
# before including this file; the runtime's includes are spelled from that root.
cmake_minimum_required(VERSION 3.18)
find_package(MPI REQUIRED COMPONENTS C)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS)
if(NOT BLAS_FOUND) # any other BLAS that ships cblas_sgemm
  unset(BLA_VENDOR)
  find_package(BLAS REQUIRED)
endif()
set(_rt ${AUTODDL_RUNTIME_ROOT}/backends)
add_library(autoddl_cpu_runtime STATIC
  ${_rt}/common/Init.cpp ${_rt}/common/Data.cpp ${_rt}/common/MiniJson.cpp
  ${_rt}/common/FileIo.cpp ${_rt}/common/Safetensors.cpp ${_rt}/common/Metrics.cpp
  ${_rt}/common/Trace.cpp
  ${_rt}/cpu/Mesh.cpp ${_rt}/cpu/Collectives.cpp ${_rt}/cpu/RunReport.cpp
  ${_rt}/cpu/Checkpoint.cpp
  ${_rt}/cpu/sparse/SparseReference.cpp
  ${_rt}/cpu/kfac/Kfac.cpp # K-FAC: LAPACK's potrf/potri from the same OpenBLAS
  # The harness of generated programs: the host parts both backends share, and the CPU program's.
  ${_rt}/common/harness/Spec.cpp ${_rt}/common/harness/Options.cpp
  ${_rt}/common/harness/ParamTable.cpp ${_rt}/common/harness/DataOrder.cpp
  ${_rt}/common/harness/Pipeline.cpp ${_rt}/common/harness/ProgramRun.cpp
  ${_rt}/cpu/harness/Harness.cpp ${_rt}/cpu/harness/KfacRun.cpp)
target_include_directories(autoddl_cpu_runtime PUBLIC ${AUTODDL_RUNTIME_ROOT})
target_compile_features(autoddl_cpu_runtime PUBLIC cxx_std_17)
target_compile_definitions(autoddl_cpu_runtime PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
find_package(Threads REQUIRED) # Init.cpp fills large parameters on the hardware threads
target_link_libraries(autoddl_cpu_runtime PUBLIC Threads::Threads)
target_link_libraries(autoddl_cpu_runtime PUBLIC MPI::MPI_C ${BLAS_LIBRARIES})
