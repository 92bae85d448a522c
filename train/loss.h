#pragma once
// Label-smoothed cross-entropy over the real target tokens.
//
// With smoothing eps and V classes the target distribution is
// (1 - eps) one_hot(y) + eps / V (PyTorch's CrossEntropyLoss convention), so a
// token's loss is
//   (1 - eps) * (-log p_y) + (eps / V) * sum_v (-log p_v).
// Padding positions (mask false) contribute nothing. The functions return
// sums; the caller divides by the target tokens of the whole global batch
// (all micro-batches on all ranks), so N ranks equal one rank with the same
// global batch.
#include <torch/torch.h>

namespace mambamt::train {

struct LossSums {
  torch::Tensor loss;  // () float32: label-smoothed loss summed over real tokens (differentiable)
  torch::Tensor nll;   // () float32: plain negative log-likelihood summed over real tokens (detached)
  int64_t tokens = 0;  // real target tokens
};

// logits (B,T,V) any float dtype (computed in float32), target (B,T) int64,
// mask (B,T) bool.
LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& mask,
                             double smoothing);

}  // namespace mambamt::train
