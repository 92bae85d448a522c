// core/device.h: how many CPU threads a run takes, and which device.
#include <catch2/catch.hpp>
#include <sched.h>

#include <cstdlib>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "test_util.h"

using namespace mambamt;

namespace {
// Sets (or unsets) OMP_NUM_THREADS for the scope and restores it and LibTorch's
// thread count after.
struct OmpEnv {
  int saved_threads = torch::get_num_threads();
  ScopedEnv env;
  explicit OmpEnv(const char* value) : env("OMP_NUM_THREADS", value) {}
  ~OmpEnv() { torch::set_num_threads(saved_threads); }
};

int cores() {
  cpu_set_t set;
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  return CPU_COUNT(&set);
}
}  // namespace

TEST_CASE("configure_threads: an explicit count, else OMP_NUM_THREADS, else the cores shared among the node's ranks") {
  SECTION("an explicit count wins over OMP_NUM_THREADS") {
    OmpEnv env("3");
    CHECK(core::configure_threads(2, 1) == 2);
    CHECK(torch::get_num_threads() == 2);
  }
  SECTION("threads = 0 takes OMP_NUM_THREADS, whatever the ranks on the node") {
    OmpEnv env("3");
    CHECK(core::configure_threads(0, 1) == 3);
    CHECK(torch::get_num_threads() == 3);
    CHECK(core::configure_threads(0, 4) == 3);
  }
  SECTION("an OpenMP list counts its first entry") {
    OmpEnv env("5,2");
    CHECK(core::configure_threads(0, 1) == 5);
  }
  SECTION("unset or empty: the cores this process may use, divided among the ranks") {
    for (const char* value : {static_cast<const char*>(nullptr), ""}) {
      OmpEnv env(value);
      CHECK(core::configure_threads(0, 1) == cores());
      CHECK(torch::get_num_threads() == cores());
      CHECK(core::configure_threads(0, cores() + 1) == 1);
    }
  }
  SECTION("a value that is not a positive count is an error naming the variable and the value") {
    for (const char* value : {"zero", "0", "-2", "4x", "2.5", " 3", "9999999"}) {
      OmpEnv env(value);
      const int before = torch::get_num_threads();
      CHECK_THROWS_MATCHES(core::configure_threads(0, 1), InputError,
                           Catch::Message(std::string("OMP_NUM_THREADS=\"") + value +
                                          "\" is not a positive thread count (train.threads = 0 takes the count "
                                          "from it; unset it or set train.threads)"));
      CHECK(torch::get_num_threads() == before);
      // An explicit count does not read the variable.
      CHECK(core::configure_threads(1, 1) == 1);
    }
  }
}

TEST_CASE("select_device: cpu is always there, and cuda without a GPU is an error") {
  CHECK(core::select_device("cpu").is_cpu());
  if (core::cuda_device_count() == 0) {
    CHECK(core::select_device("auto").is_cpu());
    CHECK_THROWS_AS(core::select_device("cuda"), InputError);
  } else {
    CHECK(core::select_device("auto", 1).is_cuda());
  }
  CHECK_THROWS_AS(core::select_device("tpu"), InputError);
}

TEST_CASE("OpenBLAS runs kernels for this CPU and not its generic ones", "[core]") {
  // The test executables' main calls ensure_blas_kernels, as mambamt's does.
  const std::string blas = core::blas_core();
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  INFO("BLAS: " << (blas.empty() ? "not OpenBLAS" : blas) << ", OPENBLAS_CORETYPE " << (forced ? forced : "unset"));
#if defined(__x86_64__)
  const bool chosen_by_user = forced && std::string(forced) == "Prescott";
  if (!blas.empty() && !chosen_by_user && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CHECK(blas != "Prescott");
#endif
  // Stores record them.
  CHECK(core::system_info(torch::Device(torch::kCPU)).at("blas") ==
        (blas.empty() ? std::string("not OpenBLAS") : "OpenBLAS " + blas));
  // Whichever kernels run, products are right: a float32 matrix product
  // against the same product in float64.
  torch::manual_seed(5);
  torch::Tensor a = torch::randn({67, 129}), b = torch::randn({129, 45});
  torch::Tensor ref = torch::mm(a.to(torch::kDouble), b.to(torch::kDouble));
  const double err = ((torch::mm(a, b).to(torch::kDouble) - ref).abs().max() / ref.abs().max()).item<double>();
  CHECK(err < 1e-5);
}
