#pragma once
// Mamba-2 SSD (state-space duality) scan: the sequence mixer of the Mamba-2
// layer, and its one-token decode step.
//
// Per batch b and head h (group g = h / (H/G)), with A = -exp(A_log[h]):
//   dt_t = softplus(dt[b,t,h] + dt_bias[h])   (identity above 20; 0 at padding)
//   S_t  = exp(dt_t * A) * S_{t-1} + dt_t * x_t ⊗ B_t     S: (P,N), x_t: (P), B_t: (N)
//   y_t  = S_t C_t + D[h] * x_t                           (0 at padding)
//   out  = y * silu(z)                                    (when z is given)
// The state and every accumulation are float32 (float64 for float64 inputs).
#include <torch/torch.h>

namespace mambamt::kernels {

// Optional inputs and flags of ssd_scan. An undefined tensor means "absent".
struct SsdScanOptions {
  // (H) skip connection: y += D[h] * x.
  torch::Tensor D;
  // (B,L,H,P) output gate: out = y * silu(z).
  torch::Tensor z;
  // (H) added to dt before the softplus.
  torch::Tensor dt_bias;
  // dt = softplus(dt + dt_bias), identity above 20 (as the reference Mamba code);
  // false: dt + dt_bias is used as given.
  bool dt_softplus = true;
  // (B,H,P,N) state before the first position; absent: zeros.
  torch::Tensor initial_state;
  // (B,L) bool (or 0/1 of any dtype): false marks padding. A padded position
  // leaves the state unchanged and outputs zero, so real outputs and the final
  // state are those of the sequence without its padding (left or right).
  torch::Tensor mask;
  // Also return the state after the last position.
  bool return_final_state = false;
  // Chunk length of the chunked CUDA algorithm (a power of two, 16..256). The
  // CPU kernel chooses its own blocking; results agree within rounding.
  int64_t chunk_size = 64;
};

struct SsdScanResult {
  torch::Tensor y;            // (B,L,H,P), dtype of x
  torch::Tensor final_state;  // (B,H,P,N), float32 (float64 for float64 x); undefined unless asked
};

// x (B,L,H,P); dt (B,L,H); A_log (H); B, C (B,L,G,N) with H % G == 0.
// x, z, B, C: float32, float64, bfloat16 or float16 (one dtype); dt, A_log, D,
// dt_bias, initial_state: any floating dtype (used in float32, float64 for
// float64 x). Differentiable (autograd) in x, dt, A_log, B, C, D, z, dt_bias and
// initial_state, on CPU and (built with CUDA) on GPU.
SsdScanResult ssd_scan(const torch::Tensor& x, const torch::Tensor& dt, const torch::Tensor& A_log,
                       const torch::Tensor& B, const torch::Tensor& C,
                       const SsdScanOptions& options = {});

struct SsdStepOptions {
  torch::Tensor D;        // (H)
  torch::Tensor z;        // (B,H,P) output gate
  torch::Tensor dt_bias;  // (H)
  bool dt_softplus = true;
  // (B) bool: false leaves that row's state unchanged and outputs zero
  // (e.g. finished hypotheses, or a padding token).
  torch::Tensor mask;
};

// One decode step: advances state (B,H,P,N) in place by one position and returns
// y (B,H,P). x (B,H,P); dt (B,H); A_log (H); B, C (B,G,N). state is float32
// (float64 for float64 x) and contiguous, as returned by ssd_scan. Inference
// only: no gradients.
torch::Tensor ssd_step(const torch::Tensor& state, const torch::Tensor& x, const torch::Tensor& dt,
                       const torch::Tensor& A_log, const torch::Tensor& B, const torch::Tensor& C,
                       const SsdStepOptions& options = {});

}  // namespace mambamt::kernels
