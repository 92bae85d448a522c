#pragma once
// y = x W^T (+ b) for the decode steps (internal to models/). On CPU without
// gradients it picks the call that streams W fastest: a matrix-vector product
// for one row, small_batch_linear for 2-256 rows, W x^T above. Measured with
// OpenBLAS on the development machine: torch::nn::functional::linear (gemm
// with a transposed W, which packs W on every call) streamed a 32000 x 352
// output projection at 1.8 GB/s, mv at 3.7 GB/s; a 1547 x 352 in_proj at 2.1
// GB/s against 4.3 GB/s for W x^T at batch 16 (and W x^T still packs W on
// every call: 3.9 GB/s for the output projection at batch 16, where
// small_batch_linear reads W once; models/detail/decode_cpu.h).
// small_batch_linear keeps a packed copy of W that it checks against W's
// version counter, which inference tensors do not have.
#include <torch/torch.h>

#include "models/detail/decode_cpu.h"

namespace mambamt::models::detail {

inline torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b = {}) {
  if (torch::GradMode::is_enabled() || !x.is_cpu() || x.dim() != 2 || x.scalar_type() != w.scalar_type())
    return torch::nn::functional::linear(x, w, b);
  torch::Tensor y;
  if (x.size(0) == 1)
    y = torch::mv(w, x[0]).unsqueeze(0);
  else if (x.size(0) <= 256 && x.scalar_type() == torch::kFloat && w.is_contiguous() && !w.is_inference() &&
           small_batch_linear_available())
    y = small_batch_linear(x, w);
  else
    y = torch::mm(w, x.t()).t().contiguous();
  return b.defined() ? y + b : y;
}

inline torch::Tensor linear(const torch::Tensor& x, const torch::nn::Linear& l) {
  return linear(x, l->weight, l->bias);
}

}  // namespace mambamt::models::detail
