#pragma once
// Decode states (SSD (B,H,P,N), selective scan (B,D,N), conv (B,D,W-1)) are
// batch-major tensors; beam search reorders their rows.
#include <torch/torch.h>

namespace mambamt::kernels {

// Rows of state picked by index (int64, on any device; values in [0, B)):
// returns state.index_select(0, index). index may be shorter or longer than B
// (hypotheses dropped or expanded). With `used` >= 0, only the first `used`
// entries of dimension `dim` (>= 1) are copied and the rest of the result is
// left uninitialised on the CPU (copied on other devices): the columns of a
// KV cache that are not filled yet, which nothing reads. On the CPU a
// contiguous state is copied row block by row block in parallel. The result
// goes to `out` where it is contiguous and of the result's shape, dtype and
// device (a buffer kept from an earlier call), else to a new tensor.
torch::Tensor reorder_state(const torch::Tensor& state, const torch::Tensor& index, int64_t dim = 1,
                            int64_t used = -1, const torch::Tensor& out = {});

// The same, in place: state's rows become state[index] (index.numel() == B).
// Safe when index repeats or permutes rows.
void reorder_state_(const torch::Tensor& state, const torch::Tensor& index);

}  // namespace mambamt::kernels
