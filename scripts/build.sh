#!/usr/bin/env bash
# Configures and builds mambamt into ${BUILD_DIR:-build}. Extra arguments go to CMake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# Each compile of a LibTorch file takes ~1.5 GB; keep parallelism within memory.
mem_jobs=$(( $(awk '/MemAvailable/ {print int($2/1536000)}' /proc/meminfo) ))
[ "$mem_jobs" -ge 1 ] && [ "$mem_jobs" -lt "$JOBS" ] && JOBS=$mem_jobs
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" "$@"
elif [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
