#pragma once
// How weights start (model.init). Two schemes:
//   standard  what PyTorch's nn.Transformer and fairseq do: Xavier-uniform
//             weight matrices, zero biases, embeddings N(0, d_model^-1/2)
//             looked up times sqrt(d_model) (unit scale at the input, and
//             logits of unit scale through a tied output matrix); Mamba blocks
//             as mamba-ssm starts them: projections U(+-1/sqrt(fan_in)), the
//             output projection divided by sqrt(residual branches of the stack)
//   normal    N(0, std) for every weight matrix and embedding, no embedding
//             scale (the scheme of runs before model.init existed)
// The standard scheme learns much faster at equal cost (docs/LEARNING.md).
#include <torch/torch.h>

#include <cmath>
#include <string>

namespace mambamt::models {

struct WeightInit {
  enum class Scheme { kStandard, kNormal };
  Scheme scheme = Scheme::kStandard;
  // Standard deviation of the normal scheme.
  double std = 0.02;

  static WeightInit standard() { return {}; }
  static WeightInit normal(double std) { return {Scheme::kNormal, std}; }
  // From model.init / model.init_std ("standard" or "normal").
  static WeightInit from_config(const std::string& scheme, double std);
  bool is_standard() const { return scheme == Scheme::kStandard; }
};

// A weight matrix (out, in) and its bias: Xavier-uniform (standard) or N(0,
// std) (normal); the bias zero.
void init_linear(torch::nn::Linear& l, const WeightInit& init);
// A Mamba projection: U(+-1/sqrt(fan_in)) times `scale` (standard, as mamba-ssm:
// nn.Linear's default, the output projection rescaled by depth), or N(0, std)
// (normal; `scale` unused there, as before).
void init_mamba_linear(torch::nn::Linear& l, const WeightInit& init, double scale = 1.0);
// An embedding table (V, D): N(0, D^-1/2) (standard) or N(0, std) (normal).
void init_embedding(torch::Tensor& table, const WeightInit& init);
// The factor an embedding lookup is multiplied by: sqrt(D) (standard), 1 (normal).
double embedding_scale(const WeightInit& init, int64_t d_model);

}  // namespace mambamt::models
