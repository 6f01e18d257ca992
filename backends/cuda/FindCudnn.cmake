# cuDNN for the cuDNN paths of the attention and conv2d (kernels/AttentionCudnn.cu,
# ConvCudnn.cu): its headers (cuDNN 9's graph API, cudnn_graph.h) are needed to build them in;
# libcudnn itself is loaded when the program runs (dlopen), so a program built here runs on a
# machine without it (the own kernels then run alone) and uses it on one that has it. Looked for in CUDNN_HOME (a directory holding include/
# and lib/, e.g. the nvidia-cudnn wheel's nvidia/cudnn), then beside the CUDA toolkit. Sets
# AUTODDL_CUDNN_FOUND (the headers); autoddl_link_cudnn(<target>) then defines AUTODDL_HAVE_CUDNN,
# AUTODDL_CUDNN_DIR (the directory of the libcudnn found here, tried first at run time) and links
# the dynamic loader. AUTODDL_NO_CUDNN=ON leaves it all out.
option(AUTODDL_NO_CUDNN "build the attention and conv2d without cuDNN even where it is found" OFF)
if(NOT DEFINED AUTODDL_CUDNN_FOUND)
  set(AUTODDL_CUDNN_FOUND OFF)
  if(NOT AUTODDL_NO_CUDNN)
    find_package(CUDAToolkit QUIET)
    find_path(AUTODDL_CUDNN_INCLUDE cudnn_graph.h
      HINTS $ENV{CUDNN_HOME}/include ${CUDNN_HOME}/include ${CUDAToolkit_INCLUDE_DIRS}
      /usr/local/cuda/include)
    find_library(AUTODDL_CUDNN_LIBRARY NAMES libcudnn.so.9 cudnn
      HINTS $ENV{CUDNN_HOME}/lib ${CUDNN_HOME}/lib ${CUDAToolkit_LIBRARY_DIR}
      /usr/local/cuda/lib64 /usr/local/cuda/lib)
    if(AUTODDL_CUDNN_INCLUDE)
      set(AUTODDL_CUDNN_FOUND ON)
      message(STATUS "autoddl: cuDNN headers found (${AUTODDL_CUDNN_INCLUDE}): attention, conv2d through "
        "cuDNN where libcudnn.so.9 loads at run time")
    else()
      message(STATUS "autoddl: cuDNN not found: the own attention and conv2d kernels only")
    endif()
  endif()
endif()

function(autoddl_link_cudnn target)
  if(AUTODDL_CUDNN_FOUND)
    target_include_directories(${target} PRIVATE ${AUTODDL_CUDNN_INCLUDE})
    target_compile_definitions(${target} PRIVATE AUTODDL_HAVE_CUDNN=1)
    if(AUTODDL_CUDNN_LIBRARY)
      get_filename_component(_dir ${AUTODDL_CUDNN_LIBRARY} DIRECTORY)
      get_filename_component(_dir ${_dir} REALPATH)
      target_compile_definitions(${target} PRIVATE AUTODDL_CUDNN_DIR="${_dir}")
    endif()
    target_link_libraries(${target} PUBLIC ${CMAKE_DL_LIBS})
  endif()
endfunction()
