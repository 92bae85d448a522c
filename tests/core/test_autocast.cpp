// core/autocast.h: bf16 regions and the keeper of autocast's cached weight
// copies, on the CPU (autocast caches the bf16 copy of a float32 leaf that
// requires grad, a weight, until the outermost region ends).
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <ATen/autocast_mode.h>

#include <optional>

#include "core/autocast.h"

using mambamt::core::AutocastCacheKeeper;
using mambamt::core::Bf16Autocast;

namespace {

// The bf16 copy autocast uses for `w` now (from its cache where it has one).
torch::Tensor bf16_copy(const torch::Tensor& w) {
  return at::autocast::cached_cast(at::kBFloat16, w, c10::DeviceType::CPU);
}

}  // namespace

TEST_CASE("autocast regions cache a weight's bf16 copy until the outermost one ends", "[core]") {
  const torch::Tensor w = torch::randn({8, 8}).requires_grad_(true);
  torch::Tensor first;
  {
    const Bf16Autocast region(c10::DeviceType::CPU);
    first = bf16_copy(w);
    CHECK(first.scalar_type() == torch::kBFloat16);
    CHECK(bf16_copy(w).data_ptr() == first.data_ptr());  // cached
    {
      const Bf16Autocast inner(c10::DeviceType::CPU);
    }
    CHECK(bf16_copy(w).data_ptr() == first.data_ptr());  // an inner region's end keeps it
  }
  // `first` is still held, so a new copy cannot land at its address.
  const Bf16Autocast again(c10::DeviceType::CPU);
  CHECK(bf16_copy(w).data_ptr() != first.data_ptr());
}

TEST_CASE("an AutocastCacheKeeper keeps the cached copies past the end of the outermost region", "[core]") {
  const torch::Tensor w = torch::randn({8, 8}).requires_grad_(true);
  torch::Tensor first;
  {
    const AutocastCacheKeeper keeper;
    {
      const Bf16Autocast region(c10::DeviceType::CPU);
      first = bf16_copy(w);
    }
    // The region ended; the copy it cached is still the one in use.
    const Bf16Autocast next(c10::DeviceType::CPU);
    CHECK(bf16_copy(w).data_ptr() == first.data_ptr());
  }
  // The keeper went last: the cache went with it.
  const Bf16Autocast later(c10::DeviceType::CPU);
  CHECK(bf16_copy(w).data_ptr() != first.data_ptr());
}
