// CUDA selective scan (Mamba-1): forward, backward and decode step.
//
// One warp per (batch, channel): the lanes hold the N states (up to 8 each,
// N <= 256), step through the sequence together and reduce y_t with shuffles.
// The backward pass first saves the state every kSeg positions, then walks the
// segments in reverse, recomputing each segment's states into the workspace
// before running its positions backwards. dB and dC sum over the channels of a
// group with atomics. Checked against the float64 reference on an NVIDIA H200
// (test_kernels "[cuda]"); not tuned.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace mambamt::kernels::cuda {
namespace {

using detail::ScanBwdParams;
using detail::ScanParams;
using detail::ScanStepParams;

constexpr int kWarpsPerBlock = 4;
constexpr int64_t kSeg = 64;
constexpr int kMaxPerLane = 8;  // N <= 256

template <typename A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
  return __shfl_sync(0xffffffffu, v, 0);
}

template <typename T, typename A>
struct Channel {
  const ScanParams& p;
  int64_t b, d, g;
  __device__ Channel(const ScanParams& p_, int64_t b_, int64_t d_)
      : p(p_), b(b_), d(d_), g(d_ / (p_.dim / p_.ngroups)) {}
  __device__ A u(int64_t l) const { return to_acc<A>(static_cast<const T*>(p.u)[b * p.u_bs + d * p.u_ds + l]); }
  __device__ A z(int64_t l) const { return to_acc<A>(static_cast<const T*>(p.z)[b * p.z_bs + d * p.z_ds + l]); }
  __device__ A Bv(int64_t n, int64_t l) const {
    return to_acc<A>(static_cast<const T*>(p.B)[b * p.B_bs + g * p.B_gs + n * p.B_ns + l]);
  }
  __device__ A Cv(int64_t n, int64_t l) const {
    return to_acc<A>(static_cast<const T*>(p.C)[b * p.C_bs + g * p.C_gs + n * p.C_ns + l]);
  }
  __device__ bool real(int64_t l) const { return !p.mask || p.mask[b * p.seqlen + l]; }
  // Effective delta and its derivative.
  __device__ A delta(int64_t l, A* grad) const {
    if (!real(l)) {
      *grad = 0;
      return 0;
    }
    A v = to_acc<A>(static_cast<const T*>(p.delta)[b * p.delta_bs + d * p.delta_ds + l]);
    if (p.delta_bias) v += static_cast<const A*>(p.delta_bias)[d];
    if (p.delta_softplus && v <= A(20)) {
      *grad = sigmoid(v);
      return log1p(exp(v));
    }
    *grad = 1;
    return v;
  }
};

template <typename T, typename A>
__global__ void scan_fwd(ScanParams p) {
  const int lane = threadIdx.x % 32;
  const int64_t ch = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (ch >= p.batch * p.dim) return;
  Channel<T, A> c(p, ch / p.dim, ch % p.dim);
  const int64_t N = p.dstate;
  const A* Arow = static_cast<const A*>(p.A) + c.d * N;
  A h[kMaxPerLane], a[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t n = lane + 32 * k;
    h[k] = (n < N && p.initial_state) ? static_cast<const A*>(p.initial_state)[ch * N + n] : A(0);
    a[k] = n < N ? Arow[n] : A(0);
  }
  const A Dd = p.D ? static_cast<const A*>(p.D)[c.d] : A(0);
  T* y = static_cast<T*>(p.y) + ch * p.seqlen;
  T* ypre = static_cast<T*>(p.y_pregate);
  for (int64_t l = 0; l < p.seqlen; ++l) {
    A grad;
    const A dl = c.delta(l, &grad), u = c.u(l);
    A part = 0;
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t n = lane + 32 * k;
      if (n < N) {
        h[k] = exp(dl * a[k]) * h[k] + dl * u * c.Bv(n, l);
        part += h[k] * c.Cv(n, l);
      }
    }
    A out = warp_sum(part) + Dd * u;
    if (!c.real(l)) out = 0;
    if (lane == 0) {
      if (ypre) ypre[ch * p.seqlen + l] = from_acc<T>(out);
      if (p.z) {
        const A zv = c.z(l);
        out *= zv * sigmoid(zv);
      }
      y[l] = from_acc<T>(out);
    }
  }
  if (p.final_state) {
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) {
      const int64_t n = lane + 32 * k;
      if (n < N) static_cast<A*>(p.final_state)[ch * N + n] = h[k];
    }
  }
}

// Workspace per channel: checkpoints (nseg, N) then a segment's states (kSeg, N).
template <typename T, typename A>
__global__ void scan_bwd_t(ScanBwdParams p, A* ws) {
  const int lane = threadIdx.x % 32;
  const int64_t ch = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  if (ch >= p.batch * p.dim) return;
  Channel<T, A> c(p, ch / p.dim, ch % p.dim);
  const int64_t N = p.dstate, L = p.seqlen, nseg = (L + kSeg - 1) / kSeg;
  A* ck = ws + ch * (nseg + kSeg) * N;
  A* seg_h = ck + nseg * N;
  const A* Arow = static_cast<const A*>(p.A) + c.d * N;
  A a[kMaxPerLane], h[kMaxPerLane], dh[kMaxPerLane], dAp[kMaxPerLane];
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t n = lane + 32 * k;
    a[k] = n < N ? Arow[n] : A(0);
    h[k] = (n < N && p.initial_state) ? static_cast<const A*>(p.initial_state)[ch * N + n] : A(0);
    dh[k] = (n < N && p.dfinal_state) ? static_cast<const A*>(p.dfinal_state)[ch * N + n] : A(0);
    dAp[k] = 0;
  }
  // Pass 1: the state before every segment.
  for (int64_t l = 0; l < L; ++l) {
    if (l % kSeg == 0) {
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k)
        if (lane + 32 * k < N) ck[(l / kSeg) * N + lane + 32 * k] = h[k];
    }
    A grad;
    const A dl = c.delta(l, &grad), u = c.u(l);
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k)
      if (lane + 32 * k < N) h[k] = exp(dl * a[k]) * h[k] + dl * u * c.Bv(lane + 32 * k, l);
  }
  const A Dd = p.D ? static_cast<const A*>(p.D)[c.d] : A(0);
  const T* dout = static_cast<const T*>(p.dout) + ch * L;
  const T* ypre = p.y_pregate ? static_cast<const T*>(p.y_pregate) + ch * L : nullptr;
  T* du = static_cast<T*>(p.du) + ch * L;
  T* ddelta = static_cast<T*>(p.ddelta) + ch * L;
  T* dz = p.dz ? static_cast<T*>(p.dz) + ch * L : nullptr;
  A* dB = static_cast<A*>(p.dB) + (c.b * p.ngroups + c.g) * N * L;
  A* dC = static_cast<A*>(p.dC) + (c.b * p.ngroups + c.g) * N * L;
  A dD = 0, dbias = 0;
  for (int64_t s = nseg - 1; s >= 0; --s) {
    const int64_t l0 = s * kSeg, l1 = min(L, l0 + kSeg);
    // Pass 2: the segment's states h_{l0} .. h_{l1-1}.
#pragma unroll
    for (int k = 0; k < kMaxPerLane; ++k) h[k] = lane + 32 * k < N ? ck[s * N + lane + 32 * k] : A(0);
    for (int64_t l = l0; l < l1; ++l) {
      A grad;
      const A dl = c.delta(l, &grad), u = c.u(l);
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t n = lane + 32 * k;
        if (n < N) {
          h[k] = exp(dl * a[k]) * h[k] + dl * u * c.Bv(n, l);
          seg_h[(l - l0) * N + n] = h[k];
        }
      }
    }
    __syncwarp();
    // Pass 3: the segment backwards.
    for (int64_t l = l1 - 1; l >= l0; --l) {
      A grad;
      const A dl = c.delta(l, &grad), u = c.u(l);
      A dy = to_acc<A>(dout[l]);
      if (p.z) {
        const A zv = c.z(l), sg = sigmoid(zv);
        if (dz && lane == 0) dz[l] = from_acc<T>(dy * to_acc<A>(ypre[l]) * sg * (A(1) + zv * (A(1) - sg)));
        dy *= zv * sg;
      }
      if (!c.real(l)) dy = 0;
      A sA = 0, sB = 0;
#pragma unroll
      for (int k = 0; k < kMaxPerLane; ++k) {
        const int64_t n = lane + 32 * k;
        if (n < N) {
          const A hn = seg_h[(l - l0) * N + n];
          const A hp = l > l0 ? seg_h[(l - l0 - 1) * N + n] : ck[s * N + n];
          const A da = exp(dl * a[k]), bv = c.Bv(n, l);
          const A dhn = dh[k] + dy * c.Cv(n, l);
          atomicAdd(&dC[n * L + l], dy * hn);
          atomicAdd(&dB[n * L + l], dhn * dl * u);
          const A q = dhn * hp * da;
          dAp[k] += q * dl;
          sA += q * a[k];
          sB += dhn * bv;
          dh[k] = dhn * da;
        }
      }
      sA = warp_sum(sA);
      sB = warp_sum(sB);
      if (lane == 0) {
        du[l] = from_acc<T>(Dd * dy + dl * sB);
        const A gd = (sA + u * sB) * grad;
        ddelta[l] = from_acc<T>(gd);
        dbias += gd;
        dD += dy * u;
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t n = lane + 32 * k;
    if (n < N) {
      static_cast<A*>(p.dA_part)[ch * N + n] = dAp[k];
      if (p.dinitial_state) static_cast<A*>(p.dinitial_state)[ch * N + n] = dh[k];
    }
  }
  if (lane == 0) {
    if (p.dD_part) static_cast<A*>(p.dD_part)[ch] = dD;
    if (p.ddelta_bias_part) static_cast<A*>(p.ddelta_bias_part)[ch] = dbias;
  }
}

template <typename T, typename A>
__global__ void scan_step(ScanStepParams p) {
  const int64_t D = p.dim, N = p.dstate, dpg = p.dim / p.ngroups;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.batch * D;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / D, ch = i % D, g = ch / dpg;
    T* y = static_cast<T*>(p.y) + i;
    if (p.mask && !p.mask[b]) {
      *y = from_acc<T>(A(0));
      continue;
    }
    A dl = to_acc<A>(static_cast<const T*>(p.delta)[b * p.delta_bs + ch]) +
           (p.delta_bias ? static_cast<const A*>(p.delta_bias)[ch] : A(0));
    if (p.delta_softplus) dl = softplus20(dl);
    const A u = to_acc<A>(static_cast<const T*>(p.u)[b * p.u_bs + ch]);
    const A* Arow = static_cast<const A*>(p.A) + ch * N;
    const T* Bv = static_cast<const T*>(p.B) + b * p.B_bs + g * N;
    const T* Cv = static_cast<const T*>(p.C) + b * p.C_bs + g * N;
    A* h = static_cast<A*>(p.state) + i * N;
    A acc = 0;
    for (int64_t n = 0; n < N; ++n) {
      h[n] = exp(dl * Arow[n]) * h[n] + dl * u * to_acc<A>(Bv[n]);
      acc += h[n] * to_acc<A>(Cv[n]);
    }
    A v = acc + (p.D ? static_cast<const A*>(p.D)[ch] : A(0)) * u;
    if (p.z) {
      const A zv = to_acc<A>(static_cast<const T*>(p.z)[b * p.z_bs + ch]);
      v *= zv * sigmoid(zv);
    }
    *y = from_acc<T>(v);
  }
}

unsigned warp_blocks(int64_t channels) {
  return static_cast<unsigned>((channels + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

void check_dstate(int64_t n) {
  if (n > 32 * kMaxPerLane)
    throw std::runtime_error("mambamt CUDA selective scan: d_state " + std::to_string(n) + " > 256");
}

}  // namespace

void scan_forward_launch(const ScanParams& p, void* stream) {
  check_dstate(p.dstate);
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    scan_fwd<T, A><<<warp_blocks(p.batch * p.dim), 32 * kWarpsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("selective scan forward");
  });
}

size_t scan_backward_workspace_bytes(const ScanBwdParams& p) {
  const int64_t nseg = (p.seqlen + kSeg - 1) / kSeg;
  const size_t acc = p.dtype == detail::DType::kFloat64 ? sizeof(double) : sizeof(float);
  return static_cast<size_t>(p.batch * p.dim * (nseg + kSeg) * p.dstate) * acc;
}

void scan_backward_launch(const ScanBwdParams& p, void* workspace, void* stream) {
  check_dstate(p.dstate);
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    scan_bwd_t<T, A><<<warp_blocks(p.batch * p.dim), 32 * kWarpsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
        p, static_cast<A*>(workspace));
    MAMBAMT_CUDA_LAUNCH_CHECK("selective scan backward");
  });
}

void scan_step_launch(const ScanStepParams& p, void* stream) {
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    using A = typename Acc<T>::type;
    scan_step<T, A><<<blocks_for(p.batch * p.dim, 256), 256, 0, static_cast<cudaStream_t>(stream)>>>(p);
    MAMBAMT_CUDA_LAUNCH_CHECK("selective scan step");
  });
}

}  // namespace mambamt::kernels::cuda
