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
