// CUDA RMSNorm of rows (kernels/norm.h): one block per row; each thread sums
// the squares of a strided part of the row, the block reduces them (warp
// shuffles, then one value per warp through shared memory), and the threads
// write their part of the output. Compiled here; checked on a GPU by
// tests/kernels/test_cuda.cpp against LibTorch's expression.
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/launch.h"

namespace mambamt::kernels::cuda {
namespace {

using detail::RmsNormParams;

constexpr int kNormThreads = 256;  // a multiple of 32, at most 32 warps

__device__ __forceinline__ float inv_sqrt(float v) { return rsqrtf(v); }
__device__ __forceinline__ double inv_sqrt(double v) { return rsqrt(v); }

// The sum of v over the block, returned to every thread.
template <typename A>
__device__ A block_sum(A v) {
  __shared__ A partial[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / 32) ? partial[lane] : A(0);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if (lane == 0) partial[0] = v;
  }
  __syncthreads();
  return partial[0];
}

// T: x's type, W: the weight's, O: the output's (their promoted type).
template <typename T, typename W, typename O>
__global__ void rms_norm_rows(RmsNormParams p) {
  using A = typename Acc<T>::type;
  const T* x = static_cast<const T*>(p.x) + static_cast<int64_t>(blockIdx.x) * p.dim;
  const W* w = static_cast<const W*>(p.weight);
  O* y = static_cast<O*>(p.y) + static_cast<int64_t>(blockIdx.x) * p.dim;
  A ss = A(0);
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    const A v = to_acc<A>(x[j]);
    ss += v * v;
  }
  const A r = inv_sqrt(block_sum(ss) / static_cast<A>(p.dim) + static_cast<A>(p.eps));
  for (int64_t j = threadIdx.x; j < p.dim; j += blockDim.x) {
    const T normed = from_acc<T>(to_acc<A>(x[j]) * r);  // rounded to x's type, as the expression
    y[j] = from_acc<O>(to_acc<A>(normed) * to_acc<A>(w[j]));
  }
}

}  // namespace

void rms_norm_launch(const RmsNormParams& p, void* stream) {
  if (p.rows == 0 || p.dim == 0) return;
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  const unsigned rows = static_cast<unsigned>(p.rows);
  dispatch_dtype(p.dtype, [&](auto t) {
    using T = decltype(t);
    if (p.weight_dtype == p.dtype) {
      rms_norm_rows<T, T, T><<<rows, kNormThreads, 0, st>>>(p);
    } else {  // a float32 weight: the output is float32 (float64 for float64 x)
      using O = std::conditional_t<std::is_same_v<T, double>, double, float>;
      rms_norm_rows<T, float, O><<<rows, kNormThreads, 0, st>>>(p);
    }
    MAMBAMT_CUDA_LAUNCH_CHECK("rms_norm");
  });
}

}  // namespace mambamt::kernels::cuda
