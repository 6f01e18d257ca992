# Finds libcudnn (9 or later, for its graph API: cudnn_graph.h) for the cuDNN path of the attention
# kernels (kernels/AttentionCudnn.cu). Looked for in CUDNN_HOME (a directory holding include/ and
# lib/, e.g. the nvidia-cudnn wheel's nvidia/cudnn), then beside the CUDA toolkit. Sets
# AUTODDL_CUDNN_FOUND; autoddl_link_cudnn(<target>) links it and defines AUTODDL_HAVE_CUDNN where it
# was found, and does nothing otherwise (the own attention kernels then run alone).
# AUTODDL_NO_CUDNN=ON skips it.
option(AUTODDL_NO_CUDNN "build the attention without cuDNN even where libcudnn is found" OFF)
if(NOT DEFINED AUTODDL_CUDNN_FOUND)
  set(AUTODDL_CUDNN_FOUND OFF)
  if(NOT AUTODDL_NO_CUDNN)
    find_package(CUDAToolkit QUIET)
    find_path(AUTODDL_CUDNN_INCLUDE cudnn_graph.h
      HINTS $ENV{CUDNN_HOME}/include ${CUDNN_HOME}/include ${CUDAToolkit_INCLUDE_DIRS}
      /usr/local/cuda/include)
    find_library(AUTODDL_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
      HINTS $ENV{CUDNN_HOME}/lib ${CUDNN_HOME}/lib ${CUDAToolkit_LIBRARY_DIR}
      /usr/local/cuda/lib64 /usr/local/cuda/lib)
    if(AUTODDL_CUDNN_INCLUDE AND AUTODDL_CUDNN_LIBRARY)
      set(AUTODDL_CUDNN_FOUND ON)
      message(STATUS "autoddl: cuDNN found (${AUTODDL_CUDNN_LIBRARY}): attention through cuDNN")
    else()
      message(STATUS "autoddl: cuDNN not found: the own attention kernels only")
    endif()
  endif()
endif()

function(autoddl_link_cudnn target)
  if(AUTODDL_CUDNN_FOUND)
    target_include_directories(${target} PRIVATE ${AUTODDL_CUDNN_INCLUDE})
    target_compile_definitions(${target} PRIVATE AUTODDL_HAVE_CUDNN=1)
    target_link_libraries(${target} PUBLIC ${AUTODDL_CUDNN_LIBRARY})
  endif()
endfunction()
