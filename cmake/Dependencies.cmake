# Third-party dependencies, all from Debian 12 packages (or, on the GPU machine,
# LibTorch from the installed PyTorch and the rest unpacked from .deb files into
# MAMBAMT_DEPS_PREFIX; see scripts/gpu_build.sh).

if(DEFINED ENV{MAMBAMT_DEPS_PREFIX})
  list(PREPEND CMAKE_PREFIX_PATH "$ENV{MAMBAMT_DEPS_PREFIX}/usr"
       "$ENV{MAMBAMT_DEPS_PREFIX}/usr/lib/x86_64-linux-gnu/cmake")
endif()

find_package(Torch REQUIRED)
find_package(MPI REQUIRED COMPONENTS C CXX)
if(MAMBAMT_HDF5_LIBRARY)
  # HDF5 unpacked into a prefix (scripts/gpu_build.sh): its compiler wrapper
  # h5cc names the paths of the machine the package was built for, so the
  # library and headers are given instead of found.
  set(HDF5_C_LIBRARIES ${MAMBAMT_HDF5_LIBRARY})
  set(HDF5_INCLUDE_DIRS ${MAMBAMT_HDF5_INCLUDE_DIR})
  set(HDF5_DEFINITIONS "")
else()
  find_package(HDF5 REQUIRED COMPONENTS C)
endif()
find_package(spdlog REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(tomlplusplus QUIET)
find_package(PkgConfig REQUIRED)
if(NOT tomlplusplus_FOUND)
  pkg_check_modules(TOMLPP REQUIRED IMPORTED_TARGET tomlplusplus)
endif()
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
find_package(Threads REQUIRED)

# Does the LibTorch we build against have CUDA? (Debian's 1.13 does not; the
# PyTorch 2.x on the GPU machine does.)
set(MAMBAMT_TORCH_HAS_CUDA OFF)
if(TARGET torch_cuda OR TARGET c10_cuda OR "${TORCH_LIBRARIES}" MATCHES "torch_cuda")
  set(MAMBAMT_TORCH_HAS_CUDA ON)
endif()

# Everything that every mambamt library sees. Keeping one set of flags for all
# targets is what lets them share a single precompiled LibTorch header.
add_library(mambamt_deps INTERFACE)
if(DEFINED ENV{MAMBAMT_DEPS_PREFIX})
  # PyTorch's wheel ships newer fmt headers in its include folder; the
  # prefix's spdlog needs the prefix's fmt, so the prefix's folder comes first.
  target_include_directories(mambamt_deps SYSTEM BEFORE INTERFACE "$ENV{MAMBAMT_DEPS_PREFIX}/usr/include")
endif()
# sentencepiece is not linked here: data/ builds it into a shim library that it
# loads with dlopen (data/CMakeLists.txt, data/detail/spm_api.h), because its
# bundled protobuf-lite and LibTorch's libprotobuf cannot share one program.
target_link_libraries(mambamt_deps INTERFACE
  ${TORCH_LIBRARIES} MPI::MPI_CXX spdlog::spdlog nlohmann_json::nlohmann_json Threads::Threads)
if(tomlplusplus_FOUND)
  target_link_libraries(mambamt_deps INTERFACE tomlplusplus::tomlplusplus)
else()
  target_link_libraries(mambamt_deps INTERFACE PkgConfig::TOMLPP)
endif()
target_include_directories(mambamt_deps SYSTEM INTERFACE ${HDF5_INCLUDE_DIRS} ${TORCH_INCLUDE_DIRS})
target_link_libraries(mambamt_deps INTERFACE ${HDF5_C_LIBRARIES})
target_compile_definitions(mambamt_deps INTERFACE ${HDF5_DEFINITIONS} TOML_EXCEPTIONS=1)
target_compile_options(mambamt_deps INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Winvalid-pch>)
if(MAMBAMT_TORCH_HAS_CUDA)
  target_compile_definitions(mambamt_deps INTERFACE MAMBAMT_WITH_CUDA=1)
endif()
