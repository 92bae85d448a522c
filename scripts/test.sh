#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, slow, MPI, Slurm;
# CUDA tests skip cleanly without a GPU). Arguments go to ctest, e.g. -L unit.
# Prints the build's time, ccache's statistics, and every test's time with the
# counts of passed, failed and skipped tests (scripts/test_times.py).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/setup.sh
BUILD_DIR=${BUILD_DIR:-build}
start=$(date +%s)
scripts/build.sh
build_seconds=$(( $(date +%s) - start ))
if command -v ccache >/dev/null; then ccache -s | sed 's/^/ccache: /'; fi
# CTest starts the tests that took longest first, by the costs it measured in
# this build directory; a new one starts from the costs committed beside the
# tests (tests/ctest_cost_data.txt, copied from a full run).
cost="$BUILD_DIR/Testing/Temporary/CTestCostData.txt"
if [ ! -f "$cost" ] && [ -f tests/ctest_cost_data.txt ]; then
  mkdir -p "$(dirname "$cost")"
  cp tests/ctest_cost_data.txt "$cost"
fi
cd "$BUILD_DIR"
rc=0
start=$(date +%s)
ctest --output-on-failure --output-junit ctest_junit.xml -j "${CTEST_JOBS:-$(nproc)}" "$@" || rc=$?
ctest_seconds=$(( $(date +%s) - start ))
python3 "$root/scripts/test_times.py" ctest_junit.xml --build-seconds "$build_seconds" --test-seconds "$ctest_seconds" || true
exit "$rc"
