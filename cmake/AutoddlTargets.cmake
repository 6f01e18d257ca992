# Two kinds of library, kept apart because Debian's LLVM is built without exceptions and RTTI:
#   autoddl_core_library: code that includes MLIR/LLVM headers; -fno-exceptions -fno-rtti;
#                         errors travel as LogicalResult / FailureOr / diagnostics.
#   autoddl_plain_library: plain C++ (no MLIR headers) that core code links: built like a core
#                          library (-fno-exceptions -fno-rtti, errors as values) without the
#                          MLIR include paths.
#   autoddl_edge_library: code at the edges (JSON, CLI parsing) that may throw; it must not
#                         include MLIR headers, and it catches at its own boundary.
# Public headers of core libraries that edge code includes are plain C++ (no MLIR types).

set(AUTODDL_WARNINGS -Wall -Wextra -Wno-unused-parameter)

function(autoddl_plain_library name)
  add_library(${name} ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${name} PRIVATE ${AUTODDL_WARNINGS} -fno-exceptions -fno-rtti)
endfunction()

function(autoddl_core_library name)
  autoddl_plain_library(${name} ${ARGN})
  target_include_directories(${name} SYSTEM PUBLIC ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
endfunction()

function(autoddl_edge_library name)
  add_library(${name} ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_compile_options(${name} PRIVATE ${AUTODDL_WARNINGS})
endfunction()

# A gtest executable registered with ctest. Usage: autoddl_unit_test(name SOURCES a.cpp LIBS x y)
function(autoddl_unit_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${AUTODDL_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  add_test(NAME ${name} COMMAND ${name} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 600)
endfunction()
