#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, slow, MPI, Slurm;
# CUDA tests skip cleanly without a GPU). Arguments go to ctest, e.g. -L unit.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${CTEST_JOBS:-$(nproc)}" "$@"
