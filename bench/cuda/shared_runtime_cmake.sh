#!/usr/bin/env bash
# Prints a CMakeLists.txt that builds generated CUDA projects on one shared runtime: the runtime
# (most of a project's build time) compiles once and every project's train.cpp links against it
# as train_<project folder name>. The projects must carry byte-identical runtime/ trees (one
# autoddl made them); the first one's is used. The runtime is StandaloneRuntime.cmake's, K-FAC's
# kernels (backends/cuda/kfac) and cuSOLVER included, so K-FAC programs link here too.
#
#   bash bench/cuda/shared_runtime_cmake.sh PROJECT... > SRC/CMakeLists.txt
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: shared_runtime_cmake.sh PROJECT..." >&2; exit 2; }
first=$(realpath "$1")
echo 'cmake_minimum_required(VERSION 3.18)'
echo 'set(CMAKE_CUDA_ARCHITECTURES 90)'
echo 'project(autoddl_projects LANGUAGES C CXX CUDA)'
echo 'set(CMAKE_CXX_STANDARD 17)'
echo "set(AUTODDL_RUNTIME_ROOT $first/runtime)"
echo "include($first/runtime/backends/cuda/StandaloneRuntime.cmake)"
for d in "$@"; do
  n=$(basename "$d")
  echo "add_executable(train_$n $(realpath "$d")/train.cpp)"
  echo "target_link_libraries(train_$n PRIVATE autoddl_cuda_runtime)"
done
