#include "models/graph.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"

#ifdef MAMBAMT_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>

#include "core/autocast.h"
#endif

namespace mambamt::models {

int64_t static_span(int64_t column, int64_t capacity) {
  const int64_t need = column + 1;
  int64_t power = 64;  // the largest power of two <= need, at least 64
  while (power * 2 <= need) power *= 2;
  const int64_t grain = std::max<int64_t>(64, power / 8);
  return std::min((need + grain - 1) / grain * grain, capacity);
}

int64_t next_static_span(const InferenceState& st) {
  // The full-attention caches' written columns (the host-side length) and the
  // smallest capacity; rings read their whole window and need no span.
  int64_t written = 0, capacity = 0;
  for (const LayerState& l : st.layers) {
    if (!l.self.k.defined() || l.self.window > 0) continue;
    written = l.self.length;
    capacity = capacity == 0 ? l.self.capacity() : std::min(capacity, l.self.capacity());
  }
  if (capacity == 0) return 0;
  if (written >= capacity)
    throw Error("static decoding step: the KV caches are full (" + std::to_string(capacity) +
                " columns) and a static state cannot grow them: start() or prefill() with a larger reserve");
  return static_span(written, capacity);
}

#ifdef MAMBAMT_WITH_CUDA

namespace {

std::vector<const void*> addresses(const InferenceState& st) {
  std::vector<const void*> out;
  for (const torch::Tensor& t : st.tensors()) out.push_back(t.data_ptr());
  return out;
}

// Every KV cache's host-side length, in layer order.
std::vector<int64_t> lengths(const InferenceState& st) {
  std::vector<int64_t> out;
  for (const LayerState& l : st.layers) out.push_back(l.self.length);
  return out;
}

void set_lengths(InferenceState& st, const std::vector<int64_t>& ls) {
  for (size_t i = 0; i < st.layers.size(); ++i) st.layers[i].self.length = ls[i];
}

}  // namespace

struct StepGraphs::Impl {
  TranslationModel& model;
  InferenceState& state;
  torch::Device device;
  // Under autocast the graphs read the bf16 weight copies autocast cached in
  // the ordinary steps before each recording: kept while the graphs live.
  core::AutocastCacheKeeper keep_weight_copies;
  torch::Tensor tokens;            // (B) int64: the graphs' input
  std::vector<const void*> bound;  // the state's tensors the graphs were recorded with
  struct Graph {
    std::unique_ptr<at::cuda::CUDAGraph> graph;
    torch::Tensor logits;  // the recorded step's output
  };
  std::map<int64_t, Graph> graphs;  // by span (0 without full-attention caches)
  int64_t recordings = 0;

  Impl(TranslationModel& m, InferenceState& st) : model(m), state(st), device(st.position.device()) {}

  // Records the step at `span`: two ordinary steps first, each undone, then
  // the recording (which runs the host-side code, lengths included, but no
  // kernel, so only the lengths are put back after it). Under autocast the
  // ordinary steps leave every weight's bf16 copy in autocast's cache, and the
  // recording reads those copies: no weight is cast again at each replay
  // (with the cache off, every replay cast every weight, four times the bytes
  // of reading its copy).
  Graph record(int64_t span) {
    torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> live = state.tensors();
    std::vector<torch::Tensor> saved;
    for (const torch::Tensor& t : live) saved.push_back(t.clone());
    const std::vector<int64_t> saved_lengths = lengths(state);
    auto restore = [&] {
      for (size_t i = 0; i < live.size(); ++i) live[i].copy_(saved[i]);
      set_lengths(state, saved_lengths);
    };
    torch::cuda::synchronize(device.index());
    Graph g;
    try {
      c10::cuda::CUDAStreamGuard on(c10::cuda::getStreamFromPool(false, device.index()));
      state.span = span;
      for (int w = 0; w < 2; ++w) {
        model.step(state, tokens);
        restore();
      }
      g.graph = std::make_unique<at::cuda::CUDAGraph>();
      g.graph->capture_begin();
      try {
        g.logits = model.step(state, tokens);
      } catch (...) {
        try {
          g.graph->capture_end();
        } catch (...) {
        }
        throw;
      }
      g.graph->capture_end();
      set_lengths(state, saved_lengths);
    } catch (const std::exception& e) {
      torch::cuda::synchronize(device.index());
      restore();
      throw Error("StepGraphs: recording the " + model.kind() + " model's decode step at span " +
                  std::to_string(span) + " failed: " + e.what());
    }
    torch::cuda::synchronize(device.index());
    ++recordings;
    return g;
  }
};

bool StepGraphs::available() { return torch::cuda::is_available(); }

StepGraphs::StepGraphs(TranslationModel& model, InferenceState& state) {
  if (!available()) throw Error("StepGraphs: CUDA graphs need a GPU (none is visible)");
  if (!model.steps_statically())
    throw Error("StepGraphs: model kind `" + model.kind() + "` does not step a static state");
  if (!state.position.defined() || !state.position.is_cuda())
    throw Error("StepGraphs: the state must live on a CUDA device (start() on the GPU first)");
  state.make_static();
  impl_ = std::make_unique<Impl>(model, state);
}

StepGraphs::~StepGraphs() = default;

int64_t StepGraphs::recordings() const { return impl_->recordings; }

torch::Tensor StepGraphs::step(const torch::Tensor& tokens) {
  Impl& m = *impl_;
  InferenceState& st = m.state;
  const int64_t b = st.batch_size();
  if (tokens.dim() != 1 || tokens.size(0) != b)
    throw Error("StepGraphs::step: tokens must be (B) with B = " + std::to_string(b));
  c10::cuda::CUDAGuard on_device(m.device);
  // Replaced tensors or another batch: the recordings no longer apply.
  std::vector<const void*> now = addresses(st);
  if (now != m.bound || !m.tokens.defined() || m.tokens.size(0) != b) {
    m.graphs.clear();
    m.tokens = torch::empty({b}, torch::TensorOptions().dtype(torch::kLong).device(m.device));
    m.bound = std::move(now);
  }
  const int64_t span = next_static_span(st);
  m.tokens.copy_(tokens, /*non_blocking=*/true);
  auto it = m.graphs.find(span);
  if (it == m.graphs.end()) it = m.graphs.emplace(span, m.record(span)).first;
  st.span = span;
  it->second.graph->replay();
  // What the replayed step did on the host side.
  for (LayerState& l : st.layers)
    if (l.self.k.defined()) l.self.length += 1;
  return it->second.logits;
}

#else  // a LibTorch without CUDA

struct StepGraphs::Impl {};

bool StepGraphs::available() { return false; }

StepGraphs::StepGraphs(TranslationModel&, InferenceState&) {
  throw Error("StepGraphs: CUDA graphs need a LibTorch with CUDA (this build's has none)");
}

StepGraphs::~StepGraphs() = default;

int64_t StepGraphs::recordings() const { return 0; }

torch::Tensor StepGraphs::step(const torch::Tensor&) {
  throw Error("StepGraphs: CUDA graphs need a LibTorch with CUDA (this build's has none)");
}

#endif

}  // namespace mambamt::models
