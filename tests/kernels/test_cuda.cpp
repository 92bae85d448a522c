// The CUDA kernels against the same references (DESIGN.md invariant 3 on every
// device built for). Skipped cleanly without a GPU.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "helpers.h"
#include "kernels/conv1d.h"
#include "kernels/norm.h"
#include "kernels/reference.h"
#include "kernels/selective_scan.h"
#include "kernels/ssd.h"

namespace k = mambamt::kernels;
using mambamt::kernels::test::grads_of;
using mambamt::kernels::test::leaf;

namespace {

bool have_gpu() {
  if (torch::cuda::is_available()) return true;
  WARN("no CUDA device: CUDA kernel tests skipped");
  return false;
}

torch::Tensor on(const torch::Tensor& t, torch::Device dev) { return t.defined() ? leaf(t.to(dev)) : t; }

// Forward and all gradients of f on the GPU against the float64 reference on CPU.
template <typename Run, typename Ref>
void compare(const std::vector<torch::Tensor>& inputs, torch::ScalarType dtype, double tol, Run run, Ref ref) {
  std::vector<torch::Tensor> gi, ci;
  for (const auto& t : inputs) {
    gi.push_back(t.defined() ? on(t.to(t.is_floating_point() ? dtype : t.scalar_type()), torch::kCUDA) : t);
    ci.push_back(t.defined() ? leaf(t.to(torch::kDouble)) : t);
  }
  std::vector<torch::Tensor> go = run(gi), co = ref(ci);
  std::vector<torch::Tensor> w;
  for (size_t i = 0; i < go.size(); ++i) {
    MAMBAMT_CHECK_CLOSE(go[i].cpu(), co[i], tol, tol);
    w.push_back(torch::randn(co[i].sizes(), torch::kDouble));
  }
  std::vector<torch::Tensor> gw;
  for (auto& t : w) gw.push_back(t.to(torch::kCUDA));
  auto gg = grads_of(go, gw, gi), cg = grads_of(co, w, ci);
  for (size_t i = 0; i < gg.size(); ++i) {
    if (!gi[i].defined()) continue;
    INFO("gradient of input " << i);
    MAMBAMT_CHECK_CLOSE(gg[i].cpu(), cg[i], tol, tol);
  }
}

void check_ssd(torch::ScalarType dtype, double tol, int64_t chunk) {
  const int64_t b = 2, l = 45, h = 4, p = 8, g = 2, n = 16;
  auto d64 = torch::TensorOptions().dtype(torch::kDouble);
  std::vector<torch::Tensor> in = {torch::randn({b, l, h, p}, d64), torch::randn({b, l, h}, d64) * 0.7 - 0.5,
                                   torch::log(torch::rand({h}, d64) * 7 + 1), torch::randn({b, l, g, n}, d64),
                                   torch::randn({b, l, g, n}, d64), torch::randn({h}, d64),
                                   torch::randn({b, l, h, p}, d64), torch::randn({h}, d64) * 0.5,
                                   torch::randn({b, h, p, n}, d64)};
  auto mask = torch::ones({b, l}, torch::kBool);
  mask.index_put_({1, torch::indexing::Slice(0, 7)}, false);
  auto run = [&](std::vector<torch::Tensor> t, bool ref) {
    k::SsdScanOptions o;
    o.D = t[5], o.z = t[6], o.dt_bias = t[7], o.initial_state = t[8];
    o.mask = mask.to(t[0].device());
    o.return_final_state = true;
    o.chunk_size = chunk;
    auto r = ref ? k::reference::ssd_scan(t[0], t[1], t[2], t[3], t[4], o) : k::ssd_scan(t[0], t[1], t[2], t[3], t[4], o);
    return std::vector<torch::Tensor>{r.y, r.final_state};
  };
  compare(in, dtype, tol, [&](auto t) { return run(t, false); }, [&](auto t) { return run(t, true); });
}

}  // namespace

TEST_CASE("CUDA ssd_scan matches the reference", "[kernels][cuda]") {
  if (!have_gpu()) return;
  torch::manual_seed(41);
  for (int64_t chunk : {16, 64}) {
    INFO("chunk " << chunk);
    check_ssd(torch::kDouble, 1e-9, chunk);
    check_ssd(torch::kFloat, 2e-3, chunk);
  }
  // bfloat16: forward only, against float32 on the same device.
  auto x = torch::randn({2, 40, 4, 8}, torch::kCUDA), dt = torch::randn({2, 40, 4}, torch::kCUDA);
  auto A_log = torch::rand({4}, torch::kCUDA), B = torch::randn({2, 40, 1, 16}, torch::kCUDA);
  auto C = torch::randn({2, 40, 1, 16}, torch::kCUDA);
  auto y32 = k::ssd_scan(x, dt, A_log, B, C).y;
  auto y16 = k::ssd_scan(x.to(torch::kBFloat16), dt, A_log, B.to(torch::kBFloat16), C.to(torch::kBFloat16)).y;
  CHECK(y16.scalar_type() == torch::kBFloat16);
  MAMBAMT_CHECK_ALLCLOSE(y16.cpu(), y32.cpu(), 1e-2, 1e-2);
}

TEST_CASE("CUDA selective_scan matches the reference", "[kernels][cuda]") {
  if (!have_gpu()) return;
  torch::manual_seed(42);
  const int64_t b = 2, d = 6, l = 150, n = 40, g = 3;
  auto d64 = torch::TensorOptions().dtype(torch::kDouble);
  std::vector<torch::Tensor> in = {torch::randn({b, d, l}, d64), torch::randn({b, d, l}, d64) * 0.7 - 1,
                                   -torch::rand({d, n}, d64) * 4 - 0.2, torch::randn({b, g, n, l}, d64),
                                   torch::randn({b, g, n, l}, d64), torch::randn({d}, d64),
                                   torch::randn({b, d, l}, d64), torch::randn({d}, d64) * 0.3,
                                   torch::randn({b, d, n}, d64)};
  auto run = [&](std::vector<torch::Tensor> t, bool ref) {
    k::SelectiveScanOptions o;
    o.D = t[5], o.z = t[6], o.delta_bias = t[7], o.initial_state = t[8];
    o.delta_softplus = true;
    o.return_final_state = true;
    auto r = ref ? k::reference::selective_scan(t[0], t[1], t[2], t[3], t[4], o)
                 : k::selective_scan(t[0], t[1], t[2], t[3], t[4], o);
    return std::vector<torch::Tensor>{r.y, r.final_state};
  };
  for (auto [dtype, tol] : {std::pair{torch::kDouble, 1e-9}, {torch::kFloat, 2e-3}})
    compare(in, dtype, tol, [&](auto t) { return run(t, false); }, [&](auto t) { return run(t, true); });
}

TEST_CASE("CUDA causal_conv1d matches the reference", "[kernels][cuda]") {
  if (!have_gpu()) return;
  torch::manual_seed(43);
  for (int64_t w : {2, 3, 4}) {
    auto d64 = torch::TensorOptions().dtype(torch::kDouble);
    std::vector<torch::Tensor> in = {torch::randn({2, 5, 19}, d64), torch::randn({5, w}, d64),
                                     torch::randn({5}, d64), torch::randn({2, 5, w - 1}, d64)};
    auto run = [&](std::vector<torch::Tensor> t, bool ref) {
      k::CausalConv1dOptions o;
      o.bias = t[2], o.initial_state = t[3], o.silu = true, o.return_final_state = true;
      auto r = ref ? k::reference::causal_conv1d(t[0], t[1], o) : k::causal_conv1d(t[0], t[1], o);
      return std::vector<torch::Tensor>{r.y, r.final_state};
    };
    compare(in, torch::kDouble, 1e-10, [&](auto t) { return run(t, false); }, [&](auto t) { return run(t, true); });
  }
}

TEST_CASE("CUDA decode steps match the CPU steps", "[kernels][cuda]") {
  if (!have_gpu()) return;
  torch::manual_seed(44);
  const int64_t b = 3, h = 4, p = 8, g = 2, n = 16;
  auto x = torch::randn({b, h, p}), dt = torch::randn({b, h}), A_log = torch::rand({h});
  auto B = torch::randn({b, g, n}), C = torch::randn({b, g, n}), state = torch::randn({b, h, p, n});
  k::SsdStepOptions so;
  so.D = torch::randn({h});
  auto sc = state.clone(), sg = state.cuda();
  auto yc = k::ssd_step(sc, x, dt, A_log, B, C, so);
  k::SsdStepOptions sog = so;
  sog.D = so.D.cuda();
  auto yg = k::ssd_step(sg, x.cuda(), dt.cuda(), A_log.cuda(), B.cuda(), C.cuda(), sog);
  MAMBAMT_CHECK_CLOSE(yg.cpu(), yc, 1e-5, 1e-5);
  MAMBAMT_CHECK_CLOSE(sg.cpu(), sc, 1e-5, 1e-5);

  auto u = torch::randn({b, 6}), delta = torch::randn({b, 6}), A = -torch::rand({6, n});
  auto hs = torch::randn({b, 6, n});
  auto hc = hs.clone(), hg = hs.cuda();
  k::SelectiveScanStepOptions ss;
  ss.delta_softplus = true;
  auto y1 = k::selective_scan_step(hc, u, delta, A, B, C, ss);
  auto y2 = k::selective_scan_step(hg, u.cuda(), delta.cuda(), A.cuda(), B.cuda(), C.cuda(), ss);
  MAMBAMT_CHECK_CLOSE(y2.cpu(), y1, 1e-5, 1e-5);
  MAMBAMT_CHECK_CLOSE(hg.cpu(), hc, 1e-5, 1e-5);

  auto cs = torch::randn({b, 6, 3}), xw = torch::randn({b, 6}), wt = torch::randn({6, 4});
  auto cc = cs.clone(), cg = cs.cuda();
  auto c1 = k::causal_conv1d_step(cc, xw, wt, {}, true);
  auto c2 = k::causal_conv1d_step(cg, xw.cuda(), wt.cuda(), {}, true);
  MAMBAMT_CHECK_CLOSE(c2.cpu(), c1, 1e-5, 1e-5);
  MAMBAMT_CHECK_CLOSE(cg.cpu(), cc, 0.0, 0.0);
  {
    // x, z, B, C and dt as column ranges of one (batch, width) projection, as
    // a Mamba-2 decode step passes them: rows read in place.
    auto proj = torch::randn({b, 2 * h * p + 2 * g * n + h + 5}, torch::kCUDA);
    int64_t at = 5;
    auto take = [&](int64_t w) { auto t = proj.narrow(1, at, w); at += w; return t; };
    auto zr = take(h * p).view({b, h, p}), xr = take(h * p).view({b, h, p}), Br = take(g * n).view({b, g, n});
    auto Cr = take(g * n).view({b, g, n}), dtr = take(h);
    k::SsdStepOptions o1 = sog, o2 = sog;
    o1.z = zr, o2.z = zr.contiguous();
    auto s1 = state.cuda(), s2 = state.cuda();
    auto r1 = k::ssd_step(s1, xr, dtr, A_log.cuda(), Br, Cr, o1);
    auto r2 = k::ssd_step(s2, xr.contiguous(), dtr.contiguous(), A_log.cuda(), Br.contiguous(), Cr.contiguous(), o2);
    CHECK(torch::equal(r1, r2));
    CHECK(torch::equal(s1, s2));
    auto cx = torch::randn({b, 9}, torch::kCUDA).narrow(1, 2, 6), cw = wt.cuda();
    auto c3 = cs.cuda(), c4 = cs.cuda();
    CHECK(torch::equal(k::causal_conv1d_step(c3, cx, cw, {}, true),
                       k::causal_conv1d_step(c4, cx.contiguous(), cw, {}, true)));
    CHECK(torch::equal(c3, c4));
    auto sel = torch::randn({b, 3 * 6 + 2 * n + 1}, torch::kCUDA);
    auto su = sel.narrow(1, 1, 6), sd = sel.narrow(1, 7, 6), sz = sel.narrow(1, 13, 6);
    auto sB = sel.narrow(1, 19, n), sC = sel.narrow(1, 19 + n, n);
    k::SelectiveScanStepOptions q1 = ss, q2 = ss;
    q1.z = sz, q2.z = sz.contiguous();
    auto h1 = hs.cuda(), h2 = hs.cuda();
    CHECK(torch::equal(k::selective_scan_step(h1, su, sd, A.cuda(), sB, sC, q1),
                       k::selective_scan_step(h2, su.contiguous(), sd.contiguous(), A.cuda(), sB.contiguous(),
                                              sC.contiguous(), q2)));
    CHECK(torch::equal(h1, h2));
  }
}

// The CUDA RMSNorm against its reference on the CPU (kernels/norm.h):
// every dtype pair the models meet (a float32 weight with float32, bf16 or
// fp16 activations under autocast; weights in the activations' dtype), rows of
// one element to several blocks' strides, a non-contiguous x.
TEST_CASE("CUDA rms_norm matches the reference", "[kernels][cuda]") {
  if (!have_gpu()) return;
  torch::manual_seed(45);
  struct Case {
    torch::ScalarType x, w;
    double tol;
  };
  for (const Case c : {Case{torch::kFloat, torch::kFloat, 1e-5}, Case{torch::kDouble, torch::kDouble, 1e-12},
                       Case{torch::kBFloat16, torch::kFloat, 1e-2}, Case{torch::kBFloat16, torch::kBFloat16, 2e-2},
                       Case{torch::kHalf, torch::kFloat, 2e-3}, Case{torch::kHalf, torch::kHalf, 4e-3}})
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{16, 384}, std::vector<int64_t>{3, 5, 1000}, std::vector<int64_t>{1, 1}}) {
      INFO("x " << c.x << ", weight " << c.w << ", shape " << torch::IntArrayRef(shape));
      const torch::Tensor x = (torch::randn(shape) * 3).to(c.x), w = (torch::rand({shape.back()}) + 0.5).to(c.w);
      const torch::Tensor want = k::reference::rms_norm(x, w, 1e-5);
      const torch::Tensor got = k::rms_norm(x.cuda(), w.cuda(), 1e-5);
      CHECK(got.scalar_type() == want.scalar_type());
      CHECK(got.sizes() == want.sizes());
      MAMBAMT_CHECK_ALLCLOSE(got.cpu().to(torch::kDouble), want.to(torch::kDouble), c.tol, c.tol);
    }
  // A transposed x (not contiguous) gives the contiguous result.
  const torch::Tensor xt = torch::randn({64, 8}, torch::kCUDA).t(), w = torch::rand({64}, torch::kCUDA);
  CHECK(torch::equal(k::rms_norm(xt, w, 1e-6), k::rms_norm(xt.contiguous(), w, 1e-6)));
}
