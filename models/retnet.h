#pragma once
// RetNet (Sun et al. 2023, "Retentive Network: A Successor to Transformer for
// Large Language Models"), the linear-recurrent baseline of the SSM-for-MT
// paper (its Table 5: 12 layers, 4 heads, d 512, FFN 1024, 77M parameters).
//
// Kind `retnet` is a DecoderOnlyModel (models/model.h) over
// `source <boundary> target`: the same packing, prefill, step and beam-search
// state as the other decoder-only kinds. Its plan (models/plan.h) is
// dec_layers x "retention+mlp": the mixer below in the stack's pre-norm
// residual layers,
//   x = x + dropout(MSR(norm(x)));  x = x + dropout(FFN(norm(x)))
// (RMSNorm like every stack here, where RetNet uses LayerNorm; the FFN is the
// project's MLP, SwiGLU by default, as RetNet's GLU FFN).
//
// Multi-scale retention (MSR) with H heads, key width dk = d/H and value width
// dv = 2d/H (RetNet's doubled value dimension):
//   Q = rot(X W_Q),  K = rot(X W_K) / sqrt(dk),  V = X W_V
//   head h decays with gamma_h = 1 - 2^(-5-h), h = 0 .. H-1
//   parallel  (training, prefill):  O_h = (Q K^T .* D_h) V,
//             D_h[n,m] = gamma_h^(p_n - p_m) for key columns m <= n holding a
//             real token, else 0
//   recurrent (decoding):  S_n = gamma_h S_{n-1} + K_n^T V_n,  O_n = Q_n S_n,
//             S: (B, H, dk, dv), float32 (float64 for float64 models)
//   Y = GroupNorm(O)  (each head normalised over its dv values on its own,
//                      then an affine over the 2d channels)
//   MSR(X) = (swish(X W_G) .* Y) W_O
// rot() is retention's e^{i n theta}: a rotation of (q[i], q[i + dk/2]) by
// p_n * theta_i (RoPE's "rotate half" layout, base model.rope_base). p are
// SeqInfo positions (real tokens only), so padding changes nothing. RetNet's
// xPos length scaling and the D/QK^T rescalings of its parallel form are left
// out: the group norm makes the output independent of a head's scale, and
// without them the two forms are the same sum. No chunkwise form: translation
// sequences are short and the parallel form is O(L^2) like attention.
#include <torch/torch.h>

#include <cstdint>

#include "models/init.h"
#include "models/mixer.h"
#include "models/state.h"

namespace mambamt::models {

struct RetentionOptions {
  RetentionOptions(int64_t d_model, int64_t n_heads) : d_model_(d_model), n_heads_(n_heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, n_heads);
  // Value (and gate) width = value_factor * d_model.
  TORCH_ARG(int64_t, value_factor) = 2;
  // Base of the rotation frequencies (as RoPE's).
  TORCH_ARG(double, rope_base) = 10000.0;
  // Epsilon of the per-head group norm.
  TORCH_ARG(double, norm_eps) = 1e-5;
  TORCH_ARG(WeightInit, init) = WeightInit::standard();
};

// The decays gamma_h = 1 - 2^(-5-h) of H heads, as log(gamma) (H) float64.
torch::Tensor retention_log_decays(int64_t n_heads);

class RetentionImpl : public MixerImpl {
 public:
  explicit RetentionImpl(const RetentionOptions& options);
  // x (B,L,D) -> (B,L,D), the parallel form. With `state`: state->recurrent
  // becomes each row's S after its last real token.
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) override;
  // x (B,D) -> (B,D), the recurrent form; advances state.recurrent.
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state) override;
  void init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options) override;
  bool causal() const override { return true; }

  RetentionOptions options;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, g_proj{nullptr}, out_proj{nullptr};
  torch::Tensor gn_weight, gn_bias;  // (value_factor * d_model): the group norm's affine

  int64_t key_dim() const { return options.d_model() / options.n_heads(); }
  int64_t value_dim() const { return options.value_factor() * options.d_model() / options.n_heads(); }

 private:
  // o (..., H, dv) retention output of the rows of x (..., D) -> (..., D):
  // group norm, swish gate, output projection.
  torch::Tensor finish(const torch::Tensor& x, const torch::Tensor& o);
  torch::Tensor log_decays_;  // (H) float64, copied to the compute dtype/device on use
  // The decays (1,H,1,1) in the step's dtype on its device, kept between steps
  // (a copy from the host each step would be a transfer a CUDA graph cannot hold).
  torch::Tensor step_gamma_;
};
TORCH_MODULE(Retention);

}  // namespace mambamt::models
