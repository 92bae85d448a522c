#pragma once
// Basic layers: RMSNorm, rotary position embeddings (attention layers only),
// the MLPs, multi-head self-attention (bidirectional, causal with a KV cache,
// sliding-window) and cross-attention (full, gated, local).
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/init.h"
#include "models/mixer.h"
#include "models/state.h"

namespace mambamt::models {

// ------------------------------------------------------------------ RMSNorm

struct RMSNormOptions {
  RMSNormOptions(int64_t dim) : dim_(dim) {}
  TORCH_ARG(int64_t, dim);
  // Added to the mean square before the square root.
  TORCH_ARG(double, eps) = 1e-5;
};

// y = x / sqrt(mean(x^2) + eps) * weight over the last dimension.
class RMSNormImpl : public torch::nn::Module {
 public:
  explicit RMSNormImpl(const RMSNormOptions& options);
  torch::Tensor forward(const torch::Tensor& x);
  RMSNormOptions options;
  torch::Tensor weight;  // (dim), ones at init
};
TORCH_MODULE(RMSNorm);

// ------------------------------------------------------------------ RoPE

// Rotary tables for positions (any shape) -> cos, sin of shape positions.shape + (dim/2).
std::pair<torch::Tensor, torch::Tensor> rope_tables(const torch::Tensor& positions, int64_t dim, double base,
                                                    torch::ScalarType dtype);
// Rotates x (..., dim) by tables (..., dim/2) broadcast against it: the pairs
// (x[i], x[i + dim/2]) turn by the angle of frequency i ("rotate half" layout).
torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);

// ------------------------------------------------------------------ MLP

// kSwiGLU: down(silu(gate(x)) * up(x)); kReLU: down(relu(up(x))).
enum class MlpKind { kSwiGLU, kReLU };
// model.mlp's value ("swiglu", "relu"); InputError naming the key otherwise.
MlpKind mlp_kind(const std::string& name);

struct MlpOptions {
  MlpOptions(int64_t d_model, int64_t d_ff) : d_model_(d_model), d_ff_(d_ff) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, d_ff);
  TORCH_ARG(MlpKind, kind) = MlpKind::kSwiGLU;
  // How the weights start (models/init.h).
  TORCH_ARG(WeightInit, init) = WeightInit::standard();
};

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const MlpOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // (..., d_model) -> (..., d_model)
  MlpOptions options;
  torch::nn::Linear up{nullptr}, gate{nullptr}, down{nullptr};  // gate only for swiglu
};
TORCH_MODULE(Mlp);

// ------------------------------------------------------------------ self-attention

struct AttentionOptions {
  AttentionOptions(int64_t d_model, int64_t n_heads) : d_model_(d_model), n_heads_(n_heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, n_heads);
  // Causal (decoder) or bidirectional (encoder).
  TORCH_ARG(bool, causal) = true;
  // Sliding window in tokens, 0 = full attention. Causal: a token sees itself
  // and the window-1 before it; bidirectional: tokens less than `window` away.
  TORCH_ARG(int64_t, window) = 0;
  TORCH_ARG(double, rope_base) = 10000.0;
  // Dropout on the attention weights (training only).
  TORCH_ARG(double, attn_dropout) = 0.0;
  TORCH_ARG(WeightInit, init) = WeightInit::standard();
};

// Multi-head self-attention with RoPE on queries and keys. Projections have no bias.
class AttentionImpl : public MixerImpl {
 public:
  explicit AttentionImpl(const AttentionOptions& options);
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) override;
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state) override;
  void init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options) override;
  bool causal() const override { return options.causal(); }

  AttentionOptions options;
  torch::nn::Linear qkv{nullptr}, out{nullptr};
  // Opt-in recording for analyses (train/explain.h): while `record` is true,
  // forward() keeps its softmax weights (B,H,L,L) float32, detached, in
  // `last_weights` (before attention dropout). Off by default: no cost.
  bool record = false;
  torch::Tensor last_weights;

 private:
  int64_t head_dim() const { return options.d_model() / options.n_heads(); }
  // Writes columns [length, length + L) of the cache from k, v (B,H,L,Dh), valid (B,L).
  void append(KvCache& cache, const torch::Tensor& k, const torch::Tensor& v, const torch::Tensor& valid);
  // Makes room for L more columns in a full-attention cache (a ring has its window).
  static void reserve(KvCache& cache, int64_t l);
  // step() of a static state (StepInfo::column defined): the cache written in
  // place at the device-side column and read over a fixed span, masked.
  torch::Tensor static_step(const torch::Tensor& qkv, const StepInfo& info, KvCache& cache);
};
TORCH_MODULE(Attention);

// ------------------------------------------------------------------ cross-attention

// kFull; kGated: the output times sigmoid(w . x + b) per token (a learned
// gate that can close when the source is not needed); kLocal: only source
// tokens within window/2 of the aligned position (the target position,
// clamped to the source) are attended.
enum class CrossAttentionKind { kFull, kGated, kLocal };
// model.cross_attn's value ("full", "gated", "local"); InputError naming the key otherwise.
CrossAttentionKind cross_attention_kind(const std::string& name);

struct CrossAttentionOptions {
  CrossAttentionOptions(int64_t d_model, int64_t n_heads) : d_model_(d_model), n_heads_(n_heads) {}
  TORCH_ARG(int64_t, d_model);
  TORCH_ARG(int64_t, n_heads);
  TORCH_ARG(CrossAttentionKind, kind) = CrossAttentionKind::kFull;
  TORCH_ARG(int64_t, window) = 64;
  TORCH_ARG(double, attn_dropout) = 0.0;
  TORCH_ARG(WeightInit, init) = WeightInit::standard();
};

// Cross-attention from decoder tokens to the encoder output. No RoPE: source
// and target positions live in different sequences. The source K/V are
// computed once per source (memory()), then reused by every step.
class CrossAttentionImpl : public torch::nn::Module {
 public:
  explicit CrossAttentionImpl(const CrossAttentionOptions& options);
  // K/V of the encoder output memory (B,S,D) with its mask (B,S).
  CrossKv memory(const torch::Tensor& enc, const torch::Tensor& src_mask) ;
  // x (B,T,D) normalised decoder states at target positions (B,T) -> (B,T,D).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& positions, const CrossKv& kv);
  CrossAttentionOptions options;
  torch::nn::Linear q{nullptr}, kv{nullptr}, out{nullptr}, gate{nullptr};  // gate: gated only
  // Opt-in recording for analyses (train/explain.h): while `record` is true,
  // forward() keeps its softmax weights (B,H,T,S) float32, detached, in
  // `last_weights` (before attention dropout; zero at masked source columns,
  // so each row sums to 1 over the real source tokens). Off by default: no cost.
  bool record = false;
  torch::Tensor last_weights;
  // Gated only. While `record_gate` is true, forward() keeps the gate values
  // (B,T) float32, detached, in `last_gate` (before skipping).
  bool record_gate = false;
  torch::Tensor last_gate;
  // Gated only. While `keep_gates` is true, every forward() appends its gate
  // values (B,T), still in the autograd graph, to `kept_gates` (a training
  // loss on them: train.gate_penalty). Whoever sets it clears the list.
  bool keep_gates = false;
  std::vector<torch::Tensor> kept_gates;
  // Gated only, outside training: a token whose gate is below `skip_below`
  // gets output zero, as if its cross-attention were skipped (eval.gate_skip).
  // A CPU decode step then reads no K/V for those rows, and computes nothing
  // when every row is closed; elsewhere the same result comes from masking
  // the gate. 0 = off.
  double skip_below = 0.0;
};
TORCH_MODULE(CrossAttention);

// The gated cross-attention modules under `root`, in module order; `names`,
// when given, receives their module paths ("decoder.layers.3.cross").
std::vector<CrossAttentionImpl*> gated_cross_attention(torch::nn::Module& root,
                                                       std::vector<std::string>* names = nullptr);

// Sets skip_below of every gated cross-attention module under `root`;
// returns how many there are.
int64_t set_gate_skip(torch::nn::Module& root, double skip_below);

// set_gate_skip for a scope: the modules' earlier values come back after it.
class GateSkipGuard {
 public:
  GateSkipGuard(torch::nn::Module& root, double skip_below);
  ~GateSkipGuard();
  GateSkipGuard(const GateSkipGuard&) = delete;
  GateSkipGuard& operator=(const GateSkipGuard&) = delete;

 private:
  std::vector<std::pair<CrossAttentionImpl*, double>> before_;
};

// Scaled dot-product attention: q (B,H,Lq,Dh), k, v (B,H,Lk,Dh), allowed
// (broadcastable to (B,H,Lq,Lk), bool) -> (B,H,Lq,Dh). A query with no allowed
// key gets a finite (meaningless) output, never NaN. With `weights`, the
// softmax weights (B,H,Lq,Lk) (float32, or float64 for float64 inputs; before
// dropout) are also stored there, detached.
torch::Tensor attend(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                     const torch::Tensor& allowed, double dropout, bool training, torch::Tensor* weights = nullptr);

// Above 64M weights (B*H*Lq*Lk) per call, on the CPU in float32 or float64,
// without weights asked for and without attention dropout, attend works in
// blocks of queries of at most 16M weights (attend_blocks): the same outputs
// and gradients up to rounding, with one block's weights in memory at a
// time, forward and backward (the backward pass computes them again, so
// smaller calls, where memory is no constraint, keep the whole weights).
// attend_query_block gives the block (queries) attend uses for
// q (B,H,Lq,Dh) and k (B,H,Lk,Dh), 0 for none.
int64_t attend_query_block(const torch::Tensor& q, const torch::Tensor& k);
torch::Tensor attend_blocks(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                            const torch::Tensor& allowed, int64_t block);

}  // namespace mambamt::models
