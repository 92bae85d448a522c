#!/usr/bin/env bash
# Run HERE (a Debian 12 machine with the package archive): downloads the
# Debian packages mambamt needs besides LibTorch, as .deb files, into
# .deps/debs (ignored by git). The GPU machine has no package registry; the
# `device` tool carries .deps there (carry: [".deps"]) and
# scripts/gpu_build.sh unpacks them into a prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=.deps/debs
mkdir -p "$OUT"

# The -dev packages, the tools the tests call, and the shared-library closure
# of libhdf5, spdlog, fmt, toml++, sentencepiece and OpenMPI (its plugins
# included), found with ldd + dpkg -S on Debian 12. Libraries every CUDA /
# PyTorch image has (libc, libstdc++, zlib, OpenSSL, ...) are left out, except
# libcurl's own closure (the H200's image, Ubuntu 24.04, lacked
# libunistring.so.2). pkgconf comes along: the image need not have pkg-config.
PKGS=(
  libhdf5-dev libhdf5-103-1 libhdf5-hl-100 libsz2 libaec0 hdf5-tools hdf5-helpers
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libtomlplusplus-dev libtomlplusplus3
  nlohmann-json3-dev
  libsentencepiece-dev libsentencepiece0
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers
  librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 libmunge2
  libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libbrotli1 libldap-2.5-0 libsasl2-2
  libunistring2 libidn2-0 libgnutls30 libhogweed6 libnettle8 libgmp10 libtasn1-6 libp11-kit0 libffi8
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1 libcom-err2
  libjemalloc-dev libjemalloc2
  pkgconf pkgconf-bin libpkgconf3
  catch2
)
rm -f "$OUT"/*.deb
echo "gpu_deps: ${#PKGS[@]} packages"
(cd "$OUT" && apt-get download "${PKGS[@]}" >/dev/null 2>&1)
du -sh "$OUT"
echo "gpu_deps: carry .deps to the GPU machine and run scripts/gpu_build.sh there"
