#include "models/init.h"

#include "core/error.h"

namespace mambamt::models {

WeightInit WeightInit::from_config(const std::string& scheme, double std) {
  if (scheme == "standard") return standard();
  if (scheme == "normal") return normal(std);
  throw Error("model.init = \"" + scheme + "\": unknown initialisation (standard, normal)");
}

void init_linear(torch::nn::Linear& l, const WeightInit& init) {
  torch::NoGradGuard no_grad;
  if (init.is_standard())
    torch::nn::init::xavier_uniform_(l->weight);
  else
    l->weight.normal_(0.0, init.std);
  if (l->bias.defined()) l->bias.zero_();
}

void init_mamba_linear(torch::nn::Linear& l, const WeightInit& init, double scale) {
  torch::NoGradGuard no_grad;
  if (init.is_standard()) {
    const double bound = scale / std::sqrt(static_cast<double>(l->weight.size(1)));
    l->weight.uniform_(-bound, bound);
  } else {
    l->weight.normal_(0.0, init.std);
  }
  if (l->bias.defined()) l->bias.zero_();
}

void init_embedding(torch::Tensor& table, const WeightInit& init) {
  torch::NoGradGuard no_grad;
  table.normal_(0.0, init.is_standard() ? 1.0 / std::sqrt(static_cast<double>(table.size(1))) : init.std);
}

double embedding_scale(const WeightInit& init, int64_t d_model) {
  return init.is_standard() ? std::sqrt(static_cast<double>(d_model)) : 1.0;
}

}  // namespace mambamt::models
