#pragma once
// Depthwise causal 1-D convolution (the short convolution in front of the SSM
// of a Mamba layer), with the conventions of the causal_conv1d package, and its
// one-token decode step.
//
//   out[b,d,t] = act(bias[d] + sum_{k<W} weight[d,k] * x[b,d,t-W+1+k])
// where positions before 0 read the initial state (zeros if absent):
// x[b,d,-j] = initial_state[b,d,W-1-j] for j = 1..W-1. act is SiLU or identity.
//
// Padding: this op has no mask. Zero the padded positions of x (x * mask)
// before calling it; with a zero initial state that is exact for left padding
// (what the SSD mask expects) and harmless for right padding.
#include <torch/torch.h>

namespace mambamt::kernels {

struct CausalConv1dOptions {
  torch::Tensor bias;           // (D)
  bool silu = false;            // apply SiLU to the output
  torch::Tensor initial_state;  // (B,D,W-1); absent: zeros
  bool return_final_state = false;
};

struct CausalConv1dResult {
  torch::Tensor y;            // (B,D,L), dtype of x
  torch::Tensor final_state;  // (B,D,W-1): the last W-1 inputs (reaching into initial_state when L < W-1)
};

// x (B,D,L), any strides; weight (D,W) with 2 <= W <= 4. x and weight:
// float32, float64, bfloat16 or float16 (computed in float32, float64 for
// float64). Differentiable in x, weight, bias and initial_state.
CausalConv1dResult causal_conv1d(const torch::Tensor& x, const torch::Tensor& weight,
                                 const CausalConv1dOptions& options = {});

// One decode step: out (B,D) for the new input x (B,D); state (B,D,W-1), the
// last W-1 inputs, is shifted in place to end with x. state has the dtype of x
// and is contiguous. Inference only.
torch::Tensor causal_conv1d_step(const torch::Tensor& state, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias = {},
                                 bool silu = false);

}  // namespace mambamt::kernels
