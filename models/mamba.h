#pragma once
// Mamba layers on the kernels of kernels/: the Mamba-2 mixer (in_proj ->
// causal conv1d -> SSD -> gated RMSNorm -> out_proj), the Mamba-1 mixer
// (in_proj -> conv -> selective scan gated by z -> out_proj), and the Bi-Mamba
// encoder mixer (a forward scan and a scan of each sequence reversed within its
// own length, concatenated and projected back to d_model). Pre-norm, dropout and
// the residual are added by the layer around the mixer (models/stack.h).
#include <torch/torch.h>

#include <cstdint>

#include "models/layers.h"
#include "models/mixer.h"

namespace mambamt::models {

struct MambaOptions {
  explicit MambaOptions(int64_t d_model) : d_model_(d_model) {}
  TORCH_ARG(int64_t, d_model);
  // 2: SSD (Mamba-2); 1: selective scan (Mamba-1).
  TORCH_ARG(int64_t, version) = 2;
  // SSM state size N.
  TORCH_ARG(int64_t, d_state) = 64;
  // Causal convolution width (2..4).
  TORCH_ARG(int64_t, d_conv) = 4;
  // Inner width = expand * d_model.
  TORCH_ARG(int64_t, expand) = 2;
  // Mamba-2 head dimension P (inner width must be divisible by it).
  TORCH_ARG(int64_t, headdim) = 64;
  // Mamba-2 B/C groups G (must divide the heads).
  TORCH_ARG(int64_t, ngroups) = 1;
  // Mamba-1 rank of the dt projection; 0 = ceil(d_model / 16).
  TORCH_ARG(int64_t, dt_rank) = 0;
  // SSD chunk length passed to the kernel (CUDA blocking).
  TORCH_ARG(int64_t, chunk_size) = 64;
  // Epsilon of the gated RMSNorm (Mamba-2).
  TORCH_ARG(double, norm_eps) = 1e-5;
  // How the projections start (models/init.h).
  TORCH_ARG(WeightInit, init) = WeightInit::standard();
  // Standard init: the output projection's scale, 1/sqrt(residual branches of
  // the stack), as mamba-ssm's rescaled pre-norm residual.
  TORCH_ARG(double, out_scale) = 1.0;
  // dt at initialisation is log-uniform in [dt_min, dt_max] (floored at 1e-4).
  TORCH_ARG(double, dt_min) = 0.001;
  TORCH_ARG(double, dt_max) = 0.1;

 public:
  int64_t d_inner() const { return expand_ * d_model_; }
  int64_t nheads() const { return d_inner() / headdim_; }
  int64_t conv_dim_v2() const { return d_inner() + 2 * ngroups_ * d_state_; }
  int64_t rank() const { return dt_rank_ > 0 ? dt_rank_ : (d_model_ + 15) / 16; }
};

// The SSM part of one scan direction of Mamba-2: conv over (x, B, C), SSD with
// the z gate, RMSNorm. Its inputs come from the owner's in_proj.
class SsdCoreImpl : public torch::nn::Module {
 public:
  explicit SsdCoreImpl(const MambaOptions& options);
  // xBC (B,L,C), dt (B,L,H), z (B,L,Di), mask (B,L) or undefined -> (B,L,Di).
  // With `state`, leaves the conv and SSM states after the last position
  // (prefill; padding must be on the left).
  torch::Tensor forward(const torch::Tensor& xBC, const torch::Tensor& dt, const torch::Tensor& z,
                        const torch::Tensor& mask, MambaState* state);
  // One token: xBC (B,C), dt (B,H), z (B,Di) -> (B,Di), through the fused
  // kernel steps (causal_conv1d_step, ssd_step).
  torch::Tensor step(const torch::Tensor& xBC, const torch::Tensor& dt, const torch::Tensor& z, MambaState& state);
  // The same step from the in-projection's output zxbcdt (B, Di + C + H), in
  // one fused CPU pass (models/detail/decode_cpu.h, mamba2_step) for float32
  // without gradients on a CPU with AVX-512F; an undefined tensor otherwise.
  torch::Tensor step_fused(const torch::Tensor& zxbcdt, MambaState& state);
  void init_state(MambaState& state, int64_t batch, const torch::TensorOptions& options) const;

  MambaOptions options;
  torch::Tensor conv_weight, conv_bias;  // (C,W), (C)
  torch::Tensor A_log, D, dt_bias;       // (H) each; A = -exp(A_log)
  RMSNorm norm{nullptr};                 // over Di
};
TORCH_MODULE(SsdCore);

// The SSM part of one scan direction of Mamba-1: conv over x, x_proj to
// (dt, B, C), dt_proj, selective scan gated by z.
class SelectiveCoreImpl : public torch::nn::Module {
 public:
  explicit SelectiveCoreImpl(const MambaOptions& options);
  // x, z (B,L,Di), mask (B,L) or undefined -> (B,L,Di).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& mask, MambaState* state);
  // x, z (B,Di) -> (B,Di) (causal_conv1d_step, selective_scan_step).
  torch::Tensor step(const torch::Tensor& x, const torch::Tensor& z, MambaState& state);
  // The same step from the in-projection's output xz (B, 2 Di), columns
  // [z, x], in one fused CPU pass (models/detail/decode_cpu.h, mamba1_step)
  // for float32 without gradients, d_state a multiple of 16, on a CPU with
  // AVX-512F; an undefined tensor otherwise.
  torch::Tensor step_fused(const torch::Tensor& xz, MambaState& state);
  void init_state(MambaState& state, int64_t batch, const torch::TensorOptions& options) const;

  MambaOptions options;
  torch::Tensor conv_weight, conv_bias;  // (Di,W), (Di)
  torch::nn::Linear x_proj{nullptr};     // Di -> R + 2N
  torch::nn::Linear dt_proj{nullptr};    // R -> Di; its bias is the delta bias
  torch::Tensor A_log, D;                // (Di,N), (Di)
};
TORCH_MODULE(SelectiveCore);

// Causal Mamba mixer (decoder layers), version 1 or 2.
class MambaImpl : public MixerImpl {
 public:
  explicit MambaImpl(const MambaOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) override;
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state) override;
  void init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options) override;
  bool causal() const override { return true; }

  MambaOptions options;
  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};
  SsdCore ssd{nullptr};              // version 2
  SelectiveCore selective{nullptr};  // version 1
};
TORCH_MODULE(Mamba);

// Bidirectional Mamba mixer (encoder layers). The directions share the input
// projection of x and z (as Vision Mamba does) and have their own conv, SSM
// parameters and, for Mamba-2, their own B, C and dt projections; their outputs
// are concatenated and projected back to d_model. Padding must be at the end of
// each row: the backward scan reverses each row within its own length, so its
// padding stays at the end too.
class BiMambaImpl : public MixerImpl {
 public:
  explicit BiMambaImpl(const MambaOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) override;
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state) override;
  void init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options) override;
  bool causal() const override { return false; }

  MambaOptions options;
  torch::nn::Linear in_proj{nullptr}, out_proj{nullptr};  // out_proj: 2*Di -> d_model
  SsdCore ssd_fwd{nullptr}, ssd_bwd{nullptr};
  SelectiveCore sel_fwd{nullptr}, sel_bwd{nullptr};
};
TORCH_MODULE(BiMamba);

// Index (B,L) that reverses each row of length lengths[b] within its first
// lengths[b] positions and keeps the rest in place (an involution).
torch::Tensor reverse_index(const torch::Tensor& lengths, int64_t length);
// x (B,L,F) gathered along L by index (B,L).
torch::Tensor gather_time(const torch::Tensor& x, const torch::Tensor& index);

}  // namespace mambamt::models
