#pragma once
// Weight initialisation shared by the layers (internal to models/).
#include <torch/torch.h>

namespace mambamt::models::detail {

// Normal(0, std) weights, zero bias.
inline void init_linear(torch::nn::Linear& l, double std) {
  torch::NoGradGuard no_grad;
  l->weight.normal_(0.0, std);
  if (l->bias.defined()) l->bias.zero_();
}

}  // namespace mambamt::models::detail
