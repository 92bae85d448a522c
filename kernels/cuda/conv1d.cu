// CUDA causal depthwise conv1d: forward, backward and decode step. One thread
// per output element (W <= 4 taps); the weight and bias gradients are
// per-(batch, channel) partial sums, one thread each. Checked against the
// float64 reference on an NVIDIA H200 (test_kernels "[cuda]"); not tuned.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace mambamt::kernels::cuda {
namespace {

using detail::ConvBwdParams;
using detail::ConvParams;
using detail::ConvStepParams;

constexpr int kThreads = 256;

#define GRID_STRIDE(i, n) \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n); i += int64_t(gridDim.x) * blockDim.x)

// x at position l of row (b,d), reaching into the initial state for l < 0.
template <typename T, typename A>
__device__ __forceinline__ A xat(const ConvParams& p, int64_t b, int64_t d, int64_t l) {
  const int64_t W1 = p.width - 1;
  if (l >= 0) return to_acc<A>(static_cast<const T*>(p.x)[b * p.x_bs + d * p.x_ds + l * p.x_ls]);
  if (!p.initial_state) return A(0);
  return to_acc<A>(static_cast<const T*>(p.initial_state)[(b * p.dim + d) * W1 + W1 + l]);
}

template <typename T, typename A>
__device__ __forceinline__ A pre_at(const ConvParams& p, int64_t b, int64_t d, int64_t l) {
  const A* w = static_cast<const A*>(p.weight) + d * p.width;
  A v = p.bias ? static_cast<const A*>(p.bias)[d] : A(0);
  for (int64_t k = 0; k < p.width; ++k) v += w[k] * xat<T, A>(p, b, d, l - (p.width - 1) + k);
  return v;
}

template <typename T, typename A>
__global__ void conv_fwd(ConvParams p) {
  const int64_t W1 = p.width - 1;
  GRID_STRIDE(i, p.batch * p.dim * p.seqlen) {
    const int64_t l = i % p.seqlen, d = (i / p.seqlen) % p.dim, b = i / (p.seqlen * p.dim);
    A v = pre_at<T, A>(p, b, d, l);
    if (p.silu) v *= sigmoid(v);
    static_cast<T*>(p.y)[i] = from_acc<T>(v);
    if (p.final_state && l >= p.seqlen - W1) {
      // Position l is entry l - (L - W1) of the final state.
      static_cast<T*>(p.final_state)[(b * p.dim + d) * W1 + l - (p.seqlen - W1)] =
          static_cast<const T*>(p.x)[b * p.x_bs + d * p.x_ds + l * p.x_ls];
    }
  }
  // Final-state entries that lie in the initial state (L < W-1).
  GRID_STRIDE(j, p.batch * p.dim * W1) {
    if (!p.final_state || p.seqlen >= W1) break;
    const int64_t e = j % W1, bd = j / W1, l = p.seqlen - W1 + e;
    if (l < 0) static_cast<T*>(p.final_state)[j] = from_acc<T>(xat<T, A>(p, bd / p.dim, bd % p.dim, l));
  }
}

// dL/d(pre-activation) at l.
template <typename T, typename A>
__device__ __forceinline__ A grad_pre(const ConvBwdParams& p, int64_t b, int64_t d, int64_t l) {
  A g = to_acc<A>(static_cast<const T*>(p.dout)[(b * p.dim + d) * p.seqlen + l]);
  if (p.silu) {
    const A v = pre_at<T, A>(p, b, d, l), sg = sigmoid(v);
    g *= sg * (A(1) + v * (A(1) - sg));
  }
  return g;
}

// Gradient of the padded row at position l (-(W-1) <= l < L).
template <typename T, typename A>
__device__ A dxp_at(const ConvBwdParams& p, int64_t b, int64_t d, int64_t l) {
  const int64_t W1 = p.width - 1;
  const A* w = static_cast<const A*>(p.weight) + d * p.width;
  A acc = 0;
  for (int64_t k = 0; k < p.width; ++k) {
    const int64_t t = l + W1 - k;  // output position that reads x[l] through tap k
    if (t >= 0 && t < p.seqlen) acc += w[k] * grad_pre<T, A>(p, b, d, t);
  }
  const int64_t e = l - (p.seqlen - W1);  // entry of the final state holding x[l]
  if (p.dfinal_state && e >= 0 && e < W1)
    acc += to_acc<A>(static_cast<const T*>(p.dfinal_state)[(b * p.dim + d) * W1 + e]);
  return acc;
}

template <typename T, typename A>
__global__ void conv_bwd_x(ConvBwdParams p) {
  const int64_t W1 = p.width - 1;
  GRID_STRIDE(i, p.batch * p.dim * p.seqlen) {
    const int64_t l = i % p.seqlen, d = (i / p.seqlen) % p.dim, b = i / (p.seqlen * p.dim);
    static_cast<T*>(p.dx)[i] = from_acc<T>(dxp_at<T, A>(p, b, d, l));
  }
  if (p.dinitial_state) {
    GRID_STRIDE(j, p.batch * p.dim * W1) {
      const int64_t e = j % W1, bd = j / W1;
      static_cast<T*>(p.dinitial_state)[j] = from_acc<T>(dxp_at<T, A>(p, bd / p.dim, bd % p.dim, e - W1));
    }
  }
}

template <typename T, typename A>
__global__ void conv_bwd_w(ConvBwdParams p) {
  const int64_t W = p.width;
  GRID_STRIDE(i, p.batch * p.dim) {
    const int64_t b = i / p.dim, d = i % p.dim;
    A dw[4] = {0, 0, 0, 0}, db = 0;
    for (int64_t l = 0; l < p.seqlen; ++l) {
      const A g = grad_pre<T, A>(p, b, d, l);
      db += g;
      for (int64_t k = 0; k < W; ++k) dw[k] += g * xat<T, A>(p, b, d, l - (W - 1) + k);
    }
    for (int64_t k = 0; k < W; ++k) static_cast<A*>(p.dweight_part)[i * W + k] = dw[k];
    if (p.dbias_part) static_cast<A*>(p.dbias_part)[i] = db;
  }
}

template <typename T, typename A>
__global__ void conv_step(ConvStepParams p) {
  const int64_t W = p.width, W1 = W - 1;
  GRID_STRIDE(i, p.batch * p.dim) {
    const int64_t d = i % p.dim;
    T* st = static_cast<T*>(p.state) + i * W1;
    const T xr = static_cast<const T*>(p.x)[(i / p.dim) * p.x_bs + d];
    const A x = to_acc<A>(xr);
    const A* w = static_cast<const A*>(p.weight) + d * W;
    A v = p.bias ? static_cast<const A*>(p.bias)[d] : A(0);
    for (int64_t k = 0; k < W1; ++k) v += w[k] * to_acc<A>(st[k]);
    v += w[W1] * x;
    for (int64_t k = 0; k + 1 < W1; ++k) st[k] = st[k + 1];
    st[W1 - 1] = xr;
    if (p.silu) v *= sigmoid(v);
    static_cast<T*>(p.y)[i] = from_acc<T>(v);
  }
}

}  // namespace

void conv_forward_launch(const ConvParams& p, void* stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    conv_fwd<T, A><<<blocks_for(p.batch * p.dim * p.seqlen, kThreads), kThreads, 0,
                     static_cast<cudaStream_t>(stream)>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("conv1d forward");
  });
}

void conv_backward_launch(const ConvBwdParams& p, void* stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    conv_bwd_x<T, A><<<blocks_for(p.batch * p.dim * p.seqlen, kThreads), kThreads, 0, st>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("conv1d backward x");
    conv_bwd_w<T, A><<<blocks_for(p.batch * p.dim, kThreads), kThreads, 0, st>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("conv1d backward weight");
  });
}

void conv_step_launch(const ConvStepParams& p, void* stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    conv_step<T, A><<<blocks_for(p.batch * p.dim, kThreads), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("conv1d step");
  });
}

}  // namespace mambamt::kernels::cuda
