#include "kernels/state.h"

#include "kernels/detail/checks.h"

namespace mambamt::kernels {

namespace {
void check_index(const char* op, const torch::Tensor& state, const torch::Tensor& index) {
  TORCH_CHECK(state.defined() && state.dim() >= 1, op, ": state must have a batch dimension");
  TORCH_CHECK(index.defined() && index.dim() == 1, op, ": index must be 1-D, got ",
              detail::shape_str(index));
  TORCH_CHECK(index.scalar_type() == torch::kLong || index.scalar_type() == torch::kInt, op,
              ": index must be int64 or int32, got ", index.scalar_type());
}
}  // namespace

torch::Tensor reorder_state(const torch::Tensor& state, const torch::Tensor& index) {
  check_index("reorder_state", state, index);
  return state.index_select(0, index.to(state.device(), torch::kLong));
}

void reorder_state_(const torch::Tensor& state, const torch::Tensor& index) {
  check_index("reorder_state_", state, index);
  TORCH_CHECK(index.size(0) == state.size(0), "reorder_state_: index has ", index.size(0),
              " entries for a state of batch ", state.size(0),
              " (use reorder_state to change the batch size)");
  torch::NoGradGuard no_grad;
  // index_select copies first, so repeated or permuted rows are read before written.
  state.copy_(state.index_select(0, index.to(state.device(), torch::kLong)));
}

}  // namespace mambamt::kernels
