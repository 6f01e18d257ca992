# The sources of the CUDA runtime and kernels, and the function that builds them into a library;
# shared by backends/cuda/CMakeLists.txt and the standalone GPU checks
# (tests/unit/cuda/standalone). AUTODDL_CUDA_DIR is the directory of this file.
set(AUTODDL_CUDA_DIR ${CMAKE_CURRENT_LIST_DIR})
set(AUTODDL_CUDA_KERNEL_SOURCES
  ${AUTODDL_CUDA_DIR}/Runtime.cu
  ${AUTODDL_CUDA_DIR}/StepGraph.cu
  ${AUTODDL_CUDA_DIR}/kernels/Conv.cu
  ${AUTODDL_CUDA_DIR}/kernels/ConvCudnn.cu
  ${AUTODDL_CUDA_DIR}/kernels/CrossEntropy.cu
  ${AUTODDL_CUDA_DIR}/kernels/CudnnGraph.cu
  ${AUTODDL_CUDA_DIR}/kernels/Dropout.cu
  ${AUTODDL_CUDA_DIR}/kernels/Elementwise.cu
  ${AUTODDL_CUDA_DIR}/kernels/Embedding.cu
  ${AUTODDL_CUDA_DIR}/kernels/Fp8Cast.cu
  ${AUTODDL_CUDA_DIR}/kernels/Fp8Gemm.cu
  ${AUTODDL_CUDA_DIR}/kernels/Fp8Linear.cu
  ${AUTODDL_CUDA_DIR}/kernels/GatAttention.cu
  ${AUTODDL_CUDA_DIR}/kernels/GradClip.cu
  ${AUTODDL_CUDA_DIR}/kernels/Init.cu
  ${AUTODDL_CUDA_DIR}/kernels/Linear.cu
  ${AUTODDL_CUDA_DIR}/kernels/Norm.cu
  ${AUTODDL_CUDA_DIR}/kernels/Optimizer.cu
  ${AUTODDL_CUDA_DIR}/kernels/Primitive.cu
  ${AUTODDL_CUDA_DIR}/kernels/Reduce.cu
  ${AUTODDL_CUDA_DIR}/kernels/Samples.cu
  ${AUTODDL_CUDA_DIR}/kernels/Shape.cu
  ${AUTODDL_CUDA_DIR}/kernels/Softmax.cu
  ${AUTODDL_CUDA_DIR}/kernels/Sparse.cu)
# The W8 SpMM / SDDMM kernels kernels/Sparse.cu calls: the autoddl_cuda_sparse target where the
# build has one (backends/cuda/sparse), else their sources.
set(AUTODDL_CUDA_SPARSE_SOURCES ${AUTODDL_CUDA_DIR}/sparse/WindowFormat.cu
  ${AUTODDL_CUDA_DIR}/sparse/SpmmKernels.cu ${AUTODDL_CUDA_DIR}/sparse/SddmmKernels.cu)
# The attention kernels (cuda-attention) join the library once they exist.
option(AUTODDL_CUDA_ATTENTION "Build kernels/Attention.cu into the CUDA kernels" ON)
if(AUTODDL_CUDA_ATTENTION AND EXISTS ${AUTODDL_CUDA_DIR}/kernels/Attention.cu)
  list(APPEND AUTODDL_CUDA_KERNEL_SOURCES ${AUTODDL_CUDA_DIR}/kernels/Attention.cu
    ${AUTODDL_CUDA_DIR}/kernels/AttentionCudnn.cu)
endif()
include(${AUTODDL_CUDA_DIR}/FindCudnn.cmake) # AUTODDL_CUDNN_FOUND: cuDNN's attention, convolutions

# autoddl_cuda_kernels_library(<name> <root>): the library with its public include root (the
# directory holding backends/); -DAUTODDL_FP32 is the caller's to add.
function(autoddl_cuda_kernels_library name root)
  if(TARGET autoddl_cuda_sparse)
    add_library(${name} ${AUTODDL_CUDA_KERNEL_SOURCES})
    target_link_libraries(${name} PUBLIC autoddl_cuda_sparse)
  else()
    add_library(${name} ${AUTODDL_CUDA_KERNEL_SOURCES} ${AUTODDL_CUDA_SPARSE_SOURCES})
  endif()
  target_include_directories(${name} PUBLIC ${root})
  target_link_libraries(${name} PUBLIC CUDA::cudart CUDA::cublasLt)
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
  autoddl_link_cudnn(${name})
endfunction()

# K-FAC (docs/kfac.md): factor GEMMs (cuBLASLt), inverses (cuSOLVER), reductions (NCCL).
set(AUTODDL_CUDA_KFAC_SOURCES ${AUTODDL_CUDA_DIR}/kfac/KfacFactors.cu
  ${AUTODDL_CUDA_DIR}/kfac/KfacInverse.cu ${AUTODDL_CUDA_DIR}/kfac/KfacUpdate.cu)
# autoddl_cuda_kfac_library(<name> <kernels library>): the K-FAC library over the given kernels
# library (its act_t); no target where cuSOLVER or NCCL is missing.
function(autoddl_cuda_kfac_library name kernels)
  find_path(AUTODDL_KFAC_NCCL_INCLUDE nccl.h HINTS $ENV{NCCL_HOME}/include
    ${CUDAToolkit_INCLUDE_DIRS})
  find_library(AUTODDL_KFAC_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS $ENV{NCCL_HOME}/lib
    ${CUDAToolkit_LIBRARY_DIR})
  if(NOT TARGET CUDA::cusolver OR NOT AUTODDL_KFAC_NCCL_INCLUDE OR NOT AUTODDL_KFAC_NCCL_LIBRARY)
    message(STATUS "autoddl: cuSOLVER or NCCL not found: ${name} (CUDA K-FAC) not built")
    return()
  endif()
  add_library(${name} ${AUTODDL_CUDA_KFAC_SOURCES})
  target_include_directories(${name} PUBLIC ${AUTODDL_KFAC_NCCL_INCLUDE})
  target_link_libraries(${name} PUBLIC ${kernels} CUDA::cusolver ${AUTODDL_KFAC_NCCL_LIBRARY})
  set_target_properties(${name} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
    POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo
      -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
endfunction()
