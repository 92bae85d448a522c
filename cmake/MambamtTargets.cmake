# One object library carries the precompiled LibTorch header; every other
# target reuses it (a 17 s parse of <torch/torch.h> per file becomes ~3 s).
add_library(mambamt_pch OBJECT ${CMAKE_CURRENT_LIST_DIR}/pch_dummy.cpp)
target_link_libraries(mambamt_pch PRIVATE mambamt_deps)
if(MAMBAMT_USE_PCH)
  target_precompile_headers(mambamt_pch PRIVATE
    "$<$<COMPILE_LANGUAGE:CXX>:<torch/torch.h$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<string$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<vector$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<map$<ANGLE-R>>"
    "$<$<COMPILE_LANGUAGE:CXX>:<memory$<ANGLE-R>>")
endif()

function(mambamt_use_pch target)
  if(MAMBAMT_USE_PCH)
    target_precompile_headers(${target} REUSE_FROM mambamt_pch)
  endif()
endfunction()

# mambamt_library(<folder> DEPS <mambamt libs...>)
# Builds library mambamt_<folder> from <folder>/*.cpp, <folder>/cpu/*.cpp and,
# with CUDA, <folder>/cuda/*.cu. Public headers are <folder>/*.h, included as
# "folder/name.h" from the repository root.
function(mambamt_library folder)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  file(GLOB _srcs CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/cpu/*.cpp
       ${CMAKE_CURRENT_SOURCE_DIR}/detail/*.cpp)
  if(MAMBAMT_TORCH_HAS_CUDA)
    file(GLOB _glue CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cpp)
    list(APPEND _srcs ${_glue})
  endif()
  if(MAMBAMT_CUDA_KERNELS)
    file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/cuda/*.cu)
    list(APPEND _srcs ${_cu})
  endif()
  set(_name mambamt_${folder})
  if(NOT _srcs)
    # A folder whose code has not landed yet: an interface target keeps the graph whole.
    add_library(${_name} INTERFACE)
    target_include_directories(${_name} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
    target_link_libraries(${_name} INTERFACE mambamt_deps ${ARG_DEPS})
    return()
  endif()
  add_library(${_name} STATIC ${_srcs})
  target_include_directories(${_name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${_name} PUBLIC mambamt_deps ${ARG_DEPS})
  mambamt_use_pch(${_name})
  set_target_properties(${_name} PROPERTIES CUDA_SEPARABLE_COMPILATION OFF)
  set(MAMBAMT_LIBRARY_TARGET ${_name} PARENT_SCOPE)
endfunction()
