#include "models/state.h"

#include "kernels/state.h"

namespace mambamt::models {
namespace {

torch::Tensor pick(const torch::Tensor& t, const torch::Tensor& index) {
  return t.defined() ? kernels::reorder_state(t, index) : t;
}

int64_t nbytes(const torch::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace

void InferenceState::reorder(const torch::Tensor& index, bool same_sources) {
  TORCH_CHECK(index.dim() == 1, "InferenceState::reorder: index must be 1-D");
  TORCH_CHECK(!same_sources || index.size(0) == batch_size(),
              "InferenceState::reorder: same_sources needs an index of the batch size");
  torch::NoGradGuard no_grad;
  torch::Tensor idx = index.to(position.device(), torch::kLong);
  for (LayerState& l : layers) {
    l.mamba.conv = pick(l.mamba.conv, idx);
    l.mamba.ssm = pick(l.mamba.ssm, idx);
    l.self.k = pick(l.self.k, idx);
    l.self.v = pick(l.self.v, idx);
    l.self.valid = pick(l.self.valid, idx);
    l.recurrent = pick(l.recurrent, idx);
    if (!same_sources) {
      l.cross.k = pick(l.cross.k, idx);
      l.cross.v = pick(l.cross.v, idx);
      l.cross.mask = pick(l.cross.mask, idx);
      l.cross.src_len = pick(l.cross.src_len, idx);
    }
  }
  position = pick(position, idx);
  src_len = pick(src_len, idx);
}

InferenceState InferenceState::cat(const std::vector<InferenceState>& parts) {
  TORCH_CHECK(!parts.empty(), "InferenceState::cat: no parts");
  torch::NoGradGuard no_grad;
  const InferenceState& first = parts.front();
  for (const InferenceState& p : parts)
    TORCH_CHECK(p.layers.size() == first.layers.size(), "InferenceState::cat: parts with different layer counts");
  // Field f of every part along the batch dimension (undefined if undefined
  // in the first); every part's must have the first's shape past the batch.
  auto join_named = [&](const std::string& name, auto field) {
    const torch::Tensor& f0 = field(first);
    if (!f0.defined()) return torch::Tensor();
    std::vector<torch::Tensor> ts;
    for (const InferenceState& p : parts) {
      const torch::Tensor& t = field(p);
      TORCH_CHECK(t.defined() && t.dim() == f0.dim() && t.sizes().slice(1) == f0.sizes().slice(1),
                  "InferenceState::cat: ", name, " of shape ", t.defined() ? t.sizes() : torch::IntArrayRef{},
                  " does not join the first part's ", f0.sizes(),
                  " (the parts need equal source lengths and cache capacities)");
      ts.push_back(t);
    }
    return torch::cat(ts, 0);
  };
  InferenceState out;
  out.layers.resize(first.layers.size());
  for (size_t i = 0; i < first.layers.size(); ++i) {
    const KvCache& c = first.layers[i].self;
    for (const InferenceState& p : parts) {
      const KvCache& o = p.layers[i].self;
      TORCH_CHECK(o.length == c.length && o.window == c.window && o.capacity() == c.capacity(),
                  "InferenceState::cat: layer ", i, " has KV caches of different lengths, windows or capacities");
    }
    LayerState& l = out.layers[i];
    const std::string at = "layer " + std::to_string(i) + " ";
    auto join = [&](const char* name, auto field) { return join_named(at + name, field); };
    l.mamba.conv = join("conv state", [i](const InferenceState& p) { return p.layers[i].mamba.conv; });
    l.mamba.ssm = join("SSM state", [i](const InferenceState& p) { return p.layers[i].mamba.ssm; });
    l.self.k = join("cached K", [i](const InferenceState& p) { return p.layers[i].self.k; });
    l.self.v = join("cached V", [i](const InferenceState& p) { return p.layers[i].self.v; });
    l.self.valid = join("cache mask", [i](const InferenceState& p) { return p.layers[i].self.valid; });
    l.self.length = c.length;
    l.self.window = c.window;
    l.cross.k = join("cross-attention K", [i](const InferenceState& p) { return p.layers[i].cross.k; });
    l.cross.v = join("cross-attention V", [i](const InferenceState& p) { return p.layers[i].cross.v; });
    l.cross.mask = join("source mask", [i](const InferenceState& p) { return p.layers[i].cross.mask; });
    l.cross.src_len = join("source lengths", [i](const InferenceState& p) { return p.layers[i].cross.src_len; });
    l.recurrent = join("recurrent state", [i](const InferenceState& p) { return p.layers[i].recurrent; });
  }
  out.position = join_named("positions", [](const InferenceState& p) { return p.position; });
  out.src_len = join_named("source lengths", [](const InferenceState& p) { return p.src_len; });
  return out;
}

StateBytes InferenceState::bytes() const {
  StateBytes b;
  for (const LayerState& l : layers) {
    b.mamba += nbytes(l.mamba.conv) + nbytes(l.mamba.ssm);
    b.recurrent += nbytes(l.recurrent);
    if (l.self.k.defined()) {
      const int64_t cap = l.self.capacity();
      const int64_t used = l.self.filled();
      b.kv_cache += (nbytes(l.self.k) + nbytes(l.self.v) + nbytes(l.self.valid)) / cap * used;
      b.allocated += nbytes(l.self.k) + nbytes(l.self.v) + nbytes(l.self.valid);
    }
    b.cross_kv += nbytes(l.cross.k) + nbytes(l.cross.v) + nbytes(l.cross.mask);
  }
  b.allocated += b.mamba + b.recurrent + b.cross_kv;
  return b;
}

}  // namespace mambamt::models
