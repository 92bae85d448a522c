#include "models/state.h"

#include "kernels/state.h"

namespace mambamt::models {
namespace {

// Whether nothing but `t` itself refers to its memory (no other tensor, view
// or copied state).
bool sole_owner(const torch::Tensor& t) {
  return t.defined() && t.use_count() == 1 && t.storage().use_count() == 1;
}

// f(tensor) for every tensor field of a layer's state (defined or not), in a
// fixed order.
template <typename Layer, typename F>
void each_tensor(Layer& l, F&& f) {
  for (auto* t : {&l.mamba.conv, &l.mamba.ssm, &l.self.k, &l.self.v, &l.self.valid, &l.recurrent, &l.cross.k,
                  &l.cross.v, &l.cross.mask, &l.cross.src_len})
    f(*t);
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
  // Every tensor's rows picked by idx, written into the spare buffer at the
  // same place in the visiting order when it fits; the replaced tensor becomes
  // that place's spare (a tensor something else still holds is never written).
  std::vector<torch::Tensor> spare = std::move(spare_);
  spare_.clear();
  size_t slot = 0;
  // A static state of the same batch keeps its tensors (a CUDA graph reads
  // them where they are): the picked rows are copied back, the buffer kept.
  const bool in_place = is_static() && idx.size(0) == batch_size();
  auto pick = [&](torch::Tensor& t, int64_t dim = 1, int64_t used = -1) {
    const size_t i = slot++;
    if (spare_.size() <= i) spare_.resize(i + 1);
    if (!t.defined()) return;
    torch::Tensor buffer = i < spare.size() && sole_owner(spare[i]) ? spare[i] : torch::Tensor();
    torch::Tensor picked = kernels::reorder_state(t, idx, dim, used, buffer);
    if (in_place) {
      (used >= 0 ? t.narrow(dim, 0, used) : t).copy_(used >= 0 ? picked.narrow(dim, 0, used) : picked);
      spare_[i] = std::move(picked);
      return;
    }
    spare_[i] = std::move(t);
    t = std::move(picked);
  };
  for (LayerState& l : layers) {
    pick(l.mamba.conv);
    pick(l.mamba.ssm);
    // KV caches: only the filled columns; the others are written before they are read.
    const int64_t used = l.self.filled();
    pick(l.self.k, 2, used);
    pick(l.self.v, 2, used);
    pick(l.self.valid, 1, used);
    pick(l.recurrent);
    if (!same_sources) {
      pick(l.cross.k);
      pick(l.cross.v);
      pick(l.cross.mask);
      pick(l.cross.src_len);
    } else {
      slot += 4;  // the same slots whether or not the cross-attention K/V move
    }
  }
  pick(position);
  pick(src_len);
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

void InferenceState::make_static() {
  TORCH_CHECK(position.defined(), "InferenceState::make_static: the state is empty (start() or prefill() first)");
  int64_t length = -1;
  for (size_t i = 0; i < layers.size(); ++i) {
    const KvCache& c = layers[i].self;
    if (!c.k.defined()) continue;
    TORCH_CHECK(length < 0 || c.length == length, "InferenceState::make_static: layer ", i, "'s KV cache holds ",
                c.length, " columns, an earlier layer's ", length);
    length = c.length;
  }
  torch::NoGradGuard no_grad;
  // Steps and reorders of a static state write into its tensors: each gets
  // memory of its own (the cross-attention layers share the source mask, the
  // caller may hold the positions).
  auto own = [](torch::Tensor& t) {
    if (t.defined() && !sole_owner(t)) t = t.clone();
  };
  for (LayerState& l : layers) each_tensor(l, own);
  own(src_len);
  position = position.clone();
  column = torch::full({1}, std::max<int64_t>(length, 0), position.options().dtype(torch::kLong));
}

std::vector<torch::Tensor> InferenceState::tensors() const {
  std::vector<torch::Tensor> out;
  auto add = [&out](const torch::Tensor& t) {
    if (t.defined()) out.push_back(t);
  };
  for (const LayerState& l : layers) each_tensor(l, add);
  add(position);
  add(src_len);
  add(column);
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
