#pragma once
// Shared by the CUDA kernels (.cu files compiled by nvcc without LibTorch):
// element types, conversions to and from the float accumulation type, error
// checks, and the dtype switch that instantiates every kernel for float32,
// bfloat16 and float16 (float64 too, so the float64 tests can run on a GPU).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/detail/params.h"

namespace mambamt::kernels::cuda {

// Accumulation type of an activation type: double for double, float otherwise.
template <typename T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };

template <typename A, typename T>
__device__ __forceinline__ A to_acc(T v) { return static_cast<A>(v); }
template <>
__device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ __forceinline__ float to_acc<float, __half>(__half v) { return __half2float(v); }

template <typename T, typename A>
__device__ __forceinline__ T from_acc(A v) { return static_cast<T>(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_acc<__half, float>(float v) { return __float2half(v); }

template <typename A>
__device__ __forceinline__ A softplus20(A v) { return v > A(20) ? v : log1p(exp(v)); }
template <typename A>
__device__ __forceinline__ A sigmoid(A v) { return A(1) / (A(1) + exp(-v)); }

inline void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("mambamt CUDA kernel ") + what + ": " + cudaGetErrorString(e));
}

// The launch of one kernel, checked.
#define MAMBAMT_CUDA_LAUNCH_CHECK(what) ::mambamt::kernels::cuda::check(cudaGetLastError(), what)

inline unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 65535 * 64 ? b : 65535 * 64);
}

// Runs f.template operator()<T>() with T the activation type of dtype.
template <typename F>
void dispatch_dtype(detail::DType dtype, F&& f) {
  switch (dtype) {
    case detail::DType::kFloat32: f(float{}); break;
    case detail::DType::kFloat64: f(double{}); break;
    case detail::DType::kBFloat16: f(__nv_bfloat16{}); break;
    case detail::DType::kFloat16: f(__half{}); break;
  }
}

}  // namespace mambamt::kernels::cuda
