#pragma once
// RMSNorm of rows, inference only: the normalisation a decode step runs once
// or twice per layer. On a GPU LibTorch's expression of it is seven kernels
// (cast, square, mean, add, rsqrt, two products), each launched from the host;
// the CUDA kernel here is one.
//
//   y = round_x(x / sqrt(mean(x^2) + eps)) * weight
//
// computed in float32 (float64 for float64 x); round_x rounds to x's dtype
// and the product is in the promoted type of x and weight (a float32 weight
// makes a bfloat16 x's output float32), as models::RMSNorm's expression. On
// the CPU it is that expression, reference::rms_norm (the models' float32
// decode path has its own fused loop, models/detail/decode_cpu.h).
#include <torch/torch.h>

namespace mambamt::kernels {

// x (..., D) float32, float64, bfloat16 or float16, any strides; weight (D)
// float32 or x's dtype, on x's device. No gradients.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

}  // namespace mambamt::kernels
