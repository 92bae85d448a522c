#pragma once
// Layers and stacks built from a plan, and the registry of sequence mixers.
//
// A layer is pre-norm residual sublayers:
//   x = x + dropout(mixer(norm(x)))
//   x = x + dropout(cross(norm(x), source))     if spec.cross
//   x = x + dropout(mlp(norm(x)))               if spec.mlp
// A stack is its layers, optional DenseMamba-style hidden connections, and a
// final RMSNorm.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/layers.h"
#include "models/mamba.h"
#include "models/mixer.h"
#include "models/plan.h"
#include "models/state.h"

namespace mambamt::models {

// Everything a stack needs, typed (made once from the config by the model).
struct StackOptions {
  explicit StackOptions(int64_t d_model)
      : d_model(d_model), attention(d_model, 1), mamba(d_model), mlp(d_model, 4 * d_model), cross(d_model, 1) {}
  int64_t d_model;
  std::vector<LayerSpec> layers;
  // Decoder stacks are causal (attention masks the future; can step); encoders
  // are bidirectional.
  bool causal = true;
  // Options of the layers; the stack sets attention.causal() from `causal` and
  // attention.window() per layer (local_attention_window for "local_attention").
  AttentionOptions attention;
  int64_t local_attention_window = 64;
  MambaOptions mamba;
  MlpOptions mlp;
  CrossAttentionOptions cross;
  // DenseMamba hidden connections: every layer i adds, to its input, the
  // hidden states of the m layers before it (outputs i-1-m .. i-2, the
  // embedding counting as output -1), each through a learned transition and a
  // sigmoid gate: x_i += sum_j sigmoid(G_i h_j) * (T_i h_j). 0 = off.
  int64_t dense_connections = 0;
  // Dropout on every sublayer's output (training only).
  double dropout = 0.0;
  double norm_eps = 1e-5;
  WeightInit init;
};

// Source memory the decoder cross-attends to.
struct Memory {
  torch::Tensor enc;   // (B,S,D) encoder output (after its final norm)
  torch::Tensor mask;  // (B,S) bool
};

// ------------------------------------------------------------------ mixer registry

struct MixerKind {
  std::string name;
  std::string description;
  // Builds the mixer of one layer of a stack.
  std::function<MixerPtr(const StackOptions&)> build;
};

// Every mixer kind layer plans may name, listed once in stack.cpp.
const std::vector<MixerKind>& mixer_kinds();
// The mixer named `name`; throws Error for an unknown name.
MixerPtr build_mixer(const std::string& name, const StackOptions& options);

// ------------------------------------------------------------------ layer

class LayerImpl : public torch::nn::Module {
 public:
  LayerImpl(const LayerSpec& spec, const StackOptions& options);
  // x (B,L,D) -> (B,L,D). memory: the source (cross-attention layers need it).
  // With `state`: prefill (see MixerImpl::forward).
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, const Memory* memory, LayerState* state);
  // x (B,D) -> (B,D).
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state);
  // Empty state for decoding, with the cross-attention K/V of `memory` (if any).
  void init_state(LayerState& state, int64_t batch, int64_t reserve, const torch::TensorOptions& options,
                  const Memory* memory);

  LayerSpec spec;
  double dropout;
  RMSNorm mix_norm{nullptr}, cross_norm{nullptr}, mlp_norm{nullptr};
  MixerPtr mixer;
  CrossAttention cross{nullptr};
  Mlp mlp{nullptr};

 private:
  torch::Tensor drop(const torch::Tensor& x);
};
TORCH_MODULE(Layer);

// ------------------------------------------------------------------ stack

class StackImpl : public torch::nn::Module {
 public:
  explicit StackImpl(const StackOptions& options);
  // x (B,L,D) embedded input -> (B,L,D) after the final norm.
  torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, const Memory* memory = nullptr,
                        std::vector<LayerState>* states = nullptr);
  // x (B,D) -> (B,D) after the final norm; advances states (one per layer).
  torch::Tensor step(const torch::Tensor& x, const StepInfo& info, std::vector<LayerState>& states);
  // One empty state per layer (cross-attention K/V from memory).
  std::vector<LayerState> init_states(int64_t batch, int64_t reserve, const torch::TensorOptions& options,
                                      const Memory* memory);

  StackOptions options;
  std::vector<Layer> layers;
  torch::nn::ModuleList layer_list{nullptr};
  // Dense connections of layer i (i >= 1) at index i-1: transition and gate.
  std::vector<torch::nn::Linear> dense_t, dense_g;
  RMSNorm final_norm{nullptr};

 private:
  // Input of layer i given the hidden states so far (hidden[j] = input of layer j).
  torch::Tensor dense_input(size_t i, const std::vector<torch::Tensor>& hidden);
};
TORCH_MODULE(Stack);

}  // namespace mambamt::models
