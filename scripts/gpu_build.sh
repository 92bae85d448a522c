#!/usr/bin/env bash
# Run ON THE GPU MACHINE (PyTorch 2.x with CUDA installed, no package
# registry): unpacks the Debian packages of .deps/debs (made by
# scripts/gpu_deps.sh) into a prefix, builds mambamt against PyTorch's
# LibTorch with the CUDA kernels, and optionally runs tests.
#
#   scripts/gpu_build.sh                 # build into build-gpu
#   scripts/gpu_build.sh -L cuda         # build, then ctest -L cuda (args go to ctest)
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
  touch "$PREFIX/.unpacked"
fi

ML=$PREFIX/usr/lib/x86_64-linux-gnu
export MAMBAMT_DEPS_PREFIX=$PREFIX
export PATH=$PREFIX/usr/bin:$PATH
export LD_LIBRARY_PATH=$ML:$ML/hdf5/serial:$ML/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PKG_CONFIG_SYSROOT_DIR=$PREFIX
export PKG_CONFIG_PATH=$ML/pkgconfig:$PREFIX/usr/share/pkgconfig
# A relocated OpenMPI finds its components and help files through OPAL_PREFIX.
export OPAL_PREFIX=$PREFIX/usr
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

TORCH_PREFIX=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
NPROC=$(nproc)
echo "gpu_build: LibTorch from $TORCH_PREFIX; dependencies in $PREFIX; $NPROC cores"

cmake -S . -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX;$PREFIX/usr;$ML/cmake" \
  -DHDF5_C_INCLUDE_DIR="$PREFIX/usr/include/hdf5/serial" \
  -DHDF5_C_LIBRARY_hdf5="$ML/hdf5/serial/libhdf5.so" \
  -DHDF5_INCLUDE_DIRS="$PREFIX/usr/include/hdf5/serial" \
  -DHDF5_C_LIBRARIES="$ML/hdf5/serial/libhdf5.so" \
  -DMPI_CXX_COMPILER="$PREFIX/usr/bin/mpicxx" -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc" \
  -DCatch2_DIR="$PREFIX/usr/lib/cmake/Catch2" \
  -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DMAMBAMT_USE_CCACHE=OFF
cmake --build "$BUILD_DIR" -j "$NPROC"
"$BUILD_DIR/bin/mambamt" --version
if [ $# -gt 0 ]; then
  (cd "$BUILD_DIR" && ctest --output-on-failure "$@")
fi
