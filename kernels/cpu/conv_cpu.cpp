// CPU causal depthwise conv1d: forward, backward and decode step. One
// (batch, channel) row at a time; W <= 4 taps, so the work is a few
// multiply-adds per element over a row padded in front by the initial state.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/common.h"
#include "kernels/cpu/cpu.h"

namespace mambamt::kernels::cpu {
namespace {

using detail::ConvBwdParams;
using detail::ConvParams;
using detail::ConvStepParams;

// Copies row (b,d) of x behind its W-1 initial values: xp[j] = x[j - (W-1)].
template <typename S>
void padded_row(const ConvParams& p, int64_t b, int64_t d, S* xp) {
  const int64_t W1 = p.width - 1;
  if (p.initial_state) {
    std::memcpy(xp, static_cast<const S*>(p.initial_state) + (b * p.dim + d) * W1, W1 * sizeof(S));
  } else {
    std::fill(xp, xp + W1, S(0));
  }
  const S* x = static_cast<const S*>(p.x) + b * p.x_bs + d * p.x_ds;
  if (p.x_ls == 1) {
    std::memcpy(xp + W1, x, p.seqlen * sizeof(S));
  } else {
    for (int64_t l = 0; l < p.seqlen; ++l) xp[W1 + l] = x[l * p.x_ls];
  }
}

// pre[l] = bias + sum_k w[k] xp[l + k]
template <typename S>
void conv_row(const S* xp, const S* w, S bias, int64_t W, int64_t L, S* pre) {
  for (int64_t l = 0; l < L; ++l) pre[l] = bias;
  for (int64_t k = 0; k < W; ++k) {
    const S wk = w[k];
    const S* src = xp + k;
    for (int64_t l = 0; l < L; ++l) pre[l] += wk * src[l];
  }
}

template <typename S>
void forward_impl(const ConvParams& p) {
  const Ops<S> ops;
  const int64_t W = p.width, W1 = W - 1, L = p.seqlen;
  at::parallel_for(0, p.batch * p.dim, 16, [&](int64_t begin, int64_t end) {
    std::vector<S> xp(L + W1), e(L);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / p.dim, d = i % p.dim;
      padded_row<S>(p, b, d, xp.data());
      const S* w = static_cast<const S*>(p.weight) + d * W;
      const S bias = p.bias ? static_cast<const S*>(p.bias)[d] : S(0);
      S* y = static_cast<S*>(p.y) + i * L;
      conv_row(xp.data(), w, bias, W, L, y);
      if (p.silu) {
        for (int64_t l = 0; l < L; ++l) e[l] = -y[l];
        ops.exp(e.data(), e.data(), L);
        for (int64_t l = 0; l < L; ++l) y[l] /= S(1) + e[l];
      }
      if (p.final_state) std::memcpy(static_cast<S*>(p.final_state) + i * W1, xp.data() + L, W1 * sizeof(S));
    }
  });
}

template <typename S>
void backward_impl(const ConvBwdParams& p) {
  const Ops<S> ops;
  const int64_t W = p.width, W1 = W - 1, L = p.seqlen;
  at::parallel_for(0, p.batch * p.dim, 16, [&](int64_t begin, int64_t end) {
    std::vector<S> xp(L + W1), g(L), e(L), dxp(L + W1);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / p.dim, d = i % p.dim;
      padded_row<S>(p, b, d, xp.data());
      const S* w = static_cast<const S*>(p.weight) + d * W;
      const S bias = p.bias ? static_cast<const S*>(p.bias)[d] : S(0);
      const S* dout = static_cast<const S*>(p.dout) + i * L;
      // g = dL/d(pre-activation).
      if (p.silu) {
        conv_row(xp.data(), w, bias, W, L, g.data());
        for (int64_t l = 0; l < L; ++l) e[l] = -g[l];
        ops.exp(e.data(), e.data(), L);
        for (int64_t l = 0; l < L; ++l) {
          const S sg = S(1) / (S(1) + e[l]);
          g[l] = dout[l] * sg * (S(1) + g[l] * (S(1) - sg));
        }
      } else {
        std::memcpy(g.data(), dout, L * sizeof(S));
      }
      // Gradient of the padded row: dxp[l + k] += w[k] g[l]; the final state is
      // xp's last W-1 entries.
      std::fill(dxp.begin(), dxp.end(), S(0));
      for (int64_t k = 0; k < W; ++k) {
        const S wk = w[k];
        S* dst = dxp.data() + k;
        for (int64_t l = 0; l < L; ++l) dst[l] += wk * g[l];
      }
      if (p.dfinal_state) {
        const S* df = static_cast<const S*>(p.dfinal_state) + i * W1;
        for (int64_t j = 0; j < W1; ++j) dxp[L + j] += df[j];
      }
      S* dw = static_cast<S*>(p.dweight_part) + i * W;
      for (int64_t k = 0; k < W; ++k) {
        S acc = 0;
        for (int64_t l = 0; l < L; ++l) acc += g[l] * xp[l + k];
        dw[k] = acc;
      }
      if (p.dbias_part) {
        S acc = 0;
        for (int64_t l = 0; l < L; ++l) acc += g[l];
        static_cast<S*>(p.dbias_part)[i] = acc;
      }
      std::memcpy(static_cast<S*>(p.dx) + i * L, dxp.data() + W1, L * sizeof(S));
      if (p.dinitial_state) std::memcpy(static_cast<S*>(p.dinitial_state) + i * W1, dxp.data(), W1 * sizeof(S));
    }
  });
}

// Channels [begin, end) of the flattened (batch, channel) rows, in chunks
// whose SiLU takes one vectorised exp (a scalar exp per channel was most of a
// decode step's conv time).
template <typename S, int W>
MAMBAMT_INLINE void step_rows(const ConvStepParams& p, const Ops<S>& ops, int64_t begin, int64_t end) {
  constexpr int W1 = W - 1;
  constexpr int64_t kChunk = 64;
  S v[kChunk], e[kChunk];
  const S* weight = static_cast<const S*>(p.weight);
  const S* bias = static_cast<const S*>(p.bias);
  for (int64_t i0 = begin; i0 < end; i0 += kChunk) {
    const int64_t n = std::min(kChunk, end - i0);
    int64_t b = i0 / p.dim, d = i0 % p.dim;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = i0 + j;
      S* st = static_cast<S*>(p.state) + i * W1;
      const S x = static_cast<const S*>(p.x)[b * p.x_bs + d];
      v[j] = conv_step_channel<S, W>(weight + d * W, st, x, bias ? bias[d] : S(0));
      if (++d == p.dim) d = 0, ++b;
    }
    S* y = static_cast<S*>(p.y) + i0;
    if (!p.silu) {
      std::copy(v, v + n, y);
      continue;
    }
    for (int64_t j = 0; j < n; ++j) e[j] = -v[j];
    ops.exp(e, e, n);
    for (int64_t j = 0; j < n; ++j) y[j] = v[j] / (S(1) + e[j]);
  }
}

template <typename S>
MAMBAMT_INLINE void step_rows_any_width(const ConvStepParams& p, const Ops<S>& ops, int64_t begin, int64_t end) {
  switch (p.width) {
    case 2: return step_rows<S, 2>(p, ops, begin, end);
    case 3: return step_rows<S, 3>(p, ops, begin, end);
    default: return step_rows<S, 4>(p, ops, begin, end);  // validated: 2 <= W <= 4
  }
}

MAMBAMT_RANGE_KERNEL(step_rows_dispatch, ConvStepParams, step_rows_any_width)

template <typename S>
void step_impl(const ConvStepParams& p) {
  const Ops<S> ops;
  at::parallel_for(0, p.batch * p.dim, 1024,
                   [&](int64_t begin, int64_t end) { step_rows_dispatch(p, ops, begin, end); });
}

}  // namespace

void conv1d_forward(const ConvParams& p) {
  if (p.dtype == detail::DType::kFloat64) forward_impl<double>(p);
  else forward_impl<float>(p);
}

void conv1d_backward(const ConvBwdParams& p) {
  if (p.dtype == detail::DType::kFloat64) backward_impl<double>(p);
  else backward_impl<float>(p);
}

void conv1d_step(const ConvStepParams& p) {
  if (p.dtype == detail::DType::kFloat64) step_impl<double>(p);
  else step_impl<float>(p);
}

}  // namespace mambamt::kernels::cpu
