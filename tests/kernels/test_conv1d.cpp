// causal_conv1d and its step against the plain-LibTorch reference; reorder_state.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "helpers.h"
#include "kernels/conv1d.h"
#include "kernels/reference.h"
#include "kernels/state.h"

namespace k = mambamt::kernels;
using mambamt::kernels::test::grads_of;
using mambamt::kernels::test::leaf;

namespace {

void check_conv(int64_t b, int64_t d, int64_t l, int64_t w, bool bias, bool silu, bool init,
                bool final, bool channel_last, torch::ScalarType dtype, double tol) {
  auto d64 = torch::TensorOptions().dtype(torch::kDouble);
  torch::Tensor x = channel_last ? torch::randn({b, l, d}, d64).transpose(1, 2) : torch::randn({b, d, l}, d64);
  x = x.to(dtype);
  torch::Tensor weight = torch::randn({d, w}, d64).to(dtype);
  k::CausalConv1dOptions o;
  if (bias) o.bias = torch::randn({d}, d64).to(dtype);
  if (init) o.initial_state = torch::randn({b, d, w - 1}, d64).to(dtype);
  o.silu = silu;
  o.return_final_state = final;
  auto xa = leaf(x), wa = leaf(weight), ba = leaf(o.bias), ia = leaf(o.initial_state);
  if (channel_last) xa = x.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_(true);
  auto xr = leaf(x.to(torch::kDouble)), wr = leaf(weight.to(torch::kDouble));
  auto br = ba.defined() ? leaf(ba.to(torch::kDouble)) : ba, ir = ia.defined() ? leaf(ia.to(torch::kDouble)) : ia;
  k::CausalConv1dOptions oa = o, orf = o;
  oa.bias = ba, oa.initial_state = ia;
  orf.bias = br, orf.initial_state = ir;
  auto ra = k::causal_conv1d(xa, wa, oa);
  auto rr = k::reference::causal_conv1d(xr, wr, orf);
  MAMBAMT_CHECK_CLOSE(ra.y, rr.y, tol, tol);
  if (final) MAMBAMT_CHECK_CLOSE(ra.final_state, rr.final_state, tol, tol);
  auto wy = torch::randn(ra.y.sizes(), torch::kDouble);
  auto wf = final ? torch::randn(ra.final_state.sizes(), torch::kDouble) : torch::Tensor();
  auto ga = grads_of({ra.y, ra.final_state}, {wy, wf}, {xa, wa, ba, ia});
  auto gr = grads_of({rr.y, rr.final_state}, {wy, wf}, {xr, wr, br, ir});
  const char* names[] = {"x", "weight", "bias", "initial_state"};
  for (size_t i = 0; i < ga.size(); ++i) {
    if (!ga[i].defined() && !gr[i].defined()) continue;
    INFO("gradient of " << names[i]);
    MAMBAMT_CHECK_CLOSE(ga[i], gr[i], tol, tol);
  }
}

}  // namespace

TEST_CASE("causal_conv1d float64 matches the reference, forward and gradients", "[kernels]") {
  torch::manual_seed(31);
  for (int64_t w : {2, 3, 4}) {
    INFO("W = " << w);
    check_conv(2, 5, 17, w, true, true, true, true, false, torch::kDouble, 1e-10);
    check_conv(2, 3, 1, w, true, false, true, true, false, torch::kDouble, 1e-10);   // L = 1 < W-1
    check_conv(1, 4, 9, w, false, true, false, true, true, torch::kDouble, 1e-10);   // strided x
    check_conv(3, 2, 6, w, false, false, false, false, false, torch::kDouble, 1e-10);
  }
}

TEST_CASE("causal_conv1d float32 and bfloat16", "[kernels]") {
  torch::manual_seed(32);
  check_conv(2, 16, 70, 4, true, true, true, true, false, torch::kFloat, 1e-5);
  auto x = torch::randn({2, 8, 12});
  auto w = torch::randn({8, 4});
  k::CausalConv1dOptions o;
  o.silu = true;
  auto r32 = k::causal_conv1d(x, w, o);
  auto r16 = k::causal_conv1d(x.to(torch::kBFloat16), w, o);
  CHECK(r16.y.scalar_type() == torch::kBFloat16);
  MAMBAMT_CHECK_ALLCLOSE(r16.y, r32.y, 1e-2, 1e-2);
}

TEST_CASE("causal_conv1d_step run L times equals causal_conv1d", "[kernels]") {
  torch::manual_seed(33);
  // d = 37 at b = 3: the CPU step's groups of 64 channels cross batch rows.
  for (const int64_t w : {2, 3, 4})
  for (const bool silu : {true, false})
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    CAPTURE(w, silu, dtype);
    const int64_t b = 3, d = 37, l = 11;
    auto x = torch::randn({b, d, l}).to(dtype), weight = torch::randn({d, w}).to(dtype);
    k::CausalConv1dOptions o;
    if (silu) o.bias = torch::randn({d}).to(dtype);
    o.silu = silu;
    o.initial_state = torch::randn({b, d, w - 1}).to(dtype);
    o.return_final_state = true;
    auto full = k::causal_conv1d(x, weight, o);
    auto state = o.initial_state.clone(), ref_state = o.initial_state.clone();
    std::vector<torch::Tensor> ys;
    for (int64_t t = 0; t < l; ++t) {
      ys.push_back(k::causal_conv1d_step(state, x.select(2, t), weight, o.bias, silu));
      auto yr = k::reference::causal_conv1d_step(ref_state, x.select(2, t), weight, o.bias, silu);
      MAMBAMT_CHECK_CLOSE(ys.back(), yr, 1e-6, 1e-6);
    }
    MAMBAMT_CHECK_CLOSE(torch::stack(ys, 2), full.y, 1e-6, 1e-6);
    MAMBAMT_CHECK_CLOSE(state, full.final_state, 0.0, 0.0);
  }
}

TEST_CASE("causal_conv1d_step reads rows in place: a column range gives the contiguous result", "[kernels]") {
  // d = 37 at b = 3: the CPU step's groups of 64 channels cross batch rows.
  torch::manual_seed(34);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    CAPTURE(dtype);
    const int64_t b = 3, d = 37, w = 4;
    auto wide = torch::randn({b, d + 20}, dtype);
    auto x = wide.narrow(1, 11, d), weight = torch::randn({d, w}, dtype), bias = torch::randn({d}, dtype);
    REQUIRE_FALSE(x.is_contiguous());
    auto state = torch::randn({b, d, w - 1}, dtype);
    auto s1 = state.clone(), s2 = state.clone();
    auto y1 = k::causal_conv1d_step(s1, x, weight, bias, true);
    auto y2 = k::causal_conv1d_step(s2, x.contiguous(), weight, bias, true);
    CHECK(torch::equal(y1, y2));
    CHECK(torch::equal(s1, s2));
  }
}

TEST_CASE("reorder_state picks and permutes batch rows", "[kernels]") {
  auto s = torch::arange(24, torch::kFloat).view({4, 3, 2});
  auto idx = torch::tensor({2, 2, 0, 1});
  auto r = k::reorder_state(s, idx);
  CHECK(torch::equal(r, s.index_select(0, idx)));
  auto s2 = s.clone();
  k::reorder_state_(s2, idx);
  CHECK(torch::equal(s2, r));
  CHECK(k::reorder_state(s, torch::tensor({3})).size(0) == 1);
  CHECK_THROWS_WITH(k::reorder_state_(s2, torch::tensor({0, 1})), Catch::Contains("reorder_state"));
}

TEST_CASE("reorder_state copies rows in parallel blocks, the used part of a dimension only", "[kernels]") {
  torch::manual_seed(3);
  // A KV cache's shape (B, H, capacity, Dh) with rows large enough to split
  // into many parallel tasks, and small ones; int64 indices with repeats,
  // more and fewer rows than the batch.
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 5, 40, 3}, std::vector<int64_t>{5, 4, 300, 64}}) {
    const torch::Tensor f = torch::randn(shape), d = torch::randn(shape, torch::kDouble);
    const torch::Tensor flags = torch::rand({shape[0], shape[2]}) > 0.5;
    for (const torch::Tensor& idx : {torch::tensor({4, 0, 4, 1, 2, 3}), torch::tensor({3, 3, 3, 0, 1, 2, 2, 4}),
                                     torch::tensor({1, 4}, torch::kInt)}) {
      INFO("shape " << f.sizes() << ", index " << idx);
      CHECK(torch::equal(k::reorder_state(f, idx), f.index_select(0, idx.to(torch::kLong))));
      CHECK(torch::equal(k::reorder_state(d, idx), d.index_select(0, idx.to(torch::kLong))));
      CHECK(torch::equal(k::reorder_state(flags, idx), flags.index_select(0, idx.to(torch::kLong))));
      // The first `used` columns of dim 2 (and of the flags' dim 1), any count from none to all.
      for (int64_t used : {int64_t{0}, int64_t{1}, shape[2] / 2 + 1, shape[2]}) {
        const torch::Tensor want = f.index_select(0, idx.to(torch::kLong));
        const torch::Tensor got = k::reorder_state(f, idx, 2, used);
        CHECK(got.sizes() == want.sizes());
        CHECK(torch::equal(got.narrow(2, 0, used), want.narrow(2, 0, used)));
        const torch::Tensor fw = flags.index_select(0, idx.to(torch::kLong));
        CHECK(torch::equal(k::reorder_state(flags, idx, 1, used).narrow(1, 0, used), fw.narrow(1, 0, used)));
        // Dim 1 (heads): whole heads.
        const int64_t heads = std::min<int64_t>(used, shape[1]);
        CHECK(torch::equal(k::reorder_state(f, idx, 1, heads).narrow(1, 0, heads), want.narrow(1, 0, heads)));
      }
    }
    // A strided state goes through index_select.
    const torch::Tensor t = f.transpose(1, 2);
    CHECK(torch::equal(k::reorder_state(t, torch::tensor({2, 0})), t.index_select(0, torch::tensor({2, 0}))));
  }
  // One row of a transposed (S,1,D) tensor: contiguous, though its batch stride is D, not S x D.
  const torch::Tensor one = torch::randn({7, 1, 3}).transpose(0, 1);
  REQUIRE(one.is_contiguous());
  CHECK(torch::equal(k::reorder_state(one, torch::tensor({0, 0, 0})), one.index_select(0, torch::tensor({0, 0, 0}))));
  CHECK(torch::equal(k::reorder_state(one.unsqueeze(2), torch::tensor({0, 0}), 2, 1),
                     one.unsqueeze(2).index_select(0, torch::tensor({0, 0}))));
  const torch::Tensor s = torch::zeros({3, 4, 5});
  CHECK_THROWS_WITH(k::reorder_state(s, torch::tensor({0, 3})), Catch::Contains("index 3 out of range for a batch of 3"));
  CHECK_THROWS_WITH(k::reorder_state(s, torch::tensor({-1})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(k::reorder_state(s, torch::tensor({0}), 2, 6), Catch::Contains("6 entries used of dimension 2"));
  CHECK_THROWS_WITH(k::reorder_state(s, torch::tensor({0}), 0, 1), Catch::Contains("of dimension 0"));
}
