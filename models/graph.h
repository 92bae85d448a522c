#pragma once
// Decoding steps replayed from CUDA graphs.
//
// On a GPU a decode step of the small preset is a few hundred small kernels,
// and launching them (LibTorch's dispatch, the driver) takes longer than
// running them: on an H200 a step took 2.4-4.6 ms whatever the batch or the
// output length (`mambamt bench decode`). A CUDA graph records the step's kernels
// once and launches them together.
//
//   InferenceState st = model->start(src, src_mask, max_len);  // on the GPU
//   StepGraphs graphs(*model, st);            // makes st static
//   torch::Tensor logits = graphs.step(tokens);  // = model->step(st, tokens)
//
// The state is made static (InferenceState::make_static): every step changes
// its tensors in place and keeps their shapes, so one recording replays at
// every position. Full-attention layers read a fixed span of their KV cache
// (the unwritten columns masked): one graph per span (static_span(): multiples
// of 64, of an eighth of the power of two below past 1024 columns), recorded
// when decoding first reaches it, so a step reads at most 64 columns or an
// eighth more than it needs (32 graphs for 4096 columns). The KV caches do not
// grow: start() or prefill() must reserve the whole output. A state whose
// tensors were replaced (reorder(), another make_static) or whose batch
// changed is recorded again on the next step.
//
// Each recording follows two ordinary steps on the recording stream
// (LibTorch's lazy set-up: cuBLAS handles, workspaces), after which the
// state is put back as it was. Under autocast, those steps leave the bf16
// copies of the weights in autocast's cache and the graphs read them, as
// ordinary steps do; a StepGraphs keeps the cache alive while it lives
// (core::AutocastCacheKeeper: the end of the autocast region would otherwise
// free the copies under live graphs). Weights cast inside the graph instead
// would be cast again at every replay.
#include <torch/torch.h>

#include <cstdint>
#include <memory>

#include "models/model.h"

namespace mambamt::models {

// The span a static step at KV-cache column `column` reads: the smallest
// multiple of max(64, P / 8) that exceeds column, P the largest power of two
// <= column + 1; at most `capacity`.
int64_t static_span(int64_t column, int64_t capacity);

// The span of a static state's next step: static_span() of its full-attention
// caches' column and capacity (0 without such caches). Throws mambamt::Error
// when the caches are full (a static state cannot grow them).
int64_t next_static_span(const InferenceState& state);

class StepGraphs {
 public:
  // Whether this build can record CUDA graphs (a LibTorch with CUDA) and a GPU
  // is visible.
  static bool available();

  // `state` must live on a CUDA device and stay alive while this does; the
  // model's kind must step statically (TranslationModel::steps_statically).
  // Throws mambamt::Error otherwise, or without available().
  StepGraphs(TranslationModel& model, InferenceState& state);
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  // model.step(state, tokens) from a graph (recorded first where needed).
  // The logits (B,V) live in the graph's memory: the next step overwrites them.
  torch::Tensor step(const torch::Tensor& tokens);

  // Graphs recorded so far (every recording counts, re-recordings too).
  int64_t recordings() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mambamt::models
