#!/usr/bin/env bash
# Run ON THE GPU MACHINE (PyTorch 2.x with CUDA installed, no package
# registry): unpacks the Debian packages of .deps/debs (made by
# scripts/gpu_deps.sh) into a prefix, builds mambamt against PyTorch's
# LibTorch with the CUDA kernels, and optionally runs tests.
#
#   scripts/gpu_build.sh                 # build into build-gpu
#   scripts/gpu_build.sh -L cuda         # build, then ctest -L cuda (args go to ctest)
#   MAMBAMT_GPU_TARGETS="mambamt test_models" scripts/gpu_build.sh   # those targets only
#
# With the device tool: run(command="scripts/gpu_build.sh -L cuda", carry=[".deps"]).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${MAMBAMT_DEPS_PREFIX:-/tmp/mambamt-deps}
BUILD_DIR=${BUILD_DIR:-build-gpu}

if [ ! -d .deps/debs ] || [ -z "$(ls .deps/debs/*.deb 2>/dev/null)" ]; then
  echo "gpu_build: no .deps/debs/*.deb; run scripts/gpu_deps.sh on a Debian machine and carry .deps" >&2
  exit 1
fi
if [ ! -f "$PREFIX/.unpacked" ]; then
  mkdir -p "$PREFIX"
  for f in .deps/debs/*.deb; do dpkg -x "$f" "$PREFIX"; done
  # dpkg -x runs no maintainer scripts, so Debian's alternatives (mpicxx,
  # mpicc, mpirun -> the *.openmpi programs) are not there: link them.
  for t in mpicc mpicxx mpic++ mpirun mpiexec; do
    [ -e "$PREFIX/usr/bin/$t.openmpi" ] && ln -sf "$t.openmpi" "$PREFIX/usr/bin/$t"
  done
  touch "$PREFIX/.unpacked"
fi

ML=$PREFIX/usr/lib/x86_64-linux-gnu
export MAMBAMT_DEPS_PREFIX=$PREFIX
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$ML:$ML/hdf5/serial:$ML/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_SYSROOT_DIR=$PREFIX
export PKG_CONFIG_PATH=$ML/pkgconfig:$PREFIX/usr/share/pkgconfig
# A relocated OpenMPI finds its components and help files through OPAL_PREFIX,
# PMIx through PMIX_INSTALL_PREFIX; without them this PMIx loaded the image's
# own (other version) PMIx plugins from the built-in path and warned.
export OPAL_PREFIX=$PREFIX/usr PMIX_INSTALL_PREFIX=$ML/pmix2
export PMIX_MCA_mca_base_component_path=$ML/pmix2/lib/pmix
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The same environment for the programs run after the build (scripts/gpu_check.sh sources it).
mkdir -p "$BUILD_DIR"
{
  echo "export MAMBAMT_DEPS_PREFIX='$PREFIX' OPAL_PREFIX='$OPAL_PREFIX' PMIX_INSTALL_PREFIX='$PMIX_INSTALL_PREFIX'"
  echo "export PMIX_MCA_mca_base_component_path='$PMIX_MCA_mca_base_component_path'"
  echo "export PATH='$PREFIX/usr/bin':\$PATH LD_LIBRARY_PATH='$LD_LIBRARY_PATH'"
  echo "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
} > "$BUILD_DIR/gpu_env.sh"

# A CMake 4 (pip's) refuses package files written for CMake < 3.5 unless told.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
if [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDAToolkit_ROOT=/usr/local/cuda PATH=$PATH:/usr/local/cuda/bin
fi

TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
NPROC=$(nproc)
echo "gpu_build: LibTorch from $TORCH_PREFIX; dependencies in $PREFIX; $NPROC cores"

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr;$ML/cmake" \
  -DMAMBAMT_HDF5_INCLUDE_DIR="$PREFIX/usr/include/hdf5/serial" \
  -DMAMBAMT_HDF5_LIBRARY="$ML/hdf5/serial/libhdf5.so" \
  -DMPI_CXX_COMPILER="$PREFIX/usr/bin/mpicxx" -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc" \
  -DCatch2_DIR="$PREFIX/usr/lib/cmake/Catch2" \
  -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DMAMBAMT_USE_CCACHE=OFF
# MAMBAMT_GPU_TARGETS="mambamt test_kernels" builds only those; ninja keeps
# going past a failed file (-k 0), so one build shows every error.
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "$NPROC" ${MAMBAMT_GPU_TARGETS:+--target $MAMBAMT_GPU_TARGETS} -- -k 0
"$BUILD_DIR/bin/mambamt" --version
if [ $# -gt 0 ]; then
  (cd "$BUILD_DIR" && ctest --output-on-failure "$@")
fi
