// kernels::rms_norm on the CPU (the GPU's kernel is checked against it in
// test_cuda.cpp): the float64 definition, LibTorch's dtype promotion, and
// errors that name the shapes and dtypes.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "helpers.h"
#include "kernels/norm.h"

namespace k = mambamt::kernels;

TEST_CASE("rms_norm on the CPU: the float64 definition, output in the promoted dtype", "[kernels]") {
  torch::manual_seed(46);
  const torch::Tensor x = torch::randn({4, 3, 40}, torch::kDouble) * 2, w = torch::rand({40}, torch::kDouble) + 0.5;
  // y[r][j] = x[r][j] / sqrt(mean_j x[r][j]^2 + eps) * w[j], row by row.
  const double eps = 1e-5;
  torch::Tensor want = torch::empty_like(x);
  auto xa = x.accessor<double, 3>();
  auto wa = w.accessor<double, 1>();
  auto ya = want.accessor<double, 3>();
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 3; ++b) {
      double ss = 0;
      for (int64_t j = 0; j < 40; ++j) ss += xa[a][b][j] * xa[a][b][j];
      const double r = 1.0 / std::sqrt(ss / 40 + eps);
      for (int64_t j = 0; j < 40; ++j) ya[a][b][j] = xa[a][b][j] * r * wa[j];
    }
  MAMBAMT_CHECK_CLOSE(k::rms_norm(x, w, eps), want, 1e-12, 1e-12);
  const torch::Tensor y32 = k::rms_norm(x.to(torch::kFloat), w.to(torch::kFloat), eps);
  CHECK(y32.scalar_type() == torch::kFloat);
  MAMBAMT_CHECK_CLOSE(y32.to(torch::kDouble), want, 1e-5, 1e-5);
  // bf16 activations with a float32 weight (autocast): float32 out; bf16 weight: bf16 out.
  const torch::Tensor yb = k::rms_norm(x.to(torch::kBFloat16), w.to(torch::kFloat), eps);
  CHECK(yb.scalar_type() == torch::kFloat);
  MAMBAMT_CHECK_ALLCLOSE(yb.to(torch::kDouble), want, 1e-2, 1e-2);
  CHECK(k::rms_norm(x.to(torch::kBFloat16), w.to(torch::kBFloat16), eps).scalar_type() == torch::kBFloat16);
}

TEST_CASE("rms_norm rejects mismatched shapes and dtypes, naming them", "[kernels]") {
  const torch::Tensor x = torch::randn({2, 8});
  CHECK_THROWS_WITH(k::rms_norm(x, torch::ones({7}), 1e-5), Catch::Contains("got x [2, 8] and weight [7]"));
  CHECK_THROWS_WITH(k::rms_norm(x, torch::ones({8}, torch::kDouble), 1e-5),
                    Catch::Contains("the weight must be float32 or x's dtype"));
  CHECK_THROWS_WITH(k::rms_norm(x.to(torch::kLong), torch::ones({8}), 1e-5), Catch::Contains("unsupported dtype"));
}
