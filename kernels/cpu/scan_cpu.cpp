// CPU selective scan (Mamba-1): forward, backward and decode step.
//
// The state of a channel is N numbers with N decays of their own, so unlike
// SSD there is no matrix form to exploit: the work is the recurrence itself,
// dominated by one exp per (channel, position, state). It runs one channel at a
// time, vectorised over the states: B and C are transposed once per (batch,
// group) to (L, Np) rows, and the recurrence, forward and backward, is a
// micro-kernel (cpu/simd.h: scan, scan_states, scan_bwd) that keeps up to 64
// (AVX-512) or 32 (AVX2) float states in registers across positions with the
// exps computed in place (float64 takes the portable versions,
// cpu/simd_generic.h). The backward pass recomputes the states of each
// kScanCheckpointLen segment from checkpoints saved by the forward pass.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/cpu.h"

namespace mambamt::kernels::cpu {
namespace {

using detail::ScanBwdParams;
using detail::ScanParams;
using detail::ScanStepParams;

constexpr int64_t Tb = 64;  // positions per exp block
constexpr int64_t kSeg = detail::kScanCheckpointLen;
static_assert(kSeg % Tb == 0, "checkpoints must fall on block starts");

struct Dims {
  int64_t Bn, D, L, N, G, dpg, Np, nck;
  explicit Dims(const ScanParams& p)
      : Bn(p.batch), D(p.dim), L(p.seqlen), N(p.dstate), G(p.ngroups), dpg(p.dim / p.ngroups),
        Np(pad_to_vector(p.dstate)), nck((p.seqlen + kSeg - 1) / kSeg) {}
};

template <typename S>
struct Rows {
  const ScanParams& p;
  const S* u(int64_t b, int64_t d) const { return static_cast<const S*>(p.u) + b * p.u_bs + d * p.u_ds; }
  const S* delta(int64_t b, int64_t d) const {
    return static_cast<const S*>(p.delta) + b * p.delta_bs + d * p.delta_ds;
  }
  const S* z(int64_t b, int64_t d) const { return static_cast<const S*>(p.z) + b * p.z_bs + d * p.z_ds; }
};

// B and C of every (batch, group) as (L, Np) rows, padding zero: (B,G,L,Np).
template <typename S>
void transpose_bc(const ScanParams& p, const Dims& d, std::vector<S>& Bt, std::vector<S>& Ct) {
  Bt.assign(d.Bn * d.G * d.L * d.Np, S(0));
  Ct.assign(Bt.size(), S(0));
  at::parallel_for(0, d.Bn * d.G, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) {
      const int64_t b = bg / d.G, g = bg % d.G;
      const S* B = static_cast<const S*>(p.B) + b * p.B_bs + g * p.B_gs;
      const S* C = static_cast<const S*>(p.C) + b * p.C_bs + g * p.C_gs;
      S* bt = Bt.data() + bg * d.L * d.Np;
      S* ct = Ct.data() + bg * d.L * d.Np;
      for (int64_t n = 0; n < d.N; ++n)
        for (int64_t l = 0; l < d.L; ++l) {
          bt[l * d.Np + n] = B[n * p.B_ns + l];
          ct[l * d.Np + n] = C[n * p.C_ns + l];
        }
    }
  });
}

// delta_t = softplus(delta + bias) (or as given), 0 at padding, and its
// derivative, for positions [t0, t0+len) of one channel.
template <typename S>
MAMBAMT_INLINE void effective_delta(const ScanParams& p, const Ops<S>& ops, const S* delta, S bias,
                                    int64_t b, int64_t t0, int64_t len, S* dl, S* sig) {
  for (int64_t t = 0; t < len; ++t) dl[t] = delta[t0 + t] + bias;
  if (p.delta_softplus) ops.softplus(dl, dl, sig, len);
  else std::fill(sig, sig + len, S(1));
  if (p.mask)
    for (int64_t t = 0; t < len; ++t)
      if (!p.mask[b * p.seqlen + t0 + t]) dl[t] = 0, sig[t] = 0;
}

// ----------------------------------------------------------------- forward

template <typename S>
struct FwdWork {
  std::vector<S> h, Ad, dl, sig, yv, ez;
  explicit FwdWork(const Dims& d) : h(d.Np), Ad(d.Np), dl(Tb), sig(Tb), yv(Tb), ez(Tb) {}
};

template <typename S>
MAMBAMT_INLINE void forward_channel(const ScanParams& p, const Dims& d, const Ops<S>& ops,
                                    const S* Bt, const S* Ct, int64_t b, int64_t ch, FwdWork<S>& w) {
  const Rows<S> rows{p};
  const int64_t g = ch / d.dpg, Np = d.Np;
  const S* u = rows.u(b, ch);
  const S* delta = rows.delta(b, ch);
  const S* bt = Bt + (b * d.G + g) * d.L * Np;
  const S* ct = Ct + (b * d.G + g) * d.L * Np;
  const S bias = p.delta_bias ? static_cast<const S*>(p.delta_bias)[ch] : S(0);
  const S Dd = p.D ? static_cast<const S*>(p.D)[ch] : S(0);
  S* h = w.h.data();
  S* Ad = w.Ad.data();
  std::fill(w.h.begin(), w.h.end(), S(0));
  std::fill(w.Ad.begin(), w.Ad.end(), S(0));
  for (int64_t n = 0; n < d.N; ++n) Ad[n] = static_cast<const S*>(p.A)[ch * d.N + n];
  if (p.initial_state)
    std::memcpy(h, static_cast<const S*>(p.initial_state) + (b * d.D + ch) * d.N, d.N * sizeof(S));
  S* y = static_cast<S*>(p.y) + (b * d.D + ch) * d.L;
  S* ypre = p.y_pregate ? static_cast<S*>(p.y_pregate) + (b * d.D + ch) * d.L : nullptr;
  for (int64_t t0 = 0; t0 < d.L; t0 += Tb) {
    const int64_t len = std::min(Tb, d.L - t0);
    if (p.checkpoints && t0 % kSeg == 0)
      std::memcpy(static_cast<S*>(p.checkpoints) + ((b * d.D + ch) * d.nck + t0 / kSeg) * d.N, h,
                  d.N * sizeof(S));
    effective_delta(p, ops, delta, bias, b, t0, len, w.dl.data(), w.sig.data());
    ops.scan(len, Np, w.dl.data(), u + t0, Ad, bt + t0 * Np, ct + t0 * Np, Dd, h, w.yv.data());
    for (int64_t t = 0; t < len; ++t)
      if (p.mask && !p.mask[b * d.L + t0 + t]) w.yv[t] = 0;
    if (!p.z) {
      std::memcpy(y + t0, w.yv.data(), len * sizeof(S));
      continue;
    }
    if (ypre) std::memcpy(ypre + t0, w.yv.data(), len * sizeof(S));
    const S* z = rows.z(b, ch) + t0;
    for (int64_t t = 0; t < len; ++t) w.ez[t] = -z[t];
    ops.exp(w.ez.data(), w.ez.data(), len);
    for (int64_t t = 0; t < len; ++t) y[t0 + t] = w.yv[t] * z[t] / (S(1) + w.ez[t]);
  }
  if (p.final_state)
    std::memcpy(static_cast<S*>(p.final_state) + (b * d.D + ch) * d.N, h, d.N * sizeof(S));
}

#define MAMBAMT_SCAN_FWD_ARGS                                                               \
  const ScanParams &p, const Dims &d, const Ops<float> &ops, const float *Bt, const float *Ct, \
      int64_t b, int64_t ch, FwdWork<float> &w
void forward_channel_base(MAMBAMT_SCAN_FWD_ARGS) { forward_channel<float>(p, d, ops, Bt, Ct, b, ch, w); }
#ifdef MAMBAMT_ISA_VARIANTS
MAMBAMT_TARGET_AVX512 void forward_channel_avx512(MAMBAMT_SCAN_FWD_ARGS) {
  forward_channel<float>(p, d, ops, Bt, Ct, b, ch, w);
}
MAMBAMT_TARGET_AVX2 void forward_channel_avx2(MAMBAMT_SCAN_FWD_ARGS) {
  forward_channel<float>(p, d, ops, Bt, Ct, b, ch, w);
}
#endif
void forward_channel_any(MAMBAMT_SCAN_FWD_ARGS) {
#ifdef MAMBAMT_ISA_VARIANTS
  if (isa_level() == 2) return forward_channel_avx512(p, d, ops, Bt, Ct, b, ch, w);
  if (isa_level() == 1) return forward_channel_avx2(p, d, ops, Bt, Ct, b, ch, w);
#endif
  forward_channel_base(p, d, ops, Bt, Ct, b, ch, w);
}
void forward_channel_any(const ScanParams& p, const Dims& d, const Ops<double>& ops, const double* Bt,
                         const double* Ct, int64_t b, int64_t ch, FwdWork<double>& w) {
  forward_channel<double>(p, d, ops, Bt, Ct, b, ch, w);
}

template <typename S>
void forward_impl(const ScanParams& p) {
  const Dims d(p);
  const Ops<S> ops;
  std::vector<S> Bt, Ct;
  transpose_bc<S>(p, d, Bt, Ct);
  at::parallel_for(0, d.Bn * d.D, 16, [&](int64_t begin, int64_t end) {
    FwdWork<S> w(d);
    for (int64_t i = begin; i < end; ++i) forward_channel_any(p, d, ops, Bt.data(), Ct.data(), i / d.D, i % d.D, w);
  });
}

// ---------------------------------------------------------------- backward
//
// With a_t[n] = exp(delta_t A[n]) and h_t = a_t h_{t-1} + delta_t u_t B_t,
// y_t = C_t.h_t + D u_t, walking t backwards with dh = dL/dh_t:
//   dh += dy_t C_t;   dC_t += dy_t h_t;   dB_t += dh delta_t u_t
//   q = dh * h_{t-1} * a_t;   dA += q delta_t;   ddelta_t = A.q + u_t B_t.dh
//   du_t = D dy_t + delta_t B_t.dh;   dh *= a_t   (gradient of h_{t-1})

template <typename S>
struct BwdWork {
  std::vector<S> dh, Ad, dAp, H, dA, dl, sig, dy, gz, sB, g;
  explicit BwdWork(const Dims& d)
      : dh(d.Np), Ad(d.Np), dAp(d.Np), H((kSeg + 1) * d.Np), dA(kSeg * d.Np), dl(kSeg), sig(kSeg),
        dy(kSeg), gz(kSeg), sB(kSeg), g(kSeg) {}
};

// One channel's backward pass. dBt, dCt: the task's (L, Np) accumulators of
// the channel's group.
template <typename S>
MAMBAMT_INLINE void backward_channel(const ScanBwdParams& p, const Dims& d, const Ops<S>& ops,
                                     const S* Bt, const S* Ct, int64_t b, int64_t ch, S* dBt,
                                     S* dCt, BwdWork<S>& w) {
  const Rows<S> rows{p};
  const int64_t g = ch / d.dpg, Np = d.Np;
  const S* u = rows.u(b, ch);
  const S* delta = rows.delta(b, ch);
  const S* bt = Bt + (b * d.G + g) * d.L * Np;
  const S* ct = Ct + (b * d.G + g) * d.L * Np;
  const S bias = p.delta_bias ? static_cast<const S*>(p.delta_bias)[ch] : S(0);
  const S Dd = p.D ? static_cast<const S*>(p.D)[ch] : S(0);
  const int64_t row = (b * d.D + ch) * d.L;
  const S* dout = static_cast<const S*>(p.dout) + row;
  S* du = static_cast<S*>(p.du) + row;
  S* ddelta = static_cast<S*>(p.ddelta) + row;
  S* dh = w.dh.data();
  S* Ad = w.Ad.data();
  S* dAp = w.dAp.data();
  std::fill(w.dh.begin(), w.dh.end(), S(0));
  std::fill(w.Ad.begin(), w.Ad.end(), S(0));
  std::fill(w.dAp.begin(), w.dAp.end(), S(0));
  for (int64_t n = 0; n < d.N; ++n) Ad[n] = static_cast<const S*>(p.A)[ch * d.N + n];
  if (p.dfinal_state)
    std::memcpy(dh, static_cast<const S*>(p.dfinal_state) + (b * d.D + ch) * d.N, d.N * sizeof(S));
  S dD = 0, dbias = 0;
  for (int64_t seg = d.nck - 1; seg >= 0; --seg) {
    const int64_t s0 = seg * kSeg, len = std::min(kSeg, d.L - s0);
    // States h_{s0-1} .. h_{s0+len-1} as H rows 0..len.
    S* H = w.H.data();
    std::fill(H, H + Np, S(0));
    std::memcpy(H, static_cast<const S*>(p.checkpoints) + ((b * d.D + ch) * d.nck + seg) * d.N,
                d.N * sizeof(S));
    effective_delta(p, ops, delta, bias, b, s0, len, w.dl.data(), w.sig.data());
    ops.scan_states(len, Np, w.dl.data(), u + s0, Ad, bt + s0 * Np, w.dA.data(), H);
    // Gradient of y before the gate.
    for (int64_t t = 0; t < len; ++t) w.dy[t] = dout[s0 + t];
    if (p.z) {
      const S* z = rows.z(b, ch) + s0;
      const S* ypre = static_cast<const S*>(p.y_pregate) + row + s0;
      S* dz = p.dz ? static_cast<S*>(p.dz) + row + s0 : nullptr;
      for (int64_t t = 0; t < len; ++t) w.gz[t] = -z[t];
      ops.exp(w.gz.data(), w.gz.data(), len);
      for (int64_t t = 0; t < len; ++t) {
        const S sg = S(1) / (S(1) + w.gz[t]);
        if (dz) dz[t] = w.dy[t] * ypre[t] * sg * (S(1) + z[t] * (S(1) - sg));
        w.dy[t] *= z[t] * sg;
      }
    }
    if (p.mask)
      for (int64_t t = 0; t < len; ++t)
        if (!p.mask[b * d.L + s0 + t]) w.dy[t] = 0;
    ops.scan_bwd(len, Np, w.dl.data(), u + s0, w.dy.data(), Ad, w.dA.data(), bt + s0 * Np, ct + s0 * Np, H,
                 dBt + s0 * Np, dCt + s0 * Np, dh, dAp, w.sB.data(), w.g.data());
    for (int64_t t = 0; t < len; ++t) {
      const int64_t l = s0 + t;
      dD += w.dy[t] * u[l];
      du[l] = Dd * w.dy[t] + w.dl[t] * w.sB[t];
      const S gd = w.g[t] * w.sig[t];
      ddelta[l] = gd;
      dbias += gd;
    }
  }
  if (p.dinitial_state)
    std::memcpy(static_cast<S*>(p.dinitial_state) + (b * d.D + ch) * d.N, dh, d.N * sizeof(S));
  std::memcpy(static_cast<S*>(p.dA_part) + (b * d.D + ch) * d.N, dAp, d.N * sizeof(S));
  if (p.dD_part) static_cast<S*>(p.dD_part)[b * d.D + ch] = dD;
  if (p.ddelta_bias_part) static_cast<S*>(p.ddelta_bias_part)[b * d.D + ch] = dbias;
}

#define MAMBAMT_SCAN_BWD_ARGS                                                                  \
  const ScanBwdParams &p, const Dims &d, const Ops<float> &ops, const float *Bt, const float *Ct, \
      int64_t b, int64_t ch, float *dBt, float *dCt, BwdWork<float> &w
#define MAMBAMT_SCAN_BWD_CALL p, d, ops, Bt, Ct, b, ch, dBt, dCt, w
void backward_channel_base(MAMBAMT_SCAN_BWD_ARGS) { backward_channel<float>(MAMBAMT_SCAN_BWD_CALL); }
#ifdef MAMBAMT_ISA_VARIANTS
MAMBAMT_TARGET_AVX512 void backward_channel_avx512(MAMBAMT_SCAN_BWD_ARGS) {
  backward_channel<float>(MAMBAMT_SCAN_BWD_CALL);
}
MAMBAMT_TARGET_AVX2 void backward_channel_avx2(MAMBAMT_SCAN_BWD_ARGS) {
  backward_channel<float>(MAMBAMT_SCAN_BWD_CALL);
}
#endif
void backward_channel_any(MAMBAMT_SCAN_BWD_ARGS) {
#ifdef MAMBAMT_ISA_VARIANTS
  if (isa_level() == 2) return backward_channel_avx512(MAMBAMT_SCAN_BWD_CALL);
  if (isa_level() == 1) return backward_channel_avx2(MAMBAMT_SCAN_BWD_CALL);
#endif
  backward_channel_base(MAMBAMT_SCAN_BWD_CALL);
}
void backward_channel_any(const ScanBwdParams& p, const Dims& d, const Ops<double>& ops,
                          const double* Bt, const double* Ct, int64_t b, int64_t ch, double* dBt,
                          double* dCt, BwdWork<double>& w) {
  backward_channel<double>(MAMBAMT_SCAN_BWD_CALL);
}

template <typename S>
void backward_impl(const ScanBwdParams& p) {
  const Dims d(p);
  const Ops<S> ops;
  std::vector<S> Bt, Ct;
  transpose_bc<S>(p, d, Bt, Ct);
  // Tasks: (batch, group, slice of the group's channels); each sums the dB, dC
  // of its channels in its own (L, Np) buffers, added into the output at the end.
  const int64_t threads = at::get_num_threads(), pairs = d.Bn * d.G;
  const int64_t splits = std::min<int64_t>(d.dpg, std::max<int64_t>(1, (4 * threads + pairs - 1) / pairs));
  std::vector<S> acc(pairs * splits * 2 * d.L * d.Np, S(0));
  at::parallel_for(0, pairs * splits, 1, [&](int64_t begin, int64_t end) {
    BwdWork<S> w(d);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bg = task / splits, sp = task % splits, b = bg / d.G, g = bg % d.G;
      S* dBt = acc.data() + task * 2 * d.L * d.Np;
      S* dCt = dBt + d.L * d.Np;
      const int64_t c0 = g * d.dpg + sp * d.dpg / splits, c1 = g * d.dpg + (sp + 1) * d.dpg / splits;
      for (int64_t ch = c0; ch < c1; ++ch) backward_channel_any(p, d, ops, Bt.data(), Ct.data(), b, ch, dBt, dCt, w);
    }
  });
  // (L, Np) sums -> dB, dC (B,G,N,L).
  at::parallel_for(0, pairs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bg = begin; bg < end; ++bg) {
      S* dB = static_cast<S*>(p.dB) + bg * d.N * d.L;
      S* dC = static_cast<S*>(p.dC) + bg * d.N * d.L;
      for (int64_t sp = 0; sp < splits; ++sp) {
        const S* a = acc.data() + (bg * splits + sp) * 2 * d.L * d.Np;
        const S* c = a + d.L * d.Np;
        for (int64_t n = 0; n < d.N; ++n)
          for (int64_t l = 0; l < d.L; ++l) {
            dB[n * d.L + l] += a[l * d.Np + n];
            dC[n * d.L + l] += c[l * d.Np + n];
          }
      }
    }
  });
}

// ------------------------------------------------------------- decode step

// One channel's step, any state size: h = exp(dl A) h + dl u B; C.h + D u.
template <typename S>
S step_channel(S dl, S u, const S* A, const S* Bv, const S* Cv, S Dd, S* h, int64_t N) {
  S acc = 0;
  for (int64_t n = 0; n < N; ++n) {
    h[n] = std::exp(dl * A[n]) * h[n] + dl * u * Bv[n];
    acc += h[n] * Cv[n];
  }
  return acc + Dd * u;
}

template <typename S>
void step_impl(const ScanStepParams& p) {
  const Ops<S> ops;
  const int64_t D = p.dim, N = p.dstate, dpg = p.dim / p.ngroups;
  at::parallel_for(0, p.batch * D, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / D, ch = i % D, g = ch / dpg;
      S* y = static_cast<S*>(p.y) + i;
      if (p.mask && !p.mask[b]) {
        *y = 0;
        continue;
      }
      S dl = static_cast<const S*>(p.delta)[b * p.delta_bs + ch] +
             (p.delta_bias ? static_cast<const S*>(p.delta_bias)[ch] : S(0));
      if (p.delta_softplus && dl <= S(20)) dl = std::log1p(std::exp(dl));
      const S u = static_cast<const S*>(p.u)[b * p.u_bs + ch];
      const S* A = static_cast<const S*>(p.A) + ch * N;
      const S* Bv = static_cast<const S*>(p.B) + b * p.B_bs + g * N;
      const S* Cv = static_cast<const S*>(p.C) + b * p.C_bs + g * N;
      S* h = static_cast<S*>(p.state) + i * N;
      const S Dd = p.D ? static_cast<const S*>(p.D)[ch] : S(0);
      S v;
      if (N % kPadFloats == 0)  // the state rows are whole vectors: one position of the scan
        ops.scan(1, N, &dl, &u, A, Bv, Cv, Dd, h, &v);
      else
        v = step_channel(dl, u, A, Bv, Cv, Dd, h, N);
      if (p.z) {
        const S zv = static_cast<const S*>(p.z)[b * p.z_bs + ch];
        v *= zv / (S(1) + std::exp(-zv));
      }
      *y = v;
    }
  });
}

}  // namespace

void selective_scan_forward(const ScanParams& p) {
  if (p.dtype == detail::DType::kFloat64) forward_impl<double>(p);
  else forward_impl<float>(p);
}

void selective_scan_backward(const ScanBwdParams& p) {
  if (p.dtype == detail::DType::kFloat64) backward_impl<double>(p);
  else backward_impl<float>(p);
}

void selective_scan_step(const ScanStepParams& p) {
  if (p.dtype == detail::DType::kFloat64) step_impl<double>(p);
  else step_impl<float>(p);
}

}  // namespace mambamt::kernels::cpu
