#pragma once
// Decode states (SSD (B,H,P,N), selective scan (B,D,N), conv (B,D,W-1)) are
// batch-major tensors; beam search reorders their rows.
#include <torch/torch.h>

namespace mambamt::kernels {

// Rows of state picked by index (int64, on any device; values in [0, B)):
// returns state.index_select(0, index). index may be shorter or longer than B
// (hypotheses dropped or expanded).
torch::Tensor reorder_state(const torch::Tensor& state, const torch::Tensor& index);

// The same, in place: state's rows become state[index] (index.numel() == B).
// Safe when index repeats or permutes rows.
void reorder_state_(const torch::Tensor& state, const torch::Tensor& index);

}  // namespace mambamt::kernels
