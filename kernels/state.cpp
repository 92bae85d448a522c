#include "kernels/state.h"

#include "kernels/cpu/cpu.h"
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

torch::Tensor reorder_state(const torch::Tensor& state, const torch::Tensor& index, int64_t dim, int64_t used,
                            const torch::Tensor& out_buffer) {
  check_index("reorder_state", state, index);
  TORCH_CHECK(used < 0 || (dim >= 1 && dim < state.dim() && used <= state.size(dim)), "reorder_state: ", used,
              " entries used of dimension ", dim, " of a state of shape ", detail::shape_str(state));
  torch::Tensor idx = index.to(state.device(), torch::kLong);
  std::vector<int64_t> shape = state.sizes().vec();
  shape[0] = idx.size(0);
  const bool reuse = out_buffer.defined() && out_buffer.sizes() == torch::IntArrayRef(shape) &&
                     out_buffer.dtype() == state.dtype() && out_buffer.device() == state.device() &&
                     out_buffer.is_contiguous() && !out_buffer.is_same(state);
  if (!state.is_cpu() || !state.is_contiguous()) {
    if (!reuse) return state.index_select(0, idx);
    torch::Tensor out = out_buffer;
    torch::index_select_out(out, state, 0, idx);
    return out;
  }
  idx = idx.contiguous();
  const int64_t b = state.size(0), rows = idx.size(0);
  const int64_t* ip = idx.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r)
    TORCH_CHECK(ip[r] >= 0 && ip[r] < b, "reorder_state: index ", ip[r], " out of range for a batch of ", b);
  torch::Tensor out = reuse ? out_buffer : torch::empty(shape, state.options());
  if (state.numel() == 0 || rows == 0) return out;
  // Row blocks: the entries before `dim` index the blocks, `dim` and after are
  // one block (its first `used` entries of `dim` copied). Sizes, not strides:
  // a contiguous tensor's size-1 dimensions may have any stride.
  auto span = [&](int64_t from) {  // elements of dimensions from.. in a contiguous tensor
    int64_t n = 1;
    for (int64_t d = from; d < state.dim(); ++d) n *= state.size(d);
    return n;
  };
  const int64_t elem = static_cast<int64_t>(state.element_size());
  const int64_t row_bytes = span(1) * elem;
  int64_t blocks = 1, block_stride = row_bytes, block_bytes = row_bytes;
  if (used >= 0) {
    for (int64_t d = 1; d < dim; ++d) blocks *= state.size(d);
    block_stride = span(dim) * elem;
    block_bytes = used * span(dim + 1) * elem;
  }
  cpu::gather_rows(static_cast<const char*>(state.data_ptr()), static_cast<char*>(out.data_ptr()), ip, rows,
                   row_bytes, blocks, block_stride, block_bytes);
  return out;
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
