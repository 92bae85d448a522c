#pragma once
// Mamba-1 selective scan, with the conventions of the reference Mamba code
// (selective_scan_fn), and its one-token decode step.
//
// Per batch b and channel d (group g = d / (D/G) for grouped B and C):
//   delta_t = softplus(delta[b,d,t] + delta_bias[d])   (softplus only if asked;
//             identity above 20; 0 at padding)
//   h_t[n]  = exp(delta_t * A[d,n]) * h_{t-1}[n] + delta_t * B_t[n] * u_t
//   y_t     = sum_n C_t[n] h_t[n] + D[d] * u_t                (0 at padding)
//   out     = y * silu(z)                                     (when z is given)
// The state and every accumulation are float32 (float64 for float64 inputs).
#include <torch/torch.h>

namespace mambamt::kernels {

struct SelectiveScanOptions {
  torch::Tensor D;           // (D) skip connection
  torch::Tensor z;           // (B,D,L) output gate: out = y * silu(z)
  torch::Tensor delta_bias;  // (D) added to delta before the softplus
  bool delta_softplus = false;  // the reference code's default
  torch::Tensor initial_state;  // (B,D,N); absent: zeros
  // (B,L) bool: false marks padding (state unchanged, output zero).
  torch::Tensor mask;
  bool return_final_state = false;
};

struct SelectiveScanResult {
  torch::Tensor y;            // (B,D,L), dtype of u
  torch::Tensor final_state;  // (B,D,N), float32 (float64 for float64 u); undefined unless asked
};

// u, delta (B,D,L); A (D,N) real; B, C (B,N,L) or (B,G,N,L) with D % G == 0.
// u, delta, z, B, C: float32, float64, bfloat16 or float16 (one dtype); A, D,
// delta_bias, initial_state: any floating dtype. Differentiable in u, delta, A,
// B, C, D, z, delta_bias and initial_state.
SelectiveScanResult selective_scan(const torch::Tensor& u, const torch::Tensor& delta,
                                   const torch::Tensor& A, const torch::Tensor& B,
                                   const torch::Tensor& C, const SelectiveScanOptions& options = {});

struct SelectiveScanStepOptions {
  torch::Tensor D;           // (D)
  torch::Tensor z;           // (B,D)
  torch::Tensor delta_bias;  // (D)
  bool delta_softplus = false;
  torch::Tensor mask;        // (B) bool: false leaves that row unchanged, output zero
};

// One decode step: advances state (B,D,N) in place and returns y (B,D).
// u, delta (B,D); A (D,N); B, C (B,N) or (B,G,N). state is float32 (float64 for
// float64 u) and contiguous. Inference only.
torch::Tensor selective_scan_step(const torch::Tensor& state, const torch::Tensor& u,
                                  const torch::Tensor& delta, const torch::Tensor& A,
                                  const torch::Tensor& B, const torch::Tensor& C,
                                  const SelectiveScanStepOptions& options = {});

}  // namespace mambamt::kernels
