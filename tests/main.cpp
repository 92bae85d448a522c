// Catch2 v2 main shared by every test executable. As mambamt's own main, it
// first makes sure OpenBLAS runs kernels for this CPU (core/device.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "core/device.h"

int main(int argc, char** argv) {
  mambamt::core::ensure_blas_kernels(argv);
  return Catch::Session().run(argc, argv);
}
