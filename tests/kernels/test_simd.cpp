// The CPU micro-kernels (kernels/cpu/simd.h) of every instruction set this
// machine runs agree with the portable versions: the kernel tests above run
// with whichever set is picked, so each set is also checked here directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/cpu/simd_generic.h"

namespace cpu = mambamt::kernels::cpu;

namespace {

std::vector<const cpu::FloatKernels*> sets() {
  std::vector<const cpu::FloatKernels*> s = {&cpu::generic_kernels()};
  if (cpu::avx2_kernels()) s.push_back(cpu::avx2_kernels());
  if (cpu::avx512_kernels()) s.push_back(cpu::avx512_kernels());
  return s;
}

}  // namespace

TEST_CASE("simd gemm matches the portable product for every shape and stride", "[kernels]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  for (const auto* k : sets()) {
    INFO("kernel set " << k->name);
    for (int64_t M : {1, 5, 6, 13, 24, 31})
      for (int64_t K : {1, 7, 16, 80})
        for (int64_t W : {16, 32, 48, 64, 80, 112}) {
          const bool transposed = (M + K) % 2 == 0;  // read A as A^T through the strides
          std::vector<float> A(M * K), Bm(K * W), C0(M * W), C1, C2;
          for (auto& v : A) v = nd(rng);
          for (auto& v : Bm) v = nd(rng);
          for (auto& v : C0) v = nd(rng);
          const int64_t a_rs = transposed ? 1 : K, a_cs = transposed ? M : 1;
          for (float beta : {0.0f, 1.0f, 0.37f}) {
            C1 = C0, C2 = C0;
            k->gemm(M, K, W, A.data(), a_rs, a_cs, Bm.data(), W, C1.data(), W, beta);
            cpu::generic::gemm<float>(M, K, W, A.data(), a_rs, a_cs, Bm.data(), W, C2.data(), W, beta);
            float worst = 0;
            for (size_t i = 0; i < C1.size(); ++i) worst = std::max(worst, std::abs(C1[i] - C2[i]));
            INFO("M " << M << " K " << K << " W " << W << " beta " << beta);
            CHECK(worst < 1e-4f * (1 + K));
          }
        }
  }
}

TEST_CASE("simd exp and softplus match libm", "[kernels]") {
  std::vector<float> in;
  for (float v = -100; v < 100; v += 0.173f) in.push_back(v);
  for (float v : {-1e-8f, 0.0f, 1e-8f, 19.999f, 20.0f, 20.001f, -87.5f, 88.0f}) in.push_back(v);
  const int64_t n = static_cast<int64_t>(in.size());
  for (const auto* k : sets()) {
    INFO("kernel set " << k->name);
    std::vector<float> e(n), sp(n), sg(n);
    k->exp(in.data(), e.data(), n);
    k->softplus(in.data(), sp.data(), sg.data(), n);
    // Within the documented range; below it results may flush to 0.
    for (int64_t i = 0; i < n; ++i) {
      const double x = in[i];
      if (x < -87.0 || x > 88.0) continue;
      const double ref_e = std::exp(x);
      const double ref_sp = x > 20 ? x : std::log1p(std::exp(x));
      const double ref_sg = x > 20 ? 1.0 : 1.0 / (1.0 + std::exp(-x));
      INFO("x = " << x);
      CHECK(std::abs(e[i] - ref_e) <= 1e-6 * ref_e + 1e-37);
      CHECK(std::abs(sp[i] - ref_sp) <= 1e-6 * ref_sp + 1e-37);
      CHECK(std::abs(sg[i] - ref_sg) <= 1e-6 * ref_sg + 1e-37);
    }
  }
}

TEST_CASE("simd transpose matches the portable one", "[kernels]") {
  for (const auto* k : sets()) {
    INFO("kernel set " << k->name);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16, 16}, {16, 64}, {64, 16}, {32, 48}}) {
      const int64_t lds = cols + 16, ldd = rows + 32;
      std::vector<float> src(rows * lds), d1(cols * ldd, -1.f), d2(cols * ldd, -1.f);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
      k->transpose(rows, cols, src.data(), lds, d1.data(), ldd);
      cpu::generic::transpose<float>(rows, cols, src.data(), lds, d2.data(), ldd);
      CHECK(d1 == d2);
    }
  }
}

// The selective-scan micro-kernels with np states (one to four vectors held in
// registers, and wider states in several passes: 80 = 4 + 1 vectors, 128 =
// 4 + 4) against the recurrence and its gradient written out in double
// precision: scan runs it forward, scan_states recomputes the decays and
// states from a start state, scan_bwd walks back through them.
TEST_CASE("simd selective-scan kernels match the recurrence and its gradient in double precision",
          "[kernels]") {
  std::mt19937 rng(10);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> ud(0.01f, 0.5f);
  auto near = [](double got, double want) { return std::fabs(got - want) <= 1e-5 * (1 + std::fabs(want)); };
  for (const auto* k : sets()) {
    INFO("kernel set " << k->name);
    for (int64_t np : {16, 48, 80, 128})
      for (int64_t len : {1, 7, 64}) {
        INFO("np " << np << " len " << len);
        std::vector<float> dl(len), u(len), dy(len), A(np), B(len * np), C(len * np), h0(np), dh(np), dA(np);
        std::vector<float> dB(len * np), dC(len * np);
        for (auto& v : dl) v = ud(rng);
        for (auto& v : A) v = -1.0f - 8.0f * ud(rng);
        for (auto* vec : {&u, &dy, &B, &C, &h0, &dh, &dA, &dB, &dC})
          for (auto& v : *vec) v = nd(rng);
        const float D = 0.3f;
        // Double: decays, states and outputs forward, then the gradient backward.
        std::vector<double> a(len * np), H((len + 1) * np), y(len);
        for (int64_t n = 0; n < np; ++n) H[n] = h0[n];
        for (int64_t t = 0; t < len; ++t) {
          y[t] = double(D) * u[t];
          for (int64_t n = 0; n < np; ++n) {
            a[t * np + n] = std::exp(double(dl[t]) * A[n]);
            H[(t + 1) * np + n] = a[t * np + n] * H[t * np + n] + double(dl[t]) * u[t] * B[t * np + n];
            y[t] += H[(t + 1) * np + n] * C[t * np + n];
          }
        }
        std::vector<double> rdh(dh.begin(), dh.end()), rdA(dA.begin(), dA.end()), rdB(dB.begin(), dB.end()),
            rdC(dC.begin(), dC.end()), rsB(len), rg(len);
        for (int64_t t = len - 1; t >= 0; --t) {
          double sa = 0, sb = 0;
          for (int64_t n = 0; n < np; ++n) {
            const double dhn = rdh[n] + double(dy[t]) * C[t * np + n];
            rdC[t * np + n] += double(dy[t]) * H[(t + 1) * np + n];
            rdB[t * np + n] += double(dl[t]) * u[t] * dhn;
            const double q = dhn * H[t * np + n] * a[t * np + n];
            rdA[n] += double(dl[t]) * q;
            sa += double(A[n]) * q;
            sb += double(B[t * np + n]) * dhn;
            rdh[n] = dhn * a[t * np + n];
          }
          rsB[t] = sb;
          rg[t] = sa + double(u[t]) * sb;
        }
        std::vector<float> h = h0, yf(len);
        k->scan(len, np, dl.data(), u.data(), A.data(), B.data(), C.data(), D, h.data(), yf.data());
        for (int64_t t = 0; t < len; ++t) CHECK(near(yf[t], y[t]));
        for (int64_t n = 0; n < np; ++n) CHECK(near(h[n], H[len * np + n]));
        std::vector<float> af(len * np), Hf((len + 1) * np), sB(len), g(len);
        std::copy(h0.begin(), h0.end(), Hf.begin());
        k->scan_states(len, np, dl.data(), u.data(), A.data(), B.data(), af.data(), Hf.data());
        for (int64_t i = 0; i < len * np; ++i) CHECK(near(af[i], a[i]));
        for (int64_t i = 0; i < (len + 1) * np; ++i) CHECK(near(Hf[i], H[i]));
        k->scan_bwd(len, np, dl.data(), u.data(), dy.data(), A.data(), af.data(), B.data(), C.data(), Hf.data(),
                    dB.data(), dC.data(), dh.data(), dA.data(), sB.data(), g.data());
        for (int64_t i = 0; i < len * np; ++i) CHECK(near(dB[i], rdB[i]));
        for (int64_t i = 0; i < len * np; ++i) CHECK(near(dC[i], rdC[i]));
        for (int64_t n = 0; n < np; ++n) CHECK(near(dh[n], rdh[n]));
        for (int64_t n = 0; n < np; ++n) CHECK(near(dA[n], rdA[n]));
        for (int64_t t = 0; t < len; ++t) CHECK(near(sB[t], rsB[t]));
        for (int64_t t = 0; t < len; ++t) CHECK(near(g[t], rg[t]));
      }
  }
}

// One position of the SSD recurrence for a head's channels, with state sizes
// below one vector, of whole vectors (one, two, three) and with a masked or
// scalar tail, against the recurrence in double precision.
TEST_CASE("simd SSD decode update matches the recurrence in double precision", "[kernels]") {
  std::mt19937 rng(8);
  std::normal_distribution<double> nd;
  for (const auto* k : sets()) {
    INFO("kernel set " << k->name);
    for (int64_t np : {1, 7, 8, 16, 20, 32, 48, 64, 77})
      for (int64_t P : {1, 3, 64}) {
        std::vector<double> x(P), B(np), C(np), h(P * np), yd(P);
        for (auto& v : x) v = nd(rng);
        for (auto& v : B) v = nd(rng);
        for (auto& v : C) v = nd(rng);
        for (auto& v : h) v = nd(rng);
        const double decay = 0.83, dt = 0.41, D = -0.7;
        std::vector<float> xf(x.begin(), x.end()), Bf(B.begin(), B.end()), Cf(C.begin(), C.end());
        std::vector<float> hf(h.begin(), h.end()), yf(P, 0.0f);
        std::vector<double> hd = h;
        cpu::generic::ssd_update<double>(P, np, decay, dt, D, x.data(), B.data(), C.data(), hd.data(), yd.data());
        k->ssd_update(P, np, static_cast<float>(decay), static_cast<float>(dt), static_cast<float>(D), xf.data(),
                      Bf.data(), Cf.data(), hf.data(), yf.data());
        INFO("states " << np << ", channels " << P);
        double herr = 0, yerr = 0, hscale = 0, yscale = 0;
        for (int64_t i = 0; i < P * np; ++i) {
          herr = std::max(herr, std::abs(hf[i] - hd[i]));
          hscale = std::max(hscale, std::abs(hd[i]));
        }
        for (int64_t p = 0; p < P; ++p) {
          yerr = std::max(yerr, std::abs(yf[p] - yd[p]));
          yscale = std::max(yscale, std::abs(yd[p]));
        }
        CHECK(herr <= 1e-6 * hscale);
        CHECK(yerr <= 1e-5 * std::max(1.0, yscale));
        // The reference itself, by hand for the first channel.
        CHECK(hd[0] == Approx(decay * h[0] + dt * x[0] * B[0]));
        double y0 = D * x[0];
        for (int64_t i = 0; i < np; ++i) y0 += C[i] * hd[i];
        CHECK(yd[0] == Approx(y0));
      }
  }
}
