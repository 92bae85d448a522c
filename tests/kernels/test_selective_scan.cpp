// selective_scan (Mamba-1) and its step against the plain-LibTorch reference.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <utility>

#include "helpers.h"
#include "kernels/reference.h"
#include "kernels/selective_scan.h"

namespace k = mambamt::kernels;
using mambamt::kernels::test::grads_of;
using mambamt::kernels::test::leaf;

namespace {

struct Shape {
  int64_t b, d, l, n, g;  // g = 0: B and C are (B,N,L)
};

struct Flags {
  bool D = true, z = true, bias = true, init = true, mask = false, softplus = true, final = true;
};

struct ScanInputs {
  torch::Tensor u, delta, A, B, C;
  k::SelectiveScanOptions o;
  ScanInputs(const Shape& s, const Flags& f, torch::ScalarType dtype) {
    auto d64 = torch::TensorOptions().dtype(torch::kDouble);
    u = torch::randn({s.b, s.d, s.l}, d64).to(dtype);
    delta = (f.softplus ? torch::randn({s.b, s.d, s.l}, d64) * 0.7 - 1.0
                        : torch::rand({s.b, s.d, s.l}, d64) * 0.3)
                .to(dtype);
    A = (-torch::rand({s.d, s.n}, d64) * 4 - 0.2).to(dtype);
    auto bc = s.g == 0 ? std::vector<int64_t>{s.b, s.n, s.l} : std::vector<int64_t>{s.b, s.g, s.n, s.l};
    B = torch::randn(bc, d64).to(dtype);
    C = torch::randn(bc, d64).to(dtype);
    if (f.D) o.D = torch::randn({s.d}, d64).to(dtype);
    if (f.z) o.z = torch::randn({s.b, s.d, s.l}, d64).to(dtype);
    if (f.bias) o.delta_bias = (torch::randn({s.d}, d64) * 0.3).to(dtype);
    if (f.init) o.initial_state = torch::randn({s.b, s.d, s.n}, d64).to(dtype);
    if (f.mask) {
      o.mask = torch::ones({s.b, s.l}, torch::kBool);
      for (int64_t i = 0; i < s.b; ++i) {
        const int64_t pad = (i * 3) % std::max<int64_t>(1, s.l);
        if (pad > 0) o.mask.index_put_({i, torch::indexing::Slice(0, pad)}, false);
      }
    }
    o.delta_softplus = f.softplus;
    o.return_final_state = f.final;
  }
  std::vector<torch::Tensor> leaves() {
    u = leaf(u), delta = leaf(delta), A = leaf(A), B = leaf(B), C = leaf(C);
    o.D = leaf(o.D), o.z = leaf(o.z), o.delta_bias = leaf(o.delta_bias), o.initial_state = leaf(o.initial_state);
    return {u, delta, A, B, C, o.D, o.z, o.delta_bias, o.initial_state};
  }
};

const char* kNames[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias", "initial_state"};

void check_against_reference(const Shape& s, const Flags& f, torch::ScalarType dtype, double tol) {
  ScanInputs a(s, f, dtype);
  ScanInputs r = a;
  auto ia = a.leaves();
  auto ir = r.leaves();
  for (auto& t : ir) t = t.defined() ? leaf(t.to(torch::kDouble)) : t;
  k::SelectiveScanOptions o64 = r.o;
  o64.D = ir[5], o64.z = ir[6], o64.delta_bias = ir[7], o64.initial_state = ir[8];
  auto ya = k::selective_scan(a.u, a.delta, a.A, a.B, a.C, a.o);
  auto yr = k::reference::selective_scan(ir[0], ir[1], ir[2], ir[3], ir[4], o64);
  MAMBAMT_CHECK_CLOSE(ya.y, yr.y, tol, tol);
  if (f.final) MAMBAMT_CHECK_CLOSE(ya.final_state, yr.final_state, tol, tol);
  auto wy = torch::randn(ya.y.sizes(), torch::kDouble);
  auto wf = f.final ? torch::randn(ya.final_state.sizes(), torch::kDouble) : torch::Tensor();
  auto ga = grads_of({ya.y, ya.final_state}, {wy, wf}, ia);
  auto gr = grads_of({yr.y, yr.final_state}, {wy, wf}, ir);
  for (size_t i = 0; i < ga.size(); ++i) {
    if (!ia[i].defined()) continue;
    INFO("gradient of " << kNames[i]);
    REQUIRE(ga[i].defined());
    MAMBAMT_CHECK_CLOSE(ga[i], gr[i], tol, tol);
  }
}

}  // namespace

TEST_CASE("selective_scan float64 matches the reference, forward and gradients", "[kernels]") {
  torch::manual_seed(21);
  const double tol = 1e-9;
  SECTION("shared B, C; all options") { check_against_reference({2, 5, 37, 4, 0}, Flags{}, torch::kDouble, tol); }
  SECTION("L = 1") { check_against_reference({2, 3, 1, 3, 0}, Flags{}, torch::kDouble, tol); }
  SECTION("groups, odd sizes, longer than a checkpoint interval") {
    check_against_reference({2, 6, 300, 5, 3}, Flags{}, torch::kDouble, tol);
  }
  SECTION("no optional inputs, delta as given") {
    Flags f;
    f.D = f.z = f.bias = f.init = f.final = f.softplus = false;
    check_against_reference({1, 4, 21, 3, 2}, f, torch::kDouble, tol);
  }
  SECTION("padding mask") {
    Flags f;
    f.mask = true;
    check_against_reference({3, 4, 19, 4, 0}, f, torch::kDouble, tol);
  }
}

TEST_CASE("selective_scan float32 within tolerance of the float64 reference", "[kernels]") {
  torch::manual_seed(22);
  check_against_reference({2, 8, 70, 16, 0}, Flags{}, torch::kFloat, 2e-4);
  check_against_reference({2, 6, 33, 7, 2}, Flags{}, torch::kFloat, 2e-4);
  // Wider states: 37 -> three vectors in one pass of the micro-kernels; 70 ->
  // two passes (4 + 1 vectors), over more than one checkpoint segment.
  check_against_reference({2, 3, 40, 37, 0}, Flags{}, torch::kFloat, 2e-4);
  check_against_reference({1, 4, 300, 70, 2}, Flags{}, torch::kFloat, 2e-4);
}

TEST_CASE("selective_scan_step run L times equals selective_scan", "[kernels]") {
  torch::manual_seed(23);
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    const double tol = dtype == torch::kDouble ? 1e-10 : 1e-4;
    // d_state 3 takes the step's plain loop in float, 32 the scan micro-kernel.
    for (auto [n, g] : {std::pair<int64_t, int64_t>{3, 0}, {3, 2}, {32, 0}, {32, 2}}) {
      INFO("d_state " << n << ", groups " << g);
      const Shape s{2, 4, 17, n, g};
      ScanInputs a(s, Flags{}, dtype);
      auto full = k::selective_scan(a.u, a.delta, a.A, a.B, a.C, a.o);
      torch::Tensor state = a.o.initial_state.to(dtype).clone();
      torch::Tensor ref_state = state.clone();
      std::vector<torch::Tensor> ys;
      for (int64_t t = 0; t < s.l; ++t) {
        k::SelectiveScanStepOptions so;
        so.D = a.o.D, so.z = a.o.z.select(2, t), so.delta_bias = a.o.delta_bias, so.delta_softplus = true;
        auto Bt = a.B.select(-1, t), Ct = a.C.select(-1, t);
        ys.push_back(k::selective_scan_step(state, a.u.select(2, t), a.delta.select(2, t), a.A, Bt, Ct, so));
        auto yr = k::reference::selective_scan_step(ref_state, a.u.select(2, t), a.delta.select(2, t), a.A,
                                                    Bt, Ct, so);
        MAMBAMT_CHECK_CLOSE(ys.back(), yr, tol, tol);
      }
      MAMBAMT_CHECK_CLOSE(torch::stack(ys, 2), full.y, tol, tol);
      MAMBAMT_CHECK_CLOSE(state, full.final_state, tol, tol);
    }
  }
}

TEST_CASE("selective_scan_step reads rows in place: column ranges give the contiguous results", "[kernels]") {
  // A Mamba-1 decode step passes z and B, C as column ranges of the in- and
  // x-projections' (batch, width) outputs: each row contiguous, rows apart.
  torch::manual_seed(25);
  const int64_t b = 3, d = 6;
  for (auto dtype : {torch::kDouble, torch::kFloat})
  for (auto [n, g] : {std::pair<int64_t, int64_t>{3, 0}, {32, 0}, {32, 2}}) {
    CAPTURE(dtype, n, g);
    const int64_t groups = std::max<int64_t>(g, 1);
    auto proj = torch::randn({b, 3 * d + 2 * groups * n + 5}, dtype);
    int64_t at = 5;
    auto take = [&](int64_t w) { auto t = proj.narrow(1, at, w); at += w; return t; };
    auto z = take(d), u = take(d), delta = take(d);
    auto B = g ? take(g * n).view({b, g, n}) : take(n), C = g ? take(g * n).view({b, g, n}) : take(n);
    REQUIRE_FALSE(B.is_contiguous());
    auto A = -torch::rand({d, n}, dtype), state = torch::randn({b, d, n}, dtype);
    k::SelectiveScanStepOptions so;
    so.D = torch::randn({d}, dtype), so.z = z, so.delta_bias = torch::randn({d}, dtype), so.delta_softplus = true;
    so.mask = torch::tensor({true, true, false});
    auto s1 = state.clone(), s2 = state.clone();
    auto y1 = k::selective_scan_step(s1, u, delta, A, B, C, so);
    k::SelectiveScanStepOptions sc = so;
    sc.z = z.contiguous();
    auto y2 = k::selective_scan_step(s2, u.contiguous(), delta.contiguous(), A, B.contiguous(), C.contiguous(), sc);
    CHECK(torch::equal(y1, y2));
    CHECK(torch::equal(s1, s2));
    CHECK_FALSE(torch::equal(s1, state));
  }
}

TEST_CASE("selective_scan: padding changes no real output", "[kernels]") {
  torch::manual_seed(24);
  const int64_t d = 3, l = 23, n = 4, pad = 6;
  Flags f;
  f.init = false;
  ScanInputs one({1, d, l, n, 0}, f, torch::kDouble);
  auto alone = k::selective_scan(one.u, one.delta, one.A, one.B, one.C, one.o);
  auto junk = [&](const torch::Tensor& t) {
    auto sz = t.sizes().vec();
    sz.back() = pad;
    return torch::cat({torch::randn(sz, t.options()), t}, -1);
  };
  k::SelectiveScanOptions o = one.o;
  o.z = junk(one.o.z);
  o.mask = torch::ones({1, l + pad}, torch::kBool);
  o.mask.index_put_({0, torch::indexing::Slice(0, pad)}, false);
  auto padded = k::selective_scan(junk(one.u), junk(one.delta), one.A, junk(one.B), junk(one.C), o);
  MAMBAMT_CHECK_CLOSE(padded.y.narrow(2, pad, l), alone.y, 1e-12, 1e-12);
  MAMBAMT_CHECK_CLOSE(padded.final_state, alone.final_state, 1e-12, 1e-12);
}
