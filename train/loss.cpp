#include "train/loss.h"

namespace mambamt::train {

LossSums label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& target, const torch::Tensor& mask,
                             double smoothing) {
  TORCH_CHECK(logits.dim() == 3, "label_smoothed_loss: logits must be (B,T,V), got ", logits.sizes());
  TORCH_CHECK(target.sizes() == logits.sizes().slice(0, 2), "label_smoothed_loss: target ", target.sizes(),
              " does not match logits ", logits.sizes());
  TORCH_CHECK(mask.sizes() == target.sizes(), "label_smoothed_loss: mask ", mask.sizes(), " does not match target ",
              target.sizes());
  const int64_t vocab = logits.size(2);
  // Only the real positions: (N,V) with N = real tokens.
  torch::Tensor flat_mask = mask.reshape({-1});
  torch::Tensor idx = flat_mask.nonzero().squeeze(1);
  torch::Tensor lp = logits.reshape({-1, vocab}).index_select(0, idx).to(torch::kFloat32).log_softmax(-1);
  torch::Tensor y = target.reshape({-1}).index_select(0, idx);
  torch::Tensor nll = -lp.gather(1, y.unsqueeze(1)).squeeze(1);  // (N)
  LossSums out;
  out.tokens = idx.size(0);
  torch::Tensor nll_sum = nll.sum();
  if (smoothing > 0) {
    torch::Tensor smooth = -lp.sum(1);  // (N)
    out.loss = (1.0 - smoothing) * nll_sum + (smoothing / static_cast<double>(vocab)) * smooth.sum();
  } else {
    out.loss = nll_sum;
  }
  out.nll = nll_sum.detach();
  return out;
}

}  // namespace mambamt::train
