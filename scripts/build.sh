#!/usr/bin/env bash
# Configures and builds mambamt into ${BUILD_DIR:-build}.
#   scripts/build.sh                    everything (the binary, benchmarks, tests)
#   scripts/build.sh --target mambamt   the binary only (what scripts/demo.sh runs)
# Other arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
targets=()
cmake_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target)
      [ $# -ge 2 ] || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=(--target "$2"); shift 2 ;;
    *) cmake_args+=("$1"); shift ;;
  esac
done
# Each compile of a LibTorch file takes ~1.5 GB; keep parallelism within memory.
mem_jobs=$(( $(awk '/MemAvailable/ {print int($2/1536000)}' /proc/meminfo) ))
[ "$mem_jobs" -ge 1 ] && [ "$mem_jobs" -lt "$JOBS" ] && JOBS=$mem_jobs
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${generator[@]}" "${cmake_args[@]}"
elif [ ${#cmake_args[@]} -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" "${cmake_args[@]}"
fi
start=$(date +%s)
cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
echo "build: ${targets[*]:-all targets} built in $(( $(date +%s) - start )) s"
