// The peak memory an experiment reports is its own, not the worker process's
// high-water mark from earlier experiments.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>

#include "train/memory.h"

using namespace mambamt::train;

TEST_CASE("a peak measurement starts from the current memory, not an earlier peak", "[train][memory]") {
  const torch::Device cpu(torch::kCPU);
  const size_t bytes = size_t(300) << 20;
  {
    // An earlier experiment's peak: 300 MiB touched, then freed.
    std::unique_ptr<char[]> big(new char[bytes]);
    std::memset(big.get(), 1, bytes);
    CHECK(peak_rss_mb() >= 300);
  }
  const double before = peak_rss_mb();
  start_peak_measurement(cpu);
  const double after = peak_rss_mb();
  INFO("peak before " << before << " MiB, after " << after << " MiB, current " << rss_mb() << " MiB");
  CHECK(after < before - 250);
  CHECK(after >= rss_mb() - 1);
}
