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

# Whether a source file reaches a LibTorch header, directly or through the
# project's own headers (quoted or angled includes that resolve under the
# repository, the file's folder or tests/). Answers are cached per file for
# the configure run; a file whose includes change is re-scanned when CMake
# next configures (mambamt_use_pch makes editing a test file do that).
function(mambamt_reaches_torch file out)
  get_filename_component(file "${file}" ABSOLUTE)
  get_property(_known GLOBAL PROPERTY "MAMBAMT_TORCH:${file}" SET)
  if(_known)
    get_property(_v GLOBAL PROPERTY "MAMBAMT_TORCH:${file}")
    set(${out} ${_v} PARENT_SCOPE)
    return()
  endif()
  set_property(GLOBAL PROPERTY "MAMBAMT_TORCH:${file}" FALSE)  # include cycles end here
  file(STRINGS "${file}" _lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(_dir "${file}" DIRECTORY)
  set(_r FALSE)
  foreach(_l IN LISTS _lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"].*" "\\1" _h "${_l}")
    if(_h MATCHES "^(torch|ATen|c10)/")
      set(_r TRUE)
      break()
    endif()
    foreach(_base "${PROJECT_SOURCE_DIR}" "${_dir}" "${PROJECT_SOURCE_DIR}/tests")
      if(EXISTS "${_base}/${_h}" AND NOT IS_DIRECTORY "${_base}/${_h}")
        mambamt_reaches_torch("${_base}/${_h}" _sub)
        if(_sub)
          set(_r TRUE)
        endif()
        break()
      endif()
    endforeach()
    if(_r)
      break()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY "MAMBAMT_TORCH:${file}" ${_r})
  set(${out} ${_r} PARENT_SCOPE)
endfunction()

# The shared LibTorch PCH for the C++ files of `target` that reach LibTorch.
# The others (configs, stores, metrics, MPI, Slurm: about half the files) are
# compiled without it: loading the PCH costs ~8 s of CPU per file (GCC redoes
# the header's deferred template instantiations in every file that includes
# it), several times what those files cost on their own.
function(mambamt_use_pch target)
  if(NOT MAMBAMT_USE_PCH)
    return()
  endif()
  target_precompile_headers(${target} REUSE_FROM mambamt_pch)
  get_target_property(_srcs ${target} SOURCES)
  foreach(_s IN LISTS _srcs)
    if(NOT _s MATCHES "\\.cpp$" OR _s MATCHES "^\\$<")
      continue()
    endif()
    mambamt_reaches_torch("${_s}" _torch)
    if(NOT _torch)
      set_source_files_properties("${_s}" PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      # A test file compiled without the PCH includes Catch before anything
      # else; should an edit make it reach LibTorch, c10's CHECK macro would
      # replace Catch's and its CHECKs stop being test assertions. Editing it
      # re-runs CMake (about 3 s), which classifies it again.
      get_filename_component(_abs "${_s}" ABSOLUTE)
      if(_abs MATCHES "^${PROJECT_SOURCE_DIR}/tests/")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_abs}")
      endif()
    endif()
  endforeach()
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
