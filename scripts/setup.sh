#!/usr/bin/env bash
# Installs the Debian 12 packages mambamt needs, skipping the package step when
# everything is already there. Idempotent; run as root.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git ccache
  libtorch-dev libopenblas0-openmp          # LibTorch 1.13 (CPU) + a fast BLAS
  libopenmpi-dev openmpi-bin                # MPI runtime of sweeps
  libhdf5-dev hdf5-tools                    # stores and checkpoints (h5dump)
  libsentencepiece-dev                      # tokenizer
  libtomlplusplus-dev libspdlog-dev catch2  # config, logging, tests
  nlohmann-json3-dev                        # JSON (results/json.h)
  libjemalloc-dev                           # the programs' malloc (cmake/Allocator.cmake)
  slurm-wlm munge                           # the real one-node cluster of the tests
  librsvg2-bin                              # rsvg-convert: tests render plots to PNG
  texlive-latex-base texlive-latex-recommended  # tests compile the collector's LaTeX (booktabs)
  shellcheck                                # tests lint the job scripts
  python3-h5py                              # tests read stores the way users do
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages and not root; run as root: apt-get install ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
