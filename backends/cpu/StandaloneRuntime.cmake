# Builds the CPU runtime as a static library `autoddl_cpu_runtime` from copies of its sources, for
# projects outside the autoddl tree (generated programs; tests/unit/runtime/standalone). Needs only
# a C++17 compiler, MPI and a CBLAS. Set AUTODDL_RUNTIME_ROOT to the directory holding backends/
# before including this file; the runtime's includes are spelled from that root.
# AUTODDL_PREBUILT_RUNTIME (optional): the build directory of this library built already from the
# same sources with AUTODDL_EXPORT_RUNTIME=ON (autoddl builds one per cache and runtime and points
# the projects it builds at it, driver/Build.cpp); `autoddl_cpu_runtime` then links that build
# instead of compiling the sources again, and the searches for MPI, BLAS and threads are skipped.
cmake_minimum_required(VERSION 3.18)
if(AUTODDL_PREBUILT_RUNTIME)
  # Declares autoddl_cpu_runtime_prebuilt: the archive, with what it links written out as paths.
  include(${AUTODDL_PREBUILT_RUNTIME}/autoddl_cpu_runtime.cmake)
  add_library(autoddl_cpu_runtime INTERFACE)
  target_link_libraries(autoddl_cpu_runtime INTERFACE autoddl_cpu_runtime_prebuilt)
  set(_scope INTERFACE)
else()
  enable_language(C) # FindMPI's C component: the project may enable CXX only
  find_package(MPI REQUIRED COMPONENTS C)
  set(BLA_VENDOR OpenBLAS)
  find_package(BLAS)
  if(NOT BLAS_FOUND) # any other BLAS that ships cblas_sgemm
    unset(BLA_VENDOR)
    find_package(BLAS REQUIRED)
  endif()
  set(_rt ${AUTODDL_RUNTIME_ROOT}/backends)
  include(${_rt}/common/RuntimeSources.cmake) # common, host and the shared harness
  add_library(autoddl_cpu_runtime STATIC ${AUTODDL_SHARED_RUNTIME_SOURCES}
    ${_rt}/cpu/Collectives.cpp
    ${_rt}/cpu/sparse/SparseReference.cpp
    ${_rt}/cpu/kfac/Kfac.cpp # K-FAC: LAPACK's potrf/potri from the same OpenBLAS
    # The CPU program's harness.
    ${_rt}/cpu/harness/Harness.cpp ${_rt}/cpu/harness/KfacRun.cpp)
  find_package(Threads REQUIRED) # Init.cpp fills large parameters on the hardware threads
  target_link_libraries(autoddl_cpu_runtime PUBLIC Threads::Threads)
  target_link_libraries(autoddl_cpu_runtime PUBLIC MPI::MPI_C ${BLAS_LIBRARIES})
  find_package(ZLIB) # where found: a user's deflated .npz graph members (UserGraph.cpp)
  if(ZLIB_FOUND)
    target_compile_definitions(autoddl_cpu_runtime PRIVATE AUTODDL_HAVE_ZLIB=1)
    target_link_libraries(autoddl_cpu_runtime PUBLIC ZLIB::ZLIB)
  endif()
  set(_scope PUBLIC)
endif()
target_include_directories(autoddl_cpu_runtime ${_scope} ${AUTODDL_RUNTIME_ROOT})
target_compile_features(autoddl_cpu_runtime ${_scope} cxx_std_17)
target_compile_definitions(autoddl_cpu_runtime ${_scope} OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

# AUTODDL_EXPORT_RUNTIME=ON: also write autoddl_cpu_runtime.cmake into the build directory, for
# projects configured with AUTODDL_PREBUILT_RUNTIME pointing here. It declares the archive with the
# usage requirements of MPI::MPI_C and Threads::Threads and the BLAS (and zlib) libraries copied as
# found here.
if(AUTODDL_EXPORT_RUNTIME AND NOT AUTODDL_PREBUILT_RUNTIME)
  set_target_properties(autoddl_cpu_runtime PROPERTIES ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
  set(_props INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS INTERFACE_COMPILE_OPTIONS
    INTERFACE_LINK_OPTIONS INTERFACE_LINK_LIBRARIES)
  set(_deps Threads::Threads MPI::MPI_C)
  while(_deps) # a dependency's own target dependencies are flattened in turn
    list(POP_FRONT _deps _dep)
    foreach(_prop IN LISTS _props)
      get_target_property(_value ${_dep} ${_prop})
      if(NOT _value) # unset: <var>-NOTFOUND
        continue()
      endif()
      foreach(_item IN LISTS _value)
        if(_prop STREQUAL "INTERFACE_LINK_LIBRARIES" AND TARGET ${_item})
          list(APPEND _deps ${_item})
        else()
          list(APPEND _export_${_prop} ${_item})
        endif()
      endforeach()
    endforeach()
  endwhile()
  list(APPEND _export_INTERFACE_LINK_LIBRARIES ${BLAS_LIBRARIES})
  if(ZLIB_FOUND) # an imported target: its library path, as BLAS's
    list(APPEND _export_INTERFACE_LINK_LIBRARIES ${ZLIB_LIBRARIES})
  endif()
  set(_text "add_library(autoddl_cpu_runtime_prebuilt STATIC IMPORTED)\n")
  string(APPEND _text "set_target_properties(autoddl_cpu_runtime_prebuilt PROPERTIES\n"
    "  IMPORTED_LOCATION \"${CMAKE_BINARY_DIR}/${CMAKE_STATIC_LIBRARY_PREFIX}autoddl_cpu_runtime"
    "${CMAKE_STATIC_LIBRARY_SUFFIX}\"")
  foreach(_prop IN LISTS _props)
    string(REPLACE "\\" "\\\\" _value "${_export_${_prop}}")
    string(REPLACE "\"" "\\\"" _value "${_value}")
    string(APPEND _text "\n  ${_prop} \"${_value}\"")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/autoddl_cpu_runtime.cmake "${_text})\n")
endif()
