// The two LibTorch formulations of SSD agree (the chunked one is the
// benchmark's baseline), and the references behave as documented.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "kernels/reference.h"

namespace k = mambamt::kernels;

TEST_CASE("reference ssd: chunked form equals the recurrence", "[kernels]") {
  torch::manual_seed(1);
  auto f64 = torch::TensorOptions().dtype(torch::kDouble);
  for (int64_t len : {1, 7, 16, 37}) {
    const int64_t b = 2, h = 4, p = 5, g = 2, n = 3;
    auto x = torch::randn({b, len, h, p}, f64), dt = torch::randn({b, len, h}, f64);
    auto A_log = torch::rand({h}, f64), B = torch::randn({b, len, g, n}, f64);
    auto C = torch::randn({b, len, g, n}, f64);
    k::SsdScanOptions o;
    o.D = torch::randn({h}, f64);
    o.dt_bias = torch::randn({h}, f64);
    o.initial_state = torch::randn({b, h, p, n}, f64);
    o.return_final_state = true;
    o.chunk_size = 16;
    auto r1 = k::reference::ssd_scan(x, dt, A_log, B, C, o);
    auto r2 = k::reference::ssd_scan_chunked(x, dt, A_log, B, C, o);
    CHECK(torch::allclose(r1.y, r2.y, 1e-9, 1e-9));
    CHECK(torch::allclose(r1.final_state, r2.final_state, 1e-9, 1e-9));
  }
}
