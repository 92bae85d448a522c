#pragma once
// The sequence-mixer interface every layer kind implements (Mamba-2, Mamba-1,
// Bi-Mamba, attention, local attention), and what a mixer is told about the
// sequence it mixes.
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "models/state.h"

namespace mambamt::models {

// A batch of sequences in parallel (training, teacher forcing, prefill).
struct SeqInfo {
  // (B,L) bool, true at real tokens; undefined = no padding. Padding may be on
  // the left (decoder-only prompts) or the right; never between real tokens.
  torch::Tensor mask;
  // (B,L) int64: position of each token in its own sequence (0 at its first
  // real token); RoPE and windows use these, so a sequence gives the same
  // result alone and inside a padded batch.
  torch::Tensor positions;
  // (B) int64: real tokens per row.
  torch::Tensor lengths;
  // True when every row's padding is at its end (what the Bi-Mamba reversal needs).
  bool right_padded = true;

  // Rotary tables (B,1,L,Dh/2) shared by the attention layers of one stack.
  mutable torch::Tensor rope_cos, rope_sin;
  mutable int64_t rope_dim = 0;
  mutable double rope_base = 0;

  int64_t batch() const { return positions.size(0); }
  int64_t length() const { return positions.size(1); }

  // Info of (B,L) with an optional mask; positions count the real tokens.
  static SeqInfo from_mask(const torch::Tensor& mask, int64_t batch, int64_t length,
                           const torch::Device& device);
};

// One token per row (incremental decoding).
struct StepInfo {
  torch::Tensor position;  // (B) int64: position of this token in its own sequence
  // Static steps (InferenceState::make_static): the KV-cache column this step
  // writes, (1) int64 on the device, and the columns full attention reads.
  // Undefined column = the usual steps (host-side lengths, caches that grow).
  torch::Tensor column{};
  int64_t span = 0;

  // Rotary tables (B,1,1,1,Dh/2) shared by the attention layers of one step.
  mutable torch::Tensor rope_cos{}, rope_sin{};
  mutable int64_t rope_dim = 0;
  mutable double rope_base = 0;
  // Static steps: which of the first `span` cache columns are written
  // (column index <= column), (span) bool, shared by the full-attention layers.
  mutable torch::Tensor span_written{};
};

class MixerImpl : public torch::nn::Module {
 public:
  // x (B,L,D), already normalised -> (B,L,D). With `state`, also leaves there
  // the state after the sequence, ready for step() (prefill).
  virtual torch::Tensor forward(const torch::Tensor& x, const SeqInfo& info, LayerState* state) = 0;
  // x (B,D): the next token of every row -> (B,D); advances `state`.
  virtual torch::Tensor step(const torch::Tensor& x, const StepInfo& info, LayerState& state) = 0;
  // An empty state for `batch` rows before the first token; `reserve` is the
  // number of tokens expected (KV caches allocate for it and grow past it).
  // `options` give the dtype and device of activations.
  virtual void init_state(LayerState& state, int64_t batch, int64_t reserve,
                          const torch::TensorOptions& options) = 0;
  // Can it decode one token at a time (false for the bidirectional encoder mixers)?
  virtual bool causal() const = 0;
};

using MixerPtr = std::shared_ptr<MixerImpl>;

}  // namespace mambamt::models
