# CUDA is optional. With nvcc present the kernels' .cu sources are compiled and
# linked into mambamt_kernels (CI has nvcc and no GPU: this checks they build).
# The ops are registered for the CUDA dispatch key only when LibTorch itself has
# CUDA (MAMBAMT_WITH_CUDA).
set(MAMBAMT_CUDA_KERNELS OFF)
if(MAMBAMT_CUDA)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      # Hopper (H100/H200) by default; one architecture keeps CI compile time low.
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MAMBAMT_CUDA_KERNELS ON)
  endif()
endif()
