// `mambamt --version`: version and git revision, LibTorch and CUDA, the BLAS
// kernels OpenBLAS runs (with the OPENBLAS_CORETYPE that chose them), our
// own CPU kernels (with the MAMBAMT_CPU_KERNELS that chose them), MPI.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "core/device.h"
#include "kernels/isa.h"
#include "test_util.h"

TEST_CASE("mambamt --version names the CPU kernels and who chose them", "[cli]") {
  // Chosen at run time from the CPU (as in this process, whose environment
  // the binary inherits); MAMBAMT_CPU_KERNELS forces a set, and generic runs
  // on every CPU.
  CommandResult own = run_shell(mambamt_binary() + " --version");
  INFO(own.output);
  REQUIRE(own.code == 0);
  CHECK(own.output.find("\nCPU kernels: " + mambamt::kernels::cpu_isa()) != std::string::npos);
  CommandResult forced = run_shell("MAMBAMT_CPU_KERNELS=generic " + mambamt_binary() + " --version");
  INFO(forced.output);
  REQUIRE(forced.code == 0);
  CHECK(forced.output.find("\nCPU kernels: generic (MAMBAMT_CPU_KERNELS=generic)\n") != std::string::npos);
}

TEST_CASE("mambamt --version names the BLAS kernels OpenBLAS runs and who chose them", "[cli]") {
  const bool openblas = !mambamt::core::blas_core().empty();
  // Chosen by the user: mambamt keeps them and says so. Prescott (SSE3), the
  // generic kernels, run on every x86-64 CPU.
  CommandResult forced = run_shell("OPENBLAS_CORETYPE=Prescott " + mambamt_binary() + " --version");
  INFO(forced.output);
  REQUIRE(forced.code == 0);
  CHECK(forced.output.rfind("mambamt ", 0) == 0);
  CHECK(forced.output.find("\nLibTorch ") != std::string::npos);
  CHECK(forced.output.find("\nMPI: ") != std::string::npos);
#if defined(__x86_64__)
  CHECK(forced.output.find(openblas ? "\nBLAS: OpenBLAS, Prescott kernels (OPENBLAS_CORETYPE=Prescott)\n"
                                    : "\nBLAS: not OpenBLAS\n") != std::string::npos);
#endif
  // Left to OpenBLAS, which falls back to Prescott on CPUs it does not know;
  // mambamt then starts itself again with the kernels of the CPU's vector unit.
  CommandResult own = run_shell("env -u OPENBLAS_CORETYPE " + mambamt_binary() + " --version");
  INFO(own.output);
  REQUIRE(own.code == 0);
  std::smatch m;
  if (!openblas) {
    CHECK(own.output.find("\nBLAS: not OpenBLAS\n") != std::string::npos);
    return;
  }
  REQUIRE(std::regex_search(own.output, m, std::regex("\nBLAS: OpenBLAS, (\\w+) kernels\n")));
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) CHECK(m[1].str() != "Prescott");
#endif
}
