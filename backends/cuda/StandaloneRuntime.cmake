# Builds the CUDA runtime as a static library `autoddl_cuda_runtime` from copies of its sources, for
# generated projects (autoddl codegen --backend cuda). Needs CUDA 13 (cudart, cuBLASLt, cuSOLVER for
# K-FAC's inverses), NCCL and
# MPI only; links libcudnn where it is found (AUTODDL_NO_CUDNN=ON: never). Set AUTODDL_RUNTIME_ROOT to the directory holding backends/ before including this file,
# and enable the CUDA language first. AUTODDL_FP32=ON builds every act_t as fp32 (the --fp32 mode).
# MPI is optional: without it (or with AUTODDL_NO_MPI=ON) NoMpi.h stands in for mpi.h and the
# program starts under torchrun or alone, its MPI calls carried over TCP (MpiRoute.cpp).
cmake_minimum_required(VERSION 3.18)
option(AUTODDL_NO_MPI "build without MPI (the program then starts under torchrun or alone)" OFF)
if(NOT AUTODDL_NO_MPI)
  find_package(MPI COMPONENTS C)
  if(NOT MPI_FOUND)
    message(STATUS "MPI not found: building without it (start the program with torchrun)")
    set(AUTODDL_NO_MPI ON)
  endif()
endif()
find_package(CUDAToolkit REQUIRED)
# NCCL: the CUDA toolkit's, a system package's (/usr/lib/<triple>), or NCCL_HOME's (e.g. the
# nvidia-nccl wheel, which ships libnccl.so.2 only).
find_path(AUTODDL_NCCL_INCLUDE nccl.h HINTS $ENV{NCCL_HOME}/include ${NCCL_HOME}/include
  ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
find_library(AUTODDL_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS $ENV{NCCL_HOME}/lib ${NCCL_HOME}/lib
  ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
if(NOT AUTODDL_NCCL_INCLUDE OR NOT AUTODDL_NCCL_LIBRARY)
  message(FATAL_ERROR "NCCL not found: set NCCL_HOME to its install prefix")
endif()
set(_rt ${AUTODDL_RUNTIME_ROOT}/backends)
file(GLOB _autoddl_cuda_sources ${_rt}/cuda/*.cu ${_rt}/cuda/*.cpp ${_rt}/cuda/kernels/*.cu
  ${_rt}/cuda/sparse/*.cu ${_rt}/cuda/kfac/*.cu)
list(SORT _autoddl_cuda_sources)
include(${_rt}/common/RuntimeSources.cmake) # common, host and the shared harness
add_library(autoddl_cuda_runtime STATIC ${AUTODDL_SHARED_RUNTIME_SOURCES}
  ${_rt}/cuda/harness/Harness.cpp ${_rt}/cuda/harness/KfacRun.cpp # the CUDA program's harness
  ${_autoddl_cuda_sources})
target_include_directories(autoddl_cuda_runtime PUBLIC ${AUTODDL_RUNTIME_ROOT} ${AUTODDL_NCCL_INCLUDE})
target_compile_features(autoddl_cuda_runtime PUBLIC cxx_std_17)
set_target_properties(autoddl_cuda_runtime PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
target_compile_definitions(autoddl_cuda_runtime PUBLIC OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
if(AUTODDL_FP32)
  target_compile_definitions(autoddl_cuda_runtime PUBLIC AUTODDL_FP32=1)
endif()
target_compile_options(autoddl_cuda_runtime PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
find_package(Threads REQUIRED) # Init.cpp fills large parameters on the hardware threads
target_link_libraries(autoddl_cuda_runtime PUBLIC Threads::Threads)
find_package(ZLIB) # where found: a user's deflated .npz graph members (UserGraph.cpp)
if(ZLIB_FOUND)
  target_compile_definitions(autoddl_cuda_runtime PRIVATE AUTODDL_HAVE_ZLIB=1)
  target_link_libraries(autoddl_cuda_runtime PUBLIC ZLIB::ZLIB)
endif()
target_link_libraries(autoddl_cuda_runtime PUBLIC CUDA::cudart CUDA::cublasLt CUDA::cusolver
  ${AUTODDL_NCCL_LIBRARY})
# cuDNN's fused attention and convolutions where libcudnn is found (the CUDA toolkit's,
# CUDNN_HOME's, or the nvidia-cudnn wheel's); the own kernels otherwise.
include(${_rt}/cuda/FindCudnn.cmake)
autoddl_link_cudnn(autoddl_cuda_runtime)
if(AUTODDL_NO_MPI)
  configure_file(${_rt}/cuda/NoMpi.h ${CMAKE_CURRENT_BINARY_DIR}/autoddl_no_mpi/mpi.h COPYONLY)
  target_include_directories(autoddl_cuda_runtime PUBLIC
    ${CMAKE_CURRENT_BINARY_DIR}/autoddl_no_mpi)
  target_compile_definitions(autoddl_cuda_runtime PUBLIC AUTODDL_NO_MPI=1)
else()
  target_link_libraries(autoddl_cuda_runtime PUBLIC MPI::MPI_C)
endif()
