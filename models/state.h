#pragma once
// The inference state of a batch being decoded: per decoder layer the Mamba
// conv and SSM states, the self-attention KV cache or another recurrent state
// (retention, GRU), plus the cross-attention K/V computed once from the source. Every tensor is batch-major, so beam
// search reorders all of them with one index.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace mambamt::models {

// Recurrent state of one Mamba layer (both versions).
struct MambaState {
  torch::Tensor conv;  // (B, C, W-1): the last W-1 inputs of the causal conv, activation dtype
  torch::Tensor ssm;   // Mamba-2 (B, H, P, N) / Mamba-1 (B, D_inner, N), float32 (float64 for float64 models)
};

// Self-attention keys and values of the positions seen so far.
//
// Full attention: columns [0, length) of a buffer of `capacity()` columns that
// grows by doubling. Sliding-window attention: a ring of `window` columns
// (column c of the sequence lives in slot c % window), so the cache stays
// O(window) however long the output gets.
struct KvCache {
  torch::Tensor k, v;   // (B, H, capacity, Dh), RoPE already applied to k
  torch::Tensor valid;  // (B, capacity) bool: the slot holds a real (non-padding) token
  int64_t length = 0;   // columns written so far (sequence columns, padding included)
  int64_t window = 0;   // 0 = full attention, else the ring size
  int64_t capacity() const { return k.defined() ? k.size(2) : 0; }
  // Slots that currently hold a column: min(length, capacity).
  int64_t filled() const { return length < capacity() ? length : capacity(); }
};

// Cross-attention keys and values of the source (computed once per source).
struct CrossKv {
  torch::Tensor k, v;     // (B, H, S, Dh)
  torch::Tensor mask;     // (B, S) bool, true at real source tokens
  torch::Tensor src_len;  // (B) int64, real source tokens (local cross-attention centres on them)
};

// Everything one decoder layer carries between steps. Unused parts are undefined.
struct LayerState {
  MambaState mamba;
  KvCache self;
  CrossKv cross;
  // The recurrent state of layers that are neither Mamba nor attention:
  // retention (B, H, Dk, Dv) float32 (float64 for float64 models;
  // models/retnet.h), the rnnsearch decoder GRU's hidden state (B, n)
  // (models/rnnsearch.h, which keeps its annotations and their key projection
  // in `cross`).
  torch::Tensor recurrent;
};

// Bytes of the state, by kind (what `mambamt bench decode` reports).
struct StateBytes {
  int64_t kv_cache = 0;     // self-attention K/V of the filled columns
  int64_t cross_kv = 0;     // cross-attention K/V of the source
  int64_t mamba = 0;        // Mamba conv + SSM states
  int64_t recurrent = 0;    // retention / GRU states (LayerState::recurrent)
  int64_t allocated = 0;    // everything allocated, including unused KV capacity
  int64_t decoder_state() const { return kv_cache + mamba + recurrent; }
  int64_t total() const { return kv_cache + cross_kv + mamba + recurrent; }
};

class InferenceState {
 public:
  std::vector<LayerState> layers;  // one per decoder layer
  // (B) int64: position, in its own sequence, of the next token fed to step()
  // (target position for encoder-decoder kinds, source + target position for
  // decoder-only kinds).
  torch::Tensor position;
  // (B) int64: real tokens of each row's source (max-length rules of search).
  torch::Tensor src_len;

  // Static steps: what a CUDA graph of step() needs (models/graph.h). After
  // make_static(), every step() of the encoder-decoder and decoder-only kinds
  // (TranslationModel::steps_statically) changes the state's tensors in place
  // and keeps their shapes: positions advance in place, KV caches no longer
  // grow (their capacity must hold the rest of the output), the column a step
  // writes comes from `column` on the device, and full-attention layers read
  // the first `span` columns of their caches, the unwritten ones masked. The
  // host-side lengths (KvCache::length) are kept as before. A reorder() that
  // keeps the batch size copies the picked rows back into the same tensors
  // (beam search: the graphs stay valid); one that changes it replaces them
  // (a graph of the old ones no longer applies), and the state stays static.
  torch::Tensor column;  // (1) int64 on the state's device: KV-cache columns written
  int64_t span = 0;      // columns a full-attention step reads; each step needs column < span <= capacity
  bool is_static() const { return column.defined(); }
  // Switches to static steps (each step's caller sets `span`, e.g. to
  // next_static_span() of models/graph.h). Tensors that something
  // else also holds (positions, the source mask the cross-attention layers
  // share) are copied first: steps and reorders then change them in place.
  // Every KV cache must have the same length (true of a state from start,
  // prefill, reorder or cat).
  void make_static();

  int64_t batch_size() const { return position.defined() ? position.size(0) : 0; }

  // Rows become rows[index]: index (int64, values in [0, B)) may repeat rows
  // (beam expansion), permute them (beam reordering) or be shorter (dropping
  // finished rows). With `same_sources` the caller promises that index has B
  // entries and row i is taken from a row holding the same source as row i
  // (beam reordering within each source's group of beams), so the
  // cross-attention K/V, equal across the group, are left as they are.
  // Only the filled columns of KV caches are copied. A reorder that keeps
  // the batch size writes into the buffers the previous one left behind
  // (where nothing else holds them) rather than into new memory: beam search
  // reorders every step, and fresh allocations of that size cost page faults
  // that took longer than the copy. A static state of the same batch keeps
  // its tensors (the rows are copied back; see make_static).
  void reorder(const torch::Tensor& index, bool same_sources = false);

  StateBytes bytes() const;

  // Every defined tensor of the state in a fixed order: per layer the Mamba
  // states, the KV cache, the recurrent state and the cross-attention K/V, then
  // position, src_len and column.
  std::vector<torch::Tensor> tensors() const;

  // The rows of `parts` one after the other (batch concatenation), e.g. the
  // states of row groups prefilled one at a time to bound their memory. The
  // parts come from the same model and sit at the same sequence column: every
  // KV cache has the same length, window and capacity in every part.
  static InferenceState cat(const std::vector<InferenceState>& parts);

 private:
  // The tensors the last reorder replaced, in the order it visits them.
  std::vector<torch::Tensor> spare_;
};

}  // namespace mambamt::models
