# The sources of KernelCheck / KernelCheckFp32 (KernelCheck.cpp: main and the shared checks; one
# KernelCheck<Family>.cpp per kernel family; KernelBench.cpp: --bench), shared by CMakeLists.txt
# here and standalone/CMakeLists.txt.
set(AUTODDL_KERNEL_CHECK_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheck.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckLinear.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckNorm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckElementwise.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckEmbedding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckSoftmaxTranspose.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckLoss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckOptimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelCheckRuntime.cpp
  ${CMAKE_CURRENT_LIST_DIR}/KernelBench.cpp)
